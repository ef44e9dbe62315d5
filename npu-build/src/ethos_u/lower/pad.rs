//! Lowering of Pad (constant padding), and the border fill other lowerings reuse.
//!
//! The output's border is filled with the pad value, then the input is copied into the
//! interior slice. The fills cover only the border (up to six boxes), so no two operations
//! write the same bytes. A fill is a 1x1 AVERAGE pool with OFM_SCALE 0 whose OFM zero point is
//! the value: `out = value + 0 * (in - 0)`; its IFM is the box being filled (any bytes of the
//! right shape would do, and these are always in bounds).

use npu_rt::ethos_u::regs::fields::RoundMode;

use super::Lowering;
use super::fmap::{as_i16_pairs, slice};
use super::op_builders::{copy_op, nop, single_io};
use crate::error::Result;
use crate::ethos_u::npu_op::{Activation as NpuActivation, ElemType, FeatureMap, Scale};
use crate::ir::{DType, Op, OpKind};
use npu_rt::fixed::multiply_by_quantized_multiplier;

pub(super) fn lower(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    let OpKind::Pad { pads, value } = &op.kind else {
        return Err(Lowering::invalid(op, "internal: not a Pad"));
    };
    let (x, y) = single_io(op)?;
    let g = cx.graph;
    let (xt, yt) = (&g.tensors[x], &g.tensors[y]);
    if xt.dtype != yt.dtype || xt.dtype == DType::F32 || xt.dtype == DType::I64 {
        return Err(cx.limit(
            op,
            format!(
                "padding {} into {}: the NPU pads i8, u8, i16 and i32 tensors of one type",
                xt.dtype, yt.dtype
            ),
        ));
    }
    let rank = xt.shape.len();
    let fits = pads.len() == rank
        && yt.shape.len() == rank
        && (0..rank).all(|d| {
            xt.shape[d]
                .checked_add(pads[d].0)
                .and_then(|v| v.checked_add(pads[d].1))
                == Some(yt.shape[d])
        });
    if !fits {
        return Err(Lowering::invalid(
            op,
            format!("pads {pads:?} do not take {:?} to {:?}", xt.shape, yt.shape),
        ));
    }
    // Map the padded dimensions onto [H, W, C]: the last three dimensions (leading ones of a
    // 4-D tensor are the batch, which must not be padded; see `Lowering::hwc`).
    let mut before = [0usize; 3];
    for (d, &(b, a)) in pads.iter().enumerate() {
        let axis = d as isize + 3 - rank as isize;
        match axis {
            i if i >= 0 => before[i as usize] = b,
            _ if b == 0 && a == 0 => {}
            _ => {
                return Err(cx.limit(
                    op,
                    format!("padding dimension {d} (the batch) of a {rank}-D tensor"),
                ));
            }
        }
    }
    let xfm = cx.fm(op, x)?;
    let yfm = cx.fm(op, y)?;
    let (si, zi) = cx.quant(x);
    let (so, zo) = cx.quant(y);
    let value = value.unwrap_or(zi);
    let same = (si, zi) == (so, zo) || xt.quant.is_none() || yt.quant.is_none();
    if same {
        fill_border(cx, op, &yfm, before, xfm.shape, value)?;
        let interior = slice(&yfm, before, xfm.shape)?;
        let o = copy_op(&op.name, xfm, interior)?;
        cx.program.ops.push(o);
        return Ok(());
    }
    // Different output quantization: pad, then requantize (the reference's order), i.e. fill
    // with the requantized value and requantize the input into the interior.
    if yfm.dtype == ElemType::I32 {
        return Err(cx.limit(op, "requantizing an i32 Pad"));
    }
    let real = f64::from(si) / f64::from(so);
    let scale = super::op_builders::ofm_scale(real).ok_or_else(|| {
        cx.limit(
            op,
            format!("rescale factor {real} is outside the OFM_SCALE range"),
        )
    })?;
    let (m, e) = npu_rt::fixed::quantize_multiplier(real);
    let (lo, hi) = yfm.dtype.range();
    let filled = i64::from(multiply_by_quantized_multiplier(
        value.wrapping_sub(zi),
        m,
        e,
    ))
    .saturating_add(i64::from(zo))
    .clamp(lo, hi) as i32;
    fill_border(cx, op, &yfm, before, xfm.shape, filled)?;
    let interior = slice(&yfm, before, xfm.shape)?;
    let activation = NpuActivation::none(yfm.dtype);
    cx.program.ops.push(nop(
        &op.name,
        xfm,
        interior,
        scale,
        RoundMode::Dbl,
        activation,
    ));
    Ok(())
}

/// Fills everything of `full` outside the box at `origin` of size `inner` with the quantized
/// `value`, with at most six non-overlapping fill operations.
pub(super) fn fill_border(
    cx: &mut Lowering<'_>,
    op: &Op,
    full: &FeatureMap,
    origin: [usize; 3],
    inner: [usize; 3],
    value: i32,
) -> Result<()> {
    let [hh, ww, cc] = full.shape;
    let [t, l, f] = origin;
    let [h, w, c] = inner;
    if t + h > hh || l + w > ww || f + c > cc {
        return Err(Lowering::invalid(
            op,
            format!(
                "internal: interior {origin:?}+{inner:?} outside {:?}",
                full.shape
            ),
        ));
    }
    let boxes = [
        ([0, 0, 0], [t, ww, cc]),
        ([t + h, 0, 0], [hh - t - h, ww, cc]),
        ([t, 0, 0], [h, l, cc]),
        ([t, l + w, 0], [h, ww - l - w, cc]),
        ([t, l, 0], [h, w, f]),
        ([t, l, f + c], [h, w, cc - f - c]),
    ];
    for (o, s) in boxes {
        if s.contains(&0) {
            continue;
        }
        let target = slice(full, o, s)?;
        let fill = fill_op(cx, op, target, value)?;
        cx.program.ops.push(fill);
    }
    Ok(())
}

/// One operation writing `value` to every element of `target`.
fn fill_op(
    cx: &Lowering<'_>,
    op: &Op,
    target: FeatureMap,
    value: i32,
) -> Result<crate::ethos_u::npu_op::NpuOp> {
    let target = if target.dtype == ElemType::I32 {
        if value != 0 {
            return Err(cx.limit(
                op,
                format!("padding an i32 tensor with {value} (only 0 is supported)"),
            ));
        }
        as_i16_pairs(&target).ok_or_else(|| {
            Lowering::invalid(op, "internal: an i32 fill needs an NHWC feature map")
        })?
    } else {
        target
    };
    let (lo, hi) = target.dtype.range();
    if i64::from(value) < lo || i64::from(value) > hi {
        return Err(Lowering::invalid(
            op,
            format!("pad value {value} does not fit {:?}", target.dtype),
        ));
    }
    let mut ifm = target.clone();
    ifm.zero_point = 0;
    let mut ofm = target;
    ofm.zero_point = value;
    let activation = NpuActivation::none(ofm.dtype);
    Ok(nop(
        &op.name,
        ifm,
        ofm,
        Scale { scale: 0, shift: 0 },
        RoundMode::Natural,
        activation,
    ))
}
