//! `npu bench [--fixtures DIR] [--model NAME]... [-t ACCEL]... [--json] [--vela PATH]`: our
//! backend against Vela, fixture by fixture.
//!
//! For every fixture model (`DIR/<name>/<name>.tflite`) and accelerator configuration with a
//! Vela compilation (`DIR/<name>/vela/<accel>/`), prints Vela's stream and ours side by side:
//! cycles under the same performance model ([`npu_build::ethos_u::perf`], with Vela's system
//! configuration and memory mode from its `meta.json`), Vela's own `cycles_total`
//! (`summary.csv`), SRAM and flash bytes (arena and read-only data placed by the memory mode),
//! and our compile time. With `--vela PATH` (a `vela` executable) it also times Vela's compile of
//! the same model and options. A model our backend cannot compile gets `-` and the error.
//!
//! With `-t ethos-u85` (every Ethos-U85 configuration) or `-t ethos-u85-<macs>` it estimates
//! Vela's U85 stream of every fixture with `perf::u85` and prints it beside Vela's
//! `cycles_total`, then per configuration the geometric mean, min and max of ours / Vela
//! (`--per-op`: every operation and DMA; `--json`: one object per stream).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{Value as Json, json};

use crate::sim::CompiledDir;
use npu_build::error::{Error, Result};
use npu_build::ethos_u::perf::estimate_stream;
use npu_build::target::{ACCELERATOR_NAMES, Target};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Fixtures directory (each model in `<name>/<name>.tflite` with `vela/<accel>/`).
    #[arg(long, default_value = "fixtures")]
    pub fixtures: PathBuf,
    /// Only these models (default: all).
    #[arg(long = "model")]
    pub models: Vec<String>,
    /// Only these accelerator configurations (default: every one with a Vela compilation).
    #[arg(long = "target", short = 't')]
    pub targets: Vec<String>,
    /// Print JSON (one object per row) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// A `vela` executable to time Vela's compile of the same model and options.
    #[arg(long)]
    pub vela: Option<PathBuf>,
    /// Only estimate Vela's streams (the model's calibration against Vela's own numbers).
    #[arg(long)]
    pub vela_only: bool,
    /// `performance` (default) or `size` for our side (Vela's fixtures are its default,
    /// performance).
    #[arg(long, alias = "optimize", value_name = "GOAL", value_parser = ["performance", "size"])]
    pub optimise: Option<String>,
    /// With an Ethos-U85 target: one line per operation and DMA of each stream's estimate.
    #[arg(long)]
    pub per_op: bool,
}

/// `ethos-u85` (every U85 configuration) or `ethos-u85-<macs>`.
fn is_u85(target: &str) -> bool {
    target.to_ascii_lowercase().starts_with("ethos-u85")
}

/// Bytes of each memory kind a compiled model needs.
#[derive(Debug, Clone, Copy)]
struct Footprint {
    /// Arena if it lives in SRAM, plus the cache (fast scratch) when the mode has one.
    sram: usize,
    dram: usize,
    flash: usize,
}

impl Footprint {
    fn new(target: &Target, arena: usize, fast_scratch: usize, consts: usize) -> Self {
        let (sram, dram, flash) = target.memory_use(arena, consts);
        let cache = if target.uses_cache() { fast_scratch } else { 0 };
        Footprint {
            sram: sram + cache,
            dram,
            flash,
        }
    }

    /// Off-chip bytes (flash + DRAM).
    fn external(&self) -> usize {
        self.dram + self.flash
    }

    fn json(&self) -> Json {
        json!({"sram_bytes": self.sram, "dram_bytes": self.dram, "flash_bytes": self.flash})
    }
}

/// Our side of one row.
#[derive(Debug, Clone)]
struct Ours {
    cycles: u64,
    memory: Footprint,
    compile_ms: f64,
}

/// Vela's side of one row.
#[derive(Debug, Clone)]
struct Vela {
    /// Vela's stream under our model.
    cycles: u64,
    /// Vela's own estimate (`summary.csv` `cycles_total`).
    reported: Option<u64>,
    memory: Footprint,
    compile_ms: Option<f64>,
}

#[derive(Debug)]
struct Row {
    model: String,
    target: Target,
    vela: std::result::Result<Vela, String>,
    ours: std::result::Result<Ours, String>,
}

fn names_in(dir: &Path) -> Result<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    Ok(names)
}

/// `column` of Vela's `summary.csv` data row.
pub(crate) fn summary_value(dir: &Path, column: &str) -> Option<f64> {
    let text = std::fs::read_to_string(dir.join("summary.csv")).ok()?;
    let mut lines = text.lines();
    let header = lines.next()?;
    let row = lines.next()?;
    let i = header.split(',').position(|h| h == column)?;
    row.split(',').nth(i)?.trim().parse().ok()
}

