//! Virtual Ethos-U85: executes Vela's U85 command streams (COP1 payloads or raw streams).
//!
//! The U85 command set ([`crate::ethos_u::regs::u85`]) shares the word layout but not the
//! opcodes with U55/U65, so it has its own register state ([`U85State`]) and dispatch; the
//! walk over a stream (decode, register writes, stop, error offsets, work limit, counters) is
//! the U55/U65 model's (`super::walk`). The feature-map addressing ([`super::fmap`]), kernel geometry ([`super::ops::Geometry`]),
//! rounding ([`crate::ethos_u::numerics`]), output clip/LUT stage ([`super::ops::output`]) and
//! the weight decoder ([`crate::ethos_u::weights::u85`]) are shared with the U55/U65 model where
//! the hardware behaves the same; what differs is documented in `docs/u85.md` ("Virtual U85").
//!
//! Implemented: `NPU_OP_ELEMENTWISE` (ADD, SUB, MUL, MIN, MAX, ABS, LRELU, SHL, SHR, CLZ),
//! `NPU_OP_POOL` (MAX, MIN, AVERAGE, SUM, REDUCE_SUM, ARGMAX_X, ARGMAX_Y, NONE), `NPU_OP_CONV`
//! (weights from the weight stream or, `weights_ifm2`, from IFM2: matrix multiplication) and
//! `NPU_OP_DEPTHWISE` (SWD/FWD weights, I32/I48 accumulators), `NPU_OP_RESIZE` (NEAREST,
//! BILINEAR), 1-D `NPU_OP_DMA_START` (memory to memory and into the LUT memory), OFM
//! transpose/reverse, chaining, 8-bit LUT activations. Anything else (accumulator
//! input/output chaining, REPLICATE resize, other LUT functions, branches, ...) fails with
//! [`SimErrorKind::Unsupported`] naming the command offset and opcode.

use crate::sim::within_limits;
use std::vec;
use std::vec::Vec;

use crate::ethos_u::config::U85Config;
use crate::ethos_u::cop::{Architecture, Cop1};
use crate::ethos_u::numerics;
use crate::ethos_u::regs::u85::ctrl::Config as U85ConfigReg;
use crate::ethos_u::regs::u85::fields::{
    AccFormat, AccInput, AccOutput, ActivationClipRange, ActivationFunction, ActivationReverse,
    ActivationStorage, ActivationTranspose, BroadcastMode, ElementwiseMode, PoolingMode,
    ResizeMode, RoundModeIfm, RoundModeOfm, WeightFormat as RegWeightFormat,
};
use crate::ethos_u::regs::u85::{Cmd0, Cmd1, Command, DecodeError};
use crate::ethos_u::regs::{
    self as common, ActivationPrecision, DmaRegion, DmaRegionMode, DmaStrideMode, KernelStride,
    OfmScaleMode, RoundMode, WeightOrder,
};
use crate::ethos_u::weights::u85::{
    self as w85, U85Geometry, WeightFormat, decode_scales_u85, decode_weights_u85,
};
use crate::ethos_u::weights::{ScaleEntry, Traversal, order::undilated_kernel_size};

use super::error::{Access, SimError, SimErrorKind};
use super::fmap::{FeatureMap, FmKind};
use super::memory::Regions;
use super::ops::output::{Lut, OutputStage};
use super::ops::pool::{Window, rounded_average, window};
use super::ops::{Geometry, ofm_dims};
use super::state::{FmRegs, RegisterState};
use super::stats::{OpKind, OpStats, Stats};
use super::walk;
use super::{Limits, StreamEnd};

/// Every U85 register the simulator reads, kept raw as the commands carry them.
///
/// `cmd0` parameters and `cmd1` (parameter, payload) pairs are stored by opcode; operations
/// decode what they use when they start, as the hardware does. Reset state is all zeros.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct U85State {
    cmd0: Vec<u16>,
    cmd1: Vec<(u16, u32)>,
}

impl Default for U85State {
    fn default() -> Self {
        U85State {
            cmd0: vec![0; 0x200],
            cmd1: vec![(0, 0); 0x200],
        }
    }
}

impl U85State {
    /// Applies a register-setting command; returns false for operations (`NPU_OP_*`).
    pub fn apply(&mut self, cmd: &Command) -> bool {
        match *cmd {
            Command::Cmd0 { op, param } => {
                if op.is_operation() {
                    return false;
                }
                if let Some(r) = self.cmd0.get_mut(op.code() as usize) {
                    *r = param;
                }
                true
            }
            Command::Cmd1 { op, param, payload } => {
                if op.is_operation() {
                    return false;
                }
                if let Some(r) = self.cmd1.get_mut(op.code() as usize) {
                    *r = (param, payload);
                }
                true
            }
        }
    }

    /// The parameter last set by a `cmd0` register command.
    pub fn p(&self, op: Cmd0) -> u16 {
        self.cmd0.get(op.code() as usize).copied().unwrap_or(0)
    }

    /// The (parameter, payload) last set by a `cmd1` register command.
    pub fn p1(&self, op: Cmd1) -> (u16, u32) {
        self.cmd1.get(op.code() as usize).copied().unwrap_or((0, 0))
    }

    /// A 40-bit address register (parameter bits 0..=7 above the payload).
    pub fn addr(&self, op: Cmd1) -> u64 {
        let (p, v) = self.p1(op);
        (((p & 0xff) as u64) << 32) | v as u64
    }

    /// The registers of one feature map in the layout the shared addressing code reads. The
    /// U85 `*_PRECISION` parameters keep the U55 positions of type, precision and format
    /// (bits 0, 2..=3 or 1..=2, 6..=7 of the parameter), which is all `FeatureMap` decodes.
    fn fm(&self, which: FmKind) -> FmRegs {
        use Cmd0 as C;
        use Cmd1 as D;
        let (region, bases, h0, h1, w0, strides, zp, prec) = match which {
            FmKind::Ifm => (
                C::SET_IFM_REGION,
                [
                    D::SET_IFM_BASE0,
                    D::SET_IFM_BASE1,
                    D::SET_IFM_BASE2,
                    D::SET_IFM_BASE3,
                ],
                C::SET_IFM_HEIGHT0_M1,
                C::SET_IFM_HEIGHT1_M1,
                C::SET_IFM_WIDTH0_M1,
                [
                    D::SET_IFM_STRIDE_X,
                    D::SET_IFM_STRIDE_Y,
                    D::SET_IFM_STRIDE_C,
                ],
                C::SET_IFM_ZERO_POINT,
                C::SET_IFM_PRECISION,
            ),
            FmKind::Ifm2 => (
                C::SET_IFM2_REGION,
                [
                    D::SET_IFM2_BASE0,
                    D::SET_IFM2_BASE1,
                    D::SET_IFM2_BASE2,
                    D::SET_IFM2_BASE3,
                ],
                C::SET_IFM2_HEIGHT0_M1,
                C::SET_IFM2_HEIGHT1_M1,
                C::SET_IFM2_WIDTH0_M1,
                [
                    D::SET_IFM2_STRIDE_X,
                    D::SET_IFM2_STRIDE_Y,
                    D::SET_IFM2_STRIDE_C,
                ],
                C::SET_IFM2_ZERO_POINT,
                C::SET_IFM2_PRECISION,
            ),
            FmKind::Ofm => (
                C::SET_OFM_REGION,
                [
                    D::SET_OFM_BASE0,
                    D::SET_OFM_BASE1,
                    D::SET_OFM_BASE2,
                    D::SET_OFM_BASE3,
                ],
                C::SET_OFM_HEIGHT0_M1,
                C::SET_OFM_HEIGHT1_M1,
                C::SET_OFM_WIDTH0_M1,
                [
                    D::SET_OFM_STRIDE_X,
                    D::SET_OFM_STRIDE_Y,
                    D::SET_OFM_STRIDE_C,
                ],
                C::SET_OFM_ZERO_POINT,
                C::SET_OFM_PRECISION,
            ),
        };
        FmRegs {
            region: (self.p(region) & 7) as u8,
            base: bases.map(|b| self.addr(b)),
            height0_m1: self.p(h0),
            height1_m1: self.p(h1),
            width0_m1: self.p(w0),
            stride_x: self.addr(strides[0]),
            stride_y: self.addr(strides[1]),
            stride_c: self.addr(strides[2]),
            zero_point: self.p(zp),
            // Only the low byte: bits 14..=15 of a U85 precision are its storage field, where
            // U55 has the round mode, which `FeatureMap` does not read anyway.
            precision: self.p(prec) & 0x3fff,
        }
    }

    /// The geometry registers in the U55/U65 state layout, for the shared kernel geometry and
    /// feature-map code (the U85 keeps those registers' meaning and bit layout).
    fn common(&self) -> RegisterState {
        RegisterState {
            ifm: self.fm(FmKind::Ifm),
            ifm2: self.fm(FmKind::Ifm2),
            ofm: self.fm(FmKind::Ofm),
            ifm_depth_m1: self.p(Cmd0::SET_IFM_DEPTH_M1),
            pad: [
                self.p(Cmd0::SET_IFM_PAD_TOP) & 0x7f,
                self.p(Cmd0::SET_IFM_PAD_LEFT) & 0x7f,
                self.p(Cmd0::SET_IFM_PAD_RIGHT) & 0xff,
                self.p(Cmd0::SET_IFM_PAD_BOTTOM) & 0xff,
            ],
            upscale: self.p(Cmd0::SET_IFM_UPSCALE) & 3,
            ofm_width_m1: self.p(Cmd0::SET_OFM_WIDTH_M1),
            ofm_height_m1: self.p(Cmd0::SET_OFM_HEIGHT_M1),
            ofm_depth_m1: self.p(Cmd0::SET_OFM_DEPTH_M1),
            kernel_width_m1: self.p(Cmd0::SET_KERNEL_WIDTH_M1),
            kernel_height_m1: self.p(Cmd0::SET_KERNEL_HEIGHT_M1),
            kernel_stride: self.p(Cmd0::SET_KERNEL_STRIDE),
            ..RegisterState::default()
        }
    }
}

/// A dense feature map's extent: (height, width, depth).
type Dims = (u64, u64, u64);

/// A virtual Ethos-U85 of one configuration.
pub struct VirtualU85 {
    config: &'static U85Config,
    state: U85State,
    /// The activation LUT memory (`DMA_REGION_MODE_INTERNAL` destinations).
    lut: Vec<u8>,
    limits: Limits,
    work: u64,
    /// The chaining buffer: the last OFM written with `ACTIVATION_STORAGE_CHAINED`, as
    /// (height, width, depth) and dense values, for an IFM read with that storage.
    chain: Option<(Dims, Vec<i32>)>,
}

impl core::fmt::Debug for VirtualU85 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("VirtualU85")
            .field("config", &self.config.name)
            .finish_non_exhaustive()
    }
}

/// `x` rounded by a U85 OFM rounding mode: `v * multiplier / 2^shift`. `dbl` is the
/// register's `dbl_rnd` (first rounding of the double rounding at bit `31 - dbl`).
fn scale_ofm(
    v: i64,
    multiplier: u32,
    shift: u32,
    mode: RoundModeOfm,
    dbl: u32,
) -> Result<i64, SimErrorKind> {
    let common = match mode {
        RoundModeOfm::DoubleSymmetric => RoundMode::Dbl,
        RoundModeOfm::Natural => RoundMode::Natural,
        RoundModeOfm::TruncateToZero => RoundMode::Truncate,
        RoundModeOfm::TruncateToLower | RoundModeOfm::Symmetric => {
            // Inferred from the names (Vela maps TFLite's floor and round-half-away rounding to
            // them): round toward minus infinity, and half away from zero.
            let p = v as i128 * multiplier as i128;
            let shift = shift.min(63);
            if shift == 0 {
                return Ok(numerics::clamp_i64(p));
            }
            let half = 1i128 << (shift - 1);
            let r = match mode {
                RoundModeOfm::TruncateToLower => p >> shift,
                _ if p >= 0 => (p + half) >> shift,
                _ => -((-p + half) >> shift),
            };
            return Ok(numerics::clamp_i64(r));
        }
        RoundModeOfm::DoubleAsymmetric => {
            return Err(SimErrorKind::Unsupported {
                what: "ROUND_MODE_OFM_DOUBLE_ASYMMETRIC",
            });
        }
    };
    Ok(numerics::scale(v, multiplier, shift, common, dbl))
}

