//! Lowering of 8-bit resize (nearest neighbour and bilinear) by integer power-of-two factors,
//! through the IFM's 2x nearest upscaling (IFM_UPSCALE = NEAREST).
//!
//! A factor `f` of 2, 4 or 8 is `log2 f` operations, each reading its IFM upscaled 2x
//! (docs/numerics.md, "Resize"; as Arm's Vela does):
//! - nearest without aligned corners (TFLite's `floor(y / f)`, with or without half-pixel
//!   centres: both give `y / f` for integer factors): 1x1 average pools (plain copies);
//! - nearest with aligned corners (`out - 1 = f (in - 1)`, source `round(y / f)`): copies, then a
//!   depthwise convolution over the `f x f` upscaled window with a single 1 at its centre, i.e.
//!   the upscaled image shifted by `f / 2`;
//! - bilinear with aligned corners: copies, then an `f x f` average pool over the upscaled image
//!   (every output is the mean of `f x f` upscaled pixels, which equals TFLite's
//!   `ResizeBilinearInteger` weights for these factors), rounded half away from zero;
//! - bilinear without aligned corners or half-pixel centres: the same over the input padded by
//!   one replicated row and column at the bottom and right (TFLite clamps the second source
//!   pixel to the last one), so no padded average pool (whose hardware rounding is not
//!   established, docs/numerics.md, "Pooling") is needed;
//! - bilinear with half-pixel centres, 2x only: the input padded by one replicated pixel on every
//!   side, then four depthwise 2x2 convolutions, one per output phase (weights {1, 3} x {1, 3}
//!   / 16, each writing every other output pixel), as Vela does.
//!
//! TFLite resizes raw 8-bit values (no zero-point handling), so every operation here runs with
//! zero points 0. Axes of size 1 may take any output size up to `f` (all rows are the same row).

use npu_rt::ethos_u::regs::fields::{IfmUpscaleMode, PoolingMode};

use super::super::npu_op::{
    ChannelScale, ConvWeights, ElemType, FeatureMap, Kernel, Layout, NpuOp, NpuOpKind, Scale,
};
use super::Lowering;
use super::fmap::scratch_fm;
use super::op_builders::{pool_op, unit_depthwise};
use crate::error::Result;
use crate::ir::{Op, OpKind, ResizeMode};

/// OFM_SCALE of a 1x1 average pool: `ceil((2^31 + 1) / 1)` with shift 31, Vela's value for a
/// one-element window (`x * (2^31 + 1) / 2^31` rounds back to `x`).
const COPY_SCALE: Scale = Scale {
    scale: 0x8000_0001,
    shift: 31,
};

/// How a resize is decomposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    /// Nearest: upscaling copies only.
    Copy,
    /// Nearest with aligned corners: the upscaled image shifted by half a window.
    Select,
    /// Bilinear with aligned corners: the mean over a window of the upscaled image.
    Mean,
    /// Bilinear: the same over the input replicate-padded at the bottom and right.
    PaddedMean,
    /// Bilinear with half-pixel centres, 2x: four phase convolutions over the padded input.
    HalfPixel,
}

/// The upscaling factor `f` (2, 4 or 8) shared by every axis larger than 1, or a message
/// naming the factor the NPU cannot do. `sizes` are `(in, out)` per axis.
fn factor(sizes: [(usize, usize); 2], align_corners: bool) -> std::result::Result<usize, String> {
    let mut f = None;
    for (i, o) in sizes {
        if i <= 1 {
            continue;
        }
        let (num, den) = if align_corners {
            (o.saturating_sub(1), i - 1)
        } else {
            (o, i)
        };
        if num % den != 0 {
            return Err(format!(
                "resize {i} -> {o} is not an integer factor{}",
                if align_corners {
                    " (aligned corners: (out - 1) / (in - 1))"
                } else {
                    ""
                }
            ));
        }
        let v = num / den;
        match f {
            None => f = Some(v),
            Some(g) if g != v => {
                return Err(format!(
                    "factors {g} and {v} differ between height and width"
                ));
            }
            Some(_) => {}
        }
    }
    // With every axis of size 1 the largest output size is the factor.
    let f = f.unwrap_or_else(|| sizes[0].1.max(sizes[1].1).next_power_of_two());
    if !matches!(f, 2 | 4 | 8) {
        return Err(format!(
            "upscaling factor {f}; the NPU upscales by 2, 4 or 8"
        ));
    }
    for (i, o) in sizes {
        if i <= 1 && o > f {
            return Err(format!(
                "an axis of size 1 resized to {o}, more than the factor {f} of the other axis"
            ));
        }
    }
    Ok(f)
}

