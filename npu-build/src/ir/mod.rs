//! The int8 intermediate representation that both importers produce.
//!
//! Conventions (every importer and pass relies on them):
//! - Activations are NHWC. A 4-D feature map is `[N, H, W, C]`; fully-connected inputs may be 2-D `[N, K]`.
//! - Conv2D weights are `[O, KH, KW, I]` (TFLite's OHWI), per-channel quantized along axis 0.
//! - Depthwise weights are `[1, KH, KW, C * M]` (TFLite's layout), per-channel along axis 3.
//! - Fully-connected weights are `[O, I]`, per-channel along axis 0.
//! - Biases are `I32` of length `O`, with scale `input_scale * weight_scale[o]` and zero point 0.
//! - `ops` is in topological order; [`Graph::validate`] checks it.
//! - Constant tensors carry their bytes, little-endian, in `data`.

pub mod quant;
mod validate;

pub use quant::Quantization;

/// Index of a tensor in [`Graph::tensors`].
///
/// A type of its own (not a bare `usize`) so that a buffer, op or input position cannot be passed
/// where a tensor is meant. `graph.tensors[id]` works directly; other per-tensor tables index with
/// [`TensorId::index`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TensorId(pub usize);

impl TensorId {
    /// The position in [`Graph::tensors`] (and in any table kept per tensor).
    pub const fn index(self) -> usize {
        self.0
    }
}

// Printed as the bare number, as error messages and dumps always have.
impl core::fmt::Debug for TensorId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl core::fmt::Display for TensorId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl core::ops::Index<TensorId> for Vec<Tensor> {
    type Output = Tensor;
    fn index(&self, id: TensorId) -> &Tensor {
        &self[id.0]
    }
}

impl core::ops::IndexMut<TensorId> for Vec<Tensor> {
    fn index_mut(&mut self, id: TensorId) -> &mut Tensor {
        &mut self[id.0]
    }
}

impl core::ops::Index<TensorId> for [Tensor] {
    type Output = Tensor;
    fn index(&self, id: TensorId) -> &Tensor {
        &self[id.0]
    }
}

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    I8,
    U8,
    I16,
    I32,
    I64,
    F32,
}

impl DType {
    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 => 1,
            DType::I16 => 2,
            DType::I32 | DType::F32 => 4,
            DType::I64 => 8,
        }
    }

    /// Lowest and highest representable value for integer types (used for clamping).
    pub const fn int_range(self) -> Option<(i64, i64)> {
        match self {
            DType::I8 => Some((i8::MIN as i64, i8::MAX as i64)),
            DType::U8 => Some((0, u8::MAX as i64)),
            DType::I16 => Some((i16::MIN as i64, i16::MAX as i64)),
            DType::I32 => Some((i32::MIN as i64, i32::MAX as i64)),
            DType::I64 => Some((i64::MIN, i64::MAX)),
            DType::F32 => None,
        }
    }

    /// Lower-case name as printed by tools (`i8`, `f32`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F32 => "f32",
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A tensor: an activation (no `data`) or a constant (with `data`).
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// Name from the source model (unique within the graph).
    pub name: String,
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub quant: Option<Quantization>,
    /// Little-endian element bytes of a constant; `None` for activations.
    pub data: Option<Vec<u8>>,
}

/// The byte a variable tensor ([`Graph::variables`]) is filled with before the first run:
/// TFLite's `ResetVariableTensor` sets int8 tensors to their zero point (real 0) and others
/// to 0.
pub fn variable_initial_byte(dtype: DType, zero_point: i32) -> u8 {
    match dtype {
        DType::I8 => zero_point as i8 as u8,
        _ => 0,
    }
}

impl Tensor {
    /// Number of elements (product of the shape; 1 for a scalar).
    ///
    /// Saturates instead of overflowing; [`Graph::validate`] rejects tensors whose size overflows.
    pub fn elements(&self) -> usize {
        self.shape.iter().fold(1usize, |a, &d| a.saturating_mul(d))
    }

