//! Quantization parameters and the integer arithmetic of TFLite's reference kernels.
//!
//! These functions are the single home of the requantization numerics: the reference interpreter,
//! the CPU kernels' expectations and the Ethos-U backend's scale encoding all use them.

use super::{Activation, DType};

/// Affine quantization: `real = scale * (q - zero_point)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantization {
    /// One scale per tensor, or one per channel along `axis`.
    pub scale: Vec<f32>,
    /// Same length as `scale` (or length 1 when shared).
    pub zero_point: Vec<i32>,
    /// The channel axis when per-channel (in the IR's layout).
    pub axis: Option<usize>,
}

impl Quantization {
    /// Per-tensor quantization.
    ///
    /// ```
    /// let q = npu_build::ir::Quantization::per_tensor(0.5, -3);
    /// assert_eq!(q.zero_point(), -3);
    /// ```
    pub fn per_tensor(scale: f32, zero_point: i32) -> Self {
        Quantization {
            scale: vec![scale],
            zero_point: vec![zero_point],
            axis: None,
        }
    }

    /// The (first) scale; the per-tensor scale for per-tensor quantization.
    pub fn scale(&self) -> f32 {
        self.scale.first().copied().unwrap_or(1.0)
    }

    /// The (first) zero point.
    pub fn zero_point(&self) -> i32 {
        self.zero_point.first().copied().unwrap_or(0)
    }

    pub fn is_per_channel(&self) -> bool {
        self.scale.len() > 1 || self.axis.is_some()
    }

    /// Scale of channel `c` (the shared scale when per-tensor).
    pub fn scale_at(&self, c: usize) -> f32 {
        if self.scale.len() == 1 {
            self.scale[0]
        } else {
            self.scale[c]
        }
    }

    /// Zero point of channel `c` (the shared one when per-tensor).
    pub fn zero_point_at(&self, c: usize) -> i32 {
        if self.zero_point.len() == 1 {
            self.zero_point[0]
        } else {
            self.zero_point[c]
        }
    }
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
/// shift (positive = left), such that `m ≈ q * 2^(shift - 31)`.
///
/// ```
/// use npu_build::ir::quant::quantize_multiplier;
/// assert_eq!(quantize_multiplier(0.5), (1 << 30, 0));
/// assert_eq!(quantize_multiplier(0.0), (0, 0));
/// ```
pub fn quantize_multiplier(m: f64) -> (i32, i32) {
    if m == 0.0 {
        return (0, 0);
    }
    let (q, mut shift) = frexp(m);
    let mut q_fixed = (q * (1i64 << 31) as f64).round() as i64;
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

/// gemmlowp's `SaturatingRoundingDoublingHighMul`.
pub fn saturating_rounding_doubling_high_mul(a: i32, b: i32) -> i32 {
    if a == i32::MIN && b == i32::MIN {
        return i32::MAX;
    }
    let ab = a as i64 * b as i64;
    let nudge: i64 = if ab >= 0 { 1 << 30 } else { 1 - (1 << 30) };
    ((ab + nudge) / (1i64 << 31)) as i32
}

/// gemmlowp's `RoundingDivideByPOT` (round half away from zero), `exponent` in 0..=31.
pub fn rounding_divide_by_pot(x: i32, exponent: i32) -> i32 {
    debug_assert!((0..=31).contains(&exponent));
    let mask: i32 = ((1i64 << exponent) - 1) as i32;
    let remainder = x & mask;
    let threshold = (mask >> 1) + i32::from(x < 0);
    (x >> exponent) + i32::from(remainder > threshold)
}

/// TFLite's `MultiplyByQuantizedMultiplier(x, multiplier, shift)` (reference kernels, double rounding).
pub fn multiply_by_quantized_multiplier(x: i32, multiplier: i32, shift: i32) -> i32 {
    let left = shift.max(0);
    let right = (-shift).max(0);
    rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(x.wrapping_mul(1i32 << left), multiplier),
        right,
    )
}

/// [`multiply_by_quantized_multiplier`] with its constants precomputed, for hot loops.
///
/// Same results for every input: gemmlowp's high multiply `(x * m + nudge) / 2^31` (truncating,
/// with a sign-dependent nudge) equals `(x * m + 2^30) >> 31` (flooring) for every product except
/// `i32::MIN * i32::MIN`, which is handled; the rounding divide by `2^e` (half away from zero)
/// equals `(t + 2^(e-1) - [t < 0]) >> e`.
///
/// ```
/// use npu_build::ir::quant::{FastMultiplier, multiply_by_quantized_multiplier};
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

/// Quantized clamp range of a fused activation, as TFLite's `CalculateActivationRangeQuantized`.
///
/// `scale`/`zero_point` are the output's; the range is intersected with `dtype`'s range.
pub fn activation_range(act: Activation, scale: f32, zero_point: i32, dtype: DType) -> (i32, i32) {
    let (qmin, qmax) = dtype
        .int_range()
        .map(|(a, b)| (a.max(i32::MIN as i64) as i32, b.min(i32::MAX as i64) as i32))
        .unwrap_or((i32::MIN, i32::MAX));
    let quantize = |f: f32| zero_point.saturating_add((f / scale).round() as i32);
    let (lo, hi) = act.bounds();
    let lo = lo.map_or(qmin, |f| qmin.max(quantize(f)));
    let hi = hi.map_or(qmax, |f| qmax.min(quantize(f)));
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn relu6_range() {
        // scale 6/255, zp -128: 0 -> -128, 6 -> 127
        assert_eq!(
            activation_range(Activation::Relu6, 6.0 / 255.0, -128, DType::I8),
            (-128, 127)
        );
        assert_eq!(
            activation_range(Activation::Relu, 0.1, 5, DType::I8),
            (5, 127)
        );
    }
}
