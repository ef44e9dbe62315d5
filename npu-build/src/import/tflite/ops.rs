//! TFLite operators -> IR operators.

use super::generated::tflite::{BuiltinOperator as B, BuiltinOptionsRef};
use super::schema::raw;
use super::{Importer, ctx};

/// The operator's builtin options if they are the union variant `$variant` (`Conv2DOptions`...).
macro_rules! options {
    ($op:expr, $variant:ident) => {
        match $op.options {
            Some($crate::import::tflite::generated::tflite::BuiltinOptionsRef::$variant(o)) => {
                Some(o)
            }
            _ => None,
        }
    };
}
pub(super) use options;

// movea
mod movement;
use crate::error::{Error, Result};
use crate::ir::{
    ActFn, Activation, ConvAttrs, DType, Op, OpKind, PadMode, Padding, PoolAttrs, ReduceOp,
    ResizeMode, TensorId, TransposeConvAttrs,
};

/// The TFLite operators the importer maps ([`crate::operators`]'s table), sorted, for messages.
pub(super) fn supported_list() -> String {
    let mut all: Vec<&str> = crate::operators::tflite_names().collect();
    all.sort_unstable();
    all.join(", ")
}

/// Whether builtin operator `code` is in [`crate::operators`]'s table.
pub fn is_supported(code: i32) -> bool {
    let name = super::schema::builtin_name(code);
    crate::operators::tflite_names().any(|n| n == name)
}

/// An operator as read from the file, before mapping.
pub struct RawOp<'a> {
    pub index: usize,
    /// Name of the first output tensor (TFLite operators have no names).
    pub node: String,
    pub code: B,
    pub op_name: String,
    pub inputs: Vec<i32>,
    pub outputs: Vec<i32>,
    /// The builtin options (read with [`options!`]).
    pub options: Option<BuiltinOptionsRef<'a>>,
    /// Intermediate tensors (the LSTM's gate and hidden quantization).
    pub intermediates: Vec<i32>,
}

impl RawOp<'_> {
    pub(super) fn invalid(&self, detail: impl Into<String>) -> Error {
        Error::InvalidNode {
            node: self.node.clone(),
            op: self.op_name.clone(),
            detail: detail.into(),
        }
    }

    /// The error for options `table` the operator needs but does not have.
    fn missing(&self, table: &str) -> Error {
        self.invalid(format!("{table} are missing"))
    }

    pub(super) fn what(&self) -> String {
        format!("operators[{}] options", self.index)
    }
}

/// Maps a fused activation (`ActivationFunctionType`).
fn activation(op: &RawOp, code: i8) -> Result<Activation> {
    match code {
        0 => Ok(Activation::None),
        1 => Ok(Activation::Relu),
        2 => Ok(Activation::ReluN1To1),
        3 => Ok(Activation::Relu6),
        4 => Err(op.invalid("fused activation TANH is not supported")),
        5 => Err(op.invalid("fused activation SIGN_BIT is not supported")),
        c => Err(op.invalid(format!("unknown fused activation {c}"))),
    }
}

/// Output size and explicit padding of one spatial dimension, as TFLite computes them
/// (`ComputeOutSize` and `ComputePaddingWithOffset`: the extra odd pixel goes after).
fn window(
    op: &RawOp,
    padding: i8,
    input: usize,
    filter: usize,
    stride: usize,
    dilation: usize,
) -> Result<(usize, usize, usize)> {
    let eff = filter
        .checked_sub(1)
        .and_then(|f| f.checked_mul(dilation))
        .and_then(|f| f.checked_add(1))
        .ok_or_else(|| {
            op.invalid(format!(
                "filter size {filter} with dilation {dilation} overflows"
            ))
        })?;
    let out = match padding {
        0 => input.div_ceil(stride),
        1 => {
            if input < eff {
                return Err(op.invalid(format!(
                    "VALID padding: the input size {input} is smaller than the filter extent {eff}"
                )));
            }
            (input - eff) / stride + 1
        }
        p => return Err(op.invalid(format!("unknown padding mode {p}"))),
    };
    let total = (out.saturating_sub(1))
        .saturating_mul(stride)
        .saturating_add(eff)
        .saturating_sub(input);
    Ok((out, total / 2, total - total / 2))
}

/// [`window`] on both spatial axes (`[height, width]` each): the output size and the padding.
fn window_2d(
    op: &RawOp,
    padding: i8,
    input: [usize; 2],
    filter: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
) -> Result<([usize; 2], Padding)> {
    let (oh, top, bottom) = window(op, padding, input[0], filter[0], stride[0], dilation[0])?;
    let (ow, left, right) = window(op, padding, input[1], filter[1], stride[1], dilation[1])?;
    Ok((
        [oh, ow],
        Padding {
            top,
            left,
            bottom,
            right,
        },
    ))
}

fn positive(op: &RawOp, v: i32, what: &str) -> Result<usize> {
    usize::try_from(v)
        .ok()
        .filter(|&v| v > 0)
        .ok_or_else(|| op.invalid(format!("{what} must be positive, got {v}")))
}

/// Maps one operator to IR operators (none when it folds to a constant, several for
/// multi-output operators); imports the tensors it uses.
pub fn map(im: &mut Importer, op: &RawOp) -> Result<Vec<Op>> {
    if let Some(ops) = movement::map(im, op)? {
        return Ok(ops);
    }
    Ok(vec![map_one(im, op)?])
}

