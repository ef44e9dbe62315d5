//! Lookup tables the NPU applies in its output stage (ACTIVATION = TABLE_n).
//!
//! The softmax exponent table is built here: 256 x int32 (1024 bytes), indexed by
//! `x - max(x) + 255`, holding gemmlowp's `exp_on_negative_values` of the input difference scaled
//! to Q5.26 — exactly the values TFLite's int8/uint8 reference softmax computes per element
//! (docs/numerics.md, "Softmax"). The 8-bit tables of element-wise functions (sigmoid, tanh, ...)
//! are the reference interpreter's own (`crate::reference::act_fn`, lowered by `act_fn.rs`).

use npu_rt::fixed::{
    exp_on_negative_values, quantize_multiplier, saturating_rounding_doubling_high_mul as srdhm,
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
/// scaling cannot be represented (non-finite product or below 0.5: a right shift needed, or a
/// left shift of 31 or more), as the reference interpreter refuses those.
pub(super) fn softmax_exp_table(beta: f32, input_scale: f32) -> Option<ExpTable> {
    let real = (f64::from(beta)
        * f64::from(input_scale)
        * f64::from(1i32 << (31 - SCALED_DIFF_INTEGER_BITS)))
    .min(f64::from(i32::MAX));
    if !real.is_finite() || real < 0.5 {
        // The multiplier must not need a right shift (TFLite's QuantizeMultiplierGreaterThanOne
        // expects one above 1; from 0.5 on the reference interpreter, like TFLite's arithmetic
        // with a left shift of 0, still works, and so does this table).
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
            *e = exp_on_negative_values(scaled);
        }
    }
    Some(ExpTable { entries, diff_min })
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
}
