//! The register state that `cmd0`/`cmd1` commands update.
//!
//! Values are kept raw (as the commands carry them); operations decode and validate what they use
//! when they start, as the hardware does. Reset state is all zeros.

use crate::ethos_u::regs::{Cmd0, Cmd1, Command};

/// Registers describing one feature map (IFM, IFM2 or OFM).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FmRegs {
    /// Region (base pointer index), 3 bits.
    pub region: u8,
    /// Tile base addresses (40-bit).
    pub base: [u64; 4],
    /// `HEIGHT0_M1`: rows of tiles 0 (and 2 below it start there), minus one.
    pub height0_m1: u16,
    /// `HEIGHT1_M1`: rows of tile 1 (tile 3 starts below), minus one.
    pub height1_m1: u16,
    /// `WIDTH0_M1`: columns of tiles 0 and 2 (tiles 1 and 3 are to their right), minus one.
    pub width0_m1: u16,
    /// Stride between horizontal neighbours (NHWC), bytes.
    pub stride_x: u64,
    /// Stride between rows, bytes.
    pub stride_y: u64,
    /// Stride between 16-channel bricks (NHCWB16), bytes.
    pub stride_c: u64,
    /// Raw zero point (sign-interpreted by the precision).
    pub zero_point: u16,
    /// Raw precision parameter (`IfmPrecision`/`Ifm2Precision`/`OfmPrecision` layout).
    pub precision: u16,
}

/// Every register the command stream can set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegisterState {
    /// Input feature map.
    pub ifm: FmRegs,
    /// Second input feature map (elementwise).
    pub ifm2: FmRegs,
    /// Output feature map.
    pub ofm: FmRegs,
    /// `IFM_DEPTH_M1`.
    pub ifm_depth_m1: u16,
    /// `IFM_PAD_TOP`, `_LEFT`, `_RIGHT`, `_BOTTOM` (raw parameters).
    pub pad: [u16; 4],
    /// `IFM_UPSCALE` (raw).
    pub upscale: u16,
    /// `IFM_IB_END`.
    pub ifm_ib_end: u16,
    /// `OFM_WIDTH_M1`.
    pub ofm_width_m1: u16,
    /// `OFM_HEIGHT_M1`.
    pub ofm_height_m1: u16,
    /// `OFM_DEPTH_M1`.
    pub ofm_depth_m1: u16,
    /// `OFM_BLK_WIDTH_M1`, `_HEIGHT_M1`, `_DEPTH_M1`.
    pub ofm_blk_m1: [u16; 3],
    /// `KERNEL_WIDTH_M1` (dilated).
    pub kernel_width_m1: u16,
    /// `KERNEL_HEIGHT_M1` (dilated).
    pub kernel_height_m1: u16,
    /// `KERNEL_STRIDE` (raw `KernelStride`).
    pub kernel_stride: u16,
    /// `PARALLEL_MODE`.
    pub parallel_mode: u16,
    /// `ACC_FORMAT`.
    pub acc_format: u16,
    /// `ACTIVATION` (raw `Activation`).
    pub activation: u16,
    /// `ACTIVATION_MIN` (raw clip boundary).
    pub activation_min: u16,
    /// `ACTIVATION_MAX` (raw clip boundary).
    pub activation_max: u16,
    /// `WEIGHT_REGION`.
    pub weight_region: u8,
    /// `SCALE_REGION`.
    pub scale_region: u8,
    /// `WEIGHT_BASE`, `WEIGHT1_BASE`.
    pub weight_base: [u64; 2],
    /// `WEIGHT_LENGTH`, `WEIGHT1_LENGTH`.
    pub weight_length: [u32; 2],
    /// `SCALE_BASE`, `SCALE1_BASE`.
    pub scale_base: [u64; 2],
    /// `SCALE_LENGTH`, `SCALE1_LENGTH` (20 bits).
    pub scale_length: [u32; 2],
    /// `OFM_SCALE`: (shift, scale).
    pub ofm_scale: (u8, u32),
    /// `OPA_SCALE`: (shift, scale).
    pub opa_scale: (u8, u32),
    /// `OPB_SCALE` (16 bits).
    pub opb_scale: u16,
    /// `AB_START`.
    pub ab_start: u16,
    /// `BLOCKDEP`.
    pub blockdep: u16,
    /// `DMA0_SRC_REGION` (raw `DmaRegion`).
    pub dma_src_region: u16,
    /// `DMA0_DST_REGION` (raw `DmaRegion`).
    pub dma_dst_region: u16,
    /// `DMA0_SRC`.
    pub dma_src: u64,
    /// `DMA0_DST`.
    pub dma_dst: u64,
    /// `DMA0_LEN`.
    pub dma_len: u64,
    /// `DMA0_SKIP0`, `DMA0_SKIP1`.
    pub dma_skip: [u64; 2],
    /// `DMA0_SIZE0`, `DMA0_SIZE1`.
    pub dma_size: [u16; 2],
    /// `IFM2_BROADCAST` (raw `Ifm2Broadcast`).
    pub ifm2_broadcast: u16,
    /// `IFM2_SCALAR` (raw).
    pub ifm2_scalar: u16,
    /// `IFM2_IB_START`.
    pub ifm2_ib_start: u16,
    /// Last `NPU_OP_PMU_MASK` enable bit.
    pub pmu_mask: bool,
}