/// Conv2D and DepthwiseConv2D.
fn conv(
    im: &mut Importer,
    op: &RawOp,
    x: TensorId,
    output: TensorId,
) -> Result<(OpKind, Vec<TensorId>)> {
    let what = op.what();
    let depthwise = op.code == B::DepthwiseConv2d;
    // The two options tables share these fields (not their slots).
    macro_rules! conv_options {
        ($o:expr) => {{
            let o = $o;
            let padding = ctx(raw::<_, i8>(o.padding()), &what)?;
            let sw = positive(op, ctx(o.stride_w(), &what)?, "stride_w")?;
            let sh = positive(op, ctx(o.stride_h(), &what)?, "stride_h")?;
            let act = ctx(raw::<_, i8>(o.fused_activation_function()), &what)?;
            let dw = ctx(o.dilation_w_factor(), &what)?;
            let dh = ctx(o.dilation_h_factor(), &what)?;
            (padding, sw, sh, act, dw, dh)
        }};
    }
    let (padding, sw, sh, act, dw, dh) = if depthwise {
        conv_options!(
            options!(op, DepthwiseConv2DOptions)
                .ok_or_else(|| op.missing("DepthwiseConv2DOptions"))?
        )
    } else {
        conv_options!(options!(op, Conv2DOptions).ok_or_else(|| op.missing("Conv2DOptions"))?)
    };
    let dw = positive(op, dw, "dilation_w_factor")?;
    let dh = positive(op, dh, "dilation_h_factor")?;
    let activation = activation(op, act)?;
    let w = required(im, op, 1)?;
    let bias = input_at(im, op, 2)?;
    let xs = im.graph.tensors[x].shape.clone();
    let ws = im.graph.tensors[w].shape.clone();
    let os = im.graph.tensors[output].shape.clone();
    if xs.len() != 4 || ws.len() != 4 || os.len() != 4 {
        return Err(op.invalid(format!(
            "input {xs:?}, filter {ws:?} and output {os:?} must all be 4-D"
        )));
    }
    let ([oh, ow], padding) = window_2d(
        op,
        padding,
        [xs[1], xs[2]],
        [ws[1], ws[2]],
        [sh, sw],
        [dh, dw],
    )?;
    let out_ch = if depthwise { ws[3] } else { ws[0] };
    let expect = [xs[0], oh, ow, out_ch];
    if os != expect {
        return Err(op.invalid(format!(
            "output shape {os:?} but input {xs:?} and filter {ws:?} give {expect:?}"
        )));
    }
    let attrs = ConvAttrs {
        stride: (sh, sw),
        dilation: (dh, dw),
        padding,
        activation,
    };
    let kind = if depthwise {
        if ws[0] != 1 || xs[3] == 0 || !ws[3].is_multiple_of(xs[3]) {
            return Err(op.invalid(format!(
                "filter {ws:?} is not [1, KH, KW, C * M] for {} input channels",
                xs[3]
            )));
        }
        // TFLite derives the multiplier from the shapes (the option may be stale).
        OpKind::DepthwiseConv2d {
            attrs,
            depth_multiplier: ws[3] / xs[3],
        }
    } else if ws[3] == 1 && xs[3] > 1 && ws[0].is_multiple_of(xs[3]) {
        // A grouped convolution with one input channel per group (Keras
        // `Conv2D(groups=C)`, ConvNeXt's 7x7) is a depthwise convolution: its filter
        // [C * M, KH, KW, 1] becomes [1, KH, KW, C * M].
        let w = depthwise_filter(im, op, w)?;
        let depth_multiplier = ws[0] / xs[3];
        let mut inputs = vec![x, w];
        inputs.extend(bias);
        return Ok((
            OpKind::DepthwiseConv2d {
                attrs,
                depth_multiplier,
            },
            inputs,
        ));
    } else {
        if ws[3] != xs[3] {
            return Err(op.invalid(format!(
                "filter {ws:?} has {} input channels but the input has {} \
                 (grouped convolution with more than one input channel per group is \
                 not supported)",
                ws[3], xs[3]
            )));
        }
        OpKind::Conv2d(attrs)
    };
    let mut inputs = vec![x, w];
    inputs.extend(bias);
    Ok((kind, inputs))
}

/// FullyConnected.
fn fully_connected(
    im: &mut Importer,
    op: &RawOp,
    x: TensorId,
    output: TensorId,
) -> Result<(OpKind, Vec<TensorId>)> {
    let what = op.what();
    let o = options!(op, FullyConnectedOptions);
    let (act, format, asym) = match o {
        Some(o) => (
            ctx(raw::<_, i8>(o.fused_activation_function()), &what)?,
            ctx(raw::<_, i8>(o.weights_format()), &what)?,
            ctx(o.asymmetric_quantize_inputs(), &what)?,
        ),
        None => (0, 0, false),
    };
    let _keep_num_dims = o.map(|o| ctx(o.keep_num_dims(), &what)).transpose()?;
    if format != 0 {
        return Err(op.invalid("shuffled weights format is not supported"));
    }
    if asym {
        return Err(op.invalid("hybrid (asymmetric_quantize_inputs) mode is not supported"));
    }
    let activation = activation(op, act)?;
    let w = required(im, op, 1)?;
    let bias = input_at(im, op, 2)?;
    let ws = &im.graph.tensors[w].shape;
    if ws.len() != 2 {
        return Err(op.invalid(format!("weights {ws:?} are not 2-D [O, I]")));
    }
    let (o_ch, depth) = (ws[0], ws[1]);
    let x_elems = im.graph.tensors[x].elements();
    let out_elems = im.graph.tensors[output].elements();
    if depth == 0
        || !x_elems.is_multiple_of(depth)
        || out_elems != (x_elems / depth).saturating_mul(o_ch)
    {
        return Err(op.invalid(format!(
            "input of {x_elems} elements, weights {ws:?} and output of {out_elems} elements \
             do not agree"
        )));
    }
    let mut inputs = vec![x, w];
    inputs.extend(bias);
    Ok((OpKind::FullyConnected { activation }, inputs))
}

