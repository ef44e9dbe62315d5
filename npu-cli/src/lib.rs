//! The `npu` and `cargo-npu` command-line tools. Each subcommand lives in its own module.
//!
//! `npu SUBCOMMAND ...` takes every setting on its command line. `cargo npu SUBCOMMAND ...` is the
//! same tool inside a Cargo package: settings not given on the command line come from the
//! package's `[package.metadata.npu]` (`model`, `target`, `system_config`, `memory_mode`), the
//! table `include_model!`'s build.rs counterpart reads too.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use clap::{Parser, Subcommand};

use npu_build::error::{Error, Result};

mod cargo;

mod bench;
pub mod compile;
pub mod disasm;
pub mod html;
mod inspect;
mod run;
pub mod sim;

/// Compile, inspect and run quantized models for Arm Ethos-U NPUs.
#[derive(Parser, Debug)]
#[command(name = "npu", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print a model's operators, shapes, dtypes, quantization and MACs.
    Inspect(inspect::Args),
    /// Run a model on an engine (the reference interpreter, or the virtual NPU).
    Run(run::Args),
    /// Run a compiled directory (cmd_stream.bin, weights.bin, meta.json) on the virtual NPU.
    Sim(sim::Args),
    /// Print a command stream one command per line.
    Disasm(disasm::Args),
    /// Compile a model into a command stream directory (cmd_stream.bin, weights.bin, meta.json).
    Compile(compile::Args),
    /// Compile a model and print its memory and operator report as JSON.
    Report(compile::ReportArgs),
    /// Our backend against Vela on every fixture: cycles, SRAM, flash, compile time.
    Bench(bench::Args),
}

/// Settings that apply when the command line does not give them (`cargo npu` reads them from
/// `[package.metadata.npu]`; plain `npu` has none).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Defaults {
    /// The model file, resolved against the package directory.
    pub model: Option<PathBuf>,
    pub target: Option<String>,
    pub system_config: Option<String>,
    pub memory_mode: Option<String>,
    /// The SRAM budget in bytes (`npu report` shows the SRAM use against it).
    pub sram_limit: Option<usize>,
}

static DEFAULTS: OnceLock<Defaults> = OnceLock::new();

/// The defaults in force (empty unless [`main_with`] set them).
pub(crate) fn defaults() -> &'static Defaults {
    DEFAULTS.get_or_init(Defaults::default)
}

/// The model a subcommand works on: the one given, else the default, else an error saying how to
/// give one.
pub(crate) fn model_path(given: Option<&Path>) -> Result<PathBuf> {
    given
        .map(Path::to_path_buf)
        .or_else(|| defaults().model.clone())
        .ok_or_else(|| {
            Error::Usage(
                "no model given: pass the model file, or under `cargo npu` set \
                 `[package.metadata.npu] model = \"path/to/model.tflite\"`"
                    .into(),
            )
        })
}

/// Entry point of the `npu` binary: parses `std::env::args` and runs the subcommand.
pub fn main() -> Result<()> {
    main_with(std::env::args_os(), Defaults::default())
}

/// Entry point of the `cargo-npu` binary: Cargo runs it as `cargo-npu npu SUBCOMMAND ...`; the
/// defaults come from `[package.metadata.npu]` of the package in the current directory (or the
/// one `--manifest-path PATH` names, given before the subcommand).
pub fn cargo_main() -> Result<()> {
    let (args, defaults) = cargo::arguments(std::env::args_os().collect())?;
    main_with(args, defaults)
}

/// Parses `args` (program name first) and runs the subcommand with `defaults` for the settings
/// the command line leaves out.
pub fn main_with(
    args: impl IntoIterator<Item = std::ffi::OsString>,
    defaults: Defaults,
) -> Result<()> {
    // A second call in one process keeps the first defaults; the binaries call this once.
    let _ = DEFAULTS.set(defaults);
    let cli = Cli::parse_from(args);
    match cli.command {
        Command::Inspect(a) => inspect::run(a),
        Command::Run(a) => run::run(a),
        Command::Sim(a) => sim::run(a),
        Command::Disasm(a) => disasm::run(a),
        Command::Compile(a) => compile::run(a),
        Command::Report(a) => compile::report(a),
        Command::Bench(a) => bench::run(a),
    }
}

/// Prints `result`'s error with its causes to stderr and turns it into the process exit code.
pub fn report_exit(result: Result<()>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                eprintln!("  caused by: {s}");
                source = s.source();
            }
            std::process::ExitCode::FAILURE
        }
    }
}
