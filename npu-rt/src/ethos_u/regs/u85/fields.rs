//! Ethos-U85 field enumerations, and the bit layout of every command's fields.
//!
//! The layout table ([`Cmd0::fields`], [`Cmd1::fields`]) numbers bits across the whole command:
//! the first word is bits 0..=31 (the parameter is 16..=31), a `cmd1` payload is bits 32..=63
//! ([`super::Command::bits`]). It lists the fields in the order Vela's dump prints them; the
//! disassembler and any later consumer (simulator, emitter) read values through it.

use core::fmt;

use super::opcode::{Cmd0, Cmd1, Command, Opcode};
use crate::ethos_u::regs::fields::field_enum;

/// Enumerations with the same values and names on U55/U65 and U85.
pub use crate::ethos_u::regs::fields::{
    ActivationFormat, ActivationPrecision, ActivationType, DmaRegionMode, DmaStrideMode,
    IfmUpscaleMode, KernelDecomposition, KernelDilation, OfmScaleMode, WeightOrder, bits,
};

field_enum! {
    /// Accumulator format (`NPU_SET_ACC_FORMAT`); U85 has I48 where U55/U65 have I40 and F16.
    AccFormat: u8, "ACC_FORMAT_" {
        I32 = 0 => "I32",
        I48 = 1 => "I48",
    }
}

field_enum! {
    /// Accumulator source (`NPU_SET_ACC_FORMAT`): reset, keep from the previous operation, or
    /// load from IFM2.
    AccInput: u8, "ACC_INPUT_" {
        Reset = 0 => "RESET",
        Keep = 1 => "KEEP",
        Ifm2 = 2 => "IFM2",
    }
}

field_enum! {
    /// Whether the accumulators are written out (`NPU_SET_ACC_FORMAT`).
    AccOutput: u8, "ACC_OUTPUT_" {
        Enable = 0 => "ENABLE",
        Disable = 1 => "DISABLE",
    }
}

field_enum! {
    /// Clipping of the activation (`NPU_SET_ACTIVATION`).
    ActivationClipRange: u8, "ACTIVATION_CLIP_RANGE_" {
        B16 = 0 => "B16",
        None = 1 => "NONE",
    }
}

field_enum! {
    /// Activation function (`NPU_SET_ACTIVATION`): no LUT, a LUT of the given input/output types,
    /// or the built-in tanh/sigmoid.
    ActivationFunction: u8, "ACTIVATION_FUNCTION_" {
        LutNone = 0 => "LUT_NONE",
        LutU8U8 = 1 => "LUT_U8_U8",
        LutS8S8 = 4 => "LUT_S8_S8",
        LutS8S16 = 5 => "LUT_S8_S16",
        LutS8S32 = 7 => "LUT_S8_S32",
        LutS16S16 = 8 => "LUT_S16_S16",
        LutS16S32 = 9 => "LUT_S16_S32",
        LutTanh = 10 => "LUT_TANH",
        LutSigmoid = 11 => "LUT_SIGMOID",
    }
}

field_enum! {
    /// Axis the OFM is written reversed along (`NPU_SET_OFM_PRECISION`).
    ActivationReverse: u8, "ACTIVATION_REVERSE_" {
        None = 0 => "NONE",
        H = 1 => "H",
        W = 2 => "W",
        C = 3 => "C",
    }
}

field_enum! {
    /// Feature-map storage (`NPU_SET_IFM/IFM2/OFM_PRECISION`).
    ActivationStorage: u8, "ACTIVATION_STORAGE_" {
        Tile2x2 = 0 => "TILE2X2",
        Tile3x1 = 1 => "TILE3X1",
        Chained = 2 => "CHAINED",
        None = 3 => "NONE",
    }
}

field_enum! {
    /// Axis order the OFM is written in (`NPU_SET_OFM_PRECISION`).
    ActivationTranspose: u8, "ACTIVATION_TRANSPOSE_" {
        Hwc = 0 => "HWC",
        Whc = 1 => "WHC",
        Hcw = 2 => "HCW",
        Wch = 3 => "WCH",
        Chw = 6 => "CHW",
        Cwh = 7 => "CWH",
    }
}

field_enum! {
    /// Condition of `NPU_OP_BRANCH`.
    BranchCond: u8, "BRANCH_COND_" {
        Always = 0 => "ALWAYS",
        RfTrue = 1 => "RF_TRUE",
    }
}

