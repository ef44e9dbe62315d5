//! Weight prefetch: the weights of memory-bound late layers DMA'd into the arena while
//! earlier, compute-bound operations run.
//!
//! An operation whose OFM is one block reads its weights once, so a copy made just before it
//! only moves the flash reads to the DMA (`plan_weight_copies` makes none). But the flash is
//! idle while the compute-bound middle of a network runs, and the arena has room there: the
//! feature maps have shrunk from the peak it was sized for. MobileNetV2's layers from
//! `block_13_project` on read 2.9 MB of weights at 1 byte/cycle (ethos-u55-128, Shared_Sram),
//! and wait for every byte.
//!
//! The plan works on the estimate of the schedule as emitted. Each operation leaves the DMA
//! engine a window: its time minus its own reads of the read-only memory (the flash is one
//! port: a DMA and an operation reading it share its bandwidth, which the estimator does not
//! model, so the plan does not count on it) minus the DMAs already running during it. The
//! readers whose time is set by their flash reads are taken last first; each one's copy is
//! cut into pieces that fill those windows backwards from the reader, one piece per
//! operation, issued after that operation's kernel command, so no piece holds the command
//! processor (the Ethos-U55 queues one DMA). The copy lives in the arena from its first piece
//! through the operation after its reader, and is made only where that keeps the arena within
//! the allowance weight copies have. The streams are then emitted again and estimated; the plan
//! is kept only if the estimate is lower.

use super::compile::REGION_ARENA;
use super::compile::{Laid, Schedule, arena_plan, light_program};
use super::copy_lead::step_estimates;
use super::npu_op::{Buffer, BufferId, BufferKind};
use super::perf::model::{Memories, weight_copy_cycles};
use crate::error::Result;
use crate::target::Target;

/// Bytes of the smallest piece worth its DMA's latency and commands.
const MIN_PIECE: u64 = 1024;

/// A reader gains less than this many cycles from its copy: left alone.
const MIN_GAIN: u64 = 2_000;

/// One prefetched copy.
pub(super) struct Prefetch {
    /// The operation reading the copy.
    pub reader: usize,
    /// Bytes of its weight streams.
    pub len: u64,
    /// The copy's DMAs in byte order: (lead, bytes), each issued right after the kernel
    /// command of the operation `lead` places before the reader.
    pub pieces: Vec<(usize, u64)>,
    /// Timeline positions the copy is live at.
    pub live: Vec<usize>,
}

/// What the operations of one command stream leave the DMA engine, from an estimate.
struct Windows {
    /// Per program operation: its command stream (index of the NPU step), if estimated.
    stream: Vec<Option<usize>>,
    /// Cycles of DMA already running during each operation.
    busy: Vec<u64>,
    /// Each operation's time less its own reads of the read-only memory.
    own: Vec<u64>,
    /// Cycles each operation would take with its weights in the arena.
    with_copy: Vec<u64>,
    /// Cycles each operation takes now.
    now: Vec<u64>,
}

