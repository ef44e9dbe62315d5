//! Fixed-point arithmetic of TFLite's integer kernels (gemmlowp's primitives), on raw `i32`
//! values: the one home of these functions. The CPU kernels and `npu-build` (its reference
//! interpreter, importer and NPU lowering) use them; the NPU's own rounding is
//! [`crate::ethos_u::numerics`].

// Short names for the formulas below.
use self::saturating_rounding_doubling_high_mul as srdhm;
use self::saturating_rounding_multiply_by_pot as mul_pot;

/// gemmlowp's `SaturatingRoundingDoublingHighMul`: `(a * b * 2) >> 32`, rounded to nearest, with
/// the single overflow case (`MIN * MIN`) saturated.
#[inline(always)]
pub fn saturating_rounding_doubling_high_mul(a: i32, b: i32) -> i32 {
    if a == i32::MIN && b == i32::MIN {
        return i32::MAX;
    }
    let ab = a as i64 * b as i64;
    let nudge: i64 = if ab >= 0 { 1 << 30 } else { 1 - (1 << 30) };
    ((ab + nudge) / (1i64 << 31)) as i32
}

/// gemmlowp's `RoundingDivideByPOT`: `x / 2^exponent` rounded half away from zero.
/// `exponent` is clamped to `0..=31` (larger shifts are undefined in C).
///
/// gemmlowp asserts `0 <= exponent <= 31`, so every valid call gives TFLite's value; the clamp
/// (rather than npu-build's former debug assertion) keeps bad input from panicking or from a
/// wrapped shift count, and is the range [`FastMultiplier`] clamps its shift to.
#[inline(always)]
pub fn rounding_divide_by_pot(x: i32, exponent: i32) -> i32 {
    let exponent = exponent.clamp(0, 31);
    let mask: i32 = ((1i64 << exponent) - 1) as i32;
    let remainder = x & mask;
    let threshold = (mask >> 1) + i32::from(x < 0);
    (x >> exponent) + i32::from(remainder > threshold)
}

/// TFLite's `MultiplyByQuantizedMultiplier(x, multiplier, shift)`: a Q31 multiplier and a
/// power-of-two shift (positive = left), rounded twice as its reference kernels do (the default
/// build, without `TFLITE_SINGLE_ROUNDING`); `x << shift` wraps as TFLite's `x * (1 << shift)`
/// does on its targets.
///
/// Both shifts are clamped to `0..=31`, the range in which the C code is defined (TFLite's
/// kernels check their factors first, and [`quantize_multiplier`] never gives a shift below
/// -31); npu-build's former copy panicked in debug builds and wrapped the shift count in release
/// builds outside it.
///
/// ```
/// use npu_rt::fixed::multiply_by_quantized_multiplier;
/// // 5 * 0.5 = 2.5 rounds up; -2.5 rounds to -2 (the high multiply's nudge).
/// assert_eq!(multiply_by_quantized_multiplier(5, 1 << 30, 0), 3);
/// assert_eq!(multiply_by_quantized_multiplier(-5, 1 << 30, 0), -2);
/// ```
#[inline(always)]
pub fn multiply_by_quantized_multiplier(x: i32, multiplier: i32, shift: i32) -> i32 {
    let left = shift.clamp(0, 31);
    let right = (-shift).clamp(0, 31);
    rounding_divide_by_pot(srdhm(x.wrapping_mul(1i32 << left), multiplier), right)
}

/// `frexp`: `x = m * 2^e` with `0.5 <= |m| < 1` (or `m = 0`).
pub fn frexp(x: f64) -> (f64, i32) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    if exp == 0 {
        // Subnormal: scale into the normal range first.
        let (m, e) = frexp(x * f64::from_bits(0x4350_0000_0000_0000)); // 2^54
        return (m, e - 54);
    }
    let m = f64::from_bits((bits & !(0x7ff << 52)) | (1022 << 52));
    (m, exp - 1022)
}

/// TFLite's `QuantizeMultiplier`: a real multiplier as a Q31 fixed-point value and a power-of-two
/// shift (positive = left), such that `m ≈ q * 2^(shift - 31)`. Factors below about 2^-32 become
/// `(0, 0)` as in TFLite; larger ones are not capped (TFLite caps the shift at 30 only when built
/// with `TFLITE_SINGLE_ROUNDING`, which its reference kernels are not).
///
/// ```
/// use npu_rt::fixed::quantize_multiplier;
/// assert_eq!(quantize_multiplier(0.5), (1 << 30, 0));
/// assert_eq!(quantize_multiplier(0.0), (0, 0));
/// ```
pub fn quantize_multiplier(m: f64) -> (i32, i32) {
    if m == 0.0 {
        return (0, 0);
    }
    let (q, mut shift) = frexp(m);
    let mut q_fixed = round_half_away(q * (1i64 << 31) as f64);
    if q_fixed == 1i64 << 31 {
        q_fixed /= 2;
        shift += 1;
    }
    if shift < -31 {
        shift = 0;
        q_fixed = 0;
    }
    (q_fixed as i32, shift)
}