    /// Size in bytes (saturating, like [`Tensor::elements`]).
    pub fn byte_size(&self) -> usize {
        self.elements().saturating_mul(self.dtype.size())
    }

    pub fn is_const(&self) -> bool {
        self.data.is_some()
    }

    /// Constant data as `i8` (None if not a constant of type I8).
    pub fn data_i8(&self) -> Option<Vec<i8>> {
        match (&self.data, self.dtype) {
            (Some(d), DType::I8) => Some(d.iter().map(|&b| b as i8).collect()),
            _ => None,
        }
    }

    /// Constant data as `u8` (None if not a constant of type U8).
    pub fn data_u8(&self) -> Option<Vec<u8>> {
        match (&self.data, self.dtype) {
            (Some(d), DType::U8) => Some(d.clone()),
            _ => None,
        }
    }

    /// Constant data as `i32` (None if not a constant of type I32).
    pub fn data_i32(&self) -> Option<Vec<i32>> {
        match (&self.data, self.dtype) {
            (Some(d), DType::I32) => Some(
                d.chunks_exact(4)
                    .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            _ => None,
        }
    }

    /// Constant data as `i64` (None if not a constant of type I64).
    pub fn data_i64(&self) -> Option<Vec<i64>> {
        match (&self.data, self.dtype) {
            (Some(d), DType::I64) => Some(
                d.chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().expect("chunk of 8")))
                    .collect(),
            ),
            _ => None,
        }
    }

    /// Constant data as `f32` (None if not a constant of type F32).
    pub fn data_f32(&self) -> Option<Vec<f32>> {
        match (&self.data, self.dtype) {
            (Some(d), DType::F32) => Some(
                d.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            _ => None,
        }
    }
}

/// Explicit padding in elements, as the kernels apply it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Padding {
    pub top: usize,
    pub left: usize,
    pub bottom: usize,
    pub right: usize,
}

/// A fused activation: a clamp of the real-valued output, applied in the quantized domain
/// the way TFLite's `CalculateActivationRangeQuantized` does (see [`quant::activation_range`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Activation {
    #[default]
    None,
    /// max(x, 0)
    Relu,
    /// min(max(x, 0), 6)
    Relu6,
    /// min(max(x, -1), 1)
    ReluN1To1,
    /// min(max(x, min), max) with real-valued bounds (ONNX Clip, TFLite min/max pairs).
    Clip { min: f32, max: f32 },
}

impl Activation {
    /// Real-valued clamp bounds (None = unbounded on that side).
    pub fn bounds(self) -> (Option<f32>, Option<f32>) {
        match self {
            Activation::None => (None, None),
            Activation::Relu => (Some(0.0), None),
            Activation::Relu6 => (Some(0.0), Some(6.0)),
            Activation::ReluN1To1 => (Some(-1.0), Some(1.0)),
            Activation::Clip { min, max } => (Some(min), Some(max)),
        }
    }
}

/// Attributes of a 2-D convolution (also used by depthwise convolution).
#[derive(Clone, Debug, PartialEq)]
pub struct ConvAttrs {
    /// (stride_h, stride_w)
    pub stride: (usize, usize),
    /// (dilation_h, dilation_w)
    pub dilation: (usize, usize),
    pub padding: Padding,
    pub activation: Activation,
}

/// Attributes of a pooling operator.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolAttrs {
    /// (kernel_h, kernel_w)
    pub kernel: (usize, usize),
    /// (stride_h, stride_w)
    pub stride: (usize, usize),
    pub padding: Padding,
    pub activation: Activation,
}