/// A decoded `*_SCALE` register: (scale, shift, dbl_rnd).
#[derive(Clone, Copy, Debug)]
struct Scale {
    scale: u32,
    shift: u32,
    dbl: u32,
}

impl Scale {
    fn of(reg: (u16, u32)) -> Self {
        Scale {
            scale: reg.1 & 0x7fff_ffff,
            shift: (reg.0 & 0x3f) as u32,
            dbl: ((reg.0 >> 6) & 0x1f) as u32,
        }
    }
}

/// Saturates an accumulator to the U85 accumulator width.
fn saturate(v: i64, acc: AccFormat) -> i64 {
    match acc {
        AccFormat::I32 => v.clamp(i32::MIN as i64, i32::MAX as i64),
        AccFormat::I48 => v.clamp(-(1i64 << 47), (1i64 << 47) - 1),
    }
}

/// Everything an operation needs from the OFM side: the feature map, the output stage (zero
/// point, clip, LUT) and the OFM scale.
struct Ofm {
    fm: FeatureMap,
    out: OutputStage,
    round: RoundModeOfm,
    scale: Scale,
    per_channel: bool,
}

impl Ofm {
    /// The OFM scale applied to `v` (global scale mode), else `v`.
    fn global(&self, v: i64) -> Result<i64, SimErrorKind> {
        if self.per_channel {
            Ok(v)
        } else {
            scale_ofm(
                v,
                self.scale.scale,
                self.scale.shift,
                self.round,
                self.scale.dbl,
            )
        }
    }
}

impl VirtualU85 {
    /// A reset NPU of the given configuration, with default [`Limits`].
    pub fn new(config: &'static U85Config) -> Self {
        VirtualU85 {
            config,
            state: U85State::default(),
            lut: vec![0; config.lut_bytes as usize],
            limits: Limits::default(),
            work: 0,
            chain: None,
        }
    }

