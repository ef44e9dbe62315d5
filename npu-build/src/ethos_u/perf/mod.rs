//! Performance estimate of an Ethos-U55/U65 command stream: cycles, memory traffic, time.
//!
//! Ethos-U85 streams have their own decoder and cost model in [`u85`] (same [`Estimate`]).
//!
//! We cannot time silicon here, so speed is estimated with a cost model, checked against
//! Arm's: the model is the one Vela 5.2.0 uses to report `cycles_total` (Regor's
//! `EthosU55Performance` and `NetworkPerformance`), and `tests/tests/perf_vela.rs` holds the
//! estimate of every Vela fixture stream (with Vela's accounting, [`Options::VELA`]) within 20%
//! of Vela's own `cycles_total`. Because it reads only the command stream, the same model times
//! Vela's streams and ours.
//!
//! # The model
//!
//! **Per operation** ([`model::op_cost`]), from the register state at its `NPU_OP_*`:
//! - *MAC cycles per OFM block*: the block (`OFM_BLK_*`) is split in micro-blocks of the
//!   configuration; each 8x8 sub-kernel costs `max(32*ublock_depth/8, 4*ublocks_hw)` cycles
//!   per kernel step and micro-block depth (depthwise: steps of 4 kernel elements, scaled by
//!   the IFM element size; part-kernel-first convolutions: steps of 4 elements per 8 IFM
//!   channels; pooling: `max(4, kernel)` per micro-block, times the IFM bits / 2), plus
//!   pipeline bubbles for one-micro-block-wide blocks, times the IFM depth passes
//!   (convolutions), divided by the cores.
//! - *Output (AO) cycles per block*: cycles per output element from the configuration's table
//!   (`output_cycles_per_elem`, chosen by operation, accumulator and element size;
//!   `activation_cycles_per_elem` for a LUT or clipping activation), or the scale/bias fetch
//!   latency if slower.
//! - *Command issue limit*: a quarter of (MAC + AO + the IFM/OFM block transfer imbalance).
//! - Blocks run MAC-bound or AO-bound (the slower one per block times the block count, plus one
//!   block of the other); the first IFM block fetch and last OFM block write are exposed
//!   (memory latency + block bytes / bandwidth).
//! - Elementwise operations: the larger of the AO cycles and the command issue limit
//!   (block transfer cycles per element + AO cycles per element) / 4, per element.
//! - *Memory traffic*: IFM elements re-fetched per OFM block and per sub-kernel, OFM elements,
//!   weights and scales re-read per OFM block position; feature-map bytes are scaled up when
//!   bursts are shorter than the memory's burst length (NHWC slices, narrow blocks). Each
//!   region's bytes go to the memory the memory mode puts it in (region 0 constants, 1 arena,
//!   2 cache), and cost bytes / bandwidth cycles there.
//! - The operation takes the longer of its compute cycles and its busiest memory's cycles.
//!
//! **DMAs** ([`model::dma_cost`]) take the longer of reading the source and writing the
//! destination (bytes / bandwidth + latency); the shared buffer (LUT destination) moves one
//! byte per cycle.
//!
//! **Overlap** ([`estimate_events`]): the command processor walks the stream in order.
//! NPU operations run one after another; DMAs run one after another on the DMA engine,
//! concurrently with the NPU operations. A DMA starts when the command processor reaches it:
//! after the preceding NPU operation has *started* (so weights for the next operation stream
//! in while the current one computes). `NPU_OP_DMA_WAIT` / `NPU_OP_KERNEL_WAIT` hold the
//! command processor until enough DMAs / operations have finished, and so does a DMA while
//! the hardware's DMA queue is full (`max_outstanding_dma`: 1 on Ethos-U55, 2 on Ethos-U65). The total is the time the
//! last operation or DMA ends; time = total / core clock.
//!
//! Bandwidths, latencies and burst lengths are the target's ([`crate::target`], vela.ini
//! values): AXI width (8 bytes U55, 16 bytes U65) x ports x memory clock scale.
//!
//! # Differences from Vela's own estimate
//!
//! - *Granularity*: Vela costs each of its scheduler operations once, with its full shape.
//!   The stream may split one into several `NPU_OP`s. Runs of depth slices (weight
//!   double-buffering) are recognised and costed once ([`group`]); other splits (cascade
//!   stripes interleaved with other operations, tiles) are costed per `NPU_OP`, each paying
//!   its own first-block and last-block exposure.
//! - *Weight DMAs*: Vela charges buffered weights to the operation that uses them and subtracts
//!   the previous operation's run time ("slack") from the transfer, and lets an operation's
//!   memory time hide its wait for weights; here the DMAs run on the DMA engine, overlap as
//!   the stream's waits allow, and an operation cannot start before its weights arrive.
//! - *LUT loads*: timed by default; Vela 5.2.0 leaves out the load of a LUT fused into an
//!   operation as its activation ([`Options::VELA`] does the same).
//! - *Bursts*: as in Vela, a feature map's burst length is judged from the operation's own view
//!   of it, so writing 16 of every 32 channels of an NHWC tensor (a concatenation) counts as
//!   contiguous although the bus sees 16-byte pieces.
//!
//! Left out, by both: bandwidth shared between a DMA and the NPU on the same memory, fetching
//! the command stream, the weight decoder's throughput, `BLOCKDEP` overlap between different
//! operations, AXI outstanding-transaction limits, DRAM page effects, and the CPU.

