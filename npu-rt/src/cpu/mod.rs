//! Kernels for operators that run on the CPU, `no_std` and without allocation.
//!
//! A compiled model is an ordered list of steps over one arena: NPU command streams and CPU
//! operations. A CPU operation is an [`Op`] with every parameter decided at compile time (byte
//! offsets, shapes, integer rescale factors); it travels as a few `u32` words ([`Op::encode`],
//! [`Op::decode`]) that the generated `run` passes to [`run`]. The arithmetic is that of
//! TFLite's reference kernels, bit for bit, like `npu-build`'s reference interpreter.
//!
//! ```
//! use npu_rt::cpu::{Buf, Elem, Op};
//! // Dequantize 4 int8 values at arena offset 0 to f32 at offset 16.
//! let op = Op::Dequantize {
//!     x: Buf::arena(0),
//!     y: Buf::arena(16),
//!     len: 4,
//!     from: Elem::I8,
//!     scale: 0.5,
//!     zero_point: 1,
//! };
//! let (words, n) = op.encode();
//! let mut arena = [0u8; 32];
//! arena[..4].copy_from_slice(&[1, 3, 255, 5]);
//! npu_rt::cpu::run(0, &words[..n], &[], &mut arena).unwrap();
//! assert_eq!(f32::from_le_bytes(arena[16..20].try_into().unwrap()), 0.0);
//! assert_eq!(f32::from_le_bytes(arena[20..24].try_into().unwrap()), 1.0);
//! assert_eq!(f32::from_le_bytes(arena[24..28].try_into().unwrap()), -1.0);
//! ```

mod conv;
pub mod elem;
pub mod float;
mod kernels;
mod lstm;
pub use lstm::SCALES as LSTM_SCALES;
mod lut;
pub mod math;
mod movement;
mod operands;
// matmul
mod matmul;
mod params;
// movea
mod reduce;
mod slice;
mod words;

pub use elem::Elem;
pub use math::{PairwiseKind, PairwiseOp, UnaryKind, UnaryMode, UnaryOp};
pub use params::BatchSpaceOp;
pub use params::{
    ArgOp, ConcatMode, ConcatOp, ConvOp, FloatClampOp, FloatSoftmaxOp, LstmOp, MeanOp, OutRequant,
    PadOp, ReduceMode, ReduceOp, RemapOp, ResizeOp,
};
pub use params::{FloatLayerNormOp, FloatReduceOp, FloatUnaryOp, OrtSoftmaxOp};
// movea
pub use params::SliceOp;
// matmul
pub use params::MatMulOp;

use crate::error::Error;
use params::{Word, code_word, record};
use words::{Reader, Writer};

/// Region of a [`Buf`]: the read-only data (weights, constants) of the model.
pub const REGION_WEIGHTS: u8 = 0;
/// Region of a [`Buf`]: the arena.
pub const REGION_ARENA: u8 = 1;

/// Highest tensor rank the movement kernels take.
pub const MAX_RANK: usize = 6;

/// Most words one encoded [`Op`] takes.
pub const MAX_WORDS: usize = 40;

/// Where an operand lives: a region ([`REGION_WEIGHTS`] or [`REGION_ARENA`]) and a byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buf {
    pub region: u8,
    pub offset: u32,
}

impl Buf {
    /// An operand in the arena.
    pub const fn arena(offset: u32) -> Buf {
        Buf {
            region: REGION_ARENA,
            offset,
        }
    }

    /// An operand in the read-only region.
    pub const fn weights(offset: u32) -> Buf {
        Buf {
            region: REGION_WEIGHTS,
            offset,
        }
    }
}

