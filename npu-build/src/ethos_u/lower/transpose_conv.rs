//! Lowering of TransposeConv2D by output phases (docs/matmul.md).
//!
//! Output row `oy` receives kernel row `ky` from input row `iy` when `iy * s + ky = oy + pad`.
//! All output rows with the same `(oy + pad) mod s` (a *phase*) use the same kernel rows
//! `ky = r, r + s, r + 2s, ...`, and consecutive rows of a phase read consecutive input rows:
//! a phase is an ordinary stride-1 convolution with that sub-kernel (flipped, since a later tap
//! reads an earlier input row), writing every `s`-th output row. So a transposed convolution
//! of stride `sy x sx` is `sy * sx` convolutions whose OFM is a strided view of the output
//! (OFM_STRIDE_Y/X set to `s` rows/pixels), for any stride, padding and output size. A phase
//! with no kernel taps, or whose window never meets the input, holds the bias alone: a 1x1
//! convolution with zero weights.
//!
//! Each phase accumulates a subset of the taps TFLite adds for those outputs, in 32 bits, then
//! the same per-channel scale record (TFLite's `PopulateConvolutionQuantizationParams`
//! multipliers, DBL rounding) as Conv2D: bit-exact with the reference.
//!
//! Vela instead upscales the IFM (IFM_UPSCALE zeros, stride 2 only) and runs one convolution;
//! it keeps stride 3 on the CPU. On the Ethos-U65, a stride-2 transposed convolution with fewer
//! than 16 output channels takes that form here too ([`upscaled`]): the phases' OFMs are
//! written every other pixel, in bursts shorter than 16 bytes, which the U65's DRAM makes
//! expensive (op_transpose_conv_s2, 8 channels: 5,954 cycles in phases against 2,794 in Vela's
//! form on ethos-u65-256). With 16 channels and more the phases win, having a quarter of the
//! MACs (net_unet's 16- and 32-channel ones: 19,200 and 15,616 cycles in phases against 34,252
//! and 34,902 upscaled), and on the U55 they win anyway (op_transpose_conv_s2: 2,304 against
//! 2,944 on ethos-u55-128).

use npu_rt::ethos_u::regs::fields::IfmUpscaleMode;

use super::conv::{
    channel_scales, check_ifm_type, finish_weights, io, ohwi, raw_weights, weight_quant,
};
use super::fmap::slice;
use super::op_builders::clamp;
use super::pool::MAX_PAD;
use super::{Layout, Lowering};
use crate::error::Result;
use crate::ethos_u::npu_op::{FeatureMap, Kernel, NpuOp, NpuOpKind};
use crate::ir::{DType, Op, OpKind, Padding};
use npu_rt::ethos_u::config::Product;

/// One axis of one phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct PhaseAxis {
    /// First output row (column) of the phase.
    pub out0: usize,
    /// Output rows of the phase (every `stride`-th from `out0`).
    pub out_len: usize,
    /// Sub-kernel taps: original taps `first_tap + stride * t` for `t < taps`, applied in
    /// reverse order. 0 for a bias-only phase (one zero tap is emitted).
    pub first_tap: usize,
    pub taps: usize,
    /// Input rows read, and the padding before/after them.
    pub in0: usize,
    pub in_len: usize,
    pub before: usize,
    pub after: usize,
}

/// The phases of one axis: input size `n_in`, output size `n_out`, kernel `k`, stride `s`,
/// cropped leading outputs `pad`. Phases without outputs are left out.
pub(super) fn phases(n_in: usize, n_out: usize, k: usize, s: usize, pad: usize) -> Vec<PhaseAxis> {
    let mut out = Vec::with_capacity(s);
    for r in 0..s {
        // First output with (oy + pad) % s == r.
        let out0 = (r + s - pad % s) % s;
        if out0 >= n_out {
            continue;
        }
        let out_len = (n_out - out0).div_ceil(s);
        // Taps r, r + s, ... below k.
        let taps = if r < k { (k - r).div_ceil(s) } else { 0 };
        // Output out0 + j * s reads, through the sub-kernel's tap t' (original tap
        // r + s * (taps - 1 - t')), input row q0 + j - (taps - 1) + t'.
        let q0 = (out0 + pad - r) / s;
        let window = if taps == 0 {
            None
        } else {
            let start = q0 as i64 - (taps as i64 - 1);
            let end = start + out_len as i64 - 1 + taps as i64;
            let (lo, hi) = (start.max(0), end.min(n_in as i64));
            (hi > lo).then(|| {
                (
                    lo as usize,
                    (hi - lo) as usize,
                    (lo - start) as usize,
                    (end - hi) as usize,
                )
            })
        };
        let (taps, (in0, in_len, before, after)) = match window {
            Some(w) => (taps, w),
            // Bias only: a zero 1-tap kernel over rows 0.. (padding past the input).
            None => {
                let len = out_len.min(n_in);
                (0, (0, len, 0, out_len - len))
            }
        };
        out.push(PhaseAxis {
            out0,
            out_len,
            first_tap: r,
            taps,
            in0,
            in_len,
            before,
            after,
        });
    }
    out
}