    /// Replaces the limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The configuration.
    pub fn config(&self) -> &'static U85Config {
        self.config
    }

    /// The current register state.
    pub fn state(&self) -> &U85State {
        &self.state
    }

    /// Resets, then runs a raw U85 command stream or a U85 COP1 payload to its end or
    /// `NPU_OP_STOP`.
    pub fn run(&mut self, stream: &[u8], regions: &mut Regions) -> Result<Stats, SimError> {
        self.state = U85State::default();
        self.lut.iter_mut().for_each(|b| *b = 0);
        self.work = 0;
        self.chain = None;
        let mut stats = Stats::default();
        walk::run(self, stream, regions, &mut stats)?;
        Ok(stats)
    }

    /// Executes the U85 command stream `bytes` (first byte at `byte_base` in the caller's
    /// buffer, for error offsets) on the current state.
    pub fn execute(
        &mut self,
        bytes: &[u8],
        byte_base: usize,
        regions: &mut Regions,
        stats: &mut Stats,
    ) -> Result<StreamEnd, SimError> {
        walk::execute(self, bytes, byte_base, regions, stats)
    }

    fn operation(
        &mut self,
        op: Cmd0,
        param: u16,
        offset: usize,
        regions: &mut Regions,
        stats: &mut Stats,
    ) -> Result<Option<StreamEnd>, SimErrorKind> {
        let invalid = |register, reason| SimErrorKind::InvalidRegister {
            register,
            value: param as u64,
            reason,
        };
        let kind = match op {
            Cmd0::OP_STOP => return Ok(walk::stop(param, stats)),
            Cmd0::OP_IRQ => return Ok(walk::irq(param, stats)),
            // Everything completes synchronously.
            Cmd0::OP_DMA_WAIT | Cmd0::OP_KERNEL_WAIT | Cmd0::OP_PMU_MASK => return Ok(None),
            // `weights_ifm2` (bit 0): the weights are IFM2, a matrix multiplication.
            Cmd0::OP_CONV if param & 1 != 0 => Op::MatMul,
            Cmd0::OP_CONV => Op::Conv,
            Cmd0::OP_DEPTHWISE => Op::Depthwise,
            Cmd0::OP_POOL => Op::Pool(
                PoolingMode::from_bits((param & 7) as u8)
                    .ok_or_else(|| invalid("NPU_OP_POOL", "undefined pooling mode"))?,
            ),
            Cmd0::OP_ELEMENTWISE => Op::Elementwise(
                ElementwiseMode::from_bits((param & 0x3f) as u8)
                    .ok_or_else(|| invalid("NPU_OP_ELEMENTWISE", "undefined elementwise mode"))?,
            ),
            Cmd0::OP_DMA_START => Op::Dma,
            Cmd0::OP_RESIZE => Op::Resize(
                ResizeMode::from_bits((param & 3) as u8)
                    .ok_or_else(|| invalid("NPU_OP_RESIZE", "undefined resize mode"))?,
            ),
            _ => return Ok(None),
        };
        let mut st = OpStats::new(offset, kind.stats_kind());
        match kind {
            Op::Dma => self.dma(regions, &mut st)?,
            Op::Elementwise(mode) => self.elementwise(mode, regions, &mut st)?,
            Op::Pool(mode) => self.pool(mode, regions, &mut st)?,
            Op::Conv => self.conv(false, regions, &mut st)?,
            Op::MatMul => self.matmul(regions, &mut st)?,
            Op::Resize(mode) => self.resize(mode, regions, &mut st)?,
            Op::Depthwise => self.conv(true, regions, &mut st)?,
        }
        walk::account(&mut self.work, &self.limits, st, stats)?;
        Ok(None)
    }

    /// `NPU_OP_DMA_START`, 1-D: memory to memory, or memory into the LUT memory.
    fn dma(&mut self, mem: &mut Regions, st: &mut OpStats) -> Result<(), SimErrorKind> {
        let s = &self.state;
        let src = DmaRegion(s.p(Cmd0::SET_DMA0_SRC_REGION));
        let dst = DmaRegion(s.p(Cmd0::SET_DMA0_DST_REGION));
        // Only the source has a stride mode on U85 (the destination's bits are reserved).
        match src.stride_mode() {
            Some(DmaStrideMode::D1) => {}
            _ => {
                return Err(SimErrorKind::Unsupported {
                    what: "2-D/3-D DMA on the virtual Ethos-U85",
                });
            }
        }
        if (src.0 | dst.0) & (1 << 11) != 0 {
            return Err(SimErrorKind::Unsupported {
                what: "indexed DMA on the virtual Ethos-U85",
            });
        }
        let len = s.addr(Cmd1::SET_DMA0_LEN);
        within_limits(&[("DMA length", len, self.limits.max_dma_bytes)])?;
        let (from, to) = (s.addr(Cmd1::SET_DMA0_SRC), s.addr(Cmd1::SET_DMA0_DST));
        match (src.mode(), dst.mode()) {
            (DmaRegionMode::External, DmaRegionMode::External) => {
                mem.copy((src.region(), from), (dst.region(), to), len)?;
                st.read(src.region(), len);
                st.write(dst.region(), len);
            }
            (DmaRegionMode::External, DmaRegionMode::Internal) => {
                let size = self.lut.len();
                let oob = SimErrorKind::ShramOutOfBounds {
                    addr: to,
                    len,
                    size: size as u64,
                };
                let a = usize::try_from(to).map_err(|_| oob.clone())?;
                let e = a
                    .checked_add(usize::try_from(len).map_err(|_| oob.clone())?)
                    .ok_or(oob.clone())?;
                let dst = self.lut.get_mut(a..e).ok_or(oob)?;
                dst.copy_from_slice(mem.read(src.region(), from, len, Access::DmaRead)?);
                st.read(src.region(), len);
            }
            _ => {
                return Err(SimErrorKind::Unsupported {
                    what: "DMA from the internal memories of the virtual Ethos-U85",
                });
            }
        }
        st.dma_bytes = len;
        Ok(())
    }

    /// Checks the registers every block operation shares and that are not modelled.
    fn check_common(&self, fm_kinds: &[FmKind]) -> Result<(), SimErrorKind> {
        if self.acc_io() != (Some(AccInput::Reset), Some(AccOutput::Enable)) {
            return Err(SimErrorKind::Unsupported {
                what: "accumulator chaining (ACC_INPUT/ACC_OUTPUT) on the virtual Ethos-U85",
            });
        }
        self.check_layout(fm_kinds)
    }

    /// `ACC_FORMAT`'s accumulator source (`acc_input`, bits 4..=5) and `acc_output` (bit 6).
    fn acc_io(&self) -> (Option<AccInput>, Option<AccOutput>) {
        let acc = self.state.p(Cmd0::SET_ACC_FORMAT);
        (
            AccInput::from_bits(((acc >> 4) & 3) as u8),
            AccOutput::from_bits(((acc >> 6) & 1) as u8),
        )
    }

    /// The feature-map checks of [`Self::check_common`]: OFM transpose defined, no TILE3X1
    /// storage, no IFM upscaling.
    fn check_layout(&self, fm_kinds: &[FmKind]) -> Result<(), SimErrorKind> {
        let s = &self.state;
        let ofm = s.p(Cmd0::SET_OFM_PRECISION);
        if ActivationTranspose::from_bits(((ofm >> 11) & 7) as u8).is_none() {
            return Err(SimErrorKind::InvalidRegister {
                register: "OFM_PRECISION",
                value: ofm as u64,
                reason: "undefined activation_transpose",
            });
        }
        for &k in fm_kinds {
            let p = match k {
                FmKind::Ifm => s.p(Cmd0::SET_IFM_PRECISION),
                FmKind::Ifm2 => s.p(Cmd0::SET_IFM2_PRECISION),
                FmKind::Ofm => ofm,
            };
            if ActivationStorage::from_bits((p >> 14) as u8) == Some(ActivationStorage::Tile3x1) {
                return Err(SimErrorKind::Unsupported {
                    what: "TILE3X1 feature-map storage on the virtual Ethos-U85",
                });
            }
        }
        if s.p(Cmd0::SET_IFM_UPSCALE) & 3 != 0 {
            return Err(SimErrorKind::Unsupported {
                what: "IFM upscaling on the virtual Ethos-U85",
            });
        }
        Ok(())
    }

    /// The storage field of a feature map's precision register.
    fn storage(&self, which: FmKind) -> Option<ActivationStorage> {
        let p = self.state.p(match which {
            FmKind::Ifm => Cmd0::SET_IFM_PRECISION,
            FmKind::Ifm2 => Cmd0::SET_IFM2_PRECISION,
            FmKind::Ofm => Cmd0::SET_OFM_PRECISION,
        });
        ActivationStorage::from_bits((p >> 14) as u8)
    }

    /// Reads `h x w x d` elements of an input: from memory (tiled storage) or from the
    /// chaining buffer (chained storage: the previous operation's OFM, which must have exactly
    /// this extent). Returns the values and the bytes read from memory.
    fn load(
        &self,
        which: FmKind,
        fm: &FeatureMap,
        mem: &Regions,
        (h, w, d): (u64, u64, u64),
        access: Access,
    ) -> Result<(Vec<i32>, u64), SimErrorKind> {
        match self.storage(which) {
            Some(ActivationStorage::Chained) => match &self.chain {
                Some((dims, vals)) if *dims == (h, w, d) => Ok((vals.clone(), 0)),
                _ => Err(SimErrorKind::Unsupported {
                    what: "a chained input whose extent differs from the chained output's",
                }),
            },
            Some(ActivationStorage::None) => Err(SimErrorKind::Unsupported {
                what: "reading an input with ACTIVATION_STORAGE_NONE",
            }),
            _ => fm.gather(mem, h, w, d, access),
        }
    }

    /// Writes the OFM: to memory, or into the chaining buffer. Returns the bytes written.
    fn store(
        &mut self,
        fm: &FeatureMap,
        mem: &mut Regions,
        (h, w, d): (u64, u64, u64),
        values: Vec<i32>,
    ) -> Result<u64, SimErrorKind> {
        match self.storage(FmKind::Ofm) {
            Some(ActivationStorage::Chained) => {
                self.chain = Some(((h, w, d), values));
                Ok(0)
            }
            Some(ActivationStorage::None) => Err(SimErrorKind::Unsupported {
                what: "an OFM with ACTIVATION_STORAGE_NONE",
            }),
            _ => {
                let p = self.state.p(Cmd0::SET_OFM_PRECISION);
                let reverse = ActivationReverse::from_bits(((p >> 9) & 3) as u8);
                let transpose = ActivationTranspose::from_bits(((p >> 11) & 7) as u8);
                if reverse == Some(ActivationReverse::None)
                    && transpose == Some(ActivationTranspose::Hwc)
                {
                    return fm.scatter(mem, h, w, d, &values, Access::OfmWrite);
                }
                let (dims, stored) = reorder((h, w, d), &values, transpose, reverse)?;
                fm.scatter(mem, dims.0, dims.1, dims.2, &stored, Access::OfmWrite)
            }
        }
    }

    fn acc_format(&self) -> AccFormat {
        if self.state.p(Cmd0::SET_ACC_FORMAT) & 3 == 1 {
            AccFormat::I48
        } else {
            AccFormat::I32
        }
    }

    /// The OFM feature map and output stage.
    fn ofm(&self, common: &RegisterState) -> Result<Ofm, SimErrorKind> {
        let s = &self.state;
        let fm = FeatureMap::new(&common.ofm, FmKind::Ofm)?;
        let (sp, _) = s.p1(Cmd1::SET_OFM_SCALE);
        let round =
            RoundModeOfm::from_bits((sp >> 13) as u8).ok_or(SimErrorKind::InvalidRegister {
                register: "OFM_SCALE",
                value: sp as u64,
                reason: "undefined round_mode",
            })?;
        let act = s.p(Cmd0::SET_ACTIVATION);
        let bad_act = |reason| SimErrorKind::InvalidRegister {
            register: "ACTIVATION",
            value: act as u64,
            reason,
        };
        let function = ActivationFunction::from_bits((act & 0x1f) as u8)
            .ok_or_else(|| bad_act("undefined activation_function"))?;
        let clip = ActivationClipRange::from_bits(((act >> 12) & 1) as u8)
            .ok_or_else(|| bad_act("undefined activation_clip_range"))?;
        let table = ((act >> 5) & 7) as usize;
        let (type_lo, type_hi) = fm.type_range();
        // Vela writes the minimum as a signed 16-bit value and the maximum up to 65535
        // (`GenerateActivation`: Int16 min .. UInt16 max): the maximum is unsigned for
        // unsigned OFMs.
        let (lo, hi) = match clip {
            ActivationClipRange::B16 => {
                let min = s.p(Cmd0::SET_ACTIVATION_MIN);
                let max = s.p(Cmd0::SET_ACTIVATION_MAX);
                let hi = if fm.signed {
                    max as i16 as i64
                } else {
                    max as i64
                };
                (min as i16 as i64, hi)
            }
            ActivationClipRange::None => (type_lo, type_hi),
        };
        let lut_bytes = |len: usize| {
            let start = table * len;
            self.lut
                .get(start..start + len)
                .ok_or(SimErrorKind::ShramOutOfBounds {
                    addr: start as u64,
                    len: len as u64,
                    size: self.lut.len() as u64,
                })
        };
        let lut = match function {
            ActivationFunction::LutNone => None,
            ActivationFunction::LutS8S8 | ActivationFunction::LutU8U8 if fm.elem == 1 => {
                let mut t = [0i32; 256];
                for (d, &b) in t.iter_mut().zip(lut_bytes(256)?) {
                    *d = if fm.signed { b as i8 as i32 } else { b as i32 };
                }
                let offset = if function == ActivationFunction::LutS8S8 {
                    128
                } else {
                    0
                };
                Some(Lut::Bytes { table: t, offset })
            }
            // Inferred, pinned by op_logistic_int16 and op_lstm on every U85 configuration: the
            // int16 SIGMOID/TANH functions give exactly the U55/U65 built-in functions' results
            // (TFLite's int16 LOGISTIC/TANH) on the OFM-scaled value; the 2048-byte table Vela
            // DMAs into the LUT memory for them is not read by this model.
            ActivationFunction::LutSigmoid if fm.elem == 2 => Some(Lut::Sigmoid),
            ActivationFunction::LutTanh if fm.elem == 2 => Some(Lut::Tanh),
            ActivationFunction::LutS8S32 if fm.elem == 4 => {
                let mut t = [0i32; 256];
                for (d, w) in t.iter_mut().zip(lut_bytes(1024)?.chunks_exact(4)) {
                    *d = i32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                }
                Some(Lut::Words {
                    table: t,
                    offset: 128,
                })
            }
            _ => {
                return Err(SimErrorKind::Unsupported {
                    what: "this activation function on the virtual Ethos-U85",
                });
            }
        };
        let (lo, hi) = match lut {
            // The LUT input is the clipped 8-bit value.
            Some(Lut::Words { .. }) => (lo.max(-128), hi.min(127)),
            _ => (lo, hi),
        };
        let out = OutputStage {
            round: RoundMode::Dbl,
            scale_mode: OfmScaleMode::PerChannel,
            global: (0, 0),
            zero_point: fm.zero_point,
            lo,
            hi: hi.max(lo),
            type_lo,
            type_hi,
            lut,
        };
        Ok(Ofm {
            fm,
            out,
            round,
            scale: Scale::of(s.p1(Cmd1::SET_OFM_SCALE)),
            // `scale_mode` (bit 24 of the command): 1 is OFM_SCALE_MODE_GLOBAL.
            per_channel: s.p(Cmd0::SET_OFM_PRECISION) & (1 << 8) == 0,
        })
    }

    /// `NPU_OP_ELEMENTWISE`.
    fn elementwise(
        &mut self,
        mode: ElementwiseMode,
        mem: &mut Regions,
        st: &mut OpStats,
    ) -> Result<(), SimErrorKind> {
        use ElementwiseMode as M;
        let unary = matches!(mode, M::Abs | M::Clz | M::Not | M::Lrelu);
        let supported = matches!(
            mode,
            M::Add
                | M::Sub
                | M::Mul
                | M::Min
                | M::Max
                | M::Abs
                | M::Lrelu
                | M::Clz
                | M::Shl
                | M::Shr
        );
        if !supported {
            return Err(SimErrorKind::Unsupported {
                what: "this elementwise mode on the virtual Ethos-U85",
            });
        }
        let kinds: &[FmKind] = if unary {
            &[FmKind::Ifm, FmKind::Ofm]
        } else {
            &[FmKind::Ifm, FmKind::Ifm2, FmKind::Ofm]
        };
        self.check_common(kinds)?;
        let s = &self.state;
        let c = s.common();
        let (h, w, d) = ofm_dims(&c);
        let n = h * w * d;
        within_limits(&[("OFM elements of one operation", n, self.limits.max_elements)])?;
        let ofm = self.ofm(&c)?;
        let broadcast = |op: Cmd0, register| {
            let v = s.p(op);
            BroadcastMode::from_bits((v & 0xf) as u8).ok_or(SimErrorKind::InvalidRegister {
                register,
                value: v as u64,
                reason: "undefined broadcast_mode",
            })
        };
        // An input: its dense values with its own extent (broadcast axes have extent 1), or a
        // scalar.
        struct Input {
            vals: Vec<i32>,
            dims: (u64, u64, u64),
            scalar: Option<i64>,
            zp: i64,
        }
        let read = |which: FmKind,
                    bc: BroadcastMode,
                    mem: &Regions,
                    st: &mut OpStats|
         -> Result<Input, SimErrorKind> {
            let regs = if which == FmKind::Ifm {
                &c.ifm
            } else {
                &c.ifm2
            };
            let fm = FeatureMap::new(regs, which)?;
            if bc == BroadcastMode::Scalar {
                return Ok(Input {
                    vals: Vec::new(),
                    dims: (1, 1, 1),
                    scalar: Some(s.p1(Cmd1::SET_OP_SCALAR).1 as i32 as i64),
                    zp: fm.zero_point,
                });
            }
            let bits = bc as u8;
            let dims = (
                if bits & 1 != 0 { 1 } else { h },
                if bits & 2 != 0 { 1 } else { w },
                if bits & 4 != 0 { 1 } else { d },
            );
            let access = if which == FmKind::Ifm {
                Access::IfmRead
            } else {
                Access::Ifm2Read
            };
            let (vals, bytes) = self.load(which, &fm, mem, dims, access)?;
            st.read(fm.region, bytes);
            Ok(Input {
                vals,
                dims,
                scalar: None,
                zp: fm.zero_point,
            })
        };
        let a_in = read(
            FmKind::Ifm,
            broadcast(Cmd0::SET_IFM_BROADCAST, "IFM_BROADCAST")?,
            mem,
            st,
        )?;
        let b_in = if unary {
            None
        } else {
            Some(read(
                FmKind::Ifm2,
                broadcast(Cmd0::SET_IFM2_BROADCAST, "IFM2_BROADCAST")?,
                mem,
                st,
            )?)
        };
        let in_scale = |op: Cmd1, register| -> Result<(Scale, RoundMode), SimErrorKind> {
            let reg = s.p1(op);
            let round = match RoundModeIfm::from_bits(((reg.0 >> 13) & 1) as u8) {
                Some(RoundModeIfm::Natural) => RoundMode::Natural,
                Some(RoundModeIfm::DoubleSymmetric) => RoundMode::Dbl,
                None => {
                    return Err(SimErrorKind::InvalidRegister {
                        register,
                        value: reg.0 as u64,
                        reason: "undefined round_mode",
                    });
                }
            };
            Ok((Scale::of(reg), round))
        };
        let (sa, ra) = in_scale(Cmd1::SET_IFM_SCALE, "IFM_SCALE")?;
        let (sb, rb) = in_scale(Cmd1::SET_IFM2_SCALE, "IFM2_SCALE")?;
        let scale_in =
            |v: i64, sc: Scale, r: RoundMode| numerics::scale(v, sc.scale, sc.shift, r, sc.dbl);
        let wide = FeatureMap::new(&c.ifm, FmKind::Ifm)?.elem == 4;
        let at = |inp: &Input, y: u64, x: u64, z: u64| -> i64 {
            if let Some(v) = inp.scalar {
                return v - inp.zp;
            }
            let (ih, iw, id) = inp.dims;
            let (y, x, z) = (y.min(ih - 1), x.min(iw - 1), z.min(id - 1));
            let i = ((y * iw + x) * id + z) as usize;
            inp.vals.get(i).copied().unwrap_or(0) as i64 - inp.zp
        };
        let mut result = Vec::with_capacity(n as usize);
        for y in 0..h {
            for x in 0..w {
                for z in 0..d {
                    let a = at(&a_in, y, x, z);
                    let b = b_in.as_ref().map_or(0, |b| at(b, y, x, z));
                    let r = match mode {
                        M::Add | M::Sub | M::Min | M::Max => {
                            // Both inputs go through their input scaling (Vela emits unit
                            // scales where TFLite has none); ADD/SUB use `dbl_rnd` to emulate
                            // TFLite's left shift before its double rounding.
                            let (a, b) = (scale_in(a, sa, ra), scale_in(b, sb, rb));
                            let r = match mode {
                                M::Add => a.saturating_add(b),
                                M::Sub => a.saturating_sub(b),
                                M::Min => a.min(b),
                                _ => a.max(b),
                            };
                            ofm.global(r)?
                        }
                        // Vela asserts unit input scales for MUL (`GenerateScalingForElementwise`).
                        M::Mul if wide => {
                            // As on U55/U65: a 32x32-bit product only takes the shift.
                            if ofm.per_channel {
                                a.saturating_mul(b)
                            } else {
                                scale_ofm(
                                    a.saturating_mul(b),
                                    1,
                                    ofm.scale.shift,
                                    ofm.round,
                                    ofm.scale.dbl,
                                )?
                            }
                        }
                        M::Mul => ofm.global(a.saturating_mul(b))?,
                        M::Abs => ofm.global(scale_in(a, sa, ra).saturating_abs())?,
                        // Vela: IFM_SCALE rescales the non-negative side, IFM2_SCALE holds
                        // alpha times that rescale; the OFM scale is unit.
                        M::Lrelu => {
                            let r = if a < 0 {
                                scale_in(a, sb, rb)
                            } else {
                                scale_in(a, sa, ra)
                            };
                            ofm.global(r)?
                        }
                        M::Clz => (a as i32 as u32).leading_zeros() as i64,
                        M::Shl => {
                            let sh = b.clamp(0, 63) as u32;
                            (a as i32 as i64).checked_shl(sh).unwrap_or(0)
                        }
                        _ => {
                            let sh = b.clamp(0, 63) as u32;
                            scale_ofm(a, 1, sh, ofm.round, 0)?
                        }
                    };
                    result.push(ofm.out.finish(r));
                }
            }
        }
        let written = self.store(&ofm.fm, mem, (h, w, d), result)?;
        st.write(ofm.fm.region, written);
        st.ofm_elements = n;
        Ok(())
    }

    /// `NPU_OP_POOL`.
    fn pool(
        &mut self,
        mode: PoolingMode,
        mem: &mut Regions,
        st: &mut OpStats,
    ) -> Result<(), SimErrorKind> {
        use PoolingMode as P;
        if matches!(mode, P::ArgmaxX | P::ArgmaxY) {
            return self.argmax(mode == P::ArgmaxY, mem, st);
        }
        if mode == P::None {
            return self.null_pool(mem, st);
        }
        if !matches!(mode, P::Max | P::Min | P::Average | P::Sum | P::ReduceSum) {
            return Err(SimErrorKind::Unsupported {
                what: "this pooling mode on the virtual Ethos-U85",
            });
        }
        self.check_common(&[FmKind::Ifm, FmKind::Ofm])?;
        let c = self.state.common();
        let (h, w, d) = ofm_dims(&c);
        let g = Geometry::new(&c, h, w)?;
        let ifm = FeatureMap::new(&c.ifm, FmKind::Ifm)?;
        let ofm = self.ofm(&c)?;
        let acc_format = self.acc_format();
        let ifm_d = if mode == P::ReduceSum {
            c.ifm_depth_m1 as u64 + 1
        } else {
            d
        };
        let sum_channels = mode == P::ReduceSum && d == 1;
        let ofm_elems = h.saturating_mul(w).saturating_mul(d);
        let work = ofm_elems
            .saturating_mul(g.kh.saturating_mul(g.kw))
            .saturating_mul(if sum_channels { ifm_d } else { 1 });
        let ifm_elems = g.ifm_h.saturating_mul(g.ifm_w).saturating_mul(ifm_d);
        within_limits(&[
            (
                "OFM elements of one operation",
                ofm_elems,
                self.limits.max_elements,
            ),
            (
                "IFM elements of one operation",
                ifm_elems,
                self.limits.max_elements,
            ),
            (
                "pooling work of one operation",
                work,
                self.limits.max_elements,
            ),
        ])?;
        let (vals, read) = self.load(
            FmKind::Ifm,
            &ifm,
            mem,
            (g.ifm_h, g.ifm_w, ifm_d),
            Access::IfmRead,
        )?;
        st.read(ifm.region, read);
        let zp = ifm.zero_point;
        let at = |y: u64, x: u64, c: u64| -> i64 {
            vals.get(((y * g.ifm_w + x) * ifm_d + c) as usize)
                .copied()
                .unwrap_or(0) as i64
                - zp
        };
        let mut result = Vec::with_capacity(ofm_elems as usize);
        for oy in 0..h {
            for ox in 0..w {
                for c in 0..d {
                    let Window {
                        acc,
                        max,
                        min,
                        count,
                    } = window(&g, oy, ox, c, ifm_d, sum_channels, &at);
                    let acc = saturate(acc, acc_format);
                    let r = match mode {
                        P::Max => ofm.global(if count == 0 { 0 } else { max })?,
                        P::Min => ofm.global(if count == 0 { 0 } else { min })?,
                        // Inferred: the hardware divides by the number of valid (non-padding)
                        // positions, rounding half away from zero as TFLite's AVERAGE_POOL_2D,
                        // then applies the OFM scale (Vela writes a unit scale there).
                        P::Average => ofm.global(rounded_average(acc, count))?,
                        _ => ofm.global(acc)?,
                    };
                    result.push(ofm.out.finish(r));
                }
            }
        }
        let written = self.store(&ofm.fm, mem, (h, w, d), result)?;
        st.write(ofm.fm.region, written);
        st.ofm_elements = ofm_elems;
        Ok(())
    }

    /// `NPU_OP_POOL` with `POOLING_MODE_ARGMAX_X`/`_Y`: for each OFM element, the position of
    /// the largest value of its kernel window along X (or Y), counted from the window's start.
    ///
    /// Vela (GEN `GetPoolingMode`, `GenerateOFMScalingForPooling`) gives the window the whole
    /// reduced axis (kernel 1 along the other), and an OFM scale of 1 with shift 16 "to
    /// separate values and indices": the accumulator carries the index above bit 16.
    /// *Inferred* (pinned by op_arg_max): the accumulator is `index << 16` plus the value's low
    /// 16 bits, and ties give the first position (TFLite's ARG_MAX). As the low half is not
    /// known for certain, only the truncating shift-by-16 scales Vela writes are modelled.
    fn argmax(
        &mut self,
        along_y: bool,
        mem: &mut Regions,
        st: &mut OpStats,
    ) -> Result<(), SimErrorKind> {
        self.check_common(&[FmKind::Ifm, FmKind::Ofm])?;
        let c = self.state.common();
        let (h, w, d) = ofm_dims(&c);
        let g = Geometry::new(&c, h, w)?;
        let ifm = FeatureMap::new(&c.ifm, FmKind::Ifm)?;
        let ofm = self.ofm(&c)?;
        if c.pad.iter().any(|&p| p != 0) {
            return Err(SimErrorKind::Unsupported {
                what: "ARGMAX pooling with IFM padding (Vela emits none)",
            });
        }
        if (along_y && g.kw != 1) || (!along_y && g.kh != 1) {
            return Err(SimErrorKind::Unsupported {
                what: "ARGMAX pooling with a kernel wider than 1 across the reduced axis",
            });
        }
        if ifm.elem > 2 {
            return Err(SimErrorKind::Unsupported {
                what: "ARGMAX pooling of a 32-bit IFM (the value shares a 32-bit accumulator)",
            });
        }
        let truncating = matches!(
            ofm.round,
            RoundModeOfm::TruncateToLower | RoundModeOfm::TruncateToZero
        );
        if ofm.per_channel || ofm.scale.scale != 1 || ofm.scale.shift != 16 || !truncating {
            return Err(SimErrorKind::Unsupported {
                what: "ARGMAX pooling with an OFM scale other than 1, shift 16, truncating",
            });
        }
        let ofm_elems = h.saturating_mul(w).saturating_mul(d);
        let work = ofm_elems.saturating_mul(g.kh.saturating_mul(g.kw));
        let ifm_elems = g.ifm_h.saturating_mul(g.ifm_w).saturating_mul(d);
        within_limits(&[
            (
                "OFM elements of one operation",
                ofm_elems,
                self.limits.max_elements,
            ),
            (
                "IFM elements of one operation",
                ifm_elems,
                self.limits.max_elements,
            ),
            (
                "pooling work of one operation",
                work,
                self.limits.max_elements,
            ),
        ])?;
        let (vals, read) = self.load(
            FmKind::Ifm,
            &ifm,
            mem,
            (g.ifm_h, g.ifm_w, d),
            Access::IfmRead,
        )?;
        st.read(ifm.region, read);
        let mut result = Vec::with_capacity(ofm_elems as usize);
        for oy in 0..h {
            for ox in 0..w {
                for ch in 0..d {
                    // (index, value) of the first largest value; the zero point does not change
                    // the order.
                    let mut best: Option<(u64, i32)> = None;
                    for ky in 0..g.kh {
                        let Some(iy) = g.source(g.row(oy, ky), g.up_h) else {
                            continue;
                        };
                        for kx in 0..g.kw {
                            let Some(ix) = g.source(g.col(ox, kx), g.up_w) else {
                                continue;
                            };
                            let i = ((iy * g.ifm_w + ix) * d + ch) as usize;
                            let v = vals.get(i).copied().unwrap_or(0);
                            let k = if along_y { ky } else { kx };
                            if best.is_none_or(|(_, b)| v > b) {
                                best = Some((k, v));
                            }
                        }
                    }
                    let (index, value) = best.unwrap_or((0, 0));
                    let acc = ((index as i64) << 16) | (value as i64 & 0xffff);
                    result.push(ofm.out.finish(ofm.global(acc)?));
                }
            }
        }
        let written = self.store(&ofm.fm, mem, (h, w, d), result)?;
        st.write(ofm.fm.region, written);
        st.ofm_elements = ofm_elems;
        Ok(())
    }

    /// `NPU_OP_POOL` with `POOLING_MODE_NONE`: no pooling; the accumulators are loaded from
    /// IFM2 (`ACC_INPUT_IFM2`) and, with `ACC_OUTPUT_ENABLE`, written through the OFM scale and
    /// output stage. GEN `GeneratePoolingOp`/`GenerateAccFormat` (Vela's "NullPool", used for
    /// copies, transposes, reverses and rescales of 32- and 64-bit tensors: the real input in
    /// the IFM2 registers, the IFM ones set to int8, a 1x1 kernel, I32 accumulators for 32-bit
    /// inputs, I48 for 64-bit ones). *Inferred, unpinned* (no fixture emits it): each OFM
    /// element is `OFM_SCALE` applied to the IFM2 element at the same position. Refused:
    /// accumulators kept for a later operation (`ACC_OUTPUT_DISABLE`, Vela's bias preload),
    /// other accumulator sources, kernels other than 1x1 stride 1 without padding, a non-zero
    /// IFM2 zero point (whether the load subtracts it is not known), 64-bit IFM2.
    fn null_pool(&mut self, mem: &mut Regions, st: &mut OpStats) -> Result<(), SimErrorKind> {
        if self.acc_io() != (Some(AccInput::Ifm2), Some(AccOutput::Enable)) {
            return Err(SimErrorKind::Unsupported {
                what: "POOLING_MODE_NONE other than accumulators loaded from IFM2 and output",
            });
        }
        self.check_layout(&[FmKind::Ifm2, FmKind::Ofm])?;
        let c = self.state.common();
        let (h, w, d) = ofm_dims(&c);
        let ks = KernelStride(c.kernel_stride);
        let unit_kernel = c.kernel_height_m1 == 0
            && c.kernel_width_m1 == 0
            && ks.stride_x() == 1
            && ks.stride_y() == 1
            && c.pad.iter().all(|&p| p == 0);
        if !unit_kernel {
            return Err(SimErrorKind::Unsupported {
                what: "POOLING_MODE_NONE with a kernel other than 1x1, stride 1, no padding",
            });
        }
        let ifm2 = FeatureMap::new(&c.ifm2, FmKind::Ifm2)?;
        if ifm2.zero_point != 0 {
            return Err(SimErrorKind::Unsupported {
                what: "POOLING_MODE_NONE with a non-zero IFM2 zero point",
            });
        }
        let ofm = self.ofm(&c)?;
        let acc_format = self.acc_format();
        let n = h.saturating_mul(w).saturating_mul(d);
        within_limits(&[("OFM elements of one operation", n, self.limits.max_elements)])?;
        let (vals, read) = self.load(FmKind::Ifm2, &ifm2, mem, (h, w, d), Access::Ifm2Read)?;
        st.read(ifm2.region, read);
        let result = vals
            .iter()
            .map(|&v| Ok(ofm.out.finish(ofm.global(saturate(v as i64, acc_format))?)))
            .collect::<Result<Vec<_>, SimErrorKind>>()?;
        let written = self.store(&ofm.fm, mem, (h, w, d), result)?;
        st.write(ofm.fm.region, written);
        st.ofm_elements = n;
        Ok(())
    }

    /// `NPU_OP_CONV` with `weights_ifm2`: a matrix multiplication whose weights are a feature
    /// map. GEN `GenerateConvolutionOp` ("dynamic weights") and Vela's `DecomposeMatmul`: the
    /// IFM holds the left matrix's rows along W and the contracted axis along C, IFM2 the right
    /// matrix's columns along W and the contracted axis along C, the OFM the rows along W and
    /// the columns along C; both inputs have the same precision, the OFM scale is global and
    /// there is no bias. So `OFM[0][m][n] = sum_k (IFM[0][m][k] - zp) * (IFM2[0][n][k] - zp2)`,
    /// accumulated as `ACC_FORMAT` says, then scaled by `OFM_SCALE`. Vela only emits 1x1
    /// kernels, stride 1, no padding and one OFM row (leading axes become separate
    /// operations); anything else is refused, as the IFM2 layout it would need is not known.
    fn matmul(&mut self, mem: &mut Regions, st: &mut OpStats) -> Result<(), SimErrorKind> {
        self.check_common(&[FmKind::Ifm, FmKind::Ifm2, FmKind::Ofm])?;
        let c = self.state.common();
        let (h, w, d) = ofm_dims(&c);
        let ks = KernelStride(c.kernel_stride);
        let unit_kernel = c.kernel_height_m1 == 0
            && c.kernel_width_m1 == 0
            && ks.stride_x() == 1
            && ks.stride_y() == 1
            && c.pad.iter().all(|&p| p == 0);
        if !unit_kernel || h != 1 {
            return Err(SimErrorKind::Unsupported {
                what: "NPU_OP_CONV with weights from IFM2 other than Vela's 1x1, one-row matrix multiplication",
            });
        }
        let ifm = FeatureMap::new(&c.ifm, FmKind::Ifm)?;
        let ifm2 = FeatureMap::new(&c.ifm2, FmKind::Ifm2)?;
        if ifm.elem != ifm2.elem || ifm.elem > 2 {
            return Err(SimErrorKind::Unsupported {
                what: "a matrix multiplication whose inputs are not both 8-bit or both 16-bit (Vela's only forms)",
            });
        }
        let ofm = self.ofm(&c)?;
        if ofm.per_channel {
            return Err(SimErrorKind::Unsupported {
                what: "a matrix multiplication with per-channel OFM scaling (Vela writes a global scale)",
            });
        }
        let acc_format = self.acc_format();
        let k = c.ifm_depth_m1 as u64 + 1;
        let ofm_elems = w.saturating_mul(d);
        let macs = ofm_elems.saturating_mul(k);
        within_limits(&[
            (
                "OFM elements of one operation",
                ofm_elems,
                self.limits.max_elements,
            ),
            (
                "IFM elements of one operation",
                w.saturating_mul(k),
                self.limits.max_elements,
            ),
            (
                "IFM2 elements of one operation",
                d.saturating_mul(k),
                self.limits.max_elements,
            ),
            ("MACs of one operation", macs, self.limits.max_op_macs),
        ])?;
        let (a, read) = self.load(FmKind::Ifm, &ifm, mem, (1, w, k), Access::IfmRead)?;
        st.read(ifm.region, read);
        let (b, read) = self.load(FmKind::Ifm2, &ifm2, mem, (1, d, k), Access::Ifm2Read)?;
        st.read(ifm2.region, read);
        let (za, zb) = (ifm.zero_point, ifm2.zero_point);
        let mut result = Vec::with_capacity(ofm_elems as usize);
        for row in a.chunks_exact(k as usize) {
            for col in b.chunks_exact(k as usize) {
                let acc = row.iter().zip(col).fold(0i64, |acc, (&x, &y)| {
                    saturate(acc + (x as i64 - za) * (y as i64 - zb), acc_format)
                });
                result.push(ofm.out.finish(ofm.global(acc)?));
            }
        }
        let written = self.store(&ofm.fm, mem, (h, w, d), result)?;
        st.write(ofm.fm.region, written);
        st.ofm_elements = ofm_elems;
        st.macs = macs;
        Ok(())
    }

    /// `NPU_OP_RESIZE`: nearest or bilinear resampling of the IFM into the OFM (GEN
    /// `GenerateResizeOp`, TOSA RESIZE semantics). Per axis, OFM position `o` maps to
    /// `o * d + offset` in units of `1/n` IFM pixels, where `n = RESIZE_*_SCALE_N_M1 + 1` and
    /// the step `d/n` is the register's `one_step_int`, `one_step_mod` (`d = int * n + mod`);
    /// `blk_step` is the step over an OFM block (`(block - 1) * d`, checked). The IFM is
    /// `KERNEL_HEIGHT_M1 + 1` rows by `KERNEL_WIDTH_M1 + 1` columns (what Vela writes there),
    /// positions outside it clamp to its edge. NEAREST takes pixel `floor(p / n)`, or the next
    /// one when the remainder is at least `n / 2`; BILINEAR weights the two neighbours of each
    /// axis by `n - rem` and `rem`. Vela writes an OFM scale of 1 with shift `16 + s` (`2^-s`
    /// the TOSA output scale): *inferred* (pinned by op_resize_nearest, nearest with `s = 0`),
    /// the result enters the OFM scaling as TOSA's value times 2^16.
    fn resize(
        &mut self,
        mode: ResizeMode,
        mem: &mut Regions,
        st: &mut OpStats,
    ) -> Result<(), SimErrorKind> {
        if mode == ResizeMode::Replicate {
            return Err(SimErrorKind::Unsupported {
                what: "RESIZE_MODE_REPLICATE (Vela never emits it)",
            });
        }
        self.check_common(&[FmKind::Ifm, FmKind::Ofm])?;
        let s = &self.state;
        let c = s.common();
        let (h, w, d) = ofm_dims(&c);
        let ifm = FeatureMap::new(&c.ifm, FmKind::Ifm)?;
        if ifm.elem > 2 {
            // Vela resizes 8- and 16-bit maps; a 32-bit one would not fit the model's 2^16
            // scaled accumulator.
            return Err(SimErrorKind::Unsupported {
                what: "a resize of a 32-bit IFM",
            });
        }
        let ofm = self.ofm(&c)?;
        if ofm.per_channel {
            return Err(SimErrorKind::Unsupported {
                what: "a resize with per-channel OFM scaling (Vela writes a global scale)",
            });
        }
        if s.p(Cmd0::SET_IFM2_ZERO_POINT) != 0 {
            return Err(SimErrorKind::Unsupported {
                what: "a resize with a non-zero IFM2_ZERO_POINT (Vela writes 0; its role is not known)",
            });
        }
        let x = ResizeAxis::of(
            s,
            (Cmd0::SET_RESIZE_X_SCALE_N_M1, Cmd1::SET_RESIZE_X_STEP),
            Cmd0::SET_RESIZE_X_OFFSET,
            s.p(Cmd0::SET_OFM_BLK_WIDTH_M1) & 0x7f,
        )?;
        let y = ResizeAxis::of(
            s,
            (Cmd0::SET_RESIZE_Y_SCALE_N_M1, Cmd1::SET_RESIZE_Y_STEP),
            Cmd0::SET_RESIZE_Y_OFFSET,
            s.p(Cmd0::SET_OFM_BLK_HEIGHT_M1) & 0x7f,
        )?;
        let (ih, iw) = (c.kernel_height_m1 as u64 + 1, c.kernel_width_m1 as u64 + 1);
        let ofm_elems = h.saturating_mul(w).saturating_mul(d);
        let ifm_elems = ih.saturating_mul(iw).saturating_mul(d);
        within_limits(&[
            (
                "OFM elements of one operation",
                ofm_elems,
                self.limits.max_elements,
            ),
            (
                "IFM elements of one operation",
                ifm_elems,
                self.limits.max_elements,
            ),
        ])?;
        let (vals, read) = self.load(FmKind::Ifm, &ifm, mem, (ih, iw, d), Access::IfmRead)?;
        st.read(ifm.region, read);
        let zp = ifm.zero_point;
        let at = |iy: u64, ix: u64, ch: u64| -> i64 {
            vals.get(((iy * iw + ix) * d + ch) as usize)
                .copied()
                .unwrap_or(0) as i64
                - zp
        };
        let rows: Vec<[(u64, i64); 2]> = (0..h).map(|o| y.taps(o, ih, mode)).collect();
        let cols: Vec<[(u64, i64); 2]> = (0..w).map(|o| x.taps(o, iw, mode)).collect();
        let mut result = Vec::with_capacity(ofm_elems as usize);
        for ry in &rows {
            for cx in &cols {
                for ch in 0..d {
                    let mut acc = 0i64;
                    for &(iy, wy) in ry {
                        for &(ix, wx) in cx {
                            if wy != 0 && wx != 0 {
                                acc += at(iy, ix, ch) * wy * wx;
                            }
                        }
                    }
                    result.push(ofm.out.finish(ofm.global(acc << 16)?));
                }
            }
        }
        let written = self.store(&ofm.fm, mem, (h, w, d), result)?;
        st.write(ofm.fm.region, written);
        st.ofm_elements = ofm_elems;
        Ok(())
    }

    /// `NPU_OP_CONV` / `NPU_OP_DEPTHWISE`.
    fn conv(
        &mut self,
        depthwise: bool,
        mem: &mut Regions,
        st: &mut OpStats,
    ) -> Result<(), SimErrorKind> {
        self.check_common(&[FmKind::Ifm, FmKind::Ofm])?;
        let s = &self.state;
        let c = s.common();
        let (h, w, d) = ofm_dims(&c);
        let g = Geometry::new(&c, h, w)?;
        let ifm = FeatureMap::new(&c.ifm, FmKind::Ifm)?;
        let ofm = self.ofm(&c)?;
        let acc_format = self.acc_format();
        let ks = KernelStride(c.kernel_stride);
        let wf = s.p(Cmd0::SET_WEIGHT_FORMAT);
        if wf & (1 << 4) != 0 {
            return Err(SimErrorKind::Unsupported {
                what: "sparse weights on the virtual Ethos-U85",
            });
        }
        let format = match RegWeightFormat::from_bits((wf & 1) as u8) {
            Some(RegWeightFormat::Fwd) => WeightFormat::Fwd,
            _ => WeightFormat::Swd,
        };
        let traversal = if depthwise {
            Traversal::Depthwise
        } else if ks.weight_order() == WeightOrder::PartKernelFirst {
            Traversal::PartKernelFirst
        } else {
            Traversal::DepthFirst
        };
        let ifm_bits = match ActivationPrecision::from_bits(((c.ifm.precision >> 2) & 3) as u8) {
            Some(p) => p.bytes() as u32 * 8,
            None => 8,
        };
        let microblock = ((s.p(Cmd0::SET_ACC_FORMAT) >> 8) & 7) as u32;
        let macs = self.config.macs;
        let ublock =
            w85::ofm_ublock_depth(macs, microblock).ok_or(SimErrorKind::InvalidRegister {
                register: "ACC_FORMAT",
                value: s.p(Cmd0::SET_ACC_FORMAT) as u64,
                reason: "microblock not valid for this configuration",
            })?;
        let (dil_x, dil_y) = (ks.dilation_x(), ks.dilation_y());
        let kernel = |m1: u16, dil: u32| {
            undilated_kernel_size(m1 as u32, dil).ok_or(SimErrorKind::InvalidRegister {
                register: "KERNEL_*_M1",
                value: m1 as u64,
                reason: "dilated kernel size not a multiple of the dilation",
            })
        };
        let ifm_depth = c.ifm_depth_m1 as u32 + 1;
        let geom = U85Geometry {
            traversal,
            format,
            ofm_depth: d as u32,
            ofm_block_depth: (s.p(Cmd0::SET_OFM_BLK_DEPTH_M1) & 0x3ff) as u32 + 1,
            ofm_ublock_depth: ublock,
            ifm_depth,
            ifm_block_depth: w85::ifm_block_depth(traversal, ifm_bits, macs, ublock),
            kernel_height: kernel(c.kernel_height_m1, dil_y)?,
            kernel_width: kernel(c.kernel_width_m1, dil_x)?,
            stride_x: ks.stride_x(),
            stride_y: ks.stride_y(),
            dilation_x: dil_x,
            dilation_y: dil_y,
            ifm_bits,
            macs,
            cores: self.config.cores,
        };
        let (kh, kw) = (geom.kernel_height as u64, geom.kernel_width as u64);
        let ifm_d = if depthwise { d } else { ifm_depth as u64 };
        let ofm_elems = h.saturating_mul(w).saturating_mul(d);
        let macs_op = ofm_elems
            .saturating_mul(kh * kw)
            .saturating_mul(if depthwise { 1 } else { ifm_d });
        let ifm_elems = g.ifm_h.saturating_mul(g.ifm_w).saturating_mul(ifm_d);
        within_limits(&[
            (
                "OFM elements of one operation",
                ofm_elems,
                self.limits.max_elements,
            ),
            (
                "IFM elements of one operation",
                ifm_elems,
                self.limits.max_elements,
            ),
            ("MACs of one operation", macs_op, self.limits.max_op_macs),
        ])?;
        // Weight streams: one per core (SWD) or one (FWD), each in the weight region.
        geom.validate().map_err(SimErrorKind::Weights)?;
        let wregion = s.p(Cmd0::SET_WEIGHT_REGION) & 7;
        let wregs = [
            (Cmd1::SET_WEIGHT_BASE, Cmd1::SET_WEIGHT_LENGTH),
            (Cmd1::SET_WEIGHT1_BASE, Cmd1::SET_WEIGHT1_LENGTH),
            (Cmd1::SET_WEIGHT2_BASE, Cmd1::SET_WEIGHT2_LENGTH),
            (Cmd1::SET_WEIGHT3_BASE, Cmd1::SET_WEIGHT3_LENGTH),
        ];
        let mut streams: Vec<&[u8]> = Vec::new();
        for &(b, l) in wregs.iter().take(geom.streams() as usize) {
            let len = s.p1(l).1 as u64;
            let bytes = mem.read(wregion as u8, s.addr(b), len, Access::WeightRead)?;
            st.read(wregion as u8, len);
            streams.push(bytes);
        }
        let ohwi = geom.ohwi_len().map_err(SimErrorKind::Weights)?;
        // The weight volume is allocated: bound it as feature maps are.
        within_limits(&[(
            "weights of one operation",
            ohwi as u64,
            self.limits.max_elements,
        )])?;
        let mut weights = vec![0i16; ohwi];
        decode_weights_u85(&streams, &geom, &mut weights).map_err(SimErrorKind::Weights)?;
        let sregion = (s.p(Cmd0::SET_SCALE_REGION) & 7) as u8;
        let slen = (s.p1(Cmd1::SET_SCALE_LENGTH).1 & 0xf_ffff) as u64;
        let sbytes = mem.read(
            sregion,
            s.addr(Cmd1::SET_SCALE_BASE),
            slen,
            Access::ScaleRead,
        )?;
        st.read(sregion, slen);
        let wacc = match acc_format {
            AccFormat::I32 => w85::AccFormat::I32,
            AccFormat::I48 => w85::AccFormat::I48,
        };
        let mut scales = vec![ScaleEntry::default(); d as usize];
        decode_scales_u85(sbytes, wacc, &mut scales).map_err(SimErrorKind::Weights)?;

        let (vals, read) = self.load(
            FmKind::Ifm,
            &ifm,
            mem,
            (g.ifm_h, g.ifm_w, ifm_d),
            Access::IfmRead,
        )?;
        st.read(ifm.region, read);
        let zp = ifm.zero_point;
        let vals: Vec<i64> = vals.iter().map(|&v| v as i64 - zp).collect();
        let mut result = Vec::with_capacity(ofm_elems as usize);
        let mut accs = vec![0i64; d as usize];
        for oy in 0..h {
            for ox in 0..w {
                accs.iter_mut().for_each(|a| *a = 0);
                for ky in 0..kh {
                    let Some(iy) = g.source(g.row(oy, ky), g.up_h) else {
                        continue;
                    };
                    for kx in 0..kw {
                        let Some(ix) = g.source(g.col(ox, kx), g.up_w) else {
                            continue;
                        };
                        let base = ((iy * g.ifm_w + ix) * ifm_d) as usize;
                        let px = vals.get(base..base + ifm_d as usize).unwrap_or(&[]);
                        if depthwise {
                            for (oc, (a, &v)) in accs.iter_mut().zip(px).enumerate() {
                                let wi = (oc as u64 * kh + ky) * kw + kx;
                                let wv = weights.get(wi as usize).copied().unwrap_or(0);
                                *a += v * wv as i64;
                            }
                        } else {
                            for (oc, a) in accs.iter_mut().enumerate() {
                                let wi = (((oc as u64 * kh + ky) * kw + kx) * ifm_d) as usize;
                                let ws = weights.get(wi..wi + ifm_d as usize).unwrap_or(&[]);
                                let mut sum = 0i64;
                                for (&v, &wv) in px.iter().zip(ws) {
                                    sum += v * wv as i64;
                                }
                                *a += sum;
                            }
                        }
                    }
                }
                for (a, e) in accs.iter().zip(&scales) {
                    let v = saturate(saturate(*a, acc_format) + e.bias, acc_format);
                    let r = scale_ofm(v, e.multiplier, e.shift as u32, ofm.round, 0)?;
                    result.push(ofm.out.finish(r));
                }
            }
        }
        let written = self.store(&ofm.fm, mem, (h, w, d), result)?;
        st.write(ofm.fm.region, written);
        st.ofm_elements = ofm_elems;
        st.macs = macs_op;
        Ok(())
    }
}