/// AveragePool2D and MaxPool2D.
fn pool(
    im: &mut Importer,
    op: &RawOp,
    x: TensorId,
    output: TensorId,
) -> Result<(OpKind, Vec<TensorId>)> {
    let what = op.what();
    let o = options!(op, Pool2DOptions).ok_or_else(|| op.missing("Pool2DOptions"))?;
    let padding = ctx(raw::<_, i8>(o.padding()), &what)?;
    let sw = positive(op, ctx(o.stride_w(), &what)?, "stride_w")?;
    let sh = positive(op, ctx(o.stride_h(), &what)?, "stride_h")?;
    let fw = positive(op, ctx(o.filter_width(), &what)?, "filter_width")?;
    let fh = positive(op, ctx(o.filter_height(), &what)?, "filter_height")?;
    let activation = activation(op, ctx(raw::<_, i8>(o.fused_activation_function()), &what)?)?;
    let xs = im.graph.tensors[x].shape.clone();
    let os = im.graph.tensors[output].shape.clone();
    if xs.len() != 4 || os.len() != 4 {
        return Err(op.invalid(format!("input {xs:?} and output {os:?} must be 4-D")));
    }
    let ([oh, ow], padding) = window_2d(op, padding, [xs[1], xs[2]], [fh, fw], [sh, sw], [1, 1])?;
    let expect = [xs[0], oh, ow, xs[3]];
    if os != expect {
        return Err(op.invalid(format!(
            "output shape {os:?} but input {xs:?} and the window give {expect:?}"
        )));
    }
    let attrs = PoolAttrs {
        kernel: (fh, fw),
        stride: (sh, sw),
        padding,
        activation,
    };
    let kind = if op.code == B::AveragePool2d {
        OpKind::AvgPool(attrs)
    } else {
        OpKind::MaxPool(attrs)
    };
    Ok((kind, vec![x]))
}

/// Pad and PadV2.
fn pad(im: &mut Importer, op: &RawOp, x: TensorId) -> Result<(OpKind, Vec<TensorId>)> {
    let p = required(im, op, 1)?;
    let rank = im.graph.tensors[x].shape.len();
    let raw = const_ints(im, op, p, "paddings")?;
    if raw.len() != rank * 2 {
        return Err(op.invalid(format!(
            "paddings have {} values, expected {} for a rank-{rank} input",
            raw.len(),
            rank * 2
        )));
    }
    let mut pads = Vec::with_capacity(rank);
    for pair in raw.chunks_exact(2) {
        let before = usize::try_from(pair[0]);
        let after = usize::try_from(pair[1]);
        match (before, after) {
            (Ok(a), Ok(b)) => pads.push((a, b)),
            _ => return Err(op.invalid(format!("negative paddings {raw:?}"))),
        }
    }
    let value = if op.code == B::Padv2 {
        match input_at(im, op, 2)? {
            None => None,
            Some(c) => Some(pad_value(im, op, c, x)?),
        }
    } else {
        None
    };
    Ok((OpKind::Pad { pads, value }, vec![x]))
}

/// ResizeNearestNeighbor and ResizeBilinear.
fn resize(
    im: &mut Importer,
    op: &RawOp,
    x: TensorId,
    output: TensorId,
) -> Result<(OpKind, Vec<TensorId>)> {
    let what = op.what();
    let (mode, align_corners, half_pixel_centers) = if op.code == B::ResizeBilinear {
        match options!(op, ResizeBilinearOptions) {
            Some(o) => (
                ResizeMode::Bilinear,
                ctx(o.align_corners(), &what)?,
                ctx(o.half_pixel_centers(), &what)?,
            ),
            None => (ResizeMode::Bilinear, false, false),
        }
    } else {
        match options!(op, ResizeNearestNeighborOptions) {
            Some(o) => (
                ResizeMode::Nearest,
                ctx(o.align_corners(), &what)?,
                ctx(o.half_pixel_centers(), &what)?,
            ),
            None => (ResizeMode::Nearest, false, false),
        }
    };
    if align_corners && half_pixel_centers {
        return Err(op.invalid("align_corners and half_pixel_centers are both set"));
    }
    let xs = im.graph.tensors[x].shape.clone();
    let os = im.graph.tensors[output].shape.clone();
    if xs.len() != 4 || os.len() != 4 || xs[0] != os[0] || xs[3] != os[3] {
        return Err(op.invalid(format!(
            "input {xs:?} and output {os:?} must be 4-D NHWC with the same N and C"
        )));
    }
    if let Some(s) = input_at(im, op, 1)? {
        let size = const_ints(im, op, s, "size")?;
        let want = [os[1] as i64, os[2] as i64];
        if size != want {
            return Err(op.invalid(format!(
                "size {size:?} does not match the output shape {os:?}"
            )));
        }
    }
    Ok((
        OpKind::Resize {
            mode,
            align_corners,
            half_pixel_centers,
        },
        vec![x],
    ))
}

