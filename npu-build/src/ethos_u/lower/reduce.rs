//! Lowering of REDUCE_MAX, REDUCE_MIN, ARG_MAX and ARG_MIN (SUM is in `mean.rs`, which shares
//! its summing convolutions). `docs/reduce.md` has the facts and the checks.
//!
//! - REDUCE_MAX over any set of axes that re-views as one pooled axis: the input is re-viewed
//!   (no data movement) as `[H, W, C]` with the reduced axes collapsed into W, then one MAX
//!   pooling with a `1 x W` kernel, as Vela pools a reduced axis. Equal input/output
//!   quantization compares the raw values; a different output quantization is applied by the
//!   same pooling's OFM scale (max commutes with the monotonic rescale).
//! - REDUCE_MIN (8-bit): `min(x) = !max(!x)`, and bitwise NOT (`-1 - x` signed, `255 - x`
//!   unsigned) maps the 8-bit range onto itself reversing the order: a scalar SUB computes `!x`
//!   in the input's type, the MAX pooling's output stage looks up `!m` in a 256-entry table
//!   (requantized when the output's quantization differs; its DMA overlaps the SUB). Two
//!   operations on 8-bit data where Vela negates into int16 and back in three.
//! - ARG_MAX / ARG_MIN (8-bit input, int32 index) along an axis of length `L <= 128`, the way
//!   Vela lowers ARG_MAX: a depthwise 1x1 convolution writes `v = ±128 x + (L - 1 - l)` into
//!   int16 (weight ±128, per-position bias; `l` the index along the axis), so the largest `v` is
//!   the largest (smallest) `x` and, among equal ones, the first `l`; a MAX pooling over the axis
//!   picks it; a 1x1 pool's 16-bit interpolating table (slope -128, base `L - 1` in all 512
//!   entries) turns the low 7 bits back into `l` (a separate pass, as Vela has it, so the
//!   table's DMA overlaps the pooling); an ADD of 0 widens the int16 index to int32.
use npu_rt::ethos_u::regs::fields::{ElementwiseMode, IfmScaleMode, PoolingMode, RoundMode};

use super::Lowering;
use super::fmap::{reshape, scratch_fm};
use super::op_builders::pool_op;
use super::op_builders::{lookup, single_io};
use super::pool::{MAX_POOL_KERNEL_AREA, MAX_POOL_KERNEL_H, lower_max};
use crate::error::Result;
use crate::ethos_u::npu_op::{
    Activation as NpuActivation, ChannelScale, ConvWeights, ElemType, FeatureMap, InputScaling,
    NpuOp, NpuOpKind, Operand2, Scale,
};
use crate::ir::{Activation, DType, Op, OpKind, Padding, PoolAttrs, ReduceOp};
use crate::reference::movement::Requant;

/// Longest axis ARG_MAX / ARG_MIN take on the NPU: the index lives in the low 7 bits.
const MAX_ARG_AXIS: usize = 128;

/// `shape` without its size-1 axes, adjacent axes of the same kind (reduced or kept) merged:
/// `(size, reduced)` runs, alternating.
pub(super) fn runs(shape: &[usize], axes: &[usize]) -> Vec<(usize, bool)> {
    let mut out: Vec<(usize, bool)> = Vec::new();
    for (i, &d) in shape.iter().enumerate() {
        if d == 1 {
            continue;
        }
        let r = axes.contains(&i);
        match out.last_mut() {
            Some((n, pr)) if *pr == r => *n = n.saturating_mul(d),
            _ => out.push((d, r)),
        }
    }
    out
}

/// The `[H, W, C]` view with the reduced run as W, or why there is none.
fn view(shape: &[usize], axes: &[usize]) -> std::result::Result<[usize; 3], String> {
    Ok(match runs(shape, axes).as_slice() {
        [] => [1, 1, 1],
        [(k, false)] => [1, 1, *k],
        [(r, true)] => [1, *r, 1],
        [(k, false), (r, true)] => [*k, *r, 1],
        [(r, true), (k, false)] => [1, *r, *k],
        [(k, false), (r, true), (c, false)] => [*k, *r, *c],
        _ => {
            return Err(format!(
                "the reduced axes {axes:?} of {shape:?} are not one contiguous run"
            ));
        }
    })
}