field_enum! {
    /// Broadcast of an input (`NPU_SET_IFM_BROADCAST`, `NPU_SET_IFM2_BROADCAST`): the axes
    /// repeated, or a scalar.
    BroadcastMode: u8, "BROADCAST_MODE_" {
        None = 0 => "NONE",
        H = 1 => "H",
        W = 2 => "W",
        Hw = 3 => "HW",
        C = 4 => "C",
        Ch = 5 => "CH",
        Cw = 6 => "CW",
        Cwh = 7 => "CWH",
        Scalar = 8 => "SCALAR",
    }
}

field_enum! {
    /// Indexed (gather/scatter) DMA (`NPU_SET_DMA0_SRC/DST_REGION`).
    DmaIdxMode: u8, "DMA_IDX_MODE_" {
        Disabled = 0 => "DISABLED",
        Enabled = 1 => "ENABLED",
    }
}

field_enum! {
    /// Elementwise operation (`NPU_OP_ELEMENTWISE` parameter).
    ElementwiseMode: u8, "ELEMENTWISE_MODE_" {
        Mul = 0 => "MUL",
        Add = 1 => "ADD",
        Sub = 2 => "SUB",
        Min = 3 => "MIN",
        Max = 4 => "MAX",
        Lrelu = 5 => "LRELU",
        Abs = 6 => "ABS",
        Clz = 7 => "CLZ",
        Shr = 8 => "SHR",
        Shl = 9 => "SHL",
        Lsr = 10 => "LSR",
        Div = 11 => "DIV",
        CmpEq = 16 => "CMP_EQ",
        CmpNe = 17 => "CMP_NE",
        CmpGe = 18 => "CMP_GE",
        CmpGt = 19 => "CMP_GT",
        And = 33 => "AND",
        Or = 34 => "OR",
        Xor = 35 => "XOR",
        Not = 36 => "NOT",
        AndNot = 42 => "AND_NOT",
    }
}

field_enum! {
    /// Microblock shape of the OFM traversal (`NPU_SET_ACC_FORMAT`).
    Microblock: u8, "MICROBLOCK_" {
        U1x1 = 0 => "U1X1",
        U1x2 = 1 => "U1X2",
        U1x4 = 2 => "U1X4",
        U2x2 = 3 => "U2X2",
        U2x4 = 4 => "U2X4",
        U4x4 = 5 => "U4X4",
    }
}

field_enum! {
    /// Pooling operation (`NPU_OP_POOL` parameter).
    PoolingMode: u8, "POOLING_MODE_" {
        Max = 0 => "MAX",
        Average = 1 => "AVERAGE",
        ReduceSum = 2 => "REDUCE_SUM",
        Sum = 3 => "SUM",
        None = 4 => "NONE",
        Min = 5 => "MIN",
        ArgmaxX = 6 => "ARGMAX_X",
        ArgmaxY = 7 => "ARGMAX_Y",
    }
}

field_enum! {
    /// Resize interpolation (`NPU_OP_RESIZE` parameter).
    ResizeMode: u8, "RESIZE_MODE_" {
        Bilinear = 0 => "BILINEAR",
        Replicate = 1 => "REPLICATE",
        Nearest = 2 => "NEAREST",
    }
}

field_enum! {
    /// Rounding of the input scaling (`NPU_SET_IFM_SCALE`, `NPU_SET_IFM2_SCALE`).
    RoundModeIfm: u8, "ROUND_MODE_IFM_" {
        DoubleSymmetric = 0 => "DOUBLE_SYMMETRIC",
        Natural = 1 => "NATURAL",
    }
}

field_enum! {
    /// Rounding of the output scaling (`NPU_SET_OFM_SCALE`).
    RoundModeOfm: u8, "ROUND_MODE_OFM_" {
        DoubleSymmetric = 0 => "DOUBLE_SYMMETRIC",
        Natural = 1 => "NATURAL",
        DoubleAsymmetric = 2 => "DOUBLE_ASYMMETRIC",
        Symmetric = 3 => "SYMMETRIC",
        TruncateToZero = 4 => "TRUNCATE_TO_ZERO",
        TruncateToLower = 5 => "TRUNCATE_TO_LOWER",
    }
}

field_enum! {
    /// Weight stream format (`NPU_SET_WEIGHT_FORMAT`): standard or fast weight decoder.
    WeightFormat: u8, "WEIGHT_FORMAT_" {
        Swd = 0 => "SWD",
        Fwd = 1 => "FWD",
    }
}

