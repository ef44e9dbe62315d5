//! Operand and parameter records of the CPU operations added after the first eight
//! (convolutions, Mean, Pad, Resize, Concat parts): each is a flat record of words, written
//! and read in field order by one macro so the encoding cannot drift from the struct.

use super::words::{Reader, Writer};
use super::{Buf, Elem, MAX_RANK};

/// A value stored as one or more words.
pub(super) trait Word: Sized {
    fn put(&self, w: &mut Writer);
    fn get(r: &mut Reader) -> Option<Self>;
}

/// The types the [`Writer`] and [`Reader`] encode themselves, by their methods of that type.
macro_rules! word_by {
    ($($t:ty => $put:ident, $get:ident;)+) => {
        $(impl Word for $t {
            fn put(&self, w: &mut Writer) {
                w.$put(*self);
            }
            fn get(r: &mut Reader) -> Option<Self> {
                r.$get()
            }
        })+
    };
}

word_by! {
    u32 => put, get;
    i32 => int, int;
    Elem => elem, elem;
    Buf => buf, buf;
}

impl Word for bool {
    fn put(&self, w: &mut Writer) {
        w.put(u32::from(*self));
    }
    fn get(r: &mut Reader) -> Option<Self> {
        match r.get()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
}

impl Word for f32 {
    fn put(&self, w: &mut Writer) {
        w.put(self.to_bits());
    }
    fn get(r: &mut Reader) -> Option<Self> {
        r.get().map(f32::from_bits)
    }
}

impl Word for f64 {
    // Low word first.
    fn put(&self, w: &mut Writer) {
        let bits = self.to_bits();
        w.put(bits as u32).put((bits >> 32) as u32);
    }
    fn get(r: &mut Reader) -> Option<Self> {
        let lo = u64::from(r.get()?);
        let hi = u64::from(r.get()?);
        Some(f64::from_bits(lo | (hi << 32)))
    }
}

/// Per-axis values (shapes, offsets, steps): one word each.
impl<T: Word + Copy + Default> Word for [T; MAX_RANK] {
    fn put(&self, w: &mut Writer) {
        for v in self {
            v.put(w);
        }
    }
    fn get(r: &mut Reader) -> Option<Self> {
        let mut a = [T::default(); MAX_RANK];
        for v in a.iter_mut() {
            *v = T::get(r)?;
        }
        Some(a)
    }
}

/// Declares a record whose words are its fields in order.
macro_rules! record {
    ($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* pub $f:ident: $t:ty,)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct $name {
            $($(#[$fm])* pub $f: $t,)*
        }

        impl $name {
            pub(in crate::cpu) fn put(&self, w: &mut Writer) {
                $(Word::put(&self.$f, w);)*
            }

            pub(in crate::cpu) fn get(r: &mut Reader) -> Option<Self> {
                Some($name { $($f: Word::get(r)?,)* })
            }
        }

        impl Word for $name {
            fn put(&self, w: &mut Writer) {
                $name::put(self, w)
            }
            fn get(r: &mut Reader) -> Option<Self> {
                $name::get(r)
            }
        }
    };
}
pub(super) use record;

/// Makes a field-less enum a [`Word`]: its discriminant; any other word does not decode. Every
/// variant must be listed.
macro_rules! code_word {
    ($t:ident { $($v:ident),+ $(,)? }) => {
        impl Word for $t {
            fn put(&self, w: &mut Writer) {
                w.put(*self as u32);
            }
            fn get(r: &mut Reader) -> Option<Self> {
                let code = r.get()?;
                [$($t::$v),+].into_iter().find(|v| *v as u32 == code)
            }
        }
    };
}
pub(super) use code_word;

record! {
    /// Requantization of a moved value (ONNX models whose output quantization differs from the
    /// input's): when `on`, `v` becomes `MultiplyByQuantizedMultiplier(v - zi, m, s) + zo`,
    /// clamped to the type.
    pub struct OutRequant {
        pub on: bool,
        pub zi: i32,
        pub m: i32,
        pub s: i32,
        pub zo: i32,
    }
}

impl OutRequant {
    /// No requantization.
    pub const OFF: OutRequant = OutRequant {
        on: false,
        zi: 0,
        m: 0,
        s: 0,
        zo: 0,
    };
}

record! {
    /// Conv2D, DepthwiseConv2D or FullyConnected over NHWC integers (TFLite's reference
    /// kernels). `w` holds the weights with their zero points already subtracted, as `w_elem`
    /// (i8 or i16): `[oc][kh][kw][c]` for a convolution (`depth_multiplier == 0`),
    /// `[kh][kw][c * depth_multiplier]` for a depthwise one. `bias` holds `oc` i32. `scale`
    /// holds per output channel either a Q31 multiplier and a shift (two i32), or, with
    /// `float_scale` (TFLite's reference FullyConnected), an f64 factor applied in double
    /// precision and rounded half away from zero. A FullyConnected is a 1x1 convolution over
    /// `n` rows of `c` values.
    pub struct ConvOp {
        pub x: Buf,
        pub y: Buf,
        pub w: Buf,
        pub bias: Buf,
        pub scale: Buf,
        pub x_elem: Elem,
        pub y_elem: Elem,
        pub w_elem: Elem,
        pub n: u32,
        pub h: u32,
        pub w_in: u32,
        pub c: u32,
        pub oh: u32,
        pub ow: u32,
        pub oc: u32,
        pub kh: u32,
        pub kw: u32,
        pub sh: u32,
        pub sw: u32,
        pub dh: u32,
        pub dw: u32,
        pub top: u32,
        pub left: u32,
        pub depth_multiplier: u32,
        pub x_zp: i32,
        pub y_zp: i32,
        pub lo: i32,
        pub hi: i32,
        pub float_scale: bool,
        /// With fixed-point scales: round `acc * multiplier * 2^(shift - 31)` once, half up
        /// ([`crate::fixed::multiply_round_once`], onnxruntime-quantized models), instead of
        /// TFLite's `MultiplyByQuantizedMultiplier`.
        pub round_once: bool,
    }
}

record! {
    /// Mean of integers over the axes set in `reduced` (bit `d` for axis `d`) of a tensor of
    /// `shape` (first `rank` entries): `MultiplyByQuantizedMultiplier(sum - zi * count, m, s)
    /// + zo`, clamped to the type (TFLite's reference Mean, the multiplier already divided by
    /// the count). The output holds the kept axes in order.
    pub struct MeanOp {
        pub x: Buf,
        pub y: Buf,
        pub elem: Elem,
        pub rank: u32,
        pub shape: [u32; MAX_RANK],
        pub reduced: u32,
        pub zi: i32,
        pub zo: i32,
        pub m: i32,
        pub s: i32,
        /// Round once, half up, instead of TFLite's twice (see [`ConvOp::round_once`]).
        pub round_once: bool,
    }
}

record! {
    /// Pads a tensor of `shape` (first `rank` entries, `elem_bytes` per element) with
    /// `before[d]` and `after[d]` elements along each axis, filled with the element whose
    /// little-endian bytes are `value`, then applies `requant` (integers only).
    pub struct PadOp {
        pub x: Buf,
        pub y: Buf,
        pub elem: Elem,
        pub rank: u32,
        pub shape: [u32; MAX_RANK],
        pub before: [u32; MAX_RANK],
        pub after: [u32; MAX_RANK],
        pub value: u32,
        pub requant: OutRequant,
    }
}

record! {
    /// Resizes NHWC `[n, h, w, c]` to `[n, oh, ow, c]`. `table` (read-only region) holds three
    /// i32 per output row, then three per output column: the source index, and for bilinear
    /// the second source index and the fraction: in 1/1024 for integers (TFLite's
    /// `ResizeBilinearInteger` coordinates), the bits of an f32 for f32 (its float reference),
    /// all decided at compile time. Nearest copies any element type. Then `requant`.
    pub struct ResizeOp {
        pub x: Buf,
        pub y: Buf,
        pub table: Buf,
        pub elem: Elem,
        pub bilinear: bool,
        pub n: u32,
        pub h: u32,
        pub w: u32,
        pub c: u32,
        pub oh: u32,
        pub ow: u32,
        pub requant: OutRequant,
    }
}

/// How [`ConcatOp`] converts elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConcatMode {
    /// Copies the bytes.
    Copy = 0,
    /// Clamps integers to `lo..=hi` (a fused activation).
    Clamp = 1,
    /// TFLite's `ConcatenationWithScaling`: `round(v * scale + bias) + zo` in single
    /// precision, rounded half away from zero, clamped to `lo..=hi`.
    Scale = 2,
}

code_word!(ConcatMode { Copy, Clamp, Scale });

record! {
    /// One input of a Concat: `outer` chunks of `chunk` elements from `x`, the k-th written at
    /// element `k * stride` of `y` (`y` points at the input's first slot in the output).
    pub struct ConcatOp {
        pub x: Buf,
        pub y: Buf,
        pub elem: Elem,
        pub outer: u32,
        pub chunk: u32,
        pub stride: u32,
        pub mode: ConcatMode,
        pub scale: f32,
        pub bias: f32,
        pub zo: i32,
        pub lo: i32,
        pub hi: i32,
    }
}

record! {
    /// Softmax over f32 rows of `depth` (see [`super::float`]).
    pub struct FloatSoftmaxOp {
        pub x: Buf,
        pub y: Buf,
        pub rows: u32,
        pub depth: u32,
        pub beta: f32,
    }
}

record! {
    /// onnxruntime's QLinearSoftmax (what it runs a QDQ Softmax of 8-bit tensors as) over
    /// `rows` rows of `depth` values: see [`super::float::ort_softmax_row`]. `table` (read-only)
    /// holds its 256 f32 `exp` values for the input scale and depth; `y_scale` is its
    /// `floor(1 / output_scale)`, `zp` the output zero point, `signed` int8 (else uint8).
    pub struct OrtSoftmaxOp {
        pub x: Buf,
        pub y: Buf,
        pub table: Buf,
        pub rows: u32,
        pub depth: u32,
        pub y_scale: f32,
        pub zp: i32,
        pub signed: bool,
    }
}

record! {
    /// Layer normalisation of `rows` rows of `cols` f32 values (onnxruntime's arithmetic, see
    /// [`super::float::layer_norm_row`]): `scale` and `bias` hold `cols` f32 values each.
    pub struct FloatLayerNormOp {
        pub x: Buf,
        pub scale: Buf,
        pub bias: Buf,
        pub y: Buf,
        pub rows: u32,
        pub cols: u32,
        pub epsilon: f32,
    }
}

record! {
    /// Sum (`mean` false) or mean of f32 values over the axes set in `reduced` (bit `d` for
    /// axis `d`) of a tensor of `shape` (first `rank` entries): each output sums its inputs in
    /// input order, a mean then divides by the count. The output holds the kept axes in order.
    pub struct FloatReduceOp {
        pub x: Buf,
        pub y: Buf,
        pub rank: u32,
        pub shape: [u32; MAX_RANK],
        pub reduced: u32,
        pub mean: bool,
    }
}

record! {
    /// `min(max(x, lo), hi)` over `len` f32 values.
    pub struct FloatClampOp {
        pub x: Buf,
        pub y: Buf,
        pub len: u32,
        pub lo: f32,
        pub hi: f32,
    }
}

record! {
    /// Copies a strided box of a tensor of `shape` (first `rank` entries, `elem_bytes` per
    /// element): output element `i` (row-major over `size`) reads input index
    /// `begin[d] + i[d] * step[d]` along each axis `d`; `step` may be negative. Raw bytes are
    /// moved (TFLite's slices and splits keep the quantization).
    pub struct SliceOp {
        pub x: Buf,
        pub y: Buf,
        pub elem_bytes: u32,
        pub rank: u32,
        pub shape: [u32; MAX_RANK],
        pub begin: [u32; MAX_RANK],
        pub step: [i32; MAX_RANK],
        pub size: [u32; MAX_RANK],
    }
}

record! {
    /// BatchMatMul of two int8 tensors (TFLite's reference `BatchMatMul`, int8 path):
    /// `y[b][i][j] = clamp(MultiplyByQuantizedMultiplier(sum_k (op(a)[i][k] - za) *
    /// (op(b)[k][j] - zb), multiplier, shift) + zo)` where `op` transposes the last two axes when
    /// `adj_a` / `adj_b` (then `a` is stored `[K, M]`, `b` `[N, K]`). The output's batch axes are
    /// `batch[..batch_rank]`; `a_batch` / `b_batch` hold the inputs' batch axes aligned to them
    /// (1 where an input broadcasts).
    pub struct MatMulOp {
        pub a: Buf,
        pub y: Buf,
        pub b: Buf,
        pub batch_rank: u32,
        pub batch: [u32; MAX_RANK],
        pub a_batch: [u32; MAX_RANK],
        pub b_batch: [u32; MAX_RANK],
        pub m: u32,
        pub k: u32,
        pub n: u32,
        pub adj_a: bool,
        pub adj_b: bool,
        pub za: i32,
        pub zb: i32,
        pub zo: i32,
        pub multiplier: i32,
        pub shift: i32,
        /// Round once, half up, instead of TFLite's twice (see [`ConvOp::round_once`]).
        pub round_once: bool,
        /// f32 operands and result (a float island's MatMul): products summed in order in
        /// single precision; the quantization fields are unused.
        pub float: bool,
    }
}

record! {
    /// A separable index map (Tile, MirrorPad, Reverse, Gather): output element
    /// `(o_0, .., o_r)` of `out_shape` is input element `sum_d table_d[o_d]` of a tensor of
    /// `in_shape` (first `rank` entries each). `table` (read-only region) holds, dimension after
    /// dimension, `out_shape[d]` u32 input element offsets (coordinate times stride), decided at
    /// compile time. Then `requant` (integers only).
    pub struct RemapOp {
        pub x: Buf,
        pub y: Buf,
        pub table: Buf,
        pub elem: Elem,
        pub rank: u32,
        pub in_shape: [u32; MAX_RANK],
        pub out_shape: [u32; MAX_RANK],
        pub requant: OutRequant,
    }
}

record! {
    /// SpaceToBatch (`to_batch`) or BatchToSpace between `[n, h, w, c]` and
    /// `[on, oh, ow, c]` with block `(bh, bw)`; `(top, left)` is the padding (SpaceToBatch,
    /// filled with the element whose little-endian bytes are `pad`) or the crop (BatchToSpace).
    /// Then `requant` (integers only).
    pub struct BatchSpaceOp {
        pub x: Buf,
        pub y: Buf,
        pub elem: Elem,
        pub to_batch: bool,
        pub n: u32,
        pub h: u32,
        pub w: u32,
        pub c: u32,
        pub on: u32,
        pub oh: u32,
        pub ow: u32,
        pub bh: u32,
        pub bw: u32,
        pub top: u32,
        pub left: u32,
        pub pad: u32,
        pub requant: OutRequant,
    }
}

/// The arithmetic of [`ReduceOp`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceMode {
    /// Sum of the stored integers in the element type, wrapping at every step.
    SumRaw = 0,
    /// The rescaled 8-bit sum: `round(sum * scale + bias)` in single precision (half away from
    /// zero) as int32, `+ zo`, saturated to the element type.
    SumScaled = 1,
    /// Largest stored integer.
    Max = 2,
    /// Smallest stored integer.
    Min = 3,
}

