//! ONNX (opsets 10 to 21) importer: QDQ folding, NCHW -> NHWC, constant shape subgraphs folded.
//!
//! The pipeline: [`proto`] decodes the protobuf (untrusted bytes: prost reports malformed input
//! as errors), `model` checks and sorts the graph, then every node is mapped in order by `ops`
//! (with `qdq` folding quantize/dequantize pairs, `fold` evaluating constant shape arithmetic and
//! `layout` tracking NCHW views of NHWC tensors), and `passes` tidies the result.
//!
//! Conventions of the result: graph inputs and outputs keep the shapes, types and names the model
//! declares (an NCHW input gets one IR transpose after it; a float input or output gets an IR
//! Quantize / Dequantize at the boundary); IR tensor and op names come from the ONNX values and
//! nodes (a node without a name is named after its first output).

mod builder;
mod constant;
mod dispatch;
mod external;
mod float_fn;
mod float_ops;
pub(crate) mod fold;
pub(crate) mod island;
mod layout;
mod model;
mod ops;
mod opset;
mod ort_compat;
mod passes;
pub mod proto;
mod qdq;
pub(crate) mod qop;
mod quant_params;
#[cfg(test)]
mod tests;

use std::rc::Rc;

use prost::Message;

use builder::{Act, Builder, Val};
use model::{Model, ValueDecl, malformed};
use proto::data_type;

use crate::error::{Error, Result};
use crate::ir::{DType, Graph, OpKind, Requant};

/// Imports an ONNX model from its protobuf bytes.
///
/// ```
/// let err = npu_build::import::onnx::import(b"", "empty").unwrap_err();
/// assert!(err.to_string().contains("no graph"), "{err}");
/// ```
pub fn import(bytes: &[u8], name: &str) -> Result<Graph> {
    import_from(bytes, name, None)
}

/// Every node of the graph as `(node name, operator)` (domain-qualified outside the default
/// domain), in file order, without importing them (for listings of models that do not import).
pub fn operator_list(bytes: &[u8]) -> Result<Vec<(String, String)>> {
    let m = proto::ModelProto::decode(bytes)
        .map_err(|e| malformed(format!("not a readable ONNX protobuf: {e}")))?;
    let g = m.graph.ok_or_else(|| malformed("the model has no graph"))?;
    Ok(g.node
        .iter()
        .map(|n| {
            let op = if n.domain.is_empty() || n.domain == "ai.onnx" {
                n.op_type.clone()
            } else {
                format!("{}.{}", n.domain, n.op_type)
            };
            (n.name.clone(), op)
        })
        .collect())
}

/// Whether the importer knows ONNX operator `op` (the operator table, QOperator, float
/// islands and constant folding).
pub fn is_known(op: &str) -> bool {
    crate::operators::onnx_names()
        .chain(fold::FOLDABLE.iter().copied())
        .chain(qop::QOPERATOR.iter().copied())
        .chain(island::FLOAT_ISLAND.iter().copied())
        .any(|k| k == op)
}

/// The external data files an ONNX model names (resolved against `dir`; none for an unreadable
/// model or invalid locations, which the import reports).
pub fn external_files(bytes: &[u8], dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    proto::ModelProto::decode(bytes)
        .ok()
        .and_then(|m| m.graph)
        .map(|g| external::locations(&g, dir))
        .unwrap_or_default()
}

/// `producer_name` of models made by onnxruntime's quantizer (`quantize_static` and friends).
const ORT_QUANTIZER: &str = "onnx.quantize";

/// Imports an ONNX model from its protobuf bytes; initializers stored as external data are read
/// from their files in `dir` (the model's directory; without it they are an error).
pub fn import_from(bytes: &[u8], name: &str, dir: Option<&std::path::Path>) -> Result<Graph> {
    let mut m = proto::ModelProto::decode(bytes)
        .map_err(|e| malformed(format!("not a readable ONNX protobuf: {e}")))?;
    if let Some(g) = m.graph.as_mut() {
        external::resolve(g, dir)?;
    }
    // onnxruntime's quantizer names itself; its models requantize as onnxruntime does, with
    // one rounding (tf2onnx conversions of TFLite models keep TFLite's two).
    let requant = if m.producer_name == ORT_QUANTIZER {
        Requant::Single
    } else {
        Requant::Tflite
    };
    let mut model = Model::from_proto(m)?;
    if requant == Requant::Single {
        // What onnxruntime's default session runs (its double-QDQ-pair merge).
        ort_compat::merge_double_qdq(&mut model);
    }
    let mut b = Builder::new(name, model.opset);
    b.g.requant = requant;
    for decl in &model.inputs {
        graph_input(&mut b, decl)?;
    }
    for (name, c) in model.initializers {
        b.bind(&name, Val::Const(Rc::new(c)));
    }
    let outputs: std::collections::HashSet<String> =
        model.outputs.iter().map(|d| d.name.clone()).collect();
    let mut done = vec![false; model.nodes.len()];
    for (k, n) in model.nodes.iter().enumerate() {
        if done[k] || b.float_function(&model.nodes, k, &mut done, &outputs)? {
            continue;
        }
        if let Err(e) = b.node(n) {
            return Err(match e {
                Error::UnsupportedOp {
                    node,
                    op,
                    supported,
                } => all_unsupported(&model.nodes[k + 1..], (&op, &node), supported),
                other => other,
            });
        }
    }
    for decl in &model.outputs {
        graph_output(&mut b, decl)?;
    }
    passes::finish(&mut b);
    Ok(b.g)
}