/// One CPU operation with all its parameters. Element counts and offsets are in elements and
/// bytes respectively; integer rescale factors are TFLite's (Q31 multiplier, shift).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    /// Copies `bytes` bytes (a reshape that could not be a view).
    Copy { x: Buf, y: Buf, bytes: u32 },
    /// f32 -> integer: `round_ties_even(x / scale) + zero_point`, saturated (ONNX
    /// `QuantizeLinear`; NaN becomes the zero point).
    Quantize {
        x: Buf,
        y: Buf,
        len: u32,
        to: Elem,
        scale: f32,
        zero_point: i32,
    },
    /// Integer -> integer: `MultiplyByQuantizedMultiplier(x - in_zp) + out_zp` clamped to
    /// `lo..=hi` and to the output type (TFLite's `Requantize`, and stand-alone activations).
    Requantize {
        x: Buf,
        y: Buf,
        len: u32,
        from: Elem,
        to: Elem,
        in_zp: i32,
        out_zp: i32,
        multiplier: i32,
        shift: i32,
        lo: i32,
        hi: i32,
    },
    /// Integer -> f32: `(x - zero_point) * scale` in double precision, rounded once to single.
    Dequantize {
        x: Buf,
        y: Buf,
        len: u32,
        from: Elem,
        scale: f64,
        zero_point: i32,
    },
    /// `y.shape[i] = x.shape[perm[i]]`, any element size; `shape` is the input's, the first
    /// `rank` entries used.
    Transpose {
        x: Buf,
        y: Buf,
        elem_bytes: u32,
        rank: u32,
        shape: [u32; MAX_RANK],
        perm: [u32; MAX_RANK],
    },
    /// 8-bit softmax over rows of `depth` elements (TFLite's reference kernel): `multiplier`,
    /// `shift` scale input differences to Q5.26, differences below `diff_min` contribute 0.
    /// The output has scale 1/256 and the output type's minimum as zero point.
    Softmax {
        x: Buf,
        y: Buf,
        rows: u32,
        depth: u32,
        from: Elem,
        to: Elem,
        multiplier: i32,
        shift: i32,
        diff_min: i32,
    },
    /// `y = a (op) b` on integers with numpy broadcasting (TFLite's quantized `Add`, `Sub`,
    /// `Mul`). `a_shape` and `b_shape` are right-aligned to `rank` (leading 1s); the output
    /// shape is their broadcast.
    Binary {
        a: Buf,
        y: Buf,
        b: Buf,
        kind: BinaryKind,
        elem: Elem,
        rank: u32,
        a_shape: [u32; MAX_RANK],
        b_shape: [u32; MAX_RANK],
        p: BinaryParams,
    },
    /// 2-D max or average pooling over NHWC integers (TFLite's reference kernels: the window
    /// clamped to the image, so padding never counts; the average rounds half away from zero).
    Pool {
        x: Buf,
        y: Buf,
        elem: Elem,
        p: PoolParams,
    },
    /// Conv2D, DepthwiseConv2D or FullyConnected (see [`ConvOp`]).
    Conv(ConvOp),
    /// Mean over some axes (see [`MeanOp`]).
    Mean(MeanOp),
    /// Constant padding (see [`PadOp`]).
    Pad(PadOp),
    /// Nearest or bilinear resize (see [`ResizeOp`]).
    Resize(ResizeOp),
    /// One input of a Concat (see [`ConcatOp`]); a Concat of k inputs is k of these.
    Concat(ConcatOp),
    /// Softmax of f32 values (see [`FloatSoftmaxOp`]).
    SoftmaxF32(FloatSoftmaxOp),
    /// Clamp of f32 values (see [`FloatClampOp`]).
    ClampF32(FloatClampOp),
    /// A strided box of a tensor (see [`SliceOp`]).
    Slice(SliceOp),
    /// Transposed convolution over NHWC integers: a [`ConvOp`] whose `sh`/`sw` are the strides
    /// at which input pixels land in the output and `top`/`left` the output rows/columns
    /// cropped (input `iy` reaches output `iy * sh + ky - top` through tap `ky`); `dh`, `dw`
    /// are 1, `depth_multiplier` 0 and the scales fixed-point.
    TransposeConv(ConvOp),
    /// Matrix product of two int8 activations (see [`MatMulOp`]).
    BatchMatMul(MatMulOp),
    /// Tile, MirrorPad, Reverse or Gather as a separable index map (see [`RemapOp`]).
    Remap(RemapOp),
    /// SpaceToBatch or BatchToSpace (see [`BatchSpaceOp`]).
    BatchSpace(BatchSpaceOp),
    /// Abs or Neg (see [`UnaryOp`]).
    Unary(UnaryOp),
    /// Maximum, Minimum, SquaredDifference or PRelu (see [`PairwiseOp`]).
    Pairwise(PairwiseOp),
    /// SUM, REDUCE_MAX or REDUCE_MIN over some axes (see [`ReduceOp`]).
    Reduce(ReduceOp),
    /// ARG_MAX or ARG_MIN along one axis (see [`ArgOp`]).
    Arg(ArgOp),
    /// An f32 elementwise function (see [`FloatUnaryOp`]): operators of float islands.
    FloatUnary(FloatUnaryOp),
    /// Layer normalisation of f32 rows (see [`FloatLayerNormOp`]): a float island.
    FloatLayerNorm(FloatLayerNormOp),
    /// Sum or mean of f32 values over some axes (see [`FloatReduceOp`]): a float island.
    FloatReduce(FloatReduceOp),
    /// onnxruntime's QLinearSoftmax of 8-bit values (see [`OrtSoftmaxOp`]).
    OrtSoftmax(OrtSoftmaxOp),
    /// An element-wise function of int8/uint8 values as a 256-byte table in the NPU's order:
    /// `y = table[x + 128]` for int8, `table[x]` for uint8 (sigmoid, tanh, GELU, ...).
    Lut8 {
        x: Buf,
        y: Buf,
        len: u32,
        elem: Elem,
        table: Buf,
    },
    /// int16 LOGISTIC (`tanh` false) or TANH of `len` values: `v = (x * multiplier +
    /// 2^(shift-1)) >> shift`, then [`crate::ethos_u::builtin_act`]'s function of `v`, as the
    /// NPU's built-in SIGMOID/TANH compute it.
    Act16 {
        x: Buf,
        y: Buf,
        len: u32,
        multiplier: u32,
        shift: u32,
        tanh: bool,
    },
    /// TFLite's integer UNIDIRECTIONAL_SEQUENCE_LSTM, its state updated in place.
    Lstm(LstmOp),
}