/// Gather.
fn gather(im: &mut Importer, op: &RawOp, x: TensorId) -> Result<(OpKind, Vec<TensorId>)> {
    let what = op.what();
    let (axis, batch_dims) = match options!(op, GatherOptions) {
        Some(o) => (ctx(o.axis(), &what)?, ctx(o.batch_dims(), &what)?),
        None => (0, 0),
    };
    if batch_dims != 0 {
        return Err(op.invalid(format!("batch_dims {batch_dims} is not supported (only 0)")));
    }
    let rank = im.graph.tensors[x].shape.len();
    let axis = normalize_axis(op, i64::from(axis), rank)?;
    let i = required(im, op, 1)?;
    let raw = const_ints(im, op, i, "indices")?;
    let n = im.graph.tensors[x].shape[axis];
    // TFLite's gather rejects indices outside [0, n): no wrapping of negative ones.
    let indices = raw
        .iter()
        .map(|&v| usize::try_from(v).ok().filter(|&v| v < n))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| {
            op.invalid(format!(
                "indices {raw:?} out of range for dimension {axis} of size {n}"
            ))
        })?;
    Ok((OpKind::Gather { axis, indices }, vec![x]))
}

/// SpaceToBatchND and BatchToSpaceND.
fn space_batch(im: &mut Importer, op: &RawOp, x: TensorId) -> Result<(OpKind, Vec<TensorId>)> {
    let bs = required(im, op, 1)?;
    let block = const_ints(im, op, bs, "block_shape")?;
    let p = required(im, op, 2)?;
    let raw = const_ints(im, op, p, "paddings/crops")?;
    let bad = || {
        op.invalid(format!(
            "block_shape {block:?} and paddings/crops {raw:?} must be positive / \
             non-negative, one or two spatial dimensions"
        ))
    };
    let pos = |v: i64| usize::try_from(v).ok().filter(|&v| v > 0);
    let nn = |v: i64| usize::try_from(v).ok();
    let (blk, pairs) = match (block.as_slice(), raw.as_slice()) {
        ([h], [t, b]) => ((pos(*h), Some(1)), [(nn(*t), nn(*b)), (Some(0), Some(0))]),
        ([h, w], [t, b, l, r]) => ((pos(*h), pos(*w)), [(nn(*t), nn(*b)), (nn(*l), nn(*r))]),
        _ => return Err(bad()),
    };
    let block = match blk {
        (Some(h), Some(w)) => (h, w),
        _ => return Err(bad()),
    };
    let mut pp = [(0usize, 0usize); 2];
    for (d, pair) in pairs.iter().enumerate() {
        match pair {
            (Some(a), Some(b)) => pp[d] = (*a, *b),
            _ => return Err(bad()),
        }
    }
    let kind = if op.code == B::SpaceToBatchNd {
        OpKind::SpaceToBatch { block, pads: pp }
    } else {
        OpKind::BatchToSpace { block, crops: pp }
    };
    Ok((kind, vec![x]))
}

/// Sum, ReduceMax and ReduceMin.
fn reduce(im: &mut Importer, op: &RawOp, x: TensorId) -> Result<(OpKind, Vec<TensorId>)> {
    let what = op.what();
    let keep_dims = match options!(op, ReducerOptions) {
        Some(o) => ctx(o.keep_dims(), &what)?,
        None => false,
    };
    let a = required(im, op, 1)?;
    let rank = im.graph.tensors[x].shape.len();
    let mut axes = Vec::new();
    for ax in const_ints(im, op, a, "axes")? {
        axes.push(normalize_axis(op, ax, rank)?);
    }
    axes.sort_unstable();
    axes.dedup();
    let kind = match op.code {
        B::Sum => ReduceOp::Sum,
        B::ReduceMax => ReduceOp::Max,
        _ => ReduceOp::Min,
    };
    Ok((
        OpKind::Reduce {
            op: kind,
            axes,
            keep_dims,
        },
        vec![x],
    ))
}

/// Mean.
fn mean(im: &mut Importer, op: &RawOp, x: TensorId) -> Result<(OpKind, Vec<TensorId>)> {
    let what = op.what();
    let keep_dims = match options!(op, ReducerOptions) {
        Some(o) => ctx(o.keep_dims(), &what)?,
        None => false,
    };
    let a = required(im, op, 1)?;
    let rank = im.graph.tensors[x].shape.len();
    let axes = const_ints(im, op, a, "axes")?;
    let mut norm = Vec::with_capacity(axes.len());
    for &ax in &axes {
        norm.push(normalize_axis(op, ax, rank)?);
    }
    norm.sort_unstable();
    norm.dedup();
    Ok((
        OpKind::Mean {
            axes: norm,
            keep_dims,
        },
        vec![x],
    ))
}

/// Add, Sub and Mul.
fn binary(im: &mut Importer, op: &RawOp, x: TensorId) -> Result<(OpKind, Vec<TensorId>)> {
    let what = op.what();
    let act = match (op.code, op.options) {
        (B::Add, Some(BuiltinOptionsRef::AddOptions(o))) => {
            ctx(raw::<_, i8>(o.fused_activation_function()), &what)?
        }
        (B::Sub, Some(BuiltinOptionsRef::SubOptions(o))) => {
            ctx(raw::<_, i8>(o.fused_activation_function()), &what)?
        }
        (B::Mul, Some(BuiltinOptionsRef::MulOptions(o))) => {
            ctx(raw::<_, i8>(o.fused_activation_function()), &what)?
        }
        _ => 0,
    };
    let activation = activation(op, act)?;
    let y = required(im, op, 1)?;
    let kind = match op.code {
        B::Add => OpKind::Add { activation },
        B::Sub => OpKind::Sub { activation },
        _ => OpKind::Mul { activation },
    };
    Ok((kind, vec![x, y]))
}