code_word!(ReduceMode {
    SumRaw,
    SumScaled,
    Max,
    Min
});

record! {
    /// SUM, REDUCE_MAX or REDUCE_MIN of integers over the axes set in `reduced` (bit `d` for
    /// axis `d`) of a tensor of `shape` (first `rank` entries), by `mode`; then `requant`.
    /// The output holds the kept axes in order.
    pub struct ReduceOp {
        pub x: Buf,
        pub y: Buf,
        pub elem: Elem,
        pub rank: u32,
        pub shape: [u32; MAX_RANK],
        pub reduced: u32,
        pub mode: ReduceMode,
        pub scale: f32,
        pub bias: f32,
        pub zo: i32,
        pub requant: OutRequant,
    }
}

record! {
    /// ARG_MAX (`max`) or ARG_MIN of integers viewed as `[outer, len, inner]` along the middle
    /// axis; the first index wins ties. Indices are stored as i64 when `wide`, else as i32.
    pub struct ArgOp {
        pub x: Buf,
        pub y: Buf,
        pub elem: Elem,
        pub outer: u32,
        pub len: u32,
        pub inner: u32,
        pub max: bool,
        pub wide: bool,
    }
}

record! {
    /// An f32 elementwise function over `len` values: `func` is one of the `FN_*` codes of
    /// [`float`](super::float) with its parameters `alpha` and `beta` (unused ones are 0).
    pub struct FloatUnaryOp {
        pub x: Buf,
        pub y: Buf,
        pub len: u32,
        pub func: u32,
        pub alpha: f32,
        pub beta: f32,
    }
}