/// The error for an unsupported node `first` and every later node whose operator is unknown
/// to the importer (in none of its lists), counted per operator.
fn all_unsupported(rest: &[model::Node], first: (&str, &str), supported: String) -> Error {
    let mut set = crate::error::UnsupportedSet::default();
    set.add(first.0, first.1);
    let known = is_known;
    for n in rest {
        let op = if n.domain.is_empty() {
            n.op_type.clone()
        } else {
            format!("{}.{}", n.domain, n.op_type)
        };
        if op == first.0 || (n.domain.is_empty() && !known(&op)) {
            set.add(&op, &n.name);
        }
    }
    set.error(supported).unwrap_or(Error::UnsupportedOp {
        node: first.1.to_string(),
        op: first.0.to_string(),
        supported: String::new(),
    })
}

/// IR type of a graph input/output element type.
fn io_dtype(decl: &ValueDecl) -> Result<DType> {
    match decl.elem_type {
        data_type::INT8 => Ok(DType::I8),
        data_type::UINT8 => Ok(DType::U8),
        data_type::INT16 => Ok(DType::I16),
        data_type::FLOAT => Ok(DType::F32),
        other => Err(Error::InvalidTensor {
            tensor: decl.name.clone(),
            detail: format!(
                "graph input/output type {} is not supported (INT8, UINT8, INT16 or FLOAT)",
                data_type::name(other)
            ),
        }),
    }
}

fn graph_input(b: &mut Builder, decl: &ValueDecl) -> Result<()> {
    let dtype = io_dtype(decl)?;
    let bad = |detail: String| Error::InvalidTensor {
        tensor: decl.name.clone(),
        detail,
    };
    let dims = decl
        .dims
        .as_ref()
        .ok_or_else(|| bad("the graph input has no shape".into()))?;
    let mut shape = Vec::with_capacity(dims.len());
    for (i, d) in dims.iter().enumerate() {
        match d {
            Some(0) => return Err(bad(format!("dimension {i} is 0"))),
            Some(v) => shape.push(*v),
            // A symbolic batch dimension runs with batch 1.
            None if i == 0 => shape.push(1),
            None => {
                return Err(bad(format!(
                    "dimension {i} is symbolic; only the batch dimension (0) may be"
                )));
            }
        }
    }
    let rank = shape.len();
    let id = b.add_tensor(&decl.name, shape, dtype, None, None);
    b.g.inputs.push(id);
    let act = Act {
        id,
        perm: layout::identity(rank),
    };
    let v = if dtype == DType::F32 {
        Val::Float(act)
    } else {
        Val::Int(act)
    };
    b.bind(&decl.name, v);
    Ok(())
}

fn graph_output(b: &mut Builder, decl: &ValueDecl) -> Result<()> {
    let bad = |detail: String| Error::InvalidTensor {
        tensor: decl.name.clone(),
        detail,
    };
    let v = b
        .vals
        .get(&decl.name)
        .cloned()
        .ok_or_else(|| bad("graph output has no value".into()))?;
    let act = match v {
        Val::Int(a) | Val::Float(a) => a,
        Val::Deq(a) => {
            // A float output dequantizes at the boundary (after any layout change).
            let a = b.relayout(&a, &layout::identity(a.perm.len()))?;
            let id = b.dequantized(a.id, &decl.name)?;
            Act { id, perm: a.perm }
        }
        Val::Pending(p) => {
            let id = b.finalize_float(&p, &decl.name)?;
            Act {
                id,
                perm: p.perm.clone(),
            }
        }
        Val::Const(_) | Val::DeqConst(_) => {
            return Err(bad("graph output is a constant; nothing to compute".into()));
        }
    };
    let mut id = b.relayout(&act, &layout::identity(act.perm.len()))?.id;
    if b.g.inputs.contains(&id) || b.g.outputs.contains(&id) {
        // The same tensor cannot be an input and an output (or two outputs) by two names: copy.
        let t = b.tensor(id).clone();
        let copy = b.add_tensor(&decl.name, t.shape.clone(), t.dtype, None, None);
        b.push_op(&decl.name, OpKind::Reshape, vec![id], vec![copy]);
        if builder::is_quantized_type(t.dtype) {
            let _ = b.classes.union(id, copy);
        }
        id = copy;
    }
    let t = b.tensor(id);
    // Index outputs (ArgMax / ArgMin, optionally Cast to int32) are integers without
    // quantization.
    let want = match decl.elem_type {
        data_type::INT32 => DType::I32,
        data_type::INT64 => DType::I64,
        _ => io_dtype(decl)?,
    };
    if t.dtype != want {
        return Err(bad(format!(
            "declared as {want} but the graph computes {}",
            t.dtype
        )));
    }
    if let Some(dims) = &decl.dims {
        let fits = dims.len() == t.shape.len()
            && dims
                .iter()
                .zip(&t.shape)
                .all(|(d, &s)| d.is_none_or(|d| d == s));
        if !fits {
            return Err(bad(format!(
                "declared shape {:?} differs from the computed shape {:?}",
                dims, t.shape
            )));
        }
    }
    b.rename_tensor(id, &decl.name);
    b.g.outputs.push(id);
    Ok(())
}
