//! Fusions of activation functions both importers share.
//!
//! Swish, `x * sigmoid(x)` (EfficientNet, YOLO heads), arrives as a LOGISTIC feeding a MUL by
//! its own input (TFLite, and ONNX QDQ with the sigmoid quantized between them). Both are
//! functions of the one 8-bit tensor `x`, so the pair is one [`ActFn::Swish`] table that keeps
//! the sigmoid's rounding to its quantization and the MUL's rounding: bit-exact with running the
//! two operators, in one NPU LUT operation instead of two operations and an intermediate tensor.

use crate::ir::{ActFn, Activation, DType, Graph, OpKind};

/// Replaces every `Mul(x, Logistic(x))` (either operand order, no fused activation, same shapes,
/// the sigmoid read by nothing else) with one [`ActFn::Swish`] operator.
pub fn fuse_swish(g: &mut Graph) {
    let mut remove = Vec::new();
    for m in 0..g.ops.len() {
        if g.ops[m].kind
            != (OpKind::Mul {
                activation: Activation::None,
            })
        {
            continue;
        }
        let (&[a, b], &[y]) = (g.ops[m].inputs.as_slice(), g.ops[m].outputs.as_slice()) else {
            continue;
        };
        for (x, s) in [(a, b), (b, a)] {
            let Some(p) = g.producer(s) else { continue };
            let sig = &g.ops[p];
            if sig.kind != OpKind::ActFn(ActFn::Logistic) || sig.inputs != [x] {
                continue;
            }
            let (xt, st, yt) = (&g.tensors[x], &g.tensors[s], &g.tensors[y]);
            let eight_bit = matches!(xt.dtype, DType::I8 | DType::U8);
            let same = xt.dtype == st.dtype
                && st.dtype == yt.dtype
                && xt.shape == st.shape
                && st.shape == yt.shape;
            let private = g.consumers(s) == [m] && !g.outputs.contains(&s);
            let Some(q) = st.quant.as_ref().filter(|q| !q.is_per_channel()) else {
                continue;
            };
            if !(eight_bit && same && private) {
                continue;
            }
            let sigmoid = (q.scale(), q.zero_point());
            let op = &mut g.ops[m];
            op.kind = OpKind::ActFn(ActFn::Swish { sigmoid });
            op.inputs = vec![x];
            remove.push(p);
            break;
        }
    }
    remove.sort_unstable();
    for p in remove.into_iter().rev() {
        g.ops.remove(p);
    }
}

#[cfg(test)]
mod tests {
    use crate::ir::{ActFn, OpKind};

    /// TFLite's converter writes `x * sigmoid(x)` as LOGISTIC + MUL; the import makes it one
    /// Swish (its outputs are checked against TFLite's in `tests/reference_tflite.rs`).
    #[test]
    fn tflite_logistic_mul_becomes_one_swish() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/tests/data/tflite_extra/act_swish/act_swish.tflite");
        let g = crate::import::load(&path).expect("import");
        assert_eq!(g.ops.len(), 1, "{:?}", g.ops);
        assert!(matches!(g.ops[0].kind, OpKind::ActFn(ActFn::Swish { .. })));
    }
}
