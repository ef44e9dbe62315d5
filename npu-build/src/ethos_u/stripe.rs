//! Striping (cascading): running a chain of operations in horizontal stripes of the last one's
//! output, so that the feature maps between them never exist whole.
//!
//! A *chain* is a run of NPU operations, each the whole lowering of one IR operator, where
//! every operation's output is read by the next one only, as its IFM, and by nothing else
//! (no CPU step, no graph output, no other operation). Striped into `k` stripes, the chain
//! runs `op1(s0), op2(s0), ..., opN(s0), op1(s1), ...`: stripe `s` of the last operation's OFM
//! rows needs a range of rows of its IFM (kernel height, stride, dilation, top padding); the
//! previous operation computes those of them no earlier stripe computed, and so on back to the
//! chain's input, which is read in place. Every row is computed once.
//!
//! Between two operations the rows live in a *rolling buffer* (Vela's rolling buffers): a
//! ring of as many rows as one stripe writes and reads there at once, row `r` at ring row
//! `r % ring`. A box of rows that runs past the ring's end continues at its start: the
//! feature-map registers' tile 2 (`HEIGHT0` rows at `BASE0`, the rest at `BASE2`), see
//! [`super::npu_op::Wrap`]. Those rings replace the intermediate feature maps, which is what
//! lowers the arena's peak.
//!
//! Padding is per stripe: the first stripe keeps the top padding, the last the bottom, the
//! others read real rows there. Outputs are bit-exact with the unstriped chain: every output
//! row is computed from the same input rows with the same arithmetic.

use std::ops::Range;

use super::npu_op::{
    Buffer, BufferId, BufferKind, FeatureMap, NpuOp, NpuOpKind, Operand2, Program, Wrap,
};
use crate::ir::Padding;
use npu_rt::ethos_u::regs::fields::IfmUpscaleMode;

/// What the name of a rolling stripe buffer ends with.
const STRIPE_SUFFIX: &str = " (stripe)";

/// Whether `op` runs as part of a striped chain (it reads or writes a rolling stripe buffer).
pub(super) fn in_stripes(program: &Program, op: &NpuOp) -> bool {
    [op.ifm.buffer, op.ofm.buffer].iter().any(|b| {
        program
            .buffers
            .get(b.index())
            .is_some_and(|b| b.name.ends_with(STRIPE_SUFFIX))
    })
}

/// The IR operator each program operation belongs to (`ranges`: IR operator -> operations).
pub(super) fn owners(ranges: &[Range<usize>], n_ops: usize) -> Vec<Option<usize>> {
    let mut owner = vec![None; n_ops];
    for (i, r) in ranges.iter().enumerate() {
        for k in r.clone() {
            if let Some(o) = owner.get_mut(k) {
                *o = Some(i);
            }
        }
    }
    owner
}

/// Whether `fm` is its whole buffer, row after row from offset 0.
fn whole(program: &Program, fm: &FeatureMap) -> bool {
    fm.offset == 0
        && program
            .buffers
            .get(fm.buffer.index())
            .is_some_and(|b| fm.shape[0].saturating_mul(fm.strides[0]) == b.size)
}

/// Whether operation `op` can run on a stripe of its rows.
fn stripeable(op: &NpuOp) -> bool {
    // Stripes map OFM rows forward onto IFM rows.
    if op.upscale != IfmUpscaleMode::None
        || op.ofm.shape[0] < 2
        || op.ofm.reverse != [false; 2]
        || op.ifm.reverse != [false; 2]
    {
        return false;
    }
    match &op.kind {
        NpuOpKind::Conv(_) | NpuOpKind::Depthwise(_) | NpuOpKind::Pool(_) => true,
        NpuOpKind::Elementwise { ifm2, .. } => match ifm2 {
            None | Some(Operand2::Scalar { .. }) => true,
            Some(Operand2::Tensor(f)) => f.shape[0] == op.ofm.shape[0] || f.shape[0] == 1,
        },
    }
}

