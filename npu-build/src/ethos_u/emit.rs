//! Emission: the register command stream of a placed [`Program`].
//!
//! Per operation the registers are written in the order Vela 5.2.0's Regor core writes them
//! (docs/command-stream.md, "Register order and redundant writes"), with the same values
//! ("Register meanings we rely on"): IFM, padding, OFM, kernel, weights and scales,
//! activation, OFM scaling, IFM2, block and shared-buffer registers, block dependency, waits,
//! then the `NPU_OP_*`. Like Vela, a register whose value did not change since it was
//! last written is not written again, so streams compare word for word. Activation LUTs are
//! DMA'd into the shared buffer before the operation that uses them (docs/dependencies.md,
//! "LUT DMAs").
//!
//! Emission makes no numeric decisions: everything comes from the [`NpuOp`]s (lowering) and
//! the [`Placement`]. Any value that does not fit its register field is an error naming the
//! operation.

mod deps;
mod dump;
mod lut;
mod writer;

use npu_rt::ethos_u::config::{AcceleratorConfig, Product};
use npu_rt::ethos_u::regs::{
    self, ActivationFormat, ActivationFunction, ActivationPrecision, ActivationType, Cmd0, Cmd1,
    DmaRegion, DmaRegionMode, DmaStrideMode, ElementwiseMode, Ifm2Broadcast, Ifm2OperandOrder,
    Ifm2Precision, IfmPrecision, IfmScaleMode, KernelDecomposition, KernelStride, OfmPrecision,
    OfmScaleMode, ParallelMode, WeightOrder,
};

use self::deps::{Access, Consumer, Memory, Outstanding, Placed, Producer};
use self::lut::LutSlots;
use self::writer::{Ctx, Writer};
use super::block::kind_name;
use super::npu_op::{
    BlockConfig, BufferId, Builtin, ElemType, FeatureMap, Layout, NpuOp, NpuOpKind, Operand2,
    Placement, Program, Scale, WeightDma, WeightStreams,
};
use crate::error::{Error, Result};

pub use self::dump::dump;

/// Region (base pointer) number the LUT DMA destination is given; with the internal region
/// mode the address is a shared-buffer address (docs/command-stream.md, "Shared-buffer
/// addresses").
pub const REGION_SHRAM: u8 = 3;
/// Largest value of a `*_M1` size register (16 bits).
const MAX_M1: u64 = 0xffff;
/// Largest padding (7-bit fields).
const MAX_PAD: u64 = 127;
/// Largest kernel stride Vela uses natively (larger strides are unrolled by lowering).
const MAX_STRIDE: usize = 3;
/// Largest kernel dilation the KERNEL_STRIDE register holds.
const MAX_DILATION: usize = 2;
/// Largest value of the BLOCKDEP register (2 bits) and of the job look-ahead.
const MAX_BLOCKDEP: usize = 3;
/// Region fields are 3 bits.
const MAX_REGION: u64 = 7;
/// Shared-buffer bank registers (IFM_IB_END, AB_START, IFM2_IB_START) are 6 bits.
const MAX_BANK: u64 = 63;
/// Shift fields of OFM_SCALE / OPA_SCALE are 6 bits.
const MAX_SHIFT: u64 = 63;
/// OFM block limits: the `OFM_BLK_*_M1` fields are 5, 6 and 7 bits.
const MAX_BLOCK_H_M1: u64 = 31;
const MAX_BLOCK_W_M1: u64 = 63;
const MAX_BLOCK_D_M1: u64 = 127;

/// Writes the command stream (ending with NPU_OP_STOP) of `program` as placed by `placement`.
pub fn emit(
    program: &Program,
    placement: &Placement,
    accel: &AcceleratorConfig,
) -> Result<Vec<u32>> {
    if placement.buffers.len() != program.buffers.len() {
        return Err(Error::Internal(format!(
            "emission: placement has {} buffers, the program {}",
            placement.buffers.len(),
            program.buffers.len()
        )));
    }
    let mut e = Emitter {
        accel,
        program,
        placement,
        w: Writer::new(accel.axi_address_bits),
        luts: LutSlots::new(
            accel.shram_lut_bytes as usize,
            accel.shram_lut_slot_bytes as usize,
        ),
        dmas: Outstanding::new(accel.max_outstanding_dma as usize),
        kernels: Outstanding::new(accel.max_outstanding_kernels as usize),
    };
    if accel.product == Product::U65 {
        let mode = if accel.cores > 1 {
            ParallelMode::DualCoreDepth
        } else {
            ParallelMode::SingleCore
        };
        e.w.cmd0(Cmd0::SET_PARALLEL_MODE, u16::from(mode.bits()));
    }
    let issue = copy_issue_points(program, placement)?;
    let mut prev: Option<Producer<'_>> = None;
    for (index, op) in program.ops.iter().enumerate() {
        // Weight copies first: they run while the operations before this one compute.
        for &(j, piece) in &issue[index] {
            if let Some(w) = placement.weights[j].as_ref()
                && let Some(&dma) = w.dma.get(piece)
            {
                e.weight_dma(&e.ctx(j, &program.ops[j]), dma, w.region)?;
            }
        }
        prev = Some(e.op(index, op, prev.as_ref())?);
    }
    e.w.cmd0(Cmd0::OP_STOP, 0xffff);
    Ok(e.w.words)
}

