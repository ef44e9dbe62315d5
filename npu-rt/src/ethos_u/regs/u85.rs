//! Command-stream opcodes and fields of Ethos-U85: the one home of these facts.
//!
//! - [`opcode`]: the U85 `cmd0`/`cmd1` opcodes, decoded commands and a bounds-checked decoder.
//! - [`fields`]: the U85 enumerations, and the bit layout of every command's fields.
//! - [`ctrl`]: the control registers (MMIO) where they differ from U55/U65.
//! - [`disasm`]: one-line rendering, identical to Vela 5.2's `--verbose-register-command-stream`
//!   dump for U85 (the fixtures' `ethos-u85-*/registers.txt`).
//!
//! The command word layout is the U55/U65 one ([`super::opcode`]: opcode in bits 0..=9, reserved
//! bits 10..=13, control in bits 14..=15, parameter in bits 16..=31, a payload word after `cmd1`
//! commands), and the decoder reuses its checks and [`DecodeError`]. Enumerations whose values and
//! names are the same on both (activation type, precision and format, DMA region and stride modes,
//! upscale mode, kernel dilation and decomposition, weight order, OFM scale mode) are the U55/U65
//! types, re-exported from [`fields`]; the rest are new types.
//!
//! Sources: Arm's register definitions as published with Vela 5.2.0
//! (`regor/architecture/ethosu85/ethos_u85_interface.hpp`, architecture version 2.0.0); see
//! `docs/u85.md`.

pub mod ctrl;
pub mod disasm;
pub mod fields;
pub mod opcode;

pub use super::opcode::DecodeError;
pub use opcode::{Cmd0, Cmd1, Command, Commands, Opcode, decode};

/// Architecture version these definitions describe (major, minor, patch).
pub const ARCH_VERSION: (u8, u8, u8) = (2, 0, 0);
