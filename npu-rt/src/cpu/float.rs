//! Floating-point helpers `core` lacks (rounding, `exp`) and the f32 kernels (Softmax, clamp).
//! The reference interpreter of `npu-build` uses the same functions, so the CPU kernels equal
//! it bit for bit.

use super::MAX_RANK;
use super::elem::{load_f32, store_f32};
use super::operands::{in_out, operands};
use super::params::{
    FloatClampOp, FloatLayerNormOp, FloatReduceOp, FloatSoftmaxOp, FloatUnaryOp, OrtSoftmaxOp,
};

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

/// `e^x` in single precision: [`exp_f64`] rounded once, so it is the correctly rounded value
/// except within ~1e-16 of a rounding boundary.
pub fn exp_f32(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    if x > 89.0 {
        return f32::INFINITY;
    }
    if x < -104.0 {
        return 0.0;
    }
    exp_f64(f64::from(x)) as f32
}

/// `e^x` in double precision for `|x| <= 700` (Cody-Waite reduction by `ln 2`, a degree-13
/// Taylor polynomial, relative error below 1e-16); 0 below -700, infinity above 700.
pub fn exp_f64(x: f64) -> f64 {
    // ln 2 split so that n * LN2_HI is exact for |n| < 2^11.
    const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
    const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
    const LOG2_E: f64 = core::f64::consts::LOG2_E;
    if x.is_nan() {
        return x;
    }
    if x > 700.0 {
        return f64::INFINITY;
    }
    if x < -700.0 {
        return 0.0;
    }
    let n = round_half_away(x * LOG2_E);
    let r = (x - n * LN2_HI) - n * LN2_LO; // |r| <= 0.35
    let mut p = 1.0;
    let mut k = 13.0;
    while k >= 1.0 {
        p = 1.0 + p * r / k;
        k -= 1.0;
    }
    // 2^n as a double (n in -1010..=1010: always a normal double).
    let scale = f64::from_bits(((n as i64 + 1023) as u64) << 52);
    p * scale
}

/// The correctly rounded square root of `x` (IEEE `sqrtf`; `core` has none without `std`):
/// Newton's iteration in double, then the f32 result corrected against the exact squares of
/// its rounding midpoints (a 25-bit value squares exactly in a double).
pub fn sqrt_f32(x: f32) -> f32 {
    if x.is_nan() || x < 0.0 {
        return f32::NAN;
    }
    if x == 0.0 || x == f32::INFINITY {
        return x;
    }
    let xd = f64::from(x);
    // Start within a factor of 2 (halve the exponent), then Newton converges quadratically.
    let e = ((xd.to_bits() >> 52) as i64) - 1023;
    let mut s = f64::from_bits((((e / 2) + 1023) as u64) << 52);
    for _ in 0..8 {
        s = 0.5 * (s + xd / s);
    }
    let r = s as f32;
    let ulp = |v: f32| f32::from_bits(v.to_bits() + 1) - v;
    let rd = f64::from(r);
    let up = f64::from(ulp(r)) / 2.0;
    let down = f64::from(r - f32::from_bits(r.to_bits() - 1)) / 2.0;
    if (rd + up) * (rd + up) < xd {
        f32::from_bits(r.to_bits() + 1)
    } else if (rd - down) * (rd - down) > xd {
        f32::from_bits(r.to_bits() - 1)
    } else {
        r
    }
}

/// The error function in double precision, within a few units in the last place: below 3
/// the series `2/sqrt(pi) exp(-a^2) sum 2^n a^(2n+1) / (1 3 5 ... (2n+1))` (all terms positive,
/// so no cancellation), above it the continued fraction of `erfc`, and 1 from 6 on (`erfc(6)` is
/// below half a unit in the last place of 1).
pub fn erf_f64(x: f64) -> f64 {
    // sqrt(pi), to double precision.
    const SQRT_PI: f64 = 1.772_453_850_905_516;
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let r = if a < 3.0 {
        let mut term = a;
        let mut sum = a;
        let mut n = 0.0f64;
        while term > 1e-17 * sum {
            n += 1.0;
            term *= 2.0 * a * a / (2.0 * n + 1.0);
            sum += term;
        }
        core::f64::consts::FRAC_2_SQRT_PI * exp_f64(-a * a) * sum
    } else if a < 6.0 {
        // erfc(a) = exp(-a^2) / sqrt(pi) / (a + (1/2) / (a + 1 / (a + (3/2) / (a + ...)))),
        // evaluated from the tail; 60 terms are plenty from a = 3 on.
        let mut f = a;
        let mut k = 60.0;
        while k >= 1.0 {
            f = a + k / 2.0 / f;
            k -= 1.0;
        }
        1.0 - exp_f64(-a * a) / (f * SQRT_PI)
    } else {
        1.0
    };
    if x < 0.0 { -r } else { r }
}