record! {
    /// Parameters of [`Op::Pool`]. With `requant`, the pooled value `v` becomes
    /// `MultiplyByQuantizedMultiplier(v - zi, m, s) + zo` (ONNX models whose output quantization
    /// differs from the input's); then it is clamped to `lo..=hi` and the type.
    #[derive(Eq, Default)]
    pub struct PoolParams {
        pub max: bool,
        pub n: u32,
        pub h: u32,
        pub w: u32,
        pub c: u32,
        pub oh: u32,
        pub ow: u32,
        pub kh: u32,
        pub kw: u32,
        pub sh: u32,
        pub sw: u32,
        pub top: u32,
        pub left: u32,
        pub requant: bool,
        pub zi: i32,
        pub m: i32,
        pub s: i32,
        pub zo: i32,
        pub lo: i32,
        pub hi: i32,
    }
}

/// The element function of [`Op::Binary`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryKind {
    Add = 0,
    Sub = 1,
    Mul = 2,
    /// Mul whose product is rescaled with one rounding (`multiply_round_once`), as
    /// onnxruntime-quantized models requantize.
    MulRoundOnce = 3,
}

code_word!(BinaryKind {
    Add,
    Sub,
    Mul,
    MulRoundOnce
});

record! {
    /// Quantization parameters of [`Op::Binary`]. Add/Sub (TFLite's general quantized add): both
    /// inputs `(v - z) << left_shift` rescaled by `(m1, s1)` and `(m2, s2)`, summed, rescaled by
    /// `(mo, so)`. Mul: `(a - za) * (b - zb)` rescaled by `(mo, so)`. Then `+ zo`, clamped to
    /// `lo..=hi` and the output type. Add/Sub/Mul and the pairwise operations share this
    /// encoding.
    #[derive(Eq, Default)]
    pub struct BinaryParams {
        pub za: i32,
        pub zb: i32,
        pub zo: i32,
        pub left_shift: i32,
        pub m1: i32,
        pub s1: i32,
        pub m2: i32,
        pub s2: i32,
        pub mo: i32,
        pub so: i32,
        pub lo: i32,
        pub hi: i32,
    }
}

const OP_COPY: u32 = 1;
const OP_QUANTIZE: u32 = 2;
const OP_REQUANTIZE: u32 = 3;
const OP_DEQUANTIZE: u32 = 4;
const OP_TRANSPOSE: u32 = 5;
const OP_SOFTMAX: u32 = 6;
const OP_BINARY: u32 = 7;
const OP_POOL: u32 = 8;
const OP_CONV: u32 = 9;
const OP_MEAN: u32 = 10;
const OP_PAD: u32 = 11;
const OP_RESIZE: u32 = 12;
const OP_CONCAT: u32 = 13;
const OP_SOFTMAX_F32: u32 = 14;
const OP_CLAMP_F32: u32 = 15;
// movea: codes 56..=63
const OP_SLICE: u32 = 56;
// matmul: codes 72..=79
const OP_TRANSPOSE_CONV: u32 = 72;
const OP_BATCH_MATMUL: u32 = 73;
// Codes 64..=71: permutes and gathers.
const OP_REMAP: u32 = 64;
const OP_BATCH_SPACE: u32 = 65;
// elem
const OP_UNARY: u32 = 40;
const OP_PAIRWISE: u32 = 41;
const OP_REDUCE: u32 = 48;
const OP_ARG: u32 = 49;
// Codes 80..=87: float-island operators of ONNX models (f32 elementwise functions).
const OP_FLOAT_UNARY: u32 = 80;
const OP_FLOAT_LAYER_NORM: u32 = 81;
const OP_FLOAT_REDUCE: u32 = 82;
const OP_ORT_SOFTMAX: u32 = 83;
const OP_LUT8: u32 = 32;
const OP_ACT16: u32 = 33;
const OP_LSTM: u32 = 34;

/// The code of every operation and its words, after the code: an inline variant's fields in
/// the order listed, a record variant's record. One list serves [`Op::encode`] and
/// [`Op::decode`], so the two cannot drift apart.
macro_rules! op_words {
    (
        inline { $($ic:ident => $iv:ident { $($f:ident),+ $(,)? },)* }
        records { $($rc:ident => $rv:ident($rt:ty),)* }
    ) => {
        impl Op {
            fn put(&self, w: &mut Writer) {
                match *self {
                    $(Op::$iv { $($f),+ } => {
                        w.put($ic);
                        $(Word::put(&$f, w);)+
                    })*
                    $(Op::$rv(p) => p.put(w.put($rc)),)*
                }
            }

            fn get(r: &mut Reader) -> Option<Op> {
                Some(match r.get()? {
                    $($ic => Op::$iv { $($f: Word::get(r)?),+ },)*
                    $($rc => Op::$rv(<$rt>::get(r)?),)*
                    _ => return None,
                })
            }
        }
    };
}

