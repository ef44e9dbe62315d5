//! Interrupt-driven completion: the application's NPU interrupt handler records the status
//! here; the driver's wait loop picks it up.

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use super::mmio::Mmio;
use crate::ethos_u::regs::ctrl::{CmdReg, offset};

/// The NPU status the interrupt handler saw, shared with the driver (place it in a `static`).
///
/// ```ignore
/// static NPU_IRQ: IrqState = IrqState::new();
/// // in the NPU's interrupt handler (its own VolatileMmio over the same window):
/// NPU_IRQ.on_interrupt(&mut irq_regs);
/// // at start-up:
/// let npu = unsafe { EthosU::new(NPU_BASE) }.with_irq(&NPU_IRQ);
/// ```
#[derive(Debug, Default)]
pub struct IrqState {
    raised: AtomicBool,
    status: AtomicU32,
}

impl IrqState {
    /// Nothing raised yet.
    pub const fn new() -> Self {
        IrqState {
            raised: AtomicBool::new(false),
            status: AtomicU32::new(0),
        }
    }

    /// Call from the NPU's interrupt handler: reads `STATUS`, acknowledges the interrupt
    /// (`CMD.clear_irq`, keeping the clock/power Q-channel enables) and records the status.
    pub fn on_interrupt<M: Mmio + ?Sized>(&self, regs: &mut M) {
        let status = regs.read32(offset::STATUS);
        let q = regs.read32(offset::CMD) & (CmdReg::CLOCK_Q_ENABLE | CmdReg::POWER_Q_ENABLE);
        regs.write32(offset::CMD, q | CmdReg::CLEAR_IRQ);
        self.status.store(status, Ordering::Relaxed);
        // Release: the status store above is visible to whoever sees `raised`.
        self.raised.store(true, Ordering::Release);
    }

    /// The recorded status, if an interrupt came since the last call.
    pub(super) fn take(&self) -> Option<u32> {
        self.raised
            .swap(false, Ordering::Acquire)
            .then(|| self.status.load(Ordering::Relaxed))
    }
}
