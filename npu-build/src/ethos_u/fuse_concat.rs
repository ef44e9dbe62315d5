//! Operations that write their output straight into a concatenation.
//!
//! Concat lowers to one copy per input into its slice of the output (`lower/concat.rs`). When
//! an input is an intermediate that only its producers write and only that copy reads, the
//! producers can write their results into the slice themselves, as Vela's do (its concat
//! "subops" write into the output tensor at an offset): one pass over the feature map less and
//! no intermediate buffer. In a U-Net the transposed convolution's four phase convolutions
//! then write their interleaved rows and columns straight into the skip concatenation.
//!
//! The rewrite is a change of addresses only: each producer's OFM box inside the input buffer
//! (an NHWC buffer the copy reads whole and densely) is mapped element for element onto the
//! copy's OFM box (NHWC, any strides): the producer's start element and its strides, counted in
//! the input's elements, are carried over into the output's strides. Only exact copies qualify
//! (unit scale, zero points 0, no clamp, no table, same element type), so every stored byte is
//! the one the copy would have stored.

use std::collections::HashSet;
use std::ops::Range;

use super::npu_op::{BufferId, BufferKind, FeatureMap, Layout, NpuOp, NpuOpKind, Program, Scale};
use npu_rt::ethos_u::regs::fields::IfmUpscaleMode;

/// Whether `op` is an exact copy: a unit 1x1 pool, raw bytes in and out, no clamp or table.
fn is_plain_copy(op: &NpuOp) -> bool {
    let (lo, hi) = op.ofm.dtype.range();
    matches!(op.kind, NpuOpKind::Pool(_))
        && op.ifm.reverse == [false; 2]
        && op.ofm.reverse == [false; 2]
        && op.activation.lut.is_none()
        && op.activation.builtin.is_none()
        && i64::from(op.activation.min) <= lo.max(-32768)
        && i64::from(op.activation.max) >= hi.min(32767)
        && op.kernel == super::npu_op::Kernel::UNIT
        && op.padding == crate::ir::Padding::default()
        && op.upscale == IfmUpscaleMode::None
        && op.ifm.zero_point == 0
        && op.ofm.zero_point == 0
        && op.ofm_scale == Some(Scale::UNIT)
        && op.ifm.shape == op.ofm.shape
        && op.ifm.dtype == op.ofm.dtype
}

/// The dense NHWC strides of `shape` with `e`-byte elements.
fn dense(shape: [usize; 3], e: usize) -> [usize; 3] {
    [shape[1] * shape[2] * e, shape[2] * e, e]
}

/// `w` (a box in the buffer `src` views densely) moved onto `dst` (the same elements' box in
/// another buffer), or `None` when `w` is not a box of whole elements of `src` with strides
/// that are multiples of `src`'s.
fn remap(w: &FeatureMap, src: &FeatureMap, dst: &FeatureMap) -> Option<FeatureMap> {
    let e = src.dtype.bytes();
    if w.layout != Layout::Nhwc || w.dtype.bytes() != e || w.strides[2] != e {
        return None;
    }
    let s = src.strides;
    let rel = w.offset.checked_sub(src.offset)?;
    let (h0, rest) = (rel / s[0], rel % s[0]);
    let (w0, rest) = (rest / s[1], rest % s[1]);
    if !rest.is_multiple_of(e)
        || !w.strides[0].is_multiple_of(s[0])
        || !w.strides[1].is_multiple_of(s[1])
    {
        return None;
    }
    let c0 = rest / e;
    let (kh, kw) = (w.strides[0] / s[0], w.strides[1] / s[1]);
    // The box must stay inside the source tensor.
    let inside =
        |start: usize, k: usize, n: usize, size: usize| n == 0 || start + k * (n - 1) < size;
    if !(inside(h0, kh, w.shape[0], src.shape[0])
        && inside(w0, kw, w.shape[1], src.shape[1])
        && c0 + w.shape[2] <= src.shape[2])
    {
        return None;
    }
    let d = dst.strides;
    Some(FeatureMap {
        buffer: dst.buffer,
        offset: dst.offset + h0 * d[0] + w0 * d[1] + c0 * d[2],
        strides: [kh * d[0], kw * d[1], d[2]],
        layout: Layout::Nhwc,
        ..w.clone()
    })
}