field_enum! {
    /// Weight sparsity (`NPU_SET_WEIGHT_FORMAT`).
    WeightSparsity: u8, "WEIGHT_SPARSITY_" {
        None = 0 => "NONE",
        Sparse2_4 = 1 => "SPARSE_2_4",
    }
}

/// How a field's bits are read and printed.
#[derive(Clone, Copy, Debug)]
pub enum FieldKind {
    /// Unsigned integer, printed in decimal.
    Unsigned,
    /// Two's-complement integer of the field's width, printed in decimal.
    Signed,
    /// The 40-bit address of address-like `cmd1` commands: parameter bits 0..=7 above the
    /// payload; printed in hexadecimal with `0x`.
    Address,
    /// An enumeration: the function names an encoding, None when undefined (printed `****`).
    Enum(fn(u32) -> Option<&'static str>),
}

/// One field of a command: name (as Vela prints it), position and kind.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    /// The name Vela's dump prints.
    pub name: &'static str,
    /// Lowest bit in the 64-bit command ([`Command::bits`]); unused for [`FieldKind::Address`].
    pub lo: u8,
    /// Width in bits; unused for [`FieldKind::Address`].
    pub width: u8,
    /// How the bits are read.
    pub kind: FieldKind,
}

impl Field {
    /// The raw value of the field in a command given as 64 bits (zero-extended; Signed fields
    /// are sign-extended by [`Field::signed_value`]).
    pub const fn value(&self, cmd: u64) -> u64 {
        match self.kind {
            FieldKind::Address => ((cmd >> 16) & 0xff) << 32 | cmd >> 32,
            _ => {
                let mask = if self.width >= 64 {
                    u64::MAX
                } else {
                    (1u64 << self.width) - 1
                };
                (cmd >> (self.lo as u32 & 63)) & mask
            }
        }
    }

    /// The value sign-extended from the field's width (for [`FieldKind::Signed`] fields).
    pub const fn signed_value(&self, cmd: u64) -> i64 {
        let v = self.value(cmd);
        let shift = 64u32.saturating_sub(self.width as u32) & 63;
        ((v << shift) as i64) >> shift
    }

    /// Writes the value of this field of `cmd` as Vela's dump does.
    pub fn write_value<W: fmt::Write>(&self, w: &mut W, cmd: u64) -> fmt::Result {
        match self.kind {
            FieldKind::Unsigned => write!(w, "{}", self.value(cmd)),
            // Vela's dump converts through C++'s usual arithmetic conversions: a field narrower
            // than `int` prints sign-extended, but a 32-bit field (only `NPU_SET_OP_SCALAR`) is
            // `unsigned` there, and its expression for negative values prints the unsigned
            // value minus one. The dump is the oracle, so the text follows it;
            // `signed_value` stays the true value.
            FieldKind::Signed if self.width >= 32 => {
                let v = self.value(cmd);
                let shown = if v > i32::MAX as u64 { v - 1 } else { v };
                write!(w, "{shown}")
            }
            FieldKind::Signed => write!(w, "{}", self.signed_value(cmd)),
            FieldKind::Address => write!(w, "{:#x}", self.value(cmd)),
            FieldKind::Enum(name) => {
                let v = self.value(cmd);
                let s = if v > u32::MAX as u64 {
                    None
                } else {
                    name(v as u32)
                };
                w.write_str(s.unwrap_or("****"))
            }
        }
    }
}

/// A `'static` field table from an expression a `const fn` may not return a reference to.
macro_rules! table {
    ($($f:expr),* $(,)?) => {{
        const T: &[Field] = &[$($f),*];
        T
    }};
}

const fn u(name: &'static str, lo: u8, width: u8) -> Field {
    Field {
        name,
        lo,
        width,
        kind: FieldKind::Unsigned,
    }
}

const fn s(name: &'static str, lo: u8, width: u8) -> Field {
    Field {
        name,
        lo,
        width,
        kind: FieldKind::Signed,
    }
}

const fn e(name: &'static str, lo: u8, width: u8, f: fn(u32) -> Option<&'static str>) -> Field {
    Field {
        name,
        lo,
        width,
        kind: FieldKind::Enum(f),
    }
}

