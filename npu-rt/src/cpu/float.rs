//! Floating-point helpers `core` lacks (rounding, `exp`) and the f32 kernels (Softmax, clamp).
//! The reference interpreter of `npu-build` uses the same functions, so the CPU kernels equal
//! it bit for bit.

use super::elem::{load_f32, store_f32};
use super::kernels::operands;
use super::params::{FloatClampOp, FloatSoftmaxOp, FloatUnaryOp};

/// Rounds half away from zero, as C's `round` (no `f64::round` without `std`).
pub fn round_half_away(v: f64) -> f64 {
    // From 2^52 on every double is an integer (and NaN stays NaN).
    if v.is_nan() || v.abs() >= 4_503_599_627_370_496.0 {
        return v;
    }
    let t = v as i64 as f64;
    let f = v - t; // exact: t is v truncated
    if f >= 0.5 {
        t + 1.0
    } else if f <= -0.5 {
        t - 1.0
    } else {
        t
    }
}

/// Rounds half away from zero in single precision (C's `roundf`).
pub fn round_half_away_f32(v: f32) -> f32 {
    // From 2^23 on every float is an integer (and NaN stays NaN).
    if v.is_nan() || v.abs() >= 8_388_608.0 {
        return v;
    }
    let t = v as i32 as f32;
    let f = v - t;
    if f >= 0.5 {
        t + 1.0
    } else if f <= -0.5 {
        t - 1.0
    } else {
        t
    }
}

/// `e^x` in single precision: computed in double (Cody-Waite reduction by `ln 2`, a degree-13
/// Taylor polynomial, relative error below 1e-16) and rounded once, so it is the correctly
/// rounded value except within ~1e-16 of a rounding boundary.
pub fn exp_f32(x: f32) -> f32 {
    // ln 2 split so that n * LN2_HI is exact for |n| < 2^11.
    const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
    const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
    const LOG2_E: f64 = core::f64::consts::LOG2_E;
    if x.is_nan() {
        return x;
    }
    if x > 89.0 {
        return f32::INFINITY;
    }
    if x < -104.0 {
        return 0.0;
    }
    let xd = f64::from(x);
    let n = round_half_away(xd * LOG2_E);
    let r = (xd - n * LN2_HI) - n * LN2_LO; // |r| <= 0.35
    let mut p = 1.0;
    let mut k = 13.0;
    while k >= 1.0 {
        p = 1.0 + p * r / k;
        k -= 1.0;
    }
    // 2^n as a double (n in -151..=129: always a normal double).
    let scale = f64::from_bits(((n as i64 + 1023) as u64) << 52);
    (p * scale) as f32
}

/// Softmax of f32 rows (TFLite's float reference: `exp((x - max) * beta)` in single
/// precision, summed in order, each divided by the sum).
pub(super) fn softmax(p: &FloatSoftmaxOp, weights: &[u8], arena: &mut [u8]) -> Option<()> {
    let len = (p.rows as usize).checked_mul(p.depth as usize)?;
    let bytes = len.checked_mul(4)?;
    let ([x], y) = operands(weights, arena, [(p.x, bytes)], (p.y, bytes))?;
    // Nothing to compute (and `rows` alone is not bounded by any buffer).
    if len == 0 {
        return Some(());
    }
    let d = p.depth as usize;
    for r in 0..p.rows as usize {
        let row = r * d;
        let mut max = f32::NEG_INFINITY;
        for i in row..row + d {
            max = max.max(load_f32(x, i));
        }
        let mut sum = 0f32;
        for i in row..row + d {
            let e = exp_f32((load_f32(x, i) - max) * p.beta);
            store_f32(y, i, e);
            sum += e;
        }
        for i in row..row + d {
            store_f32(y, i, load_f32(y, i) / sum);
        }
    }
    Some(())
}

/// `min(max(x, lo), hi)` on f32 (a stand-alone float activation).
pub(super) fn clamp(p: &FloatClampOp, weights: &[u8], arena: &mut [u8]) -> Option<()> {
    let bytes = (p.len as usize).checked_mul(4)?;
    let ([x], y) = operands(weights, arena, [(p.x, bytes)], (p.y, bytes))?;
    for i in 0..p.len as usize {
        store_f32(y, i, load_f32(x, i).max(p.lo).min(p.hi));
    }
    Some(())
}

/// [`FloatUnaryOp::func`]: `1 / (1 + e^-x)`.
pub const FN_SIGMOID: u32 = 0;
/// [`FloatUnaryOp::func`]: `tanh x`.
pub const FN_TANH: u32 = 1;
/// [`FloatUnaryOp::func`]: `x < 0 ? alpha * x : x`.
pub const FN_LEAKY_RELU: u32 = 2;
/// [`FloatUnaryOp::func`]: `max(0, min(1, alpha * x + beta))`.
pub const FN_HARD_SIGMOID: u32 = 3;
/// [`FloatUnaryOp::func`]: `x < 0 ? alpha * (e^x - 1) : x`.
pub const FN_ELU: u32 = 4;
/// [`FloatUnaryOp::func`]: `e^x`.
pub const FN_EXP: u32 = 5;
/// [`FloatUnaryOp::func`]: `-x`.
pub const FN_NEG: u32 = 6;
/// [`FloatUnaryOp::func`]: `|x|`.
pub const FN_ABS: u32 = 7;

