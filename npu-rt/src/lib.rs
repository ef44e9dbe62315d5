//! `npu-rt`: the runtime side of the Ethos-U toolchain.
//!
//! - [`ethos_u::regs`]: command-stream opcodes and register fields of Ethos-U55/U65, shared by the
//!   compiler, the driver and the simulator (the one home of these facts); [`ethos_u::regs::u85`]
//!   holds Ethos-U85's, with a disassembler.
//! - [`ethos_u::cop`]: the COP1 driver payload that wraps a command stream.
//! - [`sim`] (feature `sim`): a bit-exact virtual Ethos-U for hosts.
//! - [`cpu`]: int8 kernels for operators that stay on the CPU.
//! - [`fixed`]: the fixed-point arithmetic of TFLite's integer kernels (gemmlowp's), shared by the
//!   CPU kernels and the compiler (its reference interpreter, importer and lowering).
//!
//! The core is `#![no_std]` without `alloc`.
#![no_std]
#![forbid(unsafe_op_in_unsafe_fn)]

#[cfg(feature = "std")]
extern crate std;

pub mod cpu;
pub mod error;
pub mod ethos_u;
pub mod fixed;
pub mod io;
mod npu;
#[cfg(feature = "sim")]
pub mod sim;

pub use error::Error;
pub use npu::{Aligned16, Job, Npu};

/// Includes the module a build script generated with `npu_build::Model::compile()`
/// (`$OUT_DIR/<name>.rs`).
///
/// ```ignore
/// npu_rt::include_compiled!(mv2);
/// ```
#[macro_export]
macro_rules! include_compiled {
    ($name:ident) => {
        include!(concat!(env!("OUT_DIR"), "/", stringify!($name), ".rs"));
    };
}
