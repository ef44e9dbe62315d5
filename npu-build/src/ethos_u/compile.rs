//! The backend driver: lower, choose blocks, encode weights, place, emit, wrap in COP1.

use std::collections::HashMap;
use std::time::Instant;

use npu_rt::ethos_u::config::AcceleratorConfig;
use npu_rt::ethos_u::cop::Cop1Writer;
use npu_rt::ethos_u::regs::ARCH_VERSION;
use npu_rt::ethos_u::regs::ctrl::{Config, Id};
use npu_rt::ethos_u::weights::{ScaleEntry, Traversal};

use super::alloc;
use super::artifact::{Compiled, IoTensor};
use super::npu_op::{
    BufferKind, CoreStreams, Io, NpuOp, NpuOpKind, Placement, Program, WeightStreams,
};
use super::weights::{WeightLayout, encode_op};
use super::{block, emit, lower};
use crate::error::{Error, Result};
use crate::ir::Graph;

/// Alignment of every buffer and stream in every region (the NPU's addressing granule).
pub const ALIGN: usize = 16;

/// Region numbers (base pointer indices), as Vela's raw output uses them.
pub const REGION_CONST: u8 = 0;
pub const REGION_ARENA: u8 = 1;

/// Options of [`compile_with`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompileOptions {
    /// Give every arena buffer its own bytes for the whole run (no reuse), so that every
    /// intermediate tensor can be read back after a run ([`Compiled::tensor_bytes`]). For tests
    /// and debugging: the arena grows to the sum of all feature maps.
    pub keep_intermediates: bool,
}

/// Compiles `graph` for `accel`: the whole pipeline of the native backend.
pub fn compile(graph: &Graph, accel: &'static AcceleratorConfig) -> Result<Compiled> {
    compile_with(graph, accel, &CompileOptions::default())
}

/// [`compile`] with options.
pub fn compile_with(
    graph: &Graph,
    accel: &'static AcceleratorConfig,
    options: &CompileOptions,
) -> Result<Compiled> {
    let start = Instant::now();
    graph.validate()?;
    let mut program = lower::lower(graph, accel)?;
    for op in &mut program.ops {
        op.block = Some(block::choose(op, accel)?);
    }
    let mut ro = ReadOnly::default();
    let weights = encode_weights(&program, accel, &mut ro)?;
    let (buffers, arena_size) = place_buffers(&program, &mut ro, options.keep_intermediates)?;
    let placement = Placement { buffers, weights };
    let words = emit::emit(&program, &placement, accel)?;
    let command_stream = cop1_writer(accel)
        .to_vec(&words)
        .map_err(|e| Error::Other(format!("COP1 payload: {e}")))?;

    let io = |k: Io, t: usize| -> IoTensor {
        let tensor = &graph.tensors[t];
        let buffer = program
            .buffers
            .iter()
            .position(|b| b.io == Some(k))
            .expect("every graph input/output has a buffer");
        let (scale, zero_point) = tensor
            .quant
            .as_ref()
            .map_or((1.0, 0), |q| (q.scale(), q.zero_point()));
        IoTensor {
            name: tensor.name.clone(),
            shape: tensor.shape.clone(),
            dtype: tensor.dtype,
            scale,
            zero_point,
            region: placement.buffers[buffer].0,
            offset: placement.buffers[buffer].1 as usize,
        }
    };
    let inputs = graph
        .inputs
        .iter()
        .enumerate()
        .map(|(k, &t)| io(Io::Input(k), t))
        .collect();
    let outputs = graph
        .outputs
        .iter()
        .enumerate()
        .map(|(k, &t)| io(Io::Output(k), t))
        .collect();
    Ok(Compiled {
        name: graph.name.clone(),
        accelerator: accel,
        command_stream,
        weights: ro.bytes,
        arena_size,
        fast_scratch_size: 0,
        inputs,
        outputs,
        npu_ops: program.ops.len(),
        ir_ops: graph.ops.len(),
        encoded_weight_bytes: ro.weight_bytes,
        compile_time: start.elapsed(),
        buffer_addrs: placement.buffers.clone(),
        program,
    })
}

/// The COP1 writer for `accel`: the CONFIG and ID words the driver checks against the hardware,
/// as Vela writes them (ID: architecture 1.0.6, version_status 1, product_major 6).
pub fn cop1_writer(accel: &AcceleratorConfig) -> Cop1Writer {
    let config = Config::new(
        accel.hw_macs_per_cc(),
        0,
        accel.hw_shram_size_kib(),
        accel.hw_product(),
    );
    let id = Id::new(1, 0, 0, 6, ARCH_VERSION);
    Cop1Writer::new(config.0, id.0)
}

/// The read-only region being built: 16-aligned pieces, identical pieces stored once.
#[derive(Default)]
struct ReadOnly {
    bytes: Vec<u8>,
    seen: HashMap<Vec<u8>, usize>,
    /// Compressed weight stream bytes (for reports).
    weight_bytes: usize,
}

impl ReadOnly {
    /// Appends `data` (or finds an identical earlier copy) and returns its offset.
    fn add(&mut self, data: &[u8]) -> usize {
        if let Some(&at) = self.seen.get(data) {
            return at;
        }
        let at = self.bytes.len().div_ceil(ALIGN) * ALIGN;
        self.bytes.resize(at, 0);
        self.bytes.extend_from_slice(data);
        let end = self.bytes.len().div_ceil(ALIGN) * ALIGN;
        self.bytes.resize(end, 0);
        self.seen.insert(data.to_vec(), at);
        at
    }
}

