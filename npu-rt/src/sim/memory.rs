//! The eight memory regions the NPU addresses (base pointers BASEP0..7), bounds-checked.
//!
//! A region is a window into a caller-provided byte buffer: `(buffer, start offset)`. Several
//! regions may share one buffer (the register-file model maps base pointers that way), so the
//! buffers are held once and regions refer to them by index.

use std::cell::RefCell;
use std::vec::Vec;

use super::error::{Access, SimErrorKind};
use super::hazard::Span;

/// Number of regions (base pointers).
pub const NUM_REGIONS: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Window {
    buffer: usize,
    start: usize,
}

/// The memory the NPU sees: up to eight regions over caller-provided byte slices.
///
/// ```
/// # use npu_rt::sim::Regions;
/// let weights = vec![0u8; 16];
/// let mut arena = vec![0u8; 1024];
/// let mut regions = Regions::new();
/// regions.set(0, &weights);
/// regions.set_mut(1, &mut arena);
/// ```
#[derive(Debug, Default)]
pub struct Regions<'a> {
    buffers: Vec<Buffer<'a>>,
    map: [Option<Window>; NUM_REGIONS],
    /// The accesses of the current command, for the hazard checker (`None`: not recording).
    trace: RefCell<Option<Vec<Span>>>,
}

#[derive(Debug)]
enum Buffer<'a> {
    Shared(&'a [u8]),
    Exclusive(&'a mut [u8]),
}

impl Buffer<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Buffer::Shared(b) => b,
            Buffer::Exclusive(b) => b,
        }
    }
}

/// Identifies a buffer added with [`Regions::add_buffer`] or [`Regions::add_buffer_mut`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferId(usize);

impl<'a> Regions<'a> {
    /// No regions mapped.
    pub fn new() -> Self {
        Regions::default()
    }

    /// Maps `region` (0..=7, others ignored) to a read-only slice (writes to it are errors).
    pub fn set(&mut self, region: usize, bytes: &'a [u8]) -> &mut Self {
        let id = self.add_buffer(bytes);
        self.map_region(region, id, 0)
    }

    /// Maps `region` (0..=7, others ignored) to a writable slice.
    pub fn set_mut(&mut self, region: usize, bytes: &'a mut [u8]) -> &mut Self {
        let id = self.add_buffer_mut(bytes);
        self.map_region(region, id, 0)
    }

    /// Adds a read-only buffer that regions can then be mapped into.
    pub fn add_buffer(&mut self, bytes: &'a [u8]) -> BufferId {
        self.buffers.push(Buffer::Shared(bytes));
        BufferId(self.buffers.len() - 1)
    }

    /// Adds a writable buffer that regions can then be mapped into.
    pub fn add_buffer_mut(&mut self, bytes: &'a mut [u8]) -> BufferId {
        self.buffers.push(Buffer::Exclusive(bytes));
        BufferId(self.buffers.len() - 1)
    }

    /// Maps `region` to `buffer` starting at byte `start` (offsets past the end make every
    /// access to the region an out-of-bounds error). Regions may overlap.
    pub fn map_region(&mut self, region: usize, buffer: BufferId, start: usize) -> &mut Self {
        if let Some(slot) = self.map.get_mut(region) {
            *slot = Some(Window {
                buffer: buffer.0,
                start,
            });
        }
        self
    }

    /// Unmaps `region`.
    pub fn unmap(&mut self, region: usize) -> &mut Self {
        if let Some(slot) = self.map.get_mut(region) {
            *slot = None;
        }
        self
    }

    /// Bytes addressable through `region` (0 when unmapped).
    pub fn len(&self, region: usize) -> usize {
        self.region_bytes(region).map_or(0, <[u8]>::len)
    }

    /// True when no region is mapped.
    pub fn is_empty(&self) -> bool {
        self.map.iter().all(Option::is_none)
    }

    /// The bytes of `region` (None when unmapped).
    pub fn region_bytes(&self, region: usize) -> Option<&[u8]> {
        let w = (*self.map.get(region)?)?;
        self.buffers
            .get(w.buffer)?
            .bytes()
            .get(w.start..)
            .or(Some(&[]))
    }

    /// The writable bytes of `region`.
    pub(crate) fn region_bytes_mut(&mut self, region: usize) -> Result<&mut [u8], SimErrorKind> {
        let w = self
            .map
            .get(region)
            .copied()
            .flatten()
            .ok_or(SimErrorKind::RegionUnmapped {
                region: region as u8,
            })?;
        match self.buffers.get_mut(w.buffer) {
            Some(Buffer::Exclusive(b)) => Ok(b.get_mut(w.start..).unwrap_or(&mut [])),
            _ => Err(SimErrorKind::RegionReadOnly {
                region: region as u8,
            }),
        }
    }

    /// Starts recording accesses (dropping any recorded).
    pub(crate) fn start_trace(&self) {
        *self.trace.borrow_mut() = Some(Vec::new());
    }

    /// Stops recording and returns what was recorded.
    pub(crate) fn take_trace(&self) -> Vec<Span> {
        self.trace.borrow_mut().take().unwrap_or_default()
    }

    /// Records an access of `[start, end)` in `region` (when recording).
    pub(crate) fn record(&self, region: u8, start: u64, end: u64, write: bool) {
        if start >= end {
            return;
        }
        if let Some(t) = self.trace.borrow_mut().as_mut() {
            // Consecutive accesses of one kind extend the last interval.
            if let Some(last) = t.last_mut()
                && last.region == region
                && last.write == write
                && start <= last.end
                && last.start <= end
            {
                last.start = last.start.min(start);
                last.end = last.end.max(end);
                return;
            }
            t.push(Span {
                region,
                start,
                end,
                write,
            });
        }
    }