/// Moves producers into the concatenation copies that read their output (see the module
/// documentation) and removes those copies. `ranges` (IR operator -> program operations) stay
/// consistent; `pinned` buffers (touched by CPU steps) and model inputs/outputs are left alone.
/// Returns how many copies were removed.
pub(super) fn fuse(
    program: &mut Program,
    ranges: &mut [Range<usize>],
    pinned: &HashSet<BufferId>,
) -> usize {
    let n = program.ops.len();
    let mut writers: Vec<Vec<usize>> = vec![Vec::new(); program.buffers.len()];
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); program.buffers.len()];
    for (k, op) in program.ops.iter().enumerate() {
        if let Some(w) = writers.get_mut(op.ofm.buffer.index()) {
            w.push(k);
        }
        for b in op.buffers().filter(|&b| b != op.ofm.buffer) {
            if let Some(r) = readers.get_mut(b.index()) {
                r.push(k);
            }
        }
    }
    let mut removed = vec![false; n];
    for k in 0..n {
        let l = &program.ops[k];
        if !is_plain_copy(l) || l.ifm.layout != Layout::Nhwc || l.ofm.layout != Layout::Nhwc {
            continue;
        }
        let a = l.ifm.buffer;
        let Some(buf) = program.buffers.get(a.index()) else {
            continue;
        };
        let e = l.ifm.dtype.bytes();
        let whole = l.ifm.offset == 0
            && l.ifm.strides == dense(l.ifm.shape, e)
            && buf.size == l.ifm.shape.iter().product::<usize>() * e;
        let ws = &writers[a.index()];
        let ok = whole
            && a != l.ofm.buffer
            && matches!(buf.kind, BufferKind::Arena)
            && buf.io.is_none()
            && !pinned.contains(&a)
            && readers[a.index()] == [k]
            && !ws.is_empty()
            && ws
                .iter()
                .all(|&w| w < k && !removed[w] && program.ops[w].ofm.reverse == [false; 2]);
        if !ok {
            continue;
        }
        let (src, dst) = (l.ifm.clone(), l.ofm.clone());
        let Some(moved) = ws
            .iter()
            .map(|&w| remap(&program.ops[w].ofm, &src, &dst))
            .collect::<Option<Vec<FeatureMap>>>()
        else {
            continue;
        };
        for (&w, fm) in ws.iter().zip(moved) {
            program.ops[w].ofm = fm;
        }
        program.buffers[a].size = 0;
        removed[k] = true;
    }
    let fused = removed.iter().filter(|&&r| r).count();
    if fused == 0 {
        return 0;
    }
    program.remove_ops(&removed, ranges);
    fused
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethos_u::npu_op::ElemType;

    #[test]
    fn phase_writes_move_into_the_slice() {
        // A 4x4x2 int8 tensor written as four 2x2 phases, copied into channels 2..4 of a
        // 4x4x6 output.
        let src = FeatureMap::nhwc(BufferId(1), [4, 4, 2], ElemType::I8, 0);
        let mut dst = FeatureMap::nhwc(BufferId(2), [4, 4, 6], ElemType::I8, 0);
        dst.shape = [4, 4, 2];
        dst.offset = 2;
        let mut phase = src.clone();
        phase.shape = [2, 2, 2];
        phase.offset = 8 + 2; // row 1, column 1
        phase.strides = [16, 4, 1];
        let m = remap(&phase, &src, &dst).expect("remapped");
        assert_eq!(m.buffer, BufferId(2));
        assert_eq!(m.offset, 2 + 24 + 6);
        assert_eq!(m.strides, [48, 12, 1]);
        // A box reaching past the source is refused.
        phase.shape = [3, 2, 2];
        assert!(remap(&phase, &src, &dst).is_none());
    }
}