/// Attributes of a transposed convolution ([`OpKind::TransposeConv2d`]).
///
/// Input pixel `(iy, ix)` reaches output pixel `(iy * stride_h + ky - pad_top,
/// ix * stride_w + kx - pad_left)` through kernel tap `(ky, kx)`; contributions that land outside
/// the output are dropped. The output tensor's shape gives the output size (TFLite's
/// `output_shape`, ONNX's `output_shape`/`output_padding`); positions no input reaches hold the
/// bias alone.
#[derive(Clone, Debug, PartialEq)]
pub struct TransposeConvAttrs {
    /// (stride_h, stride_w)
    pub stride: (usize, usize),
    /// Output rows cropped at the top.
    pub pad_top: usize,
    /// Output columns cropped at the left.
    pub pad_left: usize,
    pub activation: Activation,
}

/// Interpolation of [`OpKind::Resize`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeMode {
    Nearest,
    Bilinear,
}

/// Operators of the IR. Inputs and outputs are listed in [`Op`]; the comment on each variant gives
/// their order. Shapes of outputs are always set on the output tensors.
// `ActFn::Real` makes the enum about 1 KiB: one per operator of a graph, not worth a box (the
// function enum stays `Copy`).
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum OpKind {
    /// inputs: `[x, weights, bias?]`, output `[N, OH, OW, O]`.
    Conv2d(ConvAttrs),
    /// inputs: `[x, weights, bias?]`; `depth_multiplier` output channels per input channel.
    DepthwiseConv2d {
        attrs: ConvAttrs,
        depth_multiplier: usize,
    },
    /// inputs: `[x, weights [O, I], bias?]`; `x` is treated as `[elements / I, I]`.
    FullyConnected { activation: Activation },
    /// inputs: `[a, b]`, numpy broadcasting.
    Add { activation: Activation },
    /// inputs: `[a, b]`, numpy broadcasting.
    Sub { activation: Activation },
    /// inputs: `[a, b]`, numpy broadcasting.
    Mul { activation: Activation },
    /// Mean over `axes` (sorted, unique). inputs: `[x]`.
    Mean { axes: Vec<usize>, keep_dims: bool },
    /// inputs: `[x]`. Average excludes padding (TFLite semantics).
    AvgPool(PoolAttrs),
    /// inputs: `[x]`.
    MaxPool(PoolAttrs),
    /// inputs: `[x0, x1, ...]` concatenated along `axis`.
    Concat { axis: usize, activation: Activation },
    /// inputs: `[x]`; the output tensor's shape is the new shape (same element count).
    Reshape,
    /// inputs: `[x]`. `pads[d] = (before, after)` per dimension; padded with the input zero point
    /// (or `value`, a quantized constant, when the model gives one).
    Pad {
        pads: Vec<(usize, usize)>,
        value: Option<i32>,
    },
    /// inputs: `[x]` NHWC; the output tensor's shape gives the new H and W.
    Resize {
        mode: ResizeMode,
        align_corners: bool,
        half_pixel_centers: bool,
    },
    /// Softmax over the last axis. inputs: `[x]`.
    Softmax { beta: f32 },
    /// inputs: `[x]`; output dims are input dims permuted: `out.shape[i] = in.shape[perm[i]]`.
    Transpose { perm: Vec<usize> },
    /// Float -> integer quantization, or integer -> integer requantization. inputs: `[x]`.
    Quantize,
    /// Integer -> float. inputs: `[x]`.
    Dequantize,
    /// A stand-alone activation (not fused into a producer). inputs: `[x]`.
    Activation(Activation),
    /// A strided box of the input, its raw values copied (the quantization is not changed:
    /// TFLite's SLICE, STRIDED_SLICE, SPLIT, SPLIT_V and UNPACK copy bytes). inputs: `[x]`.
    ///
    /// Per input dimension `d`: output index `i` (in `0..size[d]`) reads input index
    /// `begin[d] + i * step[d]`; `step` may be negative (then `begin` is the last index read).
    /// The output tensor holds the `size` box in row-major order; its shape may drop or add
    /// dimensions of extent 1 (shrink and new axes) but has `size`'s element count.
    Slice {
        begin: Vec<usize>,
        step: Vec<i64>,
        size: Vec<usize>,
    },
    /// Transposed convolution. inputs: `[x [N, H, W, I], weights [O, KH, KW, I], bias?]`
    /// (weights per-channel along axis 0, like Conv2D), output `[N, OH, OW, O]`.
    TransposeConv2d(TransposeConvAttrs),
    /// Matrix product of two activations, `op(a) x op(b)` over the last two axes (`op` transposes
    /// them when `adj_a` / `adj_b`), the leading (batch) axes broadcast numpy-style.
    /// inputs: `[a [..., M, K], b [..., K, N]]`, output `[..., M, N]`; per-tensor quantized.
    BatchMatMul { adj_a: bool, adj_b: bool },
    /// inputs: `[x]`; `out.shape[d] = in.shape[d] * multiples[d]`, the input repeated.
    Tile { multiples: Vec<usize> },
    /// inputs: `[x]`; `pads[d] = (before, after)` filled from the input itself (see [`PadMode`]).
    MirrorPad {
        pads: Vec<(usize, usize)>,
        mode: PadMode,
    },
    /// inputs: `[x]`; the order of elements reversed along each of `axes` (sorted, unique).
    Reverse { axes: Vec<usize> },
    /// inputs: `[x]`; slices of `x` along `axis` at the constant `indices` (each `< x.shape[axis]`,
    /// negative ones already wrapped). The output is `x.shape[..axis] ++ indices_shape ++
    /// x.shape[axis + 1..]`; `indices` is the index tensor flattened in row-major order.
    Gather { axis: usize, indices: Vec<usize> },
    /// inputs: `[x]` NHWC; `[N, H, W, C * b * b] -> [N, H * b, W * b, C]`. Output pixel
    /// `(h * b + i, w * b + j)` channel `c` reads input channel `(i * b + j) * C + c` (TFLite,
    /// ONNX `DCR`) or `c * b * b + i * b + j` (ONNX `CRD`, `crd = true`).
    DepthToSpace { block: usize, crd: bool },
    /// inputs: `[x]` NHWC; `[N, H * b, W * b, C] -> [N, H, W, C * b * b]`, the inverse of
    /// [`OpKind::DepthToSpace`] in `DCR` order.
    SpaceToDepth { block: usize },
    /// inputs: `[x]` `[N, H, W, C]` (or `[N, H, C]` with `block.1 = 1`): padded by `pads`
    /// (`[(top, bottom), (left, right)]`, with the output zero point), then
    /// `out[(i * bw + j) * N + n, h, w, c] = padded[n, h * bh + i, w * bw + j, c]`.
    SpaceToBatch {
        block: (usize, usize),
        pads: [(usize, usize); 2],
    },
    /// inputs: `[x]`; the inverse of [`OpKind::SpaceToBatch`], cropping `crops` from the result.
    BatchToSpace {
        block: (usize, usize),
        crops: [(usize, usize); 2],
    },
    /// `|x|`, rescaled from the input's quantization to the output's. inputs: `[x]`.
    Abs,
    /// `-x`. Integer tensors are negated as raw values (TFLite's NEG ignores the quantization).
    /// inputs: `[x]`.
    Neg,
    /// Element-wise maximum of the raw values, numpy broadcasting. inputs: `[a, b]`.
    Maximum,
    /// Element-wise minimum of the raw values, numpy broadcasting. inputs: `[a, b]`.
    Minimum,
    /// `(a - b)^2`, numpy broadcasting. inputs: `[a, b]`.
    SquaredDifference,
    /// `x >= 0 ? x : alpha * x`, `alpha` broadcast to `x`'s shape. inputs: `[x, alpha]`.
    Prelu,
    /// Sum, maximum or minimum over `axes` (sorted, unique; empty = copy). inputs: `[x]`.
    Reduce {
        op: ReduceOp,
        axes: Vec<usize>,
        keep_dims: bool,
    },
    /// Index of the largest (`max`) or smallest element along `axis`, the first one on ties;
    /// the axis is removed from the shape. The output tensor's type (I32 or I64) is the index
    /// type. inputs: `[x]`.
    ArgMinMax { axis: usize, max: bool },
    /// An elementwise function of f32 values (an operator of an ONNX float island: what a
    /// quantizer left in float between `DequantizeLinear` and `QuantizeLinear`). inputs: `[x]`,
    /// f32 in and out, same shape.
    FloatUnary(FloatFn),
    /// An arithmetic function of two f32 tensors with numpy broadcasting (a float-island
    /// operator). inputs: `[a, b]`, output of the broadcast shape.
    FloatBinary(FloatBinFn),
    /// Layer normalisation of f32 values over the axes from `axis` on (ONNX
    /// `LayerNormalization`, onnxruntime's arithmetic). inputs: `[x, scale, bias]`, `scale` and
    /// `bias` f32 constants shaped like `x`'s normalised axes; output shaped like `x`.
    LayerNorm { axis: usize, epsilon: f32 },
    /// onnxruntime's QLinearSoftmax over the last axis of an 8-bit tensor: what its default
    /// session runs a QDQ Softmax as (a lookup table of `exp`, f32 sums, and its output
    /// multiplier `floor(1 / scale)`), for onnxruntime-quantized models. inputs: `[x]`, int8 or
    /// uint8 in and out.
    OrtSoftmax,
    /// Sum (`mean` false) or mean of f32 values over `axes` (a float-island ReduceSum or
    /// ReduceMean), summed in input order. inputs: `[x]`; output without the reduced axes, or
    /// with them as 1 when `keep_dims`.
    FloatReduce {
        axes: Vec<usize>,
        keep_dims: bool,
        mean: bool,
    },
    /// An element-wise function of one quantized tensor (sigmoid, tanh, ...), computed as
    /// TFLite's kernel for it computes. inputs: `[x]`, output of the same shape.
    ActFn(ActFn),
    /// TFLite's integer UNIDIRECTIONAL_SEQUENCE_LSTM (int8 input and hidden state, int16 cell
    /// state; no CIFG, peephole, projection or layer normalisation). inputs: `[x [B, T, I]
    /// ([T, B, I] when time_major), 4 input weights [C, I], 4 recurrent weights [C, C], 4 biases
    /// [C] (i32), h [B, C] (i8), c [B, C] (i16)]`, gates in the order input, forget, cell,
    /// output; output `y` (x's layout, `C` per row: the hidden state of every step). `h` and `c`
    /// are [`Graph::variables`]: the operator reads them and leaves its final states in them.
    Lstm(LstmAttrs),
}

