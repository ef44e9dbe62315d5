//! `npu compile` and `npu report`: the native backend from the command line.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::html::{PageOptions, VelaFigures};
use npu_build::error::Result;
use npu_build::ethos_u::{CompileOptions, Compiled, Step, compile_with};
use npu_build::import;
use npu_build::target::Target;

/// The accelerator when neither `--target` nor `[package.metadata.npu]` names one.
pub const DEFAULT_TARGET: &str = "ethos-u55-128";

/// Target selection shared by the subcommands that compile.
#[derive(clap::Args, Debug, Clone)]
pub struct TargetArgs {
    /// Accelerator configuration: ethos-u55-32, -64, -128, -256, ethos-u65-256, -512 (default:
    /// `[package.metadata.npu] target` under `cargo npu`, else ethos-u55-128).
    #[arg(long, short = 't')]
    pub target: Option<String>,
    /// System configuration (Vela's vela.ini names); default: `[package.metadata.npu]` under
    /// `cargo npu`, else the accelerator's.
    #[arg(long)]
    pub system_config: Option<String>,
    /// Memory mode (Shared_Sram, Sram_Only, Dedicated_Sram); default: `[package.metadata.npu]`
    /// under `cargo npu`, else the accelerator's.
    #[arg(long)]
    pub memory_mode: Option<String>,
    /// Fail instead of running operators the NPU cannot run on the CPU (lists each one).
    #[arg(long)]
    pub no_cpu_fallback: bool,
    /// Run this node (by name) or every operator of this kind (`Softmax`, `Conv2D`, ...) on
    /// the CPU even where the NPU could; repeatable.
    #[arg(long = "cpu", value_name = "NODE_OR_OP")]
    pub force_cpu: Vec<String>,
    /// SRAM budget (524288, 512K, 1.5M; binary units): where the arena is SRAM, chains of
    /// operations are striped until it fits (an error gives the smallest arena reached);
    /// where the arena is DRAM (Dedicated_Sram), it caps the fast scratch. Default:
    /// `[package.metadata.npu] sram_limit` under `cargo npu`.
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    pub sram_limit: Option<usize>,
    /// `performance` (default) or `size`: stripe for the smallest arena, as Vela's
    /// `--optimise Size`.
    #[arg(long, alias = "optimize", value_name = "GOAL", value_parser = ["performance", "size"])]
    pub optimise: Option<String>,
}

impl TargetArgs {
    /// `--sram-limit`, else `[package.metadata.npu] sram_limit`.
    pub fn sram_limit(&self) -> Option<usize> {
        self.sram_limit.or(crate::defaults().sram_limit)
    }

    /// Resolves the names (errors list the valid ones).
    pub fn resolve(&self) -> Result<Target> {
        let d = crate::defaults();
        let target = self
            .target
            .as_deref()
            .or(d.target.as_deref())
            .unwrap_or(DEFAULT_TARGET);
        Target::new(
            target,
            self.system_config.as_deref().or(d.system_config.as_deref()),
            self.memory_mode.as_deref().or(d.memory_mode.as_deref()),
        )
    }

    /// The compile options these arguments select for `target`.
    pub fn options(&self, target: &Target) -> CompileOptions {
        CompileOptions::for_target(target)
            .with_sram_limit(target, self.sram_limit())
            .with(|o| {
                o.cpu_fallback = !self.no_cpu_fallback;
                o.force_cpu = self.force_cpu.clone();
                o.optimise_size = self.optimise.as_deref() == Some("size");
            })
    }
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model file (.onnx or .tflite); under `cargo npu`, default `[package.metadata.npu] model`.
    pub model: Option<PathBuf>,
    #[command(flatten)]
    pub target: TargetArgs,
    /// Output directory for cmd_stream.bin, weights.bin, meta.json and report.json.
    #[arg(long, short = 'o')]
    pub output: PathBuf,
    /// Also print the lowered NPU operation list.
    #[arg(long)]
    pub dump_ops: bool,
}

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// Model file (.onnx or .tflite); under `cargo npu`, default `[package.metadata.npu] model`.
    pub model: Option<PathBuf>,
    #[command(flatten)]
    pub target: TargetArgs,
    /// Also write the report as one self-contained HTML page (cycles per operation, NPU/CPU
    /// split, arena use over the schedule, tensor placement) to this file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// A Vela output directory for the same model and accelerator (cmd_stream.bin,
    /// weights.bin, meta.json, summary.csv): its figures beside ours (JSON `"vela"`, and the
    /// page).
    #[arg(long, value_name = "DIR")]
    pub vela: Option<PathBuf>,
    /// Print one line per NPU operation and CPU step instead of the JSON: estimated cycles,
    /// what bounds it (compute or a memory), the arena bytes live while it runs, and where its
    /// IFM and OFM live (region and address; region 1 the arena, 2 the fast scratch).
    #[arg(long)]
    pub per_op: bool,
}