pub(super) fn lower(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    let OpKind::TransposeConv2d(attrs) = &op.kind else {
        return Err(Lowering::invalid(
            op,
            "internal: not a transposed convolution",
        ));
    };
    let io = io(op)?;
    let xfm = cx.fm(op, io.x)?;
    let yfm = cx.fm(op, io.y)?;
    check_ifm_type(cx, op, &xfm)?;
    if cx.graph.tensors[io.x].dtype != DType::I8 {
        // TFLite's uint8 kernel takes a float product of the scales; only int8 is checked here.
        return Err(cx.limit(op, "transposed convolution is lowered for int8 inputs only"));
    }
    if yfm.layout != Layout::Nhwc {
        return Err(cx.limit(op, "the output must be NHWC (phases write strided views)"));
    }
    let [o, kh, kw, i] = ohwi(cx, op, io.w, &xfm, &yfm)?;
    let (sy, sx) = attrs.stride;
    if sy == 0 || sx == 0 {
        return Err(Lowering::invalid(op, "strides must be positive"));
    }
    if (sy, sx) == (2, 2)
        && cx.accel.product == Product::U65
        && o * yfm.dtype.bytes() < 16
        && let Some(p) = upscaled_padding(xfm.shape, yfm.shape, (kh, kw), attrs)
    {
        return upscaled(cx, op, &io, xfm, yfm, (o, kh, kw, i), p);
    }
    let ys = phases(xfm.shape[0], yfm.shape[0], kh, sy, attrs.pad_top);
    let xs = phases(xfm.shape[1], yfm.shape[1], kw, sx, attrs.pad_left);
    if ys.len() * xs.len() > 4096 {
        return Err(cx.limit(
            op,
            format!(
                "stride {sy}x{sx} makes {} phases (at most 4096)",
                ys.len() * xs.len()
            ),
        ));
    }
    let raw = raw_weights(cx, op, io.w)?;
    let wq = weight_quant(cx, op, io.w, o)?;
    let tap = |oc: usize, ky: usize, kx: usize, ic: usize| {
        raw[((oc * kh + ky) * kw + kx) * i + ic] - wq.zero_point_at(oc)
    };
    let (scales, round) = channel_scales(cx, op, &io, o, false)?;
    let activation = clamp(cx, op, attrs.activation, io.y, yfm.dtype)?;
    for py in &ys {
        for px in &xs {
            let (th, tw) = (py.taps.max(1), px.taps.max(1));
            let mut values = vec![0i32; o * th * tw * i];
            if py.taps > 0 && px.taps > 0 {
                for oc in 0..o {
                    for ty in 0..th {
                        let ky = py.first_tap + sy * (th - 1 - ty);
                        for tx in 0..tw {
                            let kx = px.first_tap + sx * (tw - 1 - tx);
                            let base = ((oc * th + ty) * tw + tx) * i;
                            for ic in 0..i {
                                values[base + ic] = tap(oc, ky, kx, ic);
                            }
                        }
                    }
                }
            }
            // A phase whose other axis has no taps reads padding only along this one: its
            // window must still fit, so use the bias-only geometry on both axes.
            let (gy, gx) = if py.taps == 0 || px.taps == 0 {
                (bias_only(py, xfm.shape[0]), bias_only(px, xfm.shape[1]))
            } else {
                (*py, *px)
            };
            let padding = Padding {
                top: gy.before,
                left: gx.before,
                bottom: gy.after,
                right: gx.after,
            };
            if [padding.top, padding.left, padding.bottom, padding.right]
                .iter()
                .any(|&p| p > MAX_PAD)
            {
                return Err(cx.limit(
                    op,
                    format!("phase padding {padding:?}: each side is at most {MAX_PAD}"),
                ));
            }
            let weights = finish_weights(cx, op, [o, th, tw, i], values, scales.clone())?;
            let ifm = slice(&xfm, [gy.in0, gx.in0, 0], [gy.in_len, gx.in_len, i])?;
            let ofm = FeatureMap {
                offset: yfm.offset + py.out0 * yfm.strides[0] + px.out0 * yfm.strides[1],
                shape: [py.out_len, px.out_len, o],
                strides: [yfm.strides[0] * sy, yfm.strides[1] * sx, yfm.strides[2]],
                ..yfm.clone()
            };
            cx.program.ops.push(
                NpuOp::new(op.name.clone(), NpuOpKind::Conv(weights), ifm, ofm)
                    .with_kernel(Kernel {
                        h: th,
                        w: tw,
                        ..Kernel::UNIT
                    })
                    .with_padding(padding)
                    .with_ofm_round(round)
                    .with_activation(activation.clone()),
            );
        }
    }
    Ok(())
}

