//! Lowering of 8-bit MEAN and SUM over spatial axes (and over channels when the tensor can be
//! re-viewed so they become a spatial axis), as TFLite's `QuantizedMeanOrSum` computes them.
//!
//! Decomposition (docs/numerics.md, "Mean"; the same as Arm's Vela): depthwise convolutions with
//! all-one weights sum `x - zp_in` into int32 (one per chunk of at most 64 kernel rows and
//! 4096 kernel elements; chunks are added with int32 adds); then one int32 multiplication by the
//! constant `M = (q << k) / N` with OFM_SCALE `(1, 31 - (shift - k))` and the output zero point,
//! where `(q, shift)` is TFLite's quantized multiplier of `in_scale / out_scale`, `N` the number
//! of reduced elements and `k = min(floor(log2 N), 32, 31 + shift)` — TFLite's own pre-shift of
//! the multiplier, so the product and its double rounding equal `MultiplyByQuantizedMultiplier`.
//!
//! SUM sums the same way; TFLite rescales the sum in single precision
//! (`round(sum * (si / so) + bias)`, `docs/reduce.md`), which no fixed-point scale equals for
//! every sum in general. The lowering picks the NPU scale (TFLite's quantized multiplier of
//! `si / so`, DBL or NATURAL rounding) that gives the reference's output for every sum the
//! input can produce, checked exhaustively at compile time over the sums whose output is not
//! saturated (both sides are monotonic, so saturation beyond agrees); when none does, SUM runs
//! on the CPU with that reason. One summing convolution carries the scale itself (as Vela
//! does); chunked sums end with the int32 multiplication.

use super::super::npu_op::{ChannelScale, ElemType, FeatureMap, NpuOp, NpuOpKind, Scale};
use super::Lowering;
use super::fmap::{const_i32, reshape, scratch_fm};
use super::op_builders::{elementwise, unit_depthwise};
use crate::error::Result;
use crate::ir::{Op, OpKind, ReduceOp};
use crate::reference::reduce::{Reduce, ReduceMode, scaled_sum};
use npu_rt::ethos_u::regs::fields::{ElementwiseMode, RoundMode};
use npu_rt::fixed::quantize_multiplier;

/// Rows of one summing convolution.
const MAX_KERNEL_HEIGHT: usize = 64;
/// Kernel elements of one summing convolution.
const MAX_KERNEL_ELEMENTS: usize = 64 * 64;
/// Reduced elements whose sum of `x - zp` (at most 255 each) always fits int32.
const MAX_REDUCED: u64 = 1 << 23;

/// How a mean maps onto the NPU: the input re-viewed as `[H, W, C]` and a `kh x kw` window
/// (`kh` is H or 1, `kw` is W or 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Plan {
    view: [usize; 3],
    kh: usize,
    kw: usize,
}

impl Plan {
    /// `[H, W, C]` of the result.
    fn out(&self) -> [usize; 3] {
        [
            self.view[0] - self.kh + 1,
            self.view[1] - self.kw + 1,
            self.view[2],
        ]
    }

    /// Number of reduced elements.
    fn count(&self) -> usize {
        self.kh * self.kw
    }
}

/// Maps `shape` reduced over `axes` onto an `[H, W, C]` view with the reduced axes spatial.
///
/// Axes of size 1 are dropped (reducing them changes nothing). When the remaining axes fit none
/// of the views below, adjacent axes that are both reduced or both kept are merged (a re-view of
/// the same bytes) and the views are tried again. Up to three axes remain; the
/// innermost becomes C if it is kept, or W (with C = 1) if it is reduced — the latter needs at
/// most one other axis. A reduce over H and W whose kernel is taller than 64 rows but at most
/// 4096 elements becomes one row (as Vela does) so one convolution suffices.
fn plan(shape: &[usize], axes: &[usize]) -> std::result::Result<Plan, String> {
    let dims: Vec<(usize, bool)> = shape
        .iter()
        .enumerate()
        .filter(|&(_, &d)| d != 1)
        .map(|(i, &d)| (d, axes.contains(&i)))
        .collect();
    plan_dims(shape, &dims).or_else(|e| {
        let merged = super::reduce::runs(shape, axes);
        if merged == dims {
            Err(e)
        } else {
            plan_dims(shape, &merged).map_err(|_| e)
        }
    })
}