fn vela_side(dir: &Path, target: &Target, model: &Path, vela: Option<&Path>) -> Result<Vela> {
    let compiled = CompiledDir::load(dir)?;
    let estimate = estimate_stream(&compiled.cmd_stream, target)?;
    let meta = |k: &str| compiled.meta.get(k).and_then(Json::as_u64).unwrap_or(0) as usize;
    let consts = compiled.weights.len() + compiled.cmd_stream.len();
    let memory = Footprint::new(
        target,
        meta("scratch_size"),
        meta("scratch_fast_size"),
        consts,
    );
    let compile_ms = match vela {
        Some(exe) => Some(time_vela(exe, model, target)?),
        None => None,
    };
    Ok(Vela {
        cycles: estimate.total_cycles,
        reported: summary_value(dir, "cycles_total").map(|v| v as u64),
        memory,
        compile_ms,
    })
}

/// Runs Vela on `model` for `target` into a temporary directory; returns the wall time.
fn time_vela(exe: &Path, model: &Path, target: &Target) -> Result<f64> {
    let out = std::env::temp_dir().join(format!("npu-bench-vela-{}", std::process::id()));
    let start = Instant::now();
    let status = std::process::Command::new(exe)
        .arg(model)
        .args(["--accelerator-config", target.accelerator.name])
        .args(["--config", "Arm/vela.ini"])
        .args(["--system-config", target.system_config.name])
        .args(["--memory-mode", target.memory_mode.name])
        .args(["--output-format", "raw", "--output-dir"])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| Error::io(exe, e))?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    let _ = std::fs::remove_dir_all(&out);
    if status.success() {
        Ok(ms)
    } else {
        Err(Error::io(
            exe,
            std::io::Error::other(format!("failed ({status})")),
        ))
    }
}

fn our_side(model: &Path, target: &Target, size: bool) -> Result<Ours> {
    let start = Instant::now();
    let options =
        npu_build::ethos_u::CompileOptions::for_target(target).with(|o| o.optimise_size = size);
    let c = crate::compile::compile_model_with(model, target, &options)?;
    let compile_ms = start.elapsed().as_secs_f64() * 1e3;
    // Every NPU command stream of a model with CPU operators too.
    let cycles = npu_build::ethos_u::perf::npu_cycles(&c, target)?;
    Ok(Ours {
        cycles,
        memory: Footprint::new(target, c.arena_size, c.fast_scratch_size, c.flash_bytes()),
        compile_ms,
    })
}

/// First line of an error, for a table cell.
fn brief(e: &Error) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}

fn rows(args: &Args) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for name in names_in(&args.fixtures)? {
        if !args.models.is_empty() && !args.models.contains(&name) {
            continue;
        }
        let model = args.fixtures.join(&name).join(format!("{name}.tflite"));
        if !model.is_file() {
            continue;
        }
        let vela_root = args.fixtures.join(&name).join("vela");
        for accel in ACCELERATOR_NAMES {
            if !args.targets.is_empty() && !args.targets.iter().any(|t| t == accel) {
                continue;
            }
            let dir = vela_root.join(accel);
            if !dir.is_dir() {
                continue;
            }
            let (target, vela) = if dir.join("cmd_stream.bin").is_file() {
                let compiled = CompiledDir::load(&dir)?;
                let config = compiled.accelerator(Some(accel))?;
                let target = compiled.target(config, None, None)?;
                let vela =
                    vela_side(&dir, &target, &model, args.vela.as_deref()).map_err(|e| brief(&e));
                (target, vela)
            } else {
                // Vela kept the operator on the CPU (VELA_FAILED.txt): ours alone, on the
                // accelerator's default system configuration and memory mode (the fixtures').
                let reason = std::fs::read_to_string(dir.join("VELA_FAILED.txt"))
                    .ok()
                    .and_then(|t| t.lines().next().map(str::to_string))
                    .unwrap_or_else(|| "no compilation in the directory".into());
                (
                    Target::new(accel, None, None)?,
                    Err(format!("no NPU stream: {reason}")),
                )
            };
            let ours = if args.vela_only {
                Err("not compiled (--vela-only)".to_string())
            } else {
                our_side(&model, &target, args.optimise.as_deref() == Some("size"))
                    .map_err(|e| brief(&e))
            };
            rows.push(Row {
                model: name.clone(),
                target,
                vela,
                ours,
            });
        }
    }
    Ok(rows)
}

