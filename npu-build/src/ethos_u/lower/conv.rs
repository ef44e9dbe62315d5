//! Lowering of Conv2D, DepthwiseConv2D and FullyConnected (docs/numerics.md, "Convolution,
//! depthwise, fully connected"; docs/weights.md, "Scale/bias stream").
//!
//! - Weights are handed to the encoder as `w - weight_zero_point` in `[O, KH, KW, I]` order
//!   (depthwise: `[C, KH, KW, 1]`). The hardware subtracts IFM_ZERO_POINT itself, so biases
//!   are the model's, unchanged.
//! - Per output channel, the scale record is TFLite's `QuantizeMultiplier` of
//!   `double(s_in) * double(s_w[c]) / double(s_out)` (`PopulateConvolutionQuantizationParams`),
//!   except for uint8 inputs, where TFLite multiplies the two input scales in float first
//!   (`GetQuantizedConvolutionMultipler`). The exponent becomes a right shift
//!   `31 - exponent`; OFM rounding DBL, which is TFLite's `MultiplyByQuantizedMultiplier`.
//! - Fully connected: TFLite's reference kernel (TF 2.20 `reference_integer_ops::
//!   FullyConnected[PerChannel]` with float scales) computes `round(double(acc) * s)` with
//!   `s = double(s_in) * double(s_w) / double(s_out)`, one rounding half away from zero. The NPU
//!   gets the same 31-bit multiplier with NATURAL rounding: identical except when `acc * s` lies
//!   within about `|acc * s| * 2^-31` of a half-integer, or exactly on a negative one (which
//!   needs a scale ratio with a short binary mantissa). Vela's DBL rounding differs more often.
//! - Inputs are int8 or uint8 (TFLite's 16x8 kernels are not lowered: they use 15-bit
//!   multipliers and 64-bit biases, and there is no reference here to check them against).
//! - Strides 1..3 and dilations 1..2 are native; a larger stride makes one operation per
//!   output row (column) reading its own window (Vela unrolls the same way). A dilation above 2 is turned into a larger
//!   kernel with zeros between the taps (dilation 2 of a kernel inflated by d/2 when d is even,
//!   else dilation 1 of a kernel inflated by d), as Vela does.
//! - A depth multiplier above 1 becomes a full convolution whose weights are zero except each
//!   output channel's own input channel.
//! - Fully connected: a 1x1 convolution over the input's rows laid out as an H x W grid
//!   (Vela's grid choice), `[N, K]` -> `[H, W, K]`.

use npu_rt::ethos_u::regs::fields::RoundMode;

use super::Lowering;
use super::fmap::is_contiguous;
use super::op_builders::{clamp, ofm_scale};
use super::pool::{check_window, pieces};
use crate::error::Result;
use crate::ethos_u::npu_op::{
    ChannelScale, ConvWeights, ElemType, FeatureMap, Kernel, NpuOp, NpuOpKind,
};
use crate::ir::{Activation, ConvAttrs, DType, Op, OpKind, Quantization, TensorId};

/// Per output channel, the sum of |w - zp| may not exceed this (Vela's `WeightSum`).
const MAX_WEIGHT_SUM: i64 = 127 * 65536;

/// Largest weight tensor a dilation above 2 may inflate a kernel to.
const MAX_INFLATED_WEIGHTS: usize = 1 << 24;

/// Largest magnitude of a 40-bit signed bias.
const MAX_BIAS: i64 = (1 << 39) - 1;

pub(super) fn lower(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    match &op.kind {
        OpKind::Conv2d(attrs) => conv2d(cx, op, attrs),
        OpKind::DepthwiseConv2d {
            attrs,
            depth_multiplier,
        } => depthwise(cx, op, attrs, *depth_multiplier),
        OpKind::FullyConnected { activation } => fully_connected(cx, op, *activation),
        _ => Err(Lowering::invalid(op, "internal: not a convolution")),
    }
}

/// Inputs and output of a weighted operator.
pub(super) struct Io {
    pub(super) x: TensorId,
    pub(super) w: TensorId,
    pub(super) bias: Option<TensorId>,
    pub(super) y: TensorId,
}

