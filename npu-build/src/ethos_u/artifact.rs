//! The compiled artifact: command stream, read-only data, arena size and I/O locations, and its
//! on-disk form (Vela's raw-output layout, so `npu sim` and the fixtures' tooling read both).

use std::path::Path;
use std::time::Duration;

use npu_rt::ethos_u::config::AcceleratorConfig;
use serde_json::{Value as Json, json};

use super::npu_op::{Layout, Program};
use super::partition::{CpuStep, OpAssignment};
use crate::error::{Error, Result};
use crate::ir::{DType, Graph, TensorId};
#[cfg(feature = "sim")]
use crate::value::{Data, Value};

/// Where a graph input or output lives and how it is quantized.
#[derive(Clone, Debug, PartialEq)]
pub struct IoTensor {
    pub name: String,
    /// Shape as in the model.
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub scale: f32,
    pub zero_point: i32,
    /// Region (base pointer index) and byte offset in it.
    pub region: u8,
    pub offset: usize,
}

impl IoTensor {
    pub fn byte_size(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size()
    }
}

/// One step of a compiled model, run in order over the same weights and arena.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// A command stream (COP1 payload) of consecutive NPU operations.
    Npu {
        command_stream: Vec<u8>,
        /// The operations of [`Compiled::program`] it holds.
        ops: std::ops::Range<usize>,
    },
    /// An operator on the CPU.
    Cpu(CpuStep),
}

/// A model compiled for one accelerator.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// Model name (file stem).
    pub name: String,
    pub accelerator: &'static AcceleratorConfig,
    /// The COP1 driver payload holding the command stream of the whole model when it runs
    /// entirely on the NPU (one [`Step::Npu`]); empty when [`Compiled::steps`] mixes NPU and CPU.
    pub command_stream: Vec<u8>,
    /// Region 0: encoded weights, scale/bias streams, LUTs and constants.
    pub weights: Vec<u8>,
    /// Bytes of region 1 (the arena: feature maps, graph inputs and outputs).
    pub arena_size: usize,
    /// Bytes of region 2 (fast scratch; 0 when unused).
    pub fast_scratch_size: usize,
    pub inputs: Vec<IoTensor>,
    pub outputs: Vec<IoTensor>,
    /// The variable tensors (LSTM states), kept in the arena from one run to the next.
    pub variables: Vec<IoTensor>,
    /// With variables: the arena byte that is 0 until the first run has initialised them
    /// ([`Compiled::init_state`]).
    pub state_flag: Option<usize>,
    /// NPU operations in the command stream.
    pub npu_ops: usize,
    /// Operators of the source graph.
    pub ir_ops: usize,
    /// Compressed weight stream bytes (part of `weights`).
    pub encoded_weight_bytes: usize,
    pub compile_time: Duration,
    /// The lowered program (for `--dump-ops` and reports).
    pub program: Program,
    /// `(region, address)` of every buffer of `program`.
    pub buffer_addrs: Vec<(u8, u64)>,
    /// What runs, in order: NPU command streams and CPU operators.
    pub steps: Vec<Step>,
    /// Where each IR operator runs (graph order), with the reason of each CPU operator.
    pub assignment: Vec<OpAssignment>,
}

fn shape6(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; 6usize.saturating_sub(shape.len())];
    s.extend_from_slice(shape);
    s
}

fn quant_json(t: &IoTensor) -> Json {
    json!({"quant_type": "per_tensor", "scale": [t.scale], "zero_point": [t.zero_point]})
}

impl Compiled {
    /// Vela's `meta.json` keys for this artifact.
    pub fn meta_json(&self, system_config: &str, memory_mode: &str) -> Json {
        let list = |ts: &[IoTensor], f: &dyn Fn(&IoTensor) -> Json| -> Json {
            Json::Array(ts.iter().map(f).collect())
        };
        json!({
            "weight_region": 0,
            "scratch_shape": [self.arena_size],
            "scratch_region": 1,
            "scratch_size": self.arena_size,
            "scratch_fast_shape": [self.fast_scratch_size],
            "scratch_fast_region": if self.fast_scratch_size > 0 { 2 } else { 0 },
            "scratch_fast_size": self.fast_scratch_size,
            "input_shape": list(&self.inputs, &|t| json!(shape6(&t.shape))),
            "input_elem_size": list(&self.inputs, &|t| json!(t.dtype.size())),
            "input_region": list(&self.inputs, &|t| json!(t.region)),
            "input_offset": list(&self.inputs, &|t| json!(t.offset)),
            "output_shape": list(&self.outputs, &|t| json!(shape6(&t.shape))),
            "output_elem_size": list(&self.outputs, &|t| json!(t.dtype.size())),
            "output_region": list(&self.outputs, &|t| json!(t.region)),
            "output_offset": list(&self.outputs, &|t| json!(t.offset)),
            "variable_shape": list(&self.variables, &|t| json!(shape6(&t.shape))),
            "variable_elem_size": list(&self.variables, &|t| json!(t.dtype.size())),
            "variable_region": list(&self.variables, &|t| json!(t.region)),
            "variable_offset": list(&self.variables, &|t| json!(t.offset)),
            "input_quantization": list(&self.inputs, &quant_json),
            "output_quantization": list(&self.outputs, &quant_json),
            "variable_quantization": list(&self.variables, &quant_json),
            "accelerator": self.accelerator.name,
            "system_config": system_config,
            "memory_mode": memory_mode,
        })
    }

