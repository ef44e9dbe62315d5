//! Fusions of activation functions both importers share.
//!
//! Swish, `x * sigmoid(x)` (EfficientNet, YOLO heads), arrives as a LOGISTIC feeding a MUL by
//! its own input (TFLite, and ONNX QDQ with the sigmoid quantized between them). Both are
//! functions of the one 8-bit tensor `x`, so the pair is one [`ActFn::Swish`] table that keeps
//! the sigmoid's rounding to its quantization and the MUL's rounding: bit-exact with running the
//! two operators, in one NPU LUT operation instead of two operations and an intermediate tensor.

use crate::ir::{ActFn, Activation, DType, Graph, OpKind, TensorId};

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

/// Replaces every `Quantize(f_n(...f_1(Dequantize(x))))` chain of float element-wise
/// functions ([`OpKind::FloatUnary`], or NEG, ABS and clamps on float tensors) from an 8-bit `x` to an 8-bit output of the same type
/// (each intermediate read by nothing else and not a graph output) with one
/// [`ActFn::Table`] operator: TFLite converters leave such islands around operators they do
/// not quantize (Keras LayerNormalization's NEG). The table is the reference interpreter's
/// output of the chain for each of the 256 inputs, so the result is unchanged, and the NPU
/// runs it as one lookup-table operation instead of three CPU steps.
pub fn fuse_float_islands(g: &mut Graph) {
    let mut remove = Vec::new();
    for qi in 0..g.ops.len() {
        if g.ops[qi].kind != OpKind::Quantize {
            continue;
        }
        let (&[f_out], &[y]) = (g.ops[qi].inputs.as_slice(), g.ops[qi].outputs.as_slice()) else {
            continue;
        };
        // Walk back through private float functions to a Dequantize.
        let private = |g: &Graph, t: TensorId, user: usize| {
            g.consumers(t) == [user] && !g.outputs.contains(&t)
        };
        let mut chain = Vec::new();
        let mut t = f_out;
        let mut user = qi;
        let dq = loop {
            let Some(p) = g.producer(t) else { break None };
            if !private(g, t, user) || g.tensors[t].dtype != DType::F32 {
                break None;
            }
            match g.ops[p].kind {
                // Element-wise functions of one float tensor (NEG and ABS keep their integer
                // kinds when the converter leaves them in float).
                OpKind::FloatUnary(_) | OpKind::Neg | OpKind::Abs | OpKind::Activation(_)
                    if g.ops[p].inputs.len() == 1
                        && g.tensors[g.ops[p].inputs[0]].dtype == DType::F32
                        && g.tensors[g.ops[p].inputs[0]].shape == g.tensors[t].shape =>
                {
                    chain.push(p);
                    t = g.ops[p].inputs[0];
                    user = p;
                }
                OpKind::Dequantize if g.ops[p].inputs.len() == 1 => break Some(p),
                _ => break None,
            }
        };
        let Some(dq) = dq else { continue };
        if chain.is_empty() {
            continue;
        }
        let x = g.ops[dq].inputs[0];
        let (xt, yt) = (&g.tensors[x], &g.tensors[y]);
        if !matches!(xt.dtype, DType::I8 | DType::U8)
            || xt.dtype != yt.dtype
            || xt.shape != yt.shape
            || xt.quant.as_ref().is_none_or(|q| q.is_per_channel())
            || yt.quant.as_ref().is_none_or(|q| q.is_per_channel())
        {
            continue;
        }
        let Some(table) = island_table(g, dq, &chain, qi) else {
            continue;
        };
        let op = &mut g.ops[qi];
        op.kind = OpKind::ActFn(ActFn::Table(table));
        op.inputs = vec![x];
        remove.push(dq);
        remove.extend(chain);
    }
    remove.sort_unstable();
    for p in remove.into_iter().rev() {
        g.ops.remove(p);
    }
}

/// The chain `dq`, `chain` (last first), `q` run by the reference interpreter on the 256
/// values of its 8-bit input.
fn island_table(g: &Graph, dq: usize, chain: &[usize], q: usize) -> Option<[u8; 256]> {
    use crate::ir::{Op, Tensor};
    let mut mini = Graph {
        name: "island".into(),
        ..Graph::default()
    };
    let mut map = std::collections::HashMap::new();
    let mut tensor = |mini: &mut Graph, t: TensorId| -> TensorId {
        *map.entry(t).or_insert_with(|| {
            let src = &g.tensors[t];
            mini.add_tensor(Tensor {
                name: src.name.clone(),
                shape: vec![256],
                dtype: src.dtype,
                quant: src.quant.clone(),
                data: None,
            })
        })
    };
    let order: Vec<usize> = std::iter::once(dq)
        .chain(chain.iter().rev().copied())
        .chain(std::iter::once(q))
        .collect();
    for &i in &order {
        let op = &g.ops[i];
        let inputs = op.inputs.iter().map(|&t| tensor(&mut mini, t)).collect();
        let outputs = op.outputs.iter().map(|&t| tensor(&mut mini, t)).collect();
        mini.ops.push(Op {
            name: op.name.clone(),
            kind: op.kind.clone(),
            inputs,
            outputs,
        });
    }
    let x = tensor(&mut mini, g.ops[dq].inputs[0]);
    let y = tensor(&mut mini, g.ops[q].outputs[0]);
    mini.inputs.push(x);
    mini.outputs.push(y);
    crate::reference::act_fn::tabulate(&mini)
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

    /// The converter's float NEG island (DEQUANTIZE, NEG, QUANTIZE) becomes one table whose
    /// entries are the three operators' results (`op_neg`'s outputs against TFLite's are
    /// checked in `tests/reference_tflite.rs` and on every target in `backend_fixtures`).
    #[test]
    fn float_neg_island_becomes_one_table() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/op_neg/op_neg.tflite");
        let g = crate::import::load(&path).expect("import");
        assert_eq!(g.ops.len(), 1, "{:?}", g.ops);
        let OpKind::ActFn(ActFn::Table(t)) = g.ops[0].kind else {
            panic!("{:?}", g.ops[0].kind);
        };
        // Entry i is the output for input i - 128: dequantize, negate, quantize.
        let (si, zi) = (
            g.tensors[g.inputs[0]].quant.as_ref().unwrap().scale(),
            g.tensors[g.inputs[0]].quant.as_ref().unwrap().zero_point(),
        );
        let (so, zo) = (
            g.tensors[g.outputs[0]].quant.as_ref().unwrap().scale(),
            g.tensors[g.outputs[0]].quant.as_ref().unwrap().zero_point(),
        );
        for (i, &e) in t.iter().enumerate() {
            let x = i as i32 - 128;
            let f = -(si * (x - zi) as f32);
            let q = ((f / so).round() as i32 + zo).clamp(-128, 127);
            assert!(
                (i32::from(e as i8) - q).abs() <= 1,
                "entry {i}: {} vs {q}",
                e as i8
            );
        }
    }
}