pub(super) fn io(op: &Op) -> Result<Io> {
    let (x, w, bias) = match op.inputs.as_slice() {
        [x, w] => (*x, *w, None),
        [x, w, b] => (*x, *w, Some(*b)),
        _ => return Err(Lowering::invalid(op, "expects inputs [x, weights, bias?]")),
    };
    let y = match op.outputs.as_slice() {
        [y] => *y,
        _ => return Err(Lowering::invalid(op, "expects one output")),
    };
    Ok(Io { x, w, bias, y })
}

/// The `[O, KH, KW, I]` weight shape of a (transposed) convolution, checked against its input
/// and output depths.
pub(super) fn ohwi(
    cx: &Lowering<'_>,
    op: &Op,
    w: TensorId,
    xfm: &FeatureMap,
    yfm: &FeatureMap,
) -> Result<[usize; 4]> {
    let wshape = &cx.graph.tensors[w].shape;
    let [o, kh, kw, i] = match wshape.as_slice() {
        [o, kh, kw, i] => [*o, *kh, *kw, *i],
        _ => {
            return Err(Lowering::invalid(
                op,
                format!("weights {wshape:?} are not [O, KH, KW, I]"),
            ));
        }
    };
    if o != yfm.shape[2] || i != xfm.shape[2] || kh == 0 || kw == 0 {
        return Err(Lowering::invalid(
            op,
            format!(
                "weights {wshape:?} do not match input {:?} and output {:?}",
                xfm.shape, yfm.shape
            ),
        ));
    }
    Ok([o, kh, kw, i])
}

fn conv2d(cx: &mut Lowering<'_>, op: &Op, attrs: &ConvAttrs) -> Result<()> {
    let io = io(op)?;
    let xfm = cx.fm(op, io.x)?;
    let yfm = cx.fm(op, io.y)?;
    check_ifm_type(cx, op, &xfm)?;
    let [o, kh, kw, i] = ohwi(cx, op, io.w, &xfm, &yfm)?;
    let raw = raw_weights(cx, op, io.w)?;
    let wq = weight_quant(cx, op, io.w, o)?;
    let per_channel = kh * kw * i;
    let values = raw
        .iter()
        .enumerate()
        .map(|(k, &v)| v - wq.zero_point_at(k / per_channel.max(1)))
        .collect::<Vec<i32>>();
    let (scales, round) = channel_scales(cx, op, &io, o, false)?;
    emit_conv(
        cx,
        op,
        xfm,
        yfm,
        WeightSet {
            shape: [o, kh, kw, i],
            values,
            depthwise: false,
        },
        scales,
        round,
        attrs,
    )
}

fn depthwise(cx: &mut Lowering<'_>, op: &Op, attrs: &ConvAttrs, multiplier: usize) -> Result<()> {
    let io = io(op)?;
    let xfm = cx.fm(op, io.x)?;
    let yfm = cx.fm(op, io.y)?;
    check_ifm_type(cx, op, &xfm)?;
    let wshape = cx.graph.tensors[io.w].shape.clone();
    let [kh, kw, oc] = match wshape.as_slice() {
        [1, kh, kw, oc] => [*kh, *kw, *oc],
        _ => {
            return Err(Lowering::invalid(
                op,
                format!("weights {wshape:?} are not [1, KH, KW, C*M]"),
            ));
        }
    };
    let c = xfm.shape[2];
    if multiplier == 0
        || oc != yfm.shape[2]
        || c.checked_mul(multiplier) != Some(oc)
        || kh == 0
        || kw == 0
    {
        return Err(Lowering::invalid(
            op,
            format!(
                "weights {wshape:?} with depth multiplier {multiplier} do not match input {:?} and output {:?}",
                xfm.shape, yfm.shape
            ),
        ));
    }
    let raw = raw_weights(cx, op, io.w)?;
    let wq = weight_quant(cx, op, io.w, oc)?;
    // IR layout [1, KH, KW, OC]; output channel `m` reads input channel `m / multiplier`.
    let tap = |ch: usize, y: usize, x: usize| raw[(y * kw + x) * oc + ch] - wq.zero_point_at(ch);
    let (scales, round) = channel_scales(cx, op, &io, oc, false)?;
    let set = if multiplier == 1 {
        let mut values = Vec::with_capacity(oc * kh * kw);
        for ch in 0..oc {
            for y in 0..kh {
                for x in 0..kw {
                    values.push(tap(ch, y, x));
                }
            }
        }
        WeightSet {
            shape: [oc, kh, kw, 1],
            values,
            depthwise: true,
        }
    } else {
        let len = oc
            .checked_mul(kh * kw)
            .and_then(|v| v.checked_mul(c))
            .filter(|&v| v <= 1 << 26)
            .ok_or_else(|| {
                cx.limit(
                    op,
                    format!("depth multiplier {multiplier} on {c} channels needs too large a dense weight tensor"),
                )
            })?;
        let mut values = vec![0i32; len];
        for ch in 0..oc {
            for y in 0..kh {
                for x in 0..kw {
                    values[((ch * kh + y) * kw + x) * c + ch / multiplier] = tap(ch, y, x);
                }
            }
        }
        WeightSet {
            shape: [oc, kh, kw, c],
            values,
            depthwise: false,
        }
    };
    emit_conv(cx, op, xfm, yfm, set, scales, round, attrs)
}