op_words! {
    inline {
        OP_COPY => Copy { x, y, bytes },
        OP_QUANTIZE => Quantize { x, y, len, to, scale, zero_point },
        OP_REQUANTIZE => Requantize {
            x, y, len, from, to, in_zp, out_zp, multiplier, shift, lo, hi
        },
        OP_DEQUANTIZE => Dequantize { x, y, len, from, scale, zero_point },
        OP_TRANSPOSE => Transpose { x, y, elem_bytes, rank, shape, perm },
        OP_SOFTMAX => Softmax { x, y, rows, depth, from, to, multiplier, shift, diff_min },
        OP_BINARY => Binary { a, y, b, kind, elem, rank, a_shape, b_shape, p },
        OP_POOL => Pool { x, y, elem, p },
        OP_LUT8 => Lut8 { x, y, len, elem, table },
        OP_ACT16 => Act16 { x, y, len, multiplier, shift, tanh },
    }
    records {
        OP_CONV => Conv(ConvOp),
        OP_MEAN => Mean(MeanOp),
        OP_PAD => Pad(PadOp),
        OP_RESIZE => Resize(ResizeOp),
        OP_CONCAT => Concat(ConcatOp),
        OP_SOFTMAX_F32 => SoftmaxF32(FloatSoftmaxOp),
        OP_CLAMP_F32 => ClampF32(FloatClampOp),
        OP_SLICE => Slice(SliceOp),
        OP_TRANSPOSE_CONV => TransposeConv(ConvOp),
        OP_BATCH_MATMUL => BatchMatMul(MatMulOp),
        OP_REMAP => Remap(RemapOp),
        OP_BATCH_SPACE => BatchSpace(BatchSpaceOp),
        OP_UNARY => Unary(UnaryOp),
        OP_PAIRWISE => Pairwise(PairwiseOp),
        OP_REDUCE => Reduce(ReduceOp),
        OP_ARG => Arg(ArgOp),
        OP_FLOAT_UNARY => FloatUnary(FloatUnaryOp),
        OP_FLOAT_LAYER_NORM => FloatLayerNorm(FloatLayerNormOp),
        OP_FLOAT_REDUCE => FloatReduce(FloatReduceOp),
        OP_ORT_SOFTMAX => OrtSoftmax(OrtSoftmaxOp),
        OP_LSTM => Lstm(LstmOp),
    }
}

impl Op {
    /// Short operator name (`Softmax`, `Quantize`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Op::Copy { .. } => "Copy",
            Op::Quantize { .. } => "Quantize",
            Op::Requantize { .. } => "Requantize",
            Op::Dequantize { .. } => "Dequantize",
            Op::Transpose { .. } => "Transpose",
            Op::Softmax { .. } => "Softmax",
            Op::Binary { kind, .. } => match kind {
                BinaryKind::Add => "Add",
                BinaryKind::Sub => "Sub",
                BinaryKind::Mul | BinaryKind::MulRoundOnce => "Mul",
            },
            Op::Pool { p, .. } => {
                if p.max {
                    "MaxPool"
                } else {
                    "AveragePool"
                }
            }
            Op::Conv(p) => {
                if p.depth_multiplier > 0 {
                    "DepthwiseConv2D"
                } else {
                    "Conv2D"
                }
            }
            Op::Mean(_) => "Mean",
            Op::Pad(_) => "Pad",
            Op::Resize(_) => "Resize",
            Op::Concat(_) => "Concat",
            Op::SoftmaxF32(_) => "Softmax",
            Op::ClampF32(_) => "Activation",
            Op::Slice(_) => "Slice",
            Op::TransposeConv(_) => "TransposeConv2D",
            Op::BatchMatMul(_) => "BatchMatMul",
            Op::Remap(_) => "Remap",
            Op::BatchSpace(p) => {
                if p.to_batch {
                    "SpaceToBatch"
                } else {
                    "BatchToSpace"
                }
            }
            Op::Unary(p) => match p.kind {
                UnaryKind::Abs => "Abs",
                UnaryKind::Neg => "Neg",
            },
            Op::Pairwise(p) => match p.kind {
                PairwiseKind::Maximum => "Maximum",
                PairwiseKind::Minimum => "Minimum",
                PairwiseKind::SquaredDifference => "SquaredDifference",
                PairwiseKind::Prelu => "PRelu",
                PairwiseKind::Add => "Add",
                PairwiseKind::Sub => "Sub",
                PairwiseKind::Mul => "Mul",
                PairwiseKind::Div => "Div",
            },
            Op::Reduce(p) => match p.mode {
                ReduceMode::SumRaw | ReduceMode::SumScaled => "ReduceSum",
                ReduceMode::Max => "ReduceMax",
                ReduceMode::Min => "ReduceMin",
            },
            Op::Arg(p) => {
                if p.max {
                    "ArgMax"
                } else {
                    "ArgMin"
                }
            }
            Op::FloatUnary(_) => "FloatUnary",
            Op::FloatLayerNorm(_) => "LayerNormalization",
            Op::OrtSoftmax(_) => "QLinearSoftmax",
            Op::FloatReduce(p) => {
                if p.mean {
                    "ReduceMean"
                } else {
                    "ReduceSum"
                }
            }
            Op::Lut8 { .. } => "Lut8",
            Op::Act16 { tanh: false, .. } => "Logistic16",
            Op::Act16 { tanh: true, .. } => "Tanh16",
            Op::Lstm(_) => "Lstm",
        }
    }

    /// The words of this operation and how many of them are used.
    pub fn encode(&self) -> ([u32; MAX_WORDS], usize) {
        let mut w = Writer::new();
        self.put(&mut w);
        w.finish()
    }

    /// Decodes the words [`Op::encode`] wrote; `None` for anything malformed (unknown operation,
    /// too few or too many words, bad element type or rank).
    pub fn decode(words: &[u32]) -> Option<Op> {
        let mut r = Reader::new(words);
        let op = Op::get(&mut r)?;
        if let Op::Act16 { shift: 32.., .. } = op {
            return None;
        }
        r.at_end().then_some(op)
    }

    /// Runs the operation on `weights` (region 0) and `arena` (region 1). `None` when an
    /// operand lies outside its region, the output overlaps an input, or a parameter is out of
    /// range (the compiler never produces such an operation).
    pub fn execute(&self, weights: &[u8], arena: &mut [u8]) -> Option<()> {
        kernels::execute(self, weights, arena)
    }
}

