//! `npu sim DIR --input IN.npy [--input ...] --output OUT.npy [--stats [--json]]`: runs a compiled
//! directory (Vela's raw output: `cmd_stream.bin`, `weights.bin`, `meta.json`) on the virtual NPU.
//!
//! Memory layout (Vela's convention): `weights.bin` is region 0, a zeroed arena of
//! `scratch_size` bytes is region 1 (and `scratch_fast_size` bytes region 2 when non-zero);
//! inputs are written at `input_offset[i]` of `input_region[i]`, outputs read at
//! `output_offset[i]` of `output_region[i]`.
//!
//! `--stats` adds the cycle estimate of [`npu_build::ethos_u::perf`] (`cycles_estimate`, `time_ms`
//! in JSON; one row per operation with `--per-op`) for meta.json's system configuration and
//! memory mode, or `--system-config` / `--memory-mode`.
//!
//! Ethos-U85 directories (`ethos-u85-*`: the accelerator name, else a COP1 payload whose
//! OPTIMIZER_CONFIG is a U85's) run on the virtual U85 ([`VirtualU85`]); `--stats` prints the
//! same counters, without a cycle estimate (the estimator models U55/U65 only).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use npu_rt::ethos_u::config::{AcceleratorConfig, U85_ALL, U85Config};
use npu_rt::ethos_u::cop::{Architecture, Cop1};
use npu_rt::sim::{OpKind, Regions, Stats, VirtualNpu, VirtualU85};
use serde_json::Value as Json;

use npu_build::error::{Error, Result};
use npu_build::ethos_u::perf::{Estimate, estimate_stream};
use npu_build::target::Target;
use npu_build::value::{Data, Value};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Compiled directory (cmd_stream.bin, weights.bin, meta.json).
    pub path: PathBuf,
    /// Input .npy files, in the model's input order.
    #[arg(long = "input", required = true)]
    pub inputs: Vec<PathBuf>,
    /// Output .npy files, in the model's output order.
    #[arg(long = "output")]
    pub outputs: Vec<PathBuf>,
    /// Print counters (MACs, bytes per region, DMA bytes, operations).
    #[arg(long)]
    pub stats: bool,
    /// Print the counters as JSON.
    #[arg(long, requires = "stats")]
    pub json: bool,
    /// With --stats: add one row per operation with its cycle estimate.
    #[arg(long, requires = "stats")]
    pub per_op: bool,
    /// System configuration for the cycle estimate (default: meta.json's "system_config",
    /// else the accelerator's default).
    #[arg(long)]
    pub system_config: Option<String>,
    /// Memory mode for the cycle estimate (default: meta.json's "memory_mode", else the
    /// accelerator's default).
    #[arg(long)]
    pub memory_mode: Option<String>,
    /// Accelerator configuration (default: meta.json's "accelerator").
    #[arg(long)]
    pub accelerator: Option<String>,
    /// Output shape, comma separated (default: meta.json's output_shape without the padding
    /// 1s, with a batch of 1).
    #[arg(long = "output-shape", value_delimiter = ',')]
    pub output_shape: Option<Vec<usize>>,
}