pub(super) fn lower(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    match &op.kind {
        OpKind::Reduce {
            op: ReduceOp::Max,
            axes,
            ..
        } => lower_max_min(cx, op, axes, true),
        OpKind::Reduce {
            op: ReduceOp::Min,
            axes,
            ..
        } => lower_max_min(cx, op, axes, false),
        OpKind::ArgMinMax { axis, max } => lower_arg(cx, op, *axis, *max),
        _ => Err(Lowering::invalid(op, "internal: not a reduction")),
    }
}

fn not_dense(cx: &Lowering<'_>, op: &Op) -> crate::error::Error {
    cx.limit(
        op,
        "input or output is not a dense NHWC tensor (slice or brick format)",
    )
}

fn lower_max_min(cx: &mut Lowering<'_>, op: &Op, axes: &[usize], max: bool) -> Result<()> {
    let (x, y) = single_io(op)?;
    let shape = cx.graph.tensors[x].shape.clone();
    if shape.contains(&0) {
        return Err(cx.limit(op, format!("empty input {shape:?}")));
    }
    let v = view(&shape, axes).map_err(|e| cx.limit(op, e))?;
    let kw = v[1];
    if kw > MAX_POOL_KERNEL_H || kw > MAX_POOL_KERNEL_AREA {
        return Err(cx.limit(
            op,
            format!(
                "a reduced run of {kw} elements (one pooling takes at most {MAX_POOL_KERNEL_H})"
            ),
        ));
    }
    let x_fm = cx.fm(op, x)?;
    let y_fm = cx.fm(op, y)?;
    let xv = reshape(&x_fm, v).ok_or_else(|| not_dense(cx, op))?;
    let yv = reshape(&y_fm, [v[0], 1, v[2]]).ok_or_else(|| not_dense(cx, op))?;
    let attrs = PoolAttrs {
        kernel: (1, kw),
        stride: (1, 1),
        padding: Padding::default(),
        activation: Activation::None,
    };
    if max {
        let same = cx.quant(x) == cx.quant(y);
        return lower_max(cx, op, &attrs, x, y, xv, yv, same);
    }
    let dtype = cx.elem_type(op, x)?;
    if !matches!(dtype, ElemType::I8 | ElemType::U8) || cx.elem_type(op, y)? != dtype {
        return Err(cx.limit(
            op,
            "the NPU REDUCE_MIN takes int8 -> int8 and uint8 -> uint8 (16-bit runs on the CPU)",
        ));
    }
    // Entry i of an 8-bit table belongs to the value i - 128 (signed) or i (unsigned).
    let value = |i: usize| {
        if dtype == ElemType::I8 {
            i as i32 - 128
        } else {
            i as i32
        }
    };
    let not = |v: i32| {
        if dtype == ElemType::I8 {
            -1 - v
        } else {
            255 - v
        }
    };
    let (lo, hi) = dtype.range();
    let requant = Requant::between(cx.graph, op, x, y)?;
    let out_table: Vec<u8> = (0..256)
        .map(|i| {
            let n = not(value(i));
            let r = requant.map_or(n, |r| r.apply_one(n));
            r.clamp(lo as i32, hi as i32) as u8
        })
        .collect();
    let name = op.name.as_str();
    // The flip is element-wise (`all_ones - x`, a scalar SUB, no table to load first): done in
    // the input's own (deep) shape, re-viewed for the pool.
    let flipped = scratch_fm(cx, format!("{name}/flipped"), x_fm.shape, dtype);
    let flipped_view = reshape(&flipped, v).ok_or_else(|| not_dense(cx, op))?;
    let mut raw = x_fm;
    raw.zero_point = 0;
    cx.program.ops.push(flip(name, raw, flipped, not(0)));
    // The last flip: a table in the pooling's output stage, or (unchanged quantization on the
    // U65, whose output stage takes longer with a table and whose table DMA from DRAM is slow)
    // a second scalar SUB, as Vela does.
    if requant.is_none() && cx.accel.product == npu_rt::ethos_u::config::Product::U65 {
        let best = scratch_fm(cx, format!("{name}/best"), [v[0], 1, v[2]], dtype);
        lower_max(cx, op, &attrs, x, y, flipped_view, best.clone(), true)?;
        let deep = deep_view(v[0] * v[2]);
        let best = reshape(&best, deep).ok_or_else(|| not_dense(cx, op))?;
        let mut out = reshape(&yv, deep).ok_or_else(|| not_dense(cx, op))?;
        out.zero_point = 0;
        cx.program.ops.push(flip(name, best, out, not(0)));
        return Ok(());
    }
    let out_lut = cx.const_buffer(format!("{name}/not"), out_table);
    let first = cx.program.ops.len();
    lower_max(cx, op, &attrs, x, y, flipped_view, yv, true)?;
    for o in &mut cx.program.ops[first..] {
        o.activation = NpuActivation::table(dtype, out_lut);
    }
    Ok(())
}

