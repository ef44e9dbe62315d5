//! `cmd0`/`cmd1` opcodes, the command word layout, and a bounds-checked command decoder.

use core::fmt;

/// Bits 0..=9 of a command word: the opcode.
pub const OPCODE_MASK: u32 = 0x3ff;
/// Bits 14..=15 of a command word: the control field (0 = `cmd0`, 1 = `cmd1` with payload).
pub const CONTROL_SHIFT: u32 = 14;
/// The control field of a `cmd1` command, in place (`0x4000`).
pub const CMD1_FLAG: u32 = 1 << CONTROL_SHIFT;
/// Bits 10..=13 of a command word, reserved (must be zero).
pub const RESERVED_MASK: u32 = 0x3c00;

macro_rules! opcodes {
    (
        $(#[$m:meta])* $name:ident {
            $($var:ident = $val:literal,)*
        }
    ) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u16)]
        #[allow(missing_docs, non_camel_case_types)]
        pub enum $name {
            $($var = $val,)*
        }

        impl $name {
            /// Every opcode of this kind, in numeric order.
            pub const ALL: &'static [$name] = &[$($name::$var,)*];

            /// The opcode with this 10-bit code, if it is defined.
            pub const fn from_u16(code: u16) -> Option<Self> {
                match code {
                    $($val => Some(Self::$var),)*
                    _ => None,
                }
            }

            /// The opcode's 10-bit code.
            pub const fn code(self) -> u16 {
                self as u16
            }

            /// The register-level name, e.g. `NPU_SET_IFM_BASE0` (as Arm's documentation spells it).
            pub const fn name(self) -> &'static str {
                match self {
                    $(Self::$var => concat!("NPU_", stringify!($var)),)*
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

// Ethos-U85 shares the opcode machinery (`regs::u85::opcode`).
pub(crate) use opcodes;

opcodes! {
    /// Commands without payload: operations (`NPU_OP_*`) and 16-bit register sets.
    Cmd0 {
        OP_STOP = 0x000,
        OP_IRQ = 0x001,
        OP_CONV = 0x002,
        OP_DEPTHWISE = 0x003,
        OP_POOL = 0x005,
        OP_ELEMENTWISE = 0x006,
        OP_DMA_START = 0x010,
        OP_DMA_WAIT = 0x011,
        OP_KERNEL_WAIT = 0x012,
        OP_PMU_MASK = 0x013,
        SET_IFM_PAD_TOP = 0x100,
        SET_IFM_PAD_LEFT = 0x101,
        SET_IFM_PAD_RIGHT = 0x102,
        SET_IFM_PAD_BOTTOM = 0x103,
        SET_IFM_DEPTH_M1 = 0x104,
        SET_IFM_PRECISION = 0x105,
        SET_IFM_UPSCALE = 0x107,
        SET_IFM_ZERO_POINT = 0x109,
        SET_IFM_WIDTH0_M1 = 0x10a,
        SET_IFM_HEIGHT0_M1 = 0x10b,
        SET_IFM_HEIGHT1_M1 = 0x10c,
        SET_IFM_IB_END = 0x10d,
        SET_IFM_REGION = 0x10f,
        SET_OFM_WIDTH_M1 = 0x111,
        SET_OFM_HEIGHT_M1 = 0x112,
        SET_OFM_DEPTH_M1 = 0x113,
        SET_OFM_PRECISION = 0x114,
        SET_OFM_BLK_WIDTH_M1 = 0x115,
        SET_OFM_BLK_HEIGHT_M1 = 0x116,
        SET_OFM_BLK_DEPTH_M1 = 0x117,
        SET_OFM_ZERO_POINT = 0x118,
        SET_OFM_WIDTH0_M1 = 0x11a,
        SET_OFM_HEIGHT0_M1 = 0x11b,
        SET_OFM_HEIGHT1_M1 = 0x11c,
        SET_OFM_REGION = 0x11f,
        SET_KERNEL_WIDTH_M1 = 0x120,
        SET_KERNEL_HEIGHT_M1 = 0x121,
        SET_KERNEL_STRIDE = 0x122,
        SET_PARALLEL_MODE = 0x123,
        SET_ACC_FORMAT = 0x124,
        SET_ACTIVATION = 0x125,
        SET_ACTIVATION_MIN = 0x126,
        SET_ACTIVATION_MAX = 0x127,
        SET_WEIGHT_REGION = 0x128,
        SET_SCALE_REGION = 0x129,
        SET_AB_START = 0x12d,
        SET_BLOCKDEP = 0x12f,
        SET_DMA0_SRC_REGION = 0x130,
        SET_DMA0_DST_REGION = 0x131,
        SET_DMA0_SIZE0 = 0x132,
        SET_DMA0_SIZE1 = 0x133,
        SET_IFM2_BROADCAST = 0x180,
        SET_IFM2_SCALAR = 0x181,
        SET_IFM2_PRECISION = 0x185,
        SET_IFM2_ZERO_POINT = 0x189,
        SET_IFM2_WIDTH0_M1 = 0x18a,
        SET_IFM2_HEIGHT0_M1 = 0x18b,
        SET_IFM2_HEIGHT1_M1 = 0x18c,
        SET_IFM2_IB_START = 0x18d,
        SET_IFM2_REGION = 0x18f,
    }
}

opcodes! {
    /// Commands with a 32-bit payload word: addresses, strides, lengths and scales.
    Cmd1 {
        SET_IFM_BASE0 = 0x000,
        SET_IFM_BASE1 = 0x001,
        SET_IFM_BASE2 = 0x002,
        SET_IFM_BASE3 = 0x003,
        SET_IFM_STRIDE_X = 0x004,
        SET_IFM_STRIDE_Y = 0x005,
        SET_IFM_STRIDE_C = 0x006,
        SET_OFM_BASE0 = 0x010,
        SET_OFM_BASE1 = 0x011,
        SET_OFM_BASE2 = 0x012,
        SET_OFM_BASE3 = 0x013,
        SET_OFM_STRIDE_X = 0x014,
        SET_OFM_STRIDE_Y = 0x015,
        SET_OFM_STRIDE_C = 0x016,
        SET_WEIGHT_BASE = 0x020,
        SET_WEIGHT_LENGTH = 0x021,
        SET_SCALE_BASE = 0x022,
        SET_SCALE_LENGTH = 0x023,
        SET_OFM_SCALE = 0x024,
        SET_OPA_SCALE = 0x025,
        SET_OPB_SCALE = 0x026,
        SET_DMA0_SRC = 0x030,
        SET_DMA0_DST = 0x031,
        SET_DMA0_LEN = 0x032,
        SET_DMA0_SKIP0 = 0x033,
        SET_DMA0_SKIP1 = 0x034,
        SET_IFM2_BASE0 = 0x080,
        SET_IFM2_BASE1 = 0x081,
        SET_IFM2_BASE2 = 0x082,
        SET_IFM2_BASE3 = 0x083,
        SET_IFM2_STRIDE_X = 0x084,
        SET_IFM2_STRIDE_Y = 0x085,
        SET_IFM2_STRIDE_C = 0x086,
        SET_WEIGHT1_BASE = 0x090,
        SET_WEIGHT1_LENGTH = 0x091,
        SET_SCALE1_BASE = 0x092,
        SET_SCALE1_LENGTH = 0x093,
    }
}

impl Cmd0 {
    /// True for the commands that start or synchronise work (`NPU_OP_*`), false for register sets.
    pub const fn is_operation(self) -> bool {
        (self as u16) < 0x100
    }

    /// Encodes this command with a 16-bit parameter into one command word.
    pub const fn encode(self, param: u16) -> u32 {
        ((param as u32) << 16) | self as u32
    }
}

impl Cmd1 {
    /// Encodes this command with its 16-bit parameter and 32-bit payload into two command words.
    pub const fn encode(self, param: u16, payload: u32) -> [u32; 2] {
        [((param as u32) << 16) | CMD1_FLAG | self as u32, payload]
    }

    /// Encodes an address-like command (base, stride, DMA address/length): bits 32..=39 of
    /// `value` go to the parameter (`addr_hi`), bits 0..=31 to the payload.
    pub const fn encode_address(self, value: u64) -> [u32; 2] {
        self.encode(((value >> 32) & 0xff) as u16, value as u32)
    }
}

/// Either kind of opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Opcode {
    /// A command without payload.
    Cmd0(Cmd0),
    /// A command with a 32-bit payload.
    Cmd1(Cmd1),
}

impl Opcode {
    /// The register-level name, e.g. `NPU_OP_CONV`.
    pub const fn name(self) -> &'static str {
        match self {
            Opcode::Cmd0(c) => c.name(),
            Opcode::Cmd1(c) => c.name(),
        }
    }
}

