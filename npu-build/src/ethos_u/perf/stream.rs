//! What a command stream asks the NPU to do, read from the register state at each `NPU_OP_*`.
//!
//! The estimator does not need the simulator's arithmetic, only the operations' geometry, so it
//! walks the stream with `npu-rt`'s decoder and [`RegisterState`] (the same register model the
//! virtual NPU executes) and describes every operation: class, feature-map shapes, formats and
//! regions, kernel, OFM block, accumulator, activation, weight/scale stream lengths, DMAs and
//! waits. Nothing here trusts the stream: undefined field values are errors naming the byte
//! offset of the operation.

use npu_rt::ethos_u::cop::{self, Cop1};
use npu_rt::ethos_u::regs::opcode::Commands;
use npu_rt::ethos_u::regs::{
    AccFormat, Activation, ActivationFormat, ActivationFunction, ActivationType, Cmd0, Command,
    DmaRegion, DmaRegionMode, ElementwiseMode, Ifm2Broadcast, Ifm2Precision, IfmPrecision,
    IfmUpscaleMode, KernelStride, OfmPrecision, PoolingMode, WeightOrder,
};
use npu_rt::ethos_u::state::RegisterState;

use crate::error::{Error, Result};

/// The hardware operation an `NPU_OP_*` starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpClass {
    /// `NPU_OP_CONV` (convolutions and fully connected layers).
    Conv,
    /// `NPU_OP_DEPTHWISE`.
    Depthwise,
    /// `NPU_OP_POOL` (max, average, reduce-sum).
    Pool(PoolingMode),
    /// `NPU_OP_ELEMENTWISE`.
    Elementwise(ElementwiseMode),
}

impl OpClass {
    /// Short name: `conv`, `depthwise`, `pool.max`, `elementwise.add`, ...
    pub fn name(&self) -> String {
        match self {
            OpClass::Conv => "conv".into(),
            OpClass::Depthwise => "depthwise".into(),
            OpClass::Pool(m) => format!("pool.{}", short(m.name(), "POOLING_MODE_")),
            OpClass::Elementwise(m) => {
                format!("elementwise.{}", short(m.name(), "ELEMENTWISE_MODE_"))
            }
        }
    }
}

/// `POOLING_MODE_MAX` -> `max`.
fn short(name: &str, prefix: &str) -> String {
    name.strip_prefix(prefix)
        .unwrap_or(name)
        .to_ascii_lowercase()
}

/// A feature map as one operation reads or writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeatureMap {
    /// `[height, width, depth]` the operation covers.
    pub shape: [u64; 3],
    /// Bits per element (8, 16 or 32).
    pub bits: u64,
    /// Brick format (NHCWB16) rather than NHWC.
    pub nhcwb16: bool,
    /// Region (base pointer index).
    pub region: u8,
    /// `BASE0`: address of the first element in the region.
    pub base: u64,
    /// `STRIDE_Y`, `STRIDE_X`, `STRIDE_C` in bytes.
    pub strides: [u64; 3],
}

impl FeatureMap {
    /// Elements covered.
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Bytes from channel 0 to channel `depth` (a multiple of 16 for bricks).
    pub fn depth_offset(&self, depth: u64) -> u64 {
        if self.nhcwb16 {
            (depth / 16).saturating_mul(self.strides[2])
        } else {
            depth.saturating_mul(self.bits / 8)
        }
    }
}

/// The second input of a binary elementwise operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ifm2 {
    /// A feature map (possibly broadcast: its shape has 1 in broadcast dimensions).
    Tensor(FeatureMap),
    /// `IFM2_SCALAR`: a constant held in the register, of `bits` bits per element.
    Scalar { bits: u64 },
}

/// Kernel geometry (undilated size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kernel {
    pub height: u64,
    pub width: u64,
    pub stride_y: u64,
    pub stride_x: u64,
    pub dilation_y: u64,
    pub dilation_x: u64,
}

impl Kernel {
    /// Dilated height and width.
    pub fn dilated(&self) -> (u64, u64) {
        (
            (self.height - 1) * self.dilation_y + 1,
            (self.width - 1) * self.dilation_x + 1,
        )
    }
}

/// The activation stage as the performance model distinguishes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActivationKind {
    /// No clipping beyond the OFM type's range.
    None,
    /// A ReLU-like clip narrower than the OFM type's range.
    Clip,
    /// Table lookup, tanh or sigmoid.
    Lut,
}

/// A weight or scale stream the operation reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConstStream {
    pub region: u8,
    /// Bytes of all cores' streams.
    pub bytes: u64,
}

