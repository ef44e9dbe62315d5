//! The backend's operation list: what each NPU operation reads, writes and computes, before
//! registers are chosen.
//!
//! Lowering ([`super::lower`]) turns the IR into a [`Program`]: buffers (arena feature maps and
//! read-only constants) and [`NpuOp`]s that refer to them symbolically. Block selection
//! ([`super::block`]) fills [`NpuOp::block`], weight encoding places weight streams in the
//! read-only region, allocation ([`super::alloc`]) gives every arena buffer an offset, and
//! emission ([`super::emit`]) writes the register command stream.
//!
//! Every numeric choice (scales, shifts, rounding, clip bounds, zero points) is made by lowering;
//! emission only encodes it, so one op means the same thing to the emitter and to anyone reading
//! the list (`npu compile --dump-ops`).

use npu_rt::ethos_u::regs::fields::{
    AccFormat, ActivationClipRange, ElementwiseMode, IfmScaleMode, IfmUpscaleMode, PoolingMode,
    RoundMode,
};

/// Index of a buffer in [`Program::buffers`].
///
/// A type of its own (not a bare `usize`) so that an IR tensor id cannot be passed where a buffer
/// is meant: lowering handles both side by side. `program.buffers[id]` works directly; other
/// per-buffer tables index with [`BufferId::index`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BufferId(pub usize);

impl BufferId {
    /// The position in [`Program::buffers`] (and in any table kept per buffer).
    pub const fn index(self) -> usize {
        self.0
    }
}

// Printed as the bare number, as `npu compile --dump-ops` always has.
impl core::fmt::Debug for BufferId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl core::fmt::Display for BufferId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl core::ops::Index<BufferId> for Vec<Buffer> {
    type Output = Buffer;
    fn index(&self, id: BufferId) -> &Buffer {
        &self[id.0]
    }
}

impl core::ops::IndexMut<BufferId> for Vec<Buffer> {
    fn index_mut(&mut self, id: BufferId) -> &mut Buffer {
        &mut self[id.0]
    }
}

impl core::ops::Index<BufferId> for [Buffer] {
    type Output = Buffer;
    fn index(&self, id: BufferId) -> &Buffer {
        &self[id.0]
    }
}

/// Where a buffer lives.
#[derive(Clone, Debug, PartialEq)]
pub enum BufferKind {
    /// A feature map in the arena (region 1), placed by liveness.
    Arena,
    /// Read-only bytes in region 0 (LUTs, int32 constants, fill values). Weight streams are not
    /// buffers: they are encoded from [`ConvWeights`] after block selection.
    Const(Vec<u8>),
}

/// A graph input or output living in an arena buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Io {
    /// Graph input `k` (model order).
    Input(usize),
    /// Graph output `k` (model order).
    Output(usize),
    /// Variable tensor `k` ([`crate::ir::Graph::variables`]: LSTM state): live for the whole
    /// program and kept from one run to the next.
    State(usize),
}

/// A block of bytes that ops read or write.
#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    /// The IR tensor (or constant) it holds, for messages and dumps.
    pub name: String,
    /// Size in bytes (before rounding to the allocation quantum).
    pub size: usize,
    pub kind: BufferKind,
    /// Set when the buffer is a graph input or output (those are always NHWC, dense).
    pub io: Option<Io>,
}

/// Element type of a feature map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElemType {
    I8,
    U8,
    I16,
    I32,
}

impl ElemType {
    pub const fn bytes(self) -> usize {
        match self {
            ElemType::I8 | ElemType::U8 => 1,
            ElemType::I16 => 2,
            ElemType::I32 => 4,
        }
    }

    pub const fn bits(self) -> usize {
        self.bytes() * 8
    }

    pub const fn signed(self) -> bool {
        !matches!(self, ElemType::U8)
    }

    /// Lowest and highest value.
    pub const fn range(self) -> (i64, i64) {
        match self {
            ElemType::I8 => (-128, 127),
            ElemType::U8 => (0, 255),
            ElemType::I16 => (-32768, 32767),
            ElemType::I32 => (i32::MIN as i64, i32::MAX as i64),
        }
    }
}