/// For each operation, the weight-copy DMAs (reading operation, piece) issued just before its
/// registers, in the order of their readers: each `lead` operations ahead of the one that
/// reads it.
fn copy_issue_points(program: &Program, placement: &Placement) -> Result<Vec<Vec<(usize, usize)>>> {
    let mut issue = vec![Vec::new(); program.ops.len()];
    for (j, w) in placement.weights.iter().enumerate().take(program.ops.len()) {
        let Some(w) = w else { continue };
        for (piece, dma) in w.dma.iter().enumerate() {
            let at = (j + 1).checked_sub(dma.lead.max(1)).ok_or_else(|| {
                Error::Internal(format!(
                    "op {j} '{}': its weight copy leads by {} operations, more than precede it",
                    program.ops[j].name, dma.lead
                ))
            })?;
            issue[at].push((j, piece));
        }
    }
    Ok(issue)
}

/// What one operation's registers are computed from.
struct Emitter<'a> {
    accel: &'a AcceleratorConfig,
    program: &'a Program,
    placement: &'a Placement,
    w: Writer,
    luts: LutSlots,
    /// DMAs and NPU operations that may still be running.
    dmas: Outstanding,
    kernels: Outstanding,
}

/// A feature map with its address resolved.
#[derive(Clone, Copy)]
struct Fm<'a> {
    fm: &'a FeatureMap,
    region: u8,
    /// Address of the box's first element.
    addr: u64,
    placed: Placed<'a>,
}

impl<'a> Emitter<'a> {
    /// Resolves the address of `fm` and checks the box lies in the addressable range.
    fn resolve(&self, ctx: &Ctx, what: &str, fm: &'a FeatureMap) -> Result<Fm<'a>> {
        let (region, base) = *self
            .placement
            .buffers
            .get(fm.buffer.index())
            .ok_or_else(|| {
                Error::Internal(format!(
                    "{}: {what} refers to buffer {} which has no placement",
                    ctx.node, fm.buffer
                ))
            })?;
        let size = self
            .program
            .buffers
            .get(fm.buffer.index())
            .map_or(0, |b| b.size as u64);
        let at = |offset: usize| {
            base.checked_add(offset as u64)
                .ok_or_else(|| ctx.limit(format!("{what} address overflows")))
        };
        let addr = at(fm.offset)?;
        for (offset, len) in fm.parts() {
            self.w.check_range(ctx, what, at(offset)?, len as u64)?;
        }
        Ok(Fm {
            fm,
            region,
            addr,
            placed: Placed {
                fm,
                region,
                buffer_addr: base,
                buffer_size: size,
            },
        })
    }

    /// The names error messages about operation `index` give.
    fn ctx(&self, index: usize, op: &NpuOp) -> Ctx {
        Ctx {
            node: format!("op {index} '{}'", op.name),
            op: kind_name(&op.kind),
            target: self.accel.name,
        }
    }

    /// Emits one operation (with the LUT DMA it needs) and returns what the next operation's
    /// block dependency needs to know about it.
    fn op(
        &mut self,
        index: usize,
        op: &'a NpuOp,
        prev: Option<&Producer<'a>>,
    ) -> Result<Producer<'a>> {
        let ctx = self.ctx(index, op);
        let block = op.block.ok_or_else(|| {
            Error::Internal(format!("{}: no block configuration chosen", ctx.node))
        })?;
        check_kernel(&ctx, op)?;
        let ifm = self.resolve(&ctx, "IFM", &op.ifm)?;
        let ofm = self.resolve(&ctx, "OFM", &op.ofm)?;
        let (ew_mode, ifm2, reversed, input_scaling) = match &op.kind {
            NpuOpKind::Elementwise {
                mode,
                ifm2,
                reversed,
                input_scaling,
            } => (Some(*mode), ifm2.as_ref(), *reversed, *input_scaling),
            _ => (None, None, false, None),
        };
        let ifm2_fm = match ifm2 {
            Some(Operand2::Tensor(f)) => Some(self.resolve(&ctx, "IFM2", f)?),
            _ => None,
        };
        let mut accesses = Vec::new();
        for (f, write) in [(&ifm, false), (&ofm, true)]
            .into_iter()
            .chain(ifm2_fm.as_ref().map(|f| (f, false)))
        {
            for (offset, len) in f.fm.parts() {
                let at = f.placed.buffer_addr + offset as u64;
                let memory = Memory::Region(f.region);
                accesses.push(if write {
                    Access::write(memory, at, len as u64)
                } else {
                    Access::read(memory, at, len as u64)
                });
            }
        }

        let lut_slot = self.lut_for(&ctx, index, op, &mut accesses)?;

        if let Some(mode) = ew_mode {
            self.elementwise_scaling(&ctx, op, mode, input_scaling)?;
        }
        self.ifm(
            &ctx,
            &ifm,
            op,
            input_scaling.map_or(IfmScaleMode::OpaOpb16, |s| s.mode),
        )?;
        if ew_mode.is_none() {
            self.padding(&ctx, &op.padding)?;
        }
        self.ofm(&ctx, &ofm, op, ew_mode)?;
        if ew_mode.is_none() {
            self.kernel(&ctx, op, block.part_kernel_first)?;
        }
        if let NpuOpKind::Conv(_) | NpuOpKind::Depthwise(_) = op.kind {
            let streams = self
                .placement
                .weights
                .get(index)
                .and_then(|w| w.as_ref())
                .ok_or_else(|| {
                    Error::Internal(format!("{}: no weight streams placed", ctx.node))
                })?;
            self.weights(&ctx, streams, &mut accesses)?;
        }
        self.activation(&ctx, op, lut_slot)?;
        if let NpuOpKind::Pool(_) = op.kind {
            self.ofm_scale(&ctx, op.ofm_scale.unwrap_or(Scale::UNIT))?;
        }
        if let Some(o2) = ifm2 {
            self.ifm2(&ctx, op, o2, ifm2_fm.as_ref(), reversed)?;
        }

        self.block_registers(&ctx, &block, ifm2.is_some())?;

        // Dependencies on the previous NPU operation and on outstanding DMAs.
        let original =
            |a: Option<Placed<'a>>, b: Option<Placed<'a>>| if reversed { [b, a] } else { [a, b] };
        let ifm2_size = match (ifm2, &ifm2_fm) {
            (Some(_), Some(f)) => f.placed.buffer_size,
            (Some(_), None) => op.ifm.dtype.bytes() as u64,
            _ => 0,
        };
        let sizes = if reversed {
            [ifm2_size, ifm.placed.buffer_size]
        } else {
            [ifm.placed.buffer_size, ifm2_size]
        };
        let consumer = Consumer {
            ifms: original(Some(ifm.placed), ifm2_fm.map(|f| f.placed)),
            ifm_sizes: sizes,
            kernel: op.kernel,
            block,
            uses_lut: lut_slot.is_some(),
        };
        let dep = deps::block_dependency(
            prev,
            &consumer,
            MAX_BLOCKDEP,
            self.accel.shram_reserved_end_banks == 0,
        );
        self.w.cmd0(Cmd0::SET_BLOCKDEP, dep);
        if let Some(k) = self.dmas.wait_for(&accesses) {
            self.w.cmd0(Cmd0::OP_DMA_WAIT, k);
        }
        self.kernels.push(accesses);
        match &op.kind {
            NpuOpKind::Conv(_) => self.w.cmd0(Cmd0::OP_CONV, 0),
            NpuOpKind::Depthwise(_) => self.w.cmd0(Cmd0::OP_DEPTHWISE, 0),
            NpuOpKind::Pool(mode) => self.w.cmd0(Cmd0::OP_POOL, u16::from(mode.bits())),
            NpuOpKind::Elementwise { mode, .. } => {
                self.w.cmd0(Cmd0::OP_ELEMENTWISE, u16::from(mode.bits()))
            }
        }
        Ok(Producer {
            ofm: ofm.placed,
            block,
            used_lut: lut_slot.is_some(),
        })
    }