/// One `NPU_OP_CONV`/`DEPTHWISE`/`POOL`/`ELEMENTWISE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpuOperation {
    /// Byte offset of the `NPU_OP_*` command.
    pub offset: usize,
    pub class: OpClass,
    pub ifm: FeatureMap,
    pub ifm2: Option<Ifm2>,
    pub ofm: FeatureMap,
    pub kernel: Kernel,
    /// `[height, width, depth]` of the OFM block (`OFM_BLK_*`).
    pub ofm_block: [u64; 3],
    /// `WEIGHT_ORDER_PART_KERNEL_FIRST`.
    pub part_kernel: bool,
    /// 40-bit accumulators.
    pub acc40: bool,
    pub activation: ActivationKind,
    /// `IFM_UPSCALE` mode.
    pub upscale: IfmUpscaleMode,
    /// `IFM_PAD_TOP`, `_LEFT`, `_RIGHT`, `_BOTTOM`.
    pub pad: [u16; 4],
    /// Weight stream (convolutions and depthwise only).
    pub weights: Option<ConstStream>,
    /// Scale/bias stream (convolutions and depthwise only).
    pub scales: Option<ConstStream>,
}

impl NpuOperation {
    /// A table lookup on a 1x1 average pool: a stand-alone LUT operation (sigmoid, tanh, GELU,
    /// ... as Vela lowers them), not a LUT fused into another operation's output stage.
    pub fn is_standalone_lut(&self) -> bool {
        self.activation == ActivationKind::Lut
            && self.class == OpClass::Pool(PoolingMode::Average)
            && self.kernel.height == 1
            && self.kernel.width == 1
    }

    /// Multiply-accumulates (as Vela counts them: OFM elements x kernel elements, x IFM depth
    /// for convolutions).
    pub fn macs(&self) -> u64 {
        match self.class {
            OpClass::Conv | OpClass::Depthwise | OpClass::Pool(_) => {
                let k = self.kernel.height * self.kernel.width;
                let per_out = if self.class == OpClass::Conv {
                    k.saturating_mul(self.ifm.shape[2])
                } else {
                    k
                };
                self.ofm.elements().saturating_mul(per_out)
            }
            OpClass::Elementwise(_) => 0,
        }
    }
}

/// One end of a DMA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DmaEnd {
    /// A region (external memory).
    Region(u8),
    /// The shared buffer (LUTs).
    Shram,
}

/// One `NPU_OP_DMA_START`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dma {
    pub offset: usize,
    pub src: DmaEnd,
    pub dst: DmaEnd,
    pub bytes: u64,
}

/// What the command processor does, in stream order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Op(Box<NpuOperation>),
    Dma(Dma),
    /// `NPU_OP_DMA_WAIT k`: wait until at most `k` DMAs are outstanding.
    DmaWait(u16),
    /// `NPU_OP_KERNEL_WAIT n`: wait until at most `n` operations are outstanding.
    KernelWait(u16),
}

/// A malformed-stream error at byte `offset`.
pub(crate) fn bad(offset: usize, what: &str) -> Error {
    Error::CommandStream {
        offset,
        detail: what.to_string(),
    }
}

/// Calls `walk` with the 32-bit words of each command stream of `stream` (a raw command stream
/// or a COP1 driver payload) and the byte offset of its first word, in order, until `walk`
/// returns true (the stream ended at `NPU_OP_STOP`). Shared by the U55/U65 and U85 decoders.
pub(crate) fn for_each_stream(
    stream: &[u8],
    mut walk: impl FnMut(&[u32], usize) -> Result<bool>,
) -> Result<()> {
    let mut walk_bytes = |bytes: &[u8], base: usize| {
        if !bytes.len().is_multiple_of(4) {
            return Err(bad(
                base + bytes.len(),
                "command stream is not whole 32-bit words",
            ));
        }
        let words: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        walk(&words, base)
    };
    if cop::is_cop1(stream) {
        let cop = Cop1::parse(stream).map_err(|e| Error::Artifact(e.to_string()))?;
        for (base, bytes) in cop.command_streams() {
            if walk_bytes(bytes, base)? {
                break;
            }
        }
    } else {
        walk_bytes(stream, 0)?;
    }
    Ok(())
}

/// The events of `stream` (a raw command stream or a COP1 driver payload).
pub fn decode(stream: &[u8]) -> Result<Vec<Event>> {
    let mut state = RegisterState::default();
    let mut events = Vec::new();
    for_each_stream(stream, |words, base| {
        walk(words, base, &mut state, &mut events)
    })?;
    Ok(events)
}