/// Memory layout of a feature map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Dense `[H, W, C]` rows.
    Nhwc,
    /// Bricks of 16 channels: `[H, C/16, W, 16]`.
    Nhcwb16,
}

/// A box of a feature map as one operation reads or writes it.
///
/// `offset` is the byte offset of element (0, 0, 0) of the box from the start of `buffer`;
/// the strides are the tensor's (not the box's), so a box can be a slice of a larger tensor
/// (concat, depth slices) or a view (reshape).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureMap {
    pub buffer: BufferId,
    pub offset: usize,
    /// `[H, W, C]` of the box.
    pub shape: [usize; 3],
    /// Byte strides `[y, x, c]` as the registers take them (for NHCWB16 see
    /// docs/command-stream.md, "NHCWB16 (brick) layout").
    pub strides: [usize; 3],
    pub layout: Layout,
    pub dtype: ElemType,
    pub zero_point: i32,
    /// The operation walks the box from its last row (`reverse[0]`) or column (`reverse[1]`)
    /// backwards: the registers get that element's address and negated strides (Vela's
    /// MirrorPad writes). The bytes touched are the box's either way; only OFMs of copies use
    /// it.
    pub reverse: [bool; 2],
    /// The box's rows wrap around a ring buffer (a rolling stripe buffer, see
    /// `ethos_u::stripe`): rows from `Wrap::rows` on continue at `Wrap::offset` of the same
    /// buffer (the registers' tile 2) instead of after row `Wrap::rows - 1`.
    pub wrap: Option<Wrap>,
}

/// Where the rows of a [`FeatureMap`] continue after a ring buffer's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Wrap {
    /// Rows of the box before the wrap (at `FeatureMap::offset`), at least 1 and fewer than
    /// the box's height.
    pub rows: usize,
    /// Byte offset in the buffer of the box's row `rows` (the ring's first row).
    pub offset: usize,
}

impl FeatureMap {
    /// A dense NHWC box covering a whole `[H, W, C]` tensor at the start of `buffer`.
    ///
    /// ```
    /// use npu_build::ethos_u::npu_op::{BufferId, ElemType, FeatureMap};
    /// let f = FeatureMap::nhwc(BufferId(0), [4, 5, 6], ElemType::I8, -1);
    /// assert_eq!(f.strides, [30, 6, 1]);
    /// ```
    pub fn nhwc(buffer: BufferId, shape: [usize; 3], dtype: ElemType, zero_point: i32) -> Self {
        let e = dtype.bytes();
        FeatureMap {
            buffer,
            offset: 0,
            shape,
            strides: [shape[1] * shape[2] * e, shape[2] * e, e],
            layout: Layout::Nhwc,
            dtype,
            zero_point,
            reverse: [false; 2],
            wrap: None,
        }
    }

    /// A brick-format (NHCWB16) box covering a whole `[H, W, C]` tensor at the start of `buffer`.
    pub fn nhcwb16(buffer: BufferId, shape: [usize; 3], dtype: ElemType, zero_point: i32) -> Self {
        let e = dtype.bytes();
        let c16 = shape[2].div_ceil(16) * 16;
        FeatureMap {
            buffer,
            offset: 0,
            shape,
            strides: [shape[1] * c16 * e, 16 * e, 16 * e * shape[1]],
            layout: Layout::Nhcwb16,
            dtype,
            zero_point,
            reverse: [false; 2],
            wrap: None,
        }
    }

    /// The box's contiguous parts: `(byte offset, bytes from there to one past its last
    /// element)`; two when the rows wrap around a ring buffer.
    pub fn parts(&self) -> Vec<(usize, usize)> {
        match self.wrap {
            Some(w) if w.rows < self.shape[0] => {
                let part = |rows: usize| {
                    FeatureMap {
                        shape: [rows, self.shape[1], self.shape[2]],
                        wrap: None,
                        ..self.clone()
                    }
                    .extent()
                };
                vec![
                    (self.offset, part(w.rows)),
                    (w.offset, part(self.shape[0] - w.rows)),
                ]
            }
            _ => vec![(self.offset, self.extent())],
        }
    }

