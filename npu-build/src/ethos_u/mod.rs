//! The Ethos-U55/U65 backend: lower -> block selection -> weight encoding -> allocation -> emission.
//!
//! - [`lower`]: IR graph -> [`npu_op::Program`] (buffers + NPU operations, all numerics decided).
//! - [`block`]: OFM block and shared-buffer layout of each operation.
//! - [`weights`]: weight and scale/bias streams in the format the hardware reads.
//! - [`alloc`]: arena placement by liveness.
//! - [`emit`]: register command stream with dependencies (BLOCKDEP, waits, LUT DMAs).
//! - [`compile`](compile::compile): the driver running them in order; [`artifact`]: its result.

pub mod alloc;
pub mod artifact;
pub mod block;
pub mod compile;
mod copy_lead;
pub mod cpu_ops;
mod depth_slice;
pub mod emit;
mod fuse_concat;
mod fuse_lut;
pub mod lower;
pub mod npu_op;
pub mod partition;
pub mod perf;
mod prefetch;
mod stripe;
pub mod weights;

pub use artifact::{Compiled, IoTensor, Step};
pub use compile::{CompileOptions, compile, compile_with};