fn encode_weights(
    program: &Program,
    accel: &'static AcceleratorConfig,
    ro: &mut ReadOnly,
) -> Result<Vec<Option<WeightStreams>>> {
    program
        .ops
        .iter()
        .map(|op| {
            let (w, depthwise) = match &op.kind {
                NpuOpKind::Conv(w) => (w, false),
                NpuOpKind::Depthwise(w) => (w, true),
                _ => return Ok(None),
            };
            let block = op.block.as_ref().ok_or_else(|| {
                Error::Other(format!(
                    "{}: weights encoded before block selection",
                    op.name
                ))
            })?;
            let traversal = if depthwise {
                Traversal::Depthwise
            } else if block.part_kernel_first {
                Traversal::PartKernelFirst
            } else {
                Traversal::DepthFirst
            };
            let [o, kh, kw, i] = w.shape;
            let layout = WeightLayout {
                config: accel,
                traversal,
                ofm_block_depth: block.ofm_block[2] as u32,
                ifm_depth: i as u32,
                kernel_height: kh as u32,
                kernel_width: kw as u32,
                dilation_x: op.kernel.dilation_x as u32,
                dilation_y: op.kernel.dilation_y as u32,
                ifm_bits: op.ifm.dtype.bits() as u32,
            };
            let scales: Vec<ScaleEntry> = w
                .scales
                .iter()
                .map(|s| ScaleEntry {
                    bias: s.bias,
                    multiplier: s.scale,
                    shift: s.shift,
                })
                .collect();
            let encoded = encode_op(&w.values, &scales, &layout, &[0, o as u32])
                .map_err(|e| op_error(op, format!("weight encoding: {e}")))?;
            let base = ro.add(&encoded.data) as u64;
            ro.weight_bytes += encoded.weight_bytes;
            let stripe = encoded
                .stripes
                .first()
                .ok_or_else(|| op_error(op, "weight encoding produced no stream"))?;
            Ok(Some(WeightStreams {
                region: REGION_CONST,
                cores: stripe
                    .cores
                    .iter()
                    .map(|c| CoreStreams {
                        weight_addr: base + c.weight_offset as u64,
                        weight_len: c.weight_len as u64,
                        scale_addr: base + c.scale_offset as u64,
                        scale_len: c.scale_len as u64,
                    })
                    .collect(),
            }))
        })
        .collect()
}

fn op_error(op: &NpuOp, detail: impl Into<String>) -> Error {
    Error::Other(format!("{}: {}", op.name, detail.into()))
}

/// Buffers read and written by `op`.
fn op_buffers(op: &NpuOp) -> impl Iterator<Item = (usize, bool)> + '_ {
    let ifm2 = match &op.kind {
        NpuOpKind::Elementwise {
            ifm2: Some(super::npu_op::Operand2::Tensor(f)),
            ..
        } => Some((f.buffer, false)),
        _ => None,
    };
    let lut = op.activation.lut.map(|b| (b, false));
    [
        Some((op.ifm.buffer, false)),
        ifm2,
        lut,
        Some((op.ofm.buffer, true)),
    ]
    .into_iter()
    .flatten()
}

/// Gives every buffer a `(region, address)`: constants into the read-only region, feature maps
/// into the arena by liveness. Returns the placements and the arena size.
fn place_buffers(
    program: &Program,
    ro: &mut ReadOnly,
    keep_all: bool,
) -> Result<(Vec<(u8, u64)>, usize)> {
    let n_ops = program.ops.len();
    let mut first = vec![usize::MAX; program.buffers.len()];
    let mut last = vec![0usize; program.buffers.len()];
    for (i, op) in program.ops.iter().enumerate() {
        for (b, _) in op_buffers(op) {
            if b >= program.buffers.len() {
                return Err(op_error(
                    op,
                    format!(
                        "internal: refers to buffer {b} of {}",
                        program.buffers.len()
                    ),
                ));
            }
            first[b] = first[b].min(i);
            last[b] = last[b].max(i);
        }
    }
    let mut arena_ids = Vec::new();
    let mut arena = Vec::new();
    let mut placed = vec![(0u8, 0u64); program.buffers.len()];
    for (id, b) in program.buffers.iter().enumerate() {
        match &b.kind {
            BufferKind::Const(bytes) => {
                placed[id] = (REGION_CONST, ro.add(bytes) as u64);
            }
            BufferKind::Arena => {
                let (mut f, mut l) = (first[id], last[id]);
                match b.io {
                    // Inputs are written by the caller before the first op; outputs are read after
                    // the last.
                    Some(Io::Input(_)) => f = 0,
                    Some(Io::Output(_)) => l = n_ops,
                    None => {}
                }
                if f == usize::MAX || keep_all {
                    // Never touched by an op (an input that is also an output, say), or kept for
                    // inspection: live throughout.
                    f = 0;
                    l = n_ops;
                }
                arena_ids.push(id);
                arena.push(alloc::Buffer {
                    size: b.size,
                    first: f,
                    last: l.max(f),
                });
            }
        }
    }
    let plan = alloc::plan(&arena, ALIGN);
    for (k, &id) in arena_ids.iter().enumerate() {
        placed[id] = (REGION_ARENA, plan.offsets[k] as u64);
    }
    Ok((placed, plan.size))
}
