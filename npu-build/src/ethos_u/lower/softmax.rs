//! Lowering of 8-bit softmax (over the last axis) into 27 NPU operations, and the small
//! operation builders the mean and resize lowerings share.
//!
//! The sequence computes TFLite's int8/uint8 reference softmax bit for bit (docs/numerics.md,
//! "Softmax"; the same decomposition Arm's Vela uses): per row, `max`; `exp(x - max)` through
//! a 256 x int32 lookup table of gemmlowp's `exp_on_negative_values` (fused into the
//! subtraction); the sum of the exponents rounded to Q12.19; its reciprocal by gemmlowp's
//! Newton-Raphson `one_over_one_plus_x_for_x_in_0_1` on `sum << (clz(sum) - 1)`; and the final
//! product shifted right by `35 - clz(sum)` into the output (scale 1/256, zero point at the
//! type minimum).
//! (Vela's op_softmax stream has 28 operations plus the LUT DMA: it adds an Add of a zero
//! tensor before the last shift, which does not change the arithmetic.)
//!
//! When a row's sum of exponents reaches 512 (e.g. 512 entries equal to the row maximum),
//! TFLite's final rounding shift is 32 bits or more, which is undefined behaviour in its C++;
//! the NPU then computes the exactly rounded value (outputs at the type minimum or one above).
//!
//! Products of two int32 values use OFM_SCALE `(1, n)`: the hardware computes `a * b / 2^n` with
//! the op's rounding, so `n = 31` is gemmlowp's saturating rounding doubling high multiply (Vela
//! writes `(2^30, 31)` here; only a scale of 1 is allowed for 32-bit inputs and `(1, 31)` gives
//! the same product under every reading of the register).

use npu_rt::ethos_u::regs::fields::{ActivationClipRange, ElementwiseMode, PoolingMode};

use super::super::npu_op::{Activation, BufferId, ElemType, FeatureMap, Kernel, NpuOp, Scale};
use super::fmap::{const_i32, reshape, scratch_fm};
use super::op_builders::{elementwise, pool_op, rounded, sub_from_const};
use super::{Lowering, lut};
use crate::error::Result;
use crate::ir::{Op, OpKind};

/// Integer bits of the accumulated exponents (TFLite's `kAccumulationIntegerBits`).
const ACCUMULATION_INTEGER_BITS: i32 = 12;
/// `-32/17` and `48/17` in Q2.29: the Newton-Raphson start `48/17 - 32/17 * d`.
const NEG_32_OVER_17: i32 = -1_010_580_540;
const C_48_OVER_17: i32 = 1_515_870_810;
/// 1.0 in Q2.29.
const ONE_Q2_29: i32 = 1 << 29;
/// Largest softmax depth whose exponent sum cannot overflow int32: each term is at most
/// 2^(31 - 12), so fewer than 2^12 terms always fit.
const MAX_DEPTH: usize = (1 << ACCUMULATION_INTEGER_BITS) - 1;

