//! `NPU_OP_DMA_START`: a copy between regions, or from a region into the shared buffer (LUTs).
//!
//! Only the 1-D stride mode is modelled (the one Vela emits for Ethos-U55/U65); 2-D/3-D modes
//! are reported as unsupported rather than guessed.

use crate::ethos_u::regs::{DmaRegion, DmaRegionMode, DmaStrideMode};
use crate::sim::within_limits;

use super::super::error::{Access, SimErrorKind};
use super::super::memory::Regions;
use super::super::state::RegisterState;
use super::super::stats::OpStats;

/// Executes one DMA.
pub(crate) fn run(
    s: &RegisterState,
    mem: &mut Regions,
    shram: &mut [u8],
    max_bytes: u64,
    st: &mut OpStats,
) -> Result<(), SimErrorKind> {
    let src = DmaRegion(s.dma_src_region);
    let dst = DmaRegion(s.dma_dst_region);
    for (r, name) in [(src, "DMA0_SRC_REGION"), (dst, "DMA0_DST_REGION")] {
        match r.stride_mode() {
            Some(DmaStrideMode::D1) => {}
            Some(_) => {
                return Err(SimErrorKind::Unsupported {
                    what: "2-D/3-D DMA stride modes",
                });
            }
            None => {
                return Err(SimErrorKind::InvalidRegister {
                    register: name,
                    value: r.0 as u64,
                    reason: "undefined stride_mode",
                });
            }
        }
    }
    let len = s.dma_len;
    within_limits(&[("DMA length", len, max_bytes)])?;
    let shram_oob = |addr: u64, size: usize| SimErrorKind::ShramOutOfBounds {
        addr,
        len,
        size: size as u64,
    };
    match (src.mode(), dst.mode()) {
        (DmaRegionMode::External, DmaRegionMode::External) => {
            mem.copy((src.region(), s.dma_src), (dst.region(), s.dma_dst), len)?;
            st.read(src.region(), len);
            st.write(dst.region(), len);
        }
        (DmaRegionMode::External, DmaRegionMode::Internal) => {
            let size = shram.len();
            let (a, e) = span(s.dma_dst, len).ok_or(shram_oob(s.dma_dst, size))?;
            let to = shram.get_mut(a..e).ok_or(shram_oob(s.dma_dst, size))?;
            to.copy_from_slice(mem.read(src.region(), s.dma_src, len, Access::DmaRead)?);
            st.read(src.region(), len);
        }
        (DmaRegionMode::Internal, DmaRegionMode::External) => {
            let size = shram.len();
            let (a, e) = span(s.dma_src, len).ok_or(shram_oob(s.dma_src, size))?;
            let from = shram.get(a..e).ok_or(shram_oob(s.dma_src, size))?;
            mem.write(dst.region(), s.dma_dst, len, Access::DmaWrite)?
                .copy_from_slice(from);
            st.write(dst.region(), len);
        }
        (DmaRegionMode::Internal, DmaRegionMode::Internal) => {
            let size = shram.len();
            let (a, e) = span(s.dma_src, len).ok_or(shram_oob(s.dma_src, size))?;
            let (b, f) = span(s.dma_dst, len).ok_or(shram_oob(s.dma_dst, size))?;
            if e > size {
                return Err(shram_oob(s.dma_src, size));
            }
            if f > size {
                return Err(shram_oob(s.dma_dst, size));
            }
            shram.copy_within(a..e, b);
        }
    }
    st.dma_bytes = len;
    Ok(())
}

fn span(addr: u64, len: u64) -> Option<(usize, usize)> {
    let a = usize::try_from(addr).ok()?;
    Some((a, a.checked_add(usize::try_from(len).ok()?)?))
}