    /// Flash bytes: the read-only region plus the command stream.
    pub fn flash_bytes(&self) -> usize {
        self.weights.len() + self.command_stream.len()
    }

    /// Writes `cmd_stream.bin`, `weights.bin` and `meta.json` into `dir` (created if needed).
    pub fn write_dir(&self, dir: &Path, system_config: &str, memory_mode: &str) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let write = |name: &str, bytes: &[u8]| {
            let p = dir.join(name);
            std::fs::write(&p, bytes).map_err(|e| Error::io(p, e))
        };
        write("cmd_stream.bin", &self.command_stream)?;
        write("weights.bin", &self.weights)?;
        let meta = serde_json::to_string_pretty(&self.meta_json(system_config, memory_mode))
            .map_err(|e| Error::Internal(e.to_string()))?;
        write("meta.json", meta.as_bytes())
    }
}

impl IoTensor {
    /// The byte a variable tensor starts from ([`crate::ir::variable_initial_byte`]).
    pub fn initial_byte(&self) -> u8 {
        crate::ir::variable_initial_byte(self.dtype, self.zero_point)
    }
}

impl Compiled {
    /// Sets the variable tensors to their initial values if this arena has not run the model
    /// yet (its state flag is 0), as the generated `run` does.
    pub fn init_state(&self, arena: &mut [u8]) -> Result<()> {
        let Some(flag) = self.state_flag else {
            return Ok(());
        };
        let outside = || Error::Arena("the arena is smaller than the model's".into());
        if *arena.get(flag).ok_or_else(outside)? != 0 {
            return Ok(());
        }
        for v in &self.variables {
            arena
                .get_mut(v.offset..v.offset + v.byte_size())
                .ok_or_else(outside)?
                .fill(v.initial_byte());
        }
        arena[flag] = 1;
        Ok(())
    }

    /// Runs the artifact on each set of inputs in turn over one arena, as firmware calling
    /// `run` repeatedly does: variable tensors (LSTM states) carry over.
    #[cfg(feature = "sim")]
    pub fn run_sim_sequence(&self, runs: &[Vec<Value>]) -> Result<Vec<Vec<Value>>> {
        let mut arena = vec![0u8; self.arena_size];
        runs.iter()
            .map(|inputs| {
                self.run_sim_on(&mut arena, inputs)?;
                self.read_outputs(&arena)
            })
            .collect()
    }

    /// Runs the artifact on a fresh [`VirtualNpu`](npu_rt::sim::VirtualNpu): writes `inputs` (model
    /// order, checked against the model's shapes and types) into a zeroed arena, executes the
    /// command stream, and returns the outputs and the simulator's counters (feature `sim`).
    #[cfg(feature = "sim")]
    pub fn run_sim(&self, inputs: &[Value]) -> Result<(Vec<Value>, npu_rt::sim::Stats)> {
        let (arena, stats) = self.run_sim_arena(inputs)?;
        Ok((self.read_outputs(&arena)?, stats))
    }

    /// The outputs from an arena after a run.
    #[cfg(feature = "sim")]
    fn read_outputs(&self, arena: &[u8]) -> Result<Vec<Value>> {
        self.outputs
            .iter()
            .map(|t| {
                let bytes = arena
                    .get(t.offset..t.offset + t.byte_size())
                    .ok_or_else(|| {
                        Error::Arena(format!("output '{}' lies outside the arena", t.name))
                    })?;
                Value::new(t.shape.clone(), Data::from_le_bytes(t.dtype, bytes)?)
            })
            .collect::<Result<Vec<_>>>()
    }

    /// Like [`Compiled::run_sim`], returning the whole arena after the run.
    #[cfg(feature = "sim")]
    pub fn run_sim_arena(&self, inputs: &[Value]) -> Result<(Vec<u8>, npu_rt::sim::Stats)> {
        let mut arena = vec![0u8; self.arena_size];
        let stats = self.run_sim_on(&mut arena, inputs)?;
        Ok((arena, stats))
    }