    /// Borrows `len` bytes at `addr` in `region` for reading.
    pub(crate) fn read(
        &self,
        region: u8,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<&[u8], SimErrorKind> {
        let bytes = self
            .region_bytes(region as usize)
            .ok_or(SimErrorKind::RegionUnmapped { region })?;
        self.record(region, addr, addr.saturating_add(len), false);
        slice_at(bytes, addr, len).ok_or(SimErrorKind::OutOfBounds {
            region,
            addr,
            len,
            region_len: bytes.len() as u64,
            access,
        })
    }

    /// Copies `len` bytes between regions (which may share a buffer, even overlap).
    pub(crate) fn copy(
        &mut self,
        src: (u8, u64),
        dst: (u8, u64),
        len: u64,
    ) -> Result<(), SimErrorKind> {
        // Validate both ends before touching anything.
        self.read(src.0, src.1, len, Access::DmaRead)?;
        self.write(dst.0, dst.1, len, Access::DmaWrite)?;
        let (Some(sw), Some(dw)) = (
            self.map.get(src.0 as usize).copied().flatten(),
            self.map.get(dst.0 as usize).copied().flatten(),
        ) else {
            return Err(SimErrorKind::RegionUnmapped { region: src.0 });
        };
        let (s_off, d_off, n) = match (
            usize::try_from(src.1)
                .ok()
                .and_then(|a| a.checked_add(sw.start)),
            usize::try_from(dst.1)
                .ok()
                .and_then(|a| a.checked_add(dw.start)),
            usize::try_from(len).ok(),
        ) {
            (Some(s), Some(d), Some(n)) => (s, d, n),
            _ => return Err(SimErrorKind::RegionUnmapped { region: src.0 }),
        };
        if sw.buffer == dw.buffer {
            if let Some(Buffer::Exclusive(b)) = self.buffers.get_mut(dw.buffer)
                && s_off.checked_add(n).is_some_and(|e| e <= b.len())
            {
                b.copy_within(s_off..s_off + n, d_off);
                return Ok(());
            }
            return Err(SimErrorKind::RegionReadOnly { region: dst.0 });
        }
        // Distinct buffers: split the borrow.
        let (lo, hi) = (sw.buffer.min(dw.buffer), sw.buffer.max(dw.buffer));
        let (a, b) = self.buffers.split_at_mut(hi);
        let (first, second) = (a.get_mut(lo), b.first_mut());
        let (src_buf, dst_buf) = if sw.buffer < dw.buffer {
            (first, second)
        } else {
            (second, first)
        };
        match (src_buf, dst_buf) {
            (Some(sb), Some(Buffer::Exclusive(db))) => {
                let from = sb.bytes().get(s_off..s_off + n);
                let to = db.get_mut(d_off..d_off + n);
                match (from, to) {
                    (Some(f), Some(t)) => {
                        t.copy_from_slice(f);
                        Ok(())
                    }
                    _ => Err(SimErrorKind::RegionUnmapped { region: src.0 }),
                }
            }
            _ => Err(SimErrorKind::RegionReadOnly { region: dst.0 }),
        }
    }

    /// Borrows `len` bytes at `addr` in `region` for writing.
    pub(crate) fn write(
        &mut self,
        region: u8,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<&mut [u8], SimErrorKind> {
        self.record(region, addr, addr.saturating_add(len), true);
        let bytes = self.region_bytes_mut(region as usize)?;
        let region_len = bytes.len() as u64;
        slice_at_mut(bytes, addr, len).ok_or(SimErrorKind::OutOfBounds {
            region,
            addr,
            len,
            region_len,
            access,
        })
    }
}

fn range(addr: u64, len: u64, total: usize) -> Option<(usize, usize)> {
    let start = usize::try_from(addr).ok()?;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    (end <= total).then_some((start, end))
}

fn slice_at(bytes: &[u8], addr: u64, len: u64) -> Option<&[u8]> {
    let (s, e) = range(addr, len, bytes.len())?;
    bytes.get(s..e)
}

fn slice_at_mut(bytes: &mut [u8], addr: u64, len: u64) -> Option<&mut [u8]> {
    let (s, e) = range(addr, len, bytes.len())?;
    bytes.get_mut(s..e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_aliasing() {
        let ro = [1u8, 2, 3, 4];
        let mut rw = [0u8; 8];
        let mut r = Regions::new();
        r.set(0, &ro);
        let id = r.add_buffer_mut(&mut rw);
        r.map_region(1, id, 0).map_region(2, id, 4);
        assert_eq!(r.read(0, 1, 2, Access::DmaRead).unwrap(), &[2, 3]);
        assert!(matches!(
            r.read(0, 3, 2, Access::DmaRead),
            Err(SimErrorKind::OutOfBounds { .. })
        ));
        assert!(matches!(
            r.read(0, u64::MAX, 2, Access::DmaRead),
            Err(SimErrorKind::OutOfBounds { .. })
        ));
        assert!(matches!(
            r.write(0, 0, 1, Access::DmaWrite),
            Err(SimErrorKind::RegionReadOnly { .. })
        ));
        assert!(matches!(
            r.read(5, 0, 1, Access::DmaRead),
            Err(SimErrorKind::RegionUnmapped { .. })
        ));
        r.write(2, 0, 1, Access::DmaWrite).unwrap()[0] = 7;
        assert_eq!(r.read(1, 4, 1, Access::DmaRead).unwrap(), &[7]);
        assert_eq!(r.len(2), 4);
    }
}