const NONE: &[Field] = &[];
const MASK: &[Field] = &[u("mask", 16, 16)];
const PAD7: &[Field] = &[u("pad", 16, 7)];
const PAD8: &[Field] = &[u("pad", 16, 8)];
const DEPTH16: &[Field] = &[u("depth_m1", 16, 16)];
const WIDTH16: &[Field] = &[u("width_m1", 16, 16)];
const HEIGHT16: &[Field] = &[u("height_m1", 16, 16)];
const ZERO_POINT: &[Field] = &[u("zero_point", 16, 16)];
const REGION: &[Field] = &[u("region", 16, 3)];
const CLIP: &[Field] = &[u("clip_boundary", 16, 16)];
const SIZE: &[Field] = &[u("size", 16, 16)];
const BROADCAST: &[Field] = &[e("broadcast_mode", 16, 4, BroadcastMode::name_of_bits)];
// IFM and IFM2 precision: type bit 16, precision 18..=19, format 22..=23, storage 30..=31.
const IFM_PRECISION: &[Field] = &[
    e("activation_type", 16, 1, ActivationType::name_of_bits),
    e(
        "activation_precision",
        18,
        2,
        ActivationPrecision::name_of_bits,
    ),
    e("activation_format", 22, 2, ActivationFormat::name_of_bits),
    e("activation_storage", 30, 2, ActivationStorage::name_of_bits),
];
const OFM_PRECISION: &[Field] = &[
    e("activation_type", 16, 1, ActivationType::name_of_bits),
    e(
        "activation_precision",
        17,
        2,
        ActivationPrecision::name_of_bits,
    ),
    e("activation_format", 22, 2, ActivationFormat::name_of_bits),
    e("scale_mode", 24, 1, OfmScaleMode::name_of_bits),
    e("activation_reverse", 25, 2, ActivationReverse::name_of_bits),
    e(
        "activation_transpose",
        27,
        3,
        ActivationTranspose::name_of_bits,
    ),
    e("activation_storage", 30, 2, ActivationStorage::name_of_bits),
];
const KERNEL_STRIDE: &[Field] = &[
    u("stride_x_lsb", 16, 1),
    u("stride_y_lsb", 17, 1),
    e("weight_order", 18, 1, WeightOrder::name_of_bits),
    e("dilation_x", 19, 1, KernelDilation::name_of_bits),
    e("dilation_y", 20, 1, KernelDilation::name_of_bits),
    e("decomposition", 21, 1, KernelDecomposition::name_of_bits),
    u("stride_x_msb", 22, 1),
    u("stride_y_msb", 25, 1),
];
const ACC_FORMAT: &[Field] = &[
    e("acc_format", 16, 2, AccFormat::name_of_bits),
    e("acc_input", 20, 2, AccInput::name_of_bits),
    e("acc_output", 22, 1, AccOutput::name_of_bits),
    e("microblock", 24, 3, Microblock::name_of_bits),
];
const ACTIVATION: &[Field] = &[
    e(
        "activation_function",
        16,
        5,
        ActivationFunction::name_of_bits,
    ),
    u("table", 21, 3),
    e(
        "activation_clip_range",
        28,
        1,
        ActivationClipRange::name_of_bits,
    ),
];
const WEIGHT_FORMAT: &[Field] = &[
    e("weight_format", 16, 1, WeightFormat::name_of_bits),
    e("weight_sparsity", 20, 1, WeightSparsity::name_of_bits),
];
const DMA_SRC_REGION: &[Field] = &[
    u("region", 16, 3),
    e("region_mode", 24, 1, DmaRegionMode::name_of_bits),
    e("stride_mode", 25, 2, DmaStrideMode::name_of_bits),
    e("idx_mode", 27, 1, DmaIdxMode::name_of_bits),
];
// The destination has no stride mode of its own (the source's applies).
const DMA_DST_REGION: &[Field] = &[
    u("region", 16, 3),
    e("region_mode", 24, 1, DmaRegionMode::name_of_bits),
    e("idx_mode", 27, 1, DmaIdxMode::name_of_bits),
];
const ADDRESS: &[Field] = &[Field {
    name: "addr",
    lo: 16,
    width: 40,
    kind: FieldKind::Address,
}];
const LENGTH32: &[Field] = &[u("length", 32, 32)];
const LENGTH20: &[Field] = &[u("length", 32, 20)];
const OFM_SCALE: &[Field] = &[
    u("shift", 16, 6),
    u("dbl_rnd", 22, 5),
    e("round_mode", 29, 3, RoundModeOfm::name_of_bits),
    u("scale", 32, 31),
];
const IFM_SCALE: &[Field] = &[
    u("shift", 16, 6),
    u("dbl_rnd", 22, 5),
    e("round_mode", 29, 1, RoundModeIfm::name_of_bits),
    u("scale", 32, 31),
];
const RESIZE_STEP: &[Field] = &[
    u("one_step_int", 16, 4),
    u("blk_step_int", 20, 11),
    u("one_step_mod", 32, 11),
    u("blk_step_mod", 48, 11),
];

