//! The scale/bias stream: one 10-byte entry per output channel.

use super::{CoreSplit, WeightError};

/// Bytes per output channel in a scale/bias stream.
pub const SCALE_ENTRY_BYTES: usize = 10;

/// One output channel's bias and requantization parameters.
///
/// Layout, little-endian: bytes 0..5 = 40-bit two's complement bias, bytes 5..9 = 32-bit
/// multiplier, byte 9 bits 0..6 = shift (bits 6..8 unused, written as 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ScaleEntry {
    /// Bias added to the accumulator, in `-(2^39)..2^39`.
    pub bias: i64,
    /// Requantization multiplier (TFLite's quantized multiplier for per-channel scaling).
    pub multiplier: u32,
    /// Requantization right shift, `0..64`.
    pub shift: u8,
}

impl ScaleEntry {
    /// Smallest bias the 40-bit field holds.
    pub const BIAS_MIN: i64 = -(1 << 39);
    /// Largest bias the 40-bit field holds.
    pub const BIAS_MAX: i64 = (1 << 39) - 1;

    /// Reads one entry (the unused top two bits of the shift byte are ignored).
    pub const fn from_bytes(b: &[u8; SCALE_ENTRY_BYTES]) -> Self {
        let raw = (b[0] as u64)
            | (b[1] as u64) << 8
            | (b[2] as u64) << 16
            | (b[3] as u64) << 24
            | (b[4] as u64) << 32;
        // Sign-extend from 40 bits.
        let bias = ((raw << 24) as i64) >> 24;
        let multiplier = u32::from_le_bytes([b[5], b[6], b[7], b[8]]);
        ScaleEntry {
            bias,
            multiplier,
            shift: b[9] & 0x3f,
        }
    }

    /// Writes the entry, or `None` if the bias does not fit 40 bits or the shift 6 bits.
    pub const fn to_bytes(&self) -> Option<[u8; SCALE_ENTRY_BYTES]> {
        if self.bias < Self::BIAS_MIN || self.bias > Self::BIAS_MAX || self.shift >= 64 {
            return None;
        }
        let b = (self.bias as u64).to_le_bytes();
        let m = self.multiplier.to_le_bytes();
        Some([
            b[0], b[1], b[2], b[3], b[4], m[0], m[1], m[2], m[3], self.shift,
        ])
    }
}

/// Decodes one core's scale/bias stream into `out`, indexed by the operation's output channel
/// (`out.len() >= split.ofm_depth`); only this core's channels (`split.core`,
/// `split.core + split.cores`, ...) are written.
///
/// The stream must hold at least one entry per channel of the core; bytes after them (alignment
/// padding) are ignored.
pub fn decode_scales(
    stream: &[u8],
    split: CoreSplit,
    out: &mut [ScaleEntry],
) -> Result<(), WeightError> {
    if split.cores == 0 || split.core >= split.cores {
        return Err(WeightError::BadGeometry("core must be below cores"));
    }
    let channels = split.channels() as usize;
    let needed_out = split.ofm_depth as usize;
    if out.len() < needed_out {
        return Err(WeightError::OutputTooSmall {
            needed: needed_out,
            got: out.len(),
        });
    }
    let needed = channels.saturating_mul(SCALE_ENTRY_BYTES);
    if stream.len() < needed {
        return Err(WeightError::ScaleStreamTooShort {
            needed,
            got: stream.len(),
        });
    }
    for (i, chunk) in stream
        .chunks_exact(SCALE_ENTRY_BYTES)
        .take(channels)
        .enumerate()
    {
        let Ok(bytes) = <&[u8; SCALE_ENTRY_BYTES]>::try_from(chunk) else {
            return Err(WeightError::ScaleStreamTooShort {
                needed,
                got: stream.len(),
            });
        };
        let channel = split.channel(i as u32) as usize;
        match out.get_mut(channel) {
            Some(slot) => *slot = ScaleEntry::from_bytes(bytes),
            None => {
                return Err(WeightError::OutputTooSmall {
                    needed: needed_out,
                    got: out.len(),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_round_trip_and_sign() {
        for e in [
            ScaleEntry {
                bias: -1,
                multiplier: 0x8000_0000,
                shift: 63,
            },
            ScaleEntry {
                bias: ScaleEntry::BIAS_MIN,
                multiplier: 1,
                shift: 0,
            },
            ScaleEntry {
                bias: ScaleEntry::BIAS_MAX,
                multiplier: 1_518_500_250,
                shift: 38,
            },
        ] {
            let b = e.to_bytes().unwrap();
            assert_eq!(ScaleEntry::from_bytes(&b), e);
        }
        let b = [0xfe, 0xff, 0xff, 0xff, 0xff, 0x01, 0x02, 0x03, 0x04, 0xe5];
        assert_eq!(
            ScaleEntry::from_bytes(&b),
            ScaleEntry {
                bias: -2,
                multiplier: 0x0403_0201,
                shift: 0x25
            }
        );
        assert!(
            ScaleEntry {
                bias: 1 << 39,
                ..Default::default()
            }
            .to_bytes()
            .is_none()
        );
    }

    #[test]
    fn cores_interleave() {
        let mut s0 = [0u8; 30];
        let mut s1 = [0u8; 20];
        for (i, c) in s0.chunks_exact_mut(10).enumerate() {
            c[0] = (2 * i) as u8;
        }
        for (i, c) in s1.chunks_exact_mut(10).enumerate() {
            c[0] = (2 * i + 1) as u8;
        }
        let mut out = [ScaleEntry::default(); 5];
        let split = CoreSplit {
            ofm_depth: 5,
            cores: 2,
            core: 0,
        };
        decode_scales(&s0, split, &mut out).unwrap();
        decode_scales(&s1, CoreSplit { core: 1, ..split }, &mut out).unwrap();
        for (i, e) in out.iter().enumerate() {
            assert_eq!(e.bias, i as i64);
        }
        assert_eq!(
            decode_scales(&s0[..29], split, &mut out),
            Err(WeightError::ScaleStreamTooShort {
                needed: 30,
                got: 29
            })
        );
        assert!(decode_scales(&s0, split, &mut out[..4]).is_err());
        assert!(decode_scales(&s0, CoreSplit { core: 2, ..split }, &mut out).is_err());
    }
}