pub fn run(args: Args) -> Result<()> {
    let dir = CompiledDir::load(&args.path)?;
    let inputs = args
        .inputs
        .iter()
        .map(|p| Value::read_npy(p))
        .collect::<Result<Vec<_>>>()?;
    let machine = dir.machine(args.accelerator.as_deref())?;
    let (mut outputs, stats) = match machine {
        Machine::U55(config) => dir.run(config, &inputs)?,
        Machine::U85(config) => dir.run_u85(config, &inputs)?,
    };
    if let (Some(shape), Some(first)) = (&args.output_shape, outputs.first_mut()) {
        *first = Value::new(shape.clone(), first.data.clone())?;
    }
    if args.outputs.len() > outputs.len() {
        return Err(Error::Usage(format!(
            "{} --output files given but the model has {} outputs",
            args.outputs.len(),
            outputs.len()
        )));
    }
    for (path, value) in args.outputs.iter().zip(&outputs) {
        value.write_npy(path)?;
    }
    let config = match machine {
        Machine::U55(config) => config,
        Machine::U85(config) => {
            if args.stats {
                let text = if args.json {
                    let mut v = stats_value(&stats);
                    v["accelerator"] = config.name.into();
                    v.to_string()
                } else {
                    let mut t = stats_text_for(&stats, config.name);
                    t.push_str("\n(no cycle estimate: the estimator models Ethos-U55/U65 only)");
                    t
                };
                println!("{text}");
            }
            return Ok(());
        }
    };
    if args.stats {
        let target = dir.target(
            config,
            args.system_config.as_deref(),
            args.memory_mode.as_deref(),
        )?;
        let estimate = estimate_stream(&dir.cmd_stream, &target)?;
        let text = if args.json {
            let mut v = stats_value(&stats);
            add_estimate_json(&mut v, &stats, &estimate, args.per_op);
            v.to_string()
        } else {
            let mut t = stats_text(&stats, config);
            t.push('\n');
            t.push_str(&estimate_text(&estimate, args.per_op));
            t
        };
        println!("{text}");
    }
    Ok(())
}

/// Adds the cycle estimate to the counters' JSON: `npu_ops`, `cycles_estimate`, `time_ms`, the
/// estimate's details under `"estimate"` (per-operation rows with `per_op`).
pub fn add_estimate_json(v: &mut Json, stats: &Stats, estimate: &Estimate, per_op: bool) {
    let npu_ops = stats.ops.iter().filter(|o| o.kind != OpKind::Dma).count();
    v["npu_ops"] = npu_ops.into();
    v["cycles_estimate"] = estimate.total_cycles.into();
    v["time_ms"] = estimate.time_ms().into();
    v["estimate"] = estimate.to_json(per_op);
}

/// The cycle estimate as text; with `per_op`, one line per operation and DMA.
pub fn estimate_text(e: &Estimate, per_op: bool) -> String {
    let mut s = String::new();
    if per_op {
        let _ = writeln!(
            s,
            "{:>10}  {:<22} {:>16} {:>16} {:>10} {:>10} {:>10} {:>12}",
            "offset", "operation", "OFM", "block", "compute", "memory", "cycles", "end"
        );
        let mut dmas = e.dmas.iter().peekable();
        for op in &e.ops {
            while let Some(d) = dmas.next_if(|d| d.offset < op.offset) {
                let _ = writeln!(
                    s,
                    "{:>#10x}  {:<22} {:>16} {:>16} {:>10} {:>10} {:>10} {:>12}",
                    d.offset,
                    "dma",
                    format!("{} B", d.bytes),
                    "",
                    "",
                    "",
                    d.cost.cycles,
                    d.end
                );
            }
            let shape = |v: &[u64; 3]| format!("{}x{}x{}", v[0], v[1], v[2]);
            let memory = op.cost.access.iter().copied().max().unwrap_or(0);
            let _ = writeln!(
                s,
                "{:>#10x}  {:<22} {:>16} {:>16} {:>10} {:>10} {:>10} {:>12}",
                op.offset,
                op.kind,
                shape(&op.ofm),
                shape(&op.ofm_block),
                op.cost.compute,
                memory,
                op.cost.cycles(),
                op.end
            );
        }
    }
    let _ = writeln!(
        s,
        "estimate ({}): {} cycles = {:.4} ms at {} MHz; compute {}, operations {}, DMA {}, DMA stalls {}",
        e.target,
        e.total_cycles,
        e.time_ms(),
        e.clock_hz / 1e6,
        e.compute_cycles,
        e.op_cycles,
        e.dma_cycles,
        e.stall_cycles
    );
    for m in &e.memories {
        if m.bytes_read + m.bytes_written > 0 {
            let _ = writeln!(
                s,
                "  {:<13} read {:>12} B, written {:>12} B, busy {:>12} cycles",
                m.name, m.bytes_read, m.bytes_written, m.access_cycles
            );
        }
    }
    s.trim_end().to_string()
}

