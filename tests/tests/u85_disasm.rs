//! The Ethos-U85 command set against Vela 5.2: every `fixtures/*/vela/ethos-u85-*/cmd_stream.bin`
//! is a COP1 payload for a U85, decodes without error, and our disassembly of it equals its
//! `registers.txt` line for line and byte for byte (every `0x...` line, every field).

use std::path::PathBuf;

use npu_rt::ethos_u::config::ETHOS_U55_128;
use npu_rt::ethos_u::cop::{Architecture, Cop1};
use npu_rt::ethos_u::regs::u85::disasm::{command_words, write_line};
use npu_rt::ethos_u::regs::u85::{Commands, DecodeError};
use npu_rt::sim::{Regions, SimErrorKind, VirtualNpu};
use npu_tests::fixtures_dir;

/// Every `fixtures/<model>/vela/ethos-u85-*` directory holding a compilation, sorted.
fn u85_dirs() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let root = fixtures_dir();
    for model in std::fs::read_dir(&root).unwrap_or_else(|e| panic!("{}: {e}", root.display())) {
        let vela = model.expect("fixture entry").path().join("vela");
        let Ok(accels) = std::fs::read_dir(&vela) else {
            continue;
        };
        for accel in accels {
            let dir = accel.expect("accel entry").path();
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            if !name.starts_with("ethos-u85-") {
                continue;
            }
            // Every U85 directory holds either a stream or Vela's refusal: none is skipped
            // silently.
            assert!(
                npu_tests::vela_compiled(&dir) || dir.join("VELA_FAILED.txt").is_file(),
                "{}: neither cmd_stream.bin nor VELA_FAILED.txt",
                dir.display()
            );
            if npu_tests::vela_compiled(&dir) {
                let model = vela
                    .parent()
                    .unwrap()
                    .file_name()
                    .unwrap()
                    .to_string_lossy();
                out.push((format!("{model}/{name}"), dir));
            }
        }
    }
    out.sort();
    out
}

fn words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Our lines for a stream, stepping as Vela's dump does.
fn disassemble(stream: &[u32]) -> Vec<String> {
    let mut lines = Vec::new();
    let mut i = 0;
    while let Some(&word) = stream.get(i) {
        let n = command_words(word);
        let payload = if n == 2 {
            stream.get(i + 1).copied()
        } else {
            None
        };
        let mut line = String::new();
        write_line(&mut line, i * 4, word, payload).expect("format");
        lines.push(line);
        i += n;
    }
    lines
}

#[test]
fn disassembly_matches_vela_u85_dumps() {
    let dirs = u85_dirs();
    // The fixtures hold 248 U85 directories, 20 of them Vela's failures.
    assert_eq!(dirs.len(), 228, "U85 streams");
    let (mut streams, mut lines) = (0, 0);
    for (name, dir) in &dirs {
        let payload = std::fs::read(dir.join("cmd_stream.bin")).expect("cmd_stream.bin");
        let cop = Cop1::parse(&payload).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(cop.architecture(), Some(Architecture::EthosU85), "{name}");
        let mut cs = cop.command_streams();
        let (offset, stream) = cs.next().expect("one command stream");
        assert!(cs.next().is_none(), "{name}: one command stream");
        let w = words(stream);
        // Every command decodes (no unknown opcode, no reserved bits, no truncation).
        for item in Commands::new(&w, offset) {
            if let Err(e) = item {
                panic!("{name}: {e}");
            }
        }
        let ours = disassemble(&w);
        let vela = std::fs::read_to_string(dir.join("registers.txt")).expect("registers.txt");
        assert!(
            vela.contains(&format!("Register command stream: {} words\n", w.len())),
            "{name}: stream length"
        );
        let theirs: Vec<&str> = vela.lines().filter(|l| l.starts_with("0x")).collect();
        assert_eq!(ours.len(), theirs.len(), "{name}: command count");
        for (o, t) in ours.iter().zip(&theirs) {
            // Exact: Vela's lines have no trailing blanks to forgive.
            assert_eq!(o, t, "{name}");
        }
        streams += 1;
        lines += ours.len();
    }
    eprintln!("{streams} U85 streams, {lines} lines identical to Vela's registers.txt");
}

#[test]
fn npu_disasm_detects_u85_payloads() {
    let dir = fixtures_dir().join("op_add/vela/ethos-u85-256");
    let payload = std::fs::read(dir.join("cmd_stream.bin")).expect("cmd_stream.bin");
    let text = npu_cli::disasm::render(&dir.join("cmd_stream.bin"), &payload, false, None)
        .expect("render");
    let vela = std::fs::read_to_string(dir.join("registers.txt")).expect("registers.txt");
    let theirs: String = vela
        .lines()
        .filter(|l| l.starts_with("0x"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(text, theirs);
}

#[test]
fn truncated_and_unknown_commands_fail_with_offsets() {
    let dir = fixtures_dir().join("op_conv1x1/vela/ethos-u85-256");
    let payload = std::fs::read(dir.join("cmd_stream.bin")).expect("cmd_stream.bin");
    let cop = Cop1::parse(&payload).expect("COP1");
    let (offset, stream) = cop.command_streams().next().expect("stream");
    let w = words(stream);
    // Cut just after the first cmd1 word: its payload is missing.
    let first_cmd1 = w
        .iter()
        .position(|&x| command_words(x) == 2)
        .expect("a cmd1");
    let cut = &w[..=first_cmd1];
    let last = Commands::new(cut, offset).last().expect("items");
    assert_eq!(
        last,
        Err(DecodeError::Truncated {
            offset: offset + first_cmd1 * 4
        })
    );
    // An opcode U85 does not define (0x106), planted as the third command.
    let third = Commands::new(&w, offset)
        .nth(2)
        .expect("3 commands")
        .expect("valid")
        .0;
    let mut bad = w.clone();
    bad[(third - offset) / 4] = 0x0000_0106;
    let err = Commands::new(&bad, offset)
        .find_map(Result::err)
        .expect("an error");
    assert_eq!(
        err,
        DecodeError::UnknownOpcode {
            offset: third,
            word: 0x106
        }
    );
    assert!(err.to_string().contains("unknown opcode"), "{err}");
}

#[test]
fn random_words_never_panic() {
    // A fixed xorshift sequence: decoding and disassembling arbitrary words yields commands,
    // errors and text, never a panic.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as u32
    };
    for _ in 0..2000 {
        let len = (next() % 16) as usize;
        let w: Vec<u32> = (0..len)
            .map(|_| {
                let v = next();
                // Bias towards defined opcodes so the field decoders run too.
                if v & 1 == 0 { v & 0xffff_c3ff } else { v }
            })
            .collect();
        for item in Commands::new(&w, 0) {
            if let Err(e) = item {
                assert!(e.offset() < w.len() * 4);
            }
        }
        let _ = disassemble(&w);
    }
}

#[test]
fn virtual_npu_refuses_u85_payloads() {
    // U85 opcodes reuse U55/U65 codes with other meanings: the simulator must not run them.
    let dir = fixtures_dir().join("op_add/vela/ethos-u85-256");
    let payload = std::fs::read(dir.join("cmd_stream.bin")).expect("cmd_stream.bin");
    let mut npu = VirtualNpu::new(&ETHOS_U55_128);
    let err = npu.run(&payload, &mut Regions::new()).unwrap_err();
    assert!(
        matches!(err.kind, SimErrorKind::InvalidRegister { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("Ethos-U85"), "{err}");
}
