//! What the HTML report shows, derived from a compiled model and its source graph: the
//! estimate of every NPU operation with the resource that bounds it, the schedule (NPU
//! operations and CPU steps in execution order), and every buffer with where it lives and when.
//!
//! Nothing here is new accounting: cycles and bytes are the estimator's
//! ([`npu_build::ethos_u::perf`]) and the command stream's own registers; live ranges follow the
//! rule the arena allocator uses (`npu-build/src/ethos_u/compile.rs`, `arena_plan`), rebuilt from
//! the program because the compiled artifact does not keep the allocator's timeline.

use std::ops::Range;

use npu_build::error::Result;
use npu_build::ethos_u::npu_op::{BufferKind, Io};
use npu_build::ethos_u::perf::estimate_stream;
use npu_build::ethos_u::perf::model::NUM_MEMORIES;
use npu_build::ethos_u::perf::stream::{Event, decode};
use npu_build::ethos_u::{Compiled, Step};
use npu_build::ir::Graph;
use npu_build::target::Target;

/// Region of the arena (base pointer 1), as in the command stream.
/// Bytes of an `NPU_OP_*` command (a cmd0 word).
const OP_COMMAND_BYTES: usize = 4;

/// What limits an operation's time in the estimate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// The compute cycles are at least every memory's access cycles.
    Compute,
    /// The memory (index into [`Report::memory_names`]) with the most access cycles.
    Memory(usize),
}

/// One NPU operation (one `NPU_OP_*` of a command stream).
#[derive(Clone, Debug)]
pub struct OpRow {
    /// Index in [`Compiled::program`]'s operations.
    pub index: usize,
    /// Index of its step in [`Compiled::steps`].
    pub step: usize,
    /// The IR node it comes from.
    pub name: String,
    /// The estimator's operation class (`conv`, `depthwise`, `pool.max`, ...).
    pub kind: String,
    pub ofm: [u64; 3],
    pub ofm_block: [u64; 3],
    /// Estimated time: compute or the busiest memory, whichever is longer.
    pub cycles: u64,
    pub compute: u64,
    /// Cycles each memory is busy (same order as [`Report::memory_names`]).
    pub access: [u64; NUM_MEMORIES],
    pub bound: Bound,
    pub macs: u64,
    /// Encoded weight stream bytes (all cores), from the command stream's WEIGHT_LENGTH.
    pub weight_bytes: Option<u64>,
    /// Scale/bias stream bytes, from SCALE_LENGTH.
    pub scale_bytes: Option<u64>,
    /// The weights are read from a copy in the arena (DMA'd from flash before the operation).
    pub weights_in_arena: bool,
    /// Command-stream bytes from the previous `NPU_OP_*` through this one (register writes,
    /// DMAs and waits issued for it; the first operation also carries the stream's header).
    pub command_bytes: usize,
}

/// One step of the compiled model.
#[derive(Clone, Debug)]
pub enum StepRow {
    Npu {
        /// Program operations it runs.
        ops: Range<usize>,
        stream_bytes: usize,
        cycles: u64,
        time_ms: f64,
        dmas: usize,
        dma_bytes: u64,
    },
    Cpu {
        node: String,
        op: String,
        reason: String,
    },
}

/// One position of the arena's schedule: an NPU operation, or a CPU operator.
#[derive(Clone, Debug)]
pub struct Position {
    pub label: String,
    pub cpu: bool,
}

/// What a buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferRole {
    Input(usize),
    Output(usize),
    FeatureMap,
    /// A weight stream copied into the arena by DMA.
    WeightCopy,
    /// Read-only bytes (LUTs, constants) in region 0.
    ReadOnly,
}

/// One buffer of the program with its placement.
#[derive(Clone, Debug)]
pub struct BufferRow {
    pub name: String,
    pub size: usize,
    pub role: BufferRole,
    pub region: u8,
    pub addr: u64,
    /// First and last schedule position it is live at (arena buffers only).
    pub live: Option<(usize, usize)>,
}

