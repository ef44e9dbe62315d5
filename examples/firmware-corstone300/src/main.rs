//! Bare-metal firmware for a Cortex-M55 with an Ethos-U55-128 on Corstone-300 (MPS3 AN547): runs
//! `op_conv1x1` (a 1x1 convolution compiled at build time by `include_model!`) once on the NPU
//! through `npu_rt::ethos_u::EthosU`, then prints the PMU report, the output checksum and
//! whether the output equals TFLite's reference, over semihosting.
//!
//! Build: `cargo build --release -p firmware-corstone300 --target thumbv8m.main-none-eabihf`.
//! It needs a debugger or a model with semihosting (the Corstone-300 FVP, QEMU `-semihosting`):
//! on a board without one, the semihosting `BKPT` faults.
//!
//! Under QEMU's `mps3-an547` (a Cortex-M55 without the NPU) it stops with "no Ethos-U
//! answered at 0x58102000" and exit status 1: see `digits-qemu` for what runs there.
//!
//! Features for measuring the driver's flash (`measure.sh`): `noop-npu` replaces the NPU with
//! one that does nothing; `no-pmu` runs the driver without the PMU and its report;
//! `pmu-numbers` prints the PMU counters with event numbers instead of names.
#![cfg_attr(target_os = "none", no_std)]
#![cfg_attr(target_os = "none", no_main)]

#[cfg(target_os = "none")]
mod conv1x1;

/// Host builds have nothing to run.
#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("firmware-corstone300 is firmware: build it with --target thumbv8m.main-none-eabihf");
    std::process::exit(2);
}
