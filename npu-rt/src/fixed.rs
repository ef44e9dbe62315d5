//! Fixed-point arithmetic of TFLite's integer kernels (gemmlowp's primitives), on raw `i32`
//! values: the one home of these functions. The CPU kernels and `npu-build` (its reference
//! interpreter, importer and NPU lowering) use them; the NPU's own rounding is
//! [`crate::ethos_u::numerics`].

/// gemmlowp's `SaturatingRoundingDoublingHighMul`: `(a * b * 2) >> 32`, rounded to nearest, with
/// the single overflow case (`MIN * MIN`) saturated.
#[inline(always)]
pub fn srdhm(a: i32, b: i32) -> i32 {
    if a == i32::MIN && b == i32::MIN {
        return i32::MAX;
    }
    let ab = a as i64 * b as i64;
    let nudge: i64 = if ab >= 0 { 1 << 30 } else { 1 - (1 << 30) };
    ((ab + nudge) / (1i64 << 31)) as i32
}

/// gemmlowp's `RoundingDivideByPOT`: `x / 2^exponent` rounded half away from zero.
/// `exponent` is clamped to `0..=31` (larger shifts are undefined in C).
#[inline(always)]
pub fn rounding_divide_by_pot(x: i32, exponent: i32) -> i32 {
    let exponent = exponent.clamp(0, 31);
    let mask: i32 = ((1i64 << exponent) - 1) as i32;
    let remainder = x & mask;
    let threshold = (mask >> 1) + i32::from(x < 0);
    (x >> exponent) + i32::from(remainder > threshold)
}

/// TFLite's `MultiplyByQuantizedMultiplier(x, multiplier, shift)`: a Q31 multiplier and a
/// power-of-two shift (positive = left).
#[inline(always)]
pub fn multiply_by_quantized_multiplier(x: i32, multiplier: i32, shift: i32) -> i32 {
    let left = shift.clamp(0, 31);
    let right = (-shift).clamp(0, 31);
    rounding_divide_by_pot(srdhm(x.wrapping_mul(1i32 << left), multiplier), right)
}

/// gemmlowp's `SaturatingRoundingMultiplyByPOT<e>` on a raw 32-bit value.
/// `x * multiplier * 2^(shift - 31)` rounded once, half up, saturated to i32: the NPU's
/// NATURAL output rounding with the scale record `(multiplier, 31 - shift)`, which is what
/// onnxruntime's one float rounding of `acc * scale` becomes in fixed point. `shift` is clamped
/// to `-31..=30` (a right shift of 1 to 62 bits).
pub fn multiply_round_once(x: i32, multiplier: i32, shift: i32) -> i32 {
    let s = 31 - shift.clamp(-31, 30);
    let p = i64::from(x) * i64::from(multiplier) + (1i64 << (s - 1));
    (p >> s).clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

pub fn mul_pot(x: i32, e: i32) -> i32 {
    if e > 0 {
        let e = e.min(31);
        let threshold = ((1i64 << (31 - e)) - 1) as i32;
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
pub fn exp_on_negative_values(a: i32) -> i32 {
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
    // exp(-2^e) for e = -2..=4 in Q0.31: multiplied in when bit e of the remainder is set.
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

/// TFLite's `GetReciprocal`: `1 / x` for `x` in Q(integer_digits), as a Q0.31 value and a number
/// of bits over one.
pub fn reciprocal(x: i32, integer_digits: i32) -> (i32, i32) {
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

/// `x` rounded to the nearest integer, ties to even (`f32::round_ties_even`, which `core` lacks),
/// as an `f64` (exact: every `f32` integer is an `f64` integer).
pub fn round_ties_even(x: f32) -> f64 {
    // 2^23: from here on every f32 is an integer (and NaN/inf pass through).
    if x.is_nan() || x.abs() >= 8_388_608.0 {
        return f64::from(x);
    }
    let t = x as i32; // truncation toward zero, exact in this range
    let frac = x - t as f32; // exact
    let r = if frac > 0.5 || (frac == 0.5 && t & 1 != 0) {
        t + 1
    } else if frac < -0.5 || (frac == -0.5 && t & 1 != 0) {
        t - 1
    } else {
        t
    };
    f64::from(r)
}

#[cfg(test)]
mod tests {

    #[test]
    fn round_once_is_one_rounding_half_up() {
        // The encoder fixture's attention scores: 1626 * 1943700146 / 2^38 = -11.4977, which
        // TFLite's two roundings take to -12 (via -1471.71 -> -1472, then -11.5 -> -12).
        assert_eq!(multiply_round_once(-1626, 1_943_700_146, -7), -11);
        assert_eq!(
            multiply_by_quantized_multiplier(-1626, 1_943_700_146, -7),
            -12
        );
        // Exact values against the rational result, half up, over a sweep.
        for &(m, shift) in &[
            (1_073_741_824, -1),
            (1_518_500_250, -10),
            (2_147_483_647, 3),
        ] {
            for x in (-100_000i64..100_000).step_by(997) {
                let p = i128::from(x) * i128::from(m);
                let s = 31 - shift;
                let d = 1i128 << s;
                let want = (p + d / 2).div_euclid(d);
                assert_eq!(
                    i128::from(multiply_round_once(x as i32, m, shift)),
                    want,
                    "{x} {m} {shift}"
                );
            }
        }
        // Saturates instead of wrapping.
        assert_eq!(multiply_round_once(i32::MAX, i32::MAX, 30), i32::MAX);
        assert_eq!(multiply_round_once(i32::MIN, i32::MAX, 30), i32::MIN);
    }

    use super::*;

    #[test]
    fn rounds_ties_to_even() {
        for (x, want) in [
            (0.5f32, 0.0f64),
            (1.5, 2.0),
            (2.5, 2.0),
            (-0.5, 0.0),
            (-1.5, -2.0),
            (-2.5, -2.0),
            (0.49999997, 0.0),
            (2.5000002, 3.0),
            (-7.7, -8.0),
            (1e10, 1e10),
        ] {
            assert_eq!(round_ties_even(x), want, "{x}");
        }
        assert!(round_ties_even(f32::NAN).is_nan());
    }

    #[test]
    fn exp_of_zero_is_one() {
        assert_eq!(exp_on_negative_values(0), i32::MAX);
    }

    #[test]
    fn quantized_multiplier_halves() {
        // 0.5 = 2^30 / 2^31 with shift 0.
        assert_eq!(multiply_by_quantized_multiplier(100, 1 << 30, 0), 50);
        // -1.5: the doubling high multiply truncates its nudged product toward zero.
        assert_eq!(multiply_by_quantized_multiplier(-3, 1 << 30, 0), -1);
        assert_eq!(multiply_by_quantized_multiplier(100, 1 << 30, 2), 200);
    }
}
