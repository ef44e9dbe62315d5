//! Lowering of BatchMatMul (two int8 activations) the way Vela 5.2 does it (docs/matmul.md):
//!
//! 1. the right operand transposed to `B^T [b, N, K]` by one strided 1x1 copy per batch (not
//!    needed when it is given adjoint); a left operand given adjoint is transposed the same way;
//! 2. per output row `m`: an elementwise MUL of `B^T` (IFM, zero point `zb`) by row `m` of `A`
//!    (IFM2 `[b, 1, K]`, zero point `za`, broadcast along W) into int32 products
//!    `(b - zb)(a - za)`, then a REDUCE_SUM pooling that sums the K channels and applies the
//!    output scale `(M, 31 - shift)` with DBL rounding, i.e. TFLite's
//!    `MultiplyByQuantizedMultiplier`, plus `zo`, into row `m` of the output (a strided view).
//!
//! Batch axes must match (no broadcasting of one operand's batch); the lowering refuses
//! otherwise and the CPU kernel runs the operator.

use npu_rt::ethos_u::regs::fields::{ElementwiseMode, PoolingMode};

use super::Lowering;
use super::fmap::{reshape, scratch_fm};
use super::op_builders::copy_op;
use super::op_builders::pool_op;
use crate::error::Result;
use crate::ethos_u::npu_op::{
    Activation as NpuActivation, ElemType, FeatureMap, InputScaling, NpuOp, NpuOpKind, Operand2,
    Scale,
};
use crate::ir::{Op, OpKind, TensorId};
use crate::reference::matmul::BatchMatMul;

/// Most output rows lowered (two operations each).
const MAX_ROWS: usize = 1024;

