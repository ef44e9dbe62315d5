//! Lowering of permutes and gathers (Transpose, DepthToSpace, SpaceToDepth, Tile, MirrorPad,
//! Reverse, Gather) to strided 1x1 copies (docs/permutes.md).
//!
//! The NPU's pooling unit reads an IFM box `[H, W, C]` and writes an OFM box of the same
//! shape, each addressed as `base + y * stride_y + x * stride_x + c * elem` (NHWC). The strides
//! are free, so one copy can move any two dimensions of a tensor to any two dimensions of
//! another: Vela's Transpose swaps the OFM's H and W strides this way
//! (`tflite_graph_optimiser.py: fixup_transpose`), and its MirrorPad writes with offsets
//! (`convert_mirror_pad`). Channels are contiguous on both sides, so the C axis of a copy is a
//! dimension that is innermost in both tensors, or has extent 1.
//!
//! Every operator here becomes a list of *axes*: a dimension with its input and output element
//! strides and its *segments* (runs of input coordinates that map to consecutive output
//! coordinates). A Transpose has one segment per axis; the separable index maps of the
//! reference interpreter ([`RemapPlan`]) split each dimension at every break of its map. Two
//! axes become the copy's H and W, the innermost one its C when both tensors have it
//! innermost; the segments of the others are unrolled into single elements and each
//! combination of segments is one copy. Above [`MAX_COPIES`] copies the operator stays on the
//! CPU.

use super::Lowering;
use super::op_builders::copy_op;
use crate::error::Result;
use crate::ethos_u::npu_op::{FeatureMap, Layout};
use crate::ir::{Op, OpKind, PadMode, TensorId};
use crate::reference::remap::{RemapPlan, space_depth_transpose};

/// Most copies one operator may take on the NPU (more: the CPU kernel is the better choice).
pub const MAX_COPIES: usize = 64;

/// Largest extent of one feature-map axis (16-bit `*_M1` registers).
const MAX_EXTENT: usize = 65536;

/// One dimension of a strided copy.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Axis {
    /// Element strides in the input and the output.
    is: usize,
    os: usize,
    /// `(input coordinate, output coordinate, length, reversed)` runs that move as one block:
    /// output coordinate `o + k` reads input `i + k`, or `i - k` when reversed (a copy whose
    /// OFM box is written backwards along that axis).
    segs: Vec<Seg>,
}

type Seg = (usize, usize, usize, bool);

/// One strided copy: `(input offset, output offset, shape, input strides, output strides,
/// OFM rows / columns written backwards)`, offsets and strides in elements.
type CopyPlan = (usize, usize, [usize; 3], [usize; 3], [usize; 3], [bool; 2]);

/// Row-major element strides of `shape`.
fn dense(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// The axes of a transpose of `in_shape` by `perm` (`out.shape[i] = in_shape[perm[i]]`), with
/// dimensions of size 1 dropped and dimensions that stay adjacent merged.
fn transpose_axes(in_shape: &[usize], perm: &[usize]) -> Vec<Axis> {
    // Input dimensions that matter, in input order, and their new index.
    let kept: Vec<usize> = (0..in_shape.len()).filter(|&d| in_shape[d] != 1).collect();
    let order: Vec<usize> = perm
        .iter()
        .filter_map(|&p| kept.iter().position(|&k| k == p))
        .collect();
    let shape: Vec<usize> = kept.iter().map(|&k| in_shape[k]).collect();
    // Groups of consecutive input dimensions that are consecutive in the output too.
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for &d in &order {
        match groups.last_mut() {
            Some(g) if g.last() == Some(&(d.wrapping_sub(1))) && d > 0 => g.push(d),
            _ => groups.push(vec![d]),
        }
    }
    let mut by_input = groups.clone();
    by_input.sort_by_key(|g| g[0]);
    let merged: Vec<usize> = by_input
        .iter()
        .map(|g| g.iter().map(|&d| shape[d]).product())
        .collect();
    let out_shape: Vec<usize> = groups
        .iter()
        .map(|g| g.iter().map(|&d| shape[d]).product())
        .collect();
    let (is, os) = (dense(&merged), dense(&out_shape));
    by_input
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let at = groups.iter().position(|h| h == g).unwrap_or(0);
            Axis {
                is: is[i],
                os: os[at],
                segs: vec![(0, 0, merged[i], false)],
            }
        })
        .collect()
}

