//! The NPU's performance monitoring unit around a run: up to four event counters and the
//! 48-bit cycle counter, read back as a [`PmuReport`].

use core::fmt;

use super::mmio::Mmio;
use crate::ethos_u::regs::PmuEvent;
use crate::ethos_u::regs::ctrl::{NUM_PMU_COUNTERS, PMU_CYCLE_COUNTER_BIT, Pmcr, offset};

/// What to count during a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PmuConfig {
    /// The event of each counter; [`PmuEvent::NoEvent`] leaves a counter off.
    pub events: [PmuEvent; NUM_PMU_COUNTERS],
    /// Count NPU cycles too.
    pub cycles: bool,
}

impl PmuConfig {
    /// Cycles, NPU active cycles, MAC active cycles and AXI0 read beats.
    pub const DEFAULT: PmuConfig = PmuConfig {
        events: [
            PmuEvent::NpuActive,
            PmuEvent::MacActive,
            PmuEvent::Axi0RdDataBeatReceived,
            PmuEvent::Axi0WrDataBeatWritten,
        ],
        cycles: true,
    };

    fn enable_mask(&self) -> u32 {
        let mut mask = if self.cycles {
            PMU_CYCLE_COUNTER_BIT
        } else {
            0
        };
        for (i, ev) in self.events.iter().enumerate() {
            if *ev != PmuEvent::NoEvent {
                mask |= 1 << i;
            }
        }
        mask
    }

    /// Resets and starts the counters.
    pub(super) fn start<M: Mmio + ?Sized>(&self, regs: &mut M) {
        regs.write32(
            offset::PMCR,
            Pmcr::CNT_EN | Pmcr::EVENT_CNT_RST | Pmcr::CYCLE_CNT_RST,
        );
        for (i, ev) in self.events.iter().enumerate() {
            regs.write32(offset::PMEVTYPER0 + 4 * i as u32, ev.bits() as u32);
        }
        regs.write32(offset::PMCNTENSET, self.enable_mask());
    }

    /// Reads the counters.
    pub(super) fn read<M: Mmio + ?Sized>(&self, regs: &mut M) -> PmuReport {
        let cycles = self.cycles.then(|| {
            let lo = regs.read32(offset::PMCCNTR) as u64;
            let hi = (regs.read32(offset::PMCCNTR_HI) & 0xffff) as u64;
            hi << 32 | lo
        });
        let mut counts = [0u32; NUM_PMU_COUNTERS];
        for (i, c) in counts.iter_mut().enumerate() {
            *c = regs.read32(offset::PMEVCNTR0 + 4 * i as u32);
        }
        PmuReport {
            cycles,
            events: self.events,
            counts,
        }
    }
}

impl Default for PmuConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The counters after a run. `Display` prints the "Ethos-U PMU report".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PmuReport {
    /// NPU cycles (`None` when the cycle counter was not enabled).
    pub cycles: Option<u64>,
    /// The event of each counter.
    pub events: [PmuEvent; NUM_PMU_COUNTERS],
    /// The count of each counter (0 for [`PmuEvent::NoEvent`]).
    pub counts: [u32; NUM_PMU_COUNTERS],
}

impl PmuReport {
    /// The count of `event`, if one of the counters counted it.
    pub fn count(&self, event: PmuEvent) -> Option<u32> {
        self.events
            .iter()
            .zip(self.counts)
            .find_map(|(e, c)| (*e == event && event != PmuEvent::NoEvent).then_some(c))
    }
}

impl fmt::Display for PmuReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Ethos-U PMU report:")?;
        if let Some(c) = self.cycles {
            writeln!(f, "  cycles: {c}")?;
        }
        for (e, c) in self.events.iter().zip(self.counts) {
            if *e != PmuEvent::NoEvent {
                writeln!(f, "  {}: {c}", e.name())?;
            }
        }
        Ok(())
    }
}
