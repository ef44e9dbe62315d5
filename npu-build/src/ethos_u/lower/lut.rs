//! Lookup tables the NPU applies in its output stage (ACTIVATION = TABLE_n).
//!
//! Two kinds are built here:
//! - the softmax exponent table: 256 x int32 (1024 bytes), indexed by `x - max(x) + 255`, holding
//!   gemmlowp's `exp_on_negative_values` of the input difference scaled to Q5.26 — exactly the
//!   values TFLite's int8/uint8 reference softmax computes per element (docs/numerics.md,
//!   "Softmax");
//! - 256-entry 8-bit tables for element-wise functions (sigmoid, tanh, ...), built the way
//!   TFLite's `PopulateLookupTable` does (dequantize in f32, apply, round, requantize, clamp).
//!
//! Table order is the NPU's: entry `i` belongs to the (clipped) value `i - 128` for signed
//! 8-bit data and `i` for unsigned data (the hardware offsets signed values by 128 before the
//! lookup).

use crate::ir::quant::{
    quantize_multiplier, rounding_divide_by_pot, saturating_rounding_doubling_high_mul as srdhm,
};

/// Integer bits of the scaled input difference (TFLite's `kScaledDiffIntegerBits`).
const SCALED_DIFF_INTEGER_BITS: i32 = 5;

/// The softmax exponent table and the input scaling it was built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ExpTable {
    /// `entries[i]` = Q0.31 `exp(beta * input_scale * (i - 255))`, 0 below `diff_min`.
    pub entries: [i32; 256],
    /// Input differences below this contribute nothing (TFLite's `diff_min`).
    pub diff_min: i32,
}

impl ExpTable {
    /// The table as little-endian bytes (the LUT buffer the NPU loads).
    pub fn bytes(&self) -> Vec<u8> {
        self.entries.iter().flat_map(|v| v.to_le_bytes()).collect()
    }
}

/// Builds the exponent table of an 8-bit softmax with `beta` and input scale `input_scale`.
///
/// Follows TFLite's `PreprocessSoftmaxScaling` (multiplier of `beta * scale * 2^26`, capped at
/// `2^31 - 1`, quantized with a left shift) and `CalculateInputRadius`. Returns `None` when the
/// scaling cannot be represented (non-positive or non-finite product, right shift needed, or a
/// left shift of 31 or more).
pub(super) fn softmax_exp_table(beta: f32, input_scale: f32) -> Option<ExpTable> {
    let real = (f64::from(beta)
        * f64::from(input_scale)
        * f64::from(1i32 << (31 - SCALED_DIFF_INTEGER_BITS)))
    .min(f64::from(i32::MAX));
    if !real.is_finite() || real < 1.0 {
        // TFLite's QuantizeMultiplierGreaterThanOne requires a real multiplier > 1.
        return None;
    }
    let (multiplier, left_shift) = quantize_multiplier(real);
    if !(0..31).contains(&left_shift) {
        return None;
    }
    // floor((2^5 - 1) * 2^26 / 2^left_shift): the largest difference whose scaled value fits.
    let radius = (f64::from((1i32 << SCALED_DIFF_INTEGER_BITS) - 1)
        * f64::from(1i32 << (31 - SCALED_DIFF_INTEGER_BITS))
        / f64::from(1u32 << left_shift))
    .floor();
    let diff_min = -(radius as i32);
    let mut entries = [0i32; 256];
    for (i, e) in entries.iter_mut().enumerate() {
        let diff = i as i32 - 255;
        if diff >= diff_min {
            // `diff << left_shift` cannot overflow: |diff| <= radius keeps it below 31 * 2^26.
            let scaled = srdhm(diff.wrapping_mul(1 << left_shift), multiplier);
            *e = exp_on_negative_values_q5(scaled);
        }
    }
    Some(ExpTable { entries, diff_min })
}

/// gemmlowp's `SaturatingRoundingMultiplyByPOT<exponent>` on a raw 32-bit value.
fn saturating_mul_pot(x: i32, exponent: i32) -> i32 {
    match exponent {
        0 => x,
        e if e > 0 => {
            let limit = i32::MAX >> e;
            if x > limit {
                i32::MAX
            } else if x < -limit {
                i32::MIN
            } else {
                x << e
            }
        }
        e => rounding_divide_by_pot(x, -e),
    }
}