/// One decoded command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Command {
    /// A one-word command.
    Cmd0 {
        /// The opcode.
        op: Cmd0,
        /// Bits 16..=31 of the command word.
        param: u16,
    },
    /// A two-word command.
    Cmd1 {
        /// The opcode.
        op: Cmd1,
        /// Bits 16..=31 of the first word (for addresses: bits 32..=39 of the address).
        param: u16,
        /// The second word.
        payload: u32,
    },
}

impl Command {
    /// Number of 32-bit words this command occupies (1 or 2).
    pub const fn words(&self) -> usize {
        match self {
            Command::Cmd0 { .. } => 1,
            Command::Cmd1 { .. } => 2,
        }
    }

    /// The opcode.
    pub const fn opcode(&self) -> Opcode {
        match *self {
            Command::Cmd0 { op, .. } => Opcode::Cmd0(op),
            Command::Cmd1 { op, .. } => Opcode::Cmd1(op),
        }
    }

    /// The parameter (bits 16..=31 of the first word).
    pub const fn param(&self) -> u16 {
        match *self {
            Command::Cmd0 { param, .. } | Command::Cmd1 { param, .. } => param,
        }
    }

    /// For `cmd1`: the 40-bit address formed by the parameter's low 8 bits and the payload.
    pub const fn address(&self) -> Option<u64> {
        match *self {
            Command::Cmd1 { param, payload, .. } => {
                Some((((param & 0xff) as u64) << 32) | payload as u64)
            }
            Command::Cmd0 { .. } => None,
        }
    }

