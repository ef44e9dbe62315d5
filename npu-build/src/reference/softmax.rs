//! Softmax over the last axis.
//!
//! 8-bit: TFLite's reference kernel (`reference_ops::Softmax` for quantized types, chosen by
//! `activations.cc` when the kernel type is `kReference`): the input differences from the row
//! maximum are scaled to Q5.26 fixed point, exponentiated with gemmlowp's
//! `exp_on_negative_values`, summed in Q12.19, and divided with gemmlowp's
//! `one_over_one_plus_x_for_x_in_0_1` reciprocal. The output scale is fixed at 1/256 with the zero
//! point at the type's minimum, as TFLite requires.
//!
//! Float: the reference float kernel (`exp((x - max) * beta)` in single precision, divided by the
//! single-precision sum).

use super::util::{QInt, Rescale, bad_data, node_err, per_tensor, with_qint, zeroed};
use super::{Kernel, Prepared};
use crate::error::{Error, Result};
use crate::ir::quant::{rounding_divide_by_pot, saturating_rounding_doubling_high_mul as srdhm};
use crate::ir::{DType, Graph, Op};
use crate::value::Data;

/// gemmlowp's `SaturatingRoundingMultiplyByPOT<e>` on a raw 32-bit value.
fn mul_pot(x: i32, e: i32) -> i32 {
    if e > 0 {
        let threshold = (1i32 << (31 - e)) - 1;
        if x > threshold {
            i32::MAX
        } else if x < -threshold {
            i32::MIN
        } else {
            x.wrapping_mul(1 << e)
        }
    } else if e < 0 {
        rounding_divide_by_pot(x, -e)
    } else {
        x
    }
}

/// gemmlowp's `RoundingHalfSum` for 32-bit values.
fn rounding_half_sum(a: i32, b: i32) -> i32 {
    let sum = i64::from(a) + i64::from(b);
    let sign = if sum >= 0 { 1 } else { -1 };
    ((sum + sign) / 2) as i32
}

/// `exp(a)` for `a` in [-1/4, 0), Q0.31 in and out (gemmlowp's Taylor expansion around -1/8).
fn exp_on_interval_between_negative_one_quarter_and_0_excl(a: i32) -> i32 {
    const CONSTANT_TERM: i32 = 1_895_147_668; // exp(-1/8)
    const ONE_THIRD: i32 = 715_827_883;
    let x = a.wrapping_add(1 << 28); // a + 1/8
    let x2 = srdhm(x, x);
    let x3 = srdhm(x2, x);
    let x4 = srdhm(x2, x2);
    let x4_over_4 = mul_pot(x4, -2);
    let poly = mul_pot(
        srdhm(x4_over_4.wrapping_add(x3), ONE_THIRD).wrapping_add(x2),
        -1,
    );
    CONSTANT_TERM.wrapping_add(srdhm(CONSTANT_TERM, x.wrapping_add(poly)))
}

/// `exp(a)` for `a <= 0` in Q5.26, result in Q0.31 (gemmlowp's `exp_on_negative_values` with
/// 5 integer bits).
fn exp_on_negative_values(a: i32) -> i32 {
    const INTEGER_BITS: i32 = 5;
    const FRACTIONAL_BITS: i32 = 31 - INTEGER_BITS;
    let one_quarter = 1i32 << (FRACTIONAL_BITS - 2);
    let mask = one_quarter - 1;
    let a_mod_quarter_minus_one_quarter = (a & mask).wrapping_sub(one_quarter);
    let mut result = exp_on_interval_between_negative_one_quarter_and_0_excl(mul_pot(
        a_mod_quarter_minus_one_quarter,
        INTEGER_BITS,
    ));
    let remainder = a_mod_quarter_minus_one_quarter.wrapping_sub(a);
    // exp(-2^e) for e = -2..=4 in Q0.31: multiply in when bit e of the remainder is set.
    const BARREL: [(i32, i32); 7] = [
        (-2, 1_672_461_947),
        (-1, 1_302_514_674),
        (0, 790_015_084),
        (1, 290_630_308),
        (2, 39_332_535),
        (3, 720_401),
        (4, 242),
    ];
    for (e, m) in BARREL {
        if remainder & (1 << (FRACTIONAL_BITS + e)) != 0 {
            result = srdhm(result, m);
        }
    }
    if a == 0 { i32::MAX } else { result }
}