/// `exp(a)` for Q0.31 `a` in [-1/4, 0): gemmlowp's fourth-order Taylor expansion around -1/8.
fn exp_between_minus_quarter_and_zero(a: i32) -> i32 {
    /// exp(-1/8) in Q0.31.
    const EXP_MINUS_ONE_EIGHTH: i32 = 1_895_147_668;
    /// 1/3 in Q0.31.
    const ONE_THIRD: i32 = 715_827_883;
    let x = a.wrapping_add(1 << 28);
    let x2 = srdhm(x, x);
    let x3 = srdhm(x2, x);
    let x4 = srdhm(x2, x2);
    let x4_over_4 = saturating_mul_pot(x4, -2);
    let tail = saturating_mul_pot(
        srdhm(x4_over_4.wrapping_add(x3), ONE_THIRD).wrapping_add(x2),
        -1,
    );
    EXP_MINUS_ONE_EIGHTH.wrapping_add(srdhm(EXP_MINUS_ONE_EIGHTH, x.wrapping_add(tail)))
}

/// gemmlowp's `exp_on_negative_values` for a Q5.26 input `a <= 0`, result in Q0.31.
///
/// The input is split into its fractional part modulo 1/4 (evaluated by the Taylor expansion)
/// and a remainder whose set bits multiply in `exp(-2^k)` for k = -2..=4.
fn exp_on_negative_values_q5(a: i32) -> i32 {
    const FRACTIONAL_BITS: i32 = 31 - SCALED_DIFF_INTEGER_BITS;
    /// `(k, exp(-2^k) in Q0.31)`.
    const BARREL: [(i32, i32); 7] = [
        (-2, 1_672_461_947),
        (-1, 1_302_514_674),
        (0, 790_015_084),
        (1, 290_630_308),
        (2, 39_332_535),
        (3, 720_401),
        (4, 242),
    ];
    if a == 0 {
        return i32::MAX;
    }
    let quarter = 1i32 << (FRACTIONAL_BITS - 2);
    let a_mod_quarter_minus_quarter = (a & (quarter - 1)).wrapping_sub(quarter);
    let mut result = exp_between_minus_quarter_and_zero(saturating_mul_pot(
        a_mod_quarter_minus_quarter,
        SCALED_DIFF_INTEGER_BITS,
    ));
    let remainder = a_mod_quarter_minus_quarter.wrapping_sub(a);
    for (k, exp_minus_pow2) in BARREL {
        if remainder & (1 << (FRACTIONAL_BITS + k)) != 0 {
            result = srdhm(result, exp_minus_pow2);
        }
    }
    result
}

/// A 256-entry 8-bit table of `f` in the NPU's order, built like TFLite's `PopulateLookupTable`:
/// `q_out = clamp(round(f(in_scale * (q_in - in_zp)) / out_scale) + out_zp)`, all in `f32` with
/// the rounding half away from zero.
///
/// `signed` selects int8 (entry `i` is input `i - 128`) or uint8 (entry `i` is input `i`).
#[allow(
    dead_code,
    reason = "for the sigmoid/tanh lowering; the IR has no such operator yet"
)]
pub(super) fn table_8bit(
    signed: bool,
    (in_scale, in_zp): (f32, i32),
    (out_scale, out_zp): (f32, i32),
    f: impl Fn(f32) -> f32,
) -> [u8; 256] {
    let (lo, hi) = if signed { (-128i32, 127i32) } else { (0, 255) };
    let inverse_scale = 1.0f32 / out_scale;
    let mut table = [0u8; 256];
    for (i, t) in table.iter_mut().enumerate() {
        let q = lo + i as i32;
        let real = in_scale * (q - in_zp) as f32;
        let rescaled = (f(real) * inverse_scale).round();
        // `as` saturates non-finite and out-of-range values, as the clamp below needs.
        let quantized = (rescaled as i32).saturating_add(out_zp).clamp(lo, hi);
        *t = quantized as u8;
    }
    table
}