/// Decodes and runs CPU step `step` of a model ([`Error::Kernel`] naming the step when the
/// words are malformed or an operand does not fit the buffers).
pub fn run(step: usize, words: &[u32], weights: &[u8], arena: &mut [u8]) -> Result<(), Error> {
    let op = Op::decode(words).ok_or(Error::Kernel { step })?;
    op.execute(weights, arena).ok_or(Error::Kernel { step })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_ops() -> [Op; 18] {
        let (x, y) = (Buf::weights(16), Buf::arena(32));
        let conv = ConvOp {
            x,
            y,
            w: Buf::weights(0),
            bias: Buf::weights(4),
            scale: Buf::weights(8),
            x_elem: Elem::I8,
            y_elem: Elem::I8,
            w_elem: Elem::I8,
            n: 1,
            h: 2,
            w_in: 2,
            c: 1,
            oh: 2,
            ow: 2,
            oc: 1,
            kh: 1,
            kw: 1,
            sh: 1,
            sw: 1,
            dh: 1,
            dw: 1,
            top: 0,
            left: 0,
            depth_multiplier: 0,
            x_zp: 1,
            y_zp: -1,
            lo: -128,
            hi: 127,
            float_scale: false,
            round_once: false,
        };
        [
            Op::Copy { x, y, bytes: 7 },
            Op::Quantize {
                x,
                y,
                len: 3,
                to: Elem::U8,
                scale: 0.25,
                zero_point: -3,
            },
            Op::Requantize {
                x,
                y,
                len: 9,
                from: Elem::I16,
                to: Elem::I8,
                in_zp: -1,
                out_zp: 2,
                multiplier: 1 << 30,
                shift: -3,
                lo: -100,
                hi: 100,
            },
            Op::Dequantize {
                x,
                y,
                len: 2,
                from: Elem::I8,
                scale: 0.1,
                zero_point: 5,
            },
            Op::Transpose {
                x,
                y,
                elem_bytes: 4,
                rank: 4,
                shape: [1, 3, 4, 5, 1, 1],
                perm: [0, 2, 3, 1, 4, 5],
            },
            Op::Softmax {
                x,
                y,
                rows: 2,
                depth: 10,
                from: Elem::I8,
                to: Elem::U8,
                multiplier: 1 << 30,
                shift: 3,
                diff_min: -1000,
            },
            Op::Binary {
                a: x,
                y,
                b: Buf::arena(0),
                kind: BinaryKind::Sub,
                elem: Elem::I8,
                rank: 3,
                a_shape: [2, 1, 3, 1, 1, 1],
                b_shape: [1, 4, 3, 1, 1, 1],
                p: BinaryParams {
                    za: 1,
                    zb: -2,
                    zo: 3,
                    left_shift: 20,
                    m1: 1 << 30,
                    s1: -1,
                    m2: 1 << 29,
                    s2: 0,
                    mo: 1 << 30,
                    so: -18,
                    lo: -128,
                    hi: 127,
                },
            },
            Op::Pool {
                x,
                y,
                elem: Elem::U8,
                p: PoolParams {
                    max: false,
                    n: 1,
                    h: 3,
                    w: 3,
                    c: 1,
                    oh: 2,
                    ow: 2,
                    kh: 2,
                    kw: 2,
                    sh: 2,
                    sw: 2,
                    top: 0,
                    left: 0,
                    requant: true,
                    zi: 3,
                    m: 1 << 30,
                    s: 1,
                    zo: -4,
                    lo: 0,
                    hi: 255,
                },
            },
            Op::Conv(conv),
            Op::Mean(MeanOp {
                x,
                y,
                elem: Elem::I8,
                rank: 3,
                shape: [2, 3, 2, 1, 1, 1],
                reduced: 0b010,
                zi: 1,
                zo: 2,
                m: 1 << 30,
                s: -1,
                round_once: false,
            }),
            Op::Pad(PadOp {
                x,
                y,
                elem: Elem::I16,
                rank: 2,
                shape: [2, 2, 1, 1, 1, 1],
                before: [1, 0, 0, 0, 0, 0],
                after: [0, 1, 0, 0, 0, 0],
                value: 7,
                requant: OutRequant::OFF,
            }),
            Op::Resize(ResizeOp {
                x,
                y,
                table: Buf::weights(0),
                elem: Elem::U8,
                bilinear: true,
                n: 1,
                h: 1,
                w: 1,
                c: 4,
                oh: 1,
                ow: 1,
                requant: OutRequant {
                    on: true,
                    zi: 1,
                    m: 1 << 30,
                    s: 0,
                    zo: 3,
                },
            }),
            Op::Concat(ConcatOp {
                x,
                y,
                elem: Elem::I8,
                outer: 2,
                chunk: 3,
                stride: 5,
                mode: ConcatMode::Scale,
                scale: 0.5,
                bias: -1.5,
                zo: 4,
                lo: -128,
                hi: 127,
            }),
            Op::SoftmaxF32(FloatSoftmaxOp {
                x,
                y,
                rows: 2,
                depth: 3,
                beta: 1.0,
            }),
            Op::ClampF32(FloatClampOp {
                x,
                y,
                len: 4,
                lo: 0.0,
                hi: 6.0,
            }),
            Op::TransposeConv(ConvOp {
                oh: 4,
                ow: 4,
                kh: 2,
                kw: 2,
                sh: 2,
                sw: 2,
                x_zp: 0,
                y_zp: 0,
                ..conv
            }),
            Op::BatchMatMul(MatMulOp {
                a: x,
                y,
                b: Buf::arena(0),
                batch_rank: 1,
                batch: [2, 1, 1, 1, 1, 1],
                a_batch: [2, 1, 1, 1, 1, 1],
                b_batch: [1, 1, 1, 1, 1, 1],
                m: 2,
                k: 2,
                n: 2,
                adj_a: false,
                adj_b: true,
                za: 1,
                zb: -1,
                zo: 0,
                multiplier: 1 << 30,
                shift: 0,
                round_once: true,
                float: false,
            }),
            Op::Lstm(LstmOp {
                x: Buf::arena(0),
                y,
                h: Buf::arena(8),
                c: Buf::arena(12),
                w: Buf::weights(0),
                bias: Buf::weights(8),
                scale: Buf::weights(12),
                batch: 1,
                time: 2,
                input: 1,
                cell: 2,
                time_major: false,
                cell_shift: -15,
                cell_clip: 0,
                hidden_zp: 3,
            }),
        ]
    }

    #[test]
    fn every_op_round_trips_through_its_words() {
        for op in all_ops() {
            let (w, n) = op.encode();
            assert!(n < MAX_WORDS, "{}: {n} words", op.name());
            assert_eq!(Op::decode(&w[..n]), Some(op));
            // Truncated or padded words are refused.
            assert_eq!(Op::decode(&w[..n - 1]), None, "{}", op.name());
            let mut longer = w[..n].to_vec();
            longer.push(0);
            assert_eq!(Op::decode(&longer), None, "{}", op.name());
        }
        assert_eq!(Op::decode(&[]), None);
        assert_eq!(Op::decode(&[99]), None);
    }

    #[test]
    fn malformed_operations_are_errors_not_panics() {
        let mut arena = [0u8; 64];
        let weights = [0u8; 32];
        // Every op with its output beyond the arena, overlapping its input, or in region 0.
        for op in all_ops() {
            let (mut w, n) = op.encode();
            let run = |w: &[u32], arena: &mut [u8]| run(3, w, &weights, arena);
            w[4] = 62; // output offset near the end of the arena
            assert_eq!(run(&w[..n], &mut arena), Err(Error::Kernel { step: 3 }));
            w[3] = 0; // output in the read-only region
            assert_eq!(run(&w[..n], &mut arena), Err(Error::Kernel { step: 3 }));
        }
        // Random words never panic.
        let mut seed = 0x1234_5678u32;
        for _ in 0..20_000 {
            let mut w = [0u32; 24];
            let n = (seed % 24) as usize;
            for v in w.iter_mut() {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                *v = if seed & 3 == 0 { seed } else { seed % 8 };
            }
            w[0] = seed % 17;
            let _ = run(0, &w[..n], &weights, &mut arena);
        }
    }

    /// Operations with nothing to write but huge loop counts (fuzzing found a Concat with 620M
    /// empty chunks) return at once.
    #[test]
    fn empty_operations_with_huge_counts_return_at_once() {
        let mut arena = [0u8; 64];
        let big = u32::MAX;
        let ops = [
            Op::Concat(ConcatOp {
                x: Buf::arena(0),
                y: Buf::arena(8),
                elem: Elem::I8,
                outer: big,
                chunk: 0,
                stride: 0,
                mode: ConcatMode::Copy,
                scale: 0.0,
                bias: 0.0,
                zo: 0,
                lo: 0,
                hi: 0,
            }),
            Op::SoftmaxF32(FloatSoftmaxOp {
                x: Buf::arena(0),
                y: Buf::arena(8),
                rows: big,
                depth: 0,
                beta: 1.0,
            }),
            Op::Pool {
                x: Buf::arena(0),
                y: Buf::arena(8),
                elem: Elem::I8,
                p: PoolParams {
                    n: big,
                    h: 1,
                    w: 1,
                    c: 0,
                    oh: 1000,
                    ow: 1000,
                    kh: 1,
                    kw: 1,
                    sh: 1,
                    sw: 1,
                    ..Default::default()
                },
            },
            // No rows and 4 billion steps (fuzzing found it).
            Op::Lstm(LstmOp {
                x: Buf::arena(0),
                y: Buf::arena(2),
                h: Buf::arena(4),
                c: Buf::arena(6),
                w: Buf::weights(0),
                bias: Buf::weights(0),
                scale: Buf::weights(0),
                batch: 0,
                time: big,
                input: 8,
                cell: 2,
                time_major: true,
                cell_shift: 1,
                cell_clip: 0,
                hidden_zp: 0,
            }),
        ];
        let weights = [0u8; 512];
        for op in ops {
            assert_eq!(op.execute(&weights, &mut arena), Some(()), "{}", op.name());
        }
    }

    #[test]
    fn transpose_moves_elements() {
        // [2, 3] -> [3, 2] of u8.
        let op = Op::Transpose {
            x: Buf::arena(0),
            y: Buf::arena(8),
            elem_bytes: 1,
            rank: 2,
            shape: [2, 3, 1, 1, 1, 1],
            perm: [1, 0, 0, 0, 0, 0],
        };
        let mut arena = [0u8; 16];
        arena[..6].copy_from_slice(&[1, 2, 3, 4, 5, 6]);
        op.execute(&[], &mut arena).expect("runs");
        assert_eq!(arena[8..14], [1, 4, 2, 5, 3, 6]);
        // A repeated axis is not a permutation.
        let bad = Op::Transpose {
            x: Buf::arena(0),
            y: Buf::arena(8),
            elem_bytes: 1,
            rank: 2,
            shape: [2, 3, 1, 1, 1, 1],
            perm: [0, 0, 0, 0, 0, 0],
        };
        assert_eq!(bad.execute(&[], &mut arena), None);
    }

    #[test]
    fn requantize_clamps_to_the_activation_range() {
        let op = Op::Requantize {
            x: Buf::arena(0),
            y: Buf::arena(4),
            len: 4,
            from: Elem::I8,
            to: Elem::I8,
            in_zp: 0,
            out_zp: 0,
            multiplier: 1 << 30, // 0.5
            shift: 1,            // x 2 = 1.0
            lo: -10,
            hi: 20,
        };
        let mut arena = [0u8; 8];
        arena[..4].copy_from_slice(&[5, (-50i8) as u8, 100, 0]);
        op.execute(&[], &mut arena).expect("runs");
        assert_eq!(arena[4..8], [5, (-10i8) as u8, 20, 0]);
    }

    /// 2x2 windows, stride 2, padding 1 on top/left over a 3x3 image: padding is excluded from
    /// the average, which rounds half away from zero.
    #[test]
    fn pool_excludes_padding() {
        let mut p = PoolParams {
            max: false,
            n: 1,
            h: 3,
            w: 3,
            c: 1,
            oh: 2,
            ow: 2,
            kh: 2,
            kw: 2,
            sh: 2,
            sw: 2,
            top: 1,
            left: 1,
            lo: -128,
            hi: 127,
            ..Default::default()
        };
        let x: [i8; 9] = [1, 2, -3, 4, 5, 6, 7, -8, 9];
        let mut arena = [0u8; 16];
        for (d, v) in arena.iter_mut().zip(x) {
            *d = v as u8;
        }
        let run = |p: PoolParams, arena: &mut [u8; 16]| {
            let op = Op::Pool {
                x: Buf::arena(0),
                y: Buf::arena(12),
                elem: Elem::I8,
                p,
            };
            op.execute(&[], arena).map(|()| {
                let mut o = [0i8; 4];
                for (d, s) in o.iter_mut().zip(&arena[12..16]) {
                    *d = *s as i8;
                }
                o
            })
        };
        // Windows: {1}, {2,-3}, {4,7}, {5,6,-8,9}.
        assert_eq!(run(p, &mut arena), Some([1, -1, 6, 3]));
        p.max = true;
        assert_eq!(run(p, &mut arena), Some([1, 2, 7, 9]));
        p.kh = 0;
        assert_eq!(run(p, &mut arena), None);
    }

    /// A Mul of [2, 1] by [1, 3] (scales 1, zero points 0 except the output's 1), clamped.
    #[test]
    fn binary_broadcasts_both_operands() {
        let mut op = Op::Binary {
            a: Buf::arena(0),
            y: Buf::arena(8),
            b: Buf::arena(4),
            kind: BinaryKind::Mul,
            elem: Elem::I8,
            rank: 2,
            a_shape: [2, 1, 1, 1, 1, 1],
            b_shape: [1, 3, 1, 1, 1, 1],
            p: BinaryParams {
                zo: 1,
                mo: 1 << 30, // 0.5 x 2 = 1
                so: 1,
                lo: -128,
                hi: 100,
                ..Default::default()
            },
        };
        let mut arena = [0u8; 16];
        arena[..2].copy_from_slice(&[2, (-3i8) as u8]);
        arena[4..7].copy_from_slice(&[5, 60, (-1i8) as u8]);
        op.execute(&[], &mut arena).expect("runs");
        let want: [i8; 6] = [11, 100, -1, -14, -128, 4];
        assert_eq!(arena[8..14], want.map(|v| v as u8));
        // Shapes that do not broadcast, and a zero rank, are refused.
        if let Op::Binary { b_shape, .. } = &mut op {
            b_shape[0] = 3;
        }
        assert_eq!(op.execute(&[], &mut arena), None);
        if let Op::Binary { rank, .. } = &mut op {
            *rank = 0;
        }
        assert_eq!(op.execute(&[], &mut arena), None);
    }
}