/// `--sram-limit`'s parser: [`npu_build::build_api::parse_size`] with an error saying what it
/// takes.
fn parse_size_arg(s: &str) -> std::result::Result<usize, String> {
    npu_build::build_api::parse_size(s)
        .and_then(|v| usize::try_from(v).ok())
        .ok_or_else(|| format!("'{s}' is not a size (a byte count such as 524288, 512K or 1.5M)"))
}

/// Imports and compiles `model` for `target` (with CPU fallback).
pub fn compile_model(model: &Path, target: &Target) -> Result<Compiled> {
    compile_model_with(model, target, &CompileOptions::for_target(target))
}

/// Imports and compiles `model` for `target` with `options`.
pub fn compile_model_with(
    model: &Path,
    target: &Target,
    options: &CompileOptions,
) -> Result<Compiled> {
    let graph = import::load(model)?;
    compile_with(&graph, target.accelerator, options)
}

/// The NPU/CPU split of a compiled model: one entry per step, CPU steps with their reason.
pub fn split_json(c: &Compiled) -> serde_json::Value {
    let steps: Vec<serde_json::Value> = c
        .steps
        .iter()
        .map(|s| match s {
            Step::Npu {
                command_stream,
                ops,
            } => json!({
                "engine": "npu",
                "npu_ops": ops.len(),
                "command_stream_bytes": command_stream.len(),
            }),
            Step::Cpu(cpu) => json!({
                "engine": "cpu",
                "node": cpu.node,
                "op": cpu.op,
                "reason": cpu.reason,
            }),
        })
        .collect();
    let operators: Vec<serde_json::Value> = c
        .assignment
        .iter()
        .map(|a| {
            json!({
                "node": a.node,
                "op": a.op,
                "engine": if a.cpu_reason.is_some() { "cpu" } else { "npu" },
                "reason": a.cpu_reason,
            })
        })
        .collect();
    json!({ "steps": steps, "operators": operators })
}

/// The report of a compiled model as JSON (memory use by memory kind, op counts, timings,
/// estimated cycles and time of `npu_build::ethos_u::perf`).
pub fn report_json(c: &Compiled, target: &Target) -> serde_json::Value {
    // A mixed model: the sum over its NPU command streams (CPU steps are not estimated).
    let estimates = npu_build::ethos_u::perf::estimate_compiled(c, target).ok();
    let cycles = estimates
        .as_ref()
        .map(|es| es.iter().map(|e| e.total_cycles).sum::<u64>());
    let time_ms = estimates
        .as_ref()
        .map(|es| es.iter().map(|e| e.time_ms()).sum::<f64>());
    let flash = c.flash_bytes();
    let (sram, dram, flash_bytes) = target.memory_use(c.arena_size, flash);
    json!({
        "model": c.name,
        "accelerator": c.accelerator.name,
        "system_config": target.system_config.name,
        "memory_mode": target.memory_mode.name,
        "sram_bytes": sram,
        "flash_bytes": flash_bytes,
        "dram_bytes": dram,
        "arena_bytes": c.arena_size,
        "weights_bytes": c.weights.len(),
        "encoded_weight_bytes": c.encoded_weight_bytes,
        "command_stream_bytes": c
            .steps
            .iter()
            .map(|s| match s {
                Step::Npu { command_stream, .. } => command_stream.len(),
                Step::Cpu(_) => 0,
            })
            .sum::<usize>(),
        "npu_ops": c.npu_ops,
        "cpu_ops": c.cpu_ops(),
        "split": split_json(c),
        "ir_ops": c.ir_ops,
        "compile_ms": c.compile_time.as_secs_f64() * 1e3,
        "cycles_estimate": cycles,
        "time_ms": time_ms,
    })
}