    /// Moves the box `bytes` further into its buffer (a depth slice of it), wrap included.
    pub fn shift(&mut self, bytes: usize) {
        self.offset += bytes;
        if let Some(w) = &mut self.wrap {
            w.offset += bytes;
        }
    }

    /// Bytes from `offset` to one past the last element of the box, as if it did not wrap
    /// (see [`FeatureMap::parts`]).
    pub fn extent(&self) -> usize {
        let [h, w, c] = self.shape;
        if h == 0 || w == 0 || c == 0 {
            return 0;
        }
        let e = self.dtype.bytes();
        let last_c = match self.layout {
            Layout::Nhwc => (c - 1) * self.strides[2],
            Layout::Nhcwb16 => ((c - 1) / 16) * self.strides[2] + ((c - 1) % 16) * e,
        };
        (h - 1) * self.strides[0] + (w - 1) * self.strides[1] + last_c + e
    }

    pub fn elements(&self) -> usize {
        self.shape.iter().product()
    }
}

/// Kernel geometry (1x1, stride 1 for elementwise operations).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Kernel {
    /// Undilated kernel height and width.
    pub h: usize,
    pub w: usize,
    pub stride_y: usize,
    pub stride_x: usize,
    pub dilation_y: usize,
    pub dilation_x: usize,
}

impl Kernel {
    pub const UNIT: Kernel = Kernel {
        h: 1,
        w: 1,
        stride_y: 1,
        stride_x: 1,
        dilation_y: 1,
        dilation_x: 1,
    };

    pub const fn dilated_h(&self) -> usize {
        self.dilation_y * (self.h - 1) + 1
    }

    pub const fn dilated_w(&self) -> usize {
        self.dilation_x * (self.w - 1) + 1
    }
}

/// A 32-bit scale and right shift, as in OFM_SCALE / OPA_SCALE and the scale stream:
/// `x * scale >> shift` with the op's rounding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Scale {
    pub scale: u32,
    pub shift: u8,
}

impl Scale {
    /// `(1, 0)`: no scaling.
    pub const UNIT: Scale = Scale { scale: 1, shift: 0 };
}

/// One output channel's entry of the scale/bias stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChannelScale {
    /// 40-bit signed bias added to the accumulator.
    pub bias: i64,
    /// Positive multiplier.
    pub scale: u32,
    /// Right shift, 0..=63.
    pub shift: u8,
}

/// Weights of a convolution, depthwise convolution or fully connected layer, before encoding.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvWeights {
    /// `[O, KH, KW, I]` (depthwise: `[C, KH, KW, 1]`), undilated.
    pub shape: [usize; 4],
    /// Weight values with the weight zero point already subtracted, in `shape` order.
    pub values: Vec<i16>,
    /// One entry per output channel.
    pub scales: Vec<ChannelScale>,
}

/// The second operand of an elementwise operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operand2 {
    /// A feature map; dimensions of size 1 where the IFM's are larger are broadcast.
    Tensor(FeatureMap),
    /// A quantized scalar (IFM2_SCALAR, 16-bit), with its zero point.
    Scalar { value: i32, zero_point: i32 },
}

/// The scaling of an elementwise operation's inputs (Add/Sub).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InputScaling {
    pub mode: IfmScaleMode,
    /// OPA_SCALE: 32-bit scale and shift (also used for OPB in `OPB_32` mode, as Vela does).
    pub opa: Scale,
    /// OPB_SCALE: 16-bit scale (only meaningful in `OPA_OPB_16` mode).
    pub opb: u16,
}

