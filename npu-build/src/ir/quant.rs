//! Quantization parameters, and TFLite's integer arithmetic (from `npu_rt::fixed`, its one home)
//! for the IR's users: the reference interpreter and the Ethos-U backend's scale encoding.

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

// TFLite's integer arithmetic (quantize_multiplier, multiply_by_quantized_multiplier, ...) has
// one home, `npu_rt::fixed`, shared with the CPU kernels.

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