impl Cmd0 {
    /// The fields of this command, in the order Vela's dump prints them.
    pub const fn fields(self) -> &'static [Field] {
        use Cmd0::*;
        const POOL: &[Field] = &[e("pooling_mode", 16, 3, PoolingMode::name_of_bits)];
        const ELEMENTWISE: &[Field] =
            &[e("elementwise_mode", 16, 6, ElementwiseMode::name_of_bits)];
        const RESIZE: &[Field] = &[e("resize_mode", 16, 2, ResizeMode::name_of_bits)];
        const UPSCALE: &[Field] = &[e("mode", 16, 2, IfmUpscaleMode::name_of_bits)];
        match self {
            OP_STOP | OP_IRQ => MASK,
            OP_CONV => table!(u("weights_ifm2", 16, 1)),
            OP_DEPTHWISE | OP_DMA_START => NONE,
            OP_POOL => POOL,
            OP_ELEMENTWISE => ELEMENTWISE,
            OP_RESIZE => RESIZE,
            OP_DMA_WAIT => table!(u("k", 16, 2)),
            OP_KERNEL_WAIT => table!(u("n", 16, 1)),
            OP_PMU_MASK => table!(u("enable", 16, 1)),
            SET_IFM_PAD_TOP | SET_IFM_PAD_LEFT => PAD7,
            SET_IFM_PAD_RIGHT | SET_IFM_PAD_BOTTOM => PAD8,
            SET_IFM_DEPTH_M1 | SET_OFM_DEPTH_M1 => DEPTH16,
            SET_IFM_PRECISION | SET_IFM2_PRECISION => IFM_PRECISION,
            SET_IFM_UPSCALE => UPSCALE,
            SET_IFM_BROADCAST | SET_IFM2_BROADCAST => BROADCAST,
            SET_IFM_ZERO_POINT | SET_OFM_ZERO_POINT | SET_IFM2_ZERO_POINT => ZERO_POINT,
            SET_IFM_WIDTH0_M1 | SET_OFM_WIDTH_M1 | SET_OFM_WIDTH0_M1 | SET_KERNEL_WIDTH_M1
            | SET_IFM2_WIDTH0_M1 => WIDTH16,
            SET_IFM_HEIGHT0_M1 | SET_IFM_HEIGHT1_M1 | SET_OFM_HEIGHT_M1 | SET_OFM_HEIGHT0_M1
            | SET_OFM_HEIGHT1_M1 | SET_KERNEL_HEIGHT_M1 | SET_IFM2_HEIGHT0_M1
            | SET_IFM2_HEIGHT1_M1 => HEIGHT16,
            SET_IFM_REGION | SET_OFM_REGION | SET_WEIGHT_REGION | SET_SCALE_REGION
            | SET_DMA0_IDX_REGION | SET_IFM2_REGION => REGION,
            SET_OFM_PRECISION => OFM_PRECISION,
            SET_OFM_BLK_WIDTH_M1 => table!(u("width_m1", 16, 7)),
            SET_OFM_BLK_HEIGHT_M1 => table!(u("height_m1", 16, 7)),
            SET_OFM_BLK_DEPTH_M1 => table!(u("depth_m1", 16, 10)),
            SET_KERNEL_STRIDE => KERNEL_STRIDE,
            SET_ACC_FORMAT => ACC_FORMAT,
            SET_ACTIVATION => ACTIVATION,
            SET_ACTIVATION_MIN | SET_ACTIVATION_MAX => CLIP,
            SET_RESIZE_X_SCALE_N_M1 => table!(u("resize_x_scale_n_m1", 16, 11)),
            SET_RESIZE_Y_SCALE_N_M1 => table!(u("resize_y_scale_n_m1", 16, 11)),
            SET_RESIZE_X_OFFSET => table!(s("resize_x_offset", 16, 12)),
            SET_RESIZE_Y_OFFSET => table!(s("resize_y_offset", 16, 12)),
            SET_WEIGHT_FORMAT => WEIGHT_FORMAT,
            SET_BLOCKDEP => table!(u("blockdep", 16, 3)),
            SET_DMA0_SRC_REGION => DMA_SRC_REGION,
            SET_DMA0_DST_REGION => DMA_DST_REGION,
            SET_DMA0_SIZE0 | SET_DMA0_SIZE1 => SIZE,
        }
    }
}