/// ArgMax and ArgMin.
fn arg_min_max(im: &mut Importer, op: &RawOp, x: TensorId) -> Result<(OpKind, Vec<TensorId>)> {
    // The index type is the output tensor's (ArgMaxOptions.output_type names it too).
    let a = required(im, op, 1)?;
    let rank = im.graph.tensors[x].shape.len();
    let axis = match const_ints(im, op, a, "axis")?.as_slice() {
        [ax] => normalize_axis(op, *ax, rank)?,
        other => {
            return Err(op.invalid(format!(
                "axis must hold one value, got {} values",
                other.len()
            )));
        }
    };
    Ok((
        OpKind::ArgMinMax {
            axis,
            max: op.code == B::ArgMax,
        },
        vec![x],
    ))
}

/// DepthToSpace and SpaceToDepth.
fn depth_space(op: &RawOp, x: TensorId) -> Result<(OpKind, Vec<TensorId>)> {
    let what = op.what();
    let block = if op.code == B::DepthToSpace {
        options!(op, DepthToSpaceOptions)
            .ok_or_else(|| op.missing("DepthToSpaceOptions"))?
            .block_size()
    } else {
        options!(op, SpaceToDepthOptions)
            .ok_or_else(|| op.missing("SpaceToDepthOptions"))?
            .block_size()
    };
    let block = positive(op, ctx(block, &what)?, "block_size")?;
    let kind = if op.code == B::DepthToSpace {
        OpKind::DepthToSpace { block, crd: false }
    } else {
        OpKind::SpaceToDepth { block }
    };
    Ok((kind, vec![x]))
}

/// BatchMatMul.
fn batch_matmul(im: &mut Importer, op: &RawOp, x: TensorId) -> Result<(OpKind, Vec<TensorId>)> {
    let what = op.what();
    let (adj_a, adj_b, asym) = match options!(op, BatchMatMulOptions) {
        Some(o) => (
            ctx(o.adj_x(), &what)?,
            ctx(o.adj_y(), &what)?,
            ctx(o.asymmetric_quantize_inputs(), &what)?,
        ),
        None => (false, false, false),
    };
    if asym {
        return Err(op.invalid("hybrid (asymmetric_quantize_inputs) mode is not supported"));
    }
    let y = required(im, op, 1)?;
    Ok((OpKind::BatchMatMul { adj_a, adj_b }, vec![x, y]))
}

/// MirrorPad.
fn mirror_pad(im: &mut Importer, op: &RawOp, x: TensorId) -> Result<(OpKind, Vec<TensorId>)> {
    let what = op.what();
    let mode = match options!(op, MirrorPadOptions) {
        Some(o) => ctx(raw::<_, i8>(o.mode()), &what)?,
        None => 0,
    };
    let mode = match mode {
        0 => PadMode::Reflect,
        1 => PadMode::Symmetric,
        m => return Err(op.invalid(format!("unknown mirror pad mode {m}"))),
    };
    let p = required(im, op, 1)?;
    let pads = pad_pairs(im, op, p, x)?;
    Ok((OpKind::MirrorPad { pads, mode }, vec![x]))
}

/// Concatenation.
fn concatenation(
    im: &mut Importer,
    op: &RawOp,
    x: TensorId,
    output: TensorId,
) -> Result<(OpKind, Vec<TensorId>)> {
    let what = op.what();
    let o = options!(op, ConcatenationOptions).ok_or_else(|| op.missing("ConcatenationOptions"))?;
    let axis = ctx(o.axis(), &what)?;
    let activation = activation(op, ctx(raw::<_, i8>(o.fused_activation_function()), &what)?)?;
    let rank = im.graph.tensors[output].shape.len();
    let axis = normalize_axis(op, i64::from(axis), rank)?;
    let mut inputs = vec![x];
    for k in 1..op.inputs.len() {
        inputs.push(required(im, op, k)?);
    }
    Ok((OpKind::Concat { axis, activation }, inputs))
}

/// Input `k` of `op`, if present (absent or -1: optional input not given).
fn input_at(im: &mut Importer, op: &RawOp, k: usize) -> Result<Option<TensorId>> {
    match op.inputs.get(k) {
        None | Some(-1) => Ok(None),
        Some(&i) => {
            let i = usize::try_from(i)
                .map_err(|_| op.invalid(format!("input {k} refers to tensor {i}")))?;
            im.tensor(i, false).map(Some)
        }
    }
}

/// Input `k` of `op`, which must be present.
fn required(im: &mut Importer, op: &RawOp, k: usize) -> Result<TensorId> {
    input_at(im, op, k)?.ok_or_else(|| op.invalid(format!("input {k} is missing")))
}