pub(super) fn lower(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    let OpKind::Softmax { beta } = op.kind else {
        return Err(Lowering::invalid(op, "not a softmax"));
    };
    let (&x, &y) = match (op.inputs.as_slice(), op.outputs.as_slice()) {
        ([x], [y]) => (x, y),
        _ => return Err(Lowering::invalid(op, "needs one input and one output")),
    };
    let dt = cx.elem_type(op, x)?;
    if !matches!(dt, ElemType::I8 | ElemType::U8) || cx.elem_type(op, y)? != dt {
        return Err(cx.limit(
            op,
            "the NPU softmax handles int8 -> int8 and uint8 -> uint8 only",
        ));
    }
    let (in_scale, in_zp) = cx.quant(x);
    let (out_scale, out_zp) = cx.quant(y);
    let type_min = dt.range().0 as i32;
    if out_scale != 1.0 / 256.0 || out_zp != type_min {
        return Err(cx.limit(
            op,
            format!(
                "output quantization ({out_scale}, {out_zp}) is not TFLite's (1/256, {type_min})"
            ),
        ));
    }
    let table = lut::softmax_exp_table(beta, in_scale).ok_or_else(|| {
        cx.limit(
            op,
            format!("beta {beta} x input scale {in_scale} cannot be scaled to Q5.26"),
        )
    })?;
    let [h, w, c] = cx.hwc(op, x)?;
    if cx.hwc(op, y)? != [h, w, c] {
        return Err(Lowering::invalid(op, "input and output shapes differ"));
    }
    let rows = h * w;
    if rows > 65536 {
        return Err(cx.limit(op, format!("{rows} rows; the NPU softmax handles 65536")));
    }
    if c > MAX_DEPTH {
        return Err(cx.limit(
            op,
            format!("depth {c}: sums of more than {MAX_DEPTH} exponents may overflow int32"),
        ));
    }
    let x_fm = cx.fm(op, x)?;
    let y_fm = cx.fm(op, y)?;
    // The row maximum is a max-pool over the row viewed as a width-C, depth-1 image.
    let x_rows = reshape(&x_fm, [rows, c, 1]).ok_or_else(|| {
        cx.limit(
            op,
            "the input is not a dense NHWC tensor (slice or brick format)",
        )
    })?;

    let name = op.name.as_str();
    let full = [h, w, c];
    let row = [h, w, 1];
    let i32t = ElemType::I32;
    let mut ops = Vec::with_capacity(29);

    // 0: row maximum (same type and zero point as the input, so x - max needs no offset).
    let max = scratch_fm(cx, format!("{name}/max"), row, dt);
    let max = FeatureMap {
        zero_point: in_zp,
        ..max
    };
    let max_rows = reshape(&max, [rows, 1, 1]).ok_or_else(|| internal(op))?;
    ops.push(
        pool_op(name, PoolingMode::Max, x_rows, max_rows, Scale::UNIT).with_kernel(Kernel {
            w: c,
            ..Kernel::UNIT
        }),
    );

    // 1: exp(x - max) = table[x - max + 255]: the OFM zero point 127 plus the hardware's +128
    // offset of signed LUT indices turn the clipped difference into the table index.
    let lut_buf: BufferId = cx.const_buffer(format!("{name}/exp_lut"), table.bytes());
    let exp = scratch_fm(cx, format!("{name}/exp"), full, i32t);
    let mut sub = elementwise(
        name,
        ElementwiseMode::Sub,
        x_fm,
        Some(max),
        exp.clone(),
        Scale::UNIT,
    );
    sub.ofm.zero_point = 127;
    sub.activation = Activation {
        min: -128,
        max: 127,
        clip_range: ActivationClipRange::ForceInt8,
        lut: Some(lut_buf),
        builtin: None,
    };
    ops.push(sub);

    // 2-3: sum of the exponents rescaled to Q12.19 (each rounded, as gemmlowp's Rescale does).
    let c12 = const_i32(cx, format!("{name}/shift12"), ACCUMULATION_INTEGER_BITS);
    let exp_q12 = scratch_fm(cx, format!("{name}/exp_q12"), full, i32t);
    ops.push(rounded(elementwise(
        name,
        ElementwiseMode::Shr,
        exp.clone(),
        Some(c12),
        exp_q12.clone(),
        Scale::UNIT,
    )));
    let sum = scratch_fm(cx, format!("{name}/sum"), row, i32t);
    ops.push(rounded(pool_op(
        name,
        PoolingMode::ReduceSum,
        exp_q12,
        sum.clone(),
        Scale::UNIT,
    )));

    let (recip, right_shift) = reciprocal(cx, name, row, sum, &mut ops);

    // 25: exp * (2 * x) in Q0.31 = exp * x / 2^30 (TFLite's Rescale<0>(ExactMulByPot<-1>(x))).
    let scaled = scratch_fm(cx, format!("{name}/scaled_exp"), full, i32t);
    ops.push(elementwise(
        name,
        ElementwiseMode::Mul,
        exp,
        Some(recip),
        scaled.clone(),
        Scale {
            scale: 1,
            shift: 30,
        },
    ));

    // 26: rounding shift right into the output, plus its zero point, clamped.
    ops.push(rounded(elementwise(
        name,
        ElementwiseMode::Shr,
        scaled,
        Some(right_shift),
        y_fm,
        Scale::UNIT,
    )));

    cx.program.ops.extend(ops);
    Ok(())
}