impl Cmd1 {
    /// The fields of this command, in the order Vela's dump prints them.
    pub const fn fields(self) -> &'static [Field] {
        use Cmd1::*;
        const BRANCH: &[Field] = &[
            e("branch_cond", 16, 1, BranchCond::name_of_bits),
            u("branch_target", 32, 32),
        ];
        match self {
            SET_WEIGHT_LENGTH | SET_WEIGHT1_LENGTH | SET_WEIGHT2_LENGTH | SET_WEIGHT3_LENGTH => {
                LENGTH32
            }
            SET_SCALE_LENGTH => LENGTH20,
            SET_OFM_SCALE => OFM_SCALE,
            SET_IFM_SCALE | SET_IFM2_SCALE => IFM_SCALE,
            SET_OP_SCALAR => table!(s("scalar", 32, 32)),
            SET_DMA0_IDX_MAX => table!(u("idx_max", 32, 31)),
            SET_RESIZE_X_STEP | SET_RESIZE_Y_STEP => RESIZE_STEP,
            OP_BRANCH => BRANCH,
            // Bases, strides, DMA addresses, lengths and skips: 40-bit addresses.
            SET_IFM_BASE0 | SET_IFM_BASE1 | SET_IFM_BASE2 | SET_IFM_BASE3 | SET_IFM_STRIDE_X
            | SET_IFM_STRIDE_Y | SET_IFM_STRIDE_C | SET_OFM_BASE0 | SET_OFM_BASE1
            | SET_OFM_BASE2 | SET_OFM_BASE3 | SET_OFM_STRIDE_X | SET_OFM_STRIDE_Y
            | SET_OFM_STRIDE_C | SET_WEIGHT_BASE | SET_SCALE_BASE | SET_DMA0_SRC | SET_DMA0_DST
            | SET_DMA0_LEN | SET_DMA0_SRC_STRIDE0 | SET_DMA0_SRC_STRIDE1 | SET_DMA0_DST_STRIDE0
            | SET_DMA0_DST_STRIDE1 | SET_DMA0_IDX | SET_DMA0_IDX_SKIP1 | SET_IFM2_BASE0
            | SET_IFM2_BASE1 | SET_IFM2_BASE2 | SET_IFM2_BASE3 | SET_IFM2_STRIDE_X
            | SET_IFM2_STRIDE_Y | SET_IFM2_STRIDE_C | SET_WEIGHT1_BASE | SET_WEIGHT2_BASE
            | SET_WEIGHT3_BASE => ADDRESS,
        }
    }
}

impl Opcode {
    /// The fields of this command, in the order Vela's dump prints them.
    pub const fn fields(self) -> &'static [Field] {
        match self {
            Opcode::Cmd0(c) => c.fields(),
            Opcode::Cmd1(c) => c.fields(),
        }
    }
}

impl Command {
    /// The field called `name` and its raw value, if this command has one.
    pub fn field(&self, name: &str) -> Option<(Field, u64)> {
        let bits = self.bits();
        self.opcode()
            .fields()
            .iter()
            .find(|f| f.name == name)
            .map(|f| (*f, f.value(bits)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_vela_values() {
        // op_add on ethos-u85-256: NPU_SET_IFM_SCALE 1292 (shift 12, dbl_rnd 20).
        let c = Command::Cmd1 {
            op: Cmd1::SET_IFM_SCALE,
            param: 1292,
            payload: 2147422445,
        };
        assert_eq!(c.field("shift").map(|f| f.1), Some(12));
        assert_eq!(c.field("dbl_rnd").map(|f| f.1), Some(20));
        assert_eq!(c.field("scale").map(|f| f.1), Some(2147422445));
        let a = Command::Cmd1 {
            op: Cmd1::SET_IFM_BASE0,
            param: 0x12,
            payload: 0x3456_7890,
        };
        assert_eq!(a.field("addr").map(|f| f.1), Some(0x12_3456_7890));
        let o = Command::Cmd0 {
            op: Cmd0::SET_RESIZE_X_OFFSET,
            param: 0xfff,
        };
        let (f, _) = o.field("resize_x_offset").unwrap();
        assert_eq!(f.signed_value(o.bits()), -1);
        assert_eq!(
            ElementwiseMode::name_of_bits(42),
            Some("ELEMENTWISE_MODE_AND_NOT")
        );
        assert_eq!(ElementwiseMode::name_of_bits(12), None);
        assert_eq!(ActivationStorage::name_of_bits(256), None);
    }
}