    /// One run on `arena` (of [`Compiled::arena_size`] bytes), its contents kept.
    #[cfg(feature = "sim")]
    fn run_sim_on(&self, arena: &mut [u8], inputs: &[Value]) -> Result<npu_rt::sim::Stats> {
        if inputs.len() != self.inputs.len() {
            return Err(Error::BadInput {
                index: inputs.len().min(self.inputs.len()),
                tensor: String::new(),
                detail: format!(
                    "the model takes {} inputs, {} were given",
                    self.inputs.len(),
                    inputs.len()
                ),
            });
        }
        self.init_state(arena)?;
        for (index, (t, v)) in self.inputs.iter().zip(inputs).enumerate() {
            let bad = |detail: String| Error::BadInput {
                index,
                tensor: t.name.clone(),
                detail,
            };
            if v.dtype() != t.dtype {
                return Err(bad(format!("expected {} data, got {}", t.dtype, v.dtype())));
            }
            let want: usize = t.shape.iter().product();
            if v.data.len() != want {
                return Err(bad(format!(
                    "expected shape {:?} ({want} elements), got {:?}",
                    t.shape, v.shape
                )));
            }
            let bytes = v.data.to_le_bytes();
            arena
                .get_mut(t.offset..t.offset + bytes.len())
                .ok_or_else(|| bad("input lies outside the arena".into()))?
                .copy_from_slice(&bytes);
        }
        let mut npu = npu_rt::sim::VirtualNpu::new(self.accelerator);
        let mut stats = npu_rt::sim::Stats::default();
        // Region 2 (the SRAM when the arena is in DRAM): nothing outside the run reads it.
        let mut fast = vec![0u8; self.fast_scratch_size];
        for (k, step) in self.steps.iter().enumerate() {
            match step {
                Step::Npu { command_stream, .. } => {
                    let mut regions = npu_rt::sim::Regions::new();
                    regions.set(0, &self.weights).set_mut(1, arena);
                    if !fast.is_empty() {
                        regions.set_mut(2, &mut fast);
                    }
                    let s = npu
                        .run(command_stream, &mut regions)
                        .map_err(|e| Error::Sim(format!("step {k}: {e}")))?;
                    merge_stats(&mut stats, s);
                }
                Step::Cpu(c) => {
                    c.kernel.execute(&self.weights, arena).ok_or_else(|| {
                        Error::Arena(format!(
                            "step {k}: CPU kernel of node '{}' ({}): operands do not fit the arena",
                            c.node, c.op
                        ))
                    })?;
                }
            }
        }
        Ok(stats)
    }

    /// The bytes of IR tensor `t` (dense, row-major) from an arena after a run, if lowering placed
    /// it in the arena (NHWC, or NHCWB16 bricks, which are gathered back into NHWC order).
    /// Intermediate tensors are only all intact when compiled with `keep_intermediates`.
    pub fn tensor_bytes(&self, arena: &[u8], graph: &Graph, t: TensorId) -> Option<Vec<u8>> {
        let place = self
            .program
            .tensor_places
            .get(t.index())
            .copied()
            .flatten()?;
        let (region, addr) = *self.buffer_addrs.get(place.buffer.index())?;
        if region != 1 {
            return None;
        }
        if place.layout == Layout::Nhcwb16 {
            let tensor = graph.tensors.get(t.index())?;
            let e = tensor.dtype.size();
            let s = &tensor.shape;
            let c = s.last().copied().unwrap_or(1);
            let w = if s.len() >= 2 { s[s.len() - 2] } else { 1 };
            let h = tensor.elements() / (w * c).max(1);
            let base = addr as usize + place.offset;
            let mut out = Vec::with_capacity(tensor.byte_size());
            for y in 0..h {
                for x in 0..w {
                    for ch in 0..c {
                        let at = base
                            + y * place.strides[0]
                            + x * place.strides[1]
                            + ch / 16 * place.strides[2]
                            + ch % 16 * e;
                        out.extend_from_slice(arena.get(at..at + e)?);
                    }
                }
            }
            return Some(out);
        }
        let tensor = graph.tensors.get(t.index())?;
        let e = tensor.dtype.size();
        let s = &tensor.shape;
        let c = s.last().copied().unwrap_or(1);
        let w = if s.len() >= 2 { s[s.len() - 2] } else { 1 };
        let rows = tensor.elements() / (w * c).max(1);
        let base = addr as usize + place.offset;
        let mut out = Vec::with_capacity(tensor.byte_size());
        for r in 0..rows {
            for x in 0..w {
                let at = base + r * place.strides[0] + x * place.strides[1];
                out.extend_from_slice(arena.get(at..at + c * e)?);
            }
        }
        Some(out)
    }
}

/// Adds the counters of one command stream's run to `total`.
#[cfg(feature = "sim")]
fn merge_stats(total: &mut npu_rt::sim::Stats, s: npu_rt::sim::Stats) {
    total.commands = total.commands.saturating_add(s.commands);
    total.operations = total.operations.saturating_add(s.operations);
    total.macs = total.macs.saturating_add(s.macs);
    total.dma_bytes = total.dma_bytes.saturating_add(s.dma_bytes);
    for (t, v) in total.bytes_read.iter_mut().zip(s.bytes_read) {
        *t = t.saturating_add(v);
    }
    for (t, v) in total.bytes_written.iter_mut().zip(s.bytes_written) {
        *t = t.saturating_add(v);
    }
    total.ops.extend(s.ops);
    total.irqs.extend(s.irqs);
    total.stopped = s.stopped;
}

impl Compiled {
    /// Number of CPU steps.
    pub fn cpu_ops(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, Step::Cpu(_)))
            .count()
    }
}