pub mod group;
pub mod model;
pub mod stream;
pub mod u85;

use serde_json::{Value as Json, json};

use self::model::{DmaCost, Memories, NUM_MEMORIES, OpCost, dma_cost, op_cost};
use self::stream::{DmaEnd, Event, NpuOperation, decode};
use crate::error::Result;
use crate::ethos_u::Compiled;
use crate::target::Target;

/// One NPU operation's estimate.
#[derive(Clone, Debug, PartialEq)]
pub struct OpEstimate {
    /// Byte offset of the `NPU_OP_*` command in the stream.
    pub offset: usize,
    /// `conv`, `depthwise`, `pool.max`, `elementwise.add`, ...
    pub kind: String,
    /// OFM `[height, width, depth]`.
    pub ofm: [u64; 3],
    /// OFM block `[height, width, depth]`.
    pub ofm_block: [u64; 3],
    pub cost: OpCost,
    /// When it starts and ends on the timeline (cycles).
    pub start: u64,
    pub end: u64,
}

/// One DMA's estimate.
#[derive(Clone, Debug, PartialEq)]
pub struct DmaEstimate {
    pub offset: usize,
    pub bytes: u64,
    /// Loads the shared buffer (an activation lookup table).
    pub lut: bool,
    pub cost: DmaCost,
    pub start: u64,
    pub end: u64,
}

/// Totals of one memory.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryUse {
    /// `Sram`, `Dram`, `OffChipFlash`, `Shram`, ...
    pub name: &'static str,
    /// Bytes read and written, with burst inefficiency, by NPU operations and DMAs.
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Cycles NPU operations keep it busy.
    pub access_cycles: u64,
}

/// The estimate of a whole command stream.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    /// `accelerator / system config / memory mode`.
    pub target: String,
    /// NPU core clock (Hz).
    pub clock_hz: f64,
    pub ops: Vec<OpEstimate>,
    pub dmas: Vec<DmaEstimate>,
    /// Multiply-accumulates of the convolution, depthwise and pooling operations.
    pub macs: u64,
    /// Sum of the operations' compute cycles (Vela's `cycles_npu` counterpart).
    pub compute_cycles: u64,
    /// Sum of the operations' times (compute or memory, whichever is longer).
    pub op_cycles: u64,
    /// Sum of the DMAs' times.
    pub dma_cycles: u64,
    /// Cycles waiting for DMAs (the command processor held by `NPU_OP_DMA_WAIT` while the NPU
    /// is idle).
    pub stall_cycles: u64,
    /// End of the last operation or DMA: the estimated run time in cycles.
    pub total_cycles: u64,
    /// Per memory: AXI0, AXI1, shared buffer.
    pub memories: Vec<MemoryUse>,
}

impl Estimate {
    /// Estimated run time in milliseconds at the core clock.
    pub fn time_ms(&self) -> f64 {
        if self.clock_hz > 0.0 {
            self.total_cycles as f64 / self.clock_hz * 1e3
        } else {
            0.0
        }
    }

