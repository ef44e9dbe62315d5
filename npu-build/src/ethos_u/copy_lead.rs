//! How far ahead each weight copy starts.
//!
//! A weight copy's DMA is issued after the kernel command of the operation before the one that
//! reads it, so it runs while that operation computes. Behind a short operation (an addition,
//! a depthwise convolution) a large copy is still running when its reader is due, and the NPU
//! waits: on mv2_224 for ethos-u55-128 that was 107 k cycles before seven expand convolutions
//! (README, "mv2_224 layer by layer"). Such a copy is issued further ahead, so it runs during
//! as many earlier operations as its transfer needs, where the arena has room for the copy
//! over that longer life.
//!
//! The timing comes from the estimator run on the streams as first emitted (every copy one
//! operation ahead): each operation's cycles, and each copy's transfer cycles. With the
//! operations back to back, a pass backwards through each stream gives the latest start of
//! every copy's DMA: early enough to end before its reader starts and before the next copy,
//! queued behind it on the one DMA engine, must start. A pass forwards then issues each copy
//! as few operations ahead as reach that start (never before an earlier operation's copy, so
//! the DMAs keep the order their readers need them in). The streams are then emitted again
//! with the leads and estimated again; the new schedule is kept only if its estimate is
//! lower. The estimator times the DMA queue as the hardware has it (a full queue
//! holds the command processor), so a copy issued so early that it queues behind another one
//! shows up as the cost it is.

use super::compile::{Laid, ReadOnly, Schedule, arena_plan};
use super::npu_op::BufferId;
use super::perf::{Estimate, estimate_stream};
use crate::error::Result;
use crate::ethos_u::Step;
use crate::target::Target;

/// The most operations a copy may run during. Each extra one keeps the copy live one
/// operation longer (the arena decides whether it may).
const MAX_LEAD: usize = 8;

/// The per-operation timing of the first emission.
struct Timing {
    /// Estimated cycles of each program operation.
    op_cycles: Vec<u64>,
    /// Transfer cycles of each operation's weight copy (0 without one).
    copy_cycles: Vec<u64>,
    /// Estimated cycles of all command streams.
    total: u64,
}

/// A schedule with its copies led: the steps, the buffers' uses with the copies' longer lives,
/// and each operation's copy lead.
pub(super) type Led = (Laid, Vec<Vec<BufferId>>, Vec<usize>);

/// Re-emits with weight copies issued further ahead where the first schedule (`first`) makes
/// the NPU wait for them, keeping the arena within `limit` (or the first schedule's arena, if
/// larger). `None` when no copy waits, nothing could start earlier, or the result is no faster.
pub(super) fn lead_copies(
    layout: &Schedule<'_>,
    timeline: &[Vec<BufferId>],
    first: &Laid,
    target: &Target,
    limit: usize,
    ro: &ReadOnly,
) -> Result<Option<Led>> {
    let Some(timing) = timing(layout, first, target)? else {
        return Ok(None);
    };
    let program = layout.program;
    let n = program.ops.len();
    let pos = layout.npu_pos;
    // Operations `a` and `a + 1` run in the same command stream: consecutive on the timeline
    // (no CPU step between).
    let same_stream = |a: usize| pos[a] + 1 == pos[a + 1];
    // Where each operation would start with no waits: the operations back to back.
    let mut start = vec![0u64; n];
    for i in 1..n {
        start[i] = start[i - 1].saturating_add(timing.op_cycles[i - 1]);
    }
    // The latest each copy's DMA may start so that it, and the copies queued behind it on the
    // one DMA engine, end before their readers start (backwards through each stream).
    let mut latest = vec![0u64; n];
    let mut next_latest = u64::MAX;
    for j in (0..n).rev() {
        if j + 1 < n && !same_stream(j) {
            next_latest = u64::MAX;
        }
        if layout.copies[j].is_some() {
            latest[j] = start[j]
                .min(next_latest)
                .saturating_sub(timing.copy_cycles[j]);
            next_latest = latest[j];
        }
    }
    let mut timeline = timeline.to_vec();
    let allowed = limit.max(arena_plan(program, &timeline, false)?.1.size);
    let mut leads = vec![1; n];
    let mut changed = false;
    // In operation order, so the DMAs stay in the order their readers need them: a copy is
    // never issued before an earlier operation's copy.
    let mut last_issue = 0;
    for j in 0..n {
        let Some(id) = layout.copies[j] else { continue };
        // A copy issued `lead` operations ahead starts with operation `j - lead`: go back
        // through the same command stream, not before the previous copy's issue, up to
        // MAX_LEAD, until that start is early enough.
        let mut lead = 1;
        while lead < MAX_LEAD && j > lead && start[j - lead] > latest[j] {
            let k = j - lead - 1;
            // Positions increase by one per step only if no CPU step lies between k and j.
            if k + 1 < last_issue || pos[k] + lead + 1 != pos[j] {
                break;
            }
            lead += 1;
        }
        // The longest lead up to that one whose longer life the arena affords.
        while lead > 1 {
            let extra: Vec<usize> = (2..=lead).map(|l| pos[j - l]).collect();
            for &p in &extra {
                timeline[p].push(id);
            }
            if arena_plan(program, &timeline, false)?.1.size <= allowed {
                leads[j] = lead;
                changed = true;
                break;
            }
            for &p in &extra {
                timeline[p].pop();
            }
            lead -= 1;
        }
        last_issue = j + 1 - leads[j];
    }
    if !changed {
        return Ok(None);
    }
    let trial = layout.run(&timeline, &leads, &[], ro.clone())?;
    let total = total_cycles(&trial, target)?;
    Ok((total < timing.total).then_some((trial, timeline, leads)))
}

