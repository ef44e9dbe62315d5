//! Shapes of tensors the converter left dynamic.
//!
//! A TFLite tensor whose `shape_signature` holds a -1 has a placeholder `shape` (often all
//! 1s). TensorFlow's `Tensordot` (Keras `Dense` on a 3-D or 4-D tensor: transformers,
//! ConvNeXt) computes its reshapes from `Shape` at run time, so its tensors come out this way
//! even in a batch-1 model. Once SHAPE and the arithmetic on it are folded (`Importer::fold`),
//! every such shape follows from the operator and its inputs; this module computes it before
//! the operator is mapped, in TFLite's execution order, so each operator sees its inputs'
//! real shapes. Operators without a rule here keep the stored shape (a dynamic batch is stored
//! as 1, which is right for us). Rules follow TFLite's kernels' `Prepare` (`reshape.cc`, `fully_connected.cc`,
//! `batch_matmul.cc`, the broadcasting binary kernels, `reduce.cc`).

use super::generated::tflite::BuiltinOperator as B;
use super::ops::RawOp;
use super::ops::options;
use super::{Importer, ctx};
use crate::error::Result;
use crate::reference::util::broadcast_shape;

/// Whether TFLite tensor `index` has a dynamic dimension in its shape signature.
fn is_dynamic(im: &Importer, index: usize) -> Result<bool> {
    let what = format!("tensors[{index}]");
    let t = im.tensor_table(index)?;
    let sig = ctx(t.shape_signature(), &what)?;
    Ok(sig.is_some_and(|s| s.iter().any(|d| d == -1)))
}

/// Gives the dynamic outputs of `op` their shapes (a no-op for operators without any).
pub(super) fn infer(im: &mut Importer, op: &RawOp) -> Result<()> {
    let [out] = op.outputs[..] else {
        return Ok(());
    };
    let Ok(out) = usize::try_from(out) else {
        return Ok(());
    };
    if out >= im.tensors.len() || !is_dynamic(im, out)? {
        return Ok(());
    }
    let mut in_shapes = Vec::new();
    let mut in_ids = Vec::new();
    for &i in &op.inputs {
        match usize::try_from(i) {
            Ok(i) => {
                let id = im.tensor(i, false)?;
                in_shapes.push(im.graph.tensors[id].shape.clone());
                in_ids.push(Some(id));
            }
            Err(_) => {
                in_shapes.push(Vec::new());
                in_ids.push(None);
            }
        }
    }
    let what = op.what();
    let x = in_shapes.first().cloned().unwrap_or_default();
    let shape: Option<Vec<usize>> = match op.code {
        B::Reshape => {
            // The new shape as a constant (folded from SHAPE arithmetic if need be).
            let spec = in_ids
                .get(1)
                .copied()
                .flatten()
                .and_then(|id| {
                    let t = &im.graph.tensors[id];
                    t.data_i32()
                        .map(|v| v.into_iter().map(i64::from).collect::<Vec<_>>())
                        .or_else(|| t.data_i64())
                })
                .ok_or_else(|| {
                    op.invalid("the output's shape is dynamic and the new shape is not a constant")
                })?;
            let total: usize = x.iter().product();
            let known: usize = spec
                .iter()
                .filter(|&&d| d >= 0)
                .map(|&d| d as usize)
                .product();
            let free = spec.iter().filter(|&&d| d == -1).count();
            if free > 1 || spec.iter().any(|&d| d < -1) || (free == 1 && known == 0) {
                return Err(op.invalid(format!("new shape {spec:?} is not valid")));
            }
            Some(
                spec.iter()
                    .map(|&d| if d == -1 { total / known } else { d as usize })
                    .collect(),
            )
        }
        B::FullyConnected => {
            let keep = options!(op, FullyConnectedOptions)
                .map(|o| ctx(o.keep_num_dims(), &what))
                .transpose()?
                .unwrap_or(false);
            match in_shapes.get(1).map(Vec::as_slice) {
                Some(&[o, i]) if i > 0 => {
                    if keep {
                        let mut s = x.clone();
                        s.pop();
                        s.push(o);
                        Some(s)
                    } else {
                        Some(vec![x.iter().product::<usize>() / i, o])
                    }
                }
                _ => None,
            }
        }
        B::BatchMatmul => {
            let (adj_x, adj_y) = match options!(op, BatchMatMulOptions) {
                Some(o) => (ctx(o.adj_x(), &what)?, ctx(o.adj_y(), &what)?),
                None => (false, false),
            };
            let y = in_shapes.get(1).cloned().unwrap_or_default();
            if x.len() < 2 || y.len() < 2 {
                None
            } else {
                let (xb, xm) = x.split_at(x.len() - 2);
                let (yb, yn) = y.split_at(y.len() - 2);
                let m = if adj_x { xm[1] } else { xm[0] };
                let n = if adj_y { yn[0] } else { yn[1] };
                broadcast_shape(xb, yb).map(|mut s| {
                    s.extend([m, n]);
                    s
                })
            }
        }
        B::Add | B::Sub | B::Mul | B::Maximum | B::Minimum | B::SquaredDifference | B::Prelu => {
            broadcast_shape(&x, in_shapes.get(1).map_or(&[][..], Vec::as_slice))
        }
        B::Mean | B::Sum | B::ReduceMax | B::ReduceMin => {
            let keep = options!(op, ReducerOptions)
                .map(|o| ctx(o.keep_dims(), &what))
                .transpose()?
                .unwrap_or(false);
            let axes = in_ids.get(1).copied().flatten().and_then(|id| {
                im.graph.tensors[id]
                    .data_i32()
                    .map(|v| v.into_iter().map(i64::from).collect::<Vec<_>>())
            });
            axes.map(|axes| {
                let rank = x.len() as i64;
                let reduced = |d: usize| {
                    axes.iter()
                        .any(|&a| (if a < 0 { a + rank } else { a }) == d as i64)
                };
                (0..x.len())
                    .filter_map(|d| match (reduced(d), keep) {
                        (false, _) => Some(x[d]),
                        (true, true) => Some(1),
                        (true, false) => None,
                    })
                    .collect()
            })
        }
        // Element-wise operators of one input: the input's shape.
        B::Quantize
        | B::Dequantize
        | B::Relu
        | B::Relu6
        | B::ReluN1To1
        | B::Logistic
        | B::Tanh
        | B::Gelu
        | B::HardSwish
        | B::LeakyRelu
        | B::Elu
        | B::Exp
        | B::Log
        | B::Rsqrt
        | B::Sqrt
        | B::Abs
        | B::Neg
        | B::Softmax => Some(x.clone()),
        _ => None,
    };
    // Other operators keep the stored shape: usually only the batch is dynamic there, stored
    // as 1; a wrong one fails the operator's own shape checks with its shapes named.
    let Some(shape) = shape else {
        return Ok(());
    };
    let id = im.tensor(out, false)?;
    im.graph.tensors[id].shape = shape;
    Ok(())
}