fn row_json(r: &Row) -> Json {
    let vela = match &r.vela {
        Ok(v) => json!({
            "cycles": v.cycles, "vela_cycles_total": v.reported, "memory": v.memory.json(),
            "compile_ms": v.compile_ms,
        }),
        Err(e) => json!({ "error": e }),
    };
    let ours = match &r.ours {
        Ok(o) => json!({
            "cycles": o.cycles, "memory": o.memory.json(), "compile_ms": o.compile_ms,
        }),
        Err(e) => json!({ "error": e }),
    };
    json!({
        "model": r.model,
        "accelerator": r.target.accelerator.name,
        "system_config": r.target.system_config.name,
        "memory_mode": r.target.memory_mode.name,
        "vela": vela,
        "ours": ours,
    })
}

/// The side-by-side table (`vela_only`: without our columns' errors).
fn table(rows: &[Row], vela_only: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<20} {:<14} | {:>10} {:>10} {:>10} {:>6} | {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9}",
        "model",
        "accelerator",
        "vela(own)",
        "vela",
        "ours",
        "ratio",
        "sram vela",
        "sram ours",
        "ext vela",
        "ext ours",
        "ms vela",
        "ms ours"
    );
    let _ = writeln!(
        s,
        "{:<20} {:<14} | {:>10} {:>10} {:>10} {:>6} | {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9}",
        "",
        "",
        "cycles",
        "cycles",
        "cycles",
        "o/v",
        "bytes",
        "bytes",
        "bytes",
        "bytes",
        "compile",
        "compile"
    );
    let dash = || "-".to_string();
    for r in rows {
        let (vo, vc, vs, vf, vm) = match &r.vela {
            Ok(v) => (
                v.reported.map_or_else(dash, |c| c.to_string()),
                v.cycles.to_string(),
                v.memory.sram.to_string(),
                v.memory.external().to_string(),
                v.compile_ms.map_or_else(dash, |m| format!("{m:.0}")),
            ),
            Err(_) => (dash(), dash(), dash(), dash(), dash()),
        };
        let (oc, os, of, om, ratio) = match (&r.ours, &r.vela) {
            (Ok(o), v) => (
                o.cycles.to_string(),
                o.memory.sram.to_string(),
                o.memory.external().to_string(),
                format!("{:.1}", o.compile_ms),
                match v {
                    Ok(v) if v.cycles > 0 => format!("{:.2}", o.cycles as f64 / v.cycles as f64),
                    _ => dash(),
                },
            ),
            (Err(_), _) => (dash(), dash(), dash(), dash(), dash()),
        };
        let _ = write!(
            s,
            "{:<20} {:<14} | {:>10} {:>10} {:>10} {:>6} | {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9}",
            r.model, r.target.accelerator.name, vo, vc, oc, ratio, vs, os, vf, of, vm, om
        );
        let ours_err = r.ours.as_ref().err().filter(|_| !vela_only);
        for (who, e) in [("ours", ours_err), ("vela", r.vela.as_ref().err())] {
            if let Some(e) = e {
                let _ = write!(s, "  [{who}: {e}]");
            }
        }
        s.push('\n');
    }
    s.push_str(
        "cycles: estimate of ethos_u::perf for each stream (vela(own): Vela's summary.csv \
         cycles_total); ratio = ours / vela; sram: SRAM bytes (arena and/or cache, by memory mode); \
         ext: off-chip flash + DRAM bytes (read-only data: weights + command stream, and the arena \
         when the mode puts it in DRAM); compile: wall time (ours: import + compile).",
    );
    s
}

pub fn run(args: Args) -> Result<()> {
    if args.targets.iter().any(|t| is_u85(t)) {
        return u85::run(&args);
    }
    let rows = rows(&args)?;
    if args.json {
        let v: Vec<Json> = rows.iter().map(row_json).collect();
        println!("{}", Json::Array(v));
    } else {
        println!("{}", table(&rows, args.vela_only));
    }
    Ok(())
}

/// `npu bench -t ethos-u85[-N]`: the Ethos-U85 estimator on Vela's U85 streams against Vela's
/// own `cycles_total` (there is no U85 backend of ours to compare yet).
mod u85 {
    use std::fmt::Write as _;
    use std::path::Path;

    use serde_json::{Value as Json, json};

    use super::{Args, names_in, summary_value};
    use crate::sim::estimate_text;
    use npu_build::error::{Error, Result};
    use npu_build::ethos_u::perf::Options;
    use npu_build::ethos_u::perf::u85::{U85Target, estimate_stream_u85_with, u85_names};

