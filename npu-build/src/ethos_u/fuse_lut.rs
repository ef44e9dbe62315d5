//! Lookup-table activations fused into the operation before them.
//!
//! An element-wise function (`ActFn`: hard swish, sigmoid, swish, ...) lowers to a 1x1 pool
//! that copies its input unchanged (zero points 0, unit scale) through a lookup table
//! (`lower/act_fn.rs`). When that input is the output of the operation just before (a
//! convolution, say) and nothing else reads it, the table can go in that operation's own output
//! stage instead, as Vela does (`convert_to_lut` + its activation fusing): the operation
//! computes the same byte it would have stored (its own scale, zero point and clamp), the table
//! is indexed by that byte and the result goes straight to the function's output. One pass over
//! the feature map less, and no intermediate buffer.
//!
//! Only fused where the first operation does not clamp (its activation spans its type), so the
//! order of the clamp and the table in the output stage cannot matter, and where both are the
//! whole lowering of consecutive IR operators.

use std::collections::HashSet;
use std::ops::Range;

use super::npu_op::{Activation, BufferId, BufferKind, NpuOp, NpuOpKind, Program, Scale};
use npu_rt::ethos_u::regs::fields::IfmUpscaleMode;

/// Whether `op` is [`lower/act_fn.rs`]'s table copy: a unit 1x1 pool, raw bytes in and out.
fn is_table_copy(op: &NpuOp) -> bool {
    matches!(op.kind, NpuOpKind::Pool(_))
        && op.activation.lut.is_some()
        && op.kernel.h == 1
        && op.kernel.w == 1
        && op.kernel.stride_y == 1
        && op.kernel.stride_x == 1
        && op.padding == crate::ir::Padding::default()
        && op.upscale == IfmUpscaleMode::None
        && op.ifm.zero_point == 0
        && op.ofm.zero_point == 0
        && op.ofm_scale == Some(Scale::UNIT)
        && op.ifm.shape == op.ofm.shape
        && op.ifm.dtype == op.ofm.dtype
}

/// Fuses every table copy into the operation before it where that is exact (see the module
/// documentation). `ranges` (IR operator -> program operations) are kept consistent: the
/// function's operator keeps an empty range. `pinned` buffers (read by CPU steps) stay.
/// Returns how many were fused.
pub(super) fn fuse(
    program: &mut Program,
    ranges: &mut [Range<usize>],
    pinned: &HashSet<BufferId>,
) -> usize {
    let owner = super::stripe::owners(ranges, program.ops.len());
    let mut uses = vec![0usize; program.buffers.len()];
    for b in program.ops.iter().flat_map(NpuOp::buffers) {
        if let Some(u) = uses.get_mut(b.index()) {
            *u += 1;
        }
    }
    let mut removed = vec![false; program.ops.len()];
    let mut fused = 0;
    for k in 0..program.ops.len().saturating_sub(1) {
        if removed[k] {
            continue;
        }
        let (a, l) = (&program.ops[k], &program.ops[k + 1]);
        let b = a.ofm.buffer;
        let single = |j: usize| {
            owner[j]
                .and_then(|i| ranges.get(i))
                .is_some_and(|r| r.len() == 1)
        };
        let full_range = {
            let (lo, hi) = a.ofm.dtype.range();
            a.activation.lut.is_none()
                && a.activation.builtin.is_none()
                && i64::from(a.activation.min) <= lo
                && i64::from(a.activation.max) >= hi
        };
        let ok = is_table_copy(l)
            && full_range
            && single(k)
            && single(k + 1)
            && owner[k].zip(owner[k + 1]).is_some_and(|(x, y)| y == x + 1)
            && l.ifm.buffer == b
            && l.ifm.offset == a.ofm.offset
            && l.ifm.shape == a.ofm.shape
            && l.ifm.strides == a.ofm.strides
            && l.ifm.layout == a.ofm.layout
            && a.ofm.reverse == [false; 2]
            && l.ofm.reverse == [false; 2]
            && a.ofm.dtype == l.ofm.dtype
            && program.buffers[b].io.is_none()
            && matches!(program.buffers[b].kind, BufferKind::Arena)
            && !pinned.contains(&b)
            && uses[b.index()] == 2;
        if !ok {
            continue;
        }
        let l = program.ops[k + 1].clone();
        let a = &mut program.ops[k];
        a.ofm = super::npu_op::FeatureMap {
            zero_point: a.ofm.zero_point,
            ..l.ofm
        };
        a.activation = Activation {
            lut: l.activation.lut,
            ..a.activation
        };
        program.buffers[b].size = 0;
        removed[k + 1] = true;
        fused += 1;
    }
    if fused == 0 {
        return 0;
    }
    program.remove_ops(&removed, ranges);
    fused
}
