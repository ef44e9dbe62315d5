//! Command-stream opcodes and register fields of Ethos-U55/U65: the one home of these facts.
//!
//! - [`opcode`]: the `cmd0`/`cmd1` opcodes, the command word layout and a bounds-checked decoder.
//! - [`fields`]: the enumerations and packed parameter fields the commands carry.
//! - [`ctrl`]: the control interface (APB registers: ID, STATUS, CMD, QBASE, BASEP, PMU, ...).
//! - [`disasm`]: one-line rendering of a command, in the layout of Vela's
//!   `--verbose-register-command-stream` dump.
//! - [`u85`]: the Ethos-U85 command set (same word layout, its own opcodes and fields).
//!
//! A command stream is a sequence of little-endian 32-bit words. The low 16 bits of the first
//! word hold the opcode (bits 0..=9) and the control field (bits 14..=15: 0 = `cmd0`, one word;
//! 1 = `cmd1`, followed by a 32-bit payload word); the high 16 bits hold the parameter.
//!
//! Sources: Arm's register definitions as published with Vela 5.2.0 (`ethos_u55_regs.py`,
//! `regor/architecture/ethosu65/ethos_u65_interface.hpp`, architecture version 1.0.6).

pub mod ctrl;
pub mod disasm;
pub mod fields;
pub mod opcode;
pub mod u85;

pub use fields::*;
pub use opcode::{Cmd0, Cmd1, Command, DecodeError, Opcode};

/// Architecture version these definitions describe (major, minor, patch).
pub const ARCH_VERSION: (u8, u8, u8) = (1, 0, 6);
