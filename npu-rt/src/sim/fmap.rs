//! Feature-map addressing: the 4-tile layout, NHWC and NHCWB16 formats, element decoding.
//!
//! A feature map is up to four tiles (Vela's `NpuTileBox`): tile 0 covers rows `0..height0` and
//! columns `0..width0`, tile 1 rows `0..height1` right of `width0`, tile 2 rows from `height0`
//! left of `width0`, tile 3 rows from `height1` right of `width0`. Within a tile an element
//! `(y, x, c)` is at
//!
//! - NHWC: `base + y * stride_y + x * stride_x + c * elem`
//! - NHCWB16: `base + y * stride_y + x * 16 * elem + (c / 16) * stride_c + (c % 16) * elem`
//!
//! (as Vela's `get_address` computes them).

use std::vec::Vec;

use crate::ethos_u::regs::{ActivationFormat, ActivationPrecision, ActivationType};

use super::error::{Access, SimErrorKind};
use super::memory::Regions;
use super::state::FmRegs;

/// A feature map as the hardware addresses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FeatureMap {
    pub region: u8,
    pub base: [u64; 4],
    pub height0: u64,
    pub height1: u64,
    pub width0: u64,
    pub stride_x: u64,
    pub stride_y: u64,
    pub stride_c: u64,
    pub format: ActivationFormat,
    /// Element size in bytes (1, 2 or 4).
    pub elem: u64,
    pub signed: bool,
    /// Zero point, sign-interpreted by the element type.
    pub zero_point: i64,
}

/// Which precision register layout the feature map uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FmKind {
    Ifm,
    Ifm2,
    Ofm,
}

impl FmKind {
    pub fn register(self) -> &'static str {
        match self {
            FmKind::Ifm => "IFM_PRECISION",
            FmKind::Ifm2 => "IFM2_PRECISION",
            FmKind::Ofm => "OFM_PRECISION",
        }
    }
}

/// A 40-bit stride register value as a signed number.
fn signed40(v: u64) -> i64 {
    (((v & 0xff_ffff_ffff) << 24) as i64) >> 24
}

impl FeatureMap {
    /// Builds the feature map from its registers, validating the precision fields.
    pub fn new(regs: &FmRegs, kind: FmKind) -> Result<Self, SimErrorKind> {
        use crate::ethos_u::regs::{IfmPrecision, OfmPrecision};
        let (ty, precision, format) = match kind {
            FmKind::Ifm | FmKind::Ifm2 => {
                let p = IfmPrecision(regs.precision);
                (p.activation_type(), p.precision(), p.format())
            }
            FmKind::Ofm => {
                let p = OfmPrecision(regs.precision);
                (p.activation_type(), p.precision(), p.format())
            }
        };
        let bad = |reason| SimErrorKind::InvalidRegister {
            register: kind.register(),
            value: regs.precision as u64,
            reason,
        };
        let format = format.ok_or_else(|| bad("undefined activation_format"))?;
        if precision == ActivationPrecision::B64 {
            return Err(SimErrorKind::Unsupported {
                what: "64-bit feature maps",
            });
        }
        let signed = ty == ActivationType::Signed;
        let zero_point = match (precision, signed) {
            (ActivationPrecision::B8, true) | (ActivationPrecision::B16, true) => {
                regs.zero_point as i16 as i64
            }
            (_, false) => regs.zero_point as i64,
            _ => regs.zero_point as i16 as i64,
        };
        Ok(FeatureMap {
            region: regs.region,
            base: regs.base,
            height0: regs.height0_m1 as u64 + 1,
            height1: regs.height1_m1 as u64 + 1,
            width0: regs.width0_m1 as u64 + 1,
            stride_x: regs.stride_x,
            stride_y: regs.stride_y,
            stride_c: regs.stride_c,
            format,
            elem: precision.bytes() as u64,
            signed,
            zero_point,
        })
    }

    /// Smallest and largest value of the element type.
    pub fn type_range(&self) -> (i64, i64) {
        let bits = self.elem * 8;
        if self.signed {
            (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1)
        } else {
            (0, (1i64 << bits) - 1)
        }
    }

    /// The tile holding row `y`, column `x`.
    fn tile(&self, y: u64, x: u64) -> usize {
        match (x >= self.width0, y >= self.height1, y >= self.height0) {
            (true, true, _) => 3,
            (true, false, _) => 1,
            (false, _, true) => 2,
            (false, _, false) => 0,
        }
    }