    /// The LUT slot of `op`'s activation, loaded by DMA unless it is resident (before the op's
    /// registers); records the shared-buffer use in `accesses`.
    fn lut_for(
        &mut self,
        ctx: &Ctx,
        index: usize,
        op: &NpuOp,
        accesses: &mut Vec<Access>,
    ) -> Result<Option<u8>> {
        let slot = match op.activation.lut {
            Some(lut) => Some(self.lut(ctx, index, lut, accesses)?),
            None => {
                if self.accel.shram_reserved_end_banks == 0 {
                    // The accumulators of this op overwrite the LUT area.
                    self.luts.clear();
                }
                None
            }
        };
        if self.accel.shram_reserved_end_banks == 0 {
            accesses.push(Access::write(
                Memory::Shram,
                0,
                u64::from(self.accel.shram_bytes()),
            ));
        }
        Ok(slot)
    }

    /// The IFM padding registers (convolution, depthwise and pooling).
    fn padding(&mut self, ctx: &Ctx, p: &crate::ir::Padding) -> Result<()> {
        for (cmd, what, v) in [
            (Cmd0::SET_IFM_PAD_TOP, "top padding", p.top),
            (Cmd0::SET_IFM_PAD_LEFT, "left padding", p.left),
            (Cmd0::SET_IFM_PAD_BOTTOM, "bottom padding", p.bottom),
            (Cmd0::SET_IFM_PAD_RIGHT, "right padding", p.right),
        ] {
            let v = ctx.unsigned(what, v as u64, MAX_PAD)?;
            self.w.cmd0(cmd, v);
        }
        Ok(())
    }