/// The padding of the stride-1 convolution over the zero-upscaled input (`2n` rows, input
/// row `r` at `2r`) that computes a stride-2 transposed convolution with the kernel flipped:
/// output row `oy` reads upscaled rows `oy - (k - 1 - pad_top) ..`. `None` when a side would
/// need a negative padding or more than [`MAX_PAD`].
fn upscaled_padding(
    x: [usize; 3],
    y: [usize; 3],
    (kh, kw): (usize, usize),
    a: &crate::ir::TransposeConvAttrs,
) -> Option<Padding> {
    let side = |n_in: usize, n_out: usize, k: usize, pad: usize| -> Option<(usize, usize)> {
        let before = (k - 1).checked_sub(pad)?;
        // Rows the last output's window reaches past the upscaled input.
        let after = (n_out + k - 1).saturating_sub(2 * n_in + before);
        (before <= MAX_PAD && after <= MAX_PAD).then_some((before, after))
    };
    let (top, bottom) = side(x[0], y[0], kh, a.pad_top)?;
    let (left, right) = side(x[1], y[1], kw, a.pad_left)?;
    Some(Padding {
        top,
        left,
        bottom,
        right,
    })
}

/// A stride-2 transposed convolution as Vela runs it: one convolution with the flipped kernel
/// over the IFM upscaled with zeros (IFM_UPSCALE_MODE_ZEROS: the inserted elements, like
/// padding, contribute nothing).
fn upscaled(
    cx: &mut Lowering<'_>,
    op: &Op,
    io: &super::conv::Io,
    ifm: FeatureMap,
    ofm: FeatureMap,
    (o, kh, kw, i): (usize, usize, usize, usize),
    padding: Padding,
) -> Result<()> {
    let attrs = match &op.kind {
        OpKind::TransposeConv2d(a) => a,
        _ => {
            return Err(Lowering::invalid(
                op,
                "internal: not a transposed convolution",
            ));
        }
    };
    let raw = raw_weights(cx, op, io.w)?;
    let wq = weight_quant(cx, op, io.w, o)?;
    let mut values = Vec::with_capacity(raw.len());
    for oc in 0..o {
        for ky in 0..kh {
            for kx in 0..kw {
                let base = ((oc * kh + (kh - 1 - ky)) * kw + (kw - 1 - kx)) * i;
                values.extend(
                    raw[base..base + i]
                        .iter()
                        .map(|&v| v - wq.zero_point_at(oc)),
                );
            }
        }
    }
    let (scales, round) = channel_scales(cx, op, io, o, false)?;
    let activation = clamp(cx, op, attrs.activation, io.y, ofm.dtype)?;
    let weights = finish_weights(cx, op, [o, kh, kw, i], values, scales)?;
    cx.program.ops.push(
        NpuOp::new(op.name.clone(), NpuOpKind::Conv(weights), ifm, ofm)
            .with_kernel(Kernel {
                h: kh,
                w: kw,
                ..Kernel::UNIT
            })
            .with_padding(padding)
            .with_upscale(IfmUpscaleMode::Zeros)
            .with_ofm_round(round)
            .with_activation(activation),
    );
    Ok(())
}

/// The bias-only geometry of a phase axis: a zero 1-tap kernel over input rows `0..`.
fn bias_only(p: &PhaseAxis, n_in: usize) -> PhaseAxis {
    let len = p.out_len.min(n_in);
    PhaseAxis {
        taps: 0,
        in0: 0,
        in_len: len,
        before: 0,
        after: p.out_len - len,
        ..*p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stride_two_same_phases() {
        // 8 -> 16, k 3, s 2, pad 0 (TFLite SAME): phase 0 rows 0,2,.. use taps {0, 2};
        // phase 1 rows 1,3,.. use tap {1}.
        let p = phases(8, 16, 3, 2, 0);
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].out0, p[0].out_len, p[0].taps), (0, 8, 2));
        // Output 0 reads input -1 (padding) and 0; output 14 reads 6 and 7.
        assert_eq!(
            (p[0].in0, p[0].in_len, p[0].before, p[0].after),
            (0, 8, 1, 0)
        );
        assert_eq!((p[1].out0, p[1].out_len, p[1].taps), (1, 8, 1));
        assert_eq!(
            (p[1].in0, p[1].in_len, p[1].before, p[1].after),
            (0, 8, 0, 0)
        );
    }

    #[test]
    fn stride_above_kernel_has_bias_only_phases() {
        // k 2, s 3: phase 2 has no taps.
        let p = phases(4, 12, 2, 3, 0);
        assert_eq!(p.len(), 3);
        assert_eq!(p[2].taps, 0);
        assert_eq!((p[2].out0, p[2].out_len), (2, 4));
        assert_eq!(p[0].taps, 1);
    }

    #[test]
    fn cropping_and_extra_outputs() {
        // k 3, s 2, pad 1, 5 inputs, 10 outputs (output_padding 1): full extent 11.
        let p = phases(5, 10, 3, 2, 1);
        // Phase r = 0: outputs with (oy + 1) even -> oy = 1, 3, .., 9.
        let r0 = p.iter().find(|a| a.first_tap == 0).unwrap();
        assert_eq!((r0.out0, r0.out_len, r0.taps), (1, 5, 2));
        // Output 9 reads inputs 4 (tap 2) and 5 (tap 0, past the input).
        assert_eq!(r0.in0 + r0.in_len + r0.after, 6);
    }
}