pub(super) fn lower(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    let OpKind::Resize {
        mode,
        align_corners,
        half_pixel_centers,
    } = op.kind
    else {
        return Err(Lowering::invalid(op, "not a resize"));
    };
    let (&x, &y) = match (op.inputs.first(), op.outputs.as_slice()) {
        (Some(x), [y]) => (x, y),
        _ => return Err(Lowering::invalid(op, "needs an input and one output")),
    };
    let dt = cx.elem_type(op, x)?;
    if !matches!(dt, ElemType::I8 | ElemType::U8) || cx.elem_type(op, y)? != dt {
        return Err(cx.limit(
            op,
            "the NPU resize handles int8 and uint8 (same type in and out)",
        ));
    }
    let [h, w, c] = cx.hwc(op, x)?;
    let [oh, ow, oc] = cx.hwc(op, y)?;
    if c != oc || h == 0 || w == 0 || oh == 0 || ow == 0 {
        return Err(Lowering::invalid(
            op,
            format!("input [{h}, {w}, {c}] and output [{oh}, {ow}, {oc}] do not resize H and W"),
        ));
    }
    // Raw values in, raw values out.
    let x_fm = FeatureMap {
        zero_point: 0,
        ..cx.fm(op, x)?
    };
    let y_fm = FeatureMap {
        zero_point: 0,
        ..cx.fm(op, y)?
    };
    let name = op.name.as_str();
    if align_corners && half_pixel_centers {
        return Err(Lowering::invalid(
            op,
            "aligned corners and half-pixel centres exclude each other",
        ));
    }
    if (oh, ow) == (h, w) {
        // Every mode maps each output pixel to the same input pixel.
        cx.program
            .ops
            .push(pool_op(name, PoolingMode::Average, x_fm, y_fm, COPY_SCALE));
        return Ok(());
    }
    let plan = match (mode, align_corners, half_pixel_centers) {
        (ResizeMode::Nearest, false, _) => Plan::Copy,
        (ResizeMode::Nearest, true, _) => Plan::Select,
        (ResizeMode::Bilinear, true, _) => Plan::Mean,
        (ResizeMode::Bilinear, false, false) => Plan::PaddedMean,
        (ResizeMode::Bilinear, false, true) => Plan::HalfPixel,
    };
    if plan != Plan::Copy && plan != Plan::Select && x_fm.layout != Layout::Nhwc {
        return Err(cx.limit(op, "bilinear resize of a brick-format input"));
    }
    let mut ops = Vec::new();
    if plan == Plan::HalfPixel {
        if (oh, ow) != (2 * h, 2 * w) {
            return Err(cx.limit(
                op,
                format!(
                    "bilinear resize with half-pixel centres {h}x{w} -> {oh}x{ow}; the NPU \
                     lowering handles 2x only"
                ),
            ));
        }
        let p = replicate_pad(cx, name, &x_fm, 1, &mut ops);
        for (py, px) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            ops.push(phase_op(name, &p, &y_fm, py, px));
        }
        cx.program.ops.extend(ops);
        return Ok(());
    }
    let f = factor([(h, oh), (w, ow)], align_corners).map_err(|e| cx.limit(op, e))?;
    let mut cur = if plan == Plan::PaddedMean {
        replicate_pad(cx, name, &x_fm, 0, &mut ops)
    } else {
        x_fm
    };

    // Fully upscaled size per axis; the chain doubles towards it.
    let full = |i: usize, o: usize| if i == 1 { o } else { f * i };
    let (full_h, full_w) = (full(h, oh), full(w, ow));
    let mut step = 2;
    while step < f {
        let next = [
            (2 * cur.shape[0]).min(full_h),
            (2 * cur.shape[1]).min(full_w),
            c,
        ];
        let up = scratch_fm(cx, format!("{name}/upscale{step}"), next, dt);
        ops.push(upscaled(pool_op(
            name,
            PoolingMode::Average,
            cur,
            up.clone(),
            COPY_SCALE,
        )));
        cur = up;
        step *= 2;
    }
    // The last step's window: f along upscaled axes, 1 along axes of size 1.
    let (kh, kw) = (if h == 1 { 1 } else { f }, if w == 1 { 1 } else { f });
    let last_op = match plan {
        Plan::Copy => pool_op(name, PoolingMode::Average, cur, y_fm, COPY_SCALE),
        Plan::Select => select_op(name, cur, y_fm, kh, kw),
        Plan::Mean | Plan::PaddedMean | Plan::HalfPixel => {
            // round_half_away(sum / n) for n = kh * kw = 2^m: the DBL rounding of
            // sum * 2^31 / 2^(31 + m) (exact first stage, half away from zero in the second).
            let m = (kh * kw).trailing_zeros() as u8;
            pool_op(
                name,
                PoolingMode::Average,
                cur,
                y_fm,
                Scale {
                    scale: 1 << 31,
                    shift: 31 + m,
                },
            )
            .with_kernel(Kernel {
                h: kh,
                w: kw,
                ..Kernel::UNIT
            })
        }
    };
    ops.push(upscaled(last_op));
    cx.program.ops.extend(ops);
    Ok(())
}