/// Attributes of [`OpKind::Lstm`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LstmAttrs {
    /// `x` is `[T, B, I]` instead of `[B, T, I]`.
    pub time_major: bool,
    /// Real-valued clip of the cell state (0: none).
    pub cell_clip: f32,
    /// Quantization of the hidden state computed by each step (TFLite's fifth intermediate,
    /// `effective_hidden_scale_intermediate`; the converter makes it the state tensor's, and
    /// TFLite Micro, which the reference follows, uses the state tensor's).
    pub hidden_scale: f32,
    pub hidden_zero_point: i32,
}

impl LstmAttrs {
    /// Index of the hidden state among the operator's inputs.
    pub const H: usize = 13;
    /// Index of the cell state among the operator's inputs.
    pub const C: usize = 14;
}

/// How [`OpKind::MirrorPad`] fills the border.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadMode {
    /// Mirror without repeating the edge (`abc -> cb|abc|ba`); pads `< dim`.
    Reflect,
    /// Mirror repeating the edge (`abc -> ba|abc|cb`); pads `<= dim`.
    Symmetric,
    /// Repeat the edge element (ONNX `Pad` mode `edge`); any pad on a non-empty dimension.
    Edge,
}

impl PadMode {
    /// Lower-case name as printed by tools.
    pub const fn name(self) -> &'static str {
        match self {
            PadMode::Reflect => "reflect",
            PadMode::Symmetric => "symmetric",
            PadMode::Edge => "edge",
        }
    }
}