pub(super) fn lower(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    let OpKind::BatchMatMul { adj_a, adj_b } = op.kind else {
        return Err(Lowering::invalid(op, "internal: not a BatchMatMul"));
    };
    let mm = BatchMatMul::new(cx.graph, op, adj_a, adj_b)?;
    if mm.float {
        return Err(cx.limit(op, "the NPU has no floating point"));
    }
    let (a, b, y) = (op.inputs[0], op.inputs[1], op.outputs[0]);
    let batch: usize = mm.batch.iter().product();
    let g = cx.graph;
    let count = |t: TensorId| g.tensors[t].shape.iter().rev().skip(2).product::<usize>();
    if count(a) != batch || count(b) != batch {
        return Err(cx.limit(
            op,
            format!(
                "operands {:?} and {:?} broadcast their batch axes (the NPU form needs equal ones)",
                g.tensors[a].shape, g.tensors[b].shape
            ),
        ));
    }
    let (m, k, n) = (mm.m, mm.k, mm.n);
    if m > MAX_ROWS {
        return Err(cx.limit(
            op,
            format!("{m} output rows (the NPU form uses two operations per row, at most {MAX_ROWS} rows)"),
        ));
    }
    // Output scale: the sum is at most K * 255 * 255 in magnitude; a left shift (factor >= 1)
    // must not saturate where TFLite's `x << shift` would not.
    let r = mm.rescale;
    let max_acc = (k as i64).saturating_mul(255 * 255);
    if r.shift > 0 && max_acc.saturating_mul(1 << r.shift) >= i64::from(i32::MAX) {
        return Err(cx.limit(
            op,
            format!("output rescale factor needs a left shift of {}", r.shift),
        ));
    }
    let shift = u8::try_from(31 - r.shift)
        .ok()
        .filter(|&s| s <= 63)
        .ok_or_else(|| cx.limit(op, format!("output rescale shift {} out of range", r.shift)))?;
    let ofm_scale = Scale {
        scale: r.multiplier as u32,
        shift,
    };

    let not_dense = |cx: &Lowering<'_>| {
        cx.limit(
            op,
            "an operand or the output is not a dense NHWC tensor (slice or brick format)",
        )
    };
    let a_fm = cx.fm(op, a)?;
    let b_fm = cx.fm(op, b)?;
    let y_fm = cx.fm(op, y)?;
    let name = op.name.clone();
    // A as [b, M, K], B^T as [b, N, K] (dense, zero points kept).
    let a3 = if adj_a {
        let stored = reshape(&a_fm, [batch, k, m]).ok_or_else(|| not_dense(cx))?;
        transpose(cx, &name, "a_t", stored)?
    } else {
        reshape(&a_fm, [batch, m, k]).ok_or_else(|| not_dense(cx))?
    };
    let bt = if adj_b {
        reshape(&b_fm, [batch, n, k]).ok_or_else(|| not_dense(cx))?
    } else {
        let stored = reshape(&b_fm, [batch, k, n]).ok_or_else(|| not_dense(cx))?;
        transpose(cx, &name, "b_t", stored)?
    };
    let y3 = reshape(&y_fm, [batch, m, n]).ok_or_else(|| not_dense(cx))?;
    let (lo, hi) = y3.dtype.range();
    for row in 0..m {
        let a_row = FeatureMap {
            offset: a3.offset + row * a3.strides[1],
            shape: [batch, 1, k],
            ..a3.clone()
        };
        let products = scratch_fm(cx, format!("{name}/row{row}"), [batch, n, k], ElemType::I32);
        cx.program.ops.push(
            NpuOp::new(
                name.clone(),
                NpuOpKind::Elementwise {
                    mode: ElementwiseMode::Mul,
                    ifm2: Some(Operand2::Tensor(a_row)),
                    reversed: false,
                    input_scaling: None::<InputScaling>,
                },
                bt.clone(),
                products.clone(),
            )
            .with_upscale(npu_rt::ethos_u::regs::fields::IfmUpscaleMode::None)
            .with_scale(Scale::UNIT)
            .with_activation(NpuActivation::none(ElemType::I32)),
        );
        // Row `row` of the output: `[b, N, 1]`, batch stride M*N, column stride 1.
        let out_row = FeatureMap {
            offset: y3.offset + row * y3.strides[1],
            shape: [batch, n, 1],
            strides: [y3.strides[0], y3.strides[2], y3.strides[2]],
            ..y3.clone()
        };
        let mut sum = pool_op(&name, PoolingMode::ReduceSum, products, out_row, ofm_scale);
        if r.single {
            // onnxruntime's one rounding (`Requant::Single`).
            sum.ofm_round = npu_rt::ethos_u::regs::RoundMode::Natural;
        }
        sum.activation = NpuActivation {
            min: lo as i32,
            max: hi as i32,
            ..NpuActivation::none(y3.dtype)
        };
        cx.program.ops.push(sum);
    }
    Ok(())
}

/// `x` (`[b, R, C]`, dense) transposed into a new dense `[b, C, R]` tensor: per batch one 1x1
/// copy whose OFM strides swap the axes (channels 1, so both sides stay NHWC).
fn transpose(cx: &mut Lowering<'_>, name: &str, tag: &str, x: FeatureMap) -> Result<FeatureMap> {
    let [batch, rows, cols] = x.shape;
    let e = x.dtype.bytes();
    let out = scratch_fm(cx, format!("{name}/{tag}"), [batch, cols, rows], x.dtype);
    let out = FeatureMap {
        zero_point: x.zero_point,
        ..out
    };
    for bi in 0..batch {
        let ifm = FeatureMap {
            offset: x.offset + bi * x.strides[0],
            shape: [rows, cols, 1],
            strides: [cols * e, e, e],
            ..x.clone()
        };
        let ofm = FeatureMap {
            offset: out.offset + bi * out.strides[0],
            shape: [rows, cols, 1],
            strides: [e, rows * e, e],
            ..out.clone()
        };
        cx.program.ops.push(copy_op(name, ifm, ofm)?);
    }
    Ok(out)
}