/// Which virtual NPU runs a stream.
#[derive(Clone, Copy, Debug)]
pub enum Machine {
    /// The virtual Ethos-U55/U65 ([`VirtualNpu`]).
    U55(&'static AcceleratorConfig),
    /// The virtual Ethos-U85 ([`VirtualU85`]).
    U85(&'static U85Config),
}

/// A compiled directory: command stream, weights and Vela's metadata.
#[derive(Debug, Clone)]
pub struct CompiledDir {
    /// Where it was loaded from.
    pub path: PathBuf,
    /// `cmd_stream.bin` (a COP1 payload or a raw stream).
    pub cmd_stream: Vec<u8>,
    /// `weights.bin`.
    pub weights: Vec<u8>,
    /// `meta.json`.
    pub meta: Json,
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn bad_meta(path: &Path, detail: impl std::fmt::Display) -> Error {
    Error::Artifact(format!("{}: {detail}", path.join("meta.json").display()))
}

impl CompiledDir {
    /// Reads the three files of a compiled directory.
    pub fn load(path: &Path) -> Result<Self> {
        let meta_bytes = read(&path.join("meta.json"))?;
        let meta: Json = serde_json::from_slice(&meta_bytes).map_err(|e| bad_meta(path, e))?;
        Ok(CompiledDir {
            path: path.to_path_buf(),
            cmd_stream: read(&path.join("cmd_stream.bin"))?,
            weights: read(&path.join("weights.bin"))?,
            meta,
        })
    }

    fn usize_key(&self, key: &str) -> Result<usize> {
        self.meta
            .get(key)
            .and_then(Json::as_u64)
            .and_then(|v| usize::try_from(v).ok())
            .ok_or_else(|| bad_meta(&self.path, format!("missing or invalid \"{key}\"")))
    }

    fn usize_list(&self, key: &str) -> Result<Vec<usize>> {
        let list = self
            .meta
            .get(key)
            .and_then(Json::as_array)
            .ok_or_else(|| bad_meta(&self.path, format!("missing list \"{key}\"")))?;
        list.iter()
            .map(|v| v.as_u64().and_then(|v| usize::try_from(v).ok()))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| bad_meta(&self.path, format!("\"{key}\" must hold integers")))
    }

    fn shapes(&self, key: &str) -> Result<Vec<Vec<usize>>> {
        let list = self
            .meta
            .get(key)
            .and_then(Json::as_array)
            .ok_or_else(|| bad_meta(&self.path, format!("missing list \"{key}\"")))?;
        list.iter()
            .map(|s| {
                s.as_array().and_then(|d| {
                    d.iter()
                        .map(|v| v.as_u64().and_then(|v| usize::try_from(v).ok()))
                        .collect()
                })
            })
            .collect::<Option<Vec<Vec<usize>>>>()
            .ok_or_else(|| bad_meta(&self.path, format!("\"{key}\" must hold integer shapes")))
    }

    /// The virtual NPU for this directory: the accelerator `name` if given, else meta.json's
    /// `"accelerator"`; a U85 name picks the virtual U85. Without a name, a COP1 payload for
    /// Ethos-U85 picks the U85 configuration with its MACs (OPTIMIZER_CONFIG bits 0..=3).
    pub fn machine(&self, name: Option<&str>) -> Result<Machine> {
        let given = name.or_else(|| self.meta.get("accelerator").and_then(Json::as_str));
        if let Some(c) = given.and_then(U85Config::by_name) {
            return Ok(Machine::U85(c));
        }
        if given.is_none()
            && let Ok(cop) = Cop1::parse(&self.cmd_stream)
            && cop.architecture() == Some(Architecture::EthosU85)
        {
            let macs_log2 = cop.optimizer_config().map_or(0, |(c, _)| c & 0xf);
            return U85_ALL
                .iter()
                .copied()
                .find(|c| c.hw_macs_per_cc() == macs_log2)
                .map(Machine::U85)
                .ok_or_else(|| {
                    bad_meta(
                        &self.path,
                        format!("no Ethos-U85 configuration has 2^{macs_log2} MACs"),
                    )
                });
        }
        self.accelerator(name).map(Machine::U55)
    }

    /// The accelerator: `name` if given, else meta.json's `"accelerator"`.
    pub fn accelerator(&self, name: Option<&str>) -> Result<&'static AcceleratorConfig> {
        let name = match name {
            Some(n) => n.to_string(),
            None => self
                .meta
                .get("accelerator")
                .and_then(Json::as_str)
                .ok_or_else(|| bad_meta(&self.path, "missing \"accelerator\""))?
                .to_string(),
        };
        AcceleratorConfig::by_name(&name).ok_or_else(|| Error::UnknownName {
            what: npu_build::error::NameKind::Accelerator,
            given: name,
            valid: AcceleratorConfig::names().join(", "),
        })
    }

    /// The target for the cycle estimate: `config` with the given system configuration and
    /// memory mode, else meta.json's (Vela writes them), else the accelerator's defaults.
    pub fn target(
        &self,
        config: &'static AcceleratorConfig,
        system_config: Option<&str>,
        memory_mode: Option<&str>,
    ) -> Result<Target> {
        let meta = |k: &str| self.meta.get(k).and_then(Json::as_str);
        Target::new(
            config.name,
            system_config.or_else(|| meta("system_config")),
            memory_mode.or_else(|| meta("memory_mode")),
        )
    }

    /// Runs the directory's stream on `inputs` over zeroed memory; returns the outputs and the
    /// counters.
    pub fn run(
        &self,
        config: &'static AcceleratorConfig,
        inputs: &[Value],
    ) -> Result<(Vec<Value>, Stats)> {
        let (mut arena, mut fast) = (Vec::new(), Vec::new());
        self.run_on(Machine::U55(config), inputs, &mut arena, &mut fast)
    }

    /// Runs the stream on each set of inputs in turn over the same memory, as firmware
    /// invoking a model repeatedly does: variable tensors (LSTM states, `meta.json`'s
    /// `variable_offset`) carry over from one run to the next.
    pub fn run_sequence(
        &self,
        config: &'static AcceleratorConfig,
        runs: &[Vec<Value>],
    ) -> Result<Vec<(Vec<Value>, Stats)>> {
        let (mut arena, mut fast) = (Vec::new(), Vec::new());
        runs.iter()
            .map(|inputs| self.run_on(Machine::U55(config), inputs, &mut arena, &mut fast))
            .collect()
    }

    /// [`CompiledDir::run`] on the virtual Ethos-U85 (for `ethos-u85-*` directories).
    pub fn run_u85(
        &self,
        config: &'static U85Config,
        inputs: &[Value],
    ) -> Result<(Vec<Value>, Stats)> {
        let (mut arena, mut fast) = (Vec::new(), Vec::new());
        self.run_on(Machine::U85(config), inputs, &mut arena, &mut fast)
    }

    /// [`CompiledDir::run_sequence`] on the virtual Ethos-U85 (for `ethos-u85-*` directories).
    pub fn run_sequence_u85(
        &self,
        config: &'static U85Config,
        runs: &[Vec<Value>],
    ) -> Result<Vec<(Vec<Value>, Stats)>> {
        let (mut arena, mut fast) = (Vec::new(), Vec::new());
        runs.iter()
            .map(|inputs| self.run_on(Machine::U85(config), inputs, &mut arena, &mut fast))
            .collect()
    }

    /// Fills the variable tensors (`meta.json`'s `variable_*` lists) with their initial value,
    /// as TFLite's `ResetVariableTensor` does: int8 tensors with their zero point, others
    /// with 0.
    fn init_variables(&self, arena: &mut [u8]) -> Result<()> {
        let Ok(offsets) = self.usize_list("variable_offset") else {
            return Ok(());
        };
        let regions = self.usize_list("variable_region")?;
        let elems = self.usize_list("variable_elem_size")?;
        let shapes = self.shapes("variable_shape")?;
        let quant = self
            .meta
            .get("variable_quantization")
            .and_then(Json::as_array);
        for (i, &off) in offsets.iter().enumerate() {
            if regions.get(i) != Some(&1) {
                return Err(bad_meta(
                    &self.path,
                    format!("variable {i} is not in region 1"),
                ));
            }
            let elem = elems.get(i).copied().unwrap_or(1);
            let len = shapes.get(i).map_or(0, |s| s.iter().product::<usize>()) * elem;
            let zp = quant
                .and_then(|q| q.get(i))
                .and_then(|q| q.get("zero_point"))
                .and_then(|z| z.get(0))
                .and_then(Json::as_i64)
                .unwrap_or(0);
            let byte = if elem == 1 { zp as i8 as u8 } else { 0 };
            arena
                .get_mut(off..off + len)
                .ok_or_else(|| {
                    bad_meta(
                        &self.path,
                        format!("variable {i} at {off} is outside the arena"),
                    )
                })?
                .fill(byte);
        }
        Ok(())
    }

    /// [`CompiledDir::run`] on `arena` and `fast_arena` (zero-extended to the sizes
    /// `meta.json` gives; their contents are kept).
    fn run_on(
        &self,
        machine: Machine,
        inputs: &[Value],
        arena: &mut Vec<u8>,
        fast_arena: &mut Vec<u8>,
    ) -> Result<(Vec<Value>, Stats)> {
        let scratch = self.usize_key("scratch_size")?;
        let fast = self
            .meta
            .get("scratch_fast_size")
            .and_then(Json::as_u64)
            .unwrap_or(0) as usize;
        let in_offsets = self.usize_list("input_offset")?;
        let in_regions = self.usize_list("input_region")?;
        let in_elem = self.usize_list("input_elem_size")?;
        let in_shapes = self.shapes("input_shape")?;
        let out_offsets = self.usize_list("output_offset")?;
        let out_regions = self.usize_list("output_region")?;
        let out_elem = self.usize_list("output_elem_size")?;
        let out_shapes = self.shapes("output_shape")?;
        if inputs.len() != in_offsets.len() {
            return Err(Error::BadInput {
                index: inputs.len().min(in_offsets.len()),
                tensor: String::new(),
                detail: format!(
                    "the model has {} inputs, {} given",
                    in_offsets.len(),
                    inputs.len()
                ),
            });
        }
        let fresh = arena.is_empty();
        arena.resize(scratch, 0);
        fast_arena.resize(fast, 0);
        if fresh {
            self.init_variables(arena)?;
        }
        for (i, value) in inputs.iter().enumerate() {
            let bytes = value.data.to_le_bytes();
            let elems: usize = in_shapes.get(i).map_or(0, |s| s.iter().product());
            let elem = in_elem.get(i).copied().unwrap_or(1);
            if bytes.len() != elems * elem || value.data.dtype().size() != elem {
                return Err(Error::BadInput {
                    index: i,
                    tensor: String::new(),
                    detail: format!(
                        "expected {elems} elements of {elem} byte(s) (meta shape {:?}), got {} of {}",
                        in_shapes.get(i),
                        value.data.len(),
                        value.data.dtype().size()
                    ),
                });
            }
            let region = in_regions.get(i).copied().unwrap_or(1);
            let off = in_offsets.get(i).copied().unwrap_or(0);
            let dst = match region {
                1 => &mut *arena,
                2 => &mut *fast_arena,
                r => {
                    return Err(bad_meta(
                        &self.path,
                        format!("input {i} is in region {r}; only 1 and 2 hold inputs"),
                    ));
                }
            };
            dst.get_mut(off..off + bytes.len())
                .ok_or_else(|| {
                    bad_meta(
                        &self.path,
                        format!("input {i} at {off} does not fit region {region}"),
                    )
                })?
                .copy_from_slice(&bytes);
        }
        let stats = {
            let mut regions = Regions::new();
            regions.set(0, &self.weights).set_mut(1, arena);
            if fast > 0 {
                regions.set_mut(2, fast_arena);
            }
            match machine {
                Machine::U55(config) => VirtualNpu::new(config).run(&self.cmd_stream, &mut regions),
                Machine::U85(config) => VirtualU85::new(config).run(&self.cmd_stream, &mut regions),
            }
            .map_err(|e| Error::Sim(e.to_string()))?
        };
        let mut outputs = Vec::new();
        for (i, &off) in out_offsets.iter().enumerate() {
            let region = out_regions.get(i).copied().unwrap_or(1);
            let elem = out_elem.get(i).copied().unwrap_or(1);
            let meta_shape = out_shapes.get(i).cloned().unwrap_or_default();
            let n: usize = meta_shape.iter().product();
            let src: &[u8] = match region {
                0 => &self.weights,
                1 => &arena[..],
                2 => &fast_arena[..],
                r => return Err(bad_meta(&self.path, format!("output {i} is in region {r}"))),
            };
            let bytes = src.get(off..off + n * elem).ok_or_else(|| {
                bad_meta(
                    &self.path,
                    format!("output {i} at {off} does not fit region {region}"),
                )
            })?;
            let data = match elem {
                1 => Data::I8(bytes.iter().map(|&b| b as i8).collect()),
                2 => Data::I16(
                    bytes
                        .chunks_exact(2)
                        .map(|c| i16::from_le_bytes([c[0], c[1]]))
                        .collect(),
                ),
                4 => Data::I32(
                    bytes
                        .chunks_exact(4)
                        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect(),
                ),
                e => {
                    return Err(bad_meta(
                        &self.path,
                        format!("output {i}: element size {e}"),
                    ));
                }
            };
            outputs.push(Value::new(io_shape(&meta_shape), data)?);
        }
        Ok((outputs, stats))
    }
}

/// The model-level shape of Vela's padded 6-D `output_shape`: the padding 1s dropped and a
/// batch of 1 in front (`[1,1,1,8,8,16]` -> `[1,8,8,16]`, `[1,1,1,1,1,10]` -> `[1,10]`).
pub fn io_shape(meta: &[usize]) -> Vec<usize> {
    let first = meta.iter().position(|&d| d != 1).unwrap_or(meta.len());
    let mut shape = vec![1];
    shape.extend_from_slice(meta.get(first..).unwrap_or(&[]));
    shape
}

/// Human-readable counters.
pub fn stats_text(stats: &Stats, config: &AcceleratorConfig) -> String {
    stats_text_for(stats, config.name)
}

/// Human-readable counters of a run on the accelerator named `accelerator`.
pub fn stats_text_for(stats: &Stats, accelerator: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "accelerator {}: {} commands, {} operations",
        accelerator, stats.commands, stats.operations
    );
    let _ = writeln!(
        s,
        "{:>10}  {:<20} {:>12} {:>10} {:>24} {:>24}",
        "offset", "operation", "MACs", "OFM elems", "read (region:bytes)", "written (region:bytes)"
    );
    let regions = |v: &[u64; 8]| {
        let parts: Vec<String> = v
            .iter()
            .enumerate()
            .filter(|(_, b)| **b > 0)
            .map(|(r, b)| format!("{r}:{b}"))
            .collect();
        parts.join(" ")
    };
    for op in &stats.ops {
        let _ = writeln!(
            s,
            "{:>#10x}  {:<20} {:>12} {:>10} {:>24} {:>24}",
            op.offset,
            op.kind.name(),
            op.macs,
            op.ofm_elements,
            regions(&op.bytes_read),
            regions(&op.bytes_written)
        );
    }
    let _ = writeln!(
        s,
        "total: {} MACs, {} DMA bytes",
        stats.macs, stats.dma_bytes
    );
    let _ = writeln!(s, "  read    {}", regions(&stats.bytes_read));
    let _ = write!(s, "  written {}", regions(&stats.bytes_written));
    s
}

