//! Execution of `NPU_OP_*` commands against the register state.

pub(crate) mod conv;
pub(crate) mod dma;
pub(crate) mod elementwise;
pub(crate) mod output;
pub(crate) mod pool;

use crate::ethos_u::regs::{IfmUpscaleMode, KernelStride};

use super::error::SimErrorKind;
use super::state::RegisterState;

/// OFM dimensions from the registers.
pub(crate) fn ofm_dims(s: &RegisterState) -> (u64, u64, u64) {
    (
        s.ofm_height_m1 as u64 + 1,
        s.ofm_width_m1 as u64 + 1,
        s.ofm_depth_m1 as u64 + 1,
    )
}

/// Spatial geometry of a kernel operation (convolution, depthwise, pooling).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    /// Dilated kernel height/width (`KERNEL_*_M1 + 1`).
    pub kh: u64,
    pub kw: u64,
    pub stride_y: u64,
    pub stride_x: u64,
    pub dil_y: u64,
    pub dil_x: u64,
    pub pad_top: u64,
    pub pad_left: u64,
    /// IFM extent in the (possibly upscaled) coordinate system the kernel walks.
    pub up_h: u64,
    pub up_w: u64,
    /// IFM extent in memory.
    pub ifm_h: u64,
    pub ifm_w: u64,
    pub upscale: IfmUpscaleMode,
}

impl Geometry {
    /// Derives the IFM extent from the OFM size, kernel, stride and padding, as the hardware
    /// does (there is no IFM height/width register): the kernel walks
    /// `(ofm - 1) * stride + kernel` positions of which `pad_top/left` and `pad_bottom/right`
    /// are padding.
    pub fn new(s: &RegisterState, ofm_h: u64, ofm_w: u64) -> Result<Self, SimErrorKind> {
        let ks = KernelStride(s.kernel_stride);
        let kh = s.kernel_height_m1 as u64 + 1;
        let kw = s.kernel_width_m1 as u64 + 1;
        let (sy, sx) = (ks.stride_y() as u64, ks.stride_x() as u64);
        let [pt, pl, pr, pb] = s.pad.map(u64::from);
        let upscale =
            IfmUpscaleMode::from_bits(s.upscale as u8).ok_or(SimErrorKind::InvalidRegister {
                register: "IFM_UPSCALE",
                value: s.upscale as u64,
                reason: "undefined upscale mode",
            })?;
        let span = |o: u64, st: u64, k: u64| (o - 1) * st + k;
        let up_h = span(ofm_h, sy, kh).checked_sub(pt + pb);
        let up_w = span(ofm_w, sx, kw).checked_sub(pl + pr);
        let (Some(up_h), Some(up_w)) = (up_h, up_w) else {
            return Err(SimErrorKind::InvalidRegister {
                register: "IFM_PAD_*",
                value: (pt + pb).max(pl + pr),
                reason: "padding exceeds the kernel's reach",
            });
        };
        let (ifm_h, ifm_w) = match upscale {
            IfmUpscaleMode::None => (up_h, up_w),
            IfmUpscaleMode::Nearest | IfmUpscaleMode::Zeros => (up_h.div_ceil(2), up_w.div_ceil(2)),
        };
        Ok(Geometry {
            kh,
            kw,
            stride_y: sy,
            stride_x: sx,
            dil_y: ks.dilation_y() as u64,
            dil_x: ks.dilation_x() as u64,
            pad_top: pt,
            pad_left: pl,
            up_h,
            up_w,
            ifm_h,
            ifm_w,
            upscale,
        })
    }

    /// Maps an upscaled coordinate to the stored IFM coordinate; None for padding and for the
    /// zeros inserted by `IFM_UPSCALE_MODE_ZEROS`.
    #[inline]
    pub fn source(&self, up: i64, extent: u64) -> Option<u64> {
        if up < 0 || up as u64 >= extent {
            return None;
        }
        let up = up as u64;
        match self.upscale {
            IfmUpscaleMode::None => Some(up),
            IfmUpscaleMode::Nearest => Some(up / 2),
            IfmUpscaleMode::Zeros => up.is_multiple_of(2).then_some(up / 2),
        }
    }

    /// Row in the upscaled IFM for output row `oy` and kernel row `ky` (may be padding).
    #[inline]
    pub fn row(&self, oy: u64, ky: u64) -> i64 {
        (oy * self.stride_y + ky * self.dil_y) as i64 - self.pad_top as i64
    }

    /// Column in the upscaled IFM for output column `ox` and kernel column `kx`.
    #[inline]
    pub fn col(&self, ox: u64, kx: u64) -> i64 {
        (ox * self.stride_x + kx * self.dil_x) as i64 - self.pad_left as i64
    }
}
