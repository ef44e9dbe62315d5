//! The COP1 driver payload: the container Vela emits and `ethos-u-core-driver` consumes.
//!
//! Layout (little-endian 32-bit words): the FourCC `"COP1"`, then driver actions until the end.
//! Each action starts with a tag word: bits 0..=7 command, bits 8..=15 reserved, bits 16..=31
//! parameter.
//!
//! | command | name               | words after the tag                                      |
//! |---------|--------------------|----------------------------------------------------------|
//! | 0       | RESERVED           | invalid (the driver rejects it)                          |
//! | 1       | OPTIMIZER_CONFIG   | 2: the `CONFIG` and `ID` words the stream was built for  |
//! | 2       | COMMAND_STREAM     | `length` words of command stream; length = param, with the reserved byte as bits 16..=23 |
//! | 3       | READ_APB_REG       | 0; param bits 0..=11 start register, 12..=15 count - 1   |
//! | 4       | DUMP_SHRAM         | 0                                                        |
//! | 5       | NOP                | 0 (Vela pads with these so the stream is 16-byte aligned)|
//!
//! OPTIMIZER_CONFIG's parameter holds the release (bits 0..=3) and patch (bits 4..=7) numbers.
//!
//! Ethos-U55, U65 and U85 payloads share this layout; the OPTIMIZER_CONFIG words tell them apart
//! ([`Architecture`]): the `CONFIG` word's product field (bits 28..=31: 0 = U55, 1 = U65,
//! 2 = U85) and the `ID` word's architecture major revision (bits 28..=31: 1 for U55/U65, 2 for
//! U85). [`Cop1::parse`] rejects configurations naming another product or whose two words
//! disagree.

use core::fmt;

/// The FourCC word `"COP1"` as a little-endian `u32`.
pub const FOURCC: u32 = u32::from_le_bytes(*b"COP1");

/// Driver action command codes (bits 0..=7 of a tag word).
pub mod action {
    /// Reserved; rejected.
    pub const RESERVED: u8 = 0;
    /// Optimizer configuration: the NPU configuration the stream was compiled for.
    pub const OPTIMIZER_CONFIG: u8 = 1;
    /// A command stream follows.
    pub const COMMAND_STREAM: u8 = 2;
    /// Read APB registers (debug).
    pub const READ_APB_REG: u8 = 3;
    /// Dump the shared buffer (debug).
    pub const DUMP_SHRAM: u8 = 4;
    /// No operation (padding).
    pub const NOP: u8 = 5;
}

/// The NPU family a payload was compiled for, from its OPTIMIZER_CONFIG words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Architecture {
    /// Ethos-U55 (command set of `regs`).
    EthosU55,
    /// Ethos-U65 (command set of `regs`).
    EthosU65,
    /// Ethos-U85 (command set of `regs::u85`).
    EthosU85,
}

impl Architecture {
    /// The family named by a `CONFIG` word and an `ID` word, or the error kind saying why the
    /// pair is not a known, consistent one.
    pub const fn from_config(config: u32, id: u32) -> Result<Self, CopErrorKind> {
        let product = (config >> 28) as u8;
        let arch_major = (id >> 28) as u8;
        let (arch, want_major) = match product {
            0 => (Architecture::EthosU55, 1),
            1 => (Architecture::EthosU65, 1),
            2 => (Architecture::EthosU85, 2),
            p => return Err(CopErrorKind::UnknownProduct(p)),
        };
        if arch_major != want_major {
            return Err(CopErrorKind::ArchMismatch {
                product,
                arch_major,
            });
        }
        Ok(arch)
    }

    /// The family's name, e.g. `Ethos-U85`.
    pub const fn name(self) -> &'static str {
        match self {
            Architecture::EthosU55 => "Ethos-U55",
            Architecture::EthosU65 => "Ethos-U65",
            Architecture::EthosU85 => "Ethos-U85",
        }
    }
}

/// One driver action, borrowing from the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverAction<'a> {
    /// The configuration the command stream was compiled for.
    OptimizerConfig {
        /// Release number (tag parameter bits 0..=3).
        release: u8,
        /// Patch number (tag parameter bits 4..=7).
        patch: u8,
        /// Expected value of the NPU's `CONFIG` register.
        config: u32,
        /// Expected value of the NPU's `ID` register.
        id: u32,
    },
    /// A register command stream.
    CommandStream {
        /// Byte offset of the first command word in the payload.
        offset: usize,
        /// The command stream bytes (a multiple of 4).
        bytes: &'a [u8],
    },
    /// Read `count` APB registers starting at register index `start` (debug).
    ReadApbReg {
        /// First register index (word offset / 4 is not applied: this is the driver's field).
        start: u16,
        /// Number of registers.
        count: u8,
    },
    /// Dump the shared buffer (debug).
    DumpShram,
    /// Padding.
    Nop,
}