fn fully_connected(cx: &mut Lowering<'_>, op: &Op, activation: Activation) -> Result<()> {
    let io = io(op)?;
    let g = cx.graph;
    let (xt, wt, yt) = (&g.tensors[io.x], &g.tensors[io.w], &g.tensors[io.y]);
    let [o, k] = match wt.shape.as_slice() {
        [o, k] => [*o, *k],
        _ => {
            return Err(Lowering::invalid(
                op,
                format!("weights {:?} are not [O, I]", wt.shape),
            ));
        }
    };
    if k == 0
        || o == 0
        || !xt.elements().is_multiple_of(k)
        || (xt.elements() / k).checked_mul(o) != Some(yt.elements())
    {
        return Err(Lowering::invalid(
            op,
            format!(
                "input {:?}, weights {:?} and output {:?} do not agree",
                xt.shape, wt.shape, yt.shape
            ),
        ));
    }
    let n = xt.elements() / k;
    if k > 65536 || o > 65536 {
        return Err(cx.limit(
            op,
            format!("fully connected {k} -> {o}: depths are at most 65536"),
        ));
    }
    let (gh, gw) = fc_grid(n);
    if gh > 65536 || gw > 65536 {
        return Err(cx.limit(op, format!("{n} rows do not fit a 65536 x 65536 grid")));
    }
    let ifm = flat_view(cx, op, io.x, [gh, gw, k])?;
    let ofm = flat_view(cx, op, io.y, [gh, gw, o])?;
    check_ifm_type(cx, op, &ifm)?;
    let raw = raw_weights(cx, op, io.w)?;
    let wq = weight_quant(cx, op, io.w, o)?;
    let values = raw
        .iter()
        .enumerate()
        .map(|(idx, &v)| v - wq.zero_point_at(idx / k))
        .collect();
    let (scales, round) = channel_scales(cx, op, &io, o, true)?;
    let weights = finish_weights(cx, op, [o, 1, 1, k], values, scales)?;
    let activation = clamp(cx, op, activation, io.y, ofm.dtype)?;
    cx.program.ops.push(
        NpuOp::new(op.name.clone(), NpuOpKind::Conv(weights), ifm, ofm)
            .with_ofm_round(round)
            .with_activation(activation),
    );
    Ok(())
}

/// Vela's grid for `n` fully-connected rows: `w = max(n / 16, ceil(sqrt(n)))`, grown until it
/// divides `n`; `h = n / w`.
fn fc_grid(n: usize) -> (usize, usize) {
    if n <= 1 {
        return (1, 1);
    }
    let mut w = (n / 16).max(n.isqrt() + usize::from(n.isqrt() * n.isqrt() != n));
    while !n.is_multiple_of(w) {
        w += 1;
    }
    (n / w, w)
}

/// Tensor `t` (dense, any shape) viewed as an `[H, W, C]` feature map of the same elements.
fn flat_view(cx: &mut Lowering<'_>, op: &Op, t: TensorId, shape: [usize; 3]) -> Result<FeatureMap> {
    let g = cx.graph;
    let tensor = &g.tensors[t];
    let dtype = cx.elem_type(op, t)?;
    let (_, zero_point) = cx.quant(t);
    let p = cx.place(t);
    let e = dtype.bytes();
    let s = &tensor.shape;
    let c = s.last().copied().unwrap_or(1);
    let w = if s.len() >= 2 { s[s.len() - 2] } else { 1 };
    let h = if s.len() >= 3 { s[s.len() - 3] } else { 1 };
    let own = FeatureMap {
        buffer: p.buffer,
        offset: p.offset,
        shape: [h, w, c],
        strides: p.strides,
        layout: p.layout,
        dtype,
        zero_point,
        reverse: [false; 2],
        wrap: None,
    };
    if !is_contiguous(&own) {
        return Err(cx.limit(
            op,
            format!(
                "'{}' is a strided slice; fully connected needs it contiguous",
                tensor.name
            ),
        ));
    }
    Ok(FeatureMap {
        shape,
        strides: [shape[1] * shape[2] * e, shape[2] * e, e],
        ..own
    })
}