/// What the hardware does after scaling: an optional table lookup, then a clamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Activation {
    /// Clamp bounds in the OFM's quantized domain (ACTIVATION_MIN/MAX, 16-bit).
    pub min: i32,
    pub max: i32,
    pub clip_range: ActivationClipRange,
    /// A lookup table applied before the clamp: a [`BufferKind::Const`] buffer of 256 bytes
    /// (int8 table), 1024 bytes (256 x int32) or 2048 bytes (int16 interpolating table). The
    /// emitter DMAs it into the shared buffer and picks the slot.
    pub lut: Option<BufferId>,
    /// A function the output stage computes itself instead of a table (16-bit OFMs only),
    /// applied to the scaled value before the zero point and the clamp.
    pub builtin: Option<Builtin>,
}

/// The output stage's built-in activation functions: TFLite's int16 LOGISTIC and TANH on the
/// value scaled into units of `1/(3 * 4096)` ([`npu_rt::ethos_u::builtin_act`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    Sigmoid,
    Tanh,
}

impl Activation {
    /// No table, clamp to the full range of `dtype` (limited to 16 bits, as the registers are).
    pub fn none(dtype: ElemType) -> Self {
        let (lo, hi) = dtype.range();
        Activation {
            min: lo.max(-32768) as i32,
            max: hi.min(32767) as i32,
            clip_range: ActivationClipRange::OfmPrecision,
            lut: None,
            builtin: None,
        }
    }

    /// The table in `lut` (see [`Activation::lut`]), then [`Activation::none`]'s clamp.
    pub fn table(dtype: ElemType, lut: BufferId) -> Self {
        Activation {
            lut: Some(lut),
            ..Activation::none(dtype)
        }
    }
}

/// The operation class and its class-specific inputs.
#[derive(Clone, Debug, PartialEq)]
pub enum NpuOpKind {
    /// NPU_OP_CONV (also fully connected as a 1x1 convolution).
    Conv(ConvWeights),
    /// NPU_OP_DEPTHWISE (depth multiplier 1).
    Depthwise(ConvWeights),
    /// NPU_OP_POOL.
    Pool(PoolingMode),
    /// NPU_OP_ELEMENTWISE.
    Elementwise {
        mode: ElementwiseMode,
        /// `None` for unary modes (abs, clz, lrelu).
        ifm2: Option<Operand2>,
        /// IFM2 is operand A (the hardware computes `ifm2 op ifm`), for broadcasts where the
        /// smaller tensor is the first operand.
        reversed: bool,
        /// Input scaling for add/sub (`None`: OPA_OPB_16 with no scale registers emitted).
        input_scaling: Option<InputScaling>,
    },
}

/// The block configuration chosen for an operation (see docs/blocks.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockConfig {
    /// OFM block `[H, W, C]`.
    pub ofm_block: [usize; 3],
    /// IFM block `[H, W, C]` (informative; the hardware derives it).
    pub ifm_block: [usize; 3],
    /// Shared-buffer bank registers.
    pub ifm_ib_end: u8,
    pub ab_start: u8,
    pub ifm2_ib_start: Option<u8>,
    pub acc_format: AccFormat,
    /// Weight traversal for convolutions (part-kernel-first or depth-first).
    pub part_kernel_first: bool,
}

/// One NPU operation.
#[derive(Clone, Debug, PartialEq)]
pub struct NpuOp {
    /// The IR node it comes from (several ops may share one), for messages and dumps.
    pub name: String,
    pub kind: NpuOpKind,
    pub ifm: FeatureMap,
    pub ofm: FeatureMap,
    pub kernel: Kernel,
    /// IFM_PAD_TOP/LEFT/BOTTOM/RIGHT (0..=127); padding reads the IFM zero point.
    pub padding: crate::ir::Padding,
    pub upscale: IfmUpscaleMode,
    /// OFM_SCALE for pooling and elementwise ops; `None` for conv/depthwise (per-channel scales).
    pub ofm_scale: Option<Scale>,
    pub ifm_round: RoundMode,
    pub ofm_round: RoundMode,
    pub activation: Activation,
    /// Filled by block selection.
    pub block: Option<BlockConfig>,
}

