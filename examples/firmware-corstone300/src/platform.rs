//! The Corstone-300 (MPS3 AN547) facts the driver needs: where the NPU's registers are and
//! which memory its AXI masters can reach.

use npu_rt::ethos_u::driver::Platform;

/// Ethos-U55 register window, Secure alias (Non-Secure: `0x4810_2000`). Source: Arm's
/// ml-embedded-evaluation-kit, Corstone-300 `peripheral_memmap.h` (`SEC_ETHOS_U_NPU_BASE`,
/// `ETHOS_U_NPU_BASE`).
pub const NPU_BASE: usize = 0x5810_2000;

/// The NPU's interrupt (`EthosU_IRQn` in the evaluation kit's Corstone-300 CMake
/// configuration). Unused: this firmware polls.
#[allow(dead_code)]
pub const NPU_IRQ: u16 = 56;

/// CPU-private tightly coupled memories, Non-Secure and Secure aliases (ITCM and DTCM, 512 KiB
/// each): the NPU cannot reach them.
const TCMS: [(usize, usize); 4] = [
    (0x0000_0000, 0x0008_0000),
    (0x1000_0000, 0x1008_0000),
    (0x2000_0000, 0x2008_0000),
    (0x3000_0000, 0x3008_0000),
];

/// Corstone-300 as this firmware sets it up: the NPU sees memory at the CPU's addresses except
/// the TCMs; the data cache stays off (cortex-m-rt does not enable it), so no cache
/// maintenance is needed. A firmware that enables the D-cache must clean and invalidate here.
pub struct An547;

impl Platform for An547 {
    fn npu_address(&mut self, cpu: usize, len: usize) -> Option<u64> {
        let end = cpu.checked_add(len)?;
        let in_tcm = TCMS.iter().any(|&(lo, hi)| cpu < hi && end > lo);
        (!in_tcm).then_some(cpu as u64)
    }
}