/// `1 / (1 + a)` for `a` in [0, 1), Q0.31 (gemmlowp's Newton-Raphson division).
fn one_over_one_plus_x_for_x_in_0_1(a: i32) -> i32 {
    let half_denominator = rounding_half_sum(a, i32::MAX);
    const C48_17: i32 = 1_515_870_810; // 48/17 in Q2.29
    const CNEG32_17: i32 = -1_010_580_540; // -32/17 in Q2.29
    const ONE_Q2: i32 = 1 << 29;
    let mut x = C48_17.wrapping_add(srdhm(half_denominator, CNEG32_17));
    for _ in 0..3 {
        let half_denominator_times_x = srdhm(half_denominator, x);
        let one_minus = ONE_Q2.wrapping_sub(half_denominator_times_x);
        x = x.wrapping_add(mul_pot(srdhm(x, one_minus), 2));
    }
    mul_pot(x, 1)
}

/// TFLite's `GetReciprocal`: `1 / x` for `x` in Q(integer_digits), as a Q0.31 value and a number of
/// bits over one.
fn reciprocal(x: i32, integer_digits: i32) -> (i32, i32) {
    let headroom_plus_one = (x as u32).leading_zeros() as i32;
    let num_bits_over_unit = integer_digits - headroom_plus_one;
    let shifted = (x as u32)
        .checked_shl(headroom_plus_one as u32)
        .unwrap_or(0)
        .wrapping_sub(1 << 31) as i32;
    (
        one_over_one_plus_x_for_x_in_0_1(shifted),
        num_bits_over_unit,
    )
}

pub struct Softmax {
    depth: usize,
    len: usize,
    kind: Kind,
}

enum Kind {
    Quantized {
        rescale: Rescale,
        diff_min: i32,
        in_dtype: DType,
        out_dtype: DType,
    },
    Float {
        beta: f32,
    },
}

impl Softmax {
    pub fn prepare(g: &Graph, op: &Op, beta: f32) -> Result<Prepared> {
        if op.inputs.len() != 1 || op.outputs.len() != 1 {
            return Err(node_err(op, "expects one input and one output"));
        }
        let (xt, ot) = (&g.tensors[op.inputs[0]], &g.tensors[op.outputs[0]]);
        if xt.shape != ot.shape || xt.shape.is_empty() {
            return Err(node_err(
                op,
                format!(
                    "input {:?} and output {:?} must have one non-scalar shape",
                    xt.shape, ot.shape
                ),
            ));
        }
        let depth = *xt.shape.last().unwrap_or(&1);
        let len = xt.elements();
        let kind = match (xt.dtype, ot.dtype) {
            (DType::F32, DType::F32) => Kind::Float { beta },
            (DType::I8 | DType::U8, DType::I8 | DType::U8) => {
                let (si, _) = per_tensor(g, op, op.inputs[0])?;
                let (so, zo) = per_tensor(g, op, op.outputs[0])?;
                let zmin = ot.dtype.int_range().map_or(0, |r| r.0) as i32;
                if zo != zmin || (so - 1.0 / 256.0).abs() > 0.001 / 256.0 {
                    return Err(node_err(
                        op,
                        format!(
                            "8-bit softmax needs output scale 1/256 and zero point {zmin} \
                             (got {so}, {zo})"
                        ),
                    ));
                }
                // PreprocessSoftmaxScaling with 5 integer bits (Q5.26 input differences).
                const SCALED_DIFF_INTEGER_BITS: i32 = 5;
                let real = (f64::from(beta)
                    * f64::from(si)
                    * f64::from(1i32 << (31 - SCALED_DIFF_INTEGER_BITS)))
                .min(f64::from(i32::MAX));
                let rescale = Rescale::new(op, real, "input")?;
                if rescale.shift < 0 {
                    return Err(node_err(
                        op,
                        format!("input scale {si} with beta {beta} is too small"),
                    ));
                }
                // CalculateInputRadius(5, left_shift, 31): inputs further below the row maximum
                // than this contribute nothing.
                let radius = (f64::from((1i32 << SCALED_DIFF_INTEGER_BITS) - 1)
                    * (1i64 << (31 - SCALED_DIFF_INTEGER_BITS)) as f64
                    / (1i64 << rescale.shift) as f64)
                    .floor();
                Kind::Quantized {
                    rescale,
                    diff_min: -(radius as i32),
                    in_dtype: xt.dtype,
                    out_dtype: ot.dtype,
                }
            }
            (a, b) => {
                return Err(node_err(
                    op,
                    format!(
                        "softmax from {a} to {b} is not supported (f32 -> f32, 8-bit -> 8-bit)"
                    ),
                ));
            }
        };
        Ok(Prepared::new(
            Softmax { depth, len, kind },
            vec![op.inputs[0]],
        ))
    }