    /// The OFM block and shared-buffer layout registers of the chosen block configuration.
    fn block_registers(&mut self, ctx: &Ctx, block: &BlockConfig, binary: bool) -> Result<()> {
        let [bh, bw, bd] = block.ofm_block;
        let v = ctx.minus_one("OFM block height", bh, MAX_BLOCK_H_M1)?;
        self.w.cmd0(Cmd0::SET_OFM_BLK_HEIGHT_M1, v);
        let v = ctx.minus_one("OFM block width", bw, MAX_BLOCK_W_M1)?;
        self.w.cmd0(Cmd0::SET_OFM_BLK_WIDTH_M1, v);
        let v = ctx.minus_one("OFM block depth", bd, MAX_BLOCK_D_M1)?;
        self.w.cmd0(Cmd0::SET_OFM_BLK_DEPTH_M1, v);
        let v = ctx.unsigned("IFM_IB_END", block.ifm_ib_end.into(), MAX_BANK)?;
        self.w.cmd0(Cmd0::SET_IFM_IB_END, v);
        let v = ctx.unsigned("AB_START", block.ab_start.into(), MAX_BANK)?;
        self.w.cmd0(Cmd0::SET_AB_START, v);
        if binary {
            let start = block.ifm2_ib_start.ok_or_else(|| {
                Error::Internal(format!(
                    "{}: binary operation without IFM2_IB_START",
                    ctx.node
                ))
            })?;
            let v = ctx.unsigned("IFM2_IB_START", start.into(), MAX_BANK)?;
            self.w.cmd0(Cmd0::SET_IFM2_IB_START, v);
        }
        self.w
            .cmd0(Cmd0::SET_ACC_FORMAT, u16::from(block.acc_format.bits()));
        Ok(())
    }

    /// DMAs an operation's weight streams from the read-only region to their arena copy, after
    /// waiting for earlier work on those bytes.
    fn weight_dma(&mut self, ctx: &Ctx, dma: WeightDma, region: u8) -> Result<()> {
        let dma_ctx = Ctx {
            node: format!("weight DMA for {}", ctx.node),
            ..ctx.clone()
        };
        self.w
            .check_range(&dma_ctx, "weight copy source", dma.src, dma.len)?;
        self.w
            .check_range(&dma_ctx, "weight copy destination", dma.dst, dma.len)?;
        let dst_field = ctx.unsigned("weight copy region", region.into(), MAX_REGION)?;
        let src_region = DmaRegion::new(0, DmaRegionMode::External, DmaStrideMode::D1);
        let dst_region =
            DmaRegion::new(dst_field as u8, DmaRegionMode::External, DmaStrideMode::D1);
        self.w.cmd0(Cmd0::SET_DMA0_SRC_REGION, src_region.0);
        self.w
            .address(&dma_ctx, Cmd1::SET_DMA0_SRC, "DMA source", dma.src)?;
        self.w.cmd0(Cmd0::SET_DMA0_DST_REGION, dst_region.0);
        self.w
            .address(&dma_ctx, Cmd1::SET_DMA0_DST, "DMA destination", dma.dst)?;
        self.w
            .address(&dma_ctx, Cmd1::SET_DMA0_LEN, "DMA length", dma.len)?;
        let accesses = vec![
            Access::read(Memory::Region(0), dma.src, dma.len),
            Access::write(Memory::Region(region), dma.dst, dma.len),
        ];
        if let Some(k) = self.dmas.wait_for(&accesses) {
            self.w.cmd0(Cmd0::OP_DMA_WAIT, k);
        }
        if let Some(k) = self.kernels.wait_for(&accesses) {
            self.w.cmd0(Cmd0::OP_KERNEL_WAIT, k);
        }
        self.dmas.push(accesses);
        self.w.cmd0(Cmd0::OP_DMA_START, 0);
        Ok(())
    }

    /// Allocates the LUT slot of `lut` and DMAs the table there unless it is resident.
    /// Returns the slot and adds the op's LUT read to `accesses`.
    fn lut(
        &mut self,
        ctx: &Ctx,
        index: usize,
        lut: BufferId,
        accesses: &mut Vec<Access>,
    ) -> Result<u8> {
        let size = self
            .program
            .buffers
            .get(lut.index())
            .map(|b| b.size)
            .ok_or_else(|| {
                Error::Internal(format!("{}: LUT buffer {lut} does not exist", ctx.node))
            })?;
        let (region, src) = *self.placement.buffers.get(lut.index()).ok_or_else(|| {
            Error::Internal(format!("{}: LUT buffer {lut} has no placement", ctx.node))
        })?;
        let (slot, resident) = self
            .luts
            .allocate(region, src, size, index)
            .ok_or_else(|| {
                ctx.limit(format!(
                    "LUT of {size} bytes: must be 256, 1024 or 2048 bytes"
                ))
            })?;
        let dst = u64::from(self.accel.shram_lut_address())
            + (slot as u64) * u64::from(self.accel.shram_lut_slot_bytes);
        if !resident {
            let dma_ctx = Ctx {
                node: format!("LUT DMA for {}", ctx.node),
                ..ctx.clone()
            };
            self.w
                .check_range(&dma_ctx, "LUT source", src, size as u64)?;
            let region_field = ctx.unsigned("LUT source region", region.into(), MAX_REGION)?;
            let src_region = DmaRegion::new(
                region_field as u8,
                DmaRegionMode::External,
                DmaStrideMode::D1,
            );
            let dst_region =
                DmaRegion::new(REGION_SHRAM, DmaRegionMode::Internal, DmaStrideMode::D1);
            self.w.cmd0(Cmd0::SET_DMA0_SRC_REGION, src_region.0);
            self.w
                .address(&dma_ctx, Cmd1::SET_DMA0_SRC, "DMA source", src)?;
            self.w.cmd0(Cmd0::SET_DMA0_DST_REGION, dst_region.0);
            self.w
                .address(&dma_ctx, Cmd1::SET_DMA0_DST, "DMA destination", dst)?;
            self.w
                .address(&dma_ctx, Cmd1::SET_DMA0_LEN, "DMA length", size as u64)?;
            let dma = vec![
                Access::read(Memory::Region(region), src, size as u64),
                Access::write(Memory::Shram, dst, size as u64),
            ];
            if let Some(k) = self.dmas.wait_for(&dma) {
                self.w.cmd0(Cmd0::OP_DMA_WAIT, k);
            }
            if let Some(k) = self.kernels.wait_for(&dma) {
                self.w.cmd0(Cmd0::OP_KERNEL_WAIT, k);
            }
            self.dmas.push(dma);
            self.w.cmd0(Cmd0::OP_DMA_START, 0);
        }
        accesses.push(Access::read(Memory::Shram, dst, size as u64));
        u8::try_from(slot).map_err(|_| ctx.limit("LUT slot"))
    }