/// The chains of `program` (ranges of operation indices, at least two operations each).
/// `pinned` buffers (CPU steps, weight copies) never join a chain.
pub(super) fn chains(
    program: &Program,
    ranges: &[Range<usize>],
    pinned: &std::collections::HashSet<BufferId>,
) -> Vec<Range<usize>> {
    let n = program.ops.len();
    let owner = owners(ranges, n);
    // Readers and writers of every buffer.
    let mut uses = vec![0usize; program.buffers.len()];
    for op in &program.ops {
        for b in op.buffers() {
            if let Some(u) = uses.get_mut(b.index()) {
                *u += 1;
            }
        }
    }
    let single = |k: usize| ranges.get(owner[k].unwrap_or(usize::MAX)).map(|r| r.len()) == Some(1);
    let link = |k: usize| -> bool {
        let (a, b) = (&program.ops[k], &program.ops[k + 1]);
        let buf = a.ofm.buffer;
        let ifm2_is_buf = matches!(&b.kind, NpuOpKind::Elementwise { ifm2: Some(Operand2::Tensor(f)), .. } if f.buffer == buf);
        stripeable(a)
            && stripeable(b)
            && single(k)
            && single(k + 1)
            && owner[k].zip(owner[k + 1]).is_some_and(|(x, y)| y == x + 1)
            && b.ifm.buffer == buf
            && !ifm2_is_buf
            && whole(program, &a.ofm)
            && whole(program, &b.ifm)
            && a.ofm.shape == b.ifm.shape
            && a.ofm.strides == b.ifm.strides
            && program.buffers[buf].io.is_none()
            && matches!(program.buffers[buf].kind, BufferKind::Arena)
            && !pinned.contains(&buf)
            && uses[buf.index()] == 2
    };
    let mut out = Vec::new();
    let mut k = 0;
    while k + 1 < n {
        if !link(k) {
            k += 1;
            continue;
        }
        let start = k;
        while k + 1 < n && link(k) {
            k += 1;
        }
        out.push(start..k + 1);
        k += 1;
    }
    out
}

/// IFM rows `[lo, hi)` operation `op` reads for OFM rows `rows` (unclamped: `lo` may be
/// negative, `hi` beyond the IFM, where padding is read).
fn needed(op: &NpuOp, rows: &Range<usize>) -> (i64, i64) {
    let k = &op.kernel;
    let dilated = (k.dilation_y * (k.h.max(1) - 1) + 1) as i64;
    let top = op.padding.top as i64;
    let sy = k.stride_y as i64;
    let lo = rows.start as i64 * sy - top;
    let hi = (rows.end as i64 - 1) * sy - top + dilated;
    (lo, hi)
}

/// `fm` restricted to rows `[lo, hi)` of its box.
fn rows_of(fm: &FeatureMap, lo: usize, hi: usize) -> FeatureMap {
    FeatureMap {
        offset: fm.offset + lo * fm.strides[0],
        shape: [hi - lo, fm.shape[1], fm.shape[2]],
        ..fm.clone()
    }
}

/// IFM rows `[lo, hi)` operation `op` reads for OFM rows `rows`, clamped to its IFM.
fn window(op: &NpuOp, rows: &Range<usize>) -> Range<usize> {
    if rows.is_empty() {
        return 0..0;
    }
    let (lo, hi) = needed(op, rows);
    let h_in = op.ifm.shape[0] as i64;
    lo.clamp(0, h_in) as usize..hi.clamp(0, h_in) as usize
}

/// Per stripe of the chain `ops` cut into `stripes`, the OFM rows every operation computes:
/// the last operation's stripe, then back through each kernel's needs, less the rows an
/// earlier stripe computed already (they are still in the rolling buffer).
///
/// The first stripe computes the halo rows of every operation besides its own, so with all
/// stripes equal it would size the rolling buffers; it gets as many rows fewer (0 to all but
/// one) as make the buffers smallest.
pub(super) fn plan(ops: &[NpuOp], stripes: usize) -> Vec<Vec<Range<usize>>> {
    let Some(last) = ops.last() else {
        return Vec::new();
    };
    let height = last.ofm.shape[0];
    let rows_per = height.div_ceil(stripes.clamp(1, height.max(1)));
    let bytes = |p: &Vec<Vec<Range<usize>>>| stripe_sizes(ops, p).iter().sum::<usize>();
    (1..=rows_per)
        .rev()
        .map(|first| plan_from(ops, rows_per, first))
        .min_by_key(bytes)
        .unwrap_or_default()
}

/// [`plan`] with a first stripe of `first` rows of the last operation and `rows_per` rows
/// in each stripe after it.
fn plan_from(ops: &[NpuOp], rows_per: usize, first: usize) -> Vec<Vec<Range<usize>>> {
    let n = ops.len();
    let height = ops[n - 1].ofm.shape[0];
    let mut done = vec![0usize; n];
    let mut plan = Vec::new();
    let mut s = 0;
    while s < height {
        let step = if s == 0 { first } else { rows_per };
        let mut rows = vec![0..0; n];
        rows[n - 1] = s..(s + step).min(height);
        for i in (1..n).rev() {
            let need = window(&ops[i], &rows[i]);
            rows[i - 1] = done[i - 1]..need.end.max(done[i - 1]);
        }
        for (d, r) in done.iter_mut().zip(&rows) {
            *d = (*d).max(r.end);
        }
        plan.push(rows);
        s += step;
    }
    plan
}

/// Rows of the rolling buffer between operations `i` and `i + 1` of the chain under `plan`:
/// in every stripe, the rows operation `i` writes and those operation `i + 1` reads must all
/// be there at once.
fn ring_rows(ops: &[NpuOp], plan: &[Vec<Range<usize>>], i: usize) -> usize {
    plan.iter()
        .map(|rows| {
            let read = window(&ops[i + 1], &rows[i + 1]);
            let written = &rows[i];
            match (read.is_empty(), written.is_empty()) {
                (true, true) => 0,
                (true, false) => written.len(),
                (false, true) => read.len(),
                (false, false) => read.end.max(written.end) - read.start.min(written.start),
            }
        })
        .max()
        .unwrap_or(0)
}