/// One axis of `NPU_OP_RESIZE`: OFM position `o` samples the IFM at `(o * d + offset) / n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ResizeAxis {
    n: i64,
    d: i64,
    offset: i64,
}

impl ResizeAxis {
    /// Decodes `RESIZE_*_SCALE_N_M1` (11 bits), `RESIZE_*_STEP` (`one_step_int` parameter bits
    /// 0..=3, `blk_step_int` 4..=14, `one_step_mod` payload bits 0..=10, `blk_step_mod`
    /// 16..=26) and `RESIZE_*_OFFSET` (12-bit signed). `blk_m1` is the OFM block extent minus
    /// one along the axis, which the block step must agree with.
    fn of(
        s: &U85State,
        (scale, step): (Cmd0, Cmd1),
        offset: Cmd0,
        blk_m1: u16,
    ) -> Result<Self, SimErrorKind> {
        let n = (s.p(scale) & 0x7ff) as i64 + 1;
        let (sp, sv) = s.p1(step);
        let (one_int, blk_int) = ((sp & 0xf) as i64, ((sp >> 4) & 0x7ff) as i64);
        let (one_mod, blk_mod) = ((sv & 0x7ff) as i64, ((sv >> 16) & 0x7ff) as i64);
        if one_mod >= n || blk_mod >= n {
            return Err(SimErrorKind::InvalidRegister {
                register: step.name(),
                value: ((sp as u64) << 32) | sv as u64,
                reason: "step remainder not below the scale numerator",
            });
        }
        let d = one_int * n + one_mod;
        // The hardware advances block by block with the block step and pixel by pixel with
        // the one-pixel step; both describe one scale only if they agree.
        if blk_m1 as i64 * d != blk_int * n + blk_mod {
            return Err(SimErrorKind::Unsupported {
                what: "a resize whose block step disagrees with its one-pixel step and OFM block size",
            });
        }
        let raw = s.p(offset) & 0xfff;
        let offset = ((raw as i64) << 52) >> 52;
        Ok(ResizeAxis { n, d, offset })
    }