/// The axes of a separable index map: per dimension, runs of consecutive input coordinates.
fn remap_axes(plan: &RemapPlan) -> Vec<Axis> {
    let (is, os) = (dense(&plan.in_shape), dense(&plan.out_shape));
    plan.maps
        .iter()
        .enumerate()
        .map(|(d, map)| {
            let mut segs: Vec<Seg> = Vec::new();
            for (o, &i) in map.iter().enumerate() {
                match segs.last_mut() {
                    Some((i0, _, n, false)) if *i0 + *n == i => *n += 1,
                    // Runs of decreasing input coordinates (MirrorPad, Reverse).
                    Some((i0, _, n, rev)) if (*rev || *n == 1) && *i0 >= *n && *i0 - *n == i => {
                        *n += 1;
                        *rev = true;
                    }
                    _ => segs.push((i, o, 1, false)),
                }
            }
            Axis {
                is: is[d],
                os: os[d],
                segs,
            }
        })
        .collect()
}

/// The axes as a list of single-element segments.
fn unrolled(a: &Axis) -> Vec<Seg> {
    a.segs
        .iter()
        .flat_map(|&(i, o, n, rev)| {
            (0..n).map(move |k| (if rev { i - k } else { i + k }, o + k, 1, false))
        })
        .collect()
}

/// The segments of `a` with the reversed ones unrolled (for the C axis, which is always
/// walked forwards).
fn forward(a: &Axis) -> Vec<Seg> {
    let mut out = Vec::new();
    for &(i, o, n, rev) in &a.segs {
        if rev {
            out.extend((0..n).map(|k| (i - k, o + k, 1, false)));
        } else {
            out.push((i, o, n, false));
        }
    }
    out
}