/// `tanh x` in double precision (from [`exp_f64`]; +-1 beyond |x| = 20).
pub fn tanh_f64(x: f64) -> f64 {
    if x.is_nan() {
        x
    } else if x > 20.0 {
        1.0
    } else if x < -20.0 {
        -1.0
    } else if x.abs() < 1e-4 {
        // Avoid the cancellation of e^2x - 1 near 0: tanh x = x - x^3/3 + ...
        x - x * x * x / 3.0
    } else {
        let e = exp_f64(2.0 * x);
        (e - 1.0) / (e + 1.0)
    }
}

/// GELU of an f32: `0.5 x (1 + erf(x / sqrt 2))`, or with `approximate` the tanh form `0.5 x (1
/// + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, evaluated in double and rounded once.
pub fn gelu_f32(x: f32, approximate: bool) -> f32 {
    let xd = f64::from(x);
    let g = if approximate {
        let k = core::f64::consts::FRAC_2_SQRT_PI * core::f64::consts::FRAC_1_SQRT_2;
        0.5 * xd * (1.0 + tanh_f64(k * (xd + 0.044_715 * xd * xd * xd)))
    } else {
        0.5 * xd * (1.0 + erf_f64(xd * core::f64::consts::FRAC_1_SQRT_2))
    };
    g as f32
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
/// [`FloatUnaryOp::func`]: `sqrt x` (correctly rounded).
pub const FN_SQRT: u32 = 8;
/// [`FloatUnaryOp::func`]: `1 / x`.
pub const FN_RECIPROCAL: u32 = 9;
/// [`FloatUnaryOp::func`]: `erf x`.
pub const FN_ERF: u32 = 10;
/// [`FloatUnaryOp::func`]: GELU, exact (`alpha` 0) or the tanh approximation (`alpha` 1).
pub const FN_GELU: u32 = 11;
/// [`FloatUnaryOp::func`]: `max(x, 0)`.
pub const FN_RELU: u32 = 12;
/// [`FloatUnaryOp::func`]: `x^alpha` for `alpha` in {-1, -0.5, 0.5, 1, 2, 3} (the exponents
/// exporters write: reciprocals, square roots, squares and cubes).
pub const FN_POW: u32 = 13;

/// Whether [`FN_POW`] computes `x^e`.
pub fn pow_supported(e: f32) -> bool {
    [-1.0, -0.5, 0.5, 1.0, 2.0, 3.0].contains(&e)
}

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
        FN_SQRT => sqrt_f32(x),
        FN_RECIPROCAL => 1.0 / x,
        FN_ERF => erf_f64(f64::from(x)) as f32,
        FN_GELU => gelu_f32(x, alpha != 0.0),
        FN_RELU => {
            if x < 0.0 {
                0.0
            } else {
                x
            }
        }
        FN_POW => match alpha {
            -1.0 => 1.0 / x,
            -0.5 => 1.0 / sqrt_f32(x),
            0.5 => sqrt_f32(x),
            1.0 => x,
            2.0 => x * x,
            3.0 => x * x * x,
            _ => return None,
        },
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

/// Layer normalisation of one row of `n` f32 values `x(i)`, as onnxruntime's CPU kernel
/// computes it: the mean and the mean of squares summed in order in single precision, `d =
/// sqrt(mean(x^2) - mean^2 + epsilon)`; `out(i, x(i) - mean, d)` then makes each output
/// (`(x - mean) / d * scale + bias`).
pub fn layer_norm_row(
    x: impl Fn(usize) -> f32,
    n: usize,
    epsilon: f32,
    mut out: impl FnMut(usize, f32, f32),
) {
    let (mut mean, mut square) = (0f32, 0f32);
    for i in 0..n {
        let v = x(i);
        mean += v;
        square += v * v;
    }
    mean /= n as f32;
    let d = sqrt_f32(square / n as f32 - mean * mean + epsilon);
    for i in 0..n {
        out(i, x(i) - mean, d);
    }
}

/// Layer normalisation over rows of `cols` f32 values (see [`FloatLayerNormOp`]).
pub(super) fn layer_norm(p: &FloatLayerNormOp, weights: &[u8], arena: &mut [u8]) -> Option<()> {
    let cols = p.cols as usize;
    let len = (p.rows as usize).checked_mul(cols)?;
    let bytes = len.checked_mul(4)?;
    let params = cols.checked_mul(4)?;
    let ([x, scale, bias], y) = operands(
        weights,
        arena,
        [(p.x, bytes), (p.scale, params), (p.bias, params)],
        (p.y, bytes),
    )?;
    if cols == 0 {
        return Some(());
    }
    for r in 0..p.rows as usize {
        let row = r * cols;
        layer_norm_row(
            |i| load_f32(x, row + i),
            cols,
            p.epsilon,
            |i, centred, d| {
                store_f32(
                    y,
                    row + i,
                    centred / d * load_f32(scale, i) + load_f32(bias, i),
                );
            },
        );
    }
    Some(())
}

/// One row of onnxruntime's QLinearSoftmax (`contrib_ops/cpu/quantization/qlinear_softmax.cc`,
/// the kernel its default session runs a QDQ Softmax of 8-bit tensors as): the row's maximum
/// aligned with the table's top, the f32 sum of the table's `exp` values in order, then each
/// output `round_ties_even(table * y_scale / sum) + zp` in f32, saturated at 255 as its uint8
/// code does (and for int8 wrapped, as its cast does). `x(i)` is the stored value (`-128..=127`
/// signed, `0..=255` unsigned).
pub fn ort_softmax_row(
    table: &[f32; 256],
    x: impl Fn(usize) -> i32,
    n: usize,
    y_scale: f32,
    zp: i32,
    signed: bool,
    mut out: impl FnMut(usize, i32),
) {
    let max = (0..n).map(&x).max().unwrap_or(0);
    // Table index of a value: int8 through `uint8(127 - max + x)`, uint8 as `255 - max + x`.
    let at = |v: i32| -> f32 {
        let k = if signed {
            (127 - max + v) as u8
        } else {
            (255 - max + v) as u8
        };
        table[usize::from(k)]
    };
    let mut sum = 0f32;
    for i in 0..n {
        sum += at(x(i));
    }
    for i in 0..n {
        let q = crate::fixed::round_ties_even(at(x(i)) * y_scale / sum) as i32 + zp;
        let q = q.min(255);
        out(i, if signed { i32::from(q as i8) } else { q.max(0) });
    }
}

/// [`ort_softmax_row`] over `rows` rows (see [`OrtSoftmaxOp`]).
pub(super) fn ort_softmax(p: &OrtSoftmaxOp, weights: &[u8], arena: &mut [u8]) -> Option<()> {
    let d = p.depth as usize;
    let len = (p.rows as usize).checked_mul(d)?;
    let ([x, t], y) = operands(weights, arena, [(p.x, len), (p.table, 1024)], (p.y, len))?;
    let mut table = [0f32; 256];
    for (i, v) in table.iter_mut().enumerate() {
        *v = load_f32(t, i);
    }
    for r in 0..p.rows as usize {
        let row = r * d;
        let get = |i: usize| {
            let b = x[row + i];
            if p.signed {
                i32::from(b as i8)
            } else {
                i32::from(b)
            }
        };
        ort_softmax_row(&table, get, d, p.y_scale, p.zp, p.signed, |i, v| {
            y[row + i] = v as u8;
        });
    }
    Some(())
}

/// Calls `f(input_index, output_index)` for every element of a tensor of `shape` in order,
/// the output index counting the axes not set in `reduced` (bit `d` for axis `d`) row-major:
/// the index walk of a reduction. `shape` has at most [`MAX_RANK`] axes.
pub fn for_each_reduced(shape: &[usize], reduced: u32, mut f: impl FnMut(usize, usize)) {
    let rank = shape.len().min(MAX_RANK);
    let mut ostride = [0usize; MAX_RANK];
    let mut t = 1usize;
    for d in (0..rank).rev() {
        if reduced & (1 << d) == 0 {
            ostride[d] = t;
            t = t.saturating_mul(shape[d]);
        }
    }
    let total = shape[..rank]
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d));
    let Some(total) = total else { return };
    let mut idx = [0usize; MAX_RANK];
    let mut o = 0usize;
    for i in 0..total {
        f(i, o);
        let mut d = rank;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            o += ostride[d];
            if idx[d] < shape[d] {
                break;
            }
            o -= ostride[d] * shape[d];
            idx[d] = 0;
        }
    }
}