/// Maps a single-output operator.
fn map_one(im: &mut Importer, op: &RawOp) -> Result<Op> {
    let what = op.what();
    if op.outputs.len() != 1 {
        return Err(op.invalid(format!("has {} outputs, expected 1", op.outputs.len())));
    }
    let out_index = usize::try_from(op.outputs[0])
        .map_err(|_| op.invalid(format!("output refers to tensor {}", op.outputs[0])))?;
    let output = im.tensor(out_index, false)?;
    if op.code == B::TransposeConv {
        // Inputs `[output_shape, weights, x, bias?]`: the data input is not input 0.
        let (kind, inputs) = transpose_conv(im, op, output)?;
        return Ok(Op {
            name: im.graph.tensors[output].name.clone(),
            kind,
            inputs,
            outputs: vec![output],
        });
    }
    if op.code == B::UnidirectionalSequenceLstm {
        let (kind, inputs) = lstm(im, op)?;
        return Ok(Op {
            name: im.graph.tensors[output].name.clone(),
            kind,
            inputs,
            outputs: vec![output],
        });
    }
    let x = required(im, op, 0)?;

    let (kind, inputs) = match op.code {
        B::Conv2d | B::DepthwiseConv2d => conv(im, op, x, output)?,
        B::FullyConnected => fully_connected(im, op, x, output)?,
        B::Add | B::Sub | B::Mul => binary(im, op, x)?,
        B::Mean => mean(im, op, x)?,
        B::AveragePool2d | B::MaxPool2d => pool(im, op, x, output)?,
        B::Concatenation => concatenation(im, op, x, output)?,
        B::Reshape => {
            // The new shape (input 1 or the options) is the output tensor's shape.
            let n_in = im.graph.tensors[x].elements();
            let n_out = im.graph.tensors[output].elements();
            if n_in != n_out {
                return Err(
                    op.invalid(format!("reshapes {n_in} elements into a tensor of {n_out}"))
                );
            }
            (OpKind::Reshape, vec![x])
        }
        B::Pad | B::Padv2 => pad(im, op, x)?,
        B::ResizeNearestNeighbor | B::ResizeBilinear => resize(im, op, x, output)?,
        B::Softmax => {
            let beta = match options!(op, SoftmaxOptions) {
                Some(o) => ctx(o.beta(), &what)?,
                None => 0.0,
            };
            if !beta.is_finite() {
                return Err(op.invalid(format!("beta {beta} is not finite")));
            }
            (OpKind::Softmax { beta }, vec![x])
        }
        B::BatchMatmul => batch_matmul(im, op, x)?,
        B::Quantize => (OpKind::Quantize, vec![x]),
        B::Dequantize => (OpKind::Dequantize, vec![x]),
        B::Relu => (OpKind::Activation(Activation::Relu), vec![x]),
        B::Relu6 => (OpKind::Activation(Activation::Relu6), vec![x]),
        B::ReluN1To1 => (OpKind::Activation(Activation::ReluN1To1), vec![x]),
        // moveb
        B::Transpose => {
            let p = required(im, op, 1)?;
            let rank = im.graph.tensors[x].shape.len();
            let raw = const_ints(im, op, p, "perm")?;
            let mut perm = Vec::with_capacity(raw.len());
            for &v in &raw {
                perm.push(normalize_axis(op, v, rank)?);
            }
            (OpKind::Transpose { perm }, vec![x])
        }
        B::Tile => {
            let m = required(im, op, 1)?;
            let raw = const_ints(im, op, m, "multiples")?;
            let multiples = raw
                .iter()
                .map(|&v| usize::try_from(v))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|_| op.invalid(format!("negative multiples {raw:?}")))?;
            (OpKind::Tile { multiples }, vec![x])
        }
        B::MirrorPad => mirror_pad(im, op, x)?,
        B::ReverseV2 => {
            let a = required(im, op, 1)?;
            let rank = im.graph.tensors[x].shape.len();
            let mut axes = Vec::new();
            for v in const_ints(im, op, a, "axis")? {
                axes.push(normalize_axis(op, v, rank)?);
            }
            axes.sort_unstable();
            axes.dedup();
            (OpKind::Reverse { axes }, vec![x])
        }
        B::Gather => gather(im, op, x)?,
        B::DepthToSpace | B::SpaceToDepth => depth_space(op, x)?,
        B::SpaceToBatchNd | B::BatchToSpaceNd => space_batch(im, op, x)?,
        B::Abs => (OpKind::Abs, vec![x]),
        B::Neg => (OpKind::Neg, vec![x]),
        B::Maximum | B::Minimum | B::SquaredDifference | B::Prelu => {
            let y = required(im, op, 1)?;
            let kind = match op.code {
                B::Maximum => OpKind::Maximum,
                B::Minimum => OpKind::Minimum,
                B::SquaredDifference => OpKind::SquaredDifference,
                _ => OpKind::Prelu,
            };
            (kind, vec![x, y])
        }
        B::Sum | B::ReduceMax | B::ReduceMin => reduce(im, op, x)?,
        B::ArgMax | B::ArgMin => arg_min_max(im, op, x)?,
        B::Relu0To1 => (
            OpKind::Activation(Activation::Clip { min: 0.0, max: 1.0 }),
            vec![x],
        ),
        B::Logistic => (OpKind::ActFn(ActFn::Logistic), vec![x]),
        B::Tanh => (OpKind::ActFn(ActFn::Tanh), vec![x]),
        B::Exp => (OpKind::ActFn(ActFn::Exp), vec![x]),
        B::Log => (OpKind::ActFn(ActFn::Log), vec![x]),
        B::HardSwish => (OpKind::ActFn(ActFn::HardSwish), vec![x]),
        B::Rsqrt => (OpKind::ActFn(ActFn::Rsqrt), vec![x]),
        B::Sqrt => (OpKind::ActFn(ActFn::Sqrt), vec![x]),
        B::Elu => (OpKind::ActFn(ActFn::Elu { alpha: 1.0 }), vec![x]),
        B::LeakyRelu => {
            let alpha = match options!(op, LeakyReluOptions) {
                Some(o) => ctx(o.alpha(), &what)?,
                None => 0.0,
            };
            if !alpha.is_finite() {
                return Err(op.invalid(format!("alpha {alpha} is not finite")));
            }
            (OpKind::ActFn(ActFn::LeakyRelu { alpha }), vec![x])
        }
        B::Gelu => {
            let approximate = match options!(op, GeluOptions) {
                Some(o) => ctx(o.approximate(), &what)?,
                None => false,
            };
            (OpKind::ActFn(ActFn::Gelu { approximate }), vec![x])
        }
        _ => {
            return Err(Error::UnsupportedOp {
                node: op.node.clone(),
                op: op.op_name.clone(),
                supported: supported_list(),
            });
        }
    };
    Ok(Op {
        name: im.graph.tensors[output].name.clone(),
        kind,
        inputs,
        outputs: vec![output],
    })
}

