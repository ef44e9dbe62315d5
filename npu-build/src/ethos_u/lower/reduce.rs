//! Lowering of REDUCE_MAX over any set of axes that re-views as one pooled axis: the input is
//! re-viewed (no data movement) as `[H, W, C]` with the reduced axes collapsed into W, then one
//! MAX pooling with a `1 x W` kernel, as Vela pools a reduced axis (Vela's REDUCE_MAX over
//! channels: IFM `[H*W, C, 1]`, kernel `C x 1` in its notation; `docs/reduce.md`).
//!
//! Equal input/output quantization compares the raw values; a different output quantization is
//! applied by the same pooling's OFM scale (max commutes with the monotonic rescale), as the
//! MaxPool lowering does. SUM, REDUCE_MIN, ARG_MAX and ARG_MIN stay on the CPU.

use super::Lowering;
use super::pool::{MAX_POOL_KERNEL_AREA, MAX_POOL_KERNEL_H, lower_max, single_io};
use super::softmax::reshape;
use crate::error::Result;
use crate::ir::{Activation, Op, OpKind, Padding, PoolAttrs, ReduceOp};

/// `shape` without its size-1 axes, adjacent axes of the same kind (reduced or kept) merged:
/// `(size, reduced)` runs, alternating.
pub(super) fn runs(shape: &[usize], axes: &[usize]) -> Vec<(usize, bool)> {
    let mut out: Vec<(usize, bool)> = Vec::new();
    for (i, &d) in shape.iter().enumerate() {
        if d == 1 {
            continue;
        }
        let r = axes.contains(&i);
        match out.last_mut() {
            Some((n, pr)) if *pr == r => *n = n.saturating_mul(d),
            _ => out.push((d, r)),
        }
    }
    out
}

/// The `[H, W, C]` view with the reduced run as W, or why there is none.
fn view(shape: &[usize], axes: &[usize]) -> std::result::Result<[usize; 3], String> {
    Ok(match runs(shape, axes).as_slice() {
        [] => [1, 1, 1],
        [(k, false)] => [1, 1, *k],
        [(r, true)] => [1, *r, 1],
        [(k, false), (r, true)] => [*k, *r, 1],
        [(r, true), (k, false)] => [1, *r, *k],
        [(k, false), (r, true), (c, false)] => [*k, *r, *c],
        _ => {
            return Err(format!(
                "the reduced axes {axes:?} of {shape:?} are not one contiguous run"
            ));
        }
    })
}

pub(super) fn lower(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    let OpKind::Reduce {
        op: ReduceOp::Max,
        axes,
        ..
    } = &op.kind
    else {
        return Err(cx.limit(
            op,
            "the NPU lowering takes REDUCE_MAX only; SUM and REDUCE_MIN run on the CPU",
        ));
    };
    let (x, y) = single_io(op)?;
    let shape = cx.graph.tensors[x].shape.clone();
    if shape.contains(&0) {
        return Err(cx.limit(op, format!("empty input {shape:?}")));
    }
    let v = view(&shape, axes).map_err(|e| cx.limit(op, e))?;
    let kw = v[1];
    if kw > MAX_POOL_KERNEL_H || kw > MAX_POOL_KERNEL_AREA {
        return Err(cx.limit(
            op,
            format!(
                "a reduced run of {kw} elements (one pooling takes at most {MAX_POOL_KERNEL_H})"
            ),
        ));
    }
    let x_fm = cx.fm(op, x)?;
    let y_fm = cx.fm(op, y)?;
    let dense = |cx: &Lowering<'_>| {
        cx.limit(
            op,
            "input or output is not a dense NHWC tensor (slice or brick format)",
        )
    };
    let xv = reshape(&x_fm, v).ok_or_else(|| dense(cx))?;
    let yv = reshape(&y_fm, [v[0], 1, v[2]]).ok_or_else(|| dense(cx))?;
    let attrs = PoolAttrs {
        kernel: (1, kw),
        stride: (1, 1),
        padding: Padding::default(),
        activation: Activation::None,
    };
    let same = cx.quant(x) == cx.quant(y);
    lower_max(cx, op, &attrs, x, y, xv, yv, same)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_collapse_runs_of_axes() {
        assert_eq!(view(&[1, 8, 8, 16], &[3]), Ok([64, 16, 1]));
        assert_eq!(view(&[1, 8, 8, 16], &[1, 2]), Ok([1, 64, 16]));
        assert_eq!(view(&[2, 3, 4, 5], &[1, 2]), Ok([2, 12, 5]));
        assert_eq!(view(&[2, 3, 4, 5], &[0, 1, 2, 3]), Ok([1, 120, 1]));
        assert_eq!(view(&[1, 4, 1, 6], &[2]), Ok([1, 1, 24]));
        assert!(view(&[2, 3, 4, 5], &[1, 3]).is_err());
    }
}