    /// Encodes the command into `out` (1 or 2 words); returns the number of words written, or
    /// `None` when `out` is too short.
    pub fn encode_into(&self, out: &mut [u32]) -> Option<usize> {
        match *self {
            Command::Cmd0 { op, param } => {
                *out.first_mut()? = op.encode(param);
                Some(1)
            }
            Command::Cmd1 { op, param, payload } => {
                let w = op.encode(param, payload);
                out.get_mut(..2)?.copy_from_slice(&w);
                Some(2)
            }
        }
    }
}

/// Why a command could not be decoded; `offset` is the byte offset of the command in the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The opcode is not defined for this control field.
    UnknownOpcode {
        /// Byte offset of the command.
        offset: usize,
        /// The full first command word.
        word: u32,
    },
    /// The control field (bits 14..=15) is 2 or 3, or reserved bits 10..=13 are set.
    BadControl {
        /// Byte offset of the command.
        offset: usize,
        /// The full first command word.
        word: u32,
    },
    /// A `cmd1` command's payload word is past the end of the stream.
    Truncated {
        /// Byte offset of the command.
        offset: usize,
    },
}

impl DecodeError {
    /// Byte offset of the faulty command in the stream.
    pub const fn offset(&self) -> usize {
        match *self {
            DecodeError::UnknownOpcode { offset, .. }
            | DecodeError::BadControl { offset, .. }
            | DecodeError::Truncated { offset } => offset,
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DecodeError::UnknownOpcode { offset, word } => {
                write!(
                    f,
                    "command at byte {offset:#x}: unknown opcode (word {word:#010x})"
                )
            }
            DecodeError::BadControl { offset, word } => write!(
                f,
                "command at byte {offset:#x}: invalid control/reserved bits (word {word:#010x})"
            ),
            DecodeError::Truncated { offset } => {
                write!(
                    f,
                    "command at byte {offset:#x}: payload word past the end of the stream"
                )
            }
        }
    }
}

/// The first word of a command, checked and split into its fields; shared by the U55/U65 and
/// U85 decoders, whose word layout is the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CommandWord {
    /// Byte offset of the command in the stream.
    pub offset: usize,
    /// The whole first word.
    pub word: u32,
    /// Control field 1: a payload word follows.
    pub is_cmd1: bool,
    /// Bits 0..=9.
    pub code: u16,
    /// Bits 16..=31.
    pub param: u16,
}

impl CommandWord {
    /// Reads `words[index]`; `byte_base` is the byte offset of `words[0]` in the whole stream.
    /// Fails on a missing word, a control field of 2 or 3, or set reserved bits 10..=13.
    pub(crate) fn read(words: &[u32], index: usize, byte_base: usize) -> Result<Self, DecodeError> {
        let offset = byte_base.saturating_add(index.saturating_mul(4));
        let Some(&word) = words.get(index) else {
            return Err(DecodeError::Truncated { offset });
        };
        let control = (word >> CONTROL_SHIFT) & 3;
        if control > 1 || word & RESERVED_MASK != 0 {
            return Err(DecodeError::BadControl { offset, word });
        }
        Ok(CommandWord {
            offset,
            word,
            is_cmd1: control == 1,
            code: (word & OPCODE_MASK) as u16,
            param: (word >> 16) as u16,
        })
    }

