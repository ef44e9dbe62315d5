//! What the Corstone-300 firmwares share: the console and exit over semihosting, the
//! platform's NPU facts, `.npy` data, the SysTick counter and the stack watermark.
//!
//! The binaries:
//! - `firmware-corstone300` (`src/main.rs`): `op_conv1x1` once on the Ethos-U55 through
//!   `npu_rt::ethos_u::EthosU`, with its PMU report (needs an NPU: a board or Arm's FVP);
//! - `digits-qemu` (`src/bin/digits-qemu.rs`): the digits model over its held-out set on the
//!   Cortex-M55's CPU kernels, for QEMU's `mps3-an547`, which has the M55 but no NPU.
#![no_std]

pub mod npy;
#[cfg(target_os = "none")]
pub mod platform;
#[cfg(target_os = "none")]
pub mod semihosting;
#[cfg(target_os = "none")]
pub mod stack;
#[cfg(target_os = "none")]
pub mod systick;

#[cfg(target_os = "none")]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    use core::fmt::Write;
    let mut out = semihosting::Console::new();
    let _ = writeln!(out, "panic: {info}");
    out.flush();
    semihosting::exit(101)
}