/// 8-bit inputs only: TFLite's 16x8 kernels (64-bit bias, 15-bit multipliers) are not lowered
/// because nothing here can check them against a reference yet.
pub(super) fn check_ifm_type(cx: &Lowering<'_>, op: &Op, ifm: &FeatureMap) -> Result<()> {
    if matches!(ifm.dtype, ElemType::I8 | ElemType::U8) {
        Ok(())
    } else {
        Err(cx.limit(
            op,
            format!(
                "{:?} input: convolutions are lowered for int8 and uint8 inputs only",
                ifm.dtype
            ),
        ))
    }
}

/// The raw 8-bit weight values of constant `w`.
pub(super) fn raw_weights(cx: &Lowering<'_>, op: &Op, w: TensorId) -> Result<Vec<i32>> {
    let t = &cx.graph.tensors[w];
    let values: Vec<i32> = match t.dtype {
        DType::I8 => t.data_i8().map(|v| v.into_iter().map(i32::from).collect()),
        DType::U8 => t.data_u8().map(|v| v.into_iter().map(i32::from).collect()),
        other => {
            return Err(cx.limit(
                op,
                format!(
                    "weights '{}' are {other}; the NPU takes 8-bit weights",
                    t.name
                ),
            ));
        }
    }
    .ok_or_else(|| cx.limit(op, format!("weights '{}' are not a constant", t.name)))?;
    if values.len() != t.elements() {
        return Err(Lowering::invalid(
            op,
            format!(
                "weights '{}' hold {} values for shape {:?}",
                t.name,
                values.len(),
                t.shape
            ),
        ));
    }
    Ok(values)
}

/// The weights' quantization, checked to have 1 or `channels` scales and zero points.
pub(super) fn weight_quant<'g>(
    cx: &Lowering<'g>,
    op: &Op,
    w: TensorId,
    channels: usize,
) -> Result<&'g Quantization> {
    let g = cx.graph;
    let t = &g.tensors[w];
    let q = t
        .quant
        .as_ref()
        .ok_or_else(|| Lowering::invalid(op, format!("weights '{}' are not quantized", t.name)))?;
    let ok = |n: usize| n == 1 || n == channels;
    if !ok(q.scale.len()) || !ok(q.zero_point.len()) {
        return Err(Lowering::invalid(
            op,
            format!(
                "weights '{}' have {} scales and {} zero points for {channels} channels",
                t.name,
                q.scale.len(),
                q.zero_point.len()
            ),
        ));
    }
    Ok(q)
}

