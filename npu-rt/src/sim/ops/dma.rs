//! `NPU_OP_DMA_START`: a copy between regions, or from a region into the shared buffer (LUTs).
//!
//! Only the 1-D stride mode is modelled (the one Vela emits for Ethos-U55/U65); 2-D/3-D modes
//! are reported as unsupported rather than guessed.

use std::vec::Vec;

use crate::ethos_u::regs::{DmaRegion, DmaRegionMode, DmaStrideMode};

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
    if len > max_bytes {
        return Err(SimErrorKind::LimitExceeded {
            what: "DMA length",
            requested: len,
            limit: max_bytes,
        });
    }
    let shram_oob = |addr: u64, size: usize| SimErrorKind::ShramOutOfBounds {
        addr,
        len,
        size: size as u64,
    };
    // Read the source into a buffer first: source and destination may share a buffer.
    let data: Vec<u8> = match src.mode() {
        DmaRegionMode::External => {
            let b = mem
                .read(src.region(), s.dma_src, len, Access::DmaRead)?
                .to_vec();
            st.read(src.region(), len);
            b
        }
        DmaRegionMode::Internal => {
            let (a, e) = span(s.dma_src, len).ok_or(shram_oob(s.dma_src, shram.len()))?;
            shram
                .get(a..e)
                .ok_or(shram_oob(s.dma_src, shram.len()))?
                .to_vec()
        }
    };
    match dst.mode() {
        DmaRegionMode::External => {
            mem.write(dst.region(), s.dma_dst, len, Access::DmaWrite)?
                .copy_from_slice(&data);
            st.write(dst.region(), len);
        }
        DmaRegionMode::Internal => {
            let size = shram.len();
            let (a, e) = span(s.dma_dst, len).ok_or(shram_oob(s.dma_dst, size))?;
            shram
                .get_mut(a..e)
                .ok_or(shram_oob(s.dma_dst, size))?
                .copy_from_slice(&data);
        }
    }
    st.dma_bytes = len;
    Ok(())
}

fn span(addr: u64, len: u64) -> Option<(usize, usize)> {
    let a = usize::try_from(addr).ok()?;
    Some((a, a.checked_add(usize::try_from(len).ok()?)?))
}