impl RegisterState {
    /// Applies a register-setting command. Returns false for operations (`NPU_OP_*`), which the
    /// caller executes.
    pub fn apply(&mut self, cmd: &Command) -> bool {
        match *cmd {
            Command::Cmd0 { op, param } => self.apply_cmd0(op, param),
            Command::Cmd1 { op, param, payload } => {
                self.apply_cmd1(op, param, payload);
                true
            }
        }
    }

    fn apply_cmd0(&mut self, op: Cmd0, p: u16) -> bool {
        let region = (p & 7) as u8;
        match op {
            Cmd0::OP_STOP
            | Cmd0::OP_IRQ
            | Cmd0::OP_CONV
            | Cmd0::OP_DEPTHWISE
            | Cmd0::OP_POOL
            | Cmd0::OP_ELEMENTWISE
            | Cmd0::OP_DMA_START
            | Cmd0::OP_DMA_WAIT
            | Cmd0::OP_KERNEL_WAIT => return false,
            Cmd0::OP_PMU_MASK => self.pmu_mask = p & 1 != 0,
            Cmd0::SET_IFM_PAD_TOP => self.pad[0] = p & 0x7f,
            Cmd0::SET_IFM_PAD_LEFT => self.pad[1] = p & 0x7f,
            Cmd0::SET_IFM_PAD_RIGHT => self.pad[2] = p & 0xff,
            Cmd0::SET_IFM_PAD_BOTTOM => self.pad[3] = p & 0xff,
            Cmd0::SET_IFM_DEPTH_M1 => self.ifm_depth_m1 = p,
            Cmd0::SET_IFM_PRECISION => self.ifm.precision = p,
            Cmd0::SET_IFM_UPSCALE => self.upscale = p & 3,
            Cmd0::SET_IFM_ZERO_POINT => self.ifm.zero_point = p,
            Cmd0::SET_IFM_WIDTH0_M1 => self.ifm.width0_m1 = p,
            Cmd0::SET_IFM_HEIGHT0_M1 => self.ifm.height0_m1 = p,
            Cmd0::SET_IFM_HEIGHT1_M1 => self.ifm.height1_m1 = p,
            Cmd0::SET_IFM_IB_END => self.ifm_ib_end = p & 0x3f,
            Cmd0::SET_IFM_REGION => self.ifm.region = region,
            Cmd0::SET_OFM_WIDTH_M1 => self.ofm_width_m1 = p,
            Cmd0::SET_OFM_HEIGHT_M1 => self.ofm_height_m1 = p,
            Cmd0::SET_OFM_DEPTH_M1 => self.ofm_depth_m1 = p,
            Cmd0::SET_OFM_PRECISION => self.ofm.precision = p,
            Cmd0::SET_OFM_BLK_WIDTH_M1 => self.ofm_blk_m1[0] = p & 0x3f,
            Cmd0::SET_OFM_BLK_HEIGHT_M1 => self.ofm_blk_m1[1] = p & 0x1f,
            Cmd0::SET_OFM_BLK_DEPTH_M1 => self.ofm_blk_m1[2] = p & 0x7f,
            Cmd0::SET_OFM_ZERO_POINT => self.ofm.zero_point = p,
            Cmd0::SET_OFM_WIDTH0_M1 => self.ofm.width0_m1 = p,
            Cmd0::SET_OFM_HEIGHT0_M1 => self.ofm.height0_m1 = p,
            Cmd0::SET_OFM_HEIGHT1_M1 => self.ofm.height1_m1 = p,
            Cmd0::SET_OFM_REGION => self.ofm.region = region,
            Cmd0::SET_KERNEL_WIDTH_M1 => self.kernel_width_m1 = p,
            Cmd0::SET_KERNEL_HEIGHT_M1 => self.kernel_height_m1 = p,
            Cmd0::SET_KERNEL_STRIDE => self.kernel_stride = p,
            Cmd0::SET_PARALLEL_MODE => self.parallel_mode = p & 1,
            Cmd0::SET_ACC_FORMAT => self.acc_format = p & 3,
            Cmd0::SET_ACTIVATION => self.activation = p,
            Cmd0::SET_ACTIVATION_MIN => self.activation_min = p,
            Cmd0::SET_ACTIVATION_MAX => self.activation_max = p,
            Cmd0::SET_WEIGHT_REGION => self.weight_region = region,
            Cmd0::SET_SCALE_REGION => self.scale_region = region,
            Cmd0::SET_AB_START => self.ab_start = p & 0x3f,
            Cmd0::SET_BLOCKDEP => self.blockdep = p & 3,
            Cmd0::SET_DMA0_SRC_REGION => self.dma_src_region = p,
            Cmd0::SET_DMA0_DST_REGION => self.dma_dst_region = p,
            Cmd0::SET_DMA0_SIZE0 => self.dma_size[0] = p,
            Cmd0::SET_DMA0_SIZE1 => self.dma_size[1] = p,
            Cmd0::SET_IFM2_BROADCAST => self.ifm2_broadcast = p,
            Cmd0::SET_IFM2_SCALAR => self.ifm2_scalar = p,
            Cmd0::SET_IFM2_PRECISION => self.ifm2.precision = p,
            Cmd0::SET_IFM2_ZERO_POINT => self.ifm2.zero_point = p,
            Cmd0::SET_IFM2_WIDTH0_M1 => self.ifm2.width0_m1 = p,
            Cmd0::SET_IFM2_HEIGHT0_M1 => self.ifm2.height0_m1 = p,
            Cmd0::SET_IFM2_HEIGHT1_M1 => self.ifm2.height1_m1 = p,
            Cmd0::SET_IFM2_IB_START => self.ifm2_ib_start = p & 0x3f,
            Cmd0::SET_IFM2_REGION => self.ifm2.region = region,
        }
        true
    }