/// Scale/bias records for `n` output channels, and the OFM rounding they need.
pub(super) fn channel_scales(
    cx: &Lowering<'_>,
    op: &Op,
    io: &Io,
    n: usize,
    fully_connected: bool,
) -> Result<(Vec<ChannelScale>, RoundMode)> {
    let g = cx.graph;
    let xt = &g.tensors[io.x];
    let (si, _) = cx.quant(io.x);
    let (so, _) = cx.quant(io.y);
    let wq = weight_quant(cx, op, io.w, n)?;
    // Conv/depthwise with uint8 inputs multiply the scales in float (TFLite's
    // GetQuantizedConvolutionMultipler); fully connected rescales in double.
    let float_product = !fully_connected && xt.dtype == DType::U8;
    let bias: Vec<i64> = match io.bias {
        None => vec![0; n],
        Some(b) => {
            let bt = &g.tensors[b];
            let v = match bt.dtype {
                DType::I32 => bt
                    .data_i32()
                    .map(|v| v.into_iter().map(i64::from).collect()),
                DType::I64 => bt.data_i64(),
                other => {
                    return Err(cx.limit(
                        op,
                        format!(
                            "bias '{}' is {other}; the NPU takes i32 or i64 biases",
                            bt.name
                        ),
                    ));
                }
            }
            .ok_or_else(|| cx.limit(op, format!("bias '{}' is not a constant", bt.name)))?;
            if v.len() != n {
                return Err(Lowering::invalid(
                    op,
                    format!("bias '{}' has {} values for {n} channels", bt.name, v.len()),
                ));
            }
            v
        }
    };
    let mut out = Vec::with_capacity(n);
    for (c, &b) in bias.iter().enumerate() {
        let ws = wq.scale_at(c);
        let real = if float_product {
            f64::from(si * ws) / f64::from(so)
        } else {
            f64::from(si) * f64::from(ws) / f64::from(so)
        };
        let scale = ofm_scale(real).ok_or_else(|| {
            cx.limit(
                op,
                format!("channel {c}: output rescale {real} is outside the scale record's range"),
            )
        })?;
        if b.abs() > MAX_BIAS {
            return Err(cx.limit(
                op,
                format!("channel {c}: bias {b} does not fit the 40-bit bias field"),
            ));
        }
        out.push(ChannelScale {
            bias: b,
            scale: scale.scale,
            shift: scale.shift,
        });
    }
    // NATURAL: fully connected's one rounding of `acc * scale` (and onnxruntime's,
    // `Requant::Single`); DBL: TFLite's MultiplyByQuantizedMultiplier.
    let round = if fully_connected || g.requant == crate::ir::Requant::Single {
        RoundMode::Natural
    } else {
        RoundMode::Dbl
    };
    Ok((out, round))
}

/// Weights of one operation before dilation handling.
struct WeightSet {
    /// `[O, KH, KW, I]` (depthwise `[C, KH, KW, 1]`).
    shape: [usize; 4],
    values: Vec<i32>,
    depthwise: bool,
}

/// Checks the weight values and builds the encoder's input.
pub(super) fn finish_weights(
    cx: &Lowering<'_>,
    op: &Op,
    shape: [usize; 4],
    values: Vec<i32>,
    scales: Vec<ChannelScale>,
) -> Result<ConvWeights> {
    let per = shape[1] * shape[2] * shape[3];
    let mut out = Vec::with_capacity(values.len());
    for (c, chunk) in values.chunks(per.max(1)).enumerate() {
        let mut sum = 0i64;
        for &v in chunk {
            if !(-255..=255).contains(&v) {
                return Err(cx.limit(
                    op,
                    format!("channel {c}: weight minus zero point is {v}, outside the 9-bit range -255..=255"),
                ));
            }
            sum += i64::from(v.abs());
            out.push(v as i16);
        }
        if sum > MAX_WEIGHT_SUM {
            return Err(cx.limit(
                op,
                format!("channel {c}: the sum of |weights| is {sum}, above {MAX_WEIGHT_SUM}"),
            ));
        }
    }
    Ok(ConvWeights {
        shape,
        values: out,
        scales,
    })
}

/// How a dilation maps onto the hardware: `(inflation factor, register dilation)`.
fn split_dilation(d: usize) -> (usize, usize) {
    match d {
        0..=2 => (1, d.max(1)),
        _ if d.is_multiple_of(2) => (d / 2, 2),
        _ => (d, 1),
    }
}

/// Inserts `fy - 1` / `fx - 1` zero rows/columns between the kernel taps.
fn inflate(set: WeightSet, fy: usize, fx: usize) -> WeightSet {
    if fy == 1 && fx == 1 {
        return set;
    }
    let [o, kh, kw, i] = set.shape;
    let (nh, nw) = ((kh - 1) * fy + 1, (kw - 1) * fx + 1);
    let mut values = vec![0i32; o * nh * nw * i];
    for oc in 0..o {
        for y in 0..kh {
            for x in 0..kw {
                let src = ((oc * kh + y) * kw + x) * i;
                let dst = ((oc * nh + y * fy) * nw + x * fx) * i;
                values[dst..dst + i].copy_from_slice(&set.values[src..src + i]);
            }
        }
    }
    WeightSet {
        shape: [o, nh, nw, i],
        values,
        depthwise: set.depthwise,
    }
}

