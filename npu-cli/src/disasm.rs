//! `npu disasm FILE`: prints a command stream one command per line.
//!
//! FILE is a raw command stream or a whole COP1 payload (Vela's `cmd_stream.bin`), or a compiled
//! directory holding `cmd_stream.bin`. Lines follow the layout of Vela's `registers.txt` (byte
//! offset within the command stream, payload, parameter, code, name, decoded fields), so
//! `diff <(npu disasm DIR) <(grep '^0x' DIR/registers.txt)` compares ours with Vela's.
//!
//! The command set (Ethos-U55/U65 or Ethos-U85) comes from the COP1 payload's OPTIMIZER_CONFIG
//! words. A raw stream carries no such header: `--target` names it, else a parent directory
//! named after an accelerator (`.../ethos-u85-256/cmd_stream.bin`) does, else it is read as
//! U55/U65.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use npu_rt::ethos_u::cop::{Architecture, Cop1, DriverAction};
use npu_rt::ethos_u::regs;

use npu_build::error::{Error, Result};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Command stream file (raw or COP1), or a compiled directory with cmd_stream.bin.
    pub path: PathBuf,
    /// Also print the COP1 driver actions (as `// ...` comment lines).
    #[arg(long)]
    pub actions: bool,
    /// Accelerator the stream is for (e.g. ethos-u55-128, ethos-u85-256): needed for raw streams
    /// outside an accelerator-named directory; checked against a COP1 payload's configuration.
    #[arg(long, short = 't')]
    pub target: Option<String>,
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
    let target = match &args.target {
        Some(t) => Some(architecture_of(t).ok_or_else(|| {
            Error::Artifact(format!(
                "--target {t}: not an Ethos-U accelerator name (ethos-u55-*, ethos-u65-*, ethos-u85-*)"
            ))
        })?),
        None => None,
    };
    let text = render(&path, &bytes, args.actions, target)?;
    print!("{text}");
    Ok(())
}

/// The NPU family of an accelerator name such as `ethos-u85-256`.
pub fn architecture_of(name: &str) -> Option<Architecture> {
    let family = name.get(..9)?;
    let rest = &name[9..];
    if !(rest.is_empty() || rest.starts_with('-')) {
        return None;
    }
    match family {
        "ethos-u55" => Some(Architecture::EthosU55),
        "ethos-u65" => Some(Architecture::EthosU65),
        "ethos-u85" => Some(Architecture::EthosU85),
        _ => None,
    }
}

/// Renders a raw stream or COP1 payload; `path` names the file in errors (and, for raw
/// streams without `target`, its parent directory may name the accelerator).
pub fn render(
    path: &Path,
    bytes: &[u8],
    actions: bool,
    target: Option<Architecture>,
) -> Result<String> {
    let mut out = String::new();
    let err = |msg: String| Error::Artifact(format!("{}: {msg}", path.display()));
    if npu_rt::ethos_u::cop::is_cop1(bytes) {
        let cop = Cop1::parse(bytes).map_err(|e| err(e.to_string()))?;
        let arch = match (cop.architecture(), target) {
            (Some(a), Some(t)) if a != t => {
                return Err(err(format!(
                    "the payload was compiled for {} but --target names {}",
                    a.name(),
                    t.name()
                )));
            }
            (Some(a), _) => a,
            (None, Some(t)) => t,
            (None, None) => Architecture::EthosU55,
        };
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
                    render_stream(&mut out, bytes, arch);
                }
                other if actions => {
                    let _ = writeln!(out, "// {other:?}");
                }
                _ => {}
            }
        }
    } else {
        if !bytes.len().is_multiple_of(4) {
            return Err(err(format!(
                "{} bytes is not a whole number of 32-bit command words",
                bytes.len()
            )));
        }
        let from_dir = path
            .parent()
            .and_then(Path::file_name)
            .and_then(|n| n.to_str())
            .and_then(architecture_of);
        let arch = target.or(from_dir).unwrap_or(Architecture::EthosU55);
        render_stream(&mut out, bytes, arch);
    }
    Ok(out)
}

/// Appends one line per command of `arch`'s command set; offsets are relative to the start of
/// `bytes`.
fn render_stream(out: &mut String, bytes: &[u8], arch: Architecture) {
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
        let _ = match arch {
            Architecture::EthosU85 => regs::u85::disasm::write_line(out, i * 4, word, payload),
            Architecture::EthosU55 | Architecture::EthosU65 => {
                regs::disasm::write_line(out, i * 4, word, payload)
            }
        };
        if has_payload && payload.is_none() {
            out.push_str("  // truncated: payload word missing");
        }
        out.push('\n');
        i += if has_payload { 2 } else { 1 };
    }
}