/// What went wrong while parsing a COP1 payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopErrorKind {
    /// The payload does not start with `"COP1"`.
    BadFourcc,
    /// The payload length is not a multiple of 4.
    UnalignedLength,
    /// The action's words run past the end of the payload.
    Truncated,
    /// The RESERVED action (0).
    ReservedAction,
    /// An undefined action code.
    UnknownAction(u8),
    /// OPTIMIZER_CONFIG names a product (`CONFIG` bits 28..=31) other than U55, U65 or U85.
    UnknownProduct(u8),
    /// OPTIMIZER_CONFIG's `ID` architecture major revision does not belong to its product.
    ArchMismatch {
        /// `CONFIG` product field.
        product: u8,
        /// `ID` architecture major revision.
        arch_major: u8,
    },
}

/// A COP1 parse error at a byte offset of the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopError {
    /// Byte offset of the offending word or action tag.
    pub offset: usize,
    /// What went wrong.
    pub kind: CopErrorKind,
}

impl fmt::Display for CopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = self.offset;
        match self.kind {
            CopErrorKind::BadFourcc => {
                write!(f, "COP1 payload at byte {o:#x}: missing \"COP1\" FourCC")
            }
            CopErrorKind::UnalignedLength => {
                write!(f, "COP1 payload: length {o} is not a multiple of 4")
            }
            CopErrorKind::Truncated => {
                write!(
                    f,
                    "COP1 payload at byte {o:#x}: driver action runs past the end"
                )
            }
            CopErrorKind::ReservedAction => {
                write!(f, "COP1 payload at byte {o:#x}: RESERVED driver action")
            }
            CopErrorKind::UnknownAction(c) => {
                write!(f, "COP1 payload at byte {o:#x}: unknown driver action {c}")
            }
            CopErrorKind::UnknownProduct(p) => write!(
                f,
                "COP1 payload at byte {o:#x}: OPTIMIZER_CONFIG names product {p} \
                 (0 = Ethos-U55, 1 = Ethos-U65, 2 = Ethos-U85)"
            ),
            CopErrorKind::ArchMismatch {
                product,
                arch_major,
            } => write!(
                f,
                "COP1 payload at byte {o:#x}: OPTIMIZER_CONFIG product {product} with \
                 architecture major revision {arch_major} (U55/U65 are 1, U85 is 2)"
            ),
        }
    }
}

fn word_at(bytes: &[u8], offset: usize) -> Option<u32> {
    let end = offset.checked_add(4)?;
    let b = bytes.get(offset..end)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// True when `bytes` starts with the COP1 FourCC.
pub fn is_cop1(bytes: &[u8]) -> bool {
    word_at(bytes, 0) == Some(FOURCC)
}

/// A validated COP1 payload; iterate its actions with [`Cop1::actions`].
#[derive(Clone, Copy, Debug)]
pub struct Cop1<'a> {
    bytes: &'a [u8],
}

