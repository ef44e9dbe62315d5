//! The runtime's error type (no_std, no allocation): every variant carries the raw value or
//! offset at fault so an application can log it.

use core::fmt;

/// What can go wrong when running a model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The command stream payload is malformed at this byte offset.
    Payload { offset: usize },
    /// The NPU's CONFIG register does not match what the model was compiled for (the MAC count
    /// or product differs): running anyway would compute wrong results.
    ConfigMismatch {
        /// CONFIG word the command stream was compiled for.
        expected: u32,
        /// CONFIG word the hardware reports.
        found: u32,
    },
    /// No Ethos-U answered at the register window: its `ID` register reads `id` (0 or all
    /// ones, what an absent device or unmapped address returns). Nothing was written to it.
    NoDevice {
        /// CPU address of the register window (0 when the driver has none, e.g. a model).
        base: usize,
        /// What the `ID` register read.
        id: u32,
    },
    /// The arena (or the fast scratch) is smaller than the model needs.
    ArenaTooSmall { needed: usize, given: usize },
    /// The NPU's architecture version (`ID` register) is older than, or of another major
    /// version than, the one the command stream was compiled for.
    ArchMismatch {
        /// `ID` word the command stream was compiled for.
        expected: u32,
        /// `ID` word the hardware reports.
        found: u32,
    },
    /// A buffer of the job is not reachable by the NPU: the platform's address translation
    /// refused it, or its NPU address exceeds the NPU's address width. `region` is the base
    /// pointer (0 weights, 1 arena, 2 fast scratch) or 8 for the command stream (`QBASE`).
    NotNpuAddressable { region: u8, cpu_address: usize },
    /// STATUS reported a bus (AXI) error; `status` is the raw STATUS register.
    BusError { status: u32 },
    /// STATUS reported a command-stream parse error; `status` is the raw STATUS register.
    CommandError { status: u32 },
    /// The NPU did not finish within the wait bound; `status` is the last STATUS read.
    Timeout { status: u32 },
    /// The NPU raised a fault not covered above; `status` is the raw STATUS register.
    Fault { status: u32 },
    /// The virtual NPU stopped at this command-stream byte offset (see the simulator's message).
    Simulator { offset: usize },
    /// A CPU kernel was given buffers of the wrong size (internal inconsistency of a compiled model).
    Kernel { step: usize },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Payload { offset } => {
                write!(f, "malformed command stream payload at byte {offset}")
            }
            Error::ConfigMismatch { expected, found } => write!(
                f,
                "NPU configuration mismatch: model compiled for CONFIG {expected:#010x}, hardware reports {found:#010x}"
            ),
            Error::NoDevice { base, id } => write!(
                f,
                "no Ethos-U answered at {base:#010x}: its ID register reads {id:#010x} (absent device or wrong address)"
            ),
            Error::ArenaTooSmall { needed, given } => {
                write!(f, "arena too small: {needed} bytes needed, {given} given")
            }
            Error::ArchMismatch { expected, found } => write!(
                f,
                "NPU architecture mismatch: model compiled for ID {expected:#010x}, hardware reports {found:#010x}"
            ),
            Error::NotNpuAddressable {
                region,
                cpu_address,
            } => write!(
                f,
                "buffer of region {region} at {cpu_address:#x} is not reachable by the NPU"
            ),
            Error::BusError { status } => write!(f, "NPU bus error (STATUS {status:#010x})"),
            Error::CommandError { status } => {
                write!(f, "NPU command stream parse error (STATUS {status:#010x})")
            }
            Error::Timeout { status } => {
                write!(f, "NPU did not finish in time (STATUS {status:#010x})")
            }
            Error::Fault { status } => write!(f, "NPU fault (STATUS {status:#010x})"),
            Error::Simulator { offset } => {
                write!(f, "virtual NPU failed at command stream byte {offset}")
            }
            Error::Kernel { step } => write!(f, "CPU kernel of step {step}: buffer size mismatch"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}
