//! The hazard checker: which DMAs and NPU operations the hardware may run at the same time,
//! and whether one of them touches memory another one in flight writes.
//!
//! The simulator executes commands one after another, so on its own it cannot see a missing
//! wait: a stream that reads a DMA's destination before `NPU_OP_DMA_WAIT` gives the right
//! answer here and garbage on silicon. This module models what may overlap there:
//!
//! - `NPU_OP_DMA_START` returns at once; the DMA runs beside the NPU's operations until an
//!   `NPU_OP_DMA_WAIT n` leaves at most `n` DMAs outstanding, or until the hardware's queue is
//!   full (`max_outstanding_dma`: the command processor then waits for the oldest).
//! - An operation (`NPU_OP_CONV`, `_DEPTHWISE`, `_POOL`, `_ELEMENTWISE`) likewise runs until
//!   `NPU_OP_KERNEL_WAIT n` leaves at most `n` outstanding, or `max_outstanding_kernels` newer
//!   ones were issued.
//! - DMAs complete in order, as do operations.
//!
//! A DMA and an operation that may overlap must not touch the same bytes of a region unless
//! both only read them. Operations overlapping each other are governed by `NPU_SET_BLOCKDEP`
//! at block granularity, which this checker does not model (the block dependency is checked
//! where the compiler chooses it). Accesses are tracked per region as byte intervals: the
//! bounding interval of each feature map tile, weight, scale or DMA access, which is exact for
//! dense tensors and conservative for strided ones (a box wrapping around a ring buffer is two
//! tiles: the ring rows between them are not accessed, and may be reused). The LUT DMA into
//! the shared buffer is not tracked (no region).
//!
//! Sources: Vela's `register_command_stream_util.py` (`get_wait_dependency`: outstanding DMA
//! and kernel accesses, queue depths) and regor's `CalcCommandWaits`, which insert the waits
//! this checker demands; the Ethos-U55 TRM's description of `NPU_OP_DMA_WAIT` and
//! `NPU_OP_KERNEL_WAIT`.

use std::collections::VecDeque;
use std::vec::Vec;

use super::error::SimErrorKind;

/// Bytes `[start, end)` of a region, read or written by one command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub region: u8,
    pub start: u64,
    pub end: u64,
    pub write: bool,
}

impl Span {
    /// Whether `self` and `other` touch a common byte and at least one writes it.
    fn conflicts(&self, other: &Span) -> bool {
        self.region == other.region
            && (self.write || other.write)
            && self.start < other.end
            && other.start < self.end
    }
}

/// One command in flight.
#[derive(Debug)]
struct InFlight {
    /// Byte offset of its `NPU_OP_*` command.
    offset: usize,
    spans: Vec<Span>,
}

/// DMAs and operations in flight (see the module documentation).
#[derive(Debug)]
pub(crate) struct Tracker {
    max_dmas: usize,
    max_kernels: usize,
    dmas: VecDeque<InFlight>,
    kernels: VecDeque<InFlight>,
}

impl Tracker {
    pub(crate) fn new(max_dmas: u32, max_kernels: u32) -> Self {
        Tracker {
            max_dmas: max_dmas.max(1) as usize,
            max_kernels: max_kernels.max(1) as usize,
            dmas: VecDeque::new(),
            kernels: VecDeque::new(),
        }
    }

    /// Everything completed (a new stream, or a reset).
    pub(crate) fn clear(&mut self) {
        self.dmas.clear();
        self.kernels.clear();
    }

    /// `NPU_OP_DMA_WAIT n`.
    pub(crate) fn dma_wait(&mut self, n: u16) {
        while self.dmas.len() > usize::from(n) {
            self.dmas.pop_front();
        }
    }

    /// `NPU_OP_KERNEL_WAIT n`.
    pub(crate) fn kernel_wait(&mut self, n: u16) {
        while self.kernels.len() > usize::from(n) {
            self.kernels.pop_front();
        }
    }

    /// A DMA issued at `offset` touching `spans`: checked against the operations in flight.
    pub(crate) fn dma(&mut self, offset: usize, spans: Vec<Span>) -> Result<(), SimErrorKind> {
        while self.dmas.len() >= self.max_dmas {
            self.dmas.pop_front();
        }
        check(&spans, &self.kernels, "an NPU operation")?;
        self.dmas.push_back(InFlight { offset, spans });
        Ok(())
    }

    /// An operation issued at `offset` touching `spans`: checked against the DMAs in flight.
    pub(crate) fn kernel(&mut self, offset: usize, spans: Vec<Span>) -> Result<(), SimErrorKind> {
        while self.kernels.len() >= self.max_kernels {
            self.kernels.pop_front();
        }
        check(&spans, &self.dmas, "a DMA")?;
        self.kernels.push_back(InFlight { offset, spans });
        Ok(())
    }
}

fn check(
    spans: &[Span],
    in_flight: &VecDeque<InFlight>,
    other: &'static str,
) -> Result<(), SimErrorKind> {
    for f in in_flight {
        for s in spans {
            if let Some(t) = f.spans.iter().find(|t| s.conflicts(t)) {
                return Err(SimErrorKind::Hazard {
                    region: s.region,
                    start: s.start.max(t.start),
                    end: s.end.min(t.end),
                    this_writes: s.write,
                    other,
                    other_offset: f.offset,
                    other_writes: t.write,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;

    fn span(region: u8, start: u64, end: u64, write: bool) -> Span {
        Span {
            region,
            start,
            end,
            write,
        }
    }

    #[test]
    fn a_read_of_a_dma_destination_before_its_wait_is_a_hazard() {
        let mut t = Tracker::new(1, 2);
        t.dma(0, vec![span(0, 0, 64, false), span(1, 100, 164, true)])
            .unwrap();
        let e = t.kernel(8, vec![span(1, 150, 200, false)]).unwrap_err();
        assert!(matches!(
            e,
            SimErrorKind::Hazard {
                region: 1,
                start: 150,
                end: 164,
                other_offset: 0,
                ..
            }
        ));
        // After the wait it is fine.
        let mut t = Tracker::new(1, 2);
        t.dma(0, vec![span(1, 100, 164, true)]).unwrap();
        t.dma_wait(0);
        t.kernel(8, vec![span(1, 150, 200, false)]).unwrap();
    }

    #[test]
    fn reads_never_conflict_and_queues_retire_the_oldest() {
        let mut t = Tracker::new(1, 2);
        t.kernel(0, vec![span(1, 0, 100, false)]).unwrap();
        t.dma(4, vec![span(1, 0, 100, false)]).unwrap();
        // A second DMA: the queue of one retires the first.
        t.dma(8, vec![span(2, 0, 8, true)]).unwrap();
        t.kernel(12, vec![span(1, 0, 100, true)]).unwrap();
        // Two newer operations retire the one at 0: a DMA may overwrite what it read...
        let mut t = Tracker::new(1, 2);
        t.kernel(0, vec![span(1, 0, 16, false)]).unwrap();
        t.kernel(4, vec![span(3, 0, 16, false)]).unwrap();
        t.kernel(8, vec![span(3, 16, 32, false)]).unwrap();
        t.dma(12, vec![span(1, 0, 16, true)]).unwrap();
        // ...but not what the newest still reads.
        assert!(t.dma(16, vec![span(3, 20, 24, true)]).is_err());
    }
}