/// `fm` (NHWC) shifted to `origin` `[y, x]` with the given shape, same strides.
fn sub_box(fm: &FeatureMap, [y, x]: [usize; 2], shape: [usize; 3]) -> FeatureMap {
    FeatureMap {
        offset: fm.offset + y * fm.strides[0] + x * fm.strides[1],
        shape,
        ..fm.clone()
    }
}

/// Copies `x` into a new buffer with `before` replicated rows/columns at the top and left and
/// one at the bottom and right (edge pixels repeated, TFLite's clamped source indices); returns
/// the padded feature map. Rows are padded first so the column copies fill the corners.
fn replicate_pad(
    cx: &mut Lowering<'_>,
    name: &str,
    x: &FeatureMap,
    before: usize,
    ops: &mut Vec<NpuOp>,
) -> FeatureMap {
    let [h, w, c] = x.shape;
    let ph = h + before + 1;
    let pw = w + before + 1;
    let p = scratch_fm(cx, format!("{name}/padded"), [ph, pw, c], x.dtype);
    let copy = |ifm: FeatureMap, ofm: FeatureMap| {
        pool_op(name, PoolingMode::Average, ifm, ofm, COPY_SCALE)
    };
    ops.push(copy(x.clone(), sub_box(&p, [before, before], [h, w, c])));
    let row = [1, w, c];
    ops.push(copy(
        sub_box(x, [h - 1, 0], row),
        sub_box(&p, [before + h, before], row),
    ));
    if before == 1 {
        ops.push(copy(sub_box(x, [0, 0], row), sub_box(&p, [0, 1], row)));
    }
    let col = [ph, 1, c];
    ops.push(copy(
        sub_box(&p, [0, before + w - 1], col),
        sub_box(&p, [0, before + w], col),
    ));
    if before == 1 {
        ops.push(copy(sub_box(&p, [0, 1], col), sub_box(&p, [0, 0], col)));
    }
    p
}