/// TRANSPOSE_CONV: inputs `[output_shape, weights [O, KH, KW, I], x, bias?]`. The padding is
/// TFLite's `ComputePaddingHeightWidth` of the forward convolution that maps the output back
/// onto the input (its "input" is our output); only the leading part is cropped, the rest of
/// the full result beyond the output size is dropped.
fn transpose_conv(
    im: &mut Importer,
    op: &RawOp,
    output: TensorId,
) -> Result<(OpKind, Vec<TensorId>)> {
    let what = op.what();
    let o = options!(op, TransposeConvOptions).ok_or_else(|| op.missing("TransposeConvOptions"))?;
    let padding = ctx(raw::<_, i8>(o.padding()), &what)?;
    let sw = positive(op, ctx(o.stride_w(), &what)?, "stride_w")?;
    let sh = positive(op, ctx(o.stride_h(), &what)?, "stride_h")?;
    let activation = activation(op, ctx(raw::<_, i8>(o.fused_activation_function()), &what)?)?;
    let shape_t = required(im, op, 0)?;
    let w = required(im, op, 1)?;
    let x = required(im, op, 2)?;
    let bias = input_at(im, op, 3)?;
    let xs = im.graph.tensors[x].shape.clone();
    let ws = im.graph.tensors[w].shape.clone();
    let os = im.graph.tensors[output].shape.clone();
    if xs.len() != 4 || ws.len() != 4 || os.len() != 4 {
        return Err(op.invalid(format!(
            "input {xs:?}, filter {ws:?} and output {os:?} must all be 4-D"
        )));
    }
    let want = const_ints(im, op, shape_t, "output_shape")?;
    if want.len() != 4 || want.iter().zip(&os).any(|(&a, &b)| a != b as i64) {
        return Err(op.invalid(format!(
            "output_shape {want:?} does not match the output tensor {os:?}"
        )));
    }
    if ws[3] != xs[3] || ws[0] != os[3] || xs[0] != os[0] {
        return Err(op.invalid(format!(
            "filter {ws:?} does not map input {xs:?} to output {os:?}"
        )));
    }
    // `window` on the output size gives the forward convolution's padding.
    let (_, pad_top, _) = window(op, padding, os[1], ws[1], sh, 1)?;
    let (_, pad_left, _) = window(op, padding, os[2], ws[2], sw, 1)?;
    let mut inputs = vec![x, w];
    inputs.extend(bias);
    Ok((
        OpKind::TransposeConv2d(TransposeConvAttrs {
            stride: (sh, sw),
            pad_top,
            pad_left,
            activation,
        }),
        inputs,
    ))
}