/// Everything the page shows besides the key figures of the JSON report.
#[derive(Clone, Debug)]
pub struct Report {
    pub ops: Vec<OpRow>,
    pub steps: Vec<StepRow>,
    /// The estimate's memories (AXI0, AXI1, shared buffer) by the name of what is on them.
    pub memory_names: Vec<&'static str>,
    pub positions: Vec<Position>,
    pub buffers: Vec<BufferRow>,
    /// Live arena bytes at each position (buffer sizes before the allocator's alignment).
    pub live_bytes: Vec<u64>,
    /// The schedule position of each program operation.
    pub op_positions: Vec<Option<usize>>,
    /// Sum of the NPU steps' estimates (CPU steps are not estimated).
    pub cycles_estimate: u64,
    pub time_ms: f64,
    pub command_stream_bytes: usize,
}

/// An operation's weight and scale stream lengths and the weights' region, as its command
/// stream gives them.
type OpWeights = (Option<u64>, Option<u64>, Option<u8>);

/// Per-operation [`OpWeights`] of a command stream, in operation order.
fn stream_weights(stream: &[u8]) -> Result<Vec<OpWeights>> {
    Ok(decode(stream)?
        .into_iter()
        .filter_map(|e| match e {
            Event::Op(op) => Some((
                op.weights.map(|w| w.bytes),
                op.scales.map(|s| s.bytes),
                op.weights.map(|w| w.region),
            )),
            _ => None,
        })
        .collect())
}

impl Report {
    /// Derives the report of `c`, compiled from `graph` for `target`.
    pub fn new(c: &Compiled, graph: &Graph, target: &Target) -> Result<Report> {
        let mut ops = Vec::new();
        let mut steps = Vec::new();
        let mut memory_names = Vec::new();
        let mut cycles_estimate = 0u64;
        let mut time_ms = 0f64;
        let mut command_stream_bytes = 0usize;
        for (s, step) in c.steps.iter().enumerate() {
            match step {
                Step::Npu {
                    command_stream,
                    ops: range,
                } => {
                    let e = estimate_stream(command_stream, target)?;
                    let weights = stream_weights(command_stream)?;
                    if memory_names.is_empty() {
                        memory_names = e.memories.iter().map(|m| m.name).collect();
                    }
                    // One NPU_OP per program operation (the emitter writes exactly one each);
                    // if that ever changes the names fall back to the estimator's kind.
                    let named = e.ops.len() == range.len();
                    let mut prev_end = 0usize;
                    for (k, o) in e.ops.iter().enumerate() {
                        let index = range.start + k;
                        let name = if named {
                            c.program.ops[index].name.clone()
                        } else {
                            format!("{} #{k}", o.kind)
                        };
                        let worst = (0..NUM_MEMORIES).max_by_key(|&m| (o.cost.access[m], m));
                        let bound = match worst {
                            Some(m) if o.cost.access[m] > o.cost.compute => Bound::Memory(m),
                            _ => Bound::Compute,
                        };
                        let (weight_bytes, scale_bytes, region) =
                            weights.get(k).copied().unwrap_or((None, None, None));
                        let end = o.offset + OP_COMMAND_BYTES;
                        ops.push(OpRow {
                            index,
                            step: s,
                            name,
                            kind: o.kind.clone(),
                            ofm: o.ofm,
                            ofm_block: o.ofm_block,
                            cycles: o.cost.cycles(),
                            compute: o.cost.compute,
                            access: o.cost.access,
                            bound,
                            macs: o.cost.macs,
                            weight_bytes,
                            scale_bytes,
                            weights_in_arena: region.is_some_and(|r| r != 0),
                            command_bytes: end.saturating_sub(prev_end),
                        });
                        prev_end = end;
                    }
                    // Same order of summation as the JSON report, so the totals are identical.
                    cycles_estimate += e.total_cycles;
                    time_ms += e.time_ms();
                    command_stream_bytes += command_stream.len();
                    steps.push(StepRow::Npu {
                        ops: range.clone(),
                        stream_bytes: command_stream.len(),
                        cycles: e.total_cycles,
                        time_ms: e.time_ms(),
                        dmas: e.dmas.len(),
                        dma_bytes: e.dmas.iter().map(|d| d.bytes).sum(),
                    });
                }
                Step::Cpu(cpu) => steps.push(StepRow::Cpu {
                    node: cpu.node.clone(),
                    op: cpu.op.clone(),
                    reason: cpu.reason.clone(),
                }),
            }
        }
        let (positions, buffers, live_bytes, op_positions) = schedule(c, graph, &ops);
        Ok(Report {
            ops,
            steps,
            memory_names,
            positions,
            buffers,
            live_bytes,
            op_positions,
            cycles_estimate,
            time_ms,
            command_stream_bytes,
        })
    }