impl<'a> Cop1<'a> {
    /// Checks the FourCC and length and walks every action once, so iteration cannot fail.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, CopError> {
        if !bytes.len().is_multiple_of(4) {
            return Err(CopError {
                offset: bytes.len(),
                kind: CopErrorKind::UnalignedLength,
            });
        }
        if word_at(bytes, 0) != Some(FOURCC) {
            return Err(CopError {
                offset: 0,
                kind: CopErrorKind::BadFourcc,
            });
        }
        let mut it = RawActions { bytes, pos: 4 };
        while let Some(r) = it.next_action() {
            r?;
        }
        Ok(Cop1 { bytes })
    }

    /// The driver actions in order.
    pub fn actions(&self) -> impl Iterator<Item = DriverAction<'a>> + 'a {
        let mut it = RawActions {
            bytes: self.bytes,
            pos: 4,
        };
        core::iter::from_fn(move || it.next_action().and_then(Result::ok))
    }

    /// The first OPTIMIZER_CONFIG action's `(config, id)` words.
    pub fn optimizer_config(&self) -> Option<(u32, u32)> {
        self.actions().find_map(|a| match a {
            DriverAction::OptimizerConfig { config, id, .. } => Some((config, id)),
            _ => None,
        })
    }

    /// The NPU family of the first OPTIMIZER_CONFIG action (None without one); [`Cop1::parse`]
    /// has checked that it names a known family.
    pub fn architecture(&self) -> Option<Architecture> {
        let (config, id) = self.optimizer_config()?;
        Architecture::from_config(config, id).ok()
    }

    /// The command streams in order, as `(byte offset in the payload, bytes)`.
    pub fn command_streams(&self) -> impl Iterator<Item = (usize, &'a [u8])> + 'a {
        self.actions().filter_map(|a| match a {
            DriverAction::CommandStream { offset, bytes } => Some((offset, bytes)),
            _ => None,
        })
    }

    /// The whole payload.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

struct RawActions<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> RawActions<'a> {
    fn next_action(&mut self) -> Option<Result<DriverAction<'a>, CopError>> {
        let at = self.pos;
        let tag = word_at(self.bytes, at)?;
        let cmd = (tag & 0xff) as u8;
        let reserved = (tag >> 8) & 0xff;
        let param = (tag >> 16) as u16;
        let err = |kind| Some(Err(CopError { offset: at, kind }));
        // Every arm that returns Ok advances `pos`; errors stop iteration (pos moves to the end).
        let body = at + 4;
        let result = match cmd {
            action::RESERVED => return self.fail(err(CopErrorKind::ReservedAction)),
            action::OPTIMIZER_CONFIG => {
                let (Some(config), Some(id)) =
                    (word_at(self.bytes, body), word_at(self.bytes, body + 4))
                else {
                    return self.fail(err(CopErrorKind::Truncated));
                };
                // A payload for an unknown or inconsistent NPU would be run or disassembled
                // with the wrong command set.
                if let Err(kind) = Architecture::from_config(config, id) {
                    return self.fail(err(kind));
                }
                self.pos = body + 8;
                DriverAction::OptimizerConfig {
                    release: (param & 0xf) as u8,
                    patch: ((param >> 4) & 0xf) as u8,
                    config,
                    id,
                }
            }
            action::COMMAND_STREAM => {
                let words = ((reserved as usize) << 16) | param as usize;
                let end = words.checked_mul(4).and_then(|n| n.checked_add(body));
                let Some(stream) = end.and_then(|end| self.bytes.get(body..end)) else {
                    return self.fail(err(CopErrorKind::Truncated));
                };
                self.pos = body + stream.len();
                DriverAction::CommandStream {
                    offset: body,
                    bytes: stream,
                }
            }
            action::READ_APB_REG => {
                self.pos = body;
                DriverAction::ReadApbReg {
                    start: param & 0xfff,
                    count: ((param >> 12) & 0xf) as u8 + 1,
                }
            }
            action::DUMP_SHRAM => {
                self.pos = body;
                DriverAction::DumpShram
            }
            action::NOP => {
                self.pos = body;
                DriverAction::Nop
            }
            c => return self.fail(err(CopErrorKind::UnknownAction(c))),
        };
        Some(Ok(result))
    }

    fn fail(
        &mut self,
        e: Option<Result<DriverAction<'a>, CopError>>,
    ) -> Option<Result<DriverAction<'a>, CopError>> {
        self.pos = self.bytes.len();
        e
    }
}

/// Why a payload could not be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopWriteError {
    /// The output buffer is too small; `needed` bytes are required.
    BufferTooSmall {
        /// Bytes required for the whole payload.
        needed: usize,
    },
    /// The command stream has 2^24 words or more (the length field's limit).
    StreamTooLong,
}

impl fmt::Display for CopWriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CopWriteError::BufferTooSmall { needed } => {
                write!(f, "COP1 payload needs {needed} bytes")
            }
            CopWriteError::StreamTooLong => {
                write!(f, "command stream exceeds the COP1 limit of 2^24 words")
            }
        }
    }
}

/// Builds a COP1 payload the way Vela does: FourCC, OPTIMIZER_CONFIG, NOPs so the command
/// stream starts on a 16-byte boundary, COMMAND_STREAM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cop1Writer {
    /// `CONFIG` register value the stream targets.
    pub config: u32,
    /// `ID` register value the stream targets.
    pub id: u32,
    /// Release number in the OPTIMIZER_CONFIG tag (Vela writes 0).
    pub release: u8,
    /// Patch number in the OPTIMIZER_CONFIG tag (Vela writes 1).
    pub patch: u8,
}

/// Number of header words before the command stream (FourCC, config action, NOP padding, tag).
const HEADER_WORDS: usize = 8;

impl Cop1Writer {
    /// A writer for the given `CONFIG` and `ID` words, with Vela's release 0 / patch 1.
    pub const fn new(config: u32, id: u32) -> Self {
        Cop1Writer {
            config,
            id,
            release: 0,
            patch: 1,
        }
    }

    /// Bytes of the payload for a command stream of `stream_words` words.
    pub const fn payload_len(stream_words: usize) -> usize {
        (HEADER_WORDS + stream_words) * 4
    }

