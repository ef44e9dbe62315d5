//! The `npu` command-line tool. Each subcommand lives in its own module.

use clap::{Parser, Subcommand};

use crate::error::Result;

mod bench;
mod compile;
mod disasm;
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

/// Entry point of the `npu` binary: parses `std::env::args` and runs the subcommand.
pub fn main() -> Result<()> {
    let cli = Cli::parse();
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
