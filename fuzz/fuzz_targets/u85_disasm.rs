#![no_main]
//! Any byte string fed to the COP1 parser, the Ethos-U85 command decoder and its disassembler
//! gives actions, commands and text or an error naming an offset inside the input, never a panic.

use libfuzzer_sys::fuzz_target;
use npu_rt::ethos_u::cop::Cop1;
use npu_rt::ethos_u::regs::u85::disasm::{command_words, write_line};
use npu_rt::ethos_u::regs::u85::Commands;

fn words(bytes: &[u8]) -> Vec<u32> {
    bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn walk(stream: &[u8], base: usize) {
    let w = words(stream);
    for item in Commands::new(&w, base) {
        match item {
            Ok((offset, cmd)) => {
                assert!(offset >= base && offset < base + stream.len());
                let mut out = [0u32; 2];
                let n = cmd.encode_into(&mut out).expect("two words fit");
                // Decoding then encoding reproduces the words (reserved bits are rejected).
                let i = (offset - base) / 4;
                assert_eq!(&out[..n], &w[i..i + n]);
                // Every field of a decoded command reads and prints.
                let mut text = String::new();
                for f in cmd.opcode().fields() {
                    f.write_value(&mut text, cmd.bits()).expect("format");
                }
            }
            Err(e) => assert!(e.offset() >= base && e.offset() <= base + stream.len()),
        }
    }
    let mut text = String::new();
    let mut i = 0;
    while let Some(&word) = w.get(i) {
        let n = command_words(word);
        let _ = write_line(&mut text, i * 4, word, if n == 2 { w.get(i + 1).copied() } else { None });
        i += n;
    }
}

fuzz_target!(|data: &[u8]| {
    match Cop1::parse(data) {
        Ok(cop) => {
            let _ = cop.architecture();
            for (offset, stream) in cop.command_streams() {
                walk(stream, offset);
            }
        }
        Err(e) => assert!(e.offset <= data.len()),
    }
    walk(data, 0);
});
