//! Lowering of Slice (SLICE, STRIDED_SLICE, SPLIT, SPLIT_V, UNPACK): one NPU copy whose IFM is
//! the box in the input's feature map.
//!
//! The box's origin moves the IFM base address; a step along H or W multiplies the IFM's Y or X
//! stride (the NPU addresses NHWC feature maps with byte strides per H, W and C, Vela's
//! `high_level_command_to_npu_op.py` `get_strides`); the OFM is the output, dense. What the
//! strides cannot express stays on the CPU (a hardware-limit error the partitioner routes
//! there): a step along the channels (in NHWC the channel stride is the element size), a
//! negative step (our feature-map strides are unsigned; the hardware's are not, see
//! `docs/movea.md`), and boxes that cut a leading dimension the `[H, W, C]` view folds away.

use super::fmap::view;
use super::op_builders::{copy_op, single_io};
use super::{Layout, Lowering};
use crate::error::Result;
use crate::ir::{Op, OpKind};
use crate::reference::slice::Slice;

pub(super) fn lower(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    let OpKind::Slice { begin, step, size } = &op.kind else {
        return Err(Lowering::invalid(op, "internal: not a Slice"));
    };
    let (x, y) = single_io(op)?;
    // The reference interpreter's checks (box inside the input, types, element count).
    let s = Slice::new(cx.graph, op, begin, step, size)?;
    if s.size.contains(&0) {
        return Ok(());
    }
    let rank = s.in_shape.len();
    let xfm = cx.fm(op, x)?;
    if xfm.layout != Layout::Nhwc {
        return Err(cx.limit(op, "the input of a slice must be NHWC"));
    }
    // Input dimensions beyond the last three fold into the `[H, W, C]` view (they are 1 there,
    // see `Lowering::hwc`); the last three map onto H, W and C.
    let lead = rank.saturating_sub(3);
    for d in 0..lead {
        if s.size[d] != s.in_shape[d] {
            return Err(cx.limit(
                op,
                format!("a slice of dimension {d} of a rank-{rank} tensor"),
            ));
        }
    }
    let mut origin = [0usize; 3];
    let mut extent = [1usize; 3];
    let mut steps = [1i64; 3];
    for d in lead..rank {
        let k = d + 3 - rank;
        origin[k] = s.begin[d];
        extent[k] = s.size[d];
        steps[k] = s.step[d];
    }
    // A dimension of extent 1 is read once: its step does not matter.
    for k in 0..3 {
        if extent[k] == 1 {
            steps[k] = 1;
        }
    }
    if steps[2] != 1 {
        return Err(cx.limit(
            op,
            format!(
                "a step of {} along the channels (NHWC channels are contiguous)",
                steps[2]
            ),
        ));
    }
    if steps.iter().any(|&v| v < 0) {
        return Err(cx.limit(
            op,
            "a negative step (the lowering's feature-map strides are unsigned)",
        ));
    }
    let mut src = xfm.clone();
    src.offset = xfm.offset
        + origin[0] * xfm.strides[0]
        + origin[1] * xfm.strides[1]
        + origin[2] * xfm.strides[2];
    src.shape = extent;
    src.strides[0] = xfm.strides[0] * steps[0] as usize;
    src.strides[1] = xfm.strides[1] * steps[1] as usize;
    let yfm = cx.fm(op, y)?;
    let dst = view(&yfm, extent).ok_or_else(|| {
        cx.limit(
            op,
            format!(
                "output '{}' is not a dense NHWC tensor",
                cx.graph.tensors[y].name
            ),
        )
    })?;
    let copy = copy_op(&op.name, src, dst)?;
    cx.program.ops.push(copy);
    Ok(())
}