/// The reduction of [`OpKind::Reduce`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
}

impl ReduceOp {
    /// Name as TFLite spells the operator (`SUM`, `REDUCE_MAX`, `REDUCE_MIN`).
    pub const fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "SUM",
            ReduceOp::Max => "REDUCE_MAX",
            ReduceOp::Min => "REDUCE_MIN",
        }
    }
}

/// The function of [`OpKind::FloatBinary`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatBinFn {
    Add,
    Sub,
    Mul,
    Div,
}

impl FloatBinFn {
    /// ONNX operator name of the function.
    pub fn name(self) -> &'static str {
        match self {
            FloatBinFn::Add => "Add",
            FloatBinFn::Sub => "Sub",
            FloatBinFn::Mul => "Mul",
            FloatBinFn::Div => "Div",
        }
    }
}

/// The function of [`OpKind::FloatUnary`], with the operator's attributes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FloatFn {
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// `tanh x`.
    Tanh,
    /// `x < 0 ? alpha * x : x`.
    LeakyRelu { alpha: f32 },
    /// `max(0, min(1, alpha * x + beta))`.
    HardSigmoid { alpha: f32, beta: f32 },
    /// `x < 0 ? alpha * (e^x - 1) : x`.
    Elu { alpha: f32 },
    /// `e^x`.
    Exp,
    /// `-x`.
    Neg,
    /// `|x|`.
    Abs,
    /// `sqrt x`, correctly rounded.
    Sqrt,
    /// `1 / x`.
    Reciprocal,
    /// `erf x`.
    Erf,
    /// `0.5 x (1 + erf(x / sqrt 2))`, or its tanh approximation.
    Gelu { approximate: bool },
    /// `max(x, 0)`.
    Relu,
    /// `x^exponent` for the exponents of `npu_rt::cpu::float::pow_supported`.
    Pow { exponent: f32 },
}

