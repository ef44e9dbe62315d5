//! The NPU's performance monitoring unit around a run: up to four event counters and the
//! 48-bit cycle counter, read back as a [`PmuReport`].
//!
//! On a U85 the PMU sits `0x1000` higher and has eight event counters; the driver uses the
//! first four. The event codes are written as they are: the [`PmuConfig::DEFAULT`] events have
//! the same codes on U85 (Vela 5.2's `pmu_event`: 35 `NPU_ACTIVE`, 48 `MAC_ACTIVE`, 130
//! `SRAM_RD_DATA_BEAT_RECEIVED`, 135 `SRAM_WR_DATA_BEAT_WRITTEN`, the U85 names of the AXI0
//! beats), other U55 events may mean something else there.

use core::fmt;

use super::mmio::Mmio;
use crate::ethos_u::regs::PmuEvent;
use crate::ethos_u::regs::ctrl::{NUM_PMU_COUNTERS, PMU_CYCLE_COUNTER_BIT, Pmcr, offset};
use crate::ethos_u::regs::u85::ctrl::offset as u85;

/// Where the PMU registers are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PmuMap {
    /// Ethos-U55/U65 ([`offset`]).
    U55,
    /// Ethos-U85 ([`u85`]).
    U85,
}

impl PmuMap {
    /// (PMCR, PMCNTENSET, PMCCNTR, PMCCNTR_HI, PMEVCNTR0, PMEVTYPER0).
    const fn offsets(self) -> (u32, u32, u32, u32, u32, u32) {
        match self {
            PmuMap::U55 => (
                offset::PMCR,
                offset::PMCNTENSET,
                offset::PMCCNTR,
                offset::PMCCNTR_HI,
                offset::PMEVCNTR0,
                offset::PMEVTYPER0,
            ),
            PmuMap::U85 => (
                u85::PMCR,
                u85::PMCNTENSET,
                u85::PMCCNTR,
                u85::PMCCNTR_HI,
                u85::PMEVCNTR0,
                u85::PMEVTYPER0,
            ),
        }
    }
}

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
    pub(super) fn start<M: Mmio + ?Sized>(&self, regs: &mut M, map: PmuMap) {
        let (pmcr, pmcntenset, _, _, _, pmevtyper0) = map.offsets();
        regs.write32(
            pmcr,
            Pmcr::CNT_EN | Pmcr::EVENT_CNT_RST | Pmcr::CYCLE_CNT_RST,
        );
        for (i, ev) in self.events.iter().enumerate() {
            regs.write32(pmevtyper0 + 4 * i as u32, ev.bits() as u32);
        }
        regs.write32(pmcntenset, self.enable_mask());
    }

    /// Reads the counters.
    pub(super) fn read<M: Mmio + ?Sized>(&self, regs: &mut M, map: PmuMap) -> PmuReport {
        let (_, _, pmccntr, pmccntr_hi, pmevcntr0, _) = map.offsets();
        let cycles = self.cycles.then(|| {
            let lo = regs.read32(pmccntr) as u64;
            let hi = (regs.read32(pmccntr_hi) & 0xffff) as u64;
            hi << 32 | lo
        });
        let mut counts = [0u32; NUM_PMU_COUNTERS];
        for (i, c) in counts.iter_mut().enumerate() {
            *c = regs.read32(pmevcntr0 + 4 * i as u32);
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