/// [`plan`] for `(size, reduced)` axes.
fn plan_dims(shape: &[usize], dims: &[(usize, bool)]) -> std::result::Result<Plan, String> {
    let k = |(d, reduced): (usize, bool)| if reduced { d } else { 1 };
    let p = match dims {
        [] => Plan {
            view: [1, 1, 1],
            kh: 1,
            kw: 1,
        },
        [.., (c, false)] => match &dims[..dims.len() - 1] {
            [] => Plan {
                view: [1, 1, *c],
                kh: 1,
                kw: 1,
            },
            [a] => Plan {
                view: [1, a.0, *c],
                kh: 1,
                kw: k(*a),
            },
            [a, b] => Plan {
                view: [a.0, b.0, *c],
                kh: k(*a),
                kw: k(*b),
            },
            _ => {
                return Err(format!(
                    "input {shape:?} has more than three axes larger than 1"
                ));
            }
        },
        [.., (c, true)] => match &dims[..dims.len() - 1] {
            [] => Plan {
                view: [1, *c, 1],
                kh: 1,
                kw: *c,
            },
            [a] => Plan {
                view: [a.0, *c, 1],
                kh: k(*a),
                kw: *c,
            },
            _ => {
                return Err(format!(
                    "a mean over channels needs every other axis but one to be 1 (input {shape:?})"
                ));
            }
        },
    };
    if p.kh > MAX_KERNEL_HEIGHT
        && p.kh == p.view[0]
        && p.kw == p.view[1]
        && p.count() <= MAX_KERNEL_ELEMENTS
    {
        return Ok(Plan {
            view: [1, p.view[0] * p.view[1], p.view[2]],
            kh: 1,
            kw: p.count(),
        });
    }
    if p.kw > MAX_KERNEL_ELEMENTS {
        return Err(format!(
            "a reduced row of {} elements (one convolution sums rows of at most {MAX_KERNEL_ELEMENTS})",
            p.kw
        ));
    }
    Ok(p)
}

/// TFLite's mean rescaling: the int32 multiplier `M` and the OFM_SCALE right shift `S` with
/// `out = round(sum * M / 2^S)` (double rounding), for `n` reduced elements.
fn mean_scaling(in_scale: f32, out_scale: f32, n: usize) -> Option<(i32, u8)> {
    let (q, shift) = quantize_multiplier(f64::from(in_scale) / f64::from(out_scale));
    if n == 0 {
        return None;
    }
    let log2_n = (usize::BITS - 1 - n.leading_zeros()) as i32;
    let k = log2_n.min(32).min(31 + shift).max(0);
    let m = (i64::from(q) << k) / n as i64;
    let m = i32::try_from(m).ok()?;
    let s = 31 - (shift - k);
    u8::try_from(s).ok().filter(|&s| s <= 63).map(|s| (m, s))
}

