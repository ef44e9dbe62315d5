//! Depth slices: one convolution as two, each with its own weight stream.
//!
//! A weight copy that no earlier operation can hide (the first operation of a command stream)
//! or that is too large to finish behind the operation before it keeps the NPU waiting for the
//! whole transfer. Split along its OFM depth, the convolution's first slice waits only for its
//! own, smaller part of the weights, and the second slice's copy runs while the first slice
//! computes. Vela does the same (its first convolution in two depth slices, 16 + 48 channels
//! of net_ds_cnn on ethos-u65-512; net_resnet8's last 3x3 convolution as two halves of 32
//! channels on ethos-u55-64).
//!
//! The slices compute exactly what the whole convolution computes: each output channel depends
//! only on its own weights, bias and scale, and both slices read the whole IFM.

use std::ops::Range;

use super::compile::Laid;
use super::copy_lead::{copy_transfers, step_estimates};
use super::npu_op::{BlockConfig, ConvWeights, Layout, NpuOpKind, Program};
use crate::error::Result;
use crate::target::Target;

/// Channels of a depth slice: a whole number of NHCWB16 bricks.
const SLICE_ALIGN: usize = 16;

/// Waits shorter than this many cycles, or than 2% of the operation's, are left alone: a
/// second weight stream costs its own fetch latency and command overhead.
const MIN_WAIT: u64 = 500;

/// Where to cut a convolution: its index, the depth of the first slice, and the block
/// configuration both slices keep (the whole convolution's, as Vela's slices do: a slice
/// shallower than its block still fills both cores of a dual-core configuration).
pub(super) type Cut = (usize, usize, Option<BlockConfig>);

/// The convolutions of the scheduled `program` that wait for their weight copy (estimated on
/// `laid`'s streams), each with the depth of its first slice: as many bricks of the copy as
/// the operation before it hides (one brick for the first operation of a stream), so the
/// first slice starts when its part has arrived and the rest streams in while it computes.
///
/// Also the convolutions whose weights stay in the read-only memory although every OFM block
/// reads them again there, and the operation waits for that memory (`MIN_WAIT` cycles and 2%
/// beyond its computation): where no copy of the whole stream fits the arena beside what is
/// live (size mode, a tight budget), each half may; cut at half the depth, in bricks. Not
/// inside striped chains.
pub(super) fn cuts(program: &Program, laid: &Laid, target: &Target) -> Result<Cuts> {
    let mut cuts = Vec::new();
    let mut uncopied = Vec::new();
    for step in step_estimates(laid, target) {
        let (ops, est) = step?;
        if est.ops.len() != ops.len() {
            continue;
        }
        let Some(transfers) = copy_transfers(laid, ops.clone(), &est) else {
            continue;
        };
        let mut prev_end = 0u64;
        for (k, j) in ops.enumerate() {
            let o = &est.ops[k];
            let wait = o.start.saturating_sub(prev_end);
            prev_end = o.end;
            let op = &program.ops[j];
            let depth = op.ofm.shape[2];
            let Some(&(_, c)) = transfers.iter().find(|&&(x, _)| x == j) else {
                let memory_bound = o.cost.cycles() - o.cost.compute;
                // Striped operations would need their copies for the whole chain, at the
                // arena's peak: left alone.
                if matches!(op.kind, NpuOpKind::Conv(_))
                    && !super::stripe::in_stripes(program, op)
                    && depth >= 2 * SLICE_ALIGN
                    && o.cost.blocks > 1.0
                    && memory_bound >= MIN_WAIT
                    && memory_bound * 50 >= o.cost.compute
                {
                    let at = (depth / 2).div_ceil(SLICE_ALIGN) * SLICE_ALIGN;
                    uncopied.push((j, at.min((depth - 1) / SLICE_ALIGN * SLICE_ALIGN), op.block));
                }
                continue;
            };
            let slow = wait >= MIN_WAIT && wait * 50 >= o.end - o.start;
            if !matches!(op.kind, NpuOpKind::Conv(_)) || !slow || depth < 2 * SLICE_ALIGN {
                continue;
            }
            let hidden = c.saturating_sub(wait);
            let bricks = (depth as u64 * hidden / c.max(1)) as usize / SLICE_ALIGN;
            let at =
                (bricks * SLICE_ALIGN).clamp(SLICE_ALIGN, (depth - 1) / SLICE_ALIGN * SLICE_ALIGN);
            cuts.push((j, at, op.block));
        }
    }
    Ok(Cuts {
        waiting: cuts,
        uncopied,
    })
}