impl FloatFn {
    /// ONNX operator name of the function.
    pub fn name(self) -> &'static str {
        match self {
            FloatFn::Sigmoid => "Sigmoid",
            FloatFn::Tanh => "Tanh",
            FloatFn::LeakyRelu { .. } => "LeakyRelu",
            FloatFn::HardSigmoid { .. } => "HardSigmoid",
            FloatFn::Elu { .. } => "Elu",
            FloatFn::Exp => "Exp",
            FloatFn::Neg => "Neg",
            FloatFn::Abs => "Abs",
            FloatFn::Sqrt => "Sqrt",
            FloatFn::Reciprocal => "Reciprocal",
            FloatFn::Erf => "Erf",
            FloatFn::Gelu { .. } => "Gelu",
            FloatFn::Relu => "Relu",
            FloatFn::Pow { .. } => "Pow",
        }
    }
}

/// The element-wise functions of [`OpKind::ActFn`].
// `Table` makes the enum 256 bytes: one per operator of a graph, a cost not worth a box (the
// enum stays `Copy`).
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ActFn {
    /// `1 / (1 + exp(-x))` (TFLite LOGISTIC, ONNX Sigmoid).
    Logistic,
    /// `tanh(x)`.
    Tanh,
    /// `x * relu6(x + 3) / 6` (TFLite HARD_SWISH, ONNX HardSwish).
    HardSwish,
    /// `x` for `x >= 0`, `alpha * x` otherwise.
    LeakyRelu { alpha: f32 },
    /// `x` for `x >= 0`, `alpha * (exp(x) - 1)` otherwise (TFLite's ELU has `alpha = 1`).
    Elu { alpha: f32 },
    /// `x * Phi(x)`: exact with the error function, or with the tanh approximation.
    Gelu { approximate: bool },
    /// `exp(x)`.
    Exp,
    /// `ln(x)` (non-positive inputs give the lowest output value, as TFLite's table does).
    Log,
    /// `x * sigmoid(x)` as TFLite computes LOGISTIC followed by MUL (both roundings kept).
    Swish {
        /// Quantization `(scale, zero_point)` of the intermediate sigmoid output.
        sigmoid: (f32, i32),
    },
    /// `1 / sqrt(x)` (TFLite RSQRT; inputs at or below the zero point give the type maximum).
    Rsqrt,
    /// `sqrt(x)` (TFLite SQRT; negative inputs give the output zero point).
    Sqrt,
    /// A tabulated function of the 8-bit input: entry `i` is the output for input `i - 128`
    /// (signed) or `i` (unsigned). The importers make it from a float island
    /// (DEQUANTIZE, float element-wise functions, QUANTIZE) by running those operators on
    /// every input value, so it is bit-exact with them by construction.
    Table([u8; 256]),
    /// A float function of the 8-bit input given by its real output for every input value (in
    /// [`ActFn::Table`]'s order), quantized with the operator's output quantization as ONNX's
    /// QuantizeLinear does (round half to even, saturate): an ONNX float island that is none of
    /// the named functions (GELU's `1 + Erf(x / sqrt 2)` part between two quantized Muls, say).
    Real([f32; 256]),
}