    /// OPA/OPB_SCALE (add/sub) and OFM_SCALE, which Vela writes before the IFM registers.
    fn elementwise_scaling(
        &mut self,
        ctx: &Ctx,
        op: &NpuOp,
        mode: ElementwiseMode,
        input_scaling: Option<super::npu_op::InputScaling>,
    ) -> Result<()> {
        if let Some(s) = input_scaling {
            if !matches!(mode, ElementwiseMode::Add | ElementwiseMode::Sub) {
                return Err(ctx.limit(format!(
                    "input scaling is only for ADD/SUB, not {}",
                    mode.name()
                )));
            }
            let shift = ctx.unsigned("OPA_SCALE shift", s.opa.shift.into(), MAX_SHIFT)?;
            self.w.cmd1(Cmd1::SET_OPA_SCALE, shift, s.opa.scale);
            self.w.cmd1(Cmd1::SET_OPB_SCALE, 0, u32::from(s.opb));
        }
        self.ofm_scale(ctx, op.ofm_scale.unwrap_or(Scale::UNIT))
    }

    fn ofm_scale(&mut self, ctx: &Ctx, s: Scale) -> Result<()> {
        let shift = ctx.unsigned("OFM_SCALE shift", s.shift.into(), MAX_SHIFT)?;
        self.w.cmd1(Cmd1::SET_OFM_SCALE, shift, s.scale);
        Ok(())
    }

    /// Region, bases, tile sizes and strides of an IFM/IFM2/OFM box.
    fn tiles(&mut self, ctx: &Ctx, f: &Fm<'_>, what: &str, cmds: &FmCmds) -> Result<()> {
        let region = ctx.unsigned(&format!("{what} region"), f.region.into(), MAX_REGION)?;
        self.w.cmd0(cmds.region, region);
        if f.fm.layout == Layout::Nhcwb16 && !f.addr.is_multiple_of(16) {
            return Err(ctx.limit(format!(
                "{what} base {:#x} of a brick-format map is not 16-byte aligned",
                f.addr
            )));
        }
        // A reversed axis starts at the box's last row or column and steps back.
        let [sy, sx, sc] = f.fm.strides.map(|v| v as i64);
        let [h, w] = [f.fm.shape[0], f.fm.shape[1]].map(|v| v.saturating_sub(1) as i64);
        let mut base = f.addr as i64;
        let (mut sy, mut sx) = (sy, sx);
        if f.fm.reverse != [false; 2] && f.fm.layout != Layout::Nhwc {
            return Err(ctx.limit(format!("{what}: a reversed box must be NHWC")));
        }
        if f.fm.reverse[0] {
            base += h * sy;
            sy = -sy;
        }
        if f.fm.reverse[1] {
            base += w * sx;
            sx = -sx;
        }
        // A box wrapping around a ring buffer continues in tile 2 (rows from HEIGHT0 on, all
        // columns: WIDTH0 is the whole width).
        let wrap = match f.fm.wrap {
            Some(w) if w.rows < f.fm.shape[0] => {
                if f.fm.reverse != [false; 2] {
                    return Err(ctx.limit(format!("{what}: a wrapped box cannot be reversed")));
                }
                Some((w.rows, f.placed.buffer_addr + w.offset as u64))
            }
            _ => None,
        };
        self.w
            .address(ctx, cmds.base[0], &format!("{what} base"), base as u64)?;
        for (i, &b) in cmds.base.iter().enumerate().skip(1) {
            let at = match wrap {
                Some((_, at)) if i == 2 => at,
                _ => 0,
            };
            self.w.address(ctx, b, &format!("{what} base"), at)?;
        }
        if let Some(h_m1) = cmds.height_m1 {
            let v = ctx.minus_one(&format!("{what} height"), f.fm.shape[0], MAX_M1)?;
            self.w.cmd0(h_m1, v);
        }
        if let Some(w_m1) = cmds.width_m1 {
            let v = ctx.minus_one(&format!("{what} width"), f.fm.shape[1], MAX_M1)?;
            self.w.cmd0(w_m1, v);
        }
        let h = ctx.minus_one(&format!("{what} height"), f.fm.shape[0], MAX_M1)?;
        let h0 = match wrap {
            Some((rows, _)) => ctx.minus_one(&format!("{what} height0"), rows, MAX_M1)?,
            None => h,
        };
        self.w.cmd0(cmds.height0_m1, h0);
        self.w.cmd0(cmds.height1_m1, h);
        let w = ctx.minus_one(&format!("{what} width"), f.fm.shape[1], MAX_M1)?;
        self.w.cmd0(cmds.width0_m1, w);
        if let Some(d_m1) = cmds.depth_m1 {
            let v = ctx.minus_one(&format!("{what} depth"), f.fm.shape[2], MAX_M1)?;
            self.w.cmd0(d_m1, v);
        }
        self.w
            .stride(ctx, cmds.stride[0], &format!("{what} stride y"), sy)?;
        self.w
            .stride(ctx, cmds.stride[1], &format!("{what} stride x"), sx)?;
        self.w
            .stride(ctx, cmds.stride[2], &format!("{what} stride c"), sc)?;
        Ok(())
    }

