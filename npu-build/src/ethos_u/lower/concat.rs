//! Lowering of Concat: one copy per input into its slice of the output (docs/numerics.md,
//! "Concatenation").
//!
//! The OFM of each copy is the output tensor's box at the input's offset along the axis, with
//! the full tensor's strides. Inputs quantized like the output are copied (clamped by the fused
//! activation when it restricts the range). An input with another quantization is converted
//! with TFLite's `ConcatenationWithScaling` formula, which is float arithmetic
//! (`round(q * s + b) + zp_out`); for 8-bit tensors every possible input value is tabulated
//! into a 256-entry lookup table applied by the copy, which is exact; 16-bit inputs with a
//! different quantization stay on the CPU.

use super::Lowering;
use super::fmap::slice;
use super::op_builders::{clamp, copy_op, lookup};
use crate::error::Result;
use crate::ethos_u::npu_op::ElemType;
use crate::ir::{Activation, Op, OpKind};

pub(super) fn lower(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    let OpKind::Concat { axis, activation } = &op.kind else {
        return Err(Lowering::invalid(op, "internal: not a Concat"));
    };
    let (axis, activation) = (*axis, *activation);
    let y = match op.outputs.as_slice() {
        [y] => *y,
        _ => return Err(Lowering::invalid(op, "expects one output")),
    };
    if op.inputs.is_empty() {
        return Err(Lowering::invalid(op, "expects at least one input"));
    }
    let g = cx.graph;
    let yt = &g.tensors[y];
    let rank = yt.shape.len();
    if axis >= rank {
        return Err(Lowering::invalid(
            op,
            format!("axis {axis} out of range for rank {rank}"),
        ));
    }
    for &i in &op.inputs {
        let t = &g.tensors[i];
        let fits = t.shape.len() == rank
            && (0..rank).all(|d| d == axis || t.shape[d] == yt.shape[d])
            && t.dtype == yt.dtype;
        if !fits {
            return Err(Lowering::invalid(
                op,
                format!(
                    "input '{}' {:?} ({}) does not fit output {:?} ({}) along axis {axis}",
                    t.name, t.shape, t.dtype, yt.shape, yt.dtype
                ),
            ));
        }
    }
    let total = op
        .inputs
        .iter()
        .try_fold(0usize, |acc, &i| acc.checked_add(g.tensors[i].shape[axis]))
        .unwrap_or(usize::MAX);
    if total != yt.shape[axis] {
        return Err(Lowering::invalid(
            op,
            format!(
                "inputs add up to {total} along axis {axis}, the output has {}",
                yt.shape[axis]
            ),
        ));
    }
    let yfm = cx.fm(op, y)?;
    // The axis in [H, W, C] (see `Lowering::hwc`); leading dimensions outside it are 1.
    let hwc_axis = axis as isize + 3 - rank as isize;
    let quantized = yt.quant.is_some();
    let act = if quantized {
        activation
    } else {
        Activation::None
    };
    let range = clamp(cx, op, act, y, yfm.dtype)?;
    let (full_lo, full_hi) = yfm.dtype.range();
    let restricts =
        i64::from(range.min) > full_lo.max(-32768) || i64::from(range.max) < full_hi.min(32767);
    let mut start = 0usize;
    for &i in &op.inputs {
        let xt = &g.tensors[i];
        let extent = xt.shape[axis];
        if extent == 0 {
            continue;
        }
        let xfm = cx.fm(op, i)?;
        let mut origin = [0usize; 3];
        if hwc_axis >= 0 {
            origin[hwc_axis as usize] = start;
        }
        let dst = slice(&yfm, origin, xfm.shape)?;
        start += extent;
        let same = !quantized || xt.quant.is_none() || cx.quant(i) == cx.quant(y);
        if same {
            let mut copy = copy_op(&op.name, xfm, dst)?;
            if restricts {
                // Zero points are 0, so the clamp applies to the raw values, as in TFLite.
                copy.activation.min = range.min;
                copy.activation.max = range.max;
            }
            cx.program.ops.push(copy);
            continue;
        }
        if !matches!(yfm.dtype, ElemType::I8 | ElemType::U8) {
            return Err(cx.limit(
                op,
                format!(
                    "input '{}' of type {} is quantized differently from the output; only 8-bit concatenations are rescaled on the NPU",
                    xt.name, xt.dtype
                ),
            ));
        }
        let (si, zi) = cx.quant(i);
        let (so, zo) = cx.quant(y);
        let table = rescale_table(yfm.dtype, si, zi, so, zo, (range.min, range.max));
        let lut = cx.const_buffer(format!("{}/rescale_lut_{}", op.name, xt.name), table);
        cx.program.ops.push(lookup(&op.name, xfm, dst, lut));
    }
    Ok(())
}

/// The 256-entry table of TFLite's `ConcatenationWithScaling` for 8-bit `dtype`: entry `k` is
/// the output for input value `k - 128` (int8) or `k` (uint8).
fn rescale_table(
    dtype: ElemType,
    si: f32,
    zi: i32,
    so: f32,
    zo: i32,
    range: (i32, i32),
) -> Vec<u8> {
    let scale = si * (1.0 / so);
    let bias = -(zi as f32) * scale;
    let offset = if dtype == ElemType::I8 { -128 } else { 0 };
    (0..256i32)
        .map(|k| {
            let q = k + offset;
            let v = ((q as f32) * scale + bias).round() as i32 + zo;
            let v = v.clamp(range.0, range.1.max(range.0));
            v as u8
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rescale_table_follows_concatenation_with_scaling() {
        // int8, scale halved, zero points 2 -> -3.
        let t = rescale_table(ElemType::I8, 0.5, 2, 1.0, -3, (-128, 127));
        // q = -128: (-128 * 0.5 - 1).round() - 3 = -68
        assert_eq!(t[0] as i8, -68);
        // q = 2 (k = 130): 0 - 3
        assert_eq!(t[130] as i8, -3);
        // q = 3: (1.5 - 1) = 0.5 rounds away from zero -> 1, then -3
        assert_eq!(t[131] as i8, -2);
        // uint8 with a clamp.
        let u = rescale_table(ElemType::U8, 2.0, 0, 1.0, 10, (0, 200));
        assert_eq!(u[0], 10);
        assert_eq!(u[50], 110);
        assert_eq!(u[255], 200);
    }
}