    /// The estimate as JSON: totals, per-memory traffic and, with `per_op`, one row per
    /// operation and DMA.
    pub fn to_json(&self, per_op: bool) -> Json {
        let memories: Vec<Json> = self
            .memories
            .iter()
            .map(|m| {
                json!({
                    "name": m.name,
                    "bytes_read": m.bytes_read,
                    "bytes_written": m.bytes_written,
                    "access_cycles": m.access_cycles,
                })
            })
            .collect();
        let mut v = json!({
            "target": self.target,
            "cycles_estimate": self.total_cycles,
            "time_ms": self.time_ms(),
            "compute_cycles": self.compute_cycles,
            "op_cycles": self.op_cycles,
            "dma_cycles": self.dma_cycles,
            "stall_cycles": self.stall_cycles,
            "macs": self.macs,
            "npu_ops": self.ops.len(),
            "dmas": self.dmas.len(),
            "memories": memories,
        });
        if per_op {
            let ops: Vec<Json> = self
                .ops
                .iter()
                .map(|o| {
                    json!({
                        "offset": o.offset,
                        "kind": o.kind,
                        "ofm": o.ofm,
                        "ofm_block": o.ofm_block,
                        "macs": o.cost.macs,
                        "compute_cycles": o.cost.compute,
                        "mac_cycles_per_block": o.cost.mac_per_block,
                        "ao_cycles": o.cost.ao,
                        "blocks": o.cost.blocks,
                        "access_cycles": o.cost.access,
                        "bytes_read": o.cost.read,
                        "bytes_written": o.cost.written,
                        "cycles": o.cost.cycles(),
                        "start": o.start,
                        "end": o.end,
                    })
                })
                .collect();
            let dmas: Vec<Json> = self
                .dmas
                .iter()
                .map(|d| {
                    json!({
                        "offset": d.offset,
                        "bytes": d.bytes,
                        "lut": d.lut,
                        "cycles": d.cost.cycles,
                        "start": d.start,
                        "end": d.end,
                    })
                })
                .collect();
            v["ops"] = Json::Array(ops);
            v["dma_ops"] = Json::Array(dmas);
        }
        v
    }
}

/// Choices where the hardware and Vela's accounting differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Time the DMAs that load activation lookup tables into the shared buffer (default).
    /// Vela 5.2.0 does not charge the load of a LUT fused into an operation as its activation
    /// (Regor looks for the LUT on the operation, but it hangs off the fused activation).
    pub lut_loads: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { lut_loads: true }
    }
}

impl Options {
    /// Vela's accounting: LUT loads are free.
    pub const VELA: Options = Options { lut_loads: false };
}

/// Estimates a command stream (raw or a COP1 payload) on `target`.
pub fn estimate_stream(stream: &[u8], target: &Target) -> Result<Estimate> {
    estimate_stream_with(stream, target, Options::default())
}

/// [`estimate_stream`] with explicit [`Options`].
pub fn estimate_stream_with(stream: &[u8], target: &Target, options: Options) -> Result<Estimate> {
    Ok(estimate_events(&decode(stream)?, target, options))
}

/// Estimates each NPU command stream of a compiled model on `target`, in execution order (one
/// for a model entirely on the NPU; CPU steps are not estimated). Its accelerator should be the
/// one the model was compiled for; the system configuration and memory mode set the memory
/// timing.
pub fn estimate_compiled(compiled: &Compiled, target: &Target) -> Result<Vec<Estimate>> {
    compiled
        .steps
        .iter()
        .filter_map(|s| match s {
            crate::ethos_u::Step::Npu { command_stream, .. } => Some(command_stream),
            crate::ethos_u::Step::Cpu(_) => None,
        })
        .map(|cs| estimate_stream(cs, target))
        .collect()
}

/// The estimated NPU cycles of a compiled model: [`estimate_compiled`]'s streams summed.
pub fn npu_cycles(compiled: &Compiled, target: &Target) -> Result<u64> {
    Ok(estimate_compiled(compiled, target)?
        .iter()
        .map(|e| e.total_cycles)
        .sum())
}

/// The part of `value` that the slices up to `upto` of `whole` get, minus what the slices up
/// to `before` got (so the parts of a run sum to the whole exactly).
fn part(value: u64, before: u64, upto: u64, whole: u64) -> u64 {
    let at = |c: u64| (u128::from(value) * u128::from(c) / u128::from(whole.max(1))) as u64;
    at(upto).saturating_sub(at(before))
}