pub(super) fn lower(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    let (axes, keep_dims, sum) = match &op.kind {
        OpKind::Mean { axes, keep_dims } => (axes, *keep_dims, false),
        OpKind::Reduce {
            op: ReduceOp::Sum,
            axes,
            keep_dims,
        } => (axes, *keep_dims, true),
        _ => return Err(Lowering::invalid(op, "not a mean or sum")),
    };
    let what = if sum { "sum" } else { "mean" };
    let (&x, &y) = match (op.inputs.as_slice(), op.outputs.as_slice()) {
        ([x], [y]) => (x, y),
        _ => return Err(Lowering::invalid(op, "needs one input and one output")),
    };
    let dt = cx.elem_type(op, x)?;
    if !matches!(dt, ElemType::I8 | ElemType::U8) || cx.elem_type(op, y)? != dt {
        return Err(cx.limit(
            op,
            format!("the NPU {what} handles int8 -> int8 and uint8 -> uint8 only"),
        ));
    }
    let shape = cx.graph.tensors[x].shape.clone();
    if let Some(a) = axes.iter().find(|&&a| a >= shape.len()) {
        return Err(Lowering::invalid(
            op,
            format!("axis {a} out of range for input {shape:?}"),
        ));
    }
    if shape.contains(&0) {
        return Err(Lowering::invalid(op, format!("empty input {shape:?}")));
    }
    let p = plan(&shape, axes).map_err(|e| cx.limit(op, e))?;
    if p.count() as u64 > MAX_REDUCED {
        return Err(cx.limit(
            op,
            format!(
                "{} reduced elements; the int32 sum holds {MAX_REDUCED}",
                p.count()
            ),
        ));
    }
    let (in_scale, zi) = cx.quant(x);
    let (out_scale, zo) = cx.quant(y);
    let rescale = if sum {
        let r = Reduce::new(cx.graph, op, ReduceOp::Sum, axes, keep_dims)?;
        let ReduceMode::SumScaled { scale, bias, .. } = r.mode else {
            return Err(cx.limit(op, "a sum without rescaling runs on the CPU"));
        };
        sum_rescale(scale, bias, zi, zo, p.count(), dt.range()).map_err(|e| cx.limit(op, e))?
    } else {
        let (m, s) = mean_scaling(in_scale, out_scale, p.count()).ok_or_else(|| {
            cx.limit(
                op,
                format!("rescale {in_scale} / {out_scale} over {} elements does not fit the output scale register", p.count()),
            )
        })?;
        // onnxruntime-quantized models round once (`Requant::Single`).
        let round = if cx.graph.requant == crate::ir::Requant::Single {
            RoundMode::Natural
        } else {
            RoundMode::Dbl
        };
        Rescale {
            m: m as u32,
            s,
            round,
        }
    };

    let x_fm = cx.fm(op, x)?;
    let y_fm = cx.fm(op, y)?;
    let not_dense = |cx: &Lowering<'_>| {
        cx.limit(
            op,
            "input or output is not a dense NHWC tensor (slice or brick format)",
        )
    };
    let view = reshape(&x_fm, p.view).ok_or_else(|| not_dense(cx))?;
    let out = reshape(&y_fm, p.out()).ok_or_else(|| not_dense(cx))?;

    // Sum in chunks of rows; every chunk's convolution produces the whole int32 result shape.
    let name = op.name.as_str();
    let rows_per_op = (MAX_KERNEL_ELEMENTS / p.kw)
        .min(p.kh)
        .min(MAX_KERNEL_HEIGHT);
    if sum && rows_per_op >= p.kh {
        // One convolution: its per-channel scale is the whole rescale.
        let mut op1 = sum_op(name, view, out, p.kh, p.kw);
        if let NpuOpKind::Depthwise(w) = &mut op1.kind {
            for c in &mut w.scales {
                *c = ChannelScale {
                    bias: 0,
                    scale: rescale.m,
                    shift: rescale.s,
                };
            }
        }
        op1.ofm_round = rescale.round;
        cx.program.ops.push(op1);
        return Ok(());
    }
    let mut acc: Option<FeatureMap> = None;
    let mut ops = Vec::new();
    for (i, row0) in (0..p.kh).step_by(rows_per_op).enumerate() {
        let kh = rows_per_op.min(p.kh - row0);
        let ifm = FeatureMap {
            offset: view.offset + row0 * view.strides[0],
            shape: [
                if p.kh == 1 { view.shape[0] } else { kh },
                view.shape[1],
                view.shape[2],
            ],
            ..view.clone()
        };
        let sum = scratch_fm(cx, format!("{name}/sum{i}"), p.out(), ElemType::I32);
        ops.push(sum_op(name, ifm, sum.clone(), kh, p.kw));
        acc = Some(match acc {
            None => sum,
            Some(prev) => {
                let total = scratch_fm(cx, format!("{name}/acc{i}"), p.out(), ElemType::I32);
                ops.push(elementwise(
                    name,
                    ElementwiseMode::Add,
                    prev,
                    Some(sum),
                    total.clone(),
                    Scale::UNIT,
                ));
                total
            }
        });
    }
    let acc = acc.ok_or_else(|| Lowering::invalid(op, "internal: no summing operation"))?;
    let multiplier = const_i32(cx, format!("{name}/multiplier"), rescale.m as i32);
    let mut mul = elementwise(
        name,
        ElementwiseMode::Mul,
        acc,
        Some(multiplier),
        out,
        Scale {
            scale: 1,
            shift: rescale.s,
        },
    );
    mul.ofm_round = rescale.round;
    ops.push(mul);
    cx.program.ops.extend(ops);
    Ok(())
}