/// The estimates of each NPU step of `laid`, with the program operations each covers.
pub(super) fn step_estimates<'a>(
    laid: &'a Laid,
    target: &Target,
) -> impl Iterator<Item = Result<(std::ops::Range<usize>, Estimate)>> + 'a {
    let target = *target;
    laid.steps.iter().filter_map(move |s| match s {
        Step::Npu {
            command_stream,
            ops,
        } => Some(estimate_stream(command_stream, &target).map(|e| (ops.clone(), e))),
        Step::Cpu(_) => None,
    })
}

/// The estimated cycles of all of `laid`'s command streams.
pub(super) fn total_cycles(laid: &Laid, target: &Target) -> Result<u64> {
    let mut total = 0u64;
    for step in step_estimates(laid, target) {
        total = total.saturating_add(step?.1.total_cycles);
    }
    Ok(total)
}

/// Operation and copy cycles of the first emission, by program operation. `None` where the
/// streams do not line up with the program one NPU operation per program operation and one
/// weight DMA per copy, in order (then nothing is changed).
fn timing(layout: &Schedule<'_>, first: &Laid, target: &Target) -> Result<Option<Timing>> {
    let n = layout.program.ops.len();
    let mut t = Timing {
        op_cycles: vec![0; n],
        copy_cycles: vec![0; n],
        total: 0,
    };
    for step in step_estimates(first, target) {
        let (ops, est) = step?;
        t.total = t.total.saturating_add(est.total_cycles);
        if est.ops.len() != ops.len() || ops.end > n {
            return Ok(None);
        }
        for (j, op) in ops.clone().zip(&est.ops) {
            t.op_cycles[j] = op.end - op.start;
        }
        let Some(transfers) = copy_transfers(first, ops, &est) else {
            return Ok(None);
        };
        for (j, cycles) in transfers {
            t.copy_cycles[j] = cycles;
        }
    }
    Ok(Some(t))
}

/// The operations of `ops` (one command stream of `laid`, estimated as `est`) whose weights are
/// copied, each with its copy's transfer cycles (all its pieces): the stream's weight DMAs (not
/// LUT loads) are the copies' pieces in the order they are issued. `None` if the counts
/// disagree.
pub(super) fn copy_transfers(
    laid: &Laid,
    ops: std::ops::Range<usize>,
    est: &Estimate,
) -> Option<Vec<(usize, u64)>> {
    // (issued before operation, reader, piece): the emission order of the pieces.
    let mut issued: Vec<(usize, usize, usize)> = Vec::new();
    for j in ops {
        let Some(w) = laid.placement.weights.get(j).and_then(|w| w.as_ref()) else {
            continue;
        };
        for (piece, dma) in w.dma.iter().enumerate() {
            issued.push(((j + 1).saturating_sub(dma.lead.max(1)), j, piece));
        }
    }
    issued.sort_unstable();
    let dmas: Vec<u64> = est
        .dmas
        .iter()
        .filter(|d| !d.lut)
        .map(|d| d.end - d.start)
        .collect();
    if issued.len() != dmas.len() {
        return None;
    }
    let mut per_op: Vec<(usize, u64)> = Vec::new();
    for ((_, j, _), cycles) in issued.into_iter().zip(dmas) {
        match per_op.iter_mut().find(|(x, _)| *x == j) {
            Some((_, c)) => *c += cycles,
            None => per_op.push((j, cycles)),
        }
    }
    per_op.sort_unstable();
    Some(per_op)
}
