//! The output stage every block operation ends with: OFM scaling, zero point, activation clip
//! and the optional lookup table.

use crate::ethos_u::regs::{
    AccFormat, Activation, ActivationClipRange, ActivationFunction, OfmPrecision, OfmScaleMode,
    RoundMode,
};
use crate::ethos_u::weights::ScaleEntry;

use super::pool::saturate_acc;

use super::super::error::SimErrorKind;
use super::super::fmap::FeatureMap;
use super::super::state::RegisterState;
use crate::ethos_u::{builtin_act, numerics};

/// The activation lookup table in the shared buffer.
#[derive(Clone, Debug)]
pub(crate) enum Lut {
    /// 256 entries of the OFM's 8-bit type, indexed by the clipped value (offset 128 for signed).
    Bytes { table: [i32; 256], offset: i64 },
    /// 256 32-bit entries (int32 OFM; the input is clipped to int8).
    Words { table: [i32; 256], offset: i64 },
    /// 512 32-bit entries for a 16-bit OFM, each a base (low half) and a slope (high half),
    /// both signed 16-bit: the input's top 9 bits pick the entry, its low 7 bits interpolate
    /// (`base + (slope * low7 + 64) >> 7`), as TFLite's `lut_lookup` for int16 does; Vela
    /// builds its int16 tables for exactly that (`lut.py`, `create_lut_int16_op`).
    Interp16(std::vec::Vec<u32>),
    /// The built-in SIGMOID (16-bit OFMs), applied to the scaled value before the zero point.
    Sigmoid,
    /// The built-in TANH (16-bit OFMs), likewise.
    Tanh,
}

/// `x.clamp(lo, hi)` without branches (activation clips are hit by many values, e.g. ReLU, so
/// branches mispredict). Requires `x - lo` and `x - hi` not to overflow: |x| < 2^62 and the
/// bounds are 32-bit here.
#[inline(always)]
fn clamp_branchless(x: i64, lo: i64, hi: i64) -> i64 {
    let d = x.wrapping_sub(lo);
    let x = x.wrapping_sub(d & (d >> 63)); // max(x, lo)
    let e = x.wrapping_sub(hi);
    hi.wrapping_add(e & (e >> 63)) // min(x, hi)
}

/// One output channel's requantization, precomputed from its [`ScaleEntry`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Requant {
    bias: i64,
    multiplier: u32,
    shift: u32,
    round_pos: i64,
    round_neg: i64,
    fast: bool,
}

/// Output stage parameters, decoded once per operation.
#[derive(Clone, Debug)]
pub(crate) struct OutputStage {
    pub round: RoundMode,
    pub scale_mode: OfmScaleMode,
    /// `OFM_SCALE` (scale, shift).
    pub global: (u32, u32),
    pub zero_point: i64,
    /// Clip applied after the zero point (activation range intersected with the type range).
    pub lo: i64,
    pub hi: i64,
    /// Type range of the OFM, applied last.
    pub type_lo: i64,
    pub type_hi: i64,
    pub lut: Option<Lut>,
}