/// Bytes of the rolling buffer of each intermediate of the chain `ops` under `plan`.
pub(super) fn stripe_sizes(ops: &[NpuOp], plan: &[Vec<Range<usize>>]) -> Vec<usize> {
    (0..ops.len().saturating_sub(1))
        .map(|i| ring_rows(ops, plan, i) * ops[i].ofm.strides[0])
        .collect()
}

/// Rows `rows` of `fm`'s tensor in a rolling buffer of `ring` rows (row `r` at ring row
/// `r % ring`), as a box of `buffer`.
fn ring_box(fm: &FeatureMap, buffer: BufferId, ring: usize, rows: &Range<usize>) -> FeatureMap {
    let start = rows.start % ring.max(1);
    let before_end = ring - start;
    FeatureMap {
        buffer,
        offset: start * fm.strides[0],
        shape: [rows.len(), fm.shape[1], fm.shape[2]],
        wrap: (rows.len() > before_end).then_some(Wrap {
            rows: before_end,
            offset: 0,
        }),
        ..fm.clone()
    }
}

/// Stripes `chain` into `stripes` stripes of its last operation's OFM rows: replaces its
/// operations in `program.ops` (fixing `ranges`), adds the stripe buffers and empties the
/// intermediate buffers. Returns the number of operations added.
pub(super) fn stripe(
    program: &mut Program,
    ranges: &mut [Range<usize>],
    chain: Range<usize>,
    stripes: usize,
) -> usize {
    let ops: Vec<NpuOp> = program.ops[chain.clone()].to_vec();
    let n = ops.len();
    let plan = plan(&ops, stripes);
    let sizes = stripe_sizes(&ops, &plan);
    let rings: Vec<usize> = (0..n - 1).map(|i| ring_rows(&ops, &plan, i)).collect();
    let mut stripe_buf = Vec::with_capacity(n - 1);
    for (i, op) in ops.iter().enumerate().take(n - 1) {
        let old = op.ofm.buffer;
        let id = BufferId(program.buffers.len());
        program.buffers.push(Buffer {
            name: format!("{}{STRIPE_SUFFIX}", program.buffers[old].name),
            size: sizes[i],
            kind: BufferKind::Arena,
            io: None,
        });
        program.buffers[old].size = 0;
        stripe_buf.push(id);
    }
    let mut new_ops = Vec::with_capacity(plan.len() * n);
    for rows in &plan {
        for (i, op) in ops.iter().enumerate() {
            let r = &rows[i];
            if r.is_empty() {
                continue;
            }
            let mut o = op.clone();
            // Output: the chain's own OFM rows for the last operation, else the rolling
            // buffer.
            o.ofm = if i == n - 1 {
                rows_of(&op.ofm, r.start, r.end)
            } else {
                ring_box(&op.ofm, stripe_buf[i], rings[i], r)
            };
            // Input rows and the padding this stripe still needs.
            let (lo, hi) = needed(op, r);
            let h_in = op.ifm.shape[0] as i64;
            let (in_lo, in_hi) = (lo.clamp(0, h_in), hi.clamp(0, h_in));
            o.padding = Padding {
                top: (in_lo - lo) as usize,
                bottom: (hi - in_hi) as usize,
                ..op.padding
            };
            let (in_lo, in_hi) = (in_lo as usize, in_hi as usize);
            o.ifm = if i == 0 {
                rows_of(&op.ifm, in_lo, in_hi)
            } else {
                // This or an earlier stripe of the previous operation wrote those rows, and
                // none of them has been overwritten yet (`ring_rows`).
                ring_box(&op.ifm, stripe_buf[i - 1], rings[i - 1], &(in_lo..in_hi))
            };
            if let NpuOpKind::Elementwise {
                ifm2: Some(Operand2::Tensor(f)),
                ..
            } = &mut o.kind
                && f.shape[0] == op.ofm.shape[0]
            {
                *f = rows_of(f, r.start, r.end);
            }
            o.block = None;
            new_ops.push(o);
        }
    }
    let added = new_ops.len() - n;
    let end = chain.end;
    program.ops.splice(chain.clone(), new_ops);
    // The first operator of the chain owns all its stripes; the others own nothing (their
    // work is inside); later operators shift.
    let mut first = true;
    for r in ranges.iter_mut() {
        if r.start >= end {
            *r = r.start + added..r.end + added;
        } else if r.start >= chain.start && r.start != r.end {
            if first {
                *r = chain.start..end + added;
                first = false;
            } else {
                *r = end + added..end + added;
            }
        }
    }
    added
}