/// The prefetches that fit `limit` bytes of arena, for the schedule `laid` of `layout`
/// (buffers live as `timeline` says). Empty where the read-only memory is also the arena's
/// (nothing to gain) or nothing qualifies.
///
/// The readers are served last first, each from the windows nearest before it: every copy
/// arrives as late as the DMA engine allows, so it holds the arena for the shortest time.
/// The windows of the readers themselves are those they will have with their copies (shorter,
/// and not reading the flash); a reader that gets no copy (its pieces reach too far back for
/// the arena) had its window counted wrongly, so the plan is made again without it.
pub(super) fn plan(
    layout: &Schedule<'_>,
    timeline: &[Vec<BufferId>],
    laid: &Laid,
    target: &Target,
    limit: usize,
) -> Result<Vec<Prefetch>> {
    let mems = Memories::new(target);
    let (flash, arena) = (mems.region[0], mems.region[1]);
    if flash == arena {
        return Ok(Vec::new());
    }
    let program = layout.program;
    let n = program.ops.len();
    let Some(w) = windows(laid, target, n, &mems)? else {
        return Ok(Vec::new());
    };
    // Cycles of a DMA of `bytes` from the read-only region into the arena.
    let transfer = |bytes: u64| weight_copy_cycles(&mems, REGION_ARENA, bytes);
    let latency = transfer(0);
    let per_byte = transfer(1 << 20).saturating_sub(latency) as f64 / f64::from(1 << 20);
    if per_byte <= 0.0 {
        return Ok(Vec::new());
    }
    let mut chosen: Vec<bool> = (0..n)
        .map(|j| {
            layout.copies[j].is_none()
                && w.stream[j].is_some()
                && matches!(layout.pieces.get(j), Some(Some(_)))
                && w.now[j].saturating_sub(w.with_copy[j]) >= MIN_GAIN.max(latency)
        })
        .collect();
    let pos = layout.npu_pos;
    let same_stream = |k: usize| w.stream[k] == w.stream[k + 1] && pos[k] + 1 == pos[k + 1];
    loop {
        let mut free: Vec<u64> = (0..n)
            .map(|j| if chosen[j] { w.with_copy[j] } else { w.own[j] }.saturating_sub(w.busy[j]))
            .collect();
        let mut light = light_program(program);
        let mut timeline = timeline.to_vec();
        let mut out = Vec::new();
        let mut dropped = false;
        for j in (0..n).rev() {
            if !chosen[j] {
                continue;
            }
            let Some(&Some((_, len))) = layout.pieces.get(j) else {
                continue;
            };
            // Pieces backwards from the reader through the operations of its command stream.
            let mut pieces: Vec<(usize, u64)> = Vec::new();
            let mut left = len;
            let mut k = j;
            while left > 0 && k > 0 && same_stream(k - 1) {
                k -= 1;
                let room = free[k].saturating_sub(latency);
                let bytes = ((room as f64 / per_byte) as u64 / 16 * 16).min(left);
                if bytes >= MIN_PIECE.min(left) && bytes > 0 {
                    pieces.push((j - k, bytes));
                    left -= bytes;
                }
            }
            let fits = left == 0 && !pieces.is_empty() && {
                let first = j - pieces.iter().map(|p| p.0).max().unwrap_or(1);
                let mut live: Vec<usize> = (first..=j).map(|o| pos[o]).collect();
                if j + 1 < n && same_stream(j) {
                    live.push(pos[j + 1]);
                }
                let id = BufferId(light.buffers.len());
                light.buffers.push(Buffer {
                    name: String::new(),
                    size: len as usize,
                    kind: BufferKind::Arena,
                    io: None,
                });
                for &p in &live {
                    timeline[p].push(id);
                }
                let fits = arena_plan(&light, &timeline, false)?.1.size <= limit;
                if fits {
                    for &(lead, bytes) in &pieces {
                        let k = j - lead;
                        free[k] = free[k]
                            .saturating_sub(latency + (bytes as f64 * per_byte).ceil() as u64);
                    }
                    pieces.reverse();
                    out.push(Prefetch {
                        reader: j,
                        len,
                        pieces,
                        live,
                    });
                } else {
                    for &p in &live {
                        timeline[p].pop();
                    }
                    light.buffers.pop();
                }
                fits
            };
            if !fits {
                chosen[j] = false;
                dropped = true;
            }
        }
        if !dropped {
            out.reverse();
            return Ok(out);
        }
    }
}

/// Each operation's DMA window and times, from the estimate of `laid`'s streams. `None` where
/// a stream's operations do not line up with the program's.
fn windows(laid: &Laid, target: &Target, n: usize, mems: &Memories) -> Result<Option<Windows>> {
    let (flash, arena) = (mems.region[0], mems.region[1]);
    let mut w = Windows {
        stream: vec![None; n],
        busy: vec![0; n],
        own: vec![0; n],
        with_copy: vec![0; n],
        now: vec![0; n],
    };
    for (s, step) in step_estimates(laid, target).enumerate() {
        let (ops, est) = step?;
        if est.ops.len() != ops.len() || ops.end > n {
            return Ok(None);
        }
        for (j, o) in ops.zip(&est.ops) {
            let busy: u64 = est
                .dmas
                .iter()
                .map(|d| d.end.min(o.end).saturating_sub(d.start.max(o.start)))
                .sum();
            let c = &o.cost;
            w.stream[j] = Some(s);
            w.busy[j] = busy;
            w.now[j] = o.end - o.start;
            w.own[j] = w.now[j].saturating_sub(c.access[flash]);
            // With the weights in the arena: the flash reads become arena reads.
            let moved = (c.read[flash] as f64 / mems.list[arena].bandwidth) as u64;
            w.with_copy[j] = c
                .access
                .iter()
                .enumerate()
                .map(|(m, &a)| match m {
                    m if m == flash => 0,
                    m if m == arena => a.saturating_add(moved),
                    _ => a,
                })
                .fold(c.compute, u64::max);
        }
    }
    Ok(Some(w))
}