/// Counters as JSON.
pub fn stats_json(stats: &Stats) -> String {
    stats_value(stats).to_string()
}

/// Counters as a JSON value.
pub fn stats_value(stats: &Stats) -> Json {
    let ops: Vec<Json> = stats
        .ops
        .iter()
        .map(|op| {
            serde_json::json!({
                "offset": op.offset,
                "kind": op.kind.name(),
                "macs": op.macs,
                "ofm_elements": op.ofm_elements,
                "bytes_read": op.bytes_read,
                "bytes_written": op.bytes_written,
                "dma_bytes": op.dma_bytes,
            })
        })
        .collect();
    let by_kind: Vec<Json> = stats
        .by_kind()
        .into_iter()
        .map(|(k, n, macs)| serde_json::json!({"kind": k.name(), "operations": n, "macs": macs}))
        .collect();
    serde_json::json!({
        "commands": stats.commands,
        "operations": stats.operations,
        "macs": stats.macs,
        "dma_bytes": stats.dma_bytes,
        "bytes_read": stats.bytes_read,
        "bytes_written": stats.bytes_written,
        "stopped": stats.stopped,
        "by_kind": by_kind,
        "ops": ops,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(rel: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures")
            .join(rel)
    }

    #[test]
    fn npu_sim_runs_u85_directories_on_the_virtual_u85() {
        let dir = fixture("op_conv1x1/vela/ethos-u85-256");
        let loaded = CompiledDir::load(&dir).expect("load");
        assert!(matches!(
            loaded.machine(None),
            Ok(Machine::U85(c)) if c.name == "ethos-u85-256"
        ));
        // Without meta.json's name, the payload's OPTIMIZER_CONFIG picks the U85 by its MACs.
        let mut anonymous = loaded.clone();
        anonymous.meta["accelerator"] = Json::Null;
        assert!(matches!(
            anonymous.machine(None),
            Ok(Machine::U85(c)) if c.name == "ethos-u85-256"
        ));
        let out = std::env::temp_dir().join(format!("npu-sim-u85-{}.npy", std::process::id()));
        for stats in [&[][..], &["--stats"][..], &["--stats", "--json"][..]] {
            let mut args: Vec<std::ffi::OsString> = vec![
                "npu".into(),
                "sim".into(),
                dir.clone().into(),
                "--input".into(),
                fixture("op_conv1x1/io/input_1.npy").into(),
                "--output".into(),
                out.clone().into(),
            ];
            args.extend(stats.iter().map(Into::into));
            crate::main_with(args, crate::Defaults::default()).expect("npu sim");
            let got = Value::read_npy(&out).expect("output");
            let want = Value::read_npy(&fixture("op_conv1x1/io/output_1.npy")).expect("reference");
            assert_eq!(got.data.to_le_bytes(), want.data.to_le_bytes(), "{stats:?}");
        }
        let _ = std::fs::remove_file(&out);
    }

    #[test]
    fn u85_stats_text_names_the_accelerator() {
        let dir = CompiledDir::load(&fixture("op_add/vela/ethos-u85-128")).expect("load");
        let Machine::U85(config) = dir.machine(None).expect("machine") else {
            panic!("not a U85");
        };
        let inputs = [
            Value::read_npy(&fixture("op_add/io/input_0_0.npy")).expect("input 0"),
            Value::read_npy(&fixture("op_add/io/input_0_1.npy")).expect("input 1"),
        ];
        let (_, stats) = dir.run_u85(config, &inputs).expect("run");
        let text = stats_text_for(&stats, config.name);
        assert!(text.starts_with("accelerator ethos-u85-128: "), "{text}");
        assert!(stats.operations > 0);
    }
}