    /// Byte address of `(y, x)` for channel brick start `c0` (a multiple of 16 for NHCWB16).
    fn addr(&self, y: u64, x: u64, c0: u64) -> Option<u64> {
        // Coordinates within the tile: tiles 1 and 3 start at column `width0`, tile 2 at row
        // `height0`, tile 3 at row `height1`.
        let t = self.tile(y, x);
        let x = if t & 1 == 1 { x - self.width0 } else { x };
        let y = match t {
            2 => y - self.height0,
            3 => y - self.height1,
            _ => y,
        };
        let base = i64::try_from(*self.base.get(t)?).ok()?;
        // Strides are 40-bit two's-complement registers: Vela writes negative ones to mirror
        // (MirrorPad) and reverse the write order (`ofm_stride_multiplier`).
        let y = i64::try_from(y).ok()?;
        let x = i64::try_from(x).ok()?;
        let c0 = i64::try_from(c0).ok()?;
        let elem = self.elem as i64;
        let row = y.checked_mul(signed40(self.stride_y))?;
        let (col, chan) = match self.format {
            ActivationFormat::Nhwc => (
                x.checked_mul(signed40(self.stride_x))?,
                c0.checked_mul(elem)?,
            ),
            ActivationFormat::Nhcwb16 => (
                x.checked_mul(16 * elem)?,
                (c0 / 16)
                    .checked_mul(signed40(self.stride_c))?
                    .checked_add((c0 % 16) * elem)?,
            ),
        };
        let a = base.checked_add(row)?.checked_add(col)?.checked_add(chan)?;
        u64::try_from(a).ok()
    }

    /// Runs of contiguous channels at one `(y, x)`: (first channel, count).
    fn runs(&self, depth: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let step = match self.format {
            ActivationFormat::Nhwc => depth.max(1),
            ActivationFormat::Nhcwb16 => 16,
        };
        (0..depth.div_ceil(step)).map(move |i| {
            let c0 = i * step;
            (c0, step.min(depth - c0))
        })
    }

    /// Appends the elements of `run` (raw little-endian bytes) to `out`.
    fn decode_run(&self, run: &[u8], out: &mut Vec<i32>) {
        match (self.elem, self.signed) {
            (1, true) => out.extend(run.iter().map(|&v| v as i8 as i32)),
            (1, false) => out.extend(run.iter().map(|&v| v as i32)),
            (2, true) => out.extend(
                run.chunks_exact(2)
                    .map(|c| i16::from_le_bytes([c[0], c[1]]) as i32),
            ),
            (2, false) => out.extend(
                run.chunks_exact(2)
                    .map(|c| u16::from_le_bytes([c[0], c[1]]) as i32),
            ),
            _ => out.extend(
                run.chunks_exact(4)
                    .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            ),
        }
    }

    /// Reads `h x w x d` elements (rows `0..h`, columns `0..w`, channels `0..d`) into a dense
    /// `[h][w][d]` vector of raw values. Returns the values and the bytes read.
    pub fn gather(
        &self,
        mem: &Regions,
        h: u64,
        w: u64,
        d: u64,
        access: Access,
    ) -> Result<(Vec<i32>, u64), SimErrorKind> {
        let n = h.saturating_mul(w).saturating_mul(d);
        let mut out = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
        let bytes = mem
            .region_bytes(self.region as usize)
            .ok_or(SimErrorKind::RegionUnmapped {
                region: self.region,
            })?;
        let mut bounds = [(u64::MAX, 0u64); 4];
        for y in 0..h {
            for x in 0..w {
                let (lo, hi) = &mut bounds[self.tile(y, x)];
                for (c0, count) in self.runs(d) {
                    let len = count * self.elem;
                    let a = self.addr(y, x, c0);
                    let run = a
                        .and_then(|a| slice(bytes, a, len))
                        .ok_or_else(|| self.oob(y, x, c0, len, bytes.len(), access))?;
                    let a = a.unwrap_or(0);
                    (*lo, *hi) = ((*lo).min(a), (*hi).max(a + len));
                    self.decode_run(run, &mut out);
                }
            }
        }
        // The bounding interval of each tile, for the hazard checker (a ring buffer's two
        // tiles leave rows between them that the operation does not read).
        for (lo, hi) in bounds {
            mem.record(self.region, lo, hi, false);
        }
        Ok((out, n.saturating_mul(self.elem)))
    }

    /// Writes a dense `[h][w][d]` vector (values already in the element type's range).
    /// Returns the bytes written. Nothing is written unless every element is in bounds.
    pub fn scatter(
        &self,
        mem: &mut Regions,
        h: u64,
        w: u64,
        d: u64,
        values: &[i32],
        access: Access,
    ) -> Result<u64, SimErrorKind> {
        let total = mem
            .region_bytes(self.region as usize)
            .ok_or(SimErrorKind::RegionUnmapped {
                region: self.region,
            })?
            .len();
        let mut bounds = [(u64::MAX, 0u64); 4];
        for y in 0..h {
            for x in 0..w {
                let (lo, hi) = &mut bounds[self.tile(y, x)];
                for (c0, count) in self.runs(d) {
                    let len = count * self.elem;
                    match self.addr(y, x, c0) {
                        Some(a) if a.checked_add(len).is_some_and(|e| e <= total as u64) => {
                            (*lo, *hi) = ((*lo).min(a), (*hi).max(a + len));
                        }
                        _ => return Err(self.oob(y, x, c0, len, total, access)),
                    }
                }
            }
        }
        for (lo, hi) in bounds {
            mem.record(self.region, lo, hi, true);
        }
        let bytes = mem.region_bytes_mut(self.region as usize)?;
        let mut next = 0usize;
        for y in 0..h {
            for x in 0..w {
                for (c0, count) in self.runs(d) {
                    let len = count * self.elem;
                    let a = self.addr(y, x, c0).unwrap_or(0) as usize;
                    let dst = bytes.get_mut(a..a + len as usize).unwrap_or(&mut []);
                    let src = values.get(next..next + count as usize).unwrap_or(&[]);
                    next += count as usize;
                    match self.elem {
                        1 => dst.iter_mut().zip(src).for_each(|(d, &v)| *d = v as u8),
                        2 => dst
                            .chunks_exact_mut(2)
                            .zip(src)
                            .for_each(|(d, &v)| d.copy_from_slice(&(v as i16).to_le_bytes())),
                        _ => dst
                            .chunks_exact_mut(4)
                            .zip(src)
                            .for_each(|(d, &v)| d.copy_from_slice(&v.to_le_bytes())),
                    }
                }
            }
        }
        Ok(h.saturating_mul(w)
            .saturating_mul(d)
            .saturating_mul(self.elem))
    }