/// `all_ones - ifm` (bitwise NOT of 8-bit values) by a scalar SUB, zero points 0.
fn flip(name: &str, ifm: FeatureMap, ofm: FeatureMap, all_ones: i32) -> NpuOp {
    scalar_op(name, ElementwiseMode::Sub, all_ones, true, ifm, ofm)
}

/// `ifm (mode) value` (`value (mode) ifm` when `reversed`) with an IFM2 scalar, unit scales and
/// zero points as given: exact integer arithmetic in the OFM's type.
fn scalar_op(
    name: &str,
    mode: ElementwiseMode,
    value: i32,
    reversed: bool,
    ifm: FeatureMap,
    ofm: FeatureMap,
) -> NpuOp {
    NpuOp::new(
        name,
        NpuOpKind::Elementwise {
            mode,
            ifm2: Some(Operand2::Scalar {
                value,
                zero_point: 0,
            }),
            reversed,
            input_scaling: Some(InputScaling {
                mode: IfmScaleMode::OpaOpb16,
                opa: Scale::UNIT,
                opb: 1,
            }),
        },
        ifm,
        ofm,
    )
    .with_scale(Scale::UNIT)
    .with_ofm_round(RoundMode::Natural)
}

/// The 16-bit interpolating table that maps `v` to `base - (v & 0x7f)` (`docs/numerics.md`,
/// "Lookup tables"): every one of the 512 entries has base `base` and slope -128.
fn low_bits_table(base: i16) -> Vec<u8> {
    let entry = (u32::from(base as u16) | (u32::from((-128i16) as u16) << 16)).to_le_bytes();
    entry.iter().copied().cycle().take(512 * 4).collect()
}

/// A dense `[H, W, C]` shape of `n` elements with C = 16 where 16 divides `n` (at most 4096
/// columns per row), for element-wise passes whose layout is free.
fn deep_view(n: usize) -> [usize; 3] {
    if !n.is_multiple_of(16) {
        return [1, 1, n];
    }
    let cols = n / 16;
    let w = (1..=cols.min(4096))
        .rev()
        .find(|w| cols.is_multiple_of(*w))
        .unwrap_or(1);
    [cols / w, w, 16]
}