/// Steps 4-24: the reciprocal of each row's exponent sum (Q12.19, in `sum`) as TFLite computes
/// it: `x = 1 / (2 * half_denominator)` in Q2.29 by three Newton-Raphson steps from
/// `48/17 - 32/17 * d`, and the right shift `35 - clz(sum)` that brings `exp * x` to 8 bits.
/// Returns both row feature maps.
fn reciprocal(
    cx: &mut Lowering<'_>,
    name: &str,
    row: [usize; 3],
    sum: FeatureMap,
    ops: &mut Vec<NpuOp>,
) -> (FeatureMap, FeatureMap) {
    let i32t = ElemType::I32;
    // 4-7: headroom of the sum; the final right shift 35 - clz(sum) (for 8-bit outputs);
    // half_denominator = sum << (clz - 1), i.e. TFLite's RoundingHalfSum(shifted sum - 1, 1).
    let clz = scratch_fm(cx, format!("{name}/clz"), row, i32t);
    ops.push(elementwise(
        name,
        ElementwiseMode::Clz,
        sum.clone(),
        None,
        clz.clone(),
        Scale::UNIT,
    ));
    let c35 = const_i32(
        cx,
        format!("{name}/headroom_offset"),
        ACCUMULATION_INTEGER_BITS + 31 - 8,
    );
    let right_shift = scratch_fm(cx, format!("{name}/right_shift"), row, i32t);
    ops.push(sub_from_const(name, c35, clz.clone(), right_shift.clone()));
    let one = const_i32(cx, format!("{name}/one"), 1);
    let headroom = scratch_fm(cx, format!("{name}/headroom"), row, i32t);
    ops.push(elementwise(
        name,
        ElementwiseMode::Sub,
        clz,
        Some(one),
        headroom.clone(),
        Scale::UNIT,
    ));
    let half_den = scratch_fm(cx, format!("{name}/half_denominator"), row, i32t);
    ops.push(elementwise(
        name,
        ElementwiseMode::Shl,
        sum,
        Some(headroom),
        half_den.clone(),
        Scale::UNIT,
    ));

    // 8-9: x0 = 48/17 - 32/17 * half_denominator (Q2.29).
    let high_mul = Scale {
        scale: 1,
        shift: 31,
    };
    let neg_32_17 = const_i32(cx, format!("{name}/neg_32_over_17"), NEG_32_OVER_17);
    let t = scratch_fm(cx, format!("{name}/nr_start"), row, i32t);
    ops.push(elementwise(
        name,
        ElementwiseMode::Mul,
        half_den.clone(),
        Some(neg_32_17),
        t.clone(),
        high_mul,
    ));
    let c48_17 = const_i32(cx, format!("{name}/48_over_17"), C_48_OVER_17);
    let mut nr_x = scratch_fm(cx, format!("{name}/nr_x0"), row, i32t);
    ops.push(elementwise(
        name,
        ElementwiseMode::Add,
        t,
        Some(c48_17),
        nr_x.clone(),
        Scale::UNIT,
    ));

    // 10-24: three Newton-Raphson steps x += 4 * (x * (1 - half_denominator * x)).
    let one_q2 = const_i32(cx, format!("{name}/one_q2_29"), ONE_Q2_29);
    let four = const_i32(cx, format!("{name}/four"), 4);
    for i in 1..=3 {
        let t1 = scratch_fm(cx, format!("{name}/nr{i}_dx"), row, i32t);
        ops.push(elementwise(
            name,
            ElementwiseMode::Mul,
            nr_x.clone(),
            Some(half_den.clone()),
            t1.clone(),
            high_mul,
        ));
        let t2 = scratch_fm(cx, format!("{name}/nr{i}_one_minus_dx"), row, i32t);
        ops.push(sub_from_const(name, one_q2.clone(), t1, t2.clone()));
        let t3 = scratch_fm(cx, format!("{name}/nr{i}_x_times"), row, i32t);
        ops.push(elementwise(
            name,
            ElementwiseMode::Mul,
            nr_x.clone(),
            Some(t2),
            t3.clone(),
            high_mul,
        ));
        let t4 = scratch_fm(cx, format!("{name}/nr{i}_step"), row, i32t);
        ops.push(elementwise(
            name,
            ElementwiseMode::Mul,
            t3,
            Some(four.clone()),
            t4.clone(),
            Scale::UNIT,
        ));
        let next = scratch_fm(cx, format!("{name}/nr_x{i}"), row, i32t);
        ops.push(elementwise(
            name,
            ElementwiseMode::Add,
            nr_x,
            Some(t4),
            next.clone(),
            Scale::UNIT,
        ));
        nr_x = next;
    }
    (nr_x, right_shift)
}