#[allow(clippy::too_many_arguments)]
fn emit_conv(
    cx: &mut Lowering<'_>,
    op: &Op,
    xfm: FeatureMap,
    yfm: FeatureMap,
    set: WeightSet,
    scales: Vec<ChannelScale>,
    round: RoundMode,
    attrs: &ConvAttrs,
) -> Result<()> {
    let (sy, sx) = attrs.stride;
    let (dy, dx) = attrs.dilation;
    if sy == 0 || sx == 0 || dy == 0 || dx == 0 {
        return Err(Lowering::invalid(
            op,
            "strides and dilations must be positive",
        ));
    }
    let [_, kh, kw, _] = set.shape;
    let dilated = match (dy.checked_mul(kh - 1), dx.checked_mul(kw - 1)) {
        (Some(a), Some(b)) => [a.saturating_add(1), b.saturating_add(1)],
        _ => return Err(Lowering::invalid(op, "dilation overflows")),
    };
    let input = [xfm.shape[0], xfm.shape[1]];
    let output = [yfm.shape[0], yfm.shape[1]];
    check_window(op, input, output, dilated, [sy, sx], attrs.padding)?;
    let pieces = pieces(cx, op, &xfm, &yfm, dilated, [sy, sx], attrs.padding)?;
    let (fy, hy) = split_dilation(dy);
    let (fx, hx) = split_dilation(dx);
    if fy > 1 || fx > 1 {
        let [o, _, _, i] = set.shape;
        let inflated = o
            .checked_mul(dilated[0])
            .and_then(|v| v.checked_mul(dilated[1]))
            .and_then(|v| v.checked_mul(i));
        if inflated.is_none_or(|n| n > MAX_INFLATED_WEIGHTS) {
            return Err(cx.limit(
                op,
                format!(
                    "dilation {dy}x{dx} needs a zero-inflated kernel of {dilated:?} taps per channel, too large"
                ),
            ));
        }
    }
    let set = inflate(set, fy, fx);
    let depthwise = set.depthwise;
    let weights = finish_weights(cx, op, set.shape, set.values, scales)?;
    let activation = clamp(cx, op, attrs.activation, op.outputs[0], yfm.dtype)?;
    let copies = pieces.len();
    if copies > 1 && copies.saturating_mul(weights.values.len()) > MAX_INFLATED_WEIGHTS {
        return Err(cx.limit(
            op,
            format!(
                "stride {sy}x{sx} unrolls into {copies} operations; too many with these weights"
            ),
        ));
    }
    for piece in pieces {
        let kernel = Kernel {
            h: weights.shape[1],
            w: weights.shape[2],
            stride_y: piece.stride_y,
            stride_x: piece.stride_x,
            dilation_y: hy,
            dilation_x: hx,
        };
        cx.program.ops.push(
            NpuOp::new(
                op.name.clone(),
                if depthwise {
                    NpuOpKind::Depthwise(weights.clone())
                } else {
                    NpuOpKind::Conv(weights.clone())
                },
                piece.ifm,
                piece.ofm,
            )
            .with_kernel(kernel)
            .with_padding(piece.padding)
            .with_ofm_round(round)
            .with_activation(activation.clone()),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Padding;
    use npu_rt::ethos_u::config::ETHOS_U55_128;

    fn fixtures() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
    }

    fn lowered(name: &str) -> crate::ethos_u::npu_op::Program {
        let path = fixtures().join(name).join(format!("{name}.tflite"));
        let g = crate::import::load(&path).expect("fixture loads");
        super::super::lower(&g, &ETHOS_U55_128).expect("fixture lowers")
    }

    /// Vela's scale/bias records: 10 bytes each (40-bit bias, 32-bit multiplier, shift).
    fn vela_records(name: &str, offset: usize, n: usize) -> Vec<ChannelScale> {
        let path = fixtures().join(name).join("vela/ethos-u55-128/weights.bin");
        let bytes = std::fs::read(path).expect("weights.bin");
        bytes[offset..offset + 10 * n]
            .chunks_exact(10)
            .map(|r| {
                let mut b = [0u8; 8];
                b[..5].copy_from_slice(&r[..5]);
                // Sign-extend the 40-bit bias.
                let bias = (i64::from_le_bytes(b) << 24) >> 24;
                ChannelScale {
                    bias,
                    scale: u32::from_le_bytes([r[5], r[6], r[7], r[8]]),
                    shift: r[9] & 63,
                }
            })
            .collect()
    }

    fn conv_weights(op: &NpuOp) -> &ConvWeights {
        match &op.kind {
            NpuOpKind::Conv(w) | NpuOpKind::Depthwise(w) => w,
            other => panic!("not a convolution: {other:?}"),
        }
    }

    #[test]
    fn conv1x1_scale_records_equal_vela() {
        let p = lowered("op_conv1x1");
        assert_eq!(p.ops.len(), 1);
        let w = conv_weights(&p.ops[0]);
        assert_eq!(w.shape, [64, 1, 1, 32]);
        assert_eq!(w.scales, vela_records("op_conv1x1", 0, 64));
        assert_eq!(p.ops[0].ofm_round, RoundMode::Dbl);
        assert_eq!(p.ops[0].ifm.zero_point, -1);
    }

    #[test]
    fn conv3x3_s2_depth_slices_records_equal_vela() {
        // Vela DMA's two depth slices: [scales 0..16 | weights] at 0, [scales 16..24 | weights]
        // at 0x5f0 (docs/weights.md, "Buffer layout"; docs/dependencies.md, "Weight DMAs").
        let p = lowered("op_conv3x3_s2");
        assert_eq!(p.ops.len(), 1);
        let w = conv_weights(&p.ops[0]);
        let mut want = vela_records("op_conv3x3_s2", 0, 16);
        want.extend(vela_records("op_conv3x3_s2", 0x5f0, 8));
        assert_eq!(w.scales, want);
        let o = &p.ops[0];
        assert_eq!((o.kernel.stride_y, o.kernel.stride_x), (2, 2));
    }

    #[test]
    fn relu6_clamp_equals_vela() {
        // registers.txt: ACTIVATION_MIN 0xFF80, ACTIVATION_MAX 0x7F.
        let p = lowered("op_conv3x3_s1_relu6");
        let o = &p.ops[0];
        assert_eq!((o.activation.min, o.activation.max), (-128, 127));
        assert_eq!(
            o.padding,
            Padding {
                top: 1,
                left: 1,
                bottom: 1,
                right: 1
            }
        );
        // op_dwconv3x3_s2 (SAME, stride 2): PAD_TOP 0, LEFT 0, BOTTOM 1, RIGHT 1.
        let o = &lowered("op_dwconv3x3_s2").ops[0];
        assert_eq!(
            o.padding,
            Padding {
                top: 0,
                left: 0,
                bottom: 1,
                right: 1
            }
        );
        assert_eq!((o.kernel.stride_y, o.kernel.stride_x), (2, 2));
    }

    #[test]
    fn fc_records_equal_vela_and_grid() {
        let p = lowered("op_fc");
        assert_eq!(p.ops.len(), 1);
        let o = &p.ops[0];
        assert_eq!(o.ifm.shape, [1, 1, 64]);
        assert_eq!(o.ofm.shape, [1, 1, 10]);
        let w = conv_weights(o);
        assert_eq!(w.shape, [10, 1, 1, 64]);
        assert_eq!(w.scales, vela_records("op_fc", 0, 10));
        assert_eq!(fc_grid(1), (1, 1));
        assert_eq!(fc_grid(17), (1, 17));
        assert_eq!(fc_grid(64), (8, 8));
        assert_eq!(fc_grid(512), (16, 32));
    }

    #[test]
    fn depthwise_layout() {
        let p = lowered("op_dwconv3x3_s1");
        let o = &p.ops[0];
        let w = conv_weights(o);
        assert!(matches!(o.kind, NpuOpKind::Depthwise(_)));
        assert_eq!(w.shape[3], 1);
        assert_eq!(w.shape[0], o.ofm.shape[2]);
    }

    #[test]
    fn dilation_inflation() {
        assert_eq!(split_dilation(1), (1, 1));
        assert_eq!(split_dilation(2), (1, 2));
        assert_eq!(split_dilation(3), (3, 1));
        assert_eq!(split_dilation(4), (2, 2));
        let set = WeightSet {
            shape: [1, 2, 2, 1],
            values: vec![1, 2, 3, 4],
            depthwise: false,
        };
        let s = inflate(set, 3, 2);
        assert_eq!(s.shape, [1, 4, 3, 1]);
        assert_eq!(s.values, vec![1, 0, 2, 0, 0, 0, 0, 0, 0, 3, 0, 4]);
    }
}
