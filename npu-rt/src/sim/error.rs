//! Errors of the virtual NPU: every one names the byte offset of the command at fault.

use core::fmt;

use crate::ethos_u::cop::CopError;
use crate::ethos_u::regs::DecodeError;
use crate::ethos_u::weights::WeightError;

/// What a memory access was for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// Reading the input feature map.
    IfmRead,
    /// Reading the second input feature map.
    Ifm2Read,
    /// Writing the output feature map.
    OfmWrite,
    /// Reading the compressed weight stream.
    WeightRead,
    /// Reading the scale/bias stream.
    ScaleRead,
    /// DMA source.
    DmaRead,
    /// DMA destination.
    DmaWrite,
    /// Reading the command stream (register-file model).
    CmdRead,
}

impl Access {
    /// Short name for messages.
    pub const fn name(self) -> &'static str {
        match self {
            Access::IfmRead => "IFM read",
            Access::Ifm2Read => "IFM2 read",
            Access::OfmWrite => "OFM write",
            Access::WeightRead => "weight read",
            Access::ScaleRead => "scale read",
            Access::DmaRead => "DMA read",
            Access::DmaWrite => "DMA write",
            Access::CmdRead => "command read",
        }
    }
}

/// What went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimErrorKind {
    /// The COP1 payload is malformed.
    Cop(CopError),
    /// A command word could not be decoded (unknown opcode, bad control bits, truncated).
    Decode(DecodeError),
    /// An access outside a region's bytes.
    OutOfBounds {
        /// The region (base pointer index).
        region: u8,
        /// Byte address within the region.
        addr: u64,
        /// Bytes accessed.
        len: u64,
        /// Bytes the region has.
        region_len: u64,
        /// What the access was for.
        access: Access,
    },
    /// An access to a region no buffer is mapped to.
    RegionUnmapped {
        /// The region.
        region: u8,
    },
    /// A write to a region mapped read-only.
    RegionReadOnly {
        /// The region.
        region: u8,
    },
    /// An access outside the shared buffer (SHRAM), e.g. a LUT DMA.
    ShramOutOfBounds {
        /// Byte address in the shared buffer.
        addr: u64,
        /// Bytes accessed.
        len: u64,
        /// Size of the shared buffer.
        size: u64,
    },
    /// A register holds a value the operation cannot use.
    InvalidRegister {
        /// The register (command name without `NPU_SET_`).
        register: &'static str,
        /// The value.
        value: u64,
        /// Why it is invalid.
        reason: &'static str,
    },
    /// A feature the simulator does not model.
    Unsupported {
        /// What.
        what: &'static str,
    },
    /// The weight or scale stream could not be decoded.
    Weights(WeightError),
    /// A configured limit was hit (work budget, feature map size); protects against hangs and
    /// runaway allocations on malformed streams.
    LimitExceeded {
        /// Which limit.
        what: &'static str,
        /// The amount requested.
        requested: u64,
        /// The limit.
        limit: u64,
    },
    /// An injected fault (register-file model).
    Injected {
        /// Which fault.
        what: &'static str,
    },
    /// The command touches bytes that a DMA or NPU operation still in flight writes (or
    /// writes bytes it still reads): a missing `NPU_OP_DMA_WAIT` / `NPU_OP_KERNEL_WAIT`
    /// (see `sim::hazard`).
    Hazard {
        /// The region.
        region: u8,
        /// The bytes both touch, `[start, end)`.
        start: u64,
        end: u64,
        /// Whether this command writes them (else reads).
        this_writes: bool,
        /// "a DMA" or "an NPU operation".
        other: &'static str,
        /// Byte offset of the command in flight.
        other_offset: usize,
        /// Whether that one writes them.
        other_writes: bool,
    },
}

impl fmt::Display for SimErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimErrorKind::Cop(e) => write!(f, "{e}"),
            SimErrorKind::Decode(e) => write!(f, "{e}"),
            SimErrorKind::OutOfBounds {
                region,
                addr,
                len,
                region_len,
                access,
            } => write!(
                f,
                "{} of {len} bytes at {addr:#x} is outside region {region} ({region_len} bytes)",
                access.name()
            ),
            SimErrorKind::RegionUnmapped { region } => write!(f, "region {region} is not mapped"),
            SimErrorKind::RegionReadOnly { region } => write!(f, "region {region} is read-only"),
            SimErrorKind::ShramOutOfBounds { addr, len, size } => write!(
                f,
                "shared buffer access of {len} bytes at {addr:#x} is outside its {size} bytes"
            ),
            SimErrorKind::InvalidRegister {
                register,
                value,
                reason,
            } => {
                write!(f, "{register} = {value:#x}: {reason}")
            }
            SimErrorKind::Unsupported { what } => write!(f, "not modelled: {what}"),
            SimErrorKind::Weights(e) => write!(f, "{e}"),
            SimErrorKind::LimitExceeded {
                what,
                requested,
                limit,
            } => {
                write!(f, "{what}: {requested} exceeds the limit of {limit}")
            }
            SimErrorKind::Injected { what } => write!(f, "injected fault: {what}"),
            SimErrorKind::Hazard {
                region,
                start,
                end,
                this_writes,
                other,
                other_offset,
                other_writes,
            } => {
                let verb = |w: bool| if w { "writes" } else { "reads" };
                write!(
                    f,
                    "hazard: {} bytes {start:#x}..{end:#x} of region {region} that {other} at byte \
                     {other_offset:#x}, still in flight (no wait in between), {}",
                    verb(*this_writes),
                    verb(*other_writes)
                )
            }
        }
    }
}

/// A failure while running a command stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimError {
    /// Byte offset of the command at fault, in the bytes given to the simulator (for a COP1
    /// payload: an offset in the payload).
    pub offset: usize,
    /// The command's name (e.g. `NPU_OP_CONV`), when one was decoded.
    pub command: Option<&'static str>,
    /// What went wrong.
    pub kind: SimErrorKind,
}

impl SimError {
    /// An error at `offset` for the command named `command`.
    pub fn at(offset: usize, command: Option<&'static str>, kind: SimErrorKind) -> Self {
        SimError {
            offset,
            command,
            kind,
        }
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.command {
            Some(c) => write!(f, "command at byte {:#x} ({c}): {}", self.offset, self.kind),
            None => write!(f, "command at byte {:#x}: {}", self.offset, self.kind),
        }
    }
}

impl std::error::Error for SimError {}