fn normalize_axis(op: &RawOp, axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(op.invalid(format!("axis {axis} is out of range for rank {rank}")));
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

/// The values of a constant integer tensor (I32 or I64).
fn const_ints(im: &Importer, op: &RawOp, id: TensorId, what: &str) -> Result<Vec<i64>> {
    let t = &im.graph.tensors[id];
    let v = match t.dtype {
        DType::I32 => t.data_i32().map(|v| v.into_iter().map(i64::from).collect()),
        DType::I64 => t.data_i64(),
        _ => None,
    };
    v.ok_or_else(|| {
        op.invalid(format!(
            "{what} ('{}') must be a constant INT32 or INT64 tensor",
            t.name
        ))
    })
}

/// The constant filter `[O, KH, KW, 1]` of a grouped convolution with one input channel per
/// group, as a depthwise filter `[1, KH, KW, O]` (a new tensor; per-channel quantization moves
/// from axis 0 to axis 3).
fn depthwise_filter(im: &mut Importer, op: &RawOp, w: TensorId) -> Result<TensorId> {
    let t = &im.graph.tensors[w];
    let (Some(data), &[o, kh, kw, 1]) = (&t.data, t.shape.as_slice()) else {
        return Err(op.invalid(format!(
            "filter '{}' {:?} must be a constant [O, KH, KW, 1]",
            t.name, t.shape
        )));
    };
    let e = t.dtype.size();
    if data.len() != o * kh * kw * e {
        return Err(op.invalid(format!("filter '{}' holds {} bytes", t.name, data.len())));
    }
    let mut out = vec![0u8; data.len()];
    for c in 0..o {
        for p in 0..kh * kw {
            let src = (c * kh * kw + p) * e;
            let dst = (p * o + c) * e;
            out[dst..dst + e].copy_from_slice(&data[src..src + e]);
        }
    }
    let mut quant = t.quant.clone();
    if let Some(q) = quant.as_mut()
        && q.axis.is_some()
    {
        q.axis = Some(3);
    }
    let (base, dtype) = (format!("{} (depthwise)", t.name), t.dtype);
    let tensor = crate::ir::Tensor {
        name: im.fresh_name(&base),
        shape: vec![1, kh, kw, o],
        dtype,
        quant,
        data: Some(out),
    };
    Ok(im.graph.add_tensor(tensor))
}

/// `(before, after)` pairs of a constant `[rank, 2]` paddings tensor.
fn pad_pairs(im: &Importer, op: &RawOp, p: TensorId, x: TensorId) -> Result<Vec<(usize, usize)>> {
    let rank = im.graph.tensors[x].shape.len();
    let raw = const_ints(im, op, p, "paddings")?;
    if raw.len() != rank * 2 {
        return Err(op.invalid(format!(
            "paddings have {} values, expected {} for a rank-{rank} input",
            raw.len(),
            rank * 2
        )));
    }
    raw.chunks_exact(2)
        .map(
            |pair| match (usize::try_from(pair[0]), usize::try_from(pair[1])) {
                (Ok(a), Ok(b)) => Ok((a, b)),
                _ => Err(op.invalid(format!("negative paddings {raw:?}"))),
            },
        )
        .collect()
}

/// PADV2's constant value, as a raw (quantized) integer of the input's type.
fn pad_value(im: &Importer, op: &RawOp, c: TensorId, x: TensorId) -> Result<i32> {
    let t = &im.graph.tensors[c];
    let xt = im.graph.tensors[x].dtype;
    let d = t
        .data
        .as_deref()
        .filter(|_| t.elements() == 1 && t.dtype == xt);
    let v = match (d, xt) {
        (Some(d), DType::I8) => d.first().map(|&b| i32::from(b as i8)),
        (Some(d), DType::U8) => d.first().map(|&b| i32::from(b)),
        (Some(d), DType::I16) => d
            .get(..2)
            .map(|b| i32::from(i16::from_le_bytes([b[0], b[1]]))),
        (Some(d), DType::I32) => d
            .get(..4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        _ => None,
    };
    v.ok_or_else(|| {
        op.invalid(format!(
            "constant_values ('{}') must be a one-element integer constant of the input's type",
            t.name
        ))
    })
}

/// UNIDIRECTIONAL_SEQUENCE_LSTM: inputs `[x, 4 input weights, 4 recurrent weights, 3
/// peephole weights, 4 biases, projection weights and bias, h, c, 4 layer-norm
/// coefficients]`; the integer kernel's hidden quantization is intermediate 4.
#[allow(clippy::type_complexity)]
fn lstm(im: &mut Importer, op: &RawOp) -> Result<(OpKind, Vec<TensorId>)> {
    let what = op.what();
    let o = options!(op, UnidirectionalSequenceLstmOptions)
        .ok_or_else(|| op.missing("UnidirectionalSequenceLSTMOptions"))?;
    let act = ctx(raw::<_, i8>(o.fused_activation_function()), &what)?;
    if act != 4 {
        return Err(op.invalid(format!(
            "fused activation {act}: the integer LSTM computes its cell gate with TANH (4)"
        )));
    }
    let cell_clip = ctx(o.cell_clip(), &what)?;
    let proj_clip = ctx(o.proj_clip(), &what)?;
    let time_major = ctx(o.time_major(), &what)?;
    if ctx(o.asymmetric_quantize_inputs(), &what)? || ctx(o.diagonal_recurrent_tensors(), &what)? {
        return Err(op.invalid(
            "hybrid (asymmetric_quantize_inputs) and diagonal-recurrent LSTMs are not supported",
        ));
    }
    if !(cell_clip.is_finite() && cell_clip >= 0.0 && proj_clip.is_finite() && proj_clip >= 0.0) {
        return Err(op.invalid(format!(
            "invalid clips: cell {cell_clip}, projection {proj_clip}"
        )));
    }
    for (k, what) in [
        (1, "input gate weights (CIFG)"),
        (5, "recurrent input gate weights (CIFG)"),
        (12, "input gate bias (CIFG)"),
    ] {
        if input_at(im, op, k)?.is_none() {
            return Err(op.invalid(format!(
                "has no {what}; coupled-gate LSTMs are not supported"
            )));
        }
    }
    for (k, what) in [
        (9, "peephole"),
        (10, "peephole"),
        (11, "peephole"),
        (16, "projection"),
        (17, "projection"),
        (20, "layer normalisation"),
        (21, "layer normalisation"),
        (22, "layer normalisation"),
        (23, "layer normalisation"),
    ] {
        if op.inputs.get(k).is_some_and(|&i| i >= 0) {
            return Err(op.invalid(format!(
                "uses {what} weights (input {k}); only the plain LSTM is supported"
            )));
        }
    }
    let x = required(im, op, 0)?;
    if im.graph.tensors[x].dtype != DType::I8 {
        return Err(op.invalid(format!(
            "input is {}; only the integer (int8) LSTM is supported",
            im.graph.tensors[x].dtype
        )));
    }
    let mut inputs = vec![x];
    for k in 1..=8 {
        inputs.push(required(im, op, k)?);
    }
    for k in 12..=15 {
        inputs.push(required(im, op, k)?);
    }
    for k in [18, 19] {
        let t = required(im, op, k)?;
        if !im.graph.variables.contains(&t) {
            return Err(op.invalid(format!(
                "state input {k} ('{}') is not a variable tensor",
                im.graph.tensors[t].name
            )));
        }
        inputs.push(t);
    }
    let hidden = op
        .intermediates
        .get(4)
        .and_then(|&i| usize::try_from(i).ok())
        .ok_or_else(|| {
            op.invalid(
                "the integer LSTM needs 5 intermediate tensors (the converter's quantized form)",
            )
        })?;
    let hidden = im.tensor(hidden, false)?;
    let (hidden_scale, hidden_zero_point) = match &im.graph.tensors[hidden].quant {
        Some(q) if q.scale.len() == 1 => (q.scale(), q.zero_point()),
        _ => {
            return Err(op.invalid(
                "intermediate 4 (the hidden state's quantization) has no per-tensor quantization",
            ));
        }
    };
    Ok((
        OpKind::Lstm(crate::ir::LstmAttrs {
            time_major,
            cell_clip,
            hidden_scale,
            hidden_zero_point,
        }),
        inputs,
    ))
}
