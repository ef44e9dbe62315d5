//! Ethos-U85 `cmd0`/`cmd1` opcodes, decoded commands, and a bounds-checked decoder.
//!
//! The word layout and its checks are the U55/U65 ones ([`crate::ethos_u::regs::opcode`]); only
//! the opcode sets differ. Names are those Vela prints; `NPU_SET_RESIZE_X_STEP` and
//! `NPU_SET_RESIZE_Y_STEP` are the opcodes Arm's enumeration calls `NPU_SET_RESIZE_X`/`_Y`.

use core::fmt;

use crate::ethos_u::regs::opcode::{CMD1_FLAG, CommandWord, DecodeError, opcodes};

opcodes! {
    /// U85 commands without payload: operations (`NPU_OP_*`) and 16-bit register sets.
    Cmd0 {
        OP_STOP = 0x000,
        OP_IRQ = 0x001,
        OP_CONV = 0x002,
        OP_DEPTHWISE = 0x003,
        OP_POOL = 0x005,
        OP_ELEMENTWISE = 0x006,
        OP_RESIZE = 0x007,
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
        SET_IFM_BROADCAST = 0x108,
        SET_IFM_ZERO_POINT = 0x109,
        SET_IFM_WIDTH0_M1 = 0x10a,
        SET_IFM_HEIGHT0_M1 = 0x10b,
        SET_IFM_HEIGHT1_M1 = 0x10c,
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
        SET_ACC_FORMAT = 0x124,
        SET_ACTIVATION = 0x125,
        SET_ACTIVATION_MIN = 0x126,
        SET_ACTIVATION_MAX = 0x127,
        SET_WEIGHT_REGION = 0x128,
        SET_SCALE_REGION = 0x129,
        SET_RESIZE_X_SCALE_N_M1 = 0x12a,
        SET_RESIZE_Y_SCALE_N_M1 = 0x12b,
        SET_RESIZE_X_OFFSET = 0x12c,
        SET_RESIZE_Y_OFFSET = 0x12d,
        SET_WEIGHT_FORMAT = 0x12e,
        SET_BLOCKDEP = 0x12f,
        SET_DMA0_SRC_REGION = 0x130,
        SET_DMA0_DST_REGION = 0x131,
        SET_DMA0_SIZE0 = 0x132,
        SET_DMA0_SIZE1 = 0x133,
        SET_DMA0_IDX_REGION = 0x134,
        SET_IFM2_BROADCAST = 0x180,
        SET_IFM2_PRECISION = 0x185,
        SET_IFM2_ZERO_POINT = 0x189,
        SET_IFM2_WIDTH0_M1 = 0x18a,
        SET_IFM2_HEIGHT0_M1 = 0x18b,
        SET_IFM2_HEIGHT1_M1 = 0x18c,
        SET_IFM2_REGION = 0x18f,
    }
}

opcodes! {
    /// U85 commands with a 32-bit payload word: addresses, strides, lengths, scales, the
    /// operation scalar, resize steps and the branch.
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
        SET_IFM_SCALE = 0x025,
        SET_IFM2_SCALE = 0x026,
        SET_OP_SCALAR = 0x027,
        SET_DMA0_SRC = 0x030,
        SET_DMA0_DST = 0x031,
        SET_DMA0_LEN = 0x032,
        SET_DMA0_SRC_STRIDE0 = 0x033,
        SET_DMA0_SRC_STRIDE1 = 0x034,
        SET_DMA0_DST_STRIDE0 = 0x035,
        SET_DMA0_DST_STRIDE1 = 0x036,
        SET_DMA0_IDX = 0x037,
        SET_DMA0_IDX_MAX = 0x038,
        SET_DMA0_IDX_SKIP1 = 0x039,
        SET_IFM2_BASE0 = 0x080,
        SET_IFM2_BASE1 = 0x081,
        SET_IFM2_BASE2 = 0x082,
        SET_IFM2_BASE3 = 0x083,
        SET_IFM2_STRIDE_X = 0x084,
        SET_IFM2_STRIDE_Y = 0x085,
        SET_IFM2_STRIDE_C = 0x086,
        SET_WEIGHT1_BASE = 0x090,
        SET_WEIGHT1_LENGTH = 0x091,
        SET_WEIGHT2_BASE = 0x092,
        SET_WEIGHT2_LENGTH = 0x093,
        SET_WEIGHT3_BASE = 0x094,
        SET_WEIGHT3_LENGTH = 0x095,
        SET_RESIZE_X_STEP = 0x096,
        SET_RESIZE_Y_STEP = 0x097,
        OP_BRANCH = 0x100,
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
    /// True for `NPU_OP_BRANCH`, the only operation among the `cmd1` commands.
    pub const fn is_operation(self) -> bool {
        matches!(self, Cmd1::OP_BRANCH)
    }

    /// Encodes this command with its 16-bit parameter and 32-bit payload into two command words.
    pub const fn encode(self, param: u16, payload: u32) -> [u32; 2] {
        [((param as u32) << 16) | CMD1_FLAG | self as u32, payload]
    }
}