impl NpuOp {
    /// An operation of `kind` from `ifm` to `ofm` with the defaults of most: a 1x1 kernel of
    /// stride 1, no padding or upscaling, no OFM_SCALE (per-channel scales), DBL rounding on
    /// both sides, and a clamp to the OFM's type; the `with_*` methods change them.
    ///
    /// ```
    /// use npu_build::ethos_u::npu_op::{BufferId, ElemType, FeatureMap, NpuOp, NpuOpKind, Scale};
    /// use npu_rt::ethos_u::regs::fields::PoolingMode;
    /// let fm = FeatureMap::nhwc(BufferId(0), [4, 4, 8], ElemType::I8, 0);
    /// let op = NpuOp::new("copy", NpuOpKind::Pool(PoolingMode::Average), fm.clone(), fm)
    ///     .with_scale(Scale::UNIT);
    /// assert_eq!(op.ofm_scale, Some(Scale::UNIT));
    /// assert_eq!((op.activation.min, op.activation.max), (-128, 127));
    /// ```
    pub fn new(
        name: impl Into<String>,
        kind: NpuOpKind,
        ifm: FeatureMap,
        ofm: FeatureMap,
    ) -> NpuOp {
        let activation = Activation::none(ofm.dtype);
        NpuOp {
            name: name.into(),
            kind,
            ifm,
            ofm,
            kernel: Kernel::UNIT,
            padding: crate::ir::Padding::default(),
            upscale: IfmUpscaleMode::None,
            ofm_scale: None,
            ifm_round: RoundMode::Dbl,
            ofm_round: RoundMode::Dbl,
            activation,
            block: None,
        }
    }

    /// The kernel geometry.
    pub fn with_kernel(self, kernel: Kernel) -> NpuOp {
        NpuOp { kernel, ..self }
    }

    /// IFM padding.
    pub fn with_padding(self, padding: crate::ir::Padding) -> NpuOp {
        NpuOp { padding, ..self }
    }

    /// IFM upscaling.
    pub fn with_upscale(self, upscale: IfmUpscaleMode) -> NpuOp {
        NpuOp { upscale, ..self }
    }

    /// A global OFM_SCALE (pooling and elementwise operations).
    pub fn with_scale(self, scale: Scale) -> NpuOp {
        NpuOp {
            ofm_scale: Some(scale),
            ..self
        }
    }

    /// OFM_SCALE, if any.
    pub fn with_ofm_scale(self, ofm_scale: Option<Scale>) -> NpuOp {
        NpuOp { ofm_scale, ..self }
    }

    /// The IFM and OFM rounding modes.
    pub fn with_rounding(self, ifm_round: RoundMode, ofm_round: RoundMode) -> NpuOp {
        NpuOp {
            ifm_round,
            ofm_round,
            ..self
        }
    }

    /// The OFM rounding mode.
    pub fn with_ofm_round(self, ofm_round: RoundMode) -> NpuOp {
        NpuOp { ofm_round, ..self }
    }

    /// The output stage's table, function and clamp.
    pub fn with_activation(self, activation: Activation) -> NpuOp {
        NpuOp { activation, ..self }
    }

    /// The buffers the operation reads or writes: IFM, IFM2 (a tensor), its lookup table, OFM
    /// (not weight streams, which are not buffers). The allocator's liveness, striping, table
    /// fusion and the report's schedule all count uses with it.
    pub fn buffers(&self) -> impl Iterator<Item = BufferId> + '_ {
        let ifm2 = match &self.kind {
            NpuOpKind::Elementwise {
                ifm2: Some(Operand2::Tensor(f)),
                ..
            } => Some(f.buffer),
            _ => None,
        };
        [
            Some(self.ifm.buffer),
            ifm2,
            self.activation.lut,
            Some(self.ofm.buffer),
        ]
        .into_iter()
        .flatten()
    }
}