fn lower_arg(cx: &mut Lowering<'_>, op: &Op, axis: usize, max: bool) -> Result<()> {
    let (x, y) = single_io(op)?;
    let g = cx.graph;
    let (xt, yt) = (&g.tensors[x], &g.tensors[y]);
    let what = if max { "ARG_MAX" } else { "ARG_MIN" };
    if !matches!(xt.dtype, DType::I8 | DType::U8) {
        return Err(cx.limit(
            op,
            format!(
                "{what} of '{}' ({}) runs on the CPU (the NPU form takes 8-bit inputs)",
                xt.name, xt.dtype
            ),
        ));
    }
    if yt.dtype != DType::I32 {
        return Err(cx.limit(
            op,
            format!(
                "{what} with {} indices ('{}') runs on the CPU (the NPU writes int32 at most)",
                yt.dtype, yt.name
            ),
        ));
    }
    let shape = xt.shape.clone();
    let Some(&len) = shape.get(axis) else {
        return Err(Lowering::invalid(
            op,
            format!("axis {axis} out of range for input {shape:?}"),
        ));
    };
    if shape.contains(&0) {
        return Err(cx.limit(op, format!("empty input {shape:?}")));
    }
    if len > MAX_ARG_AXIS {
        return Err(cx.limit(
            op,
            format!(
                "an axis of {len} elements (the NPU form keeps the index in 7 bits: at most {MAX_ARG_AXIS})"
            ),
        ));
    }
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let x_fm = cx.fm(op, x)?;
    let y_fm = cx.fm(op, y)?;
    // The keys' bias depends on the channel only: the outer positions may be any [H, W];
    // a near-square one suits the NPU's blocks better than a column.
    let cols = (1..=outer)
        .rev()
        .find(|w| outer.is_multiple_of(*w) && w * w <= outer)
        .unwrap_or(1);
    let mut xv =
        reshape(&x_fm, [outer / cols, cols, len * inner]).ok_or_else(|| not_dense(cx, op))?;
    let yv = reshape(&y_fm, [outer, 1, inner]).ok_or_else(|| not_dense(cx, op))?;
    let name = op.name.as_str();

    // 1. v = ±128 x + (L - 1 - l) in int16, the stored values compared (zero point 0).
    xv.zero_point = 0;
    let channels = len * inner;
    let keyed = scratch_fm(cx, format!("{name}/keyed"), xv.shape, ElemType::I16);
    let weight = if max { 128 } else { -128 };
    cx.program.ops.push(
        NpuOp::new(
            name,
            NpuOpKind::Depthwise(ConvWeights {
                shape: [channels, 1, 1, 1],
                values: vec![weight; channels],
                scales: (0..channels)
                    .map(|c| ChannelScale {
                        bias: (len - 1 - c / inner) as i64,
                        scale: 1,
                        shift: 0,
                    })
                    .collect(),
            }),
            xv,
            keyed.clone(),
        )
        .with_activation(NpuActivation::none(ElemType::I16)),
    );

    // 2. The largest key along the axis. 3. A 1x1 pool whose output stage's table keeps
    // l = L - 1 - (key & 0x7f): a separate operation (as Vela does) so the table's 2 KiB DMA
    // overlaps the pooling instead of delaying it.
    let keys = reshape(&keyed, [outer, len, inner]).ok_or_else(|| not_dense(cx, op))?;
    let best = scratch_fm(cx, format!("{name}/best"), [outer, 1, inner], ElemType::I16);
    let mut pool = pool_op(name, PoolingMode::Max, keys, best.clone(), Scale::UNIT);
    pool.kernel.w = len;
    pool.ofm_round = RoundMode::Natural;
    cx.program.ops.push(pool);
    // The element-wise passes see the indices as a deep tensor (a `[.., 1, 1]` column would
    // use one lane of the NPU's 16-deep blocks).
    let deep = deep_view(outer * inner);
    let best = reshape(&best, deep).ok_or_else(|| not_dense(cx, op))?;
    let index16 = scratch_fm(cx, format!("{name}/index"), deep, ElemType::I16);
    let lut = cx.const_buffer(format!("{name}/low_bits"), low_bits_table((len - 1) as i16));
    cx.program
        .ops
        .push(lookup(name, best, index16.clone(), lut));

    // 4. Widen to int32: ADD 0.
    let mut out = reshape(&yv, deep).ok_or_else(|| not_dense(cx, op))?;
    out.zero_point = 0;
    cx.program.ops.push(scalar_op(
        name,
        ElementwiseMode::Add,
        0,
        false,
        index16,
        out,
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_collapse_runs_of_axes() {
        assert_eq!(view(&[1, 8, 8, 16], &[3]), Ok([64, 16, 1]));
        assert_eq!(view(&[1, 8, 8, 16], &[1, 2]), Ok([1, 64, 16]));
        assert_eq!(view(&[2, 3, 4, 5], &[1, 2]), Ok([2, 12, 5]));
        assert_eq!(view(&[2, 3, 4, 5], &[0, 1, 2, 3]), Ok([1, 120, 1]));
        assert_eq!(view(&[1, 4, 1, 6], &[2]), Ok([1, 1, 24]));
        assert!(view(&[2, 3, 4, 5], &[1, 3]).is_err());
    }
}

/// Reductions compiled for every accelerator and run on the virtual NPU, byte for byte against
/// the reference interpreter; each graph must lower entirely to the NPU (no CPU fallback).
#[cfg(test)]
mod e2e_tests {
    use npu_rt::ethos_u::config::ETHOS_U55_128;

    use super::super::e2e::{check, graph};
    use crate::ir::{DType, Graph, OpKind, ReduceOp};
    use crate::value::{Data, Value};

    fn reduce(
        kind: ReduceOp,
        shape: &[usize],
        axes: &[usize],
        dtype: DType,
        in_q: (f32, i32),
        out_q: (f32, i32),
    ) -> Graph {
        let out: Vec<usize> = shape
            .iter()
            .enumerate()
            .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
            .collect();
        graph(
            OpKind::Reduce {
                op: kind,
                axes: axes.to_vec(),
                keep_dims: true,
            },
            (shape, dtype, in_q),
            (&out, out_q),
        )
    }

    fn arg(shape: &[usize], axis: usize, max: bool, dtype: DType, index: DType) -> Graph {
        let mut out = shape.to_vec();
        out.remove(axis);
        let mut g = graph(
            OpKind::ArgMinMax { axis, max },
            (shape, dtype, (0.05, 3)),
            (&out, (1.0, 0)),
        );
        let y = g.outputs[0];
        g.tensors[y].dtype = index;
        g.tensors[y].quant = None;
        g
    }

    fn on_npu(g: &Graph) {
        super::super::lower(g, &ETHOS_U55_128)
            .unwrap_or_else(|e| panic!("{:?} must lower to the NPU: {e}", g.ops[0].kind));
    }

    fn limit(g: &Graph) -> String {
        super::super::lower(g, &ETHOS_U55_128)
            .err()
            .unwrap_or_else(|| panic!("{:?} must not lower", g.ops[0].kind))
            .to_string()
    }

    /// Runs `x` through `g` on every accelerator and compares with the reference.
    fn check_input(g: &Graph, x: Value) {
        super::super::e2e::check_inputs(g, &[x], "given input");
    }

    #[test]
    fn reduce_min_on_the_npu_equals_reference() {
        use DType::{I8, U8};
        let q = (0.05, -4);
        for g in [
            reduce(ReduceOp::Min, &[1, 8, 8, 16], &[3], I8, q, q),
            reduce(ReduceOp::Min, &[1, 8, 8, 16], &[1, 2], I8, q, q),
            reduce(ReduceOp::Min, &[1, 3, 4, 5], &[1, 2], I8, q, q),
            reduce(
                ReduceOp::Min,
                &[1, 5, 7, 3],
                &[1],
                U8,
                (0.02, 128),
                (0.02, 128),
            ),
            reduce(ReduceOp::Min, &[4, 33], &[0, 1], I8, q, q),
            // ONNX ReduceMin may requantize: the table does it.
            reduce(ReduceOp::Min, &[1, 6, 6, 8], &[1, 2], I8, q, (0.03, 7)),
            reduce(
                ReduceOp::Min,
                &[1, 6, 6, 8],
                &[3],
                U8,
                (0.02, 100),
                (0.05, 20),
            ),
        ] {
            on_npu(&g);
            check(&g);
        }
        // Every value at the type's extremes and equal: the flip must not overflow.
        let g = reduce(ReduceOp::Min, &[1, 2, 3, 4], &[3], I8, q, q);
        for v in [-128i8, 127, 0] {
            check_input(
                &g,
                Value::new(vec![1, 2, 3, 4], Data::I8(vec![v; 24])).unwrap(),
            );
        }
        let q16 = (0.001, 0);
        let g16 = reduce(ReduceOp::Min, &[1, 4, 4, 4], &[3], DType::I16, q16, q16);
        assert!(limit(&g16).contains("16-bit"), "{}", limit(&g16));
        assert!(limit(&reduce(ReduceOp::Min, &[2, 3, 4, 5], &[1, 3], I8, q, q)).contains("run"));
    }

    #[test]
    fn arg_max_min_on_the_npu_equal_reference() {
        use DType::{I8, I32, I64, U8};
        for (shape, axis) in [
            (&[1, 8, 8, 16][..], 3),
            (&[1, 8, 8, 16][..], 1),
            (&[1, 8, 8, 16][..], 2),
            (&[2, 3, 4][..], 0),
            (&[1, 128][..], 1),
            (&[5, 1, 3][..], 1),
            (&[3, 7][..], 0),
        ] {
            for max in [true, false] {
                for dt in [I8, U8] {
                    let g = arg(shape, axis, max, dt, I32);
                    on_npu(&g);
                    check(&g);
                }
            }
        }
        // Ties keep the first index; the extremes do not overflow the int16 key.
        for max in [true, false] {
            let g = arg(&[2, 40, 3], 1, max, I8, I32);
            for v in [-128i8, 127, 5] {
                check_input(
                    &g,
                    Value::new(vec![2, 40, 3], Data::I8(vec![v; 240])).unwrap(),
                );
            }
            let g = arg(&[1, 128], 1, max, U8, I32);
            for v in [0u8, 255] {
                check_input(
                    &g,
                    Value::new(vec![1, 128], Data::U8(vec![v; 128])).unwrap(),
                );
            }
        }
        assert!(limit(&arg(&[1, 129], 1, true, I8, I32)).contains("129"));
        assert!(limit(&arg(&[1, 4, 4, 8], 3, true, I8, I64)).contains("int32"));
    }

    #[test]
    fn sum_on_the_npu_equals_reference() {
        use DType::{I8, U8};
        for g in [
            // op_sum's quantization (the fixture's), global.
            reduce(
                ReduceOp::Sum,
                &[1, 8, 8, 16],
                &[1, 2],
                I8,
                (0.007_842_49, -1),
                (0.101_979, -3),
            ),
            reduce(
                ReduceOp::Sum,
                &[1, 8, 8, 16],
                &[2],
                I8,
                (0.02, 3),
                (0.09, -7),
            ),
            reduce(
                ReduceOp::Sum,
                &[1, 8, 8, 16],
                &[3],
                I8,
                (0.02, 3),
                (0.23, 0),
            ),
            reduce(
                ReduceOp::Sum,
                &[1, 5, 6, 3],
                &[1],
                U8,
                (0.031_7, 128),
                (0.109_3, 120),
            ),
            reduce(
                ReduceOp::Sum,
                &[1, 3, 4, 5],
                &[1, 2],
                I8,
                (0.5, 0),
                (0.5, 0),
            ),
            // More than one summing convolution: the int32 multiplication rescales.
            reduce(
                ReduceOp::Sum,
                &[1, 100, 100, 2],
                &[1, 2],
                I8,
                (0.008_9, -5),
                (3.33, 1),
            ),
        ] {
            on_npu(&g);
            check(&g);
        }
    }

    /// A scale of exactly 0.1 puts sums on ties (`-1275 * 0.1 = -127.5`) that TFLite's
    /// single-precision arithmetic rounds either way: no fixed-point scale agrees, so the SUM is
    /// refused with the sum at fault (and runs on the CPU).
    #[test]
    fn sum_rescale_is_checked_for_every_sum() {
        let g = reduce(
            ReduceOp::Sum,
            &[1, 8, 8, 16],
            &[3],
            DType::I8,
            (0.02, 3),
            (0.2, 0),
        );
        let e = limit(&g);
        assert!(
            e.contains("no NPU rescale equals") && e.contains("sum of x - zp"),
            "{e}"
        );
        // The same model compiles (the SUM on the CPU) and equals the reference.
        check(&g);
    }
}