    /// Writes the payload into `out`; returns the number of bytes written.
    pub fn write(&self, stream: &[u32], out: &mut [u8]) -> Result<usize, CopWriteError> {
        if stream.len() >= 1 << 24 {
            return Err(CopWriteError::StreamTooLong);
        }
        let needed = Self::payload_len(stream.len());
        let out = out
            .get_mut(..needed)
            .ok_or(CopWriteError::BufferTooSmall { needed })?;
        let tag = |cmd: u8, reserved: u32, param: u32| cmd as u32 | reserved << 8 | param << 16;
        let cfg_param = (self.release as u32 & 0xf) | (self.patch as u32 & 0xf) << 4;
        let len = stream.len() as u32;
        let header = [
            FOURCC,
            tag(action::OPTIMIZER_CONFIG, 0, cfg_param),
            self.config,
            self.id,
            tag(action::NOP, 0, 0),
            tag(action::NOP, 0, 0),
            tag(action::NOP, 0, 0),
            tag(action::COMMAND_STREAM, (len >> 16) & 0xff, len & 0xffff),
        ];
        for (chunk, w) in out.chunks_exact_mut(4).zip(header.iter().chain(stream)) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        Ok(needed)
    }

    /// Writes the payload into a new vector.
    #[cfg(feature = "std")]
    pub fn to_vec(&self, stream: &[u32]) -> Result<std::vec::Vec<u8>, CopWriteError> {
        let mut v = std::vec![0u8; Self::payload_len(stream.len())];
        let n = self.write(stream, &mut v)?;
        v.truncate(n);
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let stream = [0xffff_0000u32];
        let w = Cop1Writer::new(0x1000_6017, 0x1001_0000);
        let mut buf = [0u8; 64];
        let n = w.write(&stream, &mut buf).unwrap();
        assert_eq!(n, 36);
        let p = Cop1::parse(&buf[..n]).unwrap();
        assert_eq!(p.optimizer_config(), Some((0x1000_6017, 0x1001_0000)));
        let (off, bytes) = p.command_streams().next().unwrap();
        assert_eq!((off, bytes), (32, &[0u8, 0, 0xff, 0xff][..]));
        assert_eq!(p.actions().count(), 5);
    }

    #[test]
    fn errors_carry_offsets() {
        assert_eq!(
            Cop1::parse(b"COP").unwrap_err().kind,
            CopErrorKind::UnalignedLength
        );
        assert_eq!(
            Cop1::parse(b"COP2").unwrap_err().kind,
            CopErrorKind::BadFourcc
        );
        let mut p = *b"COP1\x05\0\0\0\x02\0\x05\0\0\0\0\0";
        assert_eq!(
            Cop1::parse(&p).unwrap_err(),
            CopError {
                offset: 8,
                kind: CopErrorKind::Truncated
            }
        );
        p[8] = 9;
        assert_eq!(
            Cop1::parse(&p).unwrap_err(),
            CopError {
                offset: 8,
                kind: CopErrorKind::UnknownAction(9)
            }
        );
        p[8] = 0;
        assert_eq!(
            Cop1::parse(&p).unwrap_err().kind,
            CopErrorKind::ReservedAction
        );
    }

    #[test]
    fn architecture_from_optimizer_config() {
        let stream = [0xffff_0000u32];
        let mut buf = [0u8; 64];
        // The words of Vela 5.2's ethos-u85-256 and ethos-u55-128 payloads.
        for (config, id, arch) in [
            (0x2000_0118, 0x2000_7000, Architecture::EthosU85),
            (0x0000_1807, 0x1006_6001, Architecture::EthosU55),
            (0x1000_6009, 0x1006_6001, Architecture::EthosU65),
        ] {
            let n = Cop1Writer::new(config, id)
                .write(&stream, &mut buf)
                .unwrap();
            assert_eq!(Cop1::parse(&buf[..n]).unwrap().architecture(), Some(arch));
        }
        // Product 3, and a U85 CONFIG with a U55 ID.
        for (config, id, kind) in [
            (0x3000_0118, 0x2000_7000, CopErrorKind::UnknownProduct(3)),
            (
                0x2000_0118,
                0x1006_6001,
                CopErrorKind::ArchMismatch {
                    product: 2,
                    arch_major: 1,
                },
            ),
        ] {
            let n = Cop1Writer::new(config, id)
                .write(&stream, &mut buf)
                .unwrap();
            assert_eq!(
                Cop1::parse(&buf[..n]).unwrap_err(),
                CopError { offset: 4, kind }
            );
        }
    }
}