    fn ifm(&mut self, ctx: &Ctx, f: &Fm<'_>, op: &NpuOp, scale_mode: IfmScaleMode) -> Result<()> {
        self.tiles(ctx, f, "IFM", &IFM_CMDS)?;
        let zp = ctx.int16("IFM zero point", op.ifm.zero_point.into())?;
        self.w.cmd0(Cmd0::SET_IFM_ZERO_POINT, zp);
        let (ty, precision) = type_precision(op.ifm.dtype);
        let p = IfmPrecision::new(
            ty,
            precision,
            format(op.ifm.layout),
            scale_mode,
            op.ifm_round,
        );
        self.w.cmd0(Cmd0::SET_IFM_PRECISION, p.0);
        self.w
            .cmd0(Cmd0::SET_IFM_UPSCALE, u16::from(op.upscale.bits()));
        Ok(())
    }

    fn ofm(
        &mut self,
        ctx: &Ctx,
        f: &Fm<'_>,
        op: &NpuOp,
        ew: Option<ElementwiseMode>,
    ) -> Result<()> {
        self.tiles(ctx, f, "OFM", &OFM_CMDS)?;
        let zp = ctx.int16("OFM zero point", op.ofm.zero_point.into())?;
        self.w.cmd0(Cmd0::SET_OFM_ZERO_POINT, zp);
        // Vela scales globally (OFM_SCALE) for pooling and the scaled elementwise operations,
        // per channel (scale stream) for convolutions; the unscaled elementwise operations
        // (min, max, shifts, clz) keep the per-channel mode bit.
        let scale_mode = match (&op.kind, ew) {
            (NpuOpKind::Conv(_) | NpuOpKind::Depthwise(_), _) => OfmScaleMode::PerChannel,
            (NpuOpKind::Pool(_), _) => OfmScaleMode::Global,
            (_, Some(ElementwiseMode::Add | ElementwiseMode::Sub | ElementwiseMode::Mul))
            | (_, Some(ElementwiseMode::Lrelu | ElementwiseMode::Abs)) => OfmScaleMode::Global,
            _ => OfmScaleMode::PerChannel,
        };
        let (ty, precision) = type_precision(op.ofm.dtype);
        let p = OfmPrecision::new(
            ty,
            precision,
            format(op.ofm.layout),
            scale_mode,
            op.ofm_round,
        );
        self.w.cmd0(Cmd0::SET_OFM_PRECISION, p.0);
        Ok(())
    }

    fn kernel(&mut self, ctx: &Ctx, op: &NpuOp, part_kernel: bool) -> Result<()> {
        let k = &op.kernel;
        let v = ctx.minus_one("kernel height", k.dilated_h(), MAX_M1)?;
        self.w.cmd0(Cmd0::SET_KERNEL_HEIGHT_M1, v);
        let v = ctx.minus_one("kernel width", k.dilated_w(), MAX_M1)?;
        self.w.cmd0(Cmd0::SET_KERNEL_WIDTH_M1, v);
        let order = if part_kernel && matches!(op.kind, NpuOpKind::Conv(_)) {
            WeightOrder::PartKernelFirst
        } else {
            WeightOrder::DepthFirst
        };
        let ks = KernelStride::new(
            k.stride_x as u32,
            k.stride_y as u32,
            k.dilation_x as u32,
            k.dilation_y as u32,
            order,
            KernelDecomposition::D8x8,
        );
        self.w.cmd0(Cmd0::SET_KERNEL_STRIDE, ks.0);
        Ok(())
    }