/// BatchMatMul graphs compiled for every accelerator and run on the virtual NPU, byte for byte
/// against the reference interpreter; each must lower to the NPU entirely.
#[cfg(test)]
mod tests {
    use npu_rt::ethos_u::config::ETHOS_U55_128;

    use crate::ethos_u::compile;
    use crate::ir::{DType, Graph, Op, OpKind, Quantization, Tensor};
    use crate::value::{Data, Value};

    fn graph(a: &[usize], b: &[usize], y: &[usize], adj_a: bool, adj_b: bool) -> Graph {
        let mut g = Graph {
            name: "mm".into(),
            ..Graph::default()
        };
        let t = |name: &str, shape: &[usize], q: (f32, i32)| Tensor {
            name: name.into(),
            shape: shape.to_vec(),
            dtype: DType::I8,
            quant: Some(Quantization::per_tensor(q.0, q.1)),
            data: None,
        };
        let ta = g.add_tensor(t("a", a, (0.031, -3)));
        let tb = g.add_tensor(t("b", b, (0.017, 5)));
        let ty = g.add_tensor(t("y", y, (0.093, -11)));
        g.inputs.extend([ta, tb]);
        g.outputs.push(ty);
        g.ops.push(Op {
            name: "mm".into(),
            kind: OpKind::BatchMatMul { adj_a, adj_b },
            inputs: vec![ta, tb],
            outputs: vec![ty],
        });
        g
    }

    fn random(shape: &[usize], seed: u64) -> Value {
        let n: usize = shape.iter().product();
        let v = super::super::e2e::random_bytes(n, seed);
        Value::new(
            shape.to_vec(),
            Data::I8(v.into_iter().map(|b| b as i8).collect()),
        )
        .unwrap()
    }

    fn check(g: &Graph) {
        g.validate().expect("valid graph");
        super::super::lower(g, &ETHOS_U55_128).expect("lowers to the NPU");
        for seed in 1..=3 {
            let inputs: Vec<Value> = g
                .inputs
                .iter()
                .enumerate()
                .map(|(i, &t)| random(&g.tensors[t].shape, seed * 7 + i as u64))
                .collect();
            super::super::e2e::check_inputs(g, &inputs, &format!("seed {seed}"));
        }
    }

    #[test]
    fn batch_matmul_on_the_npu_equals_reference() {
        // Rank 2, 3, 4; each adjoint combination.
        check(&graph(&[5, 8], &[8, 3], &[5, 3], false, false));
        check(&graph(&[2, 4, 16], &[2, 16, 8], &[2, 4, 8], false, false));
        check(&graph(
            &[1, 4, 8, 16],
            &[1, 4, 16, 8],
            &[1, 4, 8, 8],
            false,
            false,
        ));
        check(&graph(&[3, 6, 5], &[3, 7, 5], &[3, 6, 7], false, true));
        check(&graph(&[3, 5, 6], &[3, 5, 7], &[3, 6, 7], true, false));
        check(&graph(&[2, 5, 6], &[2, 7, 5], &[2, 6, 7], true, true));
        // A long reduction (K = 200) and a single row.
        check(&graph(&[1, 1, 200], &[1, 200, 4], &[1, 1, 4], false, false));
    }

    #[test]
    fn broadcast_batches_run_on_the_cpu() {
        let g = graph(&[1, 4, 8], &[3, 8, 2], &[3, 4, 2], false, false);
        let e = super::super::lower(&g, &ETHOS_U55_128)
            .unwrap_err()
            .to_string();
        assert!(e.contains("broadcast"), "{e}");
        // The model still compiles (CPU kernel) and equals the reference.
        let inputs = vec![random(&[1, 4, 8], 1), random(&[3, 8, 2], 2)];
        let want = crate::reference::run(&g, &inputs).unwrap();
        let (got, _) = compile(&g, &ETHOS_U55_128)
            .unwrap()
            .run_sim(&inputs)
            .unwrap();
        assert_eq!(got[0].data, want[0].data);
    }
}