/// An internal inconsistency (a view of a freshly made dense buffer failed).
fn internal(op: &Op) -> crate::error::Error {
    Lowering::invalid(op, "internal: view of a dense scratch buffer failed")
}

#[cfg(test)]
mod tests {
    use super::super::e2e;
    use super::super::fmap::is_dense;
    use super::*;
    use crate::ir::DType;
    use npu_rt::fixed::{rounding_divide_by_pot, saturating_rounding_doubling_high_mul};

    /// The arithmetic the 29 operations perform, one row at a time, with the hardware's
    /// semantics for each step (products of int32 values scaled by `(1, n)` round at bit n;
    /// SHR/ReduceSum round half up; results saturate to int32). Mirrors `lower` step by step.
    fn decomposed_row(x: &[i8], table: &lut::ExpTable) -> Vec<i8> {
        let sat = |v: i64| v.clamp(i32::MIN as i64, i32::MAX as i64) as i32;
        let mul = |a: i32, b: i32, n: u32| -> i32 {
            let p = a as i64 as i128 * b as i128;
            let r = if n == 0 {
                p
            } else {
                (p + (1i128 << (n - 1))) >> n
            };
            sat(r.clamp(i64::MIN as i128, i64::MAX as i128) as i64)
        };
        let shr = |a: i32, n: i32| -> i32 { mul(a, 1, n as u32) };
        let max = *x.iter().max().unwrap() as i32;
        let exp: Vec<i32> = x
            .iter()
            .map(|&v| {
                let d = (v as i32 - max + 127).clamp(-128, 127);
                table.entries[(d + 128) as usize]
            })
            .collect();
        let sum = sat(exp.iter().map(|&e| shr(e, 12) as i64).sum());
        let clz = (sum as u32).leading_zeros() as i32;
        let right_shift = 35 - clz;
        let half_den = sat((sum as i64) << (clz - 1));
        let mut nr_x = sat(mul(half_den, NEG_32_OVER_17, 31) as i64 + C_48_OVER_17 as i64);
        for _ in 0..3 {
            let t1 = mul(nr_x, half_den, 31);
            let t2 = sat(ONE_Q2_29 as i64 - t1 as i64);
            let t3 = mul(nr_x, t2, 31);
            let t4 = mul(t3, 4, 0);
            nr_x = sat(nr_x as i64 + t4 as i64);
        }
        exp.iter()
            .map(|&e| {
                let scaled = mul(e, nr_x, 30);
                (shr(scaled, right_shift) - 128).clamp(-128, 127) as i8
            })
            .collect()
    }