/// The cost of every NPU operation: runs of depth slices are costed once, merged, and shared
/// by OFM depth ([`group`]).
fn op_costs(ops: &[&NpuOperation], target: &Target, mems: &Memories) -> Vec<OpCost> {
    let mut costs = Vec::with_capacity(ops.len());
    for run in group::runs(ops) {
        let slices = &ops[run];
        let Some(merged) = group::merge(slices) else {
            continue;
        };
        let whole = op_cost(&merged, target.accelerator, mems);
        if slices.len() == 1 {
            costs.push(whole);
            continue;
        }
        let total_depth = merged.ofm.shape[2];
        let mut done = 0;
        for s in slices {
            let upto = done + s.ofm.shape[2];
            let p = |v: u64| part(v, done, upto, total_depth);
            costs.push(OpCost {
                compute: p(whole.compute),
                read: whole.read.map(p),
                written: whole.written.map(p),
                access: whole.access.map(p),
                macs: s.macs(),
                ..whole
            });
            done = upto;
        }
    }
    costs
}

/// When at most `k` of the jobs ending at `ends` are still running, from `now` on. The jobs of
/// one engine run one after another, so `ends` never decreases and the pending ones are its
/// tail.
pub(crate) fn wait_until(ends: &[u64], now: u64, k: usize) -> u64 {
    match ends.len().checked_sub(k + 1).and_then(|i| ends.get(i)) {
        Some(&end) if end > now => end,
        _ => now,
    }
}

/// Places decoded events on the NPU/DMA timeline (see the module documentation).
pub fn estimate_events(events: &[Event], target: &Target, options: Options) -> Estimate {
    let mems = Memories::new(target);
    let ops: Vec<&NpuOperation> = events
        .iter()
        .filter_map(|e| match e {
            Event::Op(op) => Some(op.as_ref()),
            _ => None,
        })
        .collect();
    let mut costs = op_costs(&ops, target, &mems).into_iter();
    let steps = events
        .iter()
        .map(|event| match event {
            Event::Op(op) => Step::Op(
                OpEstimate::unplaced(
                    op.offset,
                    op.class.name(),
                    op.ofm.shape,
                    op.ofm_block,
                    costs.next().unwrap_or_default(),
                ),
                op.is_standalone_lut(),
            ),
            Event::Dma(dma) => Step::Dma(DmaEstimate::unplaced(
                dma.offset,
                dma.bytes,
                dma.dst == DmaEnd::Shram,
                dma_cost(dma, &mems),
            )),
            Event::DmaWait(k) => Step::DmaWait(*k),
            Event::KernelWait(k) => Step::KernelWait(*k),
        })
        .collect();
    let est = Estimate::empty(
        target.describe(),
        target.system_config.core_clock_hz,
        mems.list.iter().map(|m| m.name),
    );
    let queue = target.accelerator.max_outstanding_dma.max(1) as usize;
    timeline(steps, est, queue, options)
}

/// What the command processor does, as the timeline sees it: each architecture's decoder and
/// cost model turn their events into these, in stream order, and [`timeline`] places them.
pub(crate) enum Step {
    /// An NPU operation with its cost (the timeline sets `start` and `end`), and whether it is
    /// a stand-alone LUT operation (whose table load Vela charges).
    Op(OpEstimate, bool),
    /// A DMA with its cost (the timeline sets `start` and `end`).
    Dma(DmaEstimate),
    /// `NPU_OP_DMA_WAIT k`: wait until at most `k` DMAs are outstanding.
    DmaWait(u16),
    /// `NPU_OP_KERNEL_WAIT n`: wait until at most `n` operations are outstanding.
    KernelWait(u16),
}

impl OpEstimate {
    /// An operation's estimate before the timeline places it.
    pub(crate) fn unplaced(
        offset: usize,
        kind: String,
        ofm: [u64; 3],
        ofm_block: [u64; 3],
        cost: OpCost,
    ) -> Self {
        OpEstimate {
            offset,
            kind,
            ofm,
            ofm_block,
            cost,
            start: 0,
            end: 0,
        }
    }
}

impl DmaEstimate {
    /// A DMA's estimate before the timeline places it.
    pub(crate) fn unplaced(offset: usize, bytes: u64, lut: bool, cost: DmaCost) -> Self {
        DmaEstimate {
            offset,
            bytes,
            lut,
            cost,
            start: 0,
            end: 0,
        }
    }
}