    /// One stream: model, configuration, our estimate, Vela's `cycles_total`.
    struct U85Row {
        model: String,
        accel: &'static str,
        ours: u64,
        vela: Option<u64>,
        estimate: npu_build::ethos_u::perf::Estimate,
    }

    fn wanted(args: &Args, accel: &str) -> bool {
        args.targets
            .iter()
            .any(|t| t.eq_ignore_ascii_case("ethos-u85") || t.eq_ignore_ascii_case(accel))
    }

    fn target_of(dir: &Path, accel: &str) -> Result<U85Target> {
        let path = dir.join("meta.json");
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let meta: Json = serde_json::from_str(&text)
            .map_err(|e| Error::Artifact(format!("{}: {e}", path.display())))?;
        let s = |k: &str| meta.get(k).and_then(Json::as_str);
        U85Target::new(accel, s("system_config"), s("memory_mode"))
    }

    fn rows(args: &Args) -> Result<Vec<U85Row>> {
        let mut rows = Vec::new();
        for name in names_in(&args.fixtures)? {
            if !args.models.is_empty() && !args.models.contains(&name) {
                continue;
            }
            for accel in u85_names() {
                let dir = args.fixtures.join(&name).join("vela").join(accel);
                let stream_path = dir.join("cmd_stream.bin");
                if !wanted(args, accel) || !stream_path.is_file() {
                    continue;
                }
                let stream = std::fs::read(&stream_path).map_err(|e| Error::io(&stream_path, e))?;
                let target = target_of(&dir, accel)?;
                // Vela's accounting (a LUT fused as an activation loads for free), as Vela's
                // cycles_total is compared.
                let estimate = estimate_stream_u85_with(&stream, &target, Options::VELA)?;
                rows.push(U85Row {
                    model: name.clone(),
                    accel,
                    ours: estimate.total_cycles,
                    vela: summary_value(&dir, "cycles_total").map(|v| v as u64),
                    estimate,
                });
            }
        }
        Ok(rows)
    }

    /// Per configuration: streams, geometric mean, min and max of ours / Vela.
    fn summary(rows: &[U85Row]) -> Vec<(&'static str, usize, f64, f64, f64)> {
        let mut out = Vec::new();
        for accel in u85_names() {
            let r: Vec<f64> = rows
                .iter()
                .filter(|r| r.accel == accel)
                .filter_map(|r| r.vela.filter(|&v| v > 0).map(|v| r.ours as f64 / v as f64))
                .collect();
            if r.is_empty() {
                continue;
            }
            let geomean = (r.iter().map(|x| x.ln()).sum::<f64>() / r.len() as f64).exp();
            let min = r.iter().copied().fold(f64::MAX, f64::min);
            let max = r.iter().copied().fold(0.0, f64::max);
            out.push((accel, r.len(), geomean, min, max));
        }
        out
    }

    pub fn run(args: &Args) -> Result<()> {
        let rows = rows(args)?;
        if args.json {
            let v: Vec<Json> = rows
                .iter()
                .map(|r| {
                    json!({
                        "model": r.model,
                        "accelerator": r.accel,
                        "vela_cycles_total": r.vela,
                        "cycles": r.ours,
                        "estimate": r.estimate.to_json(args.per_op),
                    })
                })
                .collect();
            println!("{}", Json::Array(v));
            return Ok(());
        }
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<28} {:<15} | {:>10} {:>10} {:>6}",
            "model", "accelerator", "vela(own)", "ours", "o/v"
        );
        for r in &rows {
            let ratio = r
                .vela
                .filter(|&v| v > 0)
                .map_or("-".into(), |v| format!("{:.2}", r.ours as f64 / v as f64));
            let vela = r.vela.map_or("-".into(), |v| v.to_string());
            let _ = writeln!(
                s,
                "{:<28} {:<15} | {:>10} {:>10} {:>6}",
                r.model, r.accel, vela, r.ours, ratio
            );
            if args.per_op {
                s.push_str(&estimate_text(&r.estimate, true));
            }
        }
        let _ = writeln!(
            s,
            "\n| configuration | streams | geomean ours/Vela | min | max |\n|---|---:|---:|---:|---:|"
        );
        for (accel, n, g, lo, hi) in summary(&rows) {
            let _ = writeln!(s, "| {accel} | {n} | {g:.3} | {lo:.3} | {hi:.3} |");
        }
        s.push_str(
            "ours: ethos_u::perf::u85 on Vela's U85 stream, under the system configuration and \
             memory mode of its meta.json, with Vela's accounting (loads of LUTs fused as activations \
             free); vela(own): Vela's summary.csv cycles_total.",
        );
        println!("{s}");
        Ok(())
    }
}