/// What [`cuts`] finds: convolutions waiting for their weight copy, and convolutions
/// re-reading weights that were not copied.
pub(super) struct Cuts {
    pub waiting: Vec<Cut>,
    pub uncopied: Vec<Cut>,
}

/// Splits convolution `j` of `program` into two along its OFM depth, the first slice of `at`
/// channels, both with `block` (`None`: chosen later, per slice), and keeps `ranges` (IR
/// operator -> program operations) consistent. Returns false (and changes nothing) where the
/// operation is no convolution or `at` is no brick boundary inside its depth.
pub(super) fn split(
    program: &mut Program,
    ranges: &mut [Range<usize>],
    (j, at, block): Cut,
) -> bool {
    let Some(op) = program.ops.get(j) else {
        return false;
    };
    let NpuOpKind::Conv(w) = &op.kind else {
        return false;
    };
    let [h, wd, c] = op.ofm.shape;
    let [o, kh, kw, i] = w.shape;
    if at == 0
        || at >= c
        || !at.is_multiple_of(SLICE_ALIGN)
        || o != c
        || w.scales.len() != c
        || w.values.len() != o * kh * kw * i
        || op.ofm.reverse != [false, false]
    {
        return false;
    }
    let depth_offset = |ch: usize| match op.ofm.layout {
        Layout::Nhwc => ch * op.ofm.strides[2],
        Layout::Nhcwb16 => ch / 16 * op.ofm.strides[2],
    };
    let per_channel = kh * kw * i;
    let slice = |range: Range<usize>| {
        let mut s = op.clone();
        s.kind = NpuOpKind::Conv(ConvWeights {
            shape: [range.len(), kh, kw, i],
            values: w.values[range.start * per_channel..range.end * per_channel].to_vec(),
            scales: w.scales[range.clone()].to_vec(),
        });
        s.ofm.shift(depth_offset(range.start));
        s.ofm.shape = [h, wd, range.len()];
        s.block = block;
        s
    };
    let (first, second) = (slice(0..at), slice(at..c));
    program.ops.splice(j..=j, [first, second]);
    for r in ranges.iter_mut() {
        if r.start > j {
            *r = r.start + 1..r.end + 1;
        } else if r.end > j {
            r.end += 1;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethos_u::npu_op::{BufferId, ChannelScale, ElemType, FeatureMap, NpuOp};

    fn conv(layout: Layout, c: usize) -> NpuOp {
        let fm = |shape| match layout {
            Layout::Nhwc => FeatureMap::nhwc(BufferId(0), shape, ElemType::I8, 0),
            Layout::Nhcwb16 => FeatureMap::nhcwb16(BufferId(1), shape, ElemType::I8, 0),
        };
        let weights = ConvWeights {
            shape: [c, 1, 1, 2],
            values: (0..2 * c as i16).collect(),
            scales: (0..c)
                .map(|k| ChannelScale {
                    bias: k as i64,
                    scale: 1 << 30,
                    shift: 30,
                })
                .collect(),
        };
        NpuOp::new(
            "conv",
            NpuOpKind::Conv(weights),
            fm([3, 3, 2]),
            fm([3, 3, c]),
        )
    }

    #[test]
    fn slices_split_weights_scales_and_the_ofm_box() {
        for layout in [Layout::Nhwc, Layout::Nhcwb16] {
            let mut p = Program::default();
            p.ops.push(conv(layout, 48));
            let mut ranges = vec![0..1, 1..1];
            assert!(split(&mut p, &mut ranges, (0, 16, None)));
            assert_eq!(ranges, vec![0..2, 2..2]);
            let [a, b] = [&p.ops[0], &p.ops[1]];
            let (NpuOpKind::Conv(wa), NpuOpKind::Conv(wb)) = (&a.kind, &b.kind) else {
                panic!("convolutions");
            };
            assert_eq!((wa.shape, wb.shape), ([16, 1, 1, 2], [32, 1, 1, 2]));
            assert_eq!(wb.values[0], 32);
            assert_eq!(wb.scales[0].bias, 16);
            assert_eq!((a.ofm.shape[2], b.ofm.shape[2]), (16, 32));
            let step = match layout {
                Layout::Nhwc => 16,
                Layout::Nhcwb16 => a.ofm.strides[2],
            };
            assert_eq!(b.ofm.offset - a.ofm.offset, step);
        }
    }

    #[test]
    fn only_brick_boundaries_inside_the_depth() {
        let mut p = Program::default();
        p.ops.push(conv(Layout::Nhwc, 48));
        let mut ranges = vec![0..1, 1..1];
        for at in [0, 8, 48, 64] {
            assert!(!split(&mut p, &mut ranges, (0, at, None)));
        }
        assert_eq!(p.ops.len(), 1);
    }
}