/// One output phase `(py, px)` of a 2x half-pixel bilinear resize: output `(2k + py, 2j + px)`
/// is the 2x2 window of the padded input at `(k + py, j + px)` weighted by `{1, 3}` (even phase)
/// or `{3, 1}` (odd phase) per axis, divided by 16 and rounded half away from zero (scale
/// `(2^31 + 1) / 2^35` with DBL rounding: exact first stage, then the rounding shift by 4).
fn phase_op(name: &str, p: &FeatureMap, y: &FeatureMap, py: usize, px: usize) -> NpuOp {
    let [ph, pw, c] = p.shape;
    let ifm = sub_box(p, [py, px], [ph - 1, pw - 1, c]);
    let [oh, ow, _] = y.shape;
    let ofm = FeatureMap {
        offset: y.offset + py * y.strides[0] + px * y.strides[1],
        shape: [oh / 2, ow / 2, c],
        strides: [2 * y.strides[0], 2 * y.strides[1], y.strides[2]],
        ..y.clone()
    };
    let taps = |phase: usize| if phase == 0 { [1i16, 3] } else { [3, 1] };
    let (wy, wx) = (taps(py), taps(px));
    let kernel: Vec<i16> = wy
        .iter()
        .flat_map(|&a| wx.iter().map(move |&b| a * b))
        .collect();
    let values = kernel.repeat(c);
    NpuOp::new(
        name,
        NpuOpKind::Depthwise(ConvWeights {
            shape: [c, 2, 2, 1],
            values,
            scales: vec![
                ChannelScale {
                    bias: 0,
                    scale: 0x8000_0001,
                    shift: 35,
                };
                c
            ],
        }),
        ifm,
        ofm,
    )
    .with_kernel(Kernel {
        h: 2,
        w: 2,
        ..Kernel::UNIT
    })
}

/// The same op reading its IFM upscaled 2x (nearest).
fn upscaled(op: NpuOp) -> NpuOp {
    op.with_upscale(IfmUpscaleMode::Nearest)
}