/// Either kind of U85 opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Opcode {
    /// A command without payload.
    Cmd0(Cmd0),
    /// A command with a 32-bit payload.
    Cmd1(Cmd1),
}

impl Opcode {
    /// The name Vela prints, e.g. `NPU_OP_RESIZE`.
    pub const fn name(self) -> &'static str {
        match self {
            Opcode::Cmd0(c) => c.name(),
            Opcode::Cmd1(c) => c.name(),
        }
    }

    /// The opcode of a first command word (control field included), if U85 defines it.
    pub const fn from_word(word: u32) -> Option<Self> {
        let code = (word & crate::ethos_u::regs::opcode::OPCODE_MASK) as u16;
        // Vela's disassembler matches the whole low half-word, so set reserved bits or a control
        // field of 2 or 3 make the command unknown.
        match (word & 0xffff) >> 10 {
            0 => match Cmd0::from_u16(code) {
                Some(c) => Some(Opcode::Cmd0(c)),
                None => None,
            },
            0x10 => match Cmd1::from_u16(code) {
                Some(c) => Some(Opcode::Cmd1(c)),
                None => None,
            },
            _ => None,
        }
    }
}

/// One decoded U85 command.
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

    /// The first word.
    pub const fn word(&self) -> u32 {
        match *self {
            Command::Cmd0 { op, param } => op.encode(param),
            Command::Cmd1 { op, param, payload } => op.encode(param, payload)[0],
        }
    }

    /// The payload word (0 for `cmd0`).
    pub const fn payload(&self) -> u32 {
        match *self {
            Command::Cmd0 { .. } => 0,
            Command::Cmd1 { payload, .. } => payload,
        }
    }

    /// The command as one 64-bit value, first word in bits 0..=31 and payload in 32..=63: the
    /// bit numbering of [`super::fields::Field`].
    pub const fn bits(&self) -> u64 {
        (self.payload() as u64) << 32 | self.word() as u64
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

/// Decodes the U85 command whose first word is `words[index]`; `byte_base` is the byte offset
/// of `words[0]` in the whole stream (used for error offsets).
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

/// Iterates over the U85 commands of a stream given as words; yields `(byte_offset, command)`
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
            assert_eq!(Opcode::from_word(op.encode(0)), Some(Opcode::Cmd0(op)));
        }
        for &op in Cmd1::ALL {
            assert_eq!(Cmd1::from_u16(op.code()), Some(op));
            assert_eq!(
                Opcode::from_word(op.encode(0, 0)[0]),
                Some(Opcode::Cmd1(op))
            );
        }
        assert_eq!(Cmd0::OP_RESIZE.name(), "NPU_OP_RESIZE");
        assert_eq!(Cmd1::SET_RESIZE_X_STEP.name(), "NPU_SET_RESIZE_X_STEP");
        assert_eq!(Cmd1::OP_BRANCH.encode(0, 0)[0], 0x4100);
        assert_eq!(Cmd0::from_u16(0x106), None);
    }

    #[test]
    fn decode_words() {
        // From op_add's U85 stream: NPU_SET_IFM_SCALE, then NPU_OP_STOP.
        let words = [0x050c_4025, 0x7fff_10ed, 0xffff_0000];
        let mut it = Commands::new(&words, 32);
        assert_eq!(
            it.next(),
            Some(Ok((
                32,
                Command::Cmd1 {
                    op: Cmd1::SET_IFM_SCALE,
                    param: 0x050c,
                    payload: 0x7fff_10ed
                }
            )))
        );
        assert_eq!(
            it.next(),
            Some(Ok((
                40,
                Command::Cmd0 {
                    op: Cmd0::OP_STOP,
                    param: 0xffff
                }
            )))
        );
        assert_eq!(it.next(), None);
        assert_eq!(
            decode(&words[..1], 0, 16),
            Err(DecodeError::Truncated { offset: 16 })
        );
        assert_eq!(
            decode(&[0x0000_0106], 0, 8),
            Err(DecodeError::UnknownOpcode {
                offset: 8,
                word: 0x106
            })
        );
        assert!(matches!(
            decode(&[0x8000], 0, 0),
            Err(DecodeError::BadControl { offset: 0, .. })
        ));
        let mut it = Commands::new(&[0x0000_0002, 0x0000_4200], 4);
        assert!(it.next().unwrap().is_ok());
        assert_eq!(
            it.next(),
            Some(Err(DecodeError::UnknownOpcode {
                offset: 8,
                word: 0x4200
            }))
        );
        assert_eq!(it.next(), None);
    }
}
