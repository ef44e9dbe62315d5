//! Ethos-U55/U65 hardware interface: register definitions and the COP1 payload format.

pub mod cop;
pub mod regs;