/// `v` rounded half away from zero, as C's `round` (`f64::round` is not in `core`), saturated to
/// i64 as `as` saturates. Exact: below 2^52 the truncation and the fraction are exact, from there
/// on every `f64` is an integer.
fn round_half_away(v: f64) -> i64 {
    let t = v as i64;
    let frac = v - t as f64;
    if frac >= 0.5 {
        t.saturating_add(1)
    } else if frac <= -0.5 {
        t.saturating_sub(1)
    } else {
        t
    }
}

/// [`multiply_by_quantized_multiplier`] with its constants precomputed, for hot loops.
///
/// Same results for every input: gemmlowp's high multiply `(x * m + nudge) / 2^31` (truncating,
/// with a sign-dependent nudge) equals `(x * m + 2^30) >> 31` (flooring) for every product except
/// `i32::MIN * i32::MIN`, which is handled; the rounding divide by `2^e` (half away from zero)
/// equals `(t + 2^(e-1) - [t < 0]) >> e`.
///
/// ```
/// use npu_rt::fixed::{FastMultiplier, multiply_by_quantized_multiplier};
/// let f = FastMultiplier::new(1 << 30, -1);
/// assert_eq!(f.apply(-10), multiply_by_quantized_multiplier(-10, 1 << 30, -1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FastMultiplier {
    multiplier: i64,
    left: u32,
    right: u32,
    /// `2^(right - 1)`, or 0 when `right` is 0.
    round: i64,
    /// 1 when `right > 0` (negative values then round with one less), else 0.
    negative_adjust: i64,
    /// The multiplier is `i32::MIN`, so the high multiply can saturate.
    can_saturate: bool,
}

impl FastMultiplier {
    /// Precomputes `multiply_by_quantized_multiplier(_, multiplier, shift)`; `shift` is clamped to
    /// `-31..=31` (the range in which that function is defined).
    pub fn new(multiplier: i32, shift: i32) -> Self {
        let shift = shift.clamp(-31, 31);
        let right = (-shift).max(0) as u32;
        FastMultiplier {
            multiplier: i64::from(multiplier),
            left: shift.max(0) as u32,
            right,
            round: if right == 0 { 0 } else { 1 << (right - 1) },
            negative_adjust: i64::from(right > 0),
            can_saturate: multiplier == i32::MIN,
        }
    }

    /// Whether [`FastMultiplier::apply_simple`] may be used: no left shift and no saturation
    /// (true for every factor below one that `quantize_multiplier` encodes).
    pub fn is_simple(self) -> bool {
        self.left == 0 && !self.can_saturate
    }

    /// [`FastMultiplier::apply`] for a multiplier that [`is_simple`](FastMultiplier::is_simple).
    #[inline(always)]
    pub fn apply_simple(self, x: i32) -> i32 {
        debug_assert!(self.is_simple());
        let t = (i64::from(x) * self.multiplier + (1 << 30)) >> 31;
        ((t + self.round - ((t >> 63) & self.negative_adjust)) >> self.right) as i32
    }