/// How the int32 sum of `x - zp_in` becomes the output: `scale(acc, m, s, round) + zp_out`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rescale {
    m: u32,
    s: u8,
    round: RoundMode,
}

/// Most sums [`sum_rescale`] checks (its compile-time cost).
const MAX_CHECKED_SUMS: i64 = 1 << 25;

/// The NPU rescale that equals TFLite's single-precision SUM rescale (`scale`, `bias` as the
/// reference computes them) for every int32 sum `A = sum(x - zi)` of `count` elements of the
/// type range `(lo, hi)`, or why none does.
fn sum_rescale(
    scale: f32,
    bias: f32,
    zi: i32,
    zo: i32,
    count: usize,
    (lo, hi): (i64, i64),
) -> std::result::Result<Rescale, String> {
    let (q, shift) = quantize_multiplier(f64::from(scale));
    let s = u8::try_from(31 - shift)
        .ok()
        .filter(|&s| s <= 63)
        .ok_or_else(|| format!("rescale {scale} does not fit the output scale register"))?;
    let n = count as i64;
    let (zi, zo) = (i64::from(zi), i64::from(zo));
    let (a_min, a_max) = (n * (lo - zi), n * (hi - zi));
    // Outside this window both sides saturate (margins of two output steps).
    let exact = f64::from(scale);
    let w_lo = (((lo - zo - 2) as f64 / exact).floor() as i64 - 2).max(a_min);
    let w_hi = (((hi - zo + 2) as f64 / exact).ceil() as i64 + 2).min(a_max);
    if w_hi - w_lo > MAX_CHECKED_SUMS {
        return Err(format!(
            "checking the NPU's rescale of {} possible sums against TFLite's single-precision one is too costly (at most {MAX_CHECKED_SUMS})",
            w_hi - w_lo
        ));
    }
    let reference = |a: i64| -> i64 {
        let raw = (a + n * zi) as i32;
        (i64::from(scaled_sum(raw, scale, bias)) + zo).clamp(lo, hi)
    };
    let npu = |a: i64, r: Rescale| -> i64 {
        (npu_rt::ethos_u::numerics::scale(a, r.m, u32::from(r.s), r.round, 0) + zo).clamp(lo, hi)
    };
    // Beyond the window the reference must already be saturated for monotonicity to cover it.
    if (w_lo > a_min && reference(w_lo) != lo) || (w_hi < a_max && reference(w_hi) != hi) {
        return Err("internal: the SUM check window does not reach saturation".into());
    }
    let mut first_mismatch = None;
    for round in [RoundMode::Dbl, RoundMode::Natural] {
        for dm in [0i64, 1, -1] {
            let Ok(m) = u32::try_from(i64::from(q) + dm) else {
                continue;
            };
            let r = Rescale { m, s, round };
            match (w_lo..=w_hi).find(|&a| reference(a) != npu(a, r)) {
                None => return Ok(r),
                Some(a) => {
                    first_mismatch.get_or_insert((a, reference(a), npu(a, r)));
                }
            }
        }
    }
    let (a, want, got) = first_mismatch.unwrap_or_default();
    Err(format!(
        "no NPU rescale equals TFLite's single-precision SUM rescale for every sum (sum of x - zp = {a}: TFLite {want}, NPU {got})"
    ))
}