    /// The (IFM index, weight) pairs OFM position `o` reads on an IFM axis of `extent`; the
    /// weights are in units of `1/n` (nearest: one tap of weight 1 and one of weight 0).
    fn taps(self, o: u64, extent: u64, mode: ResizeMode) -> [(u64, i64); 2] {
        let p = o as i64 * self.d + self.offset;
        let (i, rem) = (p.div_euclid(self.n), p.rem_euclid(self.n));
        let clamp = |i: i64| i.clamp(0, extent as i64 - 1) as u64;
        match mode {
            ResizeMode::Nearest => {
                let i = if 2 * rem >= self.n { i + 1 } else { i };
                [(clamp(i), 1), (0, 0)]
            }
            _ => [(clamp(i), self.n - rem), (clamp(i + 1), rem)],
        }
    }
}

/// Reorders a dense `[h][w][d]` OFM as `OFM_PRECISION` asks before it is stored: transposed
/// (the OFM size registers give the computed shape, the OFM tile and stride registers the
/// stored one; `WHC` stores computed `(y, x, c)` at `(x, y, c)`) or reversed along one axis of
/// the operation's OFM. Returns the stored extent and values. (Vela's
/// `GenerateOFMPrecision` never combines the two.)
fn reorder(
    (h, w, d): (u64, u64, u64),
    values: &[i32],
    transpose: Option<ActivationTranspose>,
    reverse: Option<ActivationReverse>,
) -> Result<(Dims, Vec<i32>), SimErrorKind> {
    use ActivationTranspose as T;
    let (Some(transpose), Some(reverse)) = (transpose, reverse) else {
        return Err(SimErrorKind::Unsupported {
            what: "undefined OFM transpose/reverse",
        });
    };
    // Stored axis k takes computed axis perm[k] (0 = H, 1 = W, 2 = C).
    let perm: [usize; 3] = match transpose {
        T::Hwc => [0, 1, 2],
        T::Whc => [1, 0, 2],
        T::Hcw => [0, 2, 1],
        T::Wch => [1, 2, 0],
        T::Chw => [2, 0, 1],
        T::Cwh => [2, 1, 0],
    };
    let ext = [h, w, d];
    let sd = [ext[perm[0]], ext[perm[1]], ext[perm[2]]];
    let mut out = vec![0i32; values.len()];
    let mut i = 0usize;
    for y in 0..h {
        for x in 0..w {
            for c in 0..d {
                let mut at = [y, x, c];
                match reverse {
                    ActivationReverse::None => {}
                    ActivationReverse::H => at[0] = h - 1 - y,
                    ActivationReverse::W => at[1] = w - 1 - x,
                    ActivationReverse::C => at[2] = d - 1 - c,
                }
                let s = [at[perm[0]], at[perm[1]], at[perm[2]]];
                let j = ((s[0] * sd[1] + s[1]) * sd[2] + s[2]) as usize;
                if let (Some(o), Some(&v)) = (out.get_mut(j), values.get(i)) {
                    *o = v;
                }
                i += 1;
            }
        }
    }
    Ok(((sd[0], sd[1], sd[2]), out))
}