    /// The error for an opcode this command set does not define.
    pub(crate) const fn unknown(&self) -> DecodeError {
        DecodeError::UnknownOpcode {
            offset: self.offset,
            word: self.word,
        }
    }

    /// The payload word of a `cmd1` command read from `words[index]`.
    pub(crate) fn payload(&self, words: &[u32], index: usize) -> Result<u32, DecodeError> {
        words
            .get(index.wrapping_add(1))
            .copied()
            .ok_or(DecodeError::Truncated {
                offset: self.offset,
            })
    }
}

/// Decodes the command whose first word is `words[index]`; `byte_base` is the byte offset of
/// `words[0]` in the whole stream (used for error offsets). Returns the command; its length in
/// words is [`Command::words`].
pub fn decode(words: &[u32], index: usize, byte_base: usize) -> Result<Command, DecodeError> {
    let w = CommandWord::read(words, index, byte_base)?;
    if w.is_cmd1 {
        let op = Cmd1::from_u16(w.code).ok_or(w.unknown())?;
        let payload = w.payload(words, index)?;
        Ok(Command::Cmd1 {
            op,
            param: w.param,
            payload,
        })
    } else {
        let op = Cmd0::from_u16(w.code).ok_or(w.unknown())?;
        Ok(Command::Cmd0 { op, param: w.param })
    }
}

/// Iterates over the commands of a stream given as words; yields `(byte_offset, command)`
/// and stops after the first decode error (which it yields).
#[derive(Clone, Debug)]
pub struct Commands<'a> {
    words: &'a [u32],
    index: usize,
    byte_base: usize,
    failed: bool,
}

impl<'a> Commands<'a> {
    /// Iterates over `words`; error offsets are reported relative to `byte_base`.
    pub fn new(words: &'a [u32], byte_base: usize) -> Self {
        Commands {
            words,
            index: 0,
            byte_base,
            failed: false,
        }
    }
}

impl Iterator for Commands<'_> {
    type Item = Result<(usize, Command), DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.index >= self.words.len() {
            return None;
        }
        let offset = self.byte_base.saturating_add(self.index.saturating_mul(4));
        match decode(self.words, self.index, self.byte_base) {
            Ok(cmd) => {
                self.index = self.index.saturating_add(cmd.words());
                Some(Ok((offset, cmd)))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcode_roundtrip() {
        for &op in Cmd0::ALL {
            assert_eq!(Cmd0::from_u16(op.code()), Some(op));
        }
        for &op in Cmd1::ALL {
            assert_eq!(Cmd1::from_u16(op.code()), Some(op));
        }
        assert_eq!(Cmd0::OP_CONV.name(), "NPU_OP_CONV");
        assert_eq!(Cmd1::SET_OPA_SCALE.name(), "NPU_SET_OPA_SCALE");
        assert_eq!(Cmd0::from_u16(0x004), None);
    }

    #[test]
    fn decode_words() {
        // From op_add's stream: NPU_SET_OPA_SCALE shift 12, then NPU_OP_STOP.
        let words = [0x000c_4025, 0x7fff_10ed, 0xffff_0000];
        let c = decode(&words, 0, 0).unwrap();
        assert_eq!(
            c,
            Command::Cmd1 {
                op: Cmd1::SET_OPA_SCALE,
                param: 12,
                payload: 0x7fff_10ed
            }
        );
        let c = decode(&words, 2, 0).unwrap();
        assert_eq!(
            c,
            Command::Cmd0 {
                op: Cmd0::OP_STOP,
                param: 0xffff
            }
        );
        assert_eq!(
            decode(&words[..1], 0, 16),
            Err(DecodeError::Truncated { offset: 16 })
        );
        assert!(matches!(
            decode(&[0x8000], 0, 0),
            Err(DecodeError::BadControl { .. })
        ));
        assert!(matches!(
            decode(&[0x0004], 0, 0),
            Err(DecodeError::UnknownOpcode { .. })
        ));
        let mut out = [0u32; 2];
        assert_eq!(
            Command::Cmd1 {
                op: Cmd1::SET_OPA_SCALE,
                param: 12,
                payload: 0x7fff_10ed
            }
            .encode_into(&mut out),
            Some(2)
        );
        assert_eq!(out, [0x000c_4025, 0x7fff_10ed]);
    }
}