    /// The name of what bounds `op`: `compute` or a memory name.
    pub fn bound_name(&self, bound: Bound) -> &'static str {
        match bound {
            Bound::Compute => "compute",
            Bound::Memory(m) => self.memory_names.get(m).copied().unwrap_or("memory"),
        }
    }

    /// Largest live arena bytes over the schedule.
    pub fn peak_live(&self) -> u64 {
        self.live_bytes.iter().copied().max().unwrap_or(0)
    }
}

/// The schedule positions, every buffer with its live range, and the live arena bytes per
/// position.
///
/// Positions follow the allocator's timeline: the IR operators in graph order, each NPU
/// operator contributing its program operations and each CPU operator one position (with the
/// arena buffers of its tensors). Weight copies are live from the previous operation of the
/// same command stream through the next one, as the allocator planned them.
fn schedule(
    c: &Compiled,
    graph: &Graph,
    ops: &[OpRow],
) -> (Vec<Position>, Vec<BufferRow>, Vec<u64>, Vec<Option<usize>>) {
    let program = &c.program;
    let mut positions: Vec<Position> = Vec::new();
    let mut uses: Vec<Vec<usize>> = Vec::new();
    // Position of each program operation.
    let mut npu_pos = vec![None; program.ops.len()];
    let mut steps = c.steps.iter().peekable();
    let mut i = 0;
    while i < graph.ops.len() || steps.peek().is_some() {
        let cpu_reason = c.assignment.get(i).and_then(|a| a.cpu_reason.as_ref());
        if let (Some(_), Some(op)) = (cpu_reason, graph.ops.get(i)) {
            // One position per CPU operator, however many CPU steps it became.
            while steps
                .next_if(|s| matches!(s, Step::Cpu(cpu) if cpu.node == op.name))
                .is_some()
            {}
            let mut u = Vec::new();
            for &t in op.inputs.iter().chain(&op.outputs) {
                if let Some(Some(p)) = program.tensor_places.get(t.index()) {
                    u.push(p.buffer.index());
                }
            }
            positions.push(Position {
                label: format!("CPU {} ({})", op.name, op.kind.name()),
                cpu: true,
            });
            uses.push(u);
            i += 1;
            continue;
        }
        // A maximal run of NPU operators: the next NPU step, if it has one (a run of views
        // only has none).
        while i < graph.ops.len() && c.assignment.get(i).is_some_and(|a| a.cpu_reason.is_none()) {
            i += 1;
        }
        if let Some(Step::Npu { ops: range, .. }) = steps.next_if(|s| matches!(s, Step::Npu { .. }))
        {
            for j in range.clone() {
                let Some(op) = program.ops.get(j) else {
                    continue;
                };
                npu_pos[j] = Some(positions.len());
                positions.push(Position {
                    label: format!("#{j} {}", op.name),
                    cpu: false,
                });
                uses.push(op.buffers().map(|b| b.index()).collect());
            }
        } else if i >= graph.ops.len() {
            // Steps left that match no operator (not expected): stop rather than loop.
            break;
        }
    }

    // Weight copies: buffers named after their operation by the allocator, matched to the
    // operations whose stream reads its weights from the arena.
    let referenced: std::collections::HashSet<usize> = uses.iter().flatten().copied().collect();
    let mut taken = vec![false; program.buffers.len()];
    for row in ops.iter().filter(|r| r.weights_in_arena) {
        let Some(pos) = npu_pos.get(row.index).copied().flatten() else {
            continue;
        };
        let want = format!("weights of {}", row.name);
        let len = row.weight_bytes.unwrap_or(0) + row.scale_bytes.unwrap_or(0);
        let candidates = |exact: bool| {
            program.buffers.iter().enumerate().position(|(id, b)| {
                !taken[id]
                    && !referenced.contains(&id)
                    && b.kind == BufferKind::Arena
                    && b.name == want
                    && (!exact || b.size as u64 == len)
            })
        };
        let Some(id) = candidates(true).or_else(|| candidates(false)) else {
            continue;
        };
        taken[id] = true;
        let mut u = vec![pos];
        if let Some(p) = row.index.checked_sub(1).and_then(|p| npu_pos[p])
            && p + 1 == pos
        {
            u.push(p);
        }
        if let Some(n) = npu_pos.get(row.index + 1).copied().flatten()
            && n == pos + 1
        {
            u.push(n);
        }
        for p in u {
            uses[p].push(id);
        }
    }

    let n = positions.len();
    let mut first = vec![usize::MAX; program.buffers.len()];
    let mut last = vec![0usize; program.buffers.len()];
    for (p, u) in uses.iter().enumerate() {
        for &b in u {
            if b < first.len() {
                first[b] = first[b].min(p);
                last[b] = last[b].max(p);
            }
        }
    }
    let mut live_bytes = vec![0u64; n];
    // Buffers the compiler made share bytes (an output written over its input) count once.
    let mut counted: Vec<std::collections::HashSet<(u8, u64)>> = vec![Default::default(); n];
    let mut buffers = Vec::with_capacity(program.buffers.len());
    for (id, b) in program.buffers.iter().enumerate() {
        let (region, addr) = c.buffer_addrs.get(id).copied().unwrap_or((0, 0));
        let role = match (&b.kind, b.io) {
            (BufferKind::Const(_), _) => BufferRole::ReadOnly,
            (_, Some(Io::Input(k))) => BufferRole::Input(k),
            (_, Some(Io::Output(k))) => BufferRole::Output(k),
            _ if taken[id] => BufferRole::WeightCopy,
            _ => BufferRole::FeatureMap,
        };
        let live = match role {
            BufferRole::ReadOnly => None,
            _ if n == 0 => None,
            _ => {
                // The allocator's rule: inputs are written before the first position, outputs
                // read after the last; a buffer no position touches is live throughout.
                let (mut f, mut l) = (first[id], last[id]);
                match role {
                    BufferRole::Input(_) => f = 0,
                    BufferRole::Output(_) => l = n - 1,
                    _ => {}
                }
                if f == usize::MAX {
                    f = 0;
                    l = n - 1;
                }
                let l = l.max(f).min(n - 1);
                for (v, seen) in live_bytes[f..=l].iter_mut().zip(&mut counted[f..=l]) {
                    // Zero-size buffers (fused away) hold no bytes and must not hide a real one.
                    if b.size > 0 && seen.insert((region, addr)) {
                        *v += b.size as u64;
                    }
                }
                Some((f, l))
            }
        };
        buffers.push(BufferRow {
            name: b.name.clone(),
            size: b.size,
            role,
            region,
            addr,
            live,
        });
    }
    (positions, buffers, live_bytes, npu_pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The report's live bytes never exceed the arena the compiler planned, and where the plan
    /// meets the liveness bound (buffers that share bytes counted once, fused-away buffers not
    /// at all) they reach it: op_prelu (outputs written over inputs), net_unet (producers
    /// written straight into concatenations), digits.
    #[test]
    fn live_bytes_match_the_arena() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
        let target = Target::for_accelerator("ethos-u55-128").expect("target");
        for name in ["op_prelu", "net_unet", "digits"] {
            let graph = npu_build::import::load(&root.join(name).join(format!("{name}.tflite")))
                .expect("import");
            let c = npu_build::ethos_u::compile(&graph, target.accelerator).expect("compile");
            let r = Report::new(&c, &graph, &target).expect("report");
            assert!(r.peak_live() <= c.arena_size as u64, "{name}");
            assert_eq!(r.peak_live(), c.arena_size as u64, "{name}");
        }
    }
}