pub fn run(args: Args) -> Result<()> {
    let target = args.target.resolve()?;
    let model = crate::model_path(args.model.as_deref())?;
    let c = compile_model_with(&model, &target, &args.target.options(&target))?;
    if c.cpu_ops() > 0 {
        // The raw directory format holds one command stream; say so instead of writing a
        // partial one.
        return Err(npu_build::Error::Usage(format!(
            "{}: the model runs {} operator(s) on the CPU; the raw output directory holds one \
             NPU command stream only (use include_model!, npu_build::Model or `npu run --engine \
             sim`; `npu report` shows the split)",
            c.name,
            c.cpu_ops()
        )));
    }
    c.write_dir(
        &args.output,
        target.system_config.name,
        target.memory_mode.name,
    )?;
    let report = serde_json::to_string_pretty(&report_json(&c, &target))
        .map_err(|e| npu_build::Error::Internal(e.to_string()))?;
    let path = args.output.join("report.json");
    std::fs::write(&path, &report).map_err(|e| npu_build::Error::io(path, e))?;
    if args.dump_ops {
        println!("{:#?}", c.program.ops);
    }
    println!(
        "{}: {} NPU ops, arena {} bytes, flash {} bytes, compiled in {:.1} ms -> {}",
        c.name,
        c.npu_ops,
        c.arena_size,
        c.flash_bytes(),
        c.compile_time.as_secs_f64() * 1e3,
        args.output.display()
    );
    Ok(())
}

/// [`report_json`] with what the page adds: `"sram_limit"` when given, and Vela's figures
/// under `"vela"` when given.
pub fn report_json_with(c: &Compiled, target: &Target, page: &PageOptions) -> serde_json::Value {
    let mut v = report_json(c, target);
    if let Some(limit) = page.sram_limit {
        v["sram_limit"] = limit.into();
    }
    if let Some(vela) = &page.vela {
        v["vela"] = vela.json();
    }
    v
}

/// `npu report --per-op`: one line per NPU operation and CPU step, in execution order.
pub fn per_op_table(c: &Compiled, graph: &npu_build::ir::Graph, target: &Target) -> Result<String> {
    use std::fmt::Write;
    let r = crate::html::data::Report::new(c, graph, target)?;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>4}  {:<16} {:>14} {:>10} {:<12} {:>10}  {:<15} {:<15}  node",
        "#", "kind", "OFM", "cycles", "bound", "live B", "IFM at", "OFM at"
    );
    let at = |b: usize| {
        c.buffer_addrs
            .get(b)
            .map_or("-".to_string(), |&(region, addr)| {
                format!("r{region}@{addr:#x}")
            })
    };
    for step in &r.steps {
        match step {
            crate::html::data::StepRow::Cpu { node, op, reason } => {
                let _ = writeln!(s, "   -  CPU {op:<12} ({reason})  {node}");
            }
            crate::html::data::StepRow::Npu { ops, .. } => {
                for row in r.ops.iter().filter(|o| ops.contains(&o.index)) {
                    let op = &c.program.ops[row.index];
                    let live = r
                        .op_positions
                        .get(row.index)
                        .copied()
                        .flatten()
                        .and_then(|p| r.live_bytes.get(p))
                        .copied()
                        .unwrap_or(0);
                    let _ = writeln!(
                        s,
                        "{:>4}  {:<16} {:>14} {:>10} {:<12} {:>10}  {:<15} {:<15}  {}",
                        row.index,
                        row.kind,
                        format!("{}x{}x{}", row.ofm[0], row.ofm[1], row.ofm[2]),
                        row.cycles,
                        r.bound_name(row.bound),
                        live,
                        at(op.ifm.buffer.index()),
                        at(op.ofm.buffer.index()),
                        row.name
                    );
                }
            }
        }
    }
    let _ = writeln!(
        s,
        "total {} cycles (CPU steps not estimated); peak live arena {} bytes of {}",
        r.cycles_estimate,
        r.peak_live(),
        c.arena_size
    );
    Ok(s)
}

pub fn report(args: ReportArgs) -> Result<()> {
    let target = args.target.resolve()?;
    let model = crate::model_path(args.model.as_deref())?;
    // Check the output paths before the compile, so a typo fails fast.
    if let Some(dir) = args
        .html
        .as_deref()
        .and_then(Path::parent)
        .filter(|d| !d.as_os_str().is_empty() && !d.is_dir())
    {
        return Err(npu_build::Error::Usage(format!(
            "--html: directory {} does not exist",
            dir.display()
        )));
    }
    let page = PageOptions {
        sram_limit: args.target.sram_limit(),
        vela: args
            .vela
            .as_deref()
            .map(|d| VelaFigures::load(d, &target))
            .transpose()?,
    };
    let graph = import::load(&model)?;
    let c = compile_with(&graph, target.accelerator, &args.target.options(&target))?;
    let json = report_json_with(&c, &target, &page);
    if args.per_op {
        print!("{}", per_op_table(&c, &graph, &target)?);
    } else {
        let report = serde_json::to_string_pretty(&json)
            .map_err(|e| npu_build::Error::Internal(e.to_string()))?;
        println!("{report}");
    }
    if let Some(path) = &args.html {
        let html = crate::html::page(&c, &graph, &target, &json, &page)?;
        crate::html::write(path, &html)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