/// The U85 operations the simulator dispatches.
#[derive(Clone, Copy, Debug)]
enum Op {
    Conv,
    Depthwise,
    Pool(PoolingMode),
    Elementwise(ElementwiseMode),
    Dma,
    /// `NPU_OP_CONV` with `weights_ifm2`.
    MatMul,
    Resize(ResizeMode),
}

impl Op {
    /// The counter kind. U85 modes without a U55/U65 counterpart are counted under the nearest
    /// one (SUM and MIN pooling as AVERAGE and MAX, ARGMAX as MAX, matrix multiplication as a
    /// convolution, resize as AVERAGE pooling): the counters are for reporting only.
    fn stats_kind(self) -> OpKind {
        use common::{ElementwiseMode as E, PoolingMode as P};
        match self {
            Op::Conv | Op::MatMul => OpKind::Conv,
            Op::Resize(_) => OpKind::Pool(P::Average),
            Op::Depthwise => OpKind::Depthwise,
            Op::Dma => OpKind::Dma,
            Op::Pool(m) => OpKind::Pool(match m {
                PoolingMode::Max
                | PoolingMode::Min
                | PoolingMode::ArgmaxX
                | PoolingMode::ArgmaxY => P::Max,
                PoolingMode::ReduceSum => P::ReduceSum,
                _ => P::Average,
            }),
            Op::Elementwise(m) => OpKind::Elementwise(match m {
                ElementwiseMode::Mul => E::Mul,
                ElementwiseMode::Sub => E::Sub,
                ElementwiseMode::Min => E::Min,
                ElementwiseMode::Max => E::Max,
                ElementwiseMode::Lrelu => E::Lrelu,
                ElementwiseMode::Abs => E::Abs,
                ElementwiseMode::Clz => E::Clz,
                ElementwiseMode::Shr => E::Shr,
                ElementwiseMode::Shl => E::Shl,
                _ => E::Add,
            }),
        }
    }
}