/// Decodes one command stream; true when it ended at `NPU_OP_STOP`.
fn walk(
    words: &[u32],
    base: usize,
    state: &mut RegisterState,
    events: &mut Vec<Event>,
) -> Result<bool> {
    for item in Commands::new(words, base) {
        let (offset, cmd) = item.map_err(|e| bad(e.offset(), &e.to_string()))?;
        if state.apply(&cmd) {
            continue;
        }
        let Command::Cmd0 { op, param } = cmd else {
            continue;
        };
        let event = match op {
            Cmd0::OP_STOP => return Ok(true),
            Cmd0::OP_CONV => op_event(state, offset, OpClass::Conv)?,
            Cmd0::OP_DEPTHWISE => op_event(state, offset, OpClass::Depthwise)?,
            Cmd0::OP_POOL => {
                let mode = PoolingMode::from_bits((param & 7) as u8)
                    .ok_or_else(|| bad(offset, "undefined pooling mode"))?;
                op_event(state, offset, OpClass::Pool(mode))?
            }
            Cmd0::OP_ELEMENTWISE => {
                let mode = ElementwiseMode::from_bits((param & 0x3f) as u8)
                    .ok_or_else(|| bad(offset, "undefined elementwise mode"))?;
                op_event(state, offset, OpClass::Elementwise(mode))?
            }
            Cmd0::OP_DMA_START => Event::Dma(dma(state, offset)),
            Cmd0::OP_DMA_WAIT => Event::DmaWait(param & 0xf),
            Cmd0::OP_KERNEL_WAIT => Event::KernelWait(param & 0x3),
            _ => continue,
        };
        events.push(event);
    }
    Ok(false)
}

fn dma(s: &RegisterState, offset: usize) -> Dma {
    let end = |raw: u16| {
        let r = DmaRegion(raw);
        match r.mode() {
            DmaRegionMode::Internal => DmaEnd::Shram,
            DmaRegionMode::External => DmaEnd::Region(r.region()),
        }
    };
    Dma {
        offset,
        src: end(s.dma_src_region),
        dst: end(s.dma_dst_region),
        bytes: s.dma_len,
    }
}

fn format_is_b16(f: Option<ActivationFormat>, offset: usize, reg: &str) -> Result<bool> {
    match f {
        Some(ActivationFormat::Nhwc) => Ok(false),
        Some(ActivationFormat::Nhcwb16) => Ok(true),
        None => Err(bad(offset, &format!("{reg}: undefined activation format"))),
    }
}

