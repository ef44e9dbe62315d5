//! One-line rendering of Ethos-U85 commands, exactly as Vela 5.2's
//! `--verbose-register-command-stream` dump prints them for U85 (the fixtures'
//! `ethos-u85-*/registers.txt`):
//!
//! ```text
//! 0x000004: 7fff10ed 050c 4025 - NPU_SET_IFM_SCALE               1292, shift = 12, dbl_rnd = 20, round_mode = ROUND_MODE_IFM_DOUBLE_SYMMETRIC, scale = 2147422445
//! ```
//!
//! The part before the fields is the U55/U65 layout ([`crate::ethos_u::regs::disasm::write_head`]);
//! the fields come from the layout table ([`super::fields`]). Undefined enumeration values print
//! as `****`, undefined opcodes as the name `****` without fields.

use core::fmt::{self, Write};

use super::opcode::Opcode;
use crate::ethos_u::regs::disasm::write_head;

/// Writes one line (without newline) for the command whose first word is `word`; `payload` is
/// the second word of a `cmd1` command (None when absent or truncated; fields then read it as 0).
pub fn write_line<W: Write>(
    w: &mut W,
    offset: usize,
    word: u32,
    payload: Option<u32>,
) -> fmt::Result {
    let op = Opcode::from_word(word);
    write_head(w, offset, word, payload, op.map_or("****", Opcode::name))?;
    let Some(op) = op else {
        return Ok(());
    };
    let bits = (payload.unwrap_or(0) as u64) << 32 | word as u64;
    for f in op.fields() {
        write!(w, ", {} = ", f.name)?;
        f.write_value(w, bits)?;
    }
    Ok(())
}

/// Number of words the command starting with `word` occupies in the stream: 2 when the control
/// field (bits 14..=15) is non-zero, as Vela's dump steps, else 1.
pub const fn command_words(word: u32) -> usize {
    if (word >> 14) & 3 != 0 { 2 } else { 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Buf {
        data: [u8; 512],
        len: usize,
    }

    impl Write for Buf {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let end = self.len + s.len();
            self.data
                .get_mut(self.len..end)
                .ok_or(fmt::Error)?
                .copy_from_slice(s.as_bytes());
            self.len = end;
            Ok(())
        }
    }

    fn line(offset: usize, word: u32, payload: Option<u32>) -> Buf {
        let mut b = Buf {
            data: [0; 512],
            len: 0,
        };
        write_line(&mut b, offset, word, payload).unwrap();
        b
    }

    #[test]
    fn matches_vela_layout() {
        // Lines of fixtures/op_add/vela/ethos-u85-256/registers.txt.
        let b = line(4, 0x050c_4025, Some(0x7fff_10ed));
        assert_eq!(
            core::str::from_utf8(&b.data[..b.len]).unwrap(),
            "0x000004: 7fff10ed 050c 4025 - NPU_SET_IFM_SCALE               1292, shift = 12, dbl_rnd = 20, round_mode = ROUND_MODE_IFM_DOUBLE_SYMMETRIC, scale = 2147422445"
        );
        let b = line(0xd0, 0x0000_0125, None);
        assert_eq!(
            core::str::from_utf8(&b.data[..b.len]).unwrap(),
            "0x0000d0:          0000 0125 - NPU_SET_ACTIVATION                 0, activation_function = ACTIVATION_FUNCTION_LUT_NONE, table = 0, activation_clip_range = ACTIVATION_CLIP_RANGE_B16"
        );
        let b = line(0, 0x0000_0106, None);
        assert_eq!(
            core::str::from_utf8(&b.data[..b.len]).unwrap(),
            "0x000000:          0000 0106 - ****                               0"
        );
    }
}