    /// TFLite's reference int8 softmax, written from `reference_ops::Softmax` (independent of
    /// the decomposition): gemmlowp fixed point with the Newton-Raphson reciprocal.
    fn tflite_row(x: &[i8], table: &lut::ExpTable) -> Vec<i8> {
        let srdhm = saturating_rounding_doubling_high_mul;
        let max = *x.iter().max().unwrap() as i32;
        let exps: Vec<Option<i32>> = x
            .iter()
            .map(|&v| {
                let d = v as i32 - max;
                // The table holds exactly exp_on_negative_values of the rescaled difference.
                (d >= table.diff_min).then(|| table.entries[(d + 255) as usize])
            })
            .collect();
        let sum: i32 = exps
            .iter()
            .flatten()
            .map(|&e| rounding_divide_by_pot(e, 12))
            .sum();
        let headroom_plus_one = (sum as u32).leading_zeros() as i32;
        let bits_over_unit = 12 - headroom_plus_one;
        let shifted_minus_one = ((sum as u32) << headroom_plus_one).wrapping_sub(1 << 31) as i32;
        // one_over_one_plus_x_for_x_in_0_1
        let s = shifted_minus_one as i64 + i32::MAX as i64;
        let half_den = ((s + if s >= 0 { 1 } else { -1 }) / 2) as i32;
        let mut xx = C_48_OVER_17.wrapping_add(srdhm(half_den, NEG_32_OVER_17));
        for _ in 0..3 {
            let hdx = srdhm(half_den, xx);
            let omh = ONE_Q2_29.wrapping_sub(hdx);
            let p = srdhm(xx, omh);
            let p4 = (p as i64 * 4).clamp(i32::MIN as i64, i32::MAX as i64) as i32;
            xx = xx.wrapping_add(p4);
        }
        let shifted_scale = (xx as i64 * 2).clamp(i32::MIN as i64, i32::MAX as i64) as i32;
        exps.iter()
            .map(|e| match e {
                None => -128,
                Some(e) => {
                    // TFLite shifts by up to 34 here; exponents of 32 or more (sums of 2^28 or
                    // more) are undefined behaviour in its C++; this uses the exact rounding.
                    let p = srdhm(shifted_scale, *e);
                    let shift = bits_over_unit + 23;
                    let v = if shift <= 31 {
                        rounding_divide_by_pot(p, shift)
                    } else {
                        ((p as i64 + (1i64 << (shift - 1))) >> shift) as i32
                    };
                    (v - 128).clamp(-128, 127) as i8
                }
            })
            .collect()
    }

    fn npy_i8(path: &str) -> Vec<i8> {
        let p = format!("{}/../fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
        let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
        // .npy v1: magic(6) version(2) header_len(2) header; int8 data follows.
        let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        bytes[10 + header_len..].iter().map(|&b| b as i8).collect()
    }

    /// The decomposition's arithmetic reproduces op_softmax's reference outputs bit for bit.
    #[test]
    fn decomposition_matches_op_softmax_fixture() {
        let table = lut::softmax_exp_table(1.0, 0.007799775805324316f64 as f32).unwrap();
        for k in 0..3 {
            let x = npy_i8(&format!("op_softmax/io/input_{k}.npy"));
            let want = npy_i8(&format!("op_softmax/io/output_{k}.npy"));
            assert_eq!(x.len(), 10);
            assert_eq!(decomposed_row(&x, &table), want, "input {k}");
            assert_eq!(tflite_row(&x, &table), want, "input {k}");
        }
    }

    /// The decomposition equals TFLite's algorithm on many rows (all differences, long rows,
    /// the limits of the input scaling).
    #[test]
    fn decomposition_matches_tflite_on_random_rows() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for &scale in &[0.0078f32, 0.1, 0.5, 1.0 / 64.0, 0.003, 2.0, 1.0e-8, 1.4e-8] {
            let table = lut::softmax_exp_table(1.0, scale).unwrap();
            for len in [1usize, 2, 10, 100, 1000, MAX_DEPTH] {
                let x: Vec<i8> = (0..len).map(|_| next() as i8).collect();
                assert_eq!(
                    decomposed_row(&x, &table),
                    tflite_row(&x, &table),
                    "scale {scale} len {len}"
                );
            }
            // Every element equal to the maximum: the largest possible sum.
            let x = vec![5i8; MAX_DEPTH];
            assert_eq!(decomposed_row(&x, &table), tflite_row(&x, &table));
        }
    }