/// Where an IR tensor's bytes are: a buffer, a byte offset into it and the layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorPlace {
    pub buffer: BufferId,
    pub offset: usize,
    pub layout: Layout,
    /// Byte strides `[y, x, c]` of the tensor as placed (for slices of a larger tensor these
    /// are the larger tensor's).
    pub strides: [usize; 3],
}

/// A lowered model: buffers and operations in execution order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Program {
    pub buffers: Vec<Buffer>,
    pub ops: Vec<NpuOp>,
    /// Where each IR tensor (by id) lives, for the tensors lowering placed (inputs and outputs
    /// of NPU operations); used to read intermediate tensors back in tests and debugging.
    pub tensor_places: Vec<Option<TensorPlace>>,
}

impl Program {
    /// Adds a buffer and returns its id.
    pub fn add_buffer(&mut self, b: Buffer) -> BufferId {
        self.buffers.push(b);
        BufferId(self.buffers.len() - 1)
    }

    /// Drops the operations marked in `removed` (exactly one flag per operation) and keeps `ranges` (IR
    /// operator -> program operations) consistent: each index moves down by the operations
    /// removed before it.
    pub(crate) fn remove_ops(&mut self, removed: &[bool], ranges: &mut [std::ops::Range<usize>]) {
        let mut before = Vec::with_capacity(removed.len() + 1);
        let mut n = 0;
        for &r in removed {
            before.push(n);
            n += usize::from(r);
        }
        before.push(n);
        let mut k = 0;
        self.ops.retain(|_| {
            k += 1;
            !removed[k - 1]
        });
        for r in ranges.iter_mut() {
            let (s, e) = (r.start, r.end);
            *r = s - before[s]..e - before[e];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extents() {
        let f = FeatureMap::nhwc(BufferId(0), [2, 3, 4], ElemType::I8, 0);
        assert_eq!(f.extent(), 24);
        let b = FeatureMap::nhcwb16(BufferId(0), [2, 3, 20], ElemType::I8, 0);
        // 2 rows of 3 x 32 bytes, last element at row 1, x 2, brick 1, lane 3.
        assert_eq!(b.strides, [96, 16, 48]);
        assert_eq!(b.extent(), 96 + 2 * 16 + 48 + 3 + 1);
    }
}

/// Where everything ended up: the input of emission.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// `(region, address)` of every buffer of the program (same index as `Program::buffers`).
    pub buffers: Vec<(u8, u64)>,
    /// Per op (same index as `Program::ops`): its encoded weight and scale streams, for
    /// convolution and depthwise ops.
    pub weights: Vec<Option<WeightStreams>>,
}

/// The encoded weight and scale/bias streams of one op, one entry per core that has work
/// (ethos-u65-512 splits output channels over two cores: channel `c` goes to core `c % 2`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WeightStreams {
    /// Region holding the streams (0: read-only; the arena for a DMA'd copy).
    pub region: u8,
    pub cores: Vec<CoreStreams>,
    /// Set when the streams are a copy in the arena that DMAs make from the read-only region
    /// before the operation (issued while earlier operations compute, so the two overlap): the
    /// copy's pieces in byte order, usually one; a copy prefetched over many operations
    /// (`prefetch`) is made in pieces sized to the DMA time each operation leaves free.
    pub dma: Vec<WeightDma>,
}

/// A weight-stream DMA (or one piece of it): `len` bytes from read-only address `src` to arena
/// address `dst`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WeightDma {
    pub src: u64,
    pub dst: u64,
    pub len: u64,
    /// How many operations of the same command stream before this one the DMA runs during:
    /// it is issued right after the kernel command of the operation `lead` places earlier
    /// (0 and 1: the previous operation). The copy must be live from that operation on.
    pub lead: usize,
}

/// One core's streams: addresses and lengths as WEIGHT_BASE/LENGTH and SCALE_BASE/LENGTH take them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoreStreams {
    pub weight_addr: u64,
    pub weight_len: u64,
    pub scale_addr: u64,
    pub scale_len: u64,
}