/// The register-file model's hooks ([`super::regfile::RegisterFile`] hosting a U85).
impl VirtualU85 {
    /// The `CONFIG` register of this configuration (Vela's `ConfigRegister`: MACs, command
    /// stream version 1, AXI ports, one weight decoder per core, product 2).
    pub fn config_register(&self) -> U85ConfigReg {
        let c = self.config;
        U85ConfigReg::new(
            c.hw_macs_per_cc(),
            1,
            c.axi_sram_log2,
            c.axi_ext_log2,
            c.cores.max(1).ilog2(),
        )
    }

    /// Starts counting the work of a new queue (the registers are kept, as on hardware).
    pub(crate) fn begin_queue(&mut self) {
        self.work = 0;
    }

    /// Decodes and executes one command given as words at `byte_offset` of the queue; returns
    /// the words it used and whether it ended the stream.
    pub(crate) fn step(
        &mut self,
        words: &[u32],
        byte_offset: usize,
        regions: &mut Regions,
        stats: &mut Stats,
    ) -> Result<(usize, Option<StreamEnd>), SimError> {
        walk::step(self, words, byte_offset, regions, stats)
    }
}

/// The U85 command set and its dispatch, for the shared walker.
impl walk::Machine for VirtualU85 {
    type Command = Command;

    fn decode(words: &[u32], byte_offset: usize) -> Result<Command, DecodeError> {
        crate::ethos_u::regs::u85::decode(words, 0, byte_offset)
    }

    fn words(cmd: &Command) -> usize {
        cmd.words()
    }

    fn apply(&mut self, cmd: &Command) -> bool {
        self.state.apply(cmd)
    }

    fn dispatch(
        &mut self,
        cmd: Command,
        offset: usize,
        regions: &mut Regions,
        stats: &mut Stats,
    ) -> Result<Option<StreamEnd>, SimError> {
        let name = cmd.opcode().name();
        let err = |kind| SimError::at(offset, Some(name), kind);
        let Command::Cmd0 { op, param } = cmd else {
            return Err(err(SimErrorKind::Unsupported {
                what: "NPU_OP_BRANCH on the virtual Ethos-U85",
            }));
        };
        self.operation(op, param, offset, regions, stats)
            .map_err(err)
    }