/// Copies for `axes`: chooses the C, H and W axes, unrolls the rest, and returns the copies.
fn plan_copies(axes: &[Axis]) -> Option<Vec<CopyPlan>> {
    let axes: Vec<&Axis> = axes.iter().filter(|a| !a.segs.is_empty()).collect();
    // The C axis: innermost in both tensors.
    let c = axes.iter().position(|a| a.is == 1 && a.os == 1);
    let rest: Vec<usize> = (0..axes.len()).filter(|&i| Some(i) != c).collect();
    let count = |box_axes: &[usize]| -> usize {
        (0..axes.len())
            .map(|i| {
                if box_axes.contains(&i) {
                    axes[i].segs.len()
                } else if Some(i) == c {
                    forward(axes[i]).len()
                } else {
                    axes[i].segs.iter().map(|s| s.2).sum()
                }
            })
            .try_fold(1usize, |a, n| a.checked_mul(n))
            .unwrap_or(usize::MAX)
    };
    // The pair of H/W axes giving the fewest copies.
    let mut best: Vec<usize> = rest.iter().copied().take(2).collect();
    for (k, &a) in rest.iter().enumerate() {
        for &b in &rest[k + 1..] {
            if count(&[a, b]) < count(&best) {
                best = vec![a, b];
            }
        }
    }
    if count(&best) > MAX_COPIES {
        return None;
    }
    // Per axis, its segments, and its slot in [H, W, C] (None: unrolled, extent 1).
    let mut lists: Vec<(Option<usize>, Vec<Seg>)> = Vec::new();
    for (i, a) in axes.iter().enumerate() {
        let slot = if Some(i) == c {
            Some(2)
        } else {
            best.iter().position(|&b| b == i)
        };
        let segs = match slot {
            Some(2) => forward(a),
            Some(_) => a.segs.clone(),
            None => unrolled(a),
        };
        lists.push((slot, segs));
    }
    let mut out = Vec::new();
    let mut idx = vec![0usize; lists.len()];
    loop {
        let (mut io, mut oo) = (0usize, 0usize);
        let mut shape = [1usize; 3];
        let mut ist = [1usize; 3];
        let mut ost = [1usize; 3];
        let mut rev = [false; 2];
        for (k, (slot, segs)) in lists.iter().enumerate() {
            let (i, o, n, back) = segs[idx[k]];
            // A reversed run reads its input block forwards from its lowest coordinate and
            // writes the output block backwards.
            let first = if back { i + 1 - n } else { i };
            io += first * axes[k].is;
            oo += o * axes[k].os;
            if let Some(s) = *slot {
                shape[s] = n;
                ist[s] = axes[k].is;
                ost[s] = axes[k].os;
                if back && s < 2 {
                    rev[s] = true;
                }
            }
        }
        out.push((io, oo, shape, ist, ost, rev));
        let mut k = lists.len();
        loop {
            if k == 0 {
                return Some(out);
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < lists[k].1.len() {
                break;
            }
            idx[k] = 0;
        }
    }
}

/// The dense NHWC feature map of `t` (any rank: only its buffer, offset and type are used).
fn dense_fm(cx: &mut Lowering<'_>, op: &Op, t: TensorId) -> Result<FeatureMap> {
    let dtype = cx.elem_type(op, t)?;
    let p = cx.place(t);
    let tensor = &cx.graph.tensors[t];
    let e = tensor.dtype.size();
    let s = &tensor.shape;
    let c = s.last().copied().unwrap_or(1);
    let w = if s.len() >= 2 { s[s.len() - 2] } else { 1 };
    if p.layout != Layout::Nhwc || p.strides != [w * c * e, c * e, e] {
        return Err(cx.limit(
            op,
            format!(
                "tensor '{}' is not a dense NHWC buffer (a strided slice or bricks)",
                tensor.name
            ),
        ));
    }
    Ok(FeatureMap {
        buffer: p.buffer,
        offset: p.offset,
        shape: [1, 1, 1],
        strides: [e, e, e],
        layout: Layout::Nhwc,
        dtype,
        zero_point: 0,
        reverse: [false; 2],
        wrap: None,
    })
}

/// A Tile as a doubling sequence: the input copied into the output's first block, then along
/// each tiled dimension (innermost first) the block filled so far copied from the output into
/// its other `multiples[d] - 1` places, so later copies move wider blocks. `None` when it would
/// not take fewer copies than the direct plan (one copy per combination of tile positions on
/// unrolled axes), or either does not fit [`MAX_COPIES`].
#[allow(clippy::type_complexity)]
fn tile_steps(
    in_shape: &[usize],
    multiples: &[usize],
    direct: usize,
) -> Option<Vec<(bool, Vec<CopyPlan>)>> {
    if in_shape.len() != multiples.len() || multiples.contains(&0) {
        return None;
    }
    let out: Vec<usize> = in_shape.iter().zip(multiples).map(|(a, m)| a * m).collect();
    let (is, os) = (dense(in_shape), dense(&out));
    let axes = |extent: &[usize], src: &[usize]| -> Vec<Axis> {
        (0..extent.len())
            .filter(|&d| extent[d] != 1)
            .map(|d| Axis {
                is: src[d],
                os: os[d],
                segs: vec![(0, 0, extent[d], false)],
            })
            .collect()
    };
    // Each step is one box of the output (dimensions are not merged: a rank-4 box with a
    // batch above 1 unrolls one axis, which the copy count below accounts for).
    let mut steps = vec![(false, plan_copies(&axes(in_shape, &is))?)];
    let mut filled = in_shape.to_vec();
    for d in (0..in_shape.len()).rev() {
        if multiples[d] == 1 {
            continue;
        }
        let block = plan_copies(&axes(&filled, &os))?;
        for t in 1..multiples[d] {
            let shift = t * in_shape[d] * os[d];
            steps.push((
                true,
                block
                    .iter()
                    .map(|&(io, oo, sh, ist, ost, rev)| (io, oo + shift, sh, ist, ost, rev))
                    .collect(),
            ));
        }
        filled[d] = out[d];
    }
    let total: usize = steps.iter().map(|s| s.1.len()).sum();
    (total < direct && total <= MAX_COPIES).then_some(steps)
}

/// A reflect or symmetric MirrorPad as Vela writes it: the input copied into the output's
/// middle, then each padded axis (H, then W over the full padded height) filled by one
/// backwards copy per side from the rows already in the output. `None` where that does not
/// apply (edge mode, padded channels, more than three dimensions that are not 1) or would not
/// take fewer copies than `direct`.
fn mirror_steps(
    in_shape: &[usize],
    pads: &[(usize, usize)],
    mode: PadMode,
    direct: usize,
) -> Option<Vec<(bool, Vec<CopyPlan>)>> {
    let extra = match mode {
        PadMode::Reflect => 1,
        PadMode::Symmetric => 0,
        PadMode::Edge => return None,
    };
    let r = in_shape.len();
    if pads.len() != r || r == 0 {
        return None;
    }
    // Right-aligned into [H, W, C]; leading dimensions must be 1 and unpadded.
    let lead = r.saturating_sub(3);
    if in_shape[..lead].iter().any(|&d| d != 1) || pads[..lead].iter().any(|&p| p != (0, 0)) {
        return None;
    }
    let mut shape = [1usize; 3];
    let mut pad = [(0usize, 0usize); 3];
    for (k, d) in (lead..r).enumerate() {
        shape[3 - (r - lead) + k] = in_shape[d];
        pad[3 - (r - lead) + k] = pads[d];
    }
    if pad[2] != (0, 0) {
        return None;
    }
    let out = [0, 1, 2].map(|d| shape[d] + pad[d].0 + pad[d].1);
    let is = [shape[1] * shape[2], shape[2], 1];
    let os = [out[1] * out[2], out[2], 1];
    let centre = pad[0].0 * os[0] + pad[1].0 * os[1];
    let mut steps = vec![(false, vec![(0, centre, shape, is, os, [false; 2])])];
    // The output box filled so far: per axis, start and extent.
    let mut start = [pad[0].0, pad[1].0, 0];
    let mut extent = shape;
    for d in 0..2 {
        let (b, a) = pad[d];
        let n = shape[d];
        let mut copies = Vec::new();
        // (first source row, first destination row, rows): the source rows read forwards,
        // written backwards.
        for (src, dst, rows) in [(b + extra, 0, b), (b + n - extra - a, b + n, a)] {
            if rows == 0 {
                continue;
            }
            let mut box_shape = extent;
            box_shape[d] = rows;
            let mut rev = [false; 2];
            rev[d] = true;
            let other = 1 - d;
            let base = start[other] * os[other];
            copies.push((
                src * os[d] + base,
                dst * os[d] + base,
                box_shape,
                os,
                os,
                rev,
            ));
        }
        if !copies.is_empty() {
            steps.push((true, copies));
        }
        start[d] = 0;
        extent[d] = out[d];
    }
    let total: usize = steps.iter().map(|s| s.1.len()).sum();
    (total < direct && total <= MAX_COPIES).then_some(steps)
}

/// Emits the copies of `axes` from `x` to `y`.
fn emit(cx: &mut Lowering<'_>, op: &Op, axes: &[Axis]) -> Result<()> {
    let (x, y) = match (op.inputs.as_slice(), op.outputs.as_slice()) {
        ([x], [y]) => (*x, *y),
        _ => return Err(Lowering::invalid(op, "expects one input and one output")),
    };
    let g = cx.graph;
    let (xt, yt) = (&g.tensors[x], &g.tensors[y]);
    if xt.dtype != yt.dtype {
        return Err(Lowering::invalid(
            op,
            format!("input is {} but the output is {}", xt.dtype, yt.dtype),
        ));
    }
    if xt.quant.is_some() && yt.quant.is_some() && cx.quant(x) != cx.quant(y) {
        return Err(cx.limit(
            op,
            format!(
                "'{}' and '{}' are quantized differently; the NPU copies only move bytes",
                xt.name, yt.name
            ),
        ));
    }
    if yt.elements() == 0 {
        return Ok(());
    }
    let copies = plan_copies(axes);
    let direct = copies.as_ref().map_or(usize::MAX, Vec::len);
    let tiled = match &op.kind {
        OpKind::Tile { multiples } => tile_steps(&xt.shape, multiples, direct),
        OpKind::MirrorPad { pads, mode } => mirror_steps(&xt.shape, pads, *mode, direct),
        _ => None,
    };
    let steps = match (tiled, copies) {
        (Some(t), _) => t,
        (None, Some(c)) => vec![(false, c)],
        (None, None) => {
            return Err(cx.limit(
                op,
                format!("needs more than {MAX_COPIES} strided copies on the NPU"),
            ));
        }
    };
    let xfm = dense_fm(cx, op, x)?;
    let yfm = dense_fm(cx, op, y)?;
    let e = xt.dtype.size();
    for (io, oo, shape, ist, ost, rev, from_y) in steps.into_iter().flat_map(|(from_y, c)| {
        c.into_iter()
            .map(move |(a, b, s, i, o, r)| (a, b, s, i, o, r, from_y))
    }) {
        if shape.iter().any(|&d| d > MAX_EXTENT) {
            return Err(cx.limit(
                op,
                format!("a copy of shape {shape:?} exceeds {MAX_EXTENT} along an axis"),
            ));
        }
        let src = if from_y { &yfm } else { &xfm };
        let ifm = FeatureMap {
            offset: src.offset + io * e,
            shape,
            strides: ist.map(|s| s * e),
            ..src.clone()
        };
        let ofm = FeatureMap {
            offset: yfm.offset + oo * e,
            shape,
            strides: ost.map(|s| s * e),
            reverse: rev,
            ..yfm.clone()
        };
        let copy = copy_op(&op.name, ifm, ofm)?;
        cx.program.ops.push(copy);
    }
    Ok(())
}

/// Transpose, DepthToSpace, SpaceToDepth, Tile, MirrorPad, Reverse, Gather.
pub(super) fn lower(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    let axes = match &op.kind {
        OpKind::Transpose { perm } => {
            let x = op
                .inputs
                .first()
                .ok_or_else(|| Lowering::invalid(op, "expects one input"))?;
            let y = op
                .outputs
                .first()
                .ok_or_else(|| Lowering::invalid(op, "expects one output"))?;
            let xs = &cx.graph.tensors[*x].shape;
            let mut seen = vec![false; xs.len()];
            let valid = perm.len() == xs.len()
                && perm
                    .iter()
                    .all(|&p| p < xs.len() && !std::mem::replace(&mut seen[p], true))
                && perm.iter().map(|&p| xs[p]).collect::<Vec<_>>() == cx.graph.tensors[*y].shape;
            if !valid {
                return Err(Lowering::invalid(
                    op,
                    format!("perm {perm:?} does not take {xs:?} to the output shape"),
                ));
            }
            transpose_axes(xs, perm)
        }
        OpKind::DepthToSpace { .. } | OpKind::SpaceToDepth { .. } => {
            let (view, perm) = space_depth_transpose(cx.graph, op)?;
            transpose_axes(&view, &perm)
        }
        _ => remap_axes(&RemapPlan::of(cx.graph, op)?),
    };
    emit(cx, op, &axes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_axes_drop_ones_and_merge() {
        // [1, 4, 8, 16] perm [0, 2, 1, 3]: H and W swap, C stays innermost.
        let a = transpose_axes(&[1, 4, 8, 16], &[0, 2, 1, 3]);
        assert_eq!(
            a,
            vec![
                Axis {
                    is: 128,
                    os: 16,
                    segs: vec![(0, 0, 4, false)]
                },
                Axis {
                    is: 16,
                    os: 64,
                    segs: vec![(0, 0, 8, false)]
                },
                Axis {
                    is: 1,
                    os: 1,
                    segs: vec![(0, 0, 16, false)]
                },
            ]
        );
        // [2, 3, 4] perm [0, 1, 2] is one contiguous axis.
        assert_eq!(transpose_axes(&[2, 3, 4], &[0, 1, 2]).len(), 1);
        // [2, 3, 4, 5] perm [2, 3, 0, 1] is a 2-D transpose of [6, 20].
        let a = transpose_axes(&[2, 3, 4, 5], &[2, 3, 0, 1]);
        assert_eq!(a.len(), 2);
        assert_eq!((a[0].is, a[0].os, a[1].is, a[1].os), (20, 1, 1, 6));
    }

    #[test]
    fn tiles_double_instead_of_copying_every_position() {
        let count = |s: &[usize], m: &[usize], direct: usize| {
            tile_steps(s, m, direct).map(|st| st.iter().map(|x| x.1.len()).sum::<usize>())
        };
        // W x2, C x3: the input, two copies along C, one along W: 4 against 6.
        assert_eq!(count(&[1, 3, 4, 5], &[1, 1, 2, 3], 6), Some(4));
        assert_eq!(count(&[1, 4, 4, 8], &[1, 2, 3, 1], 6), Some(4));
        // One axis doubled: two copies either way, the direct plan stays.
        assert_eq!(count(&[1, 4, 4, 8], &[1, 2, 1, 1], 2), None);
        // Every copy after the first reads what an earlier one wrote and writes elsewhere.
        let steps = tile_steps(&[1, 3, 4, 5], &[1, 1, 2, 3], 6).expect("steps");
        assert!(!steps[0].0 && steps[1..].iter().all(|s| s.0));
        for (_, copies) in &steps[1..] {
            for &(io, oo, _, _, _, _) in copies {
                assert!(oo > io);
            }
        }
    }

    #[test]
    fn copies_cover_every_output_element_once() {
        // A rank-4 transpose that needs an unrolled axis and a C axis of extent 1.
        let a = transpose_axes(&[3, 2, 4, 5], &[3, 1, 0, 2]);
        let copies = plan_copies(&a).expect("few copies");
        let mut hit = vec![0; 120];
        for (_, oo, shape, _, ost, _) in &copies {
            for h in 0..shape[0] {
                for w in 0..shape[1] {
                    for c in 0..shape[2] {
                        hit[oo + h * ost[0] + w * ost[1] + c * ost[2]] += 1;
                    }
                }
            }
        }
        assert!(hit.iter().all(|&n| n == 1));
    }

    /// The input element each output element reads, by running `copies` (reversed boxes
    /// written backwards, as the NPU does).
    fn sources(copies: &[CopyPlan], n_out: usize) -> Vec<Option<usize>> {
        let mut src = vec![None; n_out];
        for &(io, oo, shape, ist, ost, rev) in copies {
            for h in 0..shape[0] {
                for w in 0..shape[1] {
                    for c in 0..shape[2] {
                        let (oh, ow) = (
                            if rev[0] { shape[0] - 1 - h } else { h },
                            if rev[1] { shape[1] - 1 - w } else { w },
                        );
                        let i = io + h * ist[0] + w * ist[1] + c * ist[2];
                        src[oo + oh * ost[0] + ow * ost[1] + c * ost[2]] = Some(i);
                    }
                }
            }
        }
        src
    }

    #[test]
    fn reflected_runs_are_one_backwards_copy_each() {
        // MirrorPad REFLECT by 2 on both sides of a 5-row, 3-channel tensor: rows
        // 2 1 | 0 1 2 3 4 | 3 2.
        let map = vec![2, 1, 0, 1, 2, 3, 4, 3, 2];
        let plan = RemapPlan {
            in_shape: vec![5, 3],
            out_shape: vec![9, 3],
            maps: vec![map.clone(), vec![0, 1, 2]],
        };
        let axes = remap_axes(&plan);
        assert_eq!(
            axes[0].segs,
            vec![(2, 0, 3, true), (1, 3, 4, false), (3, 7, 2, true)]
        );
        let copies = plan_copies(&axes).expect("copies");
        assert_eq!(copies.len(), 3);
        let want: Vec<Option<usize>> = map
            .iter()
            .flat_map(|&r| (0..3).map(move |c| Some(r * 3 + c)))
            .collect();
        assert_eq!(sources(&copies, 27), want);
        // Reversal along the innermost (C) axis is unrolled: the hardware walks C forwards.
        let plan = RemapPlan {
            in_shape: vec![2, 4],
            out_shape: vec![2, 4],
            maps: vec![vec![0, 1], vec![3, 2, 1, 0]],
        };
        let copies = plan_copies(&remap_axes(&plan)).expect("copies");
        let want: Vec<Option<usize>> = (0..2)
            .flat_map(|r| (0..4).map(move |c| Some(r * 4 + 3 - c)))
            .collect();
        assert_eq!(sources(&copies, 8), want);
    }

    #[test]
    fn mirror_pads_fill_from_the_output_in_five_copies() {
        // [1, 8, 8, 16] padded (1, 2) in H and (2, 1) in W, both modes: the middle, two
        // backwards copies of rows, two of columns over the full height.
        for (mode, edge) in [(PadMode::Reflect, 1), (PadMode::Symmetric, 0)] {
            let pads = [(0, 0), (1, 2), (2, 1), (0, 0)];
            let steps = mirror_steps(&[1, 8, 8, 16], &pads, mode, usize::MAX).expect("steps");
            assert_eq!(steps.iter().map(|s| s.1.len()).sum::<usize>(), 5);
            // Run the steps on coordinates: output element -> input element it ends up with.
            let (oh, ow) = (11, 11);
            let mut y: Vec<Option<usize>> = vec![None; oh * ow * 16];
            for (from_y, copies) in &steps {
                let src_of = |i: usize, y: &[Option<usize>]| if *from_y { y[i] } else { Some(i) };
                for &(io, oo, shape, ist, ost, rev) in copies {
                    let snapshot = y.clone();
                    for h in 0..shape[0] {
                        for w in 0..shape[1] {
                            for c in 0..shape[2] {
                                let (th, tw) = (
                                    if rev[0] { shape[0] - 1 - h } else { h },
                                    if rev[1] { shape[1] - 1 - w } else { w },
                                );
                                let i = io + h * ist[0] + w * ist[1] + c * ist[2];
                                y[oo + th * ost[0] + tw * ost[1] + c * ost[2]] =
                                    src_of(i, &snapshot);
                            }
                        }
                    }
                }
            }
            let mirror = |o: usize, b: usize, n: usize| -> usize {
                if o < b {
                    b - o - 1 + edge
                } else if o < b + n {
                    o - b
                } else {
                    n - 1 - edge - (o - b - n)
                }
            };
            for r in 0..oh {
                for q in 0..ow {
                    for c in 0..16 {
                        let want = (mirror(r, 1, 8) * 8 + mirror(q, 2, 8)) * 16 + c;
                        assert_eq!(
                            y[(r * ow + q) * 16 + c],
                            Some(want),
                            "{mode:?} ({r}, {q}, {c})"
                        );
                    }
                }
            }
        }
    }
}