    fn apply_cmd1(&mut self, op: Cmd1, p: u16, payload: u32) {
        let addr = (((p & 0xff) as u64) << 32) | payload as u64;
        let shift = (p & 0x3f) as u8;
        match op {
            Cmd1::SET_IFM_BASE0 => self.ifm.base[0] = addr,
            Cmd1::SET_IFM_BASE1 => self.ifm.base[1] = addr,
            Cmd1::SET_IFM_BASE2 => self.ifm.base[2] = addr,
            Cmd1::SET_IFM_BASE3 => self.ifm.base[3] = addr,
            Cmd1::SET_IFM_STRIDE_X => self.ifm.stride_x = addr,
            Cmd1::SET_IFM_STRIDE_Y => self.ifm.stride_y = addr,
            Cmd1::SET_IFM_STRIDE_C => self.ifm.stride_c = addr,
            Cmd1::SET_OFM_BASE0 => self.ofm.base[0] = addr,
            Cmd1::SET_OFM_BASE1 => self.ofm.base[1] = addr,
            Cmd1::SET_OFM_BASE2 => self.ofm.base[2] = addr,
            Cmd1::SET_OFM_BASE3 => self.ofm.base[3] = addr,
            Cmd1::SET_OFM_STRIDE_X => self.ofm.stride_x = addr,
            Cmd1::SET_OFM_STRIDE_Y => self.ofm.stride_y = addr,
            Cmd1::SET_OFM_STRIDE_C => self.ofm.stride_c = addr,
            Cmd1::SET_WEIGHT_BASE => self.weight_base[0] = addr,
            Cmd1::SET_WEIGHT_LENGTH => self.weight_length[0] = payload,
            Cmd1::SET_SCALE_BASE => self.scale_base[0] = addr,
            Cmd1::SET_SCALE_LENGTH => self.scale_length[0] = payload & 0xf_ffff,
            Cmd1::SET_OFM_SCALE => self.ofm_scale = (shift, payload),
            Cmd1::SET_OPA_SCALE => self.opa_scale = (shift, payload),
            Cmd1::SET_OPB_SCALE => self.opb_scale = payload as u16,
            Cmd1::SET_DMA0_SRC => self.dma_src = addr,
            Cmd1::SET_DMA0_DST => self.dma_dst = addr,
            Cmd1::SET_DMA0_LEN => self.dma_len = addr,
            Cmd1::SET_DMA0_SKIP0 => self.dma_skip[0] = addr,
            Cmd1::SET_DMA0_SKIP1 => self.dma_skip[1] = addr,
            Cmd1::SET_IFM2_BASE0 => self.ifm2.base[0] = addr,
            Cmd1::SET_IFM2_BASE1 => self.ifm2.base[1] = addr,
            Cmd1::SET_IFM2_BASE2 => self.ifm2.base[2] = addr,
            Cmd1::SET_IFM2_BASE3 => self.ifm2.base[3] = addr,
            Cmd1::SET_IFM2_STRIDE_X => self.ifm2.stride_x = addr,
            Cmd1::SET_IFM2_STRIDE_Y => self.ifm2.stride_y = addr,
            Cmd1::SET_IFM2_STRIDE_C => self.ifm2.stride_c = addr,
            Cmd1::SET_WEIGHT1_BASE => self.weight_base[1] = addr,
            Cmd1::SET_WEIGHT1_LENGTH => self.weight_length[1] = payload,
            Cmd1::SET_SCALE1_BASE => self.scale_base[1] = addr,
            Cmd1::SET_SCALE1_LENGTH => self.scale_length[1] = payload & 0xf_ffff,
        }
    }
}