impl ActFn {
    /// Operator name as shown to users.
    pub const fn name(self) -> &'static str {
        match self {
            ActFn::Logistic => "Logistic",
            ActFn::Tanh => "Tanh",
            ActFn::HardSwish => "HardSwish",
            ActFn::LeakyRelu { .. } => "LeakyRelu",
            ActFn::Elu { .. } => "Elu",
            ActFn::Gelu { .. } => "Gelu",
            ActFn::Exp => "Exp",
            ActFn::Log => "Log",
            ActFn::Swish { .. } => "Swish",
            ActFn::Rsqrt => "Rsqrt",
            ActFn::Sqrt => "Sqrt",
            ActFn::Table(_) => "Table",
            ActFn::Real(_) => "FloatFunction",
        }
    }
}

impl OpKind {
    /// Operator name as shown to users (`Conv2D`, `DepthwiseConv2D`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            OpKind::Conv2d(_) => "Conv2D",
            OpKind::DepthwiseConv2d { .. } => "DepthwiseConv2D",
            OpKind::FullyConnected { .. } => "FullyConnected",
            OpKind::Add { .. } => "Add",
            OpKind::Sub { .. } => "Sub",
            OpKind::Mul { .. } => "Mul",
            OpKind::Mean { .. } => "Mean",
            OpKind::AvgPool(_) => "AveragePool",
            OpKind::MaxPool(_) => "MaxPool",
            OpKind::Concat { .. } => "Concat",
            OpKind::Reshape => "Reshape",
            OpKind::Pad { .. } => "Pad",
            OpKind::Resize { .. } => "Resize",
            OpKind::Softmax { .. } => "Softmax",
            OpKind::Transpose { .. } => "Transpose",
            OpKind::Quantize => "Quantize",
            OpKind::Dequantize => "Dequantize",
            OpKind::Activation(_) => "Activation",
            OpKind::Slice { .. } => "Slice",
            OpKind::TransposeConv2d(_) => "TransposeConv2D",
            OpKind::BatchMatMul { .. } => "BatchMatMul",
            OpKind::Tile { .. } => "Tile",
            OpKind::MirrorPad { .. } => "MirrorPad",
            OpKind::Reverse { .. } => "Reverse",
            OpKind::Gather { .. } => "Gather",
            OpKind::DepthToSpace { .. } => "DepthToSpace",
            OpKind::SpaceToDepth { .. } => "SpaceToDepth",
            OpKind::SpaceToBatch { .. } => "SpaceToBatch",
            OpKind::BatchToSpace { .. } => "BatchToSpace",
            OpKind::Abs => "Abs",
            OpKind::Neg => "Neg",
            OpKind::Maximum => "Maximum",
            OpKind::Minimum => "Minimum",
            OpKind::SquaredDifference => "SquaredDifference",
            OpKind::Prelu => "PRelu",
            OpKind::Reduce { op, .. } => match op {
                ReduceOp::Sum => "ReduceSum",
                ReduceOp::Max => "ReduceMax",
                ReduceOp::Min => "ReduceMin",
            },
            OpKind::ArgMinMax { max: true, .. } => "ArgMax",
            OpKind::ArgMinMax { max: false, .. } => "ArgMin",
            OpKind::FloatUnary(_) => "FloatUnary",
            OpKind::FloatBinary(_) => "FloatBinary",
            OpKind::LayerNorm { .. } => "LayerNormalization",
            OpKind::OrtSoftmax => "QLinearSoftmax",
            OpKind::FloatReduce { mean: true, .. } => "FloatReduceMean",
            OpKind::FloatReduce { mean: false, .. } => "FloatReduceSum",
            OpKind::ActFn(f) => f.name(),
            OpKind::Lstm(_) => "UnidirectionalSequenceLstm",
        }
    }
}