fn op_event(s: &RegisterState, offset: usize, class: OpClass) -> Result<Event> {
    let ofm_shape = [
        u64::from(s.ofm_height_m1) + 1,
        u64::from(s.ofm_width_m1) + 1,
        u64::from(s.ofm_depth_m1) + 1,
    ];
    let ofm_prec = OfmPrecision(s.ofm.precision);
    let ofm_bits = 8 * ofm_prec.precision().bytes() as u64;
    let ofm_b16 = format_is_b16(ofm_prec.format(), offset, "OFM_PRECISION")?;
    let ofm = FeatureMap {
        shape: ofm_shape,
        bits: ofm_bits,
        nhcwb16: ofm_b16,
        region: s.ofm.region,
        base: s.ofm.base[0],
        strides: [s.ofm.stride_y, s.ofm.stride_x, s.ofm.stride_c],
    };

    let ks = KernelStride(s.kernel_stride);
    let upscale = IfmUpscaleMode::from_bits(s.upscale as u8)
        .ok_or_else(|| bad(offset, "IFM_UPSCALE: undefined mode"))?;
    let elementwise = matches!(class, OpClass::Elementwise(_));
    let kernel = if elementwise {
        Kernel {
            height: 1,
            width: 1,
            stride_y: 1,
            stride_x: 1,
            dilation_y: 1,
            dilation_x: 1,
        }
    } else {
        let (dy, dx) = (u64::from(ks.dilation_y()), u64::from(ks.dilation_x()));
        let undilate = |m1: u16, d: u64| u64::from(m1) / d.max(1) + 1;
        Kernel {
            height: undilate(s.kernel_height_m1, dy),
            width: undilate(s.kernel_width_m1, dx),
            stride_y: u64::from(ks.stride_y()),
            stride_x: u64::from(ks.stride_x()),
            dilation_y: dy,
            dilation_x: dx,
        }
    };

    let ifm_prec = IfmPrecision(s.ifm.precision);
    let ifm_bits = 8 * ifm_prec.precision().bytes() as u64;
    let ifm_b16 = format_is_b16(ifm_prec.format(), offset, "IFM_PRECISION")?;
    let ifm_depth = u64::from(s.ifm_depth_m1) + 1;
    let (ifm_h, ifm_w) = if elementwise {
        (ofm_shape[0], ofm_shape[1])
    } else {
        // There is no IFM size register: the kernel walks (ofm - 1) * stride + kernel
        // positions, of which the padding is not read; upscaling halves what is read.
        let [pt, pl, pr, pb] = s.pad.map(u64::from);
        let (kh, kw) = (
            u64::from(s.kernel_height_m1) + 1,
            u64::from(s.kernel_width_m1) + 1,
        );
        let span =
            |o: u64, st: u64, k: u64, pads: u64| ((o - 1) * st + k).saturating_sub(pads).max(1);
        let h = span(ofm_shape[0], kernel.stride_y, kh, pt + pb);
        let w = span(ofm_shape[1], kernel.stride_x, kw, pl + pr);
        match upscale {
            IfmUpscaleMode::None => (h, w),
            _ => (h.div_ceil(2), w.div_ceil(2)),
        }
    };
    let ifm = FeatureMap {
        shape: [ifm_h, ifm_w, ifm_depth],
        bits: ifm_bits,
        nhcwb16: ifm_b16,
        region: s.ifm.region,
        base: s.ifm.base[0],
        strides: [s.ifm.stride_y, s.ifm.stride_x, s.ifm.stride_c],
    };

    let ifm2 = match class {
        OpClass::Elementwise(mode) if !mode.is_unary() => {
            let bc = Ifm2Broadcast(s.ifm2_broadcast);
            let p = Ifm2Precision(s.ifm2.precision);
            let bits = 8 * p.precision().bytes() as u64;
            if bc.broadcast_constant() {
                Some(Ifm2::Scalar { bits })
            } else {
                let b16 = format_is_b16(p.format(), offset, "IFM2_PRECISION")?;
                let pick = |flag: bool, d: u64| if flag { 1 } else { d };
                let shape = [
                    pick(bc.broadcast_h(), ofm_shape[0]),
                    pick(bc.broadcast_w(), ofm_shape[1]),
                    pick(bc.broadcast_c(), ifm_depth),
                ];
                Some(Ifm2::Tensor(FeatureMap {
                    shape,
                    bits,
                    nhcwb16: b16,
                    region: s.ifm2.region,
                    base: s.ifm2.base[0],
                    strides: [s.ifm2.stride_y, s.ifm2.stride_x, s.ifm2.stride_c],
                }))
            }
        }
        _ => None,
    };

    let has_weights = matches!(class, OpClass::Conv | OpClass::Depthwise);
    let stream = |region: u8, len: [u32; 2]| {
        has_weights.then_some(ConstStream {
            region,
            bytes: u64::from(len[0]) + u64::from(len[1]),
        })
    };
    let acc = AccFormat::from_bits(s.acc_format as u8)
        .ok_or_else(|| bad(offset, "ACC_FORMAT: undefined format"))?;

    Ok(Event::Op(Box::new(NpuOperation {
        offset,
        class,
        ifm,
        ifm2,
        ofm,
        kernel,
        ofm_block: [
            u64::from(s.ofm_blk_m1[1]) + 1,
            u64::from(s.ofm_blk_m1[0]) + 1,
            u64::from(s.ofm_blk_m1[2]) + 1,
        ],
        part_kernel: class == OpClass::Conv && ks.weight_order() == WeightOrder::PartKernelFirst,
        acc40: acc == AccFormat::I40,
        activation: activation(s, &ofm_prec, offset)?,
        upscale,
        pad: s.pad,
        weights: stream(s.weight_region, s.weight_length),
        scales: stream(s.scale_region, s.scale_length),
    })))
}

fn activation(s: &RegisterState, ofm: &OfmPrecision, offset: usize) -> Result<ActivationKind> {
    let f = Activation(s.activation)
        .function()
        .ok_or_else(|| bad(offset, "ACTIVATION: undefined function"))?;
    if f != ActivationFunction::Relu {
        return Ok(ActivationKind::Lut);
    }
    let bits = 8 * ofm.precision().bytes() as u32;
    if bits > 16 {
        return Ok(ActivationKind::None);
    }
    // The clip bounds are raw 16-bit values, sign-extended for signed OFMs.
    let signed = ofm.activation_type() == ActivationType::Signed;
    let value = |raw: u16| -> i64 {
        if signed {
            i64::from(raw as i16)
        } else {
            i64::from(raw)
        }
    };
    let (lo, hi) = if signed {
        (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1)
    } else {
        (0, (1i64 << bits) - 1)
    };
    let clipped = value(s.activation_min) > lo || value(s.activation_max) < hi;
    Ok(if clipped {
        ActivationKind::Clip
    } else {
        ActivationKind::None
    })
}