    fn check_payload(&self, cop: &Cop1<'_>) -> Result<(), SimError> {
        let bad = |value: u32, reason| {
            SimError::at(
                4,
                None,
                SimErrorKind::InvalidRegister {
                    register: "COP1 OPTIMIZER_CONFIG",
                    value: value as u64,
                    reason,
                },
            )
        };
        if let Some((config, _)) = cop.optimizer_config() {
            if cop.architecture() != Some(Architecture::EthosU85) {
                return Err(bad(config, "the payload is not for Ethos-U85"));
            }
            // CONFIG bits 0..=3: log2 of the MACs per cycle (Vela's `ConfigRegister`).
            if config & 0xf != self.config.hw_macs_per_cc() {
                return Err(bad(
                    config,
                    "the payload was compiled for a different accelerator configuration",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethos_u::config::ETHOS_U85_256;

    fn words(cmds: &[u32]) -> Vec<u8> {
        cmds.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// ADD of two 1x1x4 int8 maps with unit scales, written as Vela would.
    fn add_stream() -> Vec<u32> {
        let mut v = Vec::new();
        let mut c0 = |op: Cmd0, p: u16| v.push(op.encode(p));
        c0(Cmd0::SET_IFM_PRECISION, 1);
        c0(Cmd0::SET_IFM2_PRECISION, 1);
        c0(Cmd0::SET_OFM_PRECISION, 0x101);
        c0(Cmd0::SET_IFM_REGION, 1);
        c0(Cmd0::SET_IFM2_REGION, 1);
        c0(Cmd0::SET_OFM_REGION, 1);
        c0(Cmd0::SET_OFM_DEPTH_M1, 3);
        c0(Cmd0::SET_IFM_DEPTH_M1, 3);
        c0(Cmd0::SET_ACTIVATION_MIN, (-128i16) as u16);
        c0(Cmd0::SET_ACTIVATION_MAX, 127);
        for (op, payload) in [
            (Cmd1::SET_IFM_STRIDE_X, 4),
            (Cmd1::SET_IFM2_STRIDE_X, 4),
            (Cmd1::SET_OFM_STRIDE_X, 4),
            (Cmd1::SET_IFM_STRIDE_Y, 4),
            (Cmd1::SET_IFM2_STRIDE_Y, 4),
            (Cmd1::SET_OFM_STRIDE_Y, 4),
            (Cmd1::SET_IFM2_BASE0, 4),
            (Cmd1::SET_OFM_BASE0, 8),
            (Cmd1::SET_IFM_SCALE, 1),
            (Cmd1::SET_IFM2_SCALE, 1),
            (Cmd1::SET_OFM_SCALE, 1),
        ] {
            v.extend(op.encode(0, payload));
        }
        v.push(Cmd0::OP_ELEMENTWISE.encode(1));
        v.push(Cmd0::OP_STOP.encode(0xffff));
        v
    }

    #[test]
    fn elementwise_add_raw_stream() {
        let mut arena = [1u8, 2, 3, 0x80, 10, 20, 30, 0xff, 0, 0, 0, 0];
        let mut regions = Regions::new();
        regions.set_mut(1, &mut arena);
        let stream = words(&add_stream());
        let stats = VirtualU85::new(&ETHOS_U85_256)
            .run(&stream, &mut regions)
            .expect("runs");
        assert!(stats.stopped);
        // 3 + 30, and -128 + -1 saturates.
        assert_eq!(arena[8..], [11, 22, 33, 0x80]);
    }

    #[test]
    fn unsupported_operations_name_offset_and_opcode() {
        let stream = words(&[
            Cmd0::SET_BLOCKDEP.encode(0),
            Cmd0::OP_RESIZE.encode(1),
            Cmd0::OP_STOP.encode(0),
        ]);
        let mut regions = Regions::new();
        let e = VirtualU85::new(&ETHOS_U85_256)
            .run(&stream, &mut regions)
            .expect_err("replicating resize is not modelled");
        assert_eq!(e.offset, 4);
        assert_eq!(e.command, Some("NPU_OP_RESIZE"));
        assert!(matches!(e.kind, SimErrorKind::Unsupported { .. }));
        // An out-of-bounds OFM is an error at the operation, not a panic.
        let mut small = [0u8; 8];
        let mut regions = Regions::new();
        regions.set_mut(1, &mut small);
        let e = VirtualU85::new(&ETHOS_U85_256)
            .run(&words(&add_stream()), &mut regions)
            .expect_err("OFM outside the region");
        assert_eq!(e.command, Some("NPU_OP_ELEMENTWISE"));
        assert!(matches!(e.kind, SimErrorKind::OutOfBounds { .. }));
    }

    /// Commands programming an NHWC feature map `(h, w, c)` of `elem`-byte elements at `base`
    /// in region 1 with precision parameter `precision`.
    fn fm(
        which: FmKind,
        (h, w, c): (u16, u16, u16),
        elem: u32,
        base: u32,
        precision: u16,
    ) -> Vec<u32> {
        use Cmd0 as C;
        use Cmd1 as D;
        let (prec, region, base0, h0, h1, w0, sx, sy, sc) = match which {
            FmKind::Ifm => (
                C::SET_IFM_PRECISION,
                C::SET_IFM_REGION,
                D::SET_IFM_BASE0,
                C::SET_IFM_HEIGHT0_M1,
                C::SET_IFM_HEIGHT1_M1,
                C::SET_IFM_WIDTH0_M1,
                D::SET_IFM_STRIDE_X,
                D::SET_IFM_STRIDE_Y,
                D::SET_IFM_STRIDE_C,
            ),
            FmKind::Ifm2 => (
                C::SET_IFM2_PRECISION,
                C::SET_IFM2_REGION,
                D::SET_IFM2_BASE0,
                C::SET_IFM2_HEIGHT0_M1,
                C::SET_IFM2_HEIGHT1_M1,
                C::SET_IFM2_WIDTH0_M1,
                D::SET_IFM2_STRIDE_X,
                D::SET_IFM2_STRIDE_Y,
                D::SET_IFM2_STRIDE_C,
            ),
            FmKind::Ofm => (
                C::SET_OFM_PRECISION,
                C::SET_OFM_REGION,
                D::SET_OFM_BASE0,
                C::SET_OFM_HEIGHT0_M1,
                C::SET_OFM_HEIGHT1_M1,
                C::SET_OFM_WIDTH0_M1,
                D::SET_OFM_STRIDE_X,
                D::SET_OFM_STRIDE_Y,
                D::SET_OFM_STRIDE_C,
            ),
        };
        let mut v = vec![
            prec.encode(precision),
            region.encode(1),
            h0.encode(h - 1),
            h1.encode(h - 1),
            w0.encode(w - 1),
        ];
        let (c32, w32) = (c as u32, w as u32);
        for (op, payload) in [
            (base0, base),
            (sc, elem),
            (sx, c32 * elem),
            (sy, w32 * c32 * elem),
        ] {
            v.extend(op.encode(0, payload));
        }
        if which == FmKind::Ofm {
            v.push(C::SET_OFM_HEIGHT_M1.encode(h - 1));
            v.push(C::SET_OFM_WIDTH_M1.encode(w - 1));
            v.push(C::SET_OFM_DEPTH_M1.encode(c - 1));
        }
        v
    }

    /// Runs `cmds` then `NPU_OP_STOP` on a 256-byte region 1 holding `init` at 0.
    fn run_on(cmds: &[u32], init: &[u8]) -> Result<Vec<u8>, SimError> {
        let mut arena = [0u8; 256];
        arena[..init.len()].copy_from_slice(init);
        let mut v = cmds.to_vec();
        v.push(Cmd0::OP_STOP.encode(0));
        let mut regions = Regions::new();
        regions.set_mut(1, &mut arena);
        VirtualU85::new(&ETHOS_U85_256).run(&words(&v), &mut regions)?;
        Ok(arena.to_vec())
    }

    /// `OFM_SCALE` parameter: shift, and round mode in bits 13..=15.
    fn ofm_scale(shift: u16, round: RoundModeOfm, scale: u32) -> [u32; 2] {
        Cmd1::SET_OFM_SCALE.encode(shift | ((round as u16) << 13), scale)
    }

    #[test]
    fn argmax_along_x_and_y_first_largest_wins() {
        // ARGMAX_X over rows [3, 7, 7, -2] and [-5, -6, -1, -1] (int8 at 0): the first largest
        // positions are 1 and 2. Int32 OFM at 64, no clip.
        let mut v = fm(FmKind::Ifm, (2, 4, 1), 1, 0, 1);
        v.extend(fm(FmKind::Ofm, (2, 1, 1), 4, 64, 0x105));
        v.push(Cmd0::SET_IFM_DEPTH_M1.encode(0));
        v.push(Cmd0::SET_KERNEL_WIDTH_M1.encode(3));
        v.push(Cmd0::SET_ACTIVATION.encode(0x1000));
        v.extend(ofm_scale(16, RoundModeOfm::TruncateToLower, 1));
        v.push(Cmd0::OP_POOL.encode(PoolingMode::ArgmaxX as u16));
        let ifm = [3u8, 7, 7, 0xfe, 0xfb, 0xfa, 0xff, 0xff];
        let out = run_on(&v, &ifm).expect("runs");
        assert_eq!(out[64..72], [1, 0, 0, 0, 2, 0, 0, 0]);

        // ARGMAX_Y over 3 rows of 2 channels: channel 0 [1, 5, 2] -> 1, channel 1
        // [-1, -1, -3] -> 0.
        let mut v = fm(FmKind::Ifm, (3, 1, 2), 1, 0, 1);
        v.extend(fm(FmKind::Ofm, (1, 1, 2), 4, 64, 0x105));
        v.push(Cmd0::SET_KERNEL_HEIGHT_M1.encode(2));
        v.push(Cmd0::SET_ACTIVATION.encode(0x1000));
        v.extend(ofm_scale(16, RoundModeOfm::TruncateToLower, 1));
        v.push(Cmd0::OP_POOL.encode(PoolingMode::ArgmaxY as u16));
        let ifm = [1u8, 0xff, 5, 0xff, 2, 0xfd];
        let out = run_on(&v, &ifm).expect("runs");
        assert_eq!(out[64..72], [1, 0, 0, 0, 0, 0, 0, 0]);

        // Another OFM scale would expose the accumulator's unknown low half: refused.
        let n = v.len();
        v[n - 3..n - 1].copy_from_slice(&ofm_scale(8, RoundModeOfm::TruncateToLower, 1));
        let e = run_on(&v, &ifm).expect_err("shift 8");
        assert_eq!(e.command, Some("NPU_OP_POOL"));
        assert!(matches!(e.kind, SimErrorKind::Unsupported { .. }));
    }

    #[test]
    fn null_pool_outputs_ifm2_through_the_ofm_scale() {
        // Int32 IFM2 (100000, -7) at 0 into int8 at 64 with OFM scale 1, shift 10, NATURAL:
        // 100000 / 1024 = 97.66 -> 98, -7 / 1024 = -0.007 -> 0.
        let mut v = fm(FmKind::Ifm2, (1, 1, 2), 4, 0, 9);
        v.extend(fm(FmKind::Ofm, (1, 1, 2), 1, 64, 0x101));
        v.push(Cmd0::SET_ACTIVATION_MIN.encode(-128i16 as u16));
        v.push(Cmd0::SET_ACTIVATION_MAX.encode(127));
        v.extend(ofm_scale(10, RoundModeOfm::Natural, 1));
        // ACC_INPUT_IFM2 (2 in bits 4..=5), ACC_OUTPUT_ENABLE (0 in bit 6).
        v.push(Cmd0::SET_ACC_FORMAT.encode(0x20));
        v.push(Cmd0::OP_POOL.encode(PoolingMode::None as u16));
        let mut init = [0u8; 8];
        init[..4].copy_from_slice(&100_000i32.to_le_bytes());
        init[4..].copy_from_slice(&(-7i32).to_le_bytes());
        let out = run_on(&v, &init).expect("runs");
        assert_eq!(out[64..66], [98, 0]);
        // Accumulators kept for a later operation (ACC_OUTPUT_DISABLE) are not modelled.
        let n = v.len();
        v[n - 2] = Cmd0::SET_ACC_FORMAT.encode(0x60);
        let e = run_on(&v, &init).expect_err("no output");
        assert_eq!(e.command, Some("NPU_OP_POOL"));
        assert!(matches!(e.kind, SimErrorKind::Unsupported { .. }));
    }

    /// A one-row resize of `[h=1][w=2][c=2]` int8 to width 4, as Vela programs TFLite's
    /// RESIZE_{NEAREST_NEIGHBOR,BILINEAR} (GEN `GenerateResizeOp`): `(n, d, offset)` for X,
    /// Y is the identity, OFM block width 4, shift `16 + s`.
    fn resize_stream(mode: ResizeMode, (n, d, offset): (u16, u32, i16), s: u16) -> Vec<u32> {
        let mut v = fm(FmKind::Ifm, (1, 2, 2), 1, 0, 1);
        v.extend(fm(FmKind::Ofm, (1, 4, 2), 1, 64, 0x101));
        v.push(Cmd0::SET_ACTIVATION_MIN.encode(-128i16 as u16));
        v.push(Cmd0::SET_ACTIVATION_MAX.encode(127));
        v.extend(ofm_scale(16 + s, RoundModeOfm::Symmetric, 1));
        let (n32, d) = (n as u32, d);
        let (one_int, one_mod) = (d / n32, d % n32);
        let (blk_int, blk_mod) = (3 * d / n32, 3 * d % n32);
        v.push(Cmd0::SET_RESIZE_X_SCALE_N_M1.encode(n - 1));
        v.push(Cmd0::SET_RESIZE_Y_SCALE_N_M1.encode(0));
        v.extend(
            Cmd1::SET_RESIZE_X_STEP
                .encode((one_int | (blk_int << 4)) as u16, one_mod | (blk_mod << 16)),
        );
        v.extend(Cmd1::SET_RESIZE_Y_STEP.encode(1, 0));
        v.push(Cmd0::SET_RESIZE_X_OFFSET.encode(offset as u16 & 0xfff));
        v.push(Cmd0::SET_RESIZE_Y_OFFSET.encode(0));
        v.push(Cmd0::SET_KERNEL_HEIGHT_M1.encode(0));
        v.push(Cmd0::SET_KERNEL_WIDTH_M1.encode(1));
        v.push(Cmd0::SET_OFM_BLK_WIDTH_M1.encode(3));
        v.push(Cmd0::OP_RESIZE.encode(mode as u16));
        v
    }

    #[test]
    fn resize_nearest_and_bilinear() {
        // IFM pixels x0 = (10, -10), x1 = (21, -21).
        let ifm = [10u8, 0xf6, 21, 0xeb];
        // Nearest, half-pixel centres (Vela's conversion of align_corners = false): n = 4,
        // d = 2, offset = -1. Positions -1, 1, 3, 5 in quarters: pixel 0, 0, 1, 1.
        let out = run_on(&resize_stream(ResizeMode::Nearest, (4, 2, -1), 0), &ifm).expect("runs");
        assert_eq!(out[64..72], [10, 0xf6, 10, 0xf6, 21, 0xeb, 21, 0xeb]);
        // Bilinear, n = 2, d = 1, offset 0: weights (2, 0), (1, 1), (2, 0) and (1, 1) against
        // the clamped edge, so 2*x0, x0 + x1, 2*x1, 2*x1, halved (s = 1) rounding half away
        // from zero: 10, 15.5 -> 16, 21, 21 and -10, -15.5 -> -16, -21, -21.
        let out = run_on(&resize_stream(ResizeMode::Bilinear, (2, 1, 0), 1), &ifm).expect("runs");
        assert_eq!(out[64..72], [10, 0xf6, 16, 0xf0, 21, 0xeb, 21, 0xeb]);
        // A block step that disagrees with the pixel step and block size is refused.
        let mut v = resize_stream(ResizeMode::Bilinear, (2, 1, 0), 1);
        let blk = v
            .iter()
            .position(|&w| w == Cmd0::SET_OFM_BLK_WIDTH_M1.encode(3))
            .expect("block width");
        v[blk] = Cmd0::SET_OFM_BLK_WIDTH_M1.encode(5);
        let e = run_on(&v, &ifm).expect_err("inconsistent block step");
        assert_eq!(e.command, Some("NPU_OP_RESIZE"));
        assert!(matches!(e.kind, SimErrorKind::Unsupported { .. }));
        // REPLICATE is not modelled.
        let e = run_on(&resize_stream(ResizeMode::Replicate, (2, 1, 0), 1), &ifm)
            .expect_err("replicate");
        assert!(matches!(e.kind, SimErrorKind::Unsupported { .. }));
    }

    #[test]
    fn matmul_weights_from_ifm2() {
        // A = [[1, 2, 3], [4, -5, 6]] stored with IFM zero point 1, B (rows are the OFM
        // columns) = [[1, 0, -1], [2, 1, 1]] stored with IFM2 zero point -1. A * B^T =
        // [[-2, 7], [-2, 9]], plus OFM zero point 3.
        let mut v = fm(FmKind::Ifm, (1, 2, 3), 1, 0, 1);
        v.extend(fm(FmKind::Ifm2, (1, 2, 3), 1, 16, 1));
        v.extend(fm(FmKind::Ofm, (1, 2, 2), 1, 64, 0x101));
        v.push(Cmd0::SET_IFM_DEPTH_M1.encode(2));
        v.push(Cmd0::SET_IFM_ZERO_POINT.encode(1));
        v.push(Cmd0::SET_IFM2_ZERO_POINT.encode(-1i16 as u16));
        v.push(Cmd0::SET_OFM_ZERO_POINT.encode(3));
        v.push(Cmd0::SET_ACTIVATION_MIN.encode(-128i16 as u16));
        v.push(Cmd0::SET_ACTIVATION_MAX.encode(127));
        v.extend(ofm_scale(0, RoundModeOfm::DoubleSymmetric, 1));
        v.push(Cmd0::OP_CONV.encode(1));
        let mut init = [0u8; 32];
        init[..6].copy_from_slice(&[2, 3, 4, 5, 0xfc, 7]);
        init[16..22].copy_from_slice(&[0, 0xff, 0xfe, 1, 0, 0]);
        let out = run_on(&v, &init).expect("runs");
        assert_eq!(out[64..68], [1, 10, 1, 12]);
        // Per-channel scaling (scale records) is not how Vela programs it: refused.
        let p = v
            .iter()
            .position(|&w| w == Cmd0::SET_OFM_PRECISION.encode(0x101))
            .expect("OFM precision");
        v[p] = Cmd0::SET_OFM_PRECISION.encode(0x001);
        let e = run_on(&v, &init).expect_err("per-channel");
        assert_eq!(e.command, Some("NPU_OP_CONV"));
        assert!(matches!(e.kind, SimErrorKind::Unsupported { .. }));
    }

    #[test]
    fn malformed_streams_do_not_panic() {
        // Mutations of a valid stream, and operations on whatever registers are left.
        let base = add_stream();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let ops = [
            Cmd0::OP_CONV,
            Cmd0::OP_DEPTHWISE,
            Cmd0::OP_POOL,
            Cmd0::OP_ELEMENTWISE,
            Cmd0::OP_DMA_START,
            Cmd0::OP_RESIZE,
        ];
        let limits = Limits {
            max_elements: 1 << 16,
            max_op_macs: 1 << 20,
            max_run_work: 1 << 22,
            max_dma_bytes: 1 << 16,
        };
        for _ in 0..2000 {
            let mut v = base.clone();
            for _ in 0..3 {
                let i = (next() % v.len() as u64) as usize;
                let r = next();
                v[i] = if r % 3 == 0 {
                    ops[(r >> 8) as usize % ops.len()].encode((r >> 16) as u16)
                } else {
                    v[i] ^ (1 << ((r >> 8) % 32))
                };
            }
            let mut arena = [0u8; 64];
            let weights = [0u8; 64];
            let mut regions = Regions::new();
            regions.set(0, &weights).set_mut(1, &mut arena);
            let _ = VirtualU85::new(&ETHOS_U85_256)
                .with_limits(limits)
                .run(&words(&v), &mut regions);
        }
    }
}