impl OutputStage {
    /// Decodes the output stage for an OFM from the registers; `shram` is the shared buffer
    /// (for LUT activations) and `lut_base` the byte address of LUT slot 0 in it.
    pub fn new(
        s: &RegisterState,
        ofm: &FeatureMap,
        shram: &[u8],
        lut_base: usize,
    ) -> Result<Self, SimErrorKind> {
        let prec = OfmPrecision(s.ofm.precision);
        let round = prec.round_mode().ok_or(SimErrorKind::InvalidRegister {
            register: "OFM_PRECISION",
            value: s.ofm.precision as u64,
            reason: "undefined round_mode",
        })?;
        let act = Activation(s.activation);
        let bad_act = |reason| SimErrorKind::InvalidRegister {
            register: "ACTIVATION",
            value: s.activation as u64,
            reason,
        };
        let function = act
            .function()
            .ok_or_else(|| bad_act("undefined activation_function"))?;
        let clip = act
            .clip_range()
            .ok_or_else(|| bad_act("undefined activation_clip_range"))?;
        let (type_lo, type_hi) = ofm.type_range();
        // Clip boundaries are 16-bit; signed OFMs read them as signed.
        let as_signed = |v: u16| v as i16 as i64;
        let as_unsigned = |v: u16| v as i64;
        let (min_s, max_s) = (as_signed(s.activation_min), as_signed(s.activation_max));
        let (lo, hi) = match clip {
            ActivationClipRange::OfmPrecision => {
                if ofm.elem >= 4 {
                    // 32-bit OFMs are not clipped by the 16-bit boundaries (Vela forces a clip
                    // range when it wants them clipped).
                    (type_lo, type_hi)
                } else if ofm.signed {
                    (min_s, max_s)
                } else {
                    (as_unsigned(s.activation_min), as_unsigned(s.activation_max))
                }
            }
            ActivationClipRange::ForceInt8 => (min_s.max(-128), max_s.min(127)),
            ActivationClipRange::ForceInt16 => (min_s.max(-32768), max_s.min(32767)),
            ActivationClipRange::ForceUint8 => (
                as_unsigned(s.activation_min).max(0),
                as_unsigned(s.activation_max).min(255),
            ),
        };
        let lut = match function {
            ActivationFunction::Relu => None,
            ActivationFunction::Tanh | ActivationFunction::Sigmoid if ofm.elem != 2 => {
                // Vela emits them for int16 only; what they do to other OFMs is not pinned.
                return Err(SimErrorKind::Unsupported {
                    what: "built-in TANH/SIGMOID activation functions on 8-bit or 32-bit OFMs",
                });
            }
            ActivationFunction::Sigmoid => Some(Lut::Sigmoid),
            ActivationFunction::Tanh => Some(Lut::Tanh),
            table => {
                let slot = table.table_index().unwrap_or(0) as usize;
                let start = lut_base + slot * 256;
                let signed_in = lo < 0;
                let offset = if signed_in { 128 } else { 0 };
                let mut t = [0i32; 256];
                // The table's `len` bytes in the shared buffer.
                let table_bytes = |len: usize| {
                    shram
                        .get(start..start + len)
                        .ok_or(SimErrorKind::ShramOutOfBounds {
                            addr: start as u64,
                            len: len as u64,
                            size: shram.len() as u64,
                        })
                };
                match ofm.elem {
                    1 => {
                        let bytes = table_bytes(256)?;
                        for (d, &b) in t.iter_mut().zip(bytes) {
                            *d = if ofm.signed { b as i8 as i32 } else { b as i32 };
                        }
                        Some(Lut::Bytes { table: t, offset })
                    }
                    4 => {
                        let bytes = table_bytes(1024)?;
                        for (d, w) in t.iter_mut().zip(bytes.chunks_exact(4)) {
                            *d = i32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                        }
                        Some(Lut::Words { table: t, offset })
                    }
                    2 => {
                        let bytes = table_bytes(2048)?;
                        let table = bytes
                            .chunks_exact(4)
                            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                            .collect();
                        Some(Lut::Interp16(table))
                    }
                    _ => {
                        return Err(SimErrorKind::Unsupported {
                            what: "lookup tables for this OFM element size",
                        });
                    }
                }
            }
        };
        // An empty clip range (min > max) clamps everything to the lower bound.
        let hi = hi.max(lo);
        Ok(OutputStage {
            round,
            scale_mode: prec.scale_mode(),
            global: (s.ofm_scale.1, s.ofm_scale.0 as u32),
            zero_point: ofm.zero_point,
            lo,
            hi,
            type_lo,
            type_hi,
            lut,
        })
    }

    /// Applies the global OFM scale (when the scale mode is GLOBAL) to a result.
    #[inline]
    pub fn scale_global(&self, v: i64) -> i64 {
        match self.scale_mode {
            OfmScaleMode::Global => numerics::scale(v, self.global.0, self.global.1, self.round, 0),
            OfmScaleMode::PerChannel => v,
        }
    }

    /// Precomputes one output channel's requantization (bias, multiplier, shift, rounding).
    pub fn requant(&self, e: &ScaleEntry) -> Requant {
        let shift = e.shift as u32;
        let half = if shift > 0 { 1i64 << (shift - 1) } else { 0 };
        let (round_pos, round_neg) = match self.round {
            // DBL's second rounding term only exists for shifts above 31 (see `numerics`).
            RoundMode::Dbl if shift > 31 => (half + (1 << 30), half - (1 << 30)),
            RoundMode::Dbl | RoundMode::Natural => (half, half),
            RoundMode::Truncate => (0, ((1u64 << shift) - 1) as i64),
        };
        Requant {
            bias: e.bias,
            multiplier: e.multiplier,
            shift,
            round_pos,
            round_neg,
            fast: (1..=62).contains(&shift),
        }
    }

    /// Requantizes one accumulator of a convolution and finishes it.
    #[inline]
    pub fn channel(&self, r: &Requant, acc: i64) -> i32 {
        // acc is at most 48 bits and the bias 40 bits, so the sum cannot overflow.
        let v = acc + r.bias;
        let scaled = if r.fast && (-(1i64 << 30)..(1i64 << 30)).contains(&v) {
            // |v * m| < 2^62 and the rounding terms are below 2^61 + 2^30: no overflow.
            let p = v * r.multiplier as i64;
            (p + if p >= 0 { r.round_pos } else { r.round_neg }) >> r.shift
        } else {
            numerics::scale(
                saturate_acc(v, AccFormat::I40),
                r.multiplier,
                r.shift,
                self.round,
                0,
            )
        };
        self.finish(scaled)
    }