/// A depthwise convolution with a `kh x kw` kernel that is 1 at `(kh / 2, kw / 2)` and 0
/// elsewhere: output `(y, x)` is input `(y + kh / 2, x + kw / 2)`.
fn select_op(name: &str, ifm: FeatureMap, ofm: FeatureMap, kh: usize, kw: usize) -> NpuOp {
    let c = ifm.shape[2];
    let mut values = vec![0i16; c * kh * kw];
    for ch in 0..c {
        values[(ch * kh + kh / 2) * kw + kw / 2] = 1;
    }
    unit_depthwise(name, ifm, ofm, [kh, kw], values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resize(
        mode: ResizeMode,
        align_corners: bool,
        half_pixel_centers: bool,
        shape: &[usize],
        out: &[usize],
        dtype: crate::ir::DType,
    ) -> crate::ir::Graph {
        super::super::e2e::graph(
            OpKind::Resize {
                mode,
                align_corners,
                half_pixel_centers,
            },
            (shape, dtype, (0.05, 3)),
            (out, (0.05, 3)),
        )
    }

    /// Every supported mode and factor, axes of size 1, same-size copies, uint8.
    #[test]
    fn resize_on_the_virtual_npu_equals_reference() {
        use crate::ir::DType::{I8, U8};
        use ResizeMode::{Bilinear, Nearest};
        let check = super::super::e2e::check;
        check(&resize(
            Nearest,
            false,
            false,
            &[1, 3, 5, 4],
            &[1, 12, 20, 4],
            I8,
        ));
        check(&resize(
            Nearest,
            false,
            true,
            &[1, 3, 5, 4],
            &[1, 6, 10, 4],
            I8,
        ));
        check(&resize(
            Nearest,
            false,
            true,
            &[1, 2, 3, 2],
            &[1, 16, 24, 2],
            U8,
        ));
        check(&resize(
            Nearest,
            true,
            false,
            &[1, 4, 5, 3],
            &[1, 7, 9, 3],
            I8,
        ));
        check(&resize(
            Nearest,
            true,
            false,
            &[1, 3, 3, 2],
            &[1, 9, 9, 2],
            I8,
        ));
        check(&resize(
            Nearest,
            true,
            false,
            &[1, 3, 2, 5],
            &[1, 17, 9, 5],
            I8,
        ));
        check(&resize(
            Bilinear,
            true,
            false,
            &[1, 4, 5, 3],
            &[1, 7, 9, 3],
            I8,
        ));
        check(&resize(
            Bilinear,
            true,
            false,
            &[1, 3, 3, 2],
            &[1, 9, 9, 2],
            U8,
        ));
        check(&resize(
            Bilinear,
            true,
            false,
            &[1, 2, 3, 17],
            &[1, 9, 17, 17],
            I8,
        ));
        check(&resize(
            Nearest,
            false,
            false,
            &[1, 1, 5, 3],
            &[1, 1, 10, 3],
            I8,
        ));
        check(&resize(
            Nearest,
            false,
            false,
            &[1, 1, 5, 3],
            &[1, 2, 20, 3],
            I8,
        ));
        check(&resize(
            Bilinear,
            true,
            false,
            &[1, 1, 5, 3],
            &[1, 1, 9, 3],
            I8,
        ));
        check(&resize(
            Bilinear,
            false,
            true,
            &[1, 4, 4, 3],
            &[1, 4, 4, 3],
            I8,
        ));
    }

    /// Bilinear without aligned corners: replicate padding, then the chain or the phases.
    #[test]
    fn unaligned_bilinear_on_the_virtual_npu_equals_reference() {
        use crate::ir::DType::{I8, U8};
        use ResizeMode::Bilinear;
        let check = super::super::e2e::check;
        check(&resize(
            Bilinear,
            false,
            false,
            &[1, 4, 5, 3],
            &[1, 8, 10, 3],
            I8,
        ));
        check(&resize(
            Bilinear,
            false,
            false,
            &[1, 3, 3, 2],
            &[1, 12, 12, 2],
            U8,
        ));
        check(&resize(
            Bilinear,
            false,
            false,
            &[1, 2, 3, 17],
            &[1, 16, 24, 17],
            I8,
        ));
        check(&resize(
            Bilinear,
            false,
            false,
            &[1, 1, 5, 3],
            &[1, 2, 10, 3],
            I8,
        ));
        check(&resize(
            Bilinear,
            false,
            true,
            &[1, 4, 5, 3],
            &[1, 8, 10, 3],
            I8,
        ));
        check(&resize(
            Bilinear,
            false,
            true,
            &[1, 7, 3, 20],
            &[1, 14, 6, 20],
            U8,
        ));
        check(&resize(
            Bilinear,
            false,
            true,
            &[1, 1, 1, 4],
            &[1, 2, 2, 4],
            I8,
        ));
    }

    #[test]
    fn resize_limits() {
        use crate::ir::DType::I8;
        use npu_rt::ethos_u::config::ETHOS_U55_128;
        let err = |g: &crate::ir::Graph| {
            super::super::lower(g, &ETHOS_U55_128)
                .unwrap_err()
                .to_string()
        };
        let g = resize(
            ResizeMode::Nearest,
            false,
            false,
            &[1, 4, 4, 3],
            &[1, 12, 12, 3],
            I8,
        );
        assert!(err(&g).contains("factor 3"));
        let g = resize(
            ResizeMode::Bilinear,
            false,
            true,
            &[1, 4, 4, 3],
            &[1, 16, 16, 3],
            I8,
        );
        assert!(err(&g).contains("2x only"));
        let g = resize(
            ResizeMode::Bilinear,
            true,
            true,
            &[1, 4, 4, 3],
            &[1, 7, 7, 3],
            I8,
        );
        assert!(err(&g).contains("exclude each other"));
        let g = resize(
            ResizeMode::Nearest,
            false,
            false,
            &[1, 4, 4, 3],
            &[1, 64, 64, 3],
            I8,
        );
        assert!(err(&g).contains("factor 16"));
    }

    #[test]
    fn factors() {
        assert_eq!(factor([(8, 16), (8, 16)], false), Ok(2));
        assert_eq!(factor([(3, 24), (5, 40)], false), Ok(8));
        assert_eq!(factor([(1, 1), (5, 20)], false), Ok(4));
        assert_eq!(factor([(1, 3), (5, 20)], false), Ok(4));
        assert!(factor([(1, 5), (5, 20)], false).is_err());
        assert!(
            factor([(8, 24), (8, 24)], false)
                .unwrap_err()
                .contains("factor 3")
        );
        assert!(
            factor([(8, 128), (8, 128)], false)
                .unwrap_err()
                .contains("factor 16")
        );
        assert!(factor([(8, 16), (8, 32)], false).is_err());
        assert!(factor([(8, 12), (8, 16)], false).is_err());
        // Aligned corners: (out - 1) / (in - 1).
        assert_eq!(factor([(8, 15), (4, 7)], true), Ok(2));
        assert_eq!(factor([(8, 29), (1, 1)], true), Ok(4));
        assert!(factor([(8, 16), (8, 16)], true).is_err());
        // 1x1 inputs: the output size decides.
        assert_eq!(factor([(1, 2), (1, 2)], false), Ok(2));
        assert_eq!(factor([(1, 3), (1, 4)], false), Ok(4));
    }

    /// TFLite's nearest-neighbour source index (`GetNearestNeighbor`, f32 arithmetic).
    fn tflite_nearest(y: usize, i: usize, o: usize, align: bool, half: bool) -> usize {
        let scale = if align && o > 1 {
            (i - 1) as f32 / (o - 1) as f32
        } else {
            i as f32 / o as f32
        };
        let off = if half { 0.5f32 } else { 0.0 };
        let v = if align {
            ((y as f32 + off) * scale).round() as usize
        } else {
            ((y as f32 + off) * scale).floor() as usize
        };
        v.min(i - 1)
    }

    /// The source index of the chain along one axis: `log2 f` nearest 2x upscales (each
    /// output `j` reads `j / 2`), then the last window's tap at `k / 2`.
    fn chain_index(y: usize, f: usize, k: usize) -> usize {
        let mut j = y + k / 2;
        let mut s = 1;
        while s < f {
            j /= 2;
            s *= 2;
        }
        j
    }

    #[test]
    fn nearest_chains_equal_tflite_indices() {
        for f in [2usize, 4, 8] {
            for i in 1..12 {
                for half in [false, true] {
                    let o = f * i;
                    for y in 0..o {
                        assert_eq!(chain_index(y, f, 1), tflite_nearest(y, i, o, false, half));
                    }
                }
                if i > 1 {
                    let o = f * (i - 1) + 1;
                    for y in 0..o {
                        assert_eq!(chain_index(y, f, f), tflite_nearest(y, i, o, true, false));
                    }
                }
            }
        }
    }

    /// TFLite's `ResizeBilinearInteger` for one axis with aligned corners equals the mean over
    /// the `f` upscaled pixels `y .. y + f` (weights `1024 - frac` and `frac`, frac in 1024ths).
    #[test]
    fn aligned_bilinear_weights_are_window_means() {
        for f in [2i64, 4, 8] {
            for i in 2..10i64 {
                let o = f * (i - 1) + 1;
                let scale_10 = ((1 << 10) * (i - 1) + (o - 1) / 2) / (o - 1);
                for y in 0..o {
                    let input_y = y * scale_10;
                    let y0 = input_y / 1024;
                    let y1 = ((input_y + 1023) / 1024).min(i - 1);
                    let w1 = input_y - 1024 * y0;
                    // Window: f taps at upscaled positions y..y+f, source (y + t) / f.
                    let (mut n0, mut n1) = (0, 0);
                    for t in 0..f {
                        match (y + t) / f {
                            s if s == y0 => n0 += 1,
                            s if s == y1 => n1 += 1,
                            s => panic!("tap {t} of output {y} reads {s}, not {y0} or {y1}"),
                        }
                    }
                    if y0 == y1 {
                        assert_eq!(n0 + n1, f);
                    } else {
                        assert_eq!(
                            (n0 * 1024 / f, n1 * 1024 / f),
                            (1024 - w1, w1),
                            "f {f} y {y}"
                        );
                    }
                }
            }
        }
    }
}