/// One operator instance.
#[derive(Clone, Debug, PartialEq)]
pub struct Op {
    /// Node name from the source model (or a generated one, unique within the graph).
    pub name: String,
    pub kind: OpKind,
    pub inputs: Vec<TensorId>,
    pub outputs: Vec<TensorId>,
}

/// A whole model.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Graph {
    /// Model name (usually the file stem).
    pub name: String,
    pub tensors: Vec<Tensor>,
    /// Operators in topological order.
    pub ops: Vec<Op>,
    /// Graph inputs in model order.
    pub inputs: Vec<TensorId>,
    /// Graph outputs in model order.
    pub outputs: Vec<TensorId>,
    /// Tensors that persist from one run to the next (TFLite's variable tensors: LSTM
    /// states): zero before the first run, read by one operator that leaves its new value in
    /// them. Not graph inputs or outputs.
    pub variables: Vec<TensorId>,
    /// How convolutions and matrix products round their int32 sums into the output type.
    pub requant: Requant,
}

/// How the requantization of a convolution, depthwise convolution or matrix product of two
/// activations rounds `acc * M * 2^e` (M a Q31 multiplier, as TFLite's `QuantizeMultiplier`
/// encodes the real scale).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Requant {
    /// TFLite's `MultiplyByQuantizedMultiplier`: rounded to an integer at `2^-31` first, then
    /// by the right shift (two roundings; the NPU's DBL rounding mode).
    #[default]
    Tflite,
    /// One rounding, half up: `(acc * M + 2^(s-1)) >> s` with `s = 31 - e` (the NPU's NATURAL
    /// rounding mode). onnxruntime requantizes in float with one rounding, so its quantized
    /// models get this (the ONNX importer chooses it for models whose producer is
    /// onnxruntime's quantizer, `onnx.quantize`): it equals onnxruntime's result except on
    /// exact ties (onnxruntime rounds them to even) and within `2^-24` of one (its f32
    /// product).
    Single,
}

impl Graph {
    /// Adds a tensor and returns its id.
    pub fn add_tensor(&mut self, t: Tensor) -> TensorId {
        self.tensors.push(t);
        TensorId(self.tensors.len() - 1)
    }

    pub fn tensor(&self, id: TensorId) -> &Tensor {
        &self.tensors[id]
    }

    /// The op producing tensor `id`, if any.
    pub fn producer(&self, id: TensorId) -> Option<usize> {
        self.ops.iter().position(|op| op.outputs.contains(&id))
    }

    /// Indices of ops consuming tensor `id`.
    pub fn consumers(&self, id: TensorId) -> Vec<usize> {
        self.ops
            .iter()
            .enumerate()
            .filter(|(_, op)| op.inputs.contains(&id))
            .map(|(i, _)| i)
            .collect()
    }
}
