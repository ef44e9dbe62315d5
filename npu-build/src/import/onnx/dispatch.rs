//! Which mapping a node gets, in order: casts, legacy forms, float operators, constant folding,
//! QOperator nodes, integer pass-through, the operator table (`ops`), a float retry. Its own
//! module, above `fold` and `ops`: folding reuses the operators' shape rules, so the operator
//! table cannot also be the module that calls the folding.

use super::builder::Builder;
use super::fold;
use super::model::Node;
use crate::error::{Error, Result};

/// The supported operator list for error messages.
pub(crate) fn supported_list() -> String {
    let mut all: Vec<&str> = crate::operators::onnx_names()
        .chain(fold::FOLDABLE.iter().copied())
        .chain(super::qop::QOPERATOR.iter().copied())
        .chain(super::island::FLOAT_ISLAND.iter().copied())
        .collect();
    all.sort_unstable();
    all.dedup();
    let mut s = all.join(", ");
    s.push_str(" (constant shape arithmetic only: ");
    s.push_str(&fold::FOLDABLE.join(", "));
    s.push(')');
    s
}

impl Builder {
    /// Maps one node (in topological order).
    pub(crate) fn node(&mut self, n: &Node) -> Result<()> {
        let microsoft = n.domain == "com.microsoft";
        if !(n.domain.is_empty() || n.domain == "ai.onnx" || microsoft) {
            return Err(self.unsupported(n));
        }
        if n.op_type == "Cast" && self.cast_index(n)? {
            return Ok(());
        }
        if let Some(up) = self.upgrade_legacy(n)? {
            return self.node(&up);
        }
        // Float islands: operators without an integer mapping, or reading a float tensor.
        if self.float_op(n)? {
            return Ok(());
        }
        if fold::FOLDABLE.contains(&n.op_type.as_str()) && self.try_fold(n)? {
            return Ok(());
        }
        // QOperator nodes become QDQ nodes; integer tensors read directly get their view.
        if self.qoperator(n)? {
            return Ok(());
        }
        if microsoft {
            return Err(self.unsupported(n));
        }
        if self.int_passthrough(n)? {
            return Ok(());
        }
        let (ops, tensors) = (self.g.ops.len(), self.g.tensors.len());
        let mapped = self.integer_node(n);
        // An integer mapping that failed before emitting anything may still run in float.
        if mapped.is_err()
            && (ops, tensors) == (self.g.ops.len(), self.g.tensors.len())
            && self.float_retry(n)?
        {
            return Ok(());
        }
        mapped
    }

    pub(crate) fn unsupported(&self, n: &Node) -> Error {
        let op = if n.domain.is_empty() {
            n.op_type.clone()
        } else {
            format!("{}.{}", n.domain, n.op_type)
        };
        Error::UnsupportedOp {
            node: n.name.clone(),
            op,
            supported: supported_list(),
        }
    }
}
