//! `Softmax` (opset 13+: over one axis; older opsets where that is the same), which the IR computes over the last axis.

use std::rc::Rc;

use super::super::builder::{Builder, Val};
use super::super::layout;
use super::super::model::Node;
use crate::error::Result;
use crate::ir::OpKind;

impl Builder {
    /// `Softmax`; may also run in float when no `QuantizeLinear` follows it.
    pub(crate) fn softmax(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(1)?;
        let x = match self.input(n, 0)? {
            Val::Deq(a) => a,
            other => return Err(self.not_quantized(n, 0, &other)),
        };
        let rank = x.perm.len();
        // Before opset 13 the default axis is 1 and the input is flattened to 2-D at it.
        let legacy = self.opset < 13;
        let axis = n.attr_i_or("axis", if legacy { 1 } else { -1 })?;
        let onnx_shape = self.act_shape(&x);
        let axis = super::super::qop::softmax_axis(n, &onnx_shape, axis, legacy)?;
        let x = if x.perm.get(axis) == Some(&(rank - 1)) {
            x
        } else if axis + 1 == rank {
            self.relayout(&x, &layout::identity(rank))?
        } else {
            return Err(n.err(format!(
                "softmax over axis {axis} of a rank-{rank} tensor is not supported (only the last axis)"
            )));
        };
        let shape = self.tensor(x.id).shape.clone();
        let mut p = self.pending(n, OpKind::Softmax { beta: 1.0 }, vec![x.id], shape, x.perm);
        p.float_ok = true;
        self.bind_output(n, Val::Pending(Rc::new(p)))
    }
}
