//! `npu disasm FILE`: prints a command stream one command per line.
//!
//! FILE is a raw command stream or a whole COP1 payload (Vela's `cmd_stream.bin`), or a compiled
//! directory holding `cmd_stream.bin`. Lines follow the layout of Vela's `registers.txt` (byte
//! offset within the command stream, payload, parameter, code, name, decoded fields), so
//! `diff <(npu disasm DIR) <(grep '^0x' DIR/registers.txt)` compares ours with Vela's.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use npu_rt::ethos_u::cop::{Cop1, DriverAction};
use npu_rt::ethos_u::regs::disasm::write_line;

use npu_build::error::{Error, Result};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Command stream file (raw or COP1), or a compiled directory with cmd_stream.bin.
    pub path: PathBuf,
    /// Also print the COP1 driver actions (as `// ...` comment lines).
    #[arg(long)]
    pub actions: bool,
}

pub fn run(args: Args) -> Result<()> {
    let path = if args.path.is_dir() {
        args.path.join("cmd_stream.bin")
    } else {
        args.path.clone()
    };
    let bytes = std::fs::read(&path).map_err(|source| Error::Io {
        path: path.clone(),
        source,
    })?;
    let text = render(&path, &bytes, args.actions)?;
    print!("{text}");
    Ok(())
}

/// Renders a raw stream or COP1 payload; `path` only names the file in errors.
pub fn render(path: &Path, bytes: &[u8], actions: bool) -> Result<String> {
    let mut out = String::new();
    if npu_rt::ethos_u::cop::is_cop1(bytes) {
        let cop =
            Cop1::parse(bytes).map_err(|e| Error::Artifact(format!("{}: {e}", path.display())))?;
        for action in cop.actions() {
            match action {
                DriverAction::CommandStream { offset, bytes } => {
                    if actions {
                        let _ = writeln!(
                            out,
                            "// COMMAND_STREAM at byte {offset:#x}: {} words",
                            bytes.len() / 4
                        );
                    }
                    render_stream(&mut out, bytes);
                }
                other if actions => {
                    let _ = writeln!(out, "// {other:?}");
                }
                _ => {}
            }
        }
    } else {
        if !bytes.len().is_multiple_of(4) {
            return Err(Error::Artifact(format!(
                "{}: {} bytes is not a whole number of 32-bit command words",
                path.display(),
                bytes.len()
            )));
        }
        render_stream(&mut out, bytes);
    }
    Ok(out)
}

/// Appends one line per command; offsets are relative to the start of `bytes`.
fn render_stream(out: &mut String, bytes: &[u8]) {
    let words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let mut i = 0;
    while let Some(&word) = words.get(i) {
        let has_payload = (word >> 14) & 3 != 0;
        let payload = if has_payload {
            words.get(i + 1).copied()
        } else {
            None
        };
        let _ = write_line(out, i * 4, word, payload);
        if has_payload && payload.is_none() {
            out.push_str("  // truncated: payload word missing");
        }
        out.push('\n');
        i += if has_payload { 2 } else { 1 };
    }
}