    /// WEIGHT/SCALE registers; on two-core configurations also WEIGHT1/SCALE1 (length 0 when
    /// only one core has channels).
    fn weights(&mut self, ctx: &Ctx, s: &WeightStreams, accesses: &mut Vec<Access>) -> Result<()> {
        let cores = self.accel.cores as usize;
        if s.cores.is_empty() || s.cores.len() > cores {
            return Err(Error::Internal(format!(
                "{}: {} weight streams for {} core(s)",
                ctx.node,
                s.cores.len(),
                cores
            )));
        }
        let region = ctx.unsigned("weight region", s.region.into(), MAX_REGION)?;
        let mem = Memory::Region(s.region);
        for c in &s.cores {
            self.w
                .check_range(ctx, "weight stream", c.weight_addr, c.weight_len)?;
            self.w
                .check_range(ctx, "scale stream", c.scale_addr, c.scale_len)?;
        }
        self.w.cmd0(Cmd0::SET_WEIGHT_REGION, region);
        let c0 = &s.cores[0];
        self.w
            .address(ctx, Cmd1::SET_WEIGHT_BASE, "weight base", c0.weight_addr)?;
        self.w
            .address(ctx, Cmd1::SET_WEIGHT_LENGTH, "weight length", c0.weight_len)?;
        accesses.push(Access::read(mem, c0.weight_addr, c0.weight_len));
        if let Some(c1) = s.cores.get(1) {
            self.w.address(
                ctx,
                Cmd1::SET_WEIGHT1_BASE,
                "weight base (core 1)",
                c1.weight_addr,
            )?;
            self.w.address(
                ctx,
                Cmd1::SET_WEIGHT1_LENGTH,
                "weight length (core 1)",
                c1.weight_len,
            )?;
            accesses.push(Access::read(mem, c1.weight_addr, c1.weight_len));
        } else if cores > 1 {
            self.w
                .address(ctx, Cmd1::SET_WEIGHT1_LENGTH, "weight length (core 1)", 0)?;
        }
        self.w.cmd0(Cmd0::SET_SCALE_REGION, region);
        self.w
            .address(ctx, Cmd1::SET_SCALE_BASE, "scale base", c0.scale_addr)?;
        self.w
            .address(ctx, Cmd1::SET_SCALE_LENGTH, "scale length", c0.scale_len)?;
        accesses.push(Access::read(mem, c0.scale_addr, c0.scale_len));
        if let Some(c1) = s.cores.get(1) {
            self.w.address(
                ctx,
                Cmd1::SET_SCALE1_BASE,
                "scale base (core 1)",
                c1.scale_addr,
            )?;
            self.w.address(
                ctx,
                Cmd1::SET_SCALE1_LENGTH,
                "scale length (core 1)",
                c1.scale_len,
            )?;
            accesses.push(Access::read(mem, c1.scale_addr, c1.scale_len));
        } else if cores > 1 {
            self.w
                .address(ctx, Cmd1::SET_SCALE1_LENGTH, "scale length (core 1)", 0)?;
        }
        Ok(())
    }

    fn activation(&mut self, ctx: &Ctx, op: &NpuOp, lut_slot: Option<u8>) -> Result<()> {
        let a = &op.activation;
        let function = match (lut_slot, a.builtin) {
            (Some(slot), None) => {
                ActivationFunction::from_bits(ActivationFunction::Table0.bits() + slot)
                    .ok_or_else(|| ctx.limit(format!("LUT slot {slot}")))?
            }
            (None, Some(Builtin::Sigmoid)) => ActivationFunction::Sigmoid,
            (None, Some(Builtin::Tanh)) => ActivationFunction::Tanh,
            (None, None) => ActivationFunction::Relu,
            (Some(_), Some(_)) => {
                return Err(ctx.limit("a lookup table and a built-in function together"));
            }
        };
        let param = regs::Activation::new(function, a.clip_range);
        self.w.cmd0(Cmd0::SET_ACTIVATION, param.0);
        let min = ctx.int16("activation minimum", a.min.into())?;
        self.w.cmd0(Cmd0::SET_ACTIVATION_MIN, min);
        let max = ctx.int16("activation maximum", a.max.into())?;
        self.w.cmd0(Cmd0::SET_ACTIVATION_MAX, max);
        Ok(())
    }

    /// The second operand: a scalar (IFM2_SCALAR) or a tensor, its zero point, precision and
    /// broadcast flags.
    fn ifm2(
        &mut self,
        ctx: &Ctx,
        op: &NpuOp,
        o2: &Operand2,
        f: Option<&Fm<'_>>,
        reversed: bool,
    ) -> Result<()> {
        let order = if reversed {
            Ifm2OperandOrder::OrderA
        } else {
            Ifm2OperandOrder::OrderB
        };
        let (zero_point, precision, broadcast) = match (o2, f) {
            (Operand2::Scalar { value, zero_point }, _) => {
                let v = ctx.int16("IFM2 scalar", (*value).into())?;
                self.w.cmd0(Cmd0::SET_IFM2_SCALAR, v);
                let (ty, p) = type_precision(op.ifm.dtype);
                (
                    *zero_point,
                    Ifm2Precision::new(ty, p, ActivationFormat::Nhwc),
                    Ifm2Broadcast::new(false, false, false, order, true),
                )
            }
            (Operand2::Tensor(fm), Some(f)) => {
                self.tiles(ctx, f, "IFM2", &IFM2_CMDS)?;
                let mut flags = [false; 3];
                for (axis, flag) in flags.iter_mut().enumerate() {
                    if fm.shape[axis] != op.ifm.shape[axis] {
                        if fm.shape[axis] != 1 {
                            return Err(ctx.limit(format!(
                                "IFM2 {:?} cannot be broadcast to IFM {:?}",
                                fm.shape, op.ifm.shape
                            )));
                        }
                        *flag = true;
                    }
                }
                let (ty, p) = type_precision(fm.dtype);
                (
                    fm.zero_point,
                    Ifm2Precision::new(ty, p, format(fm.layout)),
                    Ifm2Broadcast::new(flags[0], flags[1], flags[2], order, false),
                )
            }
            (Operand2::Tensor(_), None) => {
                return Err(Error::Internal(format!(
                    "{}: IFM2 tensor not resolved",
                    ctx.node
                )));
            }
        };
        let zp = ctx.int16("IFM2 zero point", zero_point.into())?;
        self.w.cmd0(Cmd0::SET_IFM2_ZERO_POINT, zp);
        self.w.cmd0(Cmd0::SET_IFM2_PRECISION, precision.0);
        self.w.cmd0(Cmd0::SET_IFM2_BROADCAST, broadcast.0);
        Ok(())
    }
}