record! {
    /// TFLite Micro's integer UNIDIRECTIONAL_SEQUENCE_LSTM (8x8->16: int8 input, output and hidden
    /// state, int16 cell state, no CIFG, peephole, projection or layer normalisation) over
    /// `time` steps of `batch` rows of `input` values, `cell` units.
    ///
    /// - `x`: `[batch][time][input]` int8 (`[time][batch][input]` with `time_major`).
    /// - `y`: the hidden state of every step, int8, in `x`'s order with `cell` values per row.
    /// - `h`, `c`: the persistent hidden (int8, `[batch][cell]`) and cell (int16) states, read
    ///   and updated in place.
    /// - `w` (read-only): the gates' int8 weights in the order input, forget, cell, output:
    ///   four `[cell][input]` input matrices, then four `[cell][cell]` recurrent ones.
    /// - `bias`: eight `[cell]` i32 vectors in the same order, zero points folded in (the input
    ///   paths' `bias - x_zp * row_sum`, the recurrent paths' `-h_zp * row_sum`).
    /// - `scale`: eleven (Q31 multiplier, shift) i32 pairs: the eight paths into Q3.12 gates,
    ///   the hidden state's `2^-30 / hidden_scale`, the forget gate times cell state's
    ///   `2^-15` and the input gate times cell gate's `2^-30 / cell_scale`.
    /// - `cell_shift`: the cell state's scale is `2^cell_shift`; `cell_clip` its quantized
    ///   clip (0: none); `hidden_zp` the hidden state's zero point.
    pub struct LstmOp {
        pub x: Buf,
        pub y: Buf,
        pub h: Buf,
        pub c: Buf,
        pub w: Buf,
        pub bias: Buf,
        pub scale: Buf,
        pub batch: u32,
        pub time: u32,
        pub input: u32,
        pub cell: u32,
        pub time_major: bool,
        pub cell_shift: i32,
        pub cell_clip: i32,
        pub hidden_zp: i32,
    }
}