    /// Requantizes one output position's accumulators (`row` is None only on a caller bug and
    /// then nothing is written).
    #[inline]
    pub fn requant_row<A: Copy>(
        &self,
        accs: &[A],
        value: impl Fn(A) -> i64,
        rq: &[Requant],
        row: Option<&mut [i32]>,
    ) {
        let Some(row) = row else { return };
        if self.lut.is_some() {
            for ((o, &a), r) in row.iter_mut().zip(accs).zip(rq) {
                *o = self.channel(r, value(a));
            }
            return;
        }
        let lo = self.lo.max(self.type_lo);
        let hi = self.hi.min(self.type_hi).max(lo);
        let zp = self.zero_point;
        for ((o, &a), r) in row.iter_mut().zip(accs).zip(rq) {
            let v = value(a) + r.bias;
            let out = if r.fast && (-(1i64 << 30)..(1i64 << 30)).contains(&v) {
                // |v * m| < 2^62 and the rounding terms are below 2^61 + 2^30 (shift <= 62):
                // exact in i64, and the result plus a 16-bit zero point cannot overflow.
                let p = v * r.multiplier as i64;
                ((p + if p >= 0 { r.round_pos } else { r.round_neg }) >> r.shift) + zp
            } else {
                // Bounded so the branch-free clamp below cannot overflow.
                self.slow_scale(r, v).clamp(-(1 << 61), 1 << 61) + zp
            };
            *o = clamp_branchless(out, lo, hi) as i32;
        }
    }

    /// The general (i128) requantization, out of the hot loop.
    #[cold]
    #[inline(never)]
    fn slow_scale(&self, r: &Requant, v: i64) -> i64 {
        numerics::scale(v, r.multiplier, r.shift, self.round, 0)
    }

    /// Zero point, clip and LUT for an already scaled value; returns the value to store.
    #[inline]
    pub fn finish(&self, scaled: i64) -> i32 {
        // The built-in functions take the scaled value itself (TFLite's int16 LOGISTIC/TANH
        // input, unclamped: their table saturates); Vela's streams have zero point 0 and the
        // full clip range there, so where the zero point and the clip go is not pinned.
        let scaled = match &self.lut {
            Some(Lut::Sigmoid) => builtin_act::sigmoid(scaled),
            Some(Lut::Tanh) => builtin_act::tanh(scaled),
            _ => scaled,
        };
        let v = scaled
            .saturating_add(self.zero_point)
            .clamp(self.lo, self.hi);
        let v = match &self.lut {
            None | Some(Lut::Sigmoid) | Some(Lut::Tanh) => v,
            Some(Lut::Bytes { table, offset }) | Some(Lut::Words { table, offset }) => {
                let idx = (v + offset).clamp(0, 255) as usize;
                table.get(idx).copied().unwrap_or(0) as i64
            }
            Some(Lut::Interp16(table)) => {
                let u = (v.clamp(-32768, 32767) + 32768) as usize;
                let entry = table.get(u >> 7).copied().unwrap_or(0);
                let base = (entry & 0xffff) as u16 as i16 as i64;
                let slope = (entry >> 16) as u16 as i16 as i64;
                base + ((slope * (u & 0x7f) as i64 + 64) >> 7)
            }
        };
        v.clamp(self.type_lo, self.type_hi) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethos_u::regs::{ActivationFormat, ActivationPrecision, ActivationType};
    use crate::sim::fmap::{FeatureMap, FmKind};

    #[test]
    fn extreme_shifts_do_not_overflow() {
        // Found by fuzzing: TRUNCATE rounding with shift 63.
        for round in [RoundMode::Dbl, RoundMode::Natural, RoundMode::Truncate] {
            let mut s = RegisterState::default();
            s.ofm.precision = OfmPrecision::new(
                ActivationType::Signed,
                ActivationPrecision::B8,
                ActivationFormat::Nhwc,
                OfmScaleMode::PerChannel,
                round,
            )
            .0;
            s.activation_min = (-128i16) as u16;
            s.activation_max = 127;
            let ofm = FeatureMap::new(&s.ofm, FmKind::Ofm).unwrap();
            let out = OutputStage::new(&s, &ofm, &[], 0).unwrap();
            for shift in [0u8, 1, 31, 32, 62, 63] {
                for bias in [ScaleEntry::BIAS_MIN, -1, 0, ScaleEntry::BIAS_MAX] {
                    let e = ScaleEntry {
                        bias,
                        multiplier: u32::MAX,
                        shift,
                    };
                    let r = out.requant(&e);
                    for acc in [i32::MIN, -1, 0, 1, i32::MAX] {
                        let mut row = [0i32; 1];
                        out.requant_row(&[acc], |a| a as i64, &[r], Some(&mut row));
                        assert!((-128..=127).contains(&row[0]));
                        assert_eq!(
                            row[0],
                            out.channel(&r, acc as i64),
                            "{round:?} {shift} {bias} {acc}"
                        );
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod clamp_tests {
    use super::clamp_branchless;

    #[test]
    fn branchless_clamp() {
        for x in [-(1i64 << 61), -129, -128, -5, 0, 6, 127, 128, 1 << 61] {
            for (lo, hi) in [(-128, 127), (0, 6), (-32768, 32767), (5, 5)] {
                assert_eq!(
                    clamp_branchless(x, lo, hi),
                    x.clamp(lo, hi),
                    "{x} {lo} {hi}"
                );
            }
        }
    }
}