impl Estimate {
    /// An estimate with nothing placed yet, over the memories named `memories`.
    pub(crate) fn empty(
        target: String,
        clock_hz: f64,
        memories: impl IntoIterator<Item = &'static str>,
    ) -> Self {
        Estimate {
            target,
            clock_hz,
            ops: Vec::new(),
            dmas: Vec::new(),
            macs: 0,
            compute_cycles: 0,
            op_cycles: 0,
            dma_cycles: 0,
            stall_cycles: 0,
            total_cycles: 0,
            memories: memories
                .into_iter()
                .map(|name| MemoryUse {
                    name,
                    bytes_read: 0,
                    bytes_written: 0,
                    access_cycles: 0,
                })
                .collect(),
        }
    }

    fn add_bytes(&mut self, read: &[u64; NUM_MEMORIES], written: &[u64; NUM_MEMORIES]) {
        for (m, u) in self.memories.iter_mut().enumerate() {
            u.bytes_read = u.bytes_read.saturating_add(read[m]);
            u.bytes_written = u.bytes_written.saturating_add(written[m]);
        }
    }
}

/// Places `steps` on the NPU/DMA timeline of `est` (see the module documentation), with a DMA
/// queue of `queue` (the accelerator's `max_outstanding_dma`), and totals them.
pub(crate) fn timeline(
    steps: Vec<Step>,
    mut est: Estimate,
    queue: usize,
    options: Options,
) -> Estimate {
    // Vela charges the load of a stand-alone LUT operation's table (the table is an input of
    // that operation), unlike a LUT fused as another operation's activation: per step, whether
    // the next operation is a stand-alone LUT operation.
    let mut next_is_lut = vec![false; steps.len()];
    let mut upcoming = false;
    for (i, step) in steps.iter().enumerate().rev() {
        if let Step::Op(_, standalone_lut) = step {
            upcoming = *standalone_lut;
        }
        next_is_lut[i] = upcoming;
    }
    let mut cp: u64 = 0; // command processor
    let mut npu_free: u64 = 0;
    let mut dma_free: u64 = 0;
    let mut op_ends: Vec<u64> = Vec::new();
    let mut dma_ends: Vec<u64> = Vec::new();
    for (step, next_is_lut) in steps.into_iter().zip(next_is_lut) {
        match step {
            Step::Op(mut op, _) => {
                let cost = &op.cost;
                let start = cp.max(npu_free);
                let end = start.saturating_add(cost.cycles());
                npu_free = end;
                cp = start;
                op_ends.push(end);
                est.macs = est.macs.saturating_add(cost.macs);
                est.compute_cycles = est.compute_cycles.saturating_add(cost.compute);
                est.op_cycles = est.op_cycles.saturating_add(cost.cycles());
                est.add_bytes(&cost.read, &cost.written);
                for (u, a) in est.memories.iter_mut().zip(cost.access) {
                    u.access_cycles = u.access_cycles.saturating_add(a);
                }
                op.start = start;
                op.end = end;
                est.ops.push(op);
            }
            Step::Dma(mut dma) => {
                if dma.lut && !options.lut_loads && !next_is_lut {
                    dma.cost.cycles = 0;
                }
                // The hardware queues `max_outstanding_dma` DMAs; with the queue full the
                // command processor waits for the oldest before it can start another.
                cp = wait_until(&dma_ends, cp, queue.max(1) - 1);
                let start = cp.max(dma_free);
                let end = start.saturating_add(dma.cost.cycles);
                dma_free = end;
                dma_ends.push(end);
                est.dma_cycles = est.dma_cycles.saturating_add(dma.cost.cycles);
                est.add_bytes(&dma.cost.read, &dma.cost.written);
                dma.start = start;
                dma.end = end;
                est.dmas.push(dma);
            }
            Step::DmaWait(k) => {
                let t = wait_until(&dma_ends, cp, usize::from(k));
                // Time the NPU sits idle because of this wait.
                est.stall_cycles = est
                    .stall_cycles
                    .saturating_add(t.saturating_sub(cp.max(npu_free)));
                cp = t;
            }
            Step::KernelWait(k) => {
                cp = wait_until(&op_ends, cp, usize::from(k));
            }
        }
    }
    est.total_cycles = cp.max(npu_free).max(dma_free);
    est
}