    /// `multiply_by_quantized_multiplier(x, multiplier, shift)`.
    #[inline(always)]
    pub fn apply(self, x: i32) -> i32 {
        let x = x.wrapping_shl(self.left);
        if self.can_saturate && x == i32::MIN {
            return rounding_divide_by_pot(i32::MAX, self.right as i32);
        }
        let t = (i64::from(x) * self.multiplier + (1 << 30)) >> 31;
        // Branch-free rounding divide: `t >> 63` is -1 for negative t, 0 otherwise.
        ((t + self.round - ((t >> 63) & self.negative_adjust)) >> self.right) as i32
    }
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

/// gemmlowp's `SaturatingRoundingMultiplyByPOT<e>` on a raw 32-bit value: `x * 2^e`, saturated
/// to i32 for `e > 0`, [`rounding_divide_by_pot`] for `e < 0`. `e` is clamped to `..=31` (a
/// compile-time constant in gemmlowp, always smaller).
pub fn saturating_rounding_multiply_by_pot(x: i32, e: i32) -> i32 {
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
/// 5 integer bits, TFLite's `kScaledDiffIntegerBits`): the 8-bit softmax's exponential, of the
/// CPU kernel, the reference interpreter and the NPU's exponent table alike.
///
/// The input is split into its fractional part modulo 1/4 (a Taylor expansion) and a remainder
/// whose set bits multiply in `exp(-2^k)` for k = -2..=4.
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

/// TFLite's `DownScaleInt32ToInt16Multiplier`: the Q31 multiplier rounded to Q15.
pub fn downscale_int32_to_int16_multiplier(m: i32) -> i16 {
    const ROUNDING: i32 = 1 << 15;
    if m >= i32::MAX - ROUNDING {
        i16::MAX
    } else {
        ((m + ROUNDING) >> 16) as i16
    }
}

/// gemmlowp's 16-bit `SaturatingRoundingDoublingHighMul`.
pub fn saturating_rounding_doubling_high_mul_i16(a: i16, b: i16) -> i16 {
    if a == i16::MIN && b == i16::MIN {
        return i16::MAX;
    }
    let ab = i32::from(a) * i32::from(b);
    let nudge = if ab >= 0 { 1 << 14 } else { 1 - (1 << 14) };
    ((ab + nudge) / (1 << 15)) as i16
}

/// TFLite's `SaturatingDoublingHighMul` (16-bit, truncating toward zero).
pub fn saturating_doubling_high_mul_i16(a: i16, b: i16) -> i16 {
    if a == i16::MIN && b == i16::MIN {
        return i16::MAX;
    }
    ((i32::from(a) * i32::from(b)) / (1 << 15)) as i16
}

/// TFLite's 16-bit `SaturatingLeftShift`: `v * 2^amount` saturated to i16 (`amount` clamped to
/// `0..=48`; TFLite's callers shift by less than 31).
pub fn saturating_left_shift_i16(v: i16, amount: i32) -> i16 {
    // Clamped so that bad input cannot overflow the shift; 0..=47 already saturates every value.
    let amount = amount.clamp(0, 48);
    (i64::from(v) * (1i64 << amount)).clamp(i64::from(i16::MIN), i64::from(i16::MAX)) as i16
}

/// gemmlowp's `RoundingDivideByPOT` on a 16-bit value.
pub fn rounding_divide_by_pot_i16(x: i16, exponent: i32) -> i16 {
    // The 32-bit version gives the same result for values that fit 16 bits.
    rounding_divide_by_pot(i32::from(x), exponent) as i16
}

/// TFLite's `GetInvSqrtQuantizedMultiplierExp(value, kReverseShift = -1)` for `value >= 1`:
/// `1 / sqrt(value)` as a Q31 multiplier and a left shift, by five Newton-Raphson steps in
/// gemmlowp's Q3.28 fixed point.
pub fn inv_sqrt_quantized_multiplier_exp(value: i32) -> (i32, i32) {
    if value <= 1 {
        return (i32::MAX, 0);
    }
    let mut input = value;
    let mut shift = 11i32;
    while input >= 1 << 29 {
        input /= 4;
        shift += 1;
    }
    // Normalise into [2^27, 2^29) by whole pairs of bits.
    let pairs = (input.leading_zeros() - 1) / 2 - 1;
    shift -= pairs as i32;
    input <<= 2 * pairs;
    // Q3.28: the input halved, the constant 1.5 and the starting guess 1.
    let half_input = rounding_divide_by_pot(input >> 1, 1);
    let half_three = (1 << 28) + (1 << 27);
    let mut x = 1i32 << 28;
    for _ in 0..5 {
        // x^3 is Q9.22 after two Q3 products: back to Q3 by a saturating shift of 6.
        let x3 = saturating_rounding_multiply_by_pot(srdhm(srdhm(x, x), x), 6);
        // Q6 products, their difference back to Q3 by a saturating shift of 3.
        let d = srdhm(half_three, x).wrapping_sub(srdhm(half_input, x3));
        x = saturating_rounding_multiply_by_pot(d, 3);
    }
    /// sqrt(2) / 2 in Q0.31.
    const HALF_SQRT_2: i32 = 1_518_500_250;
    let mut m = srdhm(x, HALF_SQRT_2);
    if shift < 0 {
        m = m.wrapping_shl((-shift) as u32);
        shift = 0;
    }
    (m, -shift)
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
    extern crate std;

    #[test]
    fn frexp_matches_definition() {
        for &x in &[1.0, 0.75, 3.0, 1e-10, 123456.789, 0.5, 2.0f64.powi(-1070)] {
            let (m, e) = frexp(x);
            assert!((0.5..1.0).contains(&m), "{x}: {m}");
            // Scale in two steps: 2^e alone underflows to 0 for subnormal x.
            assert_eq!(m * 2f64.powi(e + 64) * 2f64.powi(-64), x);
        }
    }

    #[test]
    fn multiplier_rounding() {
        // 0.75 = 0.75 * 2^0 -> q = round(0.75 * 2^31)
        assert_eq!(quantize_multiplier(0.75), (1610612736, 0));
        // 3.0 = 0.75 * 2^2
        assert_eq!(quantize_multiplier(3.0), (1610612736, 2));
        // 100 * 0.75 with shift 0 = 75
        assert_eq!(multiply_by_quantized_multiplier(100, 1610612736, 0), 75);
        // 5 * 0.5 = 2.5 rounds up; -2.5 rounds to -2: gemmlowp's high multiply nudges negative
        // products by 1 - 2^30, so a negative tie rounds toward zero (as in TFLite).
        assert_eq!(multiply_by_quantized_multiplier(5, 1 << 30, 0), 3);
        assert_eq!(multiply_by_quantized_multiplier(-5, 1 << 30, 0), -2);
        // The rounding divide is symmetric: -10 * 0.25 = -2.5 -> -3, 10 * 0.25 -> 3.
        assert_eq!(multiply_by_quantized_multiplier(-10, 1 << 30, -1), -3);
        assert_eq!(multiply_by_quantized_multiplier(10, 1 << 30, -1), 3);
    }

    #[test]
    fn fast_multiplier_matches() {
        // A small deterministic generator covering extremes and random values.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let special = [
            0,
            1,
            -1,
            2,
            -2,
            255,
            -255,
            i32::MAX,
            i32::MIN,
            i32::MIN + 1,
            1 << 30,
            -(1 << 30),
        ];
        for k in 0..200_000 {
            let r = next();
            let x = if k % 7 == 0 {
                special[(r % special.len() as u64) as usize]
            } else {
                (r >> 32) as i32 >> (r % 24)
            };
            let m = if k % 11 == 0 {
                special[((r >> 8) % special.len() as u64) as usize]
            } else {
                (next() >> 33) as i32 | (1 << 30)
            };
            let shift = ((r >> 40) % 40) as i32 - 31;
            let shift = if shift > 0 { shift % 8 } else { shift };
            let f = FastMultiplier::new(m, shift);
            let want = multiply_by_quantized_multiplier(x, m, shift);
            assert_eq!(f.apply(x), want, "x={x} m={m} shift={shift}");
            if f.is_simple() {
                assert_eq!(f.apply_simple(x), want, "x={x} m={m} shift={shift}");
            }
        }
    }

    #[test]
    fn exp_values_are_close_to_exp() {
        for a in [-1i32 << 26, -3 << 25, -(1 << 24) - 12345, -31 << 26, -1] {
            let got = f64::from(exp_on_negative_values(a)) / 2f64.powi(31);
            let want = (f64::from(a) / 2f64.powi(26)).exp();
            assert!((got - want).abs() < 1e-6, "a={a}: {got} vs {want}");
        }
    }

    #[test]
    fn out_of_range_shifts_clamp() {
        // Outside TFLite's range the shifts clamp to 31, for the plain and the precomputed forms.
        for x in [i32::MIN, -1_000_000, -3, 0, 7, 1 << 30, i32::MAX] {
            assert_eq!(rounding_divide_by_pot(x, 40), rounding_divide_by_pot(x, 31));
            assert_eq!(rounding_divide_by_pot(x, -4), x);
            for shift in [-40, 40] {
                let m = 1_518_500_250;
                let want = multiply_by_quantized_multiplier(x, m, shift.clamp(-31, 31));
                assert_eq!(multiply_by_quantized_multiplier(x, m, shift), want);
                assert_eq!(FastMultiplier::new(m, shift).apply(x), want);
            }
        }
    }

    #[test]
    fn round_half_away_is_c_round() {
        use std::f64;
        let mut vals = std::vec![
            0.0,
            0.5,
            -0.5,
            1.5,
            -1.5,
            2.5,
            0.49999999999999994,
            1073741824.5,
            -1073741824.5,
            2147483647.5,
            4503599627370495.5,
            9007199254740993.0,
            1e19,
            -1e19,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        // Products of quantize_multiplier: every 2^31 * q for q in [0.5, 1) on a grid.
        vals.extend((0..100_000).map(|k| 2f64.powi(30) + f64::from(k) * 10737.418235));
        for v in vals {
            assert_eq!(round_half_away(v), v.round() as i64, "{v}");
            assert_eq!(round_half_away(-v), (-v).round() as i64, "{v}");
        }
    }

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