/// Sum or mean of f32 values over some axes (see [`FloatReduceOp`]): each output sums its
/// inputs in input order in single precision; a mean divides the sum by the count.
pub(super) fn reduce(p: &FloatReduceOp, weights: &[u8], arena: &mut [u8]) -> Option<()> {
    let rank = p.rank as usize;
    if rank == 0 || rank > MAX_RANK || p.reduced >> rank != 0 {
        return None;
    }
    let mut shape = [0usize; MAX_RANK];
    for (d, &v) in shape.iter_mut().zip(&p.shape[..rank]) {
        *d = v as usize;
    }
    let shape = &shape[..rank];
    let total = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
    let kept = (0..rank)
        .filter(|d| p.reduced & (1 << d) == 0)
        .try_fold(1usize, |a, d| a.checked_mul(shape[d]))?;
    let (x, y) = in_out(weights, arena, (p.x, total), (p.y, kept), 4)?;
    for k in 0..kept {
        store_f32(y, k, 0.0);
    }
    for_each_reduced(shape, p.reduced, |i, o| {
        store_f32(y, o, load_f32(y, o) + load_f32(x, i));
    });
    if p.mean && kept > 0 {
        let count = (total / kept) as f32;
        for k in 0..kept {
            store_f32(y, k, load_f32(y, k) / count);
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    extern crate std;
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

    fn f32s(arena: &[u8], at: usize, n: usize) -> std::vec::Vec<f32> {
        (0..n)
            .map(|i| f32::from_le_bytes(arena[at + 4 * i..at + 4 * i + 4].try_into().unwrap()))
            .collect()
    }

    fn put(arena: &mut [u8], at: usize, v: &[f32]) {
        for (i, x) in v.iter().enumerate() {
            arena[at + 4 * i..at + 4 * i + 4].copy_from_slice(&x.to_le_bytes());
        }
    }

    #[test]
    fn sqrt_is_correctly_rounded() {
        // Every 997th f32 from 2^-126 up, and the boundary cases.
        let mut bits = 0x0080_0000u32;
        while bits < 0x7f80_0000 {
            let x = f32::from_bits(bits);
            assert_eq!(sqrt_f32(x), std::primitive::f32::sqrt(x), "sqrt({x:e})");
            bits += 997;
        }
        for x in [0.0f32, -0.0, 1.0, 2.0, 4.0, 1e-45, f32::MAX, f32::INFINITY] {
            assert_eq!(
                sqrt_f32(x).to_bits(),
                std::primitive::f32::sqrt(x).to_bits(),
                "{x:e}"
            );
        }
        assert!(sqrt_f32(-1.0).is_nan() && sqrt_f32(f32::NAN).is_nan());
    }

    #[test]
    fn new_functions() {
        let f = |func, a, x| unary_f32(func, a, 0.0, x).unwrap();
        assert_eq!(f(FN_SQRT, 0.0, 9.0), 3.0);
        assert_eq!(f(FN_RECIPROCAL, 0.0, 4.0), 0.25);
        assert_eq!(f(FN_RELU, 0.0, -2.0), 0.0);
        assert_eq!(f(FN_RELU, 0.0, 2.5), 2.5);
        assert!((f(FN_ERF, 0.0, 0.5) - 0.520_499_9).abs() < 1e-7);
        assert_eq!(f(FN_ERF, 0.0, -7.0), -1.0);
        // GELU(1) = 0.841344746..., tanh form 0.841191990...
        assert!((f(FN_GELU, 0.0, 1.0) - 0.841_344_7).abs() < 1e-7);
        assert!((f(FN_GELU, 1.0, 1.0) - 0.841_192).abs() < 1e-6);
        assert_eq!(f(FN_POW, 2.0, -3.0), 9.0);
        assert_eq!(f(FN_POW, 0.5, 16.0), 4.0);
        assert_eq!(f(FN_POW, -1.0, 8.0), 0.125);
        assert_eq!(unary_f32(FN_POW, 1.5, 0.0, 4.0), None);
        assert!((tanh_f64(0.5) - 0.462_117_157_260_009_8).abs() < 1e-15);
        assert_eq!(exp_f64(0.0), 1.0);
    }

    #[test]
    fn layer_norm_op_normalises_rows() {
        let op = super::super::Op::FloatLayerNorm(FloatLayerNormOp {
            x: super::super::Buf::arena(0),
            scale: super::super::Buf::arena(16),
            bias: super::super::Buf::arena(24),
            y: super::super::Buf::arena(32),
            rows: 2,
            cols: 2,
            epsilon: 0.0,
        });
        let (w, n) = op.encode();
        assert_eq!(w[0], 81);
        assert_eq!(super::super::Op::decode(&w[..n]), Some(op));
        let mut arena = [0u8; 48];
        put(&mut arena, 0, &[1.0, 3.0, -2.0, 2.0]);
        put(&mut arena, 16, &[2.0, 1.0]);
        put(&mut arena, 24, &[0.5, 0.0]);
        super::super::run(0, &w[..n], &[], &mut arena).unwrap();
        // Rows (1, 3) and (-2, 2): mean 2 and 0, deviation 1 and 2 -> (-1, 1) both.
        assert_eq!(f32s(&arena, 32, 4), [-1.5, 1.0, -1.5, 1.0]);
        // An output overlapping an input is refused, not computed.
        let bad = super::super::Op::FloatLayerNorm(FloatLayerNormOp {
            y: super::super::Buf::arena(4),
            ..match op {
                super::super::Op::FloatLayerNorm(p) => p,
                _ => unreachable!(),
            }
        });
        let (w, n) = bad.encode();
        assert!(super::super::run(0, &w[..n], &[], &mut arena).is_err());
    }

    #[test]
    fn reduce_op_sums_and_means_kept_axes() {
        let op = |reduced, mean| {
            super::super::Op::FloatReduce(FloatReduceOp {
                x: super::super::Buf::arena(0),
                y: super::super::Buf::arena(32),
                rank: 3,
                shape: [2, 2, 2, 1, 1, 1],
                reduced,
                mean,
            })
        };
        let mut arena = [0u8; 64];
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        for (reduced, mean, want) in [
            (0b010, false, std::vec![4.0, 6.0, 12.0, 14.0]),
            (0b101, true, std::vec![3.5, 5.5]),
            (0b111, true, std::vec![4.5]),
            (0b001, false, std::vec![6.0, 8.0, 10.0, 12.0]),
        ] {
            put(&mut arena, 0, &x);
            let (w, n) = op(reduced, mean).encode();
            assert_eq!(super::super::Op::decode(&w[..n]), Some(op(reduced, mean)));
            super::super::run(0, &w[..n], &[], &mut arena).unwrap();
            assert_eq!(f32s(&arena, 32, want.len()), want, "reduced {reduced:b}");
        }
        // An axis bit beyond the rank is refused.
        let (w, n) = op(0b1000, false).encode();
        assert!(super::super::run(0, &w[..n], &[], &mut arena).is_err());
    }

    #[test]
    fn ort_softmax_scales_by_floor_of_the_reciprocal() {
        // Two equal values: each is half; onnxruntime multiplies by floor(1 / (1/255 as f32))
        // = 254, so a half is 127 steps, not 127.5 -> 128.
        let y_scale = (1.0f32 / (1.0f32 / 255.0)).floor();
        assert_eq!(y_scale, 254.0);
        let table = [1.0f32; 256];
        let mut got = [0i32; 2];
        ort_softmax_row(&table, |_| 5, 2, y_scale, -128, true, |i, v| got[i] = v);
        assert_eq!(got, [-1, -1]);
        ort_softmax_row(&table, |_| 5, 2, y_scale, 0, false, |i, v| got[i] = v);
        assert_eq!(got, [127, 127]);
        // The row maximum picks the table's top entry: int8 index uint8(127 - max + x).
        let mut t = [0f32; 256];
        t[127] = 3.0; // the maximum
        t[126] = 1.0; // one below it
        ort_softmax_row(&t, |i| [10, 9][i], 2, 100.0, 0, true, |i, v| got[i] = v);
        assert_eq!(got, [75, 25]);
        // An int8 result past 127 wraps, as onnxruntime's cast does.
        ort_softmax_row(&t, |i| [10, 9][i], 2, 100.0, 60, true, |i, v| got[i] = v);
        assert_eq!(got, [-121, 85]);
    }
}