/// TFLite's int8/uint8 LOGISTIC table (output scale 1/256, zero point at the type minimum).
#[allow(
    dead_code,
    reason = "for the sigmoid/tanh lowering; the IR has no such operator yet"
)]
pub(super) fn sigmoid_table(signed: bool, input: (f32, i32), output: (f32, i32)) -> [u8; 256] {
    table_8bit(signed, input, output, |x| 1.0 / (1.0 + (-x).exp()))
}

/// TFLite's int8/uint8 TANH table.
#[allow(
    dead_code,
    reason = "for the sigmoid/tanh lowering; the IR has no such operator yet"
)]
pub(super) fn tanh_table(signed: bool, input: (f32, i32), output: (f32, i32)) -> [u8; 256] {
    table_8bit(signed, input, output, f32::tanh)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(path: &str) -> Vec<u8> {
        let p = format!("{}/../fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    /// The table Vela DMAs into the shared buffer for op_softmax (region 0 = weights.bin at the
    /// DMA0_SRC address 0, 1024 bytes) equals ours for the model's input scale and beta 1.
    #[test]
    fn exp_table_equals_vela_op_softmax() {
        // Input scale of op_softmax (fixtures/op_softmax/io/io.json), an f32 value.
        let scale = 0.007799775805324316f64 as f32;
        let table = softmax_exp_table(1.0, scale).expect("representable");
        for accel in ["ethos-u55-128", "ethos-u55-32", "ethos-u65-512"] {
            let weights = fixture(&format!("op_softmax/vela/{accel}/weights.bin"));
            assert_eq!(table.bytes(), weights[..1024], "{accel}");
        }
        // The largest entry is exp(0) = 1 in Q0.31.
        assert_eq!(table.entries[255], i32::MAX);
    }

    #[test]
    fn exp_values_are_close_to_exp() {
        for a in [-1i32 << 26, -3 << 25, -(1 << 24) - 12345, -31 << 26, -1] {
            let got = f64::from(exp_on_negative_values_q5(a)) / 2f64.powi(31);
            let want = (f64::from(a) / 2f64.powi(26)).exp();
            assert!((got - want).abs() < 1e-6, "a={a}: {got} vs {want}");
        }
    }

    #[test]
    fn unrepresentable_scaling_is_rejected() {
        assert!(softmax_exp_table(1.0, 0.0).is_none());
        assert!(softmax_exp_table(1.0, f32::NAN).is_none());
        assert!(softmax_exp_table(1.0, 1e-12).is_none());
        // Products of 2^30 or more need a left shift of 31 or more (undefined in TFLite).
        assert!(softmax_exp_table(1.0, 1e6).is_none());
        assert!(softmax_exp_table(1.0, 16.0).is_none());
        let t = softmax_exp_table(1.0, 15.0).expect("left shift 30");
        assert_eq!(t.entries[255], i32::MAX);
        assert_eq!(t.entries[254], 657, "exp(-15.0) in Q0.31");
        assert_eq!(t.entries[253], 0, "below diff_min");
    }

    /// TFLite 2.21's int8 LOGISTIC and TANH (reference kernels) for input scale
    /// f32::from_bits(0x3cda5d61), zero point -23, at inputs -128..=127 (entry i = input i - 128),
    /// recorded from the interpreter (BUILTIN_REF) on a converted model.
    const TFLITE_SIGMOID: [i8; 256] = [
        -113, -113, -113, -112, -112, -111, -111, -111, -110, -110, -109, -109, -108, -108, -107,
        -107, -106, -106, -105, -105, -104, -103, -103, -102, -102, -101, -100, -100, -99, -98,
        -97, -97, -96, -95, -94, -94, -93, -92, -91, -90, -90, -89, -88, -87, -86, -85, -84, -83,
        -82, -81, -80, -79, -78, -77, -76, -75, -73, -72, -71, -70, -69, -67, -66, -65, -64, -62,
        -61, -60, -58, -57, -56, -54, -53, -52, -50, -49, -47, -46, -44, -43, -41, -40, -38, -36,
        -35, -33, -32, -30, -29, -27, -25, -24, -22, -20, -19, -17, -15, -14, -12, -10, -9, -7, -5,
        -3, -2, 0, 2, 3, 5, 7, 9, 10, 12, 14, 15, 17, 19, 20, 22, 24, 25, 27, 29, 30, 32, 33, 35,
        36, 38, 40, 41, 43, 44, 46, 47, 49, 50, 52, 53, 54, 56, 57, 58, 60, 61, 62, 64, 65, 66, 67,
        69, 70, 71, 72, 73, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 90, 91,
        92, 93, 94, 94, 95, 96, 97, 97, 98, 99, 100, 100, 101, 102, 102, 103, 103, 104, 105, 105,
        106, 106, 107, 107, 108, 108, 109, 109, 110, 110, 111, 111, 111, 112, 112, 113, 113, 113,
        114, 114, 114, 115, 115, 115, 116, 116, 116, 117, 117, 117, 117, 118, 118, 118, 118, 119,
        119, 119, 119, 120, 120, 120, 120, 120, 121, 121, 121, 121, 121, 122, 122, 122, 122, 122,
        122, 122, 123, 123, 123, 123, 123, 123, 123,
    ];
    const TFLITE_TANH: [i8; 256] = [
        -127, -127, -127, -127, -127, -127, -127, -127, -127, -126, -126, -126, -126, -126, -126,
        -126, -126, -126, -126, -125, -125, -125, -125, -125, -125, -124, -124, -124, -124, -124,
        -123, -123, -123, -123, -122, -122, -122, -121, -121, -121, -120, -120, -119, -119, -118,
        -118, -117, -117, -116, -116, -115, -114, -114, -113, -112, -111, -111, -110, -109, -108,
        -107, -106, -105, -103, -102, -101, -100, -98, -97, -95, -94, -92, -90, -89, -87, -85, -83,
        -81, -79, -77, -75, -72, -70, -67, -65, -62, -60, -57, -54, -52, -49, -46, -43, -40, -36,
        -33, -30, -27, -24, -20, -17, -14, -10, -7, -3, 0, 3, 7, 10, 14, 17, 20, 24, 27, 30, 33,
        36, 40, 43, 46, 49, 52, 54, 57, 60, 62, 65, 67, 70, 72, 75, 77, 79, 81, 83, 85, 87, 89, 90,
        92, 94, 95, 97, 98, 100, 101, 102, 103, 105, 106, 107, 108, 109, 110, 111, 111, 112, 113,
        114, 114, 115, 116, 116, 117, 117, 118, 118, 119, 119, 120, 120, 121, 121, 121, 122, 122,
        122, 123, 123, 123, 123, 124, 124, 124, 124, 124, 125, 125, 125, 125, 125, 125, 126, 126,
        126, 126, 126, 126, 126, 126, 126, 126, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127,
        127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127,
        127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127,
        127, 127, 127, 127, 127, 127, 127, 127,
    ];

    #[test]
    fn tables_equal_tflite_reference() {
        let input = (f32::from_bits(0x3cda_5d61), -23);
        let sig = sigmoid_table(true, input, (1.0 / 256.0, -128));
        assert_eq!(sig.map(|b| b as i8), TFLITE_SIGMOID);
        let tanh = tanh_table(true, input, (1.0 / 128.0, 0));
        assert_eq!(tanh.map(|b| b as i8), TFLITE_TANH);
    }

    /// TFLite's LOGISTIC int8 table for scale 1/16, zp 0 -> 1/256, -128: sigmoid(0) = 0.5 -> 0.
    #[test]
    fn sigmoid_table_layout() {
        let t = sigmoid_table(true, (1.0 / 16.0, 0), (1.0 / 256.0, -128));
        // Entry 128 is input 0.
        assert_eq!(t[128] as i8, 0);
        // sigmoid(-8) * 256 = 0.086 rounds to 0.
        assert_eq!(t[0] as i8, -128);
        assert_eq!(t[255] as i8, 127);
        let u = tanh_table(false, (1.0 / 32.0, 128), (1.0 / 128.0, 128));
        assert_eq!(u[128], 128);
        assert_eq!(u[0], 0);
    }
}