    fn oob(&self, y: u64, x: u64, c0: u64, len: u64, total: usize, access: Access) -> SimErrorKind {
        SimErrorKind::OutOfBounds {
            region: self.region,
            addr: self.addr(y, x, c0).unwrap_or(u64::MAX),
            len,
            region_len: total as u64,
            access,
        }
    }
}

fn slice(bytes: &[u8], addr: u64, len: u64) -> Option<&[u8]> {
    let s = usize::try_from(addr).ok()?;
    let e = s.checked_add(usize::try_from(len).ok()?)?;
    bytes.get(s..e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fm(format: ActivationFormat) -> FeatureMap {
        FeatureMap {
            region: 0,
            base: [0, 100, 200, 300],
            height0: 2,
            height1: 1,
            width0: 2,
            stride_x: 3,
            stride_y: 6,
            stride_c: 64,
            format,
            elem: 1,
            signed: true,
            zero_point: 0,
        }
    }

    #[test]
    fn tiles_and_formats() {
        let f = fm(ActivationFormat::Nhwc);
        assert_eq!(f.addr(1, 1, 2), Some(6 + 3 + 2));
        assert_eq!(f.addr(0, 2, 0), Some(100));
        assert_eq!(f.addr(1, 3, 0), Some(300 + 3));
        assert_eq!(f.addr(2, 0, 0), Some(200));
        let f = fm(ActivationFormat::Nhcwb16);
        assert_eq!(f.addr(0, 1, 16), Some(16 + 64));
    }

    #[test]
    fn negative_40_bit_strides_walk_backwards() {
        // Vela's MirrorPad writes rows upwards: OFM_STRIDE_Y = 0xff_ffff_ff50 (-176).
        let mut f = fm(ActivationFormat::Nhwc);
        f.base = [1000, 0, 0, 0];
        f.height0 = 8;
        f.width0 = 8;
        f.stride_y = 0xff_ffff_ff50;
        f.stride_x = 0xff_ffff_fff0;
        assert_eq!(f.addr(1, 0, 0), Some(1000 - 176));
        assert_eq!(f.addr(2, 3, 1), Some(1000 - 352 - 48 + 1));
        // Below address 0 is an error, not a wrap.
        assert_eq!(f.addr(6, 0, 0), None);
    }

    #[test]
    fn a_wrapped_box_is_traced_per_tile_not_across_the_rows_between() {
        // A ring buffer of 8 rows of 4 bytes at 0..32: the box's first row is ring row 7 (tile
        // 0 at 28), the next two are ring rows 0 and 1 (tile 2 at 0). Rows 2..7 (8..28) are
        // not read, and the hazard checker must not see them read.
        let f = FeatureMap {
            region: 1,
            base: [28, 0, 0, 0],
            height0: 1,
            height1: 3,
            width0: 4,
            stride_x: 1,
            stride_y: 4,
            stride_c: 0,
            format: ActivationFormat::Nhwc,
            elem: 1,
            signed: true,
            zero_point: 0,
        };
        let mut ring: Vec<u8> = (0..32).collect();
        let mut mem = Regions::new();
        mem.set_mut(1, &mut ring);
        mem.start_trace();
        let (values, _) = f.gather(&mem, 3, 4, 1, Access::IfmRead).unwrap();
        assert_eq!(values, [28, 29, 30, 31, 0, 1, 2, 3, 4, 5, 6, 7]);
        let spans: Vec<(u64, u64)> = mem.take_trace().iter().map(|s| (s.start, s.end)).collect();
        assert_eq!(spans, [(28, 32), (0, 8)]);
        mem.start_trace();
        f.scatter(&mut mem, 3, 4, 1, &[0; 12], Access::OfmWrite)
            .unwrap();
        let spans: Vec<(u64, u64)> = mem.take_trace().iter().map(|s| (s.start, s.end)).collect();
        assert_eq!(spans, [(28, 32), (0, 8)]);
    }
}