    fn run_quantized<I: QInt, O: QInt>(
        &self,
        x: &[I],
        rescale: Rescale,
        diff_min: i32,
    ) -> Result<Data> {
        let mut out = zeroed::<O>(self.len, "softmax output")?;
        let d = self.depth;
        if d == 0 {
            return Ok(O::wrap(out));
        }
        let out_bits = if O::MAX > 255 { 16 } else { 8 };
        for (row, orow) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
            let max = row.iter().map(|v| v.get()).max().unwrap_or(0);
            let scaled = |v: i32| {
                // MultiplyByQuantizedMultiplierGreaterThanOne.
                srdhm(v.wrapping_mul(1 << rescale.shift), rescale.multiplier)
            };
            let mut sum: i32 = 0; // Q12.19
            for v in row {
                let diff = v.get() - max;
                if diff >= diff_min {
                    let e = exp_on_negative_values(scaled(diff));
                    sum = sum.wrapping_add(rounding_divide_by_pot(e, 12));
                }
            }
            let (shifted_scale, bits_over_unit) = reciprocal(sum, 12);
            let exponent = bits_over_unit + 31 - out_bits;
            if !(0..=31).contains(&exponent) {
                return Err(Error::Other(format!(
                    "softmax: reciprocal exponent {exponent} out of range (row too long?)"
                )));
            }
            for (o, v) in orow.iter_mut().zip(row) {
                let diff = v.get() - max;
                *o = if diff >= diff_min {
                    let e = exp_on_negative_values(scaled(diff));
                    let unsat = rounding_divide_by_pot(srdhm(shifted_scale, e), exponent);
                    O::put(unsat.wrapping_add(O::MIN).clamp(O::MIN, O::MAX))
                } else {
                    O::put(O::MIN)
                };
            }
        }
        Ok(O::wrap(out))
    }

    fn run_float(&self, x: &[f32], beta: f32) -> Data {
        let mut out = vec![0f32; x.len()];
        let d = self.depth.max(1);
        for (row, orow) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0f32;
            for (o, &v) in orow.iter_mut().zip(row) {
                *o = ((v - max) * beta).exp();
                sum += *o;
            }
            for o in orow.iter_mut() {
                *o /= sum;
            }
        }
        Data::F32(out)
    }
}

impl Kernel for Softmax {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        match &self.kind {
            Kind::Float { beta } => match inputs[0] {
                Data::F32(x) => Ok(self.run_float(x, *beta)),
                _ => Err(bad_data()),
            },
            Kind::Quantized {
                rescale,
                diff_min,
                in_dtype,
                out_dtype,
            } => with_qint!(*out_dtype, O => {
                with_qint!(*in_dtype, I => {
                    let x = I::slice(inputs[0]).ok_or_else(bad_data)?;
                    self.run_quantized::<I, O>(x, *rescale, *diff_min)
                }, else Err(bad_data()))
            }, else Err(bad_data())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_of_zero_is_one() {
        assert_eq!(exp_on_negative_values(0), i32::MAX);
    }

    #[test]
    fn exp_is_close_to_float() {
        for &v in &[-0.1f64, -0.5, -1.0, -2.5, -7.0, -20.0] {
            let raw = (v * f64::from(1 << 26)) as i32;
            let got = f64::from(exp_on_negative_values(raw)) / 2f64.powi(31);
            assert!((got - v.exp()).abs() < 1e-6, "{v}: {got} vs {}", v.exp());
        }
    }

    #[test]
    fn reciprocal_is_close_to_float() {
        for &x in &[1.0f64, 1.5, 3.0, 10.0, 100.0] {
            let raw = (x * f64::from(1 << 19)) as i32;
            let (r, bits) = reciprocal(raw, 12);
            let got = f64::from(r) / 2f64.powi(31) / 2f64.powi(bits);
            assert!((got - 1.0 / x).abs() < 1e-6 / x, "{x}: {got}");
        }
    }
}