/// The commands describing one feature map's box.
struct FmCmds {
    region: Cmd0,
    base: [Cmd1; 4],
    /// OFM only: the full box height/width (the tile registers follow).
    height_m1: Option<Cmd0>,
    width_m1: Option<Cmd0>,
    height0_m1: Cmd0,
    height1_m1: Cmd0,
    width0_m1: Cmd0,
    /// IFM2 has no depth register (it follows the IFM's).
    depth_m1: Option<Cmd0>,
    stride: [Cmd1; 3],
}

const IFM_CMDS: FmCmds = FmCmds {
    region: Cmd0::SET_IFM_REGION,
    base: [
        Cmd1::SET_IFM_BASE0,
        Cmd1::SET_IFM_BASE1,
        Cmd1::SET_IFM_BASE2,
        Cmd1::SET_IFM_BASE3,
    ],
    height_m1: None,
    width_m1: None,
    height0_m1: Cmd0::SET_IFM_HEIGHT0_M1,
    height1_m1: Cmd0::SET_IFM_HEIGHT1_M1,
    width0_m1: Cmd0::SET_IFM_WIDTH0_M1,
    depth_m1: Some(Cmd0::SET_IFM_DEPTH_M1),
    stride: [
        Cmd1::SET_IFM_STRIDE_Y,
        Cmd1::SET_IFM_STRIDE_X,
        Cmd1::SET_IFM_STRIDE_C,
    ],
};

const OFM_CMDS: FmCmds = FmCmds {
    region: Cmd0::SET_OFM_REGION,
    base: [
        Cmd1::SET_OFM_BASE0,
        Cmd1::SET_OFM_BASE1,
        Cmd1::SET_OFM_BASE2,
        Cmd1::SET_OFM_BASE3,
    ],
    height_m1: Some(Cmd0::SET_OFM_HEIGHT_M1),
    width_m1: Some(Cmd0::SET_OFM_WIDTH_M1),
    height0_m1: Cmd0::SET_OFM_HEIGHT0_M1,
    height1_m1: Cmd0::SET_OFM_HEIGHT1_M1,
    width0_m1: Cmd0::SET_OFM_WIDTH0_M1,
    depth_m1: Some(Cmd0::SET_OFM_DEPTH_M1),
    stride: [
        Cmd1::SET_OFM_STRIDE_Y,
        Cmd1::SET_OFM_STRIDE_X,
        Cmd1::SET_OFM_STRIDE_C,
    ],
};

const IFM2_CMDS: FmCmds = FmCmds {
    region: Cmd0::SET_IFM2_REGION,
    base: [
        Cmd1::SET_IFM2_BASE0,
        Cmd1::SET_IFM2_BASE1,
        Cmd1::SET_IFM2_BASE2,
        Cmd1::SET_IFM2_BASE3,
    ],
    height_m1: None,
    width_m1: None,
    height0_m1: Cmd0::SET_IFM2_HEIGHT0_M1,
    height1_m1: Cmd0::SET_IFM2_HEIGHT1_M1,
    width0_m1: Cmd0::SET_IFM2_WIDTH0_M1,
    depth_m1: None,
    stride: [
        Cmd1::SET_IFM2_STRIDE_Y,
        Cmd1::SET_IFM2_STRIDE_X,
        Cmd1::SET_IFM2_STRIDE_C,
    ],
};

/// Checks the kernel fits KERNEL_STRIDE and the size registers.
fn check_kernel(ctx: &Ctx, op: &NpuOp) -> Result<()> {
    let k = &op.kernel;
    if k.h == 0 || k.w == 0 || k.h > 1 << 16 || k.w > 1 << 16 {
        return Err(ctx.limit(format!("kernel {}x{}", k.h, k.w)));
    }
    for (what, v) in [("stride y", k.stride_y), ("stride x", k.stride_x)] {
        if !(1..=MAX_STRIDE).contains(&v) {
            return Err(ctx.limit(format!(
                "kernel {what} {v} (the register holds 1..={MAX_STRIDE})"
            )));
        }
    }
    for (what, v) in [("dilation y", k.dilation_y), ("dilation x", k.dilation_x)] {
        if !(1..=MAX_DILATION).contains(&v) {
            return Err(ctx.limit(format!(
                "kernel {what} {v} (the register holds 1..={MAX_DILATION})"
            )));
        }
    }
    Ok(())
}

fn type_precision(t: ElemType) -> (ActivationType, ActivationPrecision) {
    let ty = if t.signed() {
        ActivationType::Signed
    } else {
        ActivationType::Unsigned
    };
    let p = match t {
        ElemType::I8 | ElemType::U8 => ActivationPrecision::B8,
        ElemType::I16 => ActivationPrecision::B16,
        ElemType::I32 => ActivationPrecision::B32,
    };
    (ty, p)
}

fn format(l: Layout) -> ActivationFormat {
    match l {
        Layout::Nhwc => ActivationFormat::Nhwc,
        Layout::Nhcwb16 => ActivationFormat::Nhcwb16,
    }
}

#[cfg(test)]
mod tests;
