//! Activation LUT slots in the shared buffer: which table is loaded where.
//!
//! The LUT area (2 KiB at the end of the shared buffer) is split into 256-byte slots; a table
//! of `n` slots goes to a slot index that is a multiple of `n`. Tables stay resident while
//! nothing overwrites them, so a table used again is not DMA'd again; otherwise the least
//! recently used position is replaced (Vela's `AllocateLutSlot`).

/// One 256-byte slot: which table (region, address, size) it holds and when it was last used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Slot {
    table: Option<(u8, u64, usize)>,
    last_used: usize,
}

/// The LUT slots of the shared buffer.
#[derive(Clone, Debug)]
pub(super) struct LutSlots {
    slots: Vec<Slot>,
    slot_bytes: usize,
}

impl LutSlots {
    pub fn new(lut_bytes: usize, slot_bytes: usize) -> Self {
        LutSlots {
            slots: vec![Slot::default(); lut_bytes / slot_bytes.max(1)],
            slot_bytes: slot_bytes.max(1),
        }
    }

    /// Forgets every table (the accumulators of an operation overwrote them).
    pub fn clear(&mut self) {
        self.slots.fill(Slot::default());
    }

    /// Picks the slot for the table at `(region, address)` of `size` bytes, used at time
    /// `now`. Returns the slot and whether the table is already loaded there, or `None` when
    /// the size is not a whole number of slots that fits the LUT area.
    pub fn allocate(
        &mut self,
        region: u8,
        address: u64,
        size: usize,
        now: usize,
    ) -> Option<(usize, bool)> {
        if size == 0
            || !size.is_multiple_of(self.slot_bytes)
            || size / self.slot_bytes > self.slots.len()
        {
            return None;
        }
        let n = size / self.slot_bytes;
        let table = Some((region, address, size));
        let mut chosen = 0;
        let mut resident = false;
        for i in (0..self.slots.len()).step_by(n) {
            if self.slots[i].table == table {
                chosen = i;
                resident = true;
                break;
            }
            if self.slots[i].last_used < self.slots[chosen].last_used {
                chosen = i;
            }
        }
        let end = (chosen + n).min(self.slots.len());
        for s in &mut self.slots[chosen..end] {
            *s = Slot {
                table,
                last_used: now,
            };
        }
        Some((chosen, resident))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_resident_tables_and_replaces_least_recently_used() {
        let mut l = LutSlots::new(2048, 256);
        assert_eq!(l.allocate(0, 0x100, 256, 1), Some((0, false)));
        assert_eq!(l.allocate(0, 0x200, 256, 2), Some((1, false)));
        assert_eq!(l.allocate(0, 0x100, 256, 3), Some((0, true)));
        // A 1 KiB table takes 4 slots at a multiple of 4: slots 4..8 were never used.
        assert_eq!(l.allocate(0, 0x400, 1024, 4), Some((4, false)));
        l.clear();
        assert_eq!(l.allocate(0, 0x100, 256, 5), Some((0, false)));
        assert_eq!(l.allocate(0, 0x100, 300, 6), None);
        assert_eq!(l.allocate(0, 0x100, 4096, 6), None);
    }
}
