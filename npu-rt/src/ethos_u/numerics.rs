//! Fixed-point scaling and rounding as the NPU's output and input stages compute them.
//!
//! `scale(v, multiplier, shift, mode)` is `v * multiplier / 2^shift` rounded:
//!
//! - DBL: TFLite's double rounding (`MultiplyByQuantizedMultiplier`): round half up at bit 31 of
//!   the product, then round half away from zero at the remaining shift. Folded into one step:
//!   `(v * m + 2^(s-1) + sign(v) * 2^30) >> s` when `s > 31`, natural rounding otherwise.
//! - NATURAL: round half up, `(v * m + 2^(s-1)) >> s`.
//! - TRUNCATE: round toward zero.
//!
//! Facts: TFLite's reference kernels, and the rounding model in Arm's Vela 5.2.0 (`regor`
//! `graphir_optimiser.cpp` `Scale`); checked against the fixtures' reference outputs.

use crate::ethos_u::regs::RoundMode;
use core::ops::{Add, Shl, Sub};

/// `v * multiplier / 2^shift`, rounded by `mode`; `dbl_bits` moves the first rounding of DBL to
/// bit `31 - dbl_bits` (0 for output scaling; the elementwise input stage uses 20 for 8-bit and
/// 15 for 16-bit inputs, emulating TFLite's `left_shift` before its double rounding).
#[inline]
pub fn scale(v: i64, multiplier: u32, shift: u32, mode: RoundMode, dbl_bits: u32) -> i64 {
    let shift = shift.min(63);
    // Fast path in i64: |v| < 2^30 keeps |v * m| < 2^62, and with shift <= 62 the rounding
    // term stays below 2^61 + 2^30, so nothing overflows.
    if (-(1i64 << 30)..(1i64 << 30)).contains(&v) && (1..=62).contains(&shift) {
        let p = v * multiplier as i64;
        return (p + rounding::<i64>(p >= 0, shift, mode, dbl_bits)) >> shift;
    }
    let p = v as i128 * multiplier as i128;
    if shift == 0 {
        return clamp_i64(p);
    }
    let round = rounding::<i128>(p >= 0, shift, mode, dbl_bits);
    clamp_i64((p + round) >> shift)
}

/// The term [`scale`] adds to a product (non-negative or not) before shifting it right by
/// `shift` (`1..=63`), in the fast path's i64 or the general path's i128.
#[inline(always)]
fn rounding<T>(nonneg: bool, shift: u32, mode: RoundMode, dbl_bits: u32) -> T
where
    T: Copy + From<u8> + Shl<u32, Output = T> + Add<Output = T> + Sub<Output = T>,
{
    let one = T::from(1);
    let half = one << (shift - 1);
    match mode {
        RoundMode::Dbl => {
            let first = 31u32.saturating_sub(dbl_bits);
            if shift > first && first > 0 {
                let d = one << (first - 1);
                if nonneg { half + d } else { half - d }
            } else {
                half
            }
        }
        RoundMode::Natural => half,
        RoundMode::Truncate => {
            if nonneg {
                T::from(0)
            } else {
                (one << shift) - one
            }
        }
    }
}

/// Saturates an i128 into i64.
#[inline]
pub fn clamp_i64(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// Rounding right shift of `v` by `shift` (SHR with the OFM rounding mode).
#[inline]
pub fn shift_right(v: i64, shift: u32, mode: RoundMode) -> i64 {
    scale(v, 1, shift, mode, 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TFLite's MultiplyByQuantizedMultiplier, written the way the reference does it.
    fn tflite_mbqm(x: i32, m: i32, shift: i32) -> i32 {
        let left = if shift > 0 { shift } else { 0 };
        let right = if shift > 0 { 0 } else { -shift };
        let a = (x as i64) << left;
        let a = a.clamp(i32::MIN as i64, i32::MAX as i64) as i32;
        // SaturatingRoundingDoublingHighMul
        let ab = a as i64 * m as i64;
        let nudge = if ab >= 0 {
            1i64 << 30
        } else {
            1 - (1i64 << 30)
        };
        let hi = ((ab + nudge) / (1i64 << 31)) as i32;
        // RoundingDivideByPOT
        let mask = (1i32 << right) - 1;
        let rem = hi & mask;
        let th = (mask >> 1) + if hi < 0 { 1 } else { 0 };
        (hi >> right) + if rem > th { 1 } else { 0 }
    }

    #[test]
    fn dbl_matches_tflite() {
        let ms = [
            1_073_741_824i32,
            1_518_500_250,
            2_147_483_647,
            1_340_000_001,
        ];
        for &m in &ms {
            for shift in -12..=0 {
                for x in (-70_000..70_000).step_by(37) {
                    let reg_shift = (31 - shift) as u32;
                    assert_eq!(
                        scale(x, m as u32, reg_shift, RoundMode::Dbl, 0),
                        tflite_mbqm(x as i32, m, shift) as i64,
                        "x={x} m={m} shift={shift}"
                    );
                }
            }
        }
    }

    #[test]
    fn natural_and_truncate() {
        assert_eq!(shift_right(5, 1, RoundMode::Natural), 3);
        assert_eq!(shift_right(-5, 1, RoundMode::Natural), -2);
        assert_eq!(shift_right(-5, 1, RoundMode::Truncate), -2);
        assert_eq!(shift_right(5, 1, RoundMode::Truncate), 2);
        assert_eq!(scale(3, 1, 0, RoundMode::Dbl, 0), 3);
    }
}