/// One f32 elementwise function (`func` an `FN_*` code; `None` for an unknown code). The
/// reference interpreter evaluates float islands with this same function.
pub fn unary_f32(func: u32, alpha: f32, beta: f32, x: f32) -> Option<f32> {
    Some(match func {
        FN_SIGMOID => 1.0 / (1.0 + exp_f32(-x)),
        FN_TANH => {
            // tanh saturates to +-1 in f32 beyond |x| = 9.1; e^(2x) would overflow later.
            if x.is_nan() {
                x
            } else if x > 9.5 {
                1.0
            } else if x < -9.5 {
                -1.0
            } else {
                let e = exp_f32(2.0 * x);
                (e - 1.0) / (e + 1.0)
            }
        }
        FN_LEAKY_RELU => {
            if x < 0.0 {
                alpha * x
            } else {
                x
            }
        }
        FN_HARD_SIGMOID => (alpha * x + beta).clamp(0.0, 1.0),
        FN_ELU => {
            if x < 0.0 {
                alpha * (exp_f32(x) - 1.0)
            } else {
                x
            }
        }
        FN_EXP => exp_f32(x),
        FN_NEG => -x,
        FN_ABS => x.abs(),
        _ => return None,
    })
}

/// An f32 elementwise function over `len` values (an operator of a float island).
pub(super) fn unary(p: &FloatUnaryOp, weights: &[u8], arena: &mut [u8]) -> Option<()> {
    let bytes = (p.len as usize).checked_mul(4)?;
    let ([x], y) = operands(weights, arena, [(p.x, bytes)], (p.y, bytes))?;
    for i in 0..p.len as usize {
        store_f32(y, i, unary_f32(p.func, p.alpha, p.beta, load_f32(x, i))?);
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_like_c_round() {
        for (v, want) in [
            (0.5, 1.0),
            (-0.5, -1.0),
            (1.4999999999999998, 1.0),
            (2.5, 3.0),
            (-2.5, -3.0),
            (-0.49, -0.0),
            (1e300, 1e300),
            (4503599627370495.5, 4503599627370496.0),
        ] {
            assert_eq!(round_half_away(v), want, "{v}");
        }
        assert!(round_half_away(f64::NAN).is_nan());
        assert_eq!(round_half_away_f32(-2.5), -3.0);
        assert_eq!(round_half_away_f32(0.49999997), 0.0);
    }

    #[test]
    fn exp_matches_known_values() {
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(1.0), core::f32::consts::E);
        assert_eq!(exp_f32(-1.0), 0.367_879_45); // e^-1 = 0.3678794412...
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp_f32(88.8), f32::INFINITY);
        assert!(exp_f32(-103.5) > 0.0); // subnormal
        assert_eq!(exp_f32(-104.5), 0.0);
        assert!(exp_f32(f32::NAN).is_nan());
    }

    #[test]
    fn unary_functions() {
        let f = |func, x| unary_f32(func, 0.1, 0.5, x).unwrap();
        assert_eq!(f(FN_SIGMOID, 0.0), 0.5);
        assert!((f(FN_SIGMOID, 2.0) - 0.880_797_1).abs() < 1e-6);
        assert_eq!(f(FN_SIGMOID, -200.0), 0.0);
        assert_eq!(f(FN_TANH, 0.0), 0.0);
        assert!((f(FN_TANH, 0.5) - 0.462_117_16).abs() < 1e-6);
        assert_eq!(f(FN_TANH, 30.0), 1.0);
        assert_eq!(f(FN_TANH, -30.0), -1.0);
        assert_eq!(f(FN_LEAKY_RELU, -2.0), -0.2);
        assert_eq!(f(FN_LEAKY_RELU, 3.0), 3.0);
        assert!((f(FN_HARD_SIGMOID, 2.0) - 0.7).abs() < 1e-6);
        assert_eq!(f(FN_HARD_SIGMOID, 20.0), 1.0);
        assert!((f(FN_ELU, -1.0) - 0.1 * (0.367_879_44 - 1.0)).abs() < 1e-7);
        assert_eq!(f(FN_NEG, 2.0), -2.0);
        assert_eq!(f(FN_ABS, -2.0), 2.0);
        assert_eq!(unary_f32(99, 0.0, 0.0, 1.0), None);
    }

    #[test]
    fn float_unary_op_round_trips_and_runs() {
        let op = super::super::Op::FloatUnary(FloatUnaryOp {
            x: super::super::Buf::arena(0),
            y: super::super::Buf::arena(8),
            len: 2,
            func: FN_NEG,
            alpha: 0.0,
            beta: 0.0,
        });
        let (w, n) = op.encode();
        assert_eq!(w[0], 80);
        assert_eq!(super::super::Op::decode(&w[..n]), Some(op));
        let mut arena = [0u8; 16];
        arena[..4].copy_from_slice(&1.5f32.to_le_bytes());
        arena[4..8].copy_from_slice(&(-2.0f32).to_le_bytes());
        super::super::run(0, &w[..n], &[], &mut arena).unwrap();
        assert_eq!(f32::from_le_bytes(arena[8..12].try_into().unwrap()), -1.5);
        assert_eq!(f32::from_le_bytes(arena[12..16].try_into().unwrap()), 2.0);
    }
}
