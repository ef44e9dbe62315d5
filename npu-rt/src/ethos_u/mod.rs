//! Ethos-U55/U65 hardware interface: register definitions, the COP1 payload format, accelerator
//! configurations and the weight stream format.

pub mod builtin_act;
pub mod config;
pub mod cop;
pub mod driver;
pub mod numerics;
pub mod regs;
pub mod state;
pub mod weights;

pub use driver::EthosU;