/// A depthwise convolution summing a `kh x kw` window of `ifm - zp` into int32 (weights 1).
fn sum_op(name: &str, ifm: FeatureMap, ofm: FeatureMap, kh: usize, kw: usize) -> NpuOp {
    let values = vec![1; ifm.shape[2] * kh * kw];
    unit_depthwise(name, ifm, ofm, [kh, kw], values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use npu_rt::fixed::multiply_by_quantized_multiplier;

    /// op_global_avgpool on ethos-u55-128: Vela's int32 constant 0x4DE213F4 (region 0 offset
    /// 0x430) and OFM_SCALE shift 34 (registers.txt), for the model's scales and a 7x7 window.
    #[test]
    fn op_global_avgpool_constants_equal_vela() {
        let in_scale = 0.00784293282777071f64 as f32;
        let out_scale = 0.0021044521126896143f64 as f32;
        assert_eq!(
            mean_scaling(in_scale, out_scale, 49),
            Some((0x4DE2_13F4, 34))
        );
        let weights = std::fs::read(format!(
            "{}/../fixtures/op_global_avgpool/vela/ethos-u55-128/weights.bin",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        assert_eq!(weights[0x430..0x434], 0x4DE2_13F4i32.to_le_bytes());
        // The depthwise scale record: bias 0, scale 2^30, shift 30.
        assert_eq!(weights[..10], [0, 0, 0, 0, 0, 0, 0, 0, 0x40, 30]);
    }

    fn npy_i8(path: &str) -> Vec<i8> {
        let p = format!("{}/../fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
        let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
        let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        bytes[10 + header_len..].iter().map(|&b| b as i8).collect()
    }

    /// The hardware arithmetic of the decomposition (int32 sums of x - zp, then
    /// `sum * M / 2^S` with DBL rounding: round at bit 31, then half away from zero) reproduces
    /// the fixture's reference outputs on all three inputs.
    #[test]
    fn decomposition_matches_op_global_avgpool_fixture() {
        let (in_scale, in_zp) = (0.00784293282777071f64 as f32, -1);
        let (out_scale, out_zp) = (0.0021044521126896143f64 as f32, 3);
        let (m, s) = mean_scaling(in_scale, out_scale, 49).unwrap();
        for k in 0..3 {
            let x = npy_i8(&format!("op_global_avgpool/io/input_{k}.npy"));
            let want = npy_i8(&format!("op_global_avgpool/io/output_{k}.npy"));
            assert_eq!((x.len(), want.len()), (49 * 64, 64));
            for c in 0..64 {
                let sum: i32 = (0..49).map(|i| x[i * 64 + c] as i32 - in_zp).sum();
                // DBL with shift S > 31: SRDHM then a rounding shift by S - 31.
                let v = multiply_by_quantized_multiplier(sum, m, 31 - s as i32);
                assert_eq!(
                    (v + out_zp).clamp(-128, 127) as i8,
                    want[c],
                    "input {k} channel {c}"
                );
            }
        }
    }

    fn mean(
        shape: &[usize],
        axes: &[usize],
        keep_dims: bool,
        dtype: crate::ir::DType,
        in_q: (f32, i32),
        out_q: (f32, i32),
    ) -> crate::ir::Graph {
        let out: Vec<usize> = shape
            .iter()
            .enumerate()
            .filter_map(|(i, &d)| match (axes.contains(&i), keep_dims) {
                (true, true) => Some(1),
                (true, false) => None,
                (false, _) => Some(d),
            })
            .collect();
        super::super::e2e::graph(
            OpKind::Mean {
                axes: axes.to_vec(),
                keep_dims,
            },
            (shape, dtype, in_q),
            (&out, out_q),
        )
    }

    /// Chunked sums (100 rows of 100), tall windows re-viewed as one row, single axes, means
    /// over channels, uint8, up- and down-scaling.
    #[test]
    fn mean_on_the_virtual_npu_equals_reference() {
        use crate::ir::DType::{I8, U8};
        let check = super::super::e2e::check;
        check(&mean(
            &[1, 100, 100, 8],
            &[1, 2],
            true,
            I8,
            (0.02, -3),
            (0.01, 5),
        ));
        check(&mean(
            &[1, 100, 3, 8],
            &[1, 2],
            false,
            I8,
            (0.02, 0),
            (0.03, -1),
        ));
        check(&mean(&[1, 5, 6, 3], &[1], false, I8, (0.05, 2), (0.04, 0)));
        check(&mean(&[1, 5, 6, 3], &[2], true, I8, (0.05, 2), (0.2, 0)));
        check(&mean(&[1, 10], &[1], true, I8, (0.1, 0), (0.1, 0)));
        check(&mean(
            &[1, 4, 1, 9],
            &[3],
            false,
            I8,
            (0.1, 10),
            (0.05, -20),
        ));
        check(&mean(
            &[1, 7, 7, 64],
            &[1, 2],
            true,
            U8,
            (0.03, 128),
            (0.02, 120),
        ));
        check(&mean(
            &[1, 130, 1, 4],
            &[1],
            true,
            I8,
            (0.01, 0),
            (0.001, 0),
        ));
    }

    #[test]
    fn mean_limits() {
        use npu_rt::ethos_u::config::ETHOS_U55_128;
        let err = |g: &crate::ir::Graph| {
            super::super::lower(g, &ETHOS_U55_128)
                .unwrap_err()
                .to_string()
        };
        let q = (0.1, 0);
        let i8 = crate::ir::DType::I8;
        assert!(err(&mean(&[1, 2, 2, 5000], &[3], true, i8, q, q)).contains("channel"));
        assert!(err(&mean(&[1, 2, 5000, 1], &[2], true, i8, q, q)).contains("5000"));
        assert!(
            err(&mean(&[1, 4, 4, 4], &[1], true, i8, (1.0, 0), (1e-12, 0))).contains("rescale")
        );
    }

    #[test]
    fn plans() {
        let p = |s: &[usize], a: &[usize]| plan(s, a);
        // Global pooling of NHWC.
        assert_eq!(
            p(&[1, 7, 7, 64], &[1, 2]),
            Ok(Plan {
                view: [7, 7, 64],
                kh: 7,
                kw: 7
            })
        );
        // Only H, only W.
        assert_eq!(
            p(&[1, 5, 6, 3], &[1]),
            Ok(Plan {
                view: [5, 6, 3],
                kh: 5,
                kw: 1
            })
        );
        assert_eq!(
            p(&[1, 5, 6, 3], &[2]),
            Ok(Plan {
                view: [5, 6, 3],
                kh: 1,
                kw: 6
            })
        );
        // Over channels of [N, K] and of [1, H, 1, C].
        assert_eq!(
            p(&[1, 10], &[1]),
            Ok(Plan {
                view: [1, 10, 1],
                kh: 1,
                kw: 10
            })
        );
        assert_eq!(
            p(&[1, 4, 1, 9], &[3]),
            Ok(Plan {
                view: [4, 9, 1],
                kh: 1,
                kw: 9
            })
        );
        assert_eq!(
            p(&[1, 4, 1, 9], &[1, 3]),
            Ok(Plan {
                view: [4, 9, 1],
                kh: 4,
                kw: 9
            })
        );
        // Kept axes merged in front of a reduced innermost run (MEAN over channels of NHWC).
        assert_eq!(
            p(&[1, 4, 2, 9], &[3]),
            Ok(Plan {
                view: [8, 9, 1],
                kh: 1,
                kw: 9
            })
        );
        assert_eq!(
            p(&[2, 3, 4, 5], &[1, 2]),
            Ok(Plan {
                view: [2, 12, 5],
                kh: 1,
                kw: 12
            })
        );
        assert!(p(&[2, 3, 4, 5], &[1, 3]).is_err());
        // Tall windows become one row when they have at most 4096 elements.
        assert_eq!(
            p(&[1, 100, 3, 8], &[1, 2]),
            Ok(Plan {
                view: [1, 300, 8],
                kh: 1,
                kw: 300
            })
        );
        assert_eq!(
            p(&[1, 100, 100, 8], &[1, 2]),
            Ok(Plan {
                view: [100, 100, 8],
                kh: 100,
                kw: 100
            })
        );
        assert!(p(&[1, 2, 5000, 8], &[2]).is_err());
        // Axes of size 1 only: a rescaling copy.
        assert_eq!(
            p(&[1, 1, 1, 8], &[1, 2]),
            Ok(Plan {
                view: [1, 1, 8],
                kh: 1,
                kw: 1
            })
        );
    }

    #[test]
    fn scaling_limits() {
        // One element: the plain quantized multiplier.
        let (q, shift) = quantize_multiplier(0.5);
        assert_eq!(mean_scaling(1.0, 2.0, 1), Some((q, (31 - shift) as u8)));
        assert_eq!(mean_scaling(1.0, 2.0, 0), None);
        // Large output/input ratios need left shifts the register cannot express.
        assert_eq!(mean_scaling(1.0, 1e-12, 1), None);
    }
}