    fn softmax(beta: f32, shape: &[usize], dtype: DType, in_q: (f32, i32)) -> crate::ir::Graph {
        let zp = if dtype == DType::U8 { 0 } else { -128 };
        e2e::graph(
            OpKind::Softmax { beta },
            (shape, dtype, in_q),
            (shape, (1.0 / 256.0, zp)),
        )
    }

    /// Several rows (broadcasts over C, reversed subtractions), long rows, uint8, beta.
    #[test]
    fn softmax_on_the_virtual_npu_equals_reference() {
        e2e::check(&softmax(1.0, &[4, 37], DType::I8, (0.05, 3)));
        e2e::check(&softmax(1.0, &[1, 3, 5, 20], DType::I8, (0.1, -7)));
        e2e::check(&softmax(2.0, &[1, 1000], DType::I8, (0.02, 0)));
        e2e::check(&softmax(1.0, &[2, 300], DType::U8, (0.03, 128)));
        e2e::check(&softmax(0.5, &[1, 1, 1, 1], DType::I8, (0.25, 0)));
        // beta x scale x 2^26 in [0.5, 1): no left shift (an untrained classifier's logits,
        // e.g. keras.applications MobileNetV3Small with random weights, scale 7.8e-9).
        e2e::check(&softmax(1.0, &[1, 10], DType::I8, (7.8e-9, 0)));
        e2e::check(&softmax(1.0, &[3, 40], DType::I8, (1.4e-8, -5)));
    }

    #[test]
    fn softmax_limits() {
        use npu_rt::ethos_u::config::ETHOS_U55_128;
        let limit = |g: &crate::ir::Graph| {
            let e = super::super::lower(g, &ETHOS_U55_128).unwrap_err();
            assert!(
                matches!(e, crate::error::Error::HardwareLimit { .. }),
                "{e}"
            );
            e.to_string()
        };
        // Output quantization other than TFLite's.
        let mut g = softmax(1.0, &[1, 10], DType::I8, (0.05, 0));
        g.tensors[1].quant = Some(crate::ir::Quantization::per_tensor(1.0 / 128.0, 0));
        assert!(limit(&g).contains("output quantization"));
        // Rows too long for an int32 sum.
        assert!(limit(&softmax(1.0, &[1, 5000], DType::I8, (0.05, 0))).contains("depth 5000"));
        // Input scaling beyond Q5.26.
        assert!(limit(&softmax(1.0, &[1, 10], DType::I8, (100.0, 0))).contains("Q5.26"));
        // ... and below it (a right shift; the reference refuses those too).
        assert!(limit(&softmax(1.0, &[1, 10], DType::I8, (5.0e-9, 0))).contains("Q5.26"));
    }

    #[test]
    fn views() {
        let f = FeatureMap::nhwc(BufferId(3), [2, 3, 4], ElemType::I8, 5);
        let r = reshape(&f, [6, 4, 1]).unwrap();
        assert_eq!(r.strides, [4, 1, 1]);
        assert_eq!(r.zero_point, 5);
        assert!(reshape(&f, [6, 5, 1]).is_none());
        // A channel slice of a wider tensor is not dense.
        let slice = FeatureMap {
            strides: [24, 8, 1],
            ..f
        };
        assert!(!is_dense(&slice));
        assert!(reshape(&slice, [6, 4, 1]).is_none());
        assert!(is_dense(&FeatureMap::nhwc(
            BufferId(0),
            [1, 1, 7],
            ElemType::I32,
            0
        )));
    }
}