#[cfg(test)]
mod lstm_tests {
    use super::*;

    /// One cell, one input, two steps, all weights zero and a cell-gate bias: the input,
    /// forget and output gates are the table's sigmoid(0) = 0.5, so with products scaled by
    /// `2^-15` the cell state is `round(g / 2)` after one step and `round(c / 2) + round(g / 2)`
    /// after two (the state carried), and the hidden state `round(tanh(c) / 256)` plus its
    /// zero point.
    #[test]
    fn a_single_cell_by_hand() {
        let mut scales: [(i32, i32); LSTM_SCALES] = [(1 << 30, -14); LSTM_SCALES];
        // Gate paths halve: the cell bias 4096 becomes 2048, 0.5 in Q3.12; the hidden state is
        // `o * tanh(c)` scaled by 2^-30 * 2^8.
        scales[..8].fill((1 << 30, 0));
        scales[8] = (1 << 30, -21);
        let mut weights = [0u8; 8 + 8 * 4 + LSTM_SCALES * 8];
        weights[8 + 2 * 4..8 + 3 * 4].copy_from_slice(&4096i32.to_le_bytes());
        for (k, (m, s)) in scales.iter().enumerate() {
            let at = 40 + 8 * k;
            weights[at..at + 4].copy_from_slice(&m.to_le_bytes());
            weights[at + 4..at + 8].copy_from_slice(&s.to_le_bytes());
        }
        let op = Op::Lstm(LstmOp {
            x: Buf::arena(0),
            y: Buf::arena(2),
            h: Buf::arena(4),
            c: Buf::arena(6),
            w: Buf::weights(0),
            bias: Buf::weights(8),
            scale: Buf::weights(40),
            batch: 1,
            time: 2,
            input: 1,
            cell: 1,
            time_major: false,
            cell_shift: -15,
            cell_clip: 0,
            hidden_zp: 3,
        });
        let mut arena = [0u8; 8];
        op.execute(&weights, &mut arena).expect("runs");
        use crate::ethos_u::builtin_act::{int16_kernel, sigmoid};
        assert_eq!(sigmoid(0), 16384);
        let g = i32::from(int16_kernel(2048, 3, 0, true));
        let half = |v: i32| (v + 1) / 2;
        let c1 = half(g);
        let c2 = half(c1) + half(g);
        assert_eq!(i32::from(i16::from_le_bytes([arena[6], arena[7]])), c2);
        let h = |c: i32| (i32::from(int16_kernel(c as i16, 3, 3, true)) + 128) / 256 + 3;
        assert_eq!(arena[2] as i8 as i32, h(c1), "step 1");
        assert_eq!(arena[3] as i8 as i32, h(c2), "step 2");
        assert_eq!(
            arena[4], arena[3],
            "the hidden state is the last step's output"
        );
    }
}
