//! Register access: the [`Mmio`] trait, its volatile-pointer implementation for hardware, and
//! (feature `sim`) the register-file model of the virtual NPU.

// The U85 window (its PMU ends at 0x1400) covers the U55/U65 one (0x1000); the driver only
// touches the registers of the family the payload is for.
use crate::ethos_u::regs::u85::ctrl::offset::WINDOW_SIZE;

/// 32-bit access to the NPU's register window at byte offsets
/// ([`crate::ethos_u::regs::ctrl::offset`]).
pub trait Mmio {
    /// Reads the register at byte `offset`.
    fn read32(&mut self, offset: u32) -> u32;
    /// Writes `value` to the register at byte `offset`.
    fn write32(&mut self, offset: u32, value: u32);
    /// The window's CPU address, for error messages (0 where there is none, e.g. a model).
    fn base_address(&self) -> usize {
        0
    }
}

impl<T: Mmio + ?Sized> Mmio for &mut T {
    fn read32(&mut self, offset: u32) -> u32 {
        (**self).read32(offset)
    }
    fn write32(&mut self, offset: u32, value: u32) {
        (**self).write32(offset, value)
    }
    fn base_address(&self) -> usize {
        (**self).base_address()
    }
}

/// The NPU's register window on hardware, accessed with volatile loads and stores.
///
/// Offsets outside the window (`0x1400` bytes, the U85's; 4 KiB on U55/U65, whose driver never
/// goes past it) or not a multiple of 4 read as 0 and ignore writes, so no access ever leaves
/// the window.
#[derive(Debug)]
pub struct VolatileMmio {
    base: *mut u32,
}

impl VolatileMmio {
    /// The register window at `base` (e.g. `0x5810_2000` on Corstone-300).
    ///
    /// # Safety
    ///
    /// `base` must be the 4-byte aligned address of an Ethos-U register window
    /// (`WINDOW_SIZE` bytes of device memory, 4 KiB for a U55/U65) that stays mapped for the life of the returned
    /// value, and nothing may drive the same NPU concurrently except through volatile
    /// accesses that follow the driver's protocol (e.g. [`super::IrqState::on_interrupt`] in
    /// the interrupt handler).
    pub const unsafe fn new(base: *mut u32) -> Self {
        VolatileMmio { base }
    }

    fn word(&self, offset: u32) -> Option<*mut u32> {
        (offset < WINDOW_SIZE && offset.is_multiple_of(4))
            .then(|| self.base.wrapping_add((offset / 4) as usize))
    }
}

impl Mmio for VolatileMmio {
    fn read32(&mut self, offset: u32) -> u32 {
        match self.word(offset) {
            // SAFETY: `new`'s contract makes the window valid device memory; `word` keeps the
            // access inside it and 4-byte aligned.
            Some(p) => unsafe { p.read_volatile() },
            None => 0,
        }
    }

    fn write32(&mut self, offset: u32, value: u32) {
        if let Some(p) = self.word(offset) {
            // SAFETY: as in `read32`: an aligned word inside the register window.
            unsafe { p.write_volatile(value) }
        }
    }

    fn base_address(&self) -> usize {
        self.base as usize
    }
}

#[cfg(feature = "sim")]
impl Mmio for crate::sim::regfile::RegisterFile<'_> {
    fn read32(&mut self, offset: u32) -> u32 {
        crate::sim::regfile::RegisterFile::read32(self, offset)
    }
    fn write32(&mut self, offset: u32, value: u32) {
        crate::sim::regfile::RegisterFile::write32(self, offset, value)
    }
}
