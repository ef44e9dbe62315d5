//! Register field enumerations and the packed parameters of `cmd0`/`cmd1` commands.
//!
//! Each enumeration has `from_bits` (None for undefined encodings), `bits` and `name`; the name
//! is the C-style constant Arm's tools print (e.g. `ROUND_MODE_DBL`). Each packed parameter is a
//! newtype over the raw 16-bit parameter with typed getters and a `new` constructor, so the
//! compiler's emitter, the driver and the simulator share one encoding.

use core::fmt;

/// Extracts `width` bits of `v` starting at bit `lo`.
pub const fn bits(v: u32, lo: u32, width: u32) -> u32 {
    (v >> lo) & ((1u32 << width) - 1)
}

macro_rules! field_enum {
    (
        $(#[$m:meta])* $name:ident : $repr:ty, $prefix:literal {
            $($(#[$vm:meta])* $var:ident = $val:literal => $s:literal,)*
        }
    ) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr($repr)]
        pub enum $name {
            $($(#[$vm])* #[doc = concat!("`", $prefix, $s, "`")] $var = $val,)*
        }

        impl $name {
            /// Every defined value, in numeric order.
            pub const ALL: &'static [$name] = &[$($name::$var,)*];

            /// The value with this encoding, if defined.
            pub const fn from_bits(v: $repr) -> Option<Self> {
                match v {
                    $($val => Some(Self::$var),)*
                    _ => None,
                }
            }

            /// The encoding.
            pub const fn bits(self) -> $repr {
                self as $repr
            }

            /// The C-style name Arm's tools print, e.g. `ROUND_MODE_DBL`.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Self::$var => concat!($prefix, $s),)*
                }
            }

            /// The name of the value encoded by a field's bits (None when undefined), for
            /// table-driven disassembly.
            pub const fn name_of_bits(v: u32) -> Option<&'static str> {
                if v > <$repr>::MAX as u32 {
                    return None;
                }
                match Self::from_bits(v as $repr) {
                    Some(e) => Some(e.name()),
                    None => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

// Ethos-U85 shares the enumeration machinery (`regs::u85::fields`).
pub(crate) use field_enum;

field_enum! {
    /// Accumulator format (`NPU_SET_ACC_FORMAT`).
    AccFormat: u8, "ACC_FORMAT_" {
        I32 = 0 => "I32",
        I40 = 1 => "I40",
        F16 = 2 => "F16",
    }
}

field_enum! {
    /// Range the activation clips to (`NPU_SET_ACTIVATION`).
    ActivationClipRange: u8, "ACTIVATION_CLIP_RANGE_" {
        OfmPrecision = 0 => "OFM_PRECISION",
        ForceUint8 = 2 => "FORCE_UINT8",
        ForceInt8 = 3 => "FORCE_INT8",
        ForceInt16 = 5 => "FORCE_INT16",
    }
}

field_enum! {
    /// Feature-map memory layout.
    ActivationFormat: u8, "ACTIVATION_FORMAT_" {
        Nhwc = 0 => "NHWC",
        Nhcwb16 = 1 => "NHCWB16",
    }
}

field_enum! {
    /// Activation function (`NPU_SET_ACTIVATION`); `Table0..Table7` select a 256-byte LUT slot.
    ActivationFunction: u8, "ACTIVATION_FUNCTION_" {
        Relu = 0 => "RELU",
        Tanh = 3 => "TANH",
        Sigmoid = 4 => "SIGMOID",
        Table0 = 16 => "TABLE_0",
        Table1 = 17 => "TABLE_1",
        Table2 = 18 => "TABLE_2",
        Table3 = 19 => "TABLE_3",
        Table4 = 20 => "TABLE_4",
        Table5 = 21 => "TABLE_5",
        Table6 = 22 => "TABLE_6",
        Table7 = 23 => "TABLE_7",
    }
}

impl ActivationFunction {
    /// The LUT slot (0..=7) for the table functions.
    pub const fn table_index(self) -> Option<u8> {
        let v = self as u8;
        if v >= 16 { Some(v - 16) } else { None }
    }
}

field_enum! {
    /// Element size of a feature map.
    ActivationPrecision: u8, "ACTIVATION_PRECISION_" {
        B8 = 0 => "B8",
        B16 = 1 => "B16",
        B32 = 2 => "B32",
        B64 = 3 => "B64",
    }
}

impl ActivationPrecision {
    /// Bytes per element.
    pub const fn bytes(self) -> usize {
        1 << (self as usize)
    }
}

field_enum! {
    /// Signedness of a feature map.
    ActivationType: u8, "ACTIVATION_TYPE_" {
        Unsigned = 0 => "UNSIGNED",
        Signed = 1 => "SIGNED",
    }
}

field_enum! {
    /// AXI memory type encoding (`REGIONCFG`, `AXI_LIMITn`).
    AxiMemEncoding: u8, "AXI_MEM_ENCODING_" {
        DeviceNonBufferable = 0 => "DEVICE_NON_BUFFERABLE",
        DeviceBufferable = 1 => "DEVICE_BUFFERABLE",
        NormalNonCacheableNonBufferable = 2 => "NORMAL_NON_CACHEABLE_NON_BUFFERABLE",
        NormalNonCacheableBufferable = 3 => "NORMAL_NON_CACHEABLE_BUFFERABLE",
        WriteThroughNoAllocate = 4 => "WRITE_THROUGH_NO_ALLOCATE",
        WriteThroughReadAllocate = 5 => "WRITE_THROUGH_READ_ALLOCATE",
        WriteThroughWriteAllocate = 6 => "WRITE_THROUGH_WRITE_ALLOCATE",
        WriteThroughReadAndWriteAllocate = 7 => "WRITE_THROUGH_READ_AND_WRITE_ALLOCATE",
        WriteBackNoAllocate = 8 => "WRITE_BACK_NO_ALLOCATE",
        WriteBackReadAllocate = 9 => "WRITE_BACK_READ_ALLOCATE",
        WriteBackWriteAllocate = 10 => "WRITE_BACK_WRITE_ALLOCATE",
        WriteBackReadAndWriteAllocate = 11 => "WRITE_BACK_READ_AND_WRITE_ALLOCATE",
    }
}

field_enum! {
    /// Broadcast enable of one IFM2 dimension.
    BroadcastMode: u8, "BROADCAST_MODE_" {
        Disable = 0 => "DISABLE",
        Enable = 1 => "ENABLE",
    }
}

field_enum! {
    /// Whether a DMA address is external memory (a region) or the internal shared buffer.
    DmaRegionMode: u8, "DMA_REGION_MODE_" {
        External = 0 => "EXTERNAL",
        Internal = 1 => "INTERNAL",
    }
}

field_enum! {
    /// DMA dimensionality (1-D copy, or 2-D/3-D with `SIZE0/1` and `SKIP0/1`).
    DmaStrideMode: u8, "DMA_STRIDE_MODE_" {
        D1 = 0 => "D1",
        D2 = 1 => "D2",
        D3 = 2 => "D3",
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
    }
}

impl ElementwiseMode {
    /// True for the operations with one input (ABS, CLZ, LRELU).
    pub const fn is_unary(self) -> bool {
        matches!(
            self,
            ElementwiseMode::Abs | ElementwiseMode::Clz | ElementwiseMode::Lrelu
        )
    }
}

field_enum! {
    /// Operand order of binary elementwise operations (ORDER_A swaps IFM and IFM2).
    Ifm2OperandOrder: u8, "IFM2_OPERAND_ORDER_" {
        OrderB = 0 => "ORDER_B",
        OrderA = 1 => "ORDER_A",
    }
}

field_enum! {
    /// Input scaling of elementwise ADD/SUB.
    IfmScaleMode: u8, "IFM_SCALE_MODE_" {
        OpaOpb16 = 0 => "OPA_OPB_16",
        Opa32 = 1 => "OPA_32",
        Opb32 = 2 => "OPB_32",
    }
}

field_enum! {
    /// IFM upscaling (resampling) mode.
    IfmUpscaleMode: u8, "IFM_UPSCALE_MODE_" {
        None = 0 => "NONE",
        Nearest = 1 => "NEAREST",
        Zeros = 2 => "ZEROS",
    }
}

field_enum! {
    /// Kernel decomposition of large kernels.
    KernelDecomposition: u8, "KERNEL_DECOMPOSITION_" {
        D8x8 = 0 => "D8X8",
        D4x4 = 1 => "D4X4",
    }
}

field_enum! {
    /// Kernel dilation of one dimension.
    KernelDilation: u8, "KERNEL_DILATION_" {
        None = 0 => "NONE",
        X2 = 1 => "X2",
    }
}

field_enum! {
    /// AXI burst length limit.
    MaxBeats: u8, "MAX_BEATS_" {
        B64 = 0 => "B64",
        B128 = 1 => "B128",
        B256 = 2 => "B256",
    }
}

field_enum! {
    /// Memory attribute index (`QCONFIG`, `REGIONCFG`).
    MemAttr: u8, "MEM_ATTR_" {
        Axi0OutstandingCounter0 = 0 => "AXI0_OUTSTANDING_COUNTER0",
        Axi0OutstandingCounter1 = 1 => "AXI0_OUTSTANDING_COUNTER1",
        Axi1OutstandingCounter2 = 2 => "AXI1_OUTSTANDING_COUNTER2",
        Axi1OutstandingCounter3 = 3 => "AXI1_OUTSTANDING_COUNTER3",
    }
}

field_enum! {
    /// Output scaling: one scale for the whole op, or the per-channel scale/bias stream.
    OfmScaleMode: u8, "OFM_SCALE_MODE_" {
        PerChannel = 0 => "PER_CHANNEL",
        Global = 1 => "GLOBAL",
    }
}

field_enum! {
    /// Core usage of dual-core configurations (Ethos-U65-512).
    ParallelMode: u8, "PARALLEL_MODE_" {
        SingleCore = 0 => "SINGLE_CORE",
        DualCoreDepth = 1 => "DUAL_CORE_DEPTH",
    }
}

field_enum! {
    /// Pooling operation (`NPU_OP_POOL` parameter).
    PoolingMode: u8, "POOLING_MODE_" {
        Max = 0 => "MAX",
        Average = 1 => "AVERAGE",
        ReduceSum = 2 => "REDUCE_SUM",
    }
}

field_enum! {
    /// Privilege level (`RESET`, `PROT`).
    PrivilegeLevel: u8, "PRIVILEGE_LEVEL_" {
        User = 0 => "USER",
        Privileged = 1 => "PRIVILEGED",
    }
}

field_enum! {
    /// Rounding of the output scaling: DBL is TFLite's double rounding.
    RoundMode: u8, "ROUND_MODE_" {
        Dbl = 0 => "DBL",
        Truncate = 1 => "TRUNCATE",
        Natural = 2 => "NATURAL",
    }
}

field_enum! {
    /// Security level (`RESET`, `PROT`).
    SecurityLevel: u8, "SECURITY_LEVEL_" {
        Secure = 0 => "SECURE",
        NonSecure = 1 => "NON_SECURE",
    }
}

field_enum! {
    /// NPU run state (`STATUS.state`).
    State: u8, "STATE_" {
        Stopped = 0 => "STOPPED",
        Running = 1 => "RUNNING",
    }
}

field_enum! {
    /// Order of the weight stream.
    WeightOrder: u8, "WEIGHT_ORDER_" {
        DepthFirst = 0 => "DEPTH_FIRST",
        PartKernelFirst = 1 => "PART_KERNEL_FIRST",
    }
}

field_enum! {
    /// AXI channel that faulted (`STATUS.faulting_channel`).
    DmaFaultChannel: u8, "DMA_FAULT_CHANNEL_" {
        CmdRead = 0 => "CMD_READ",
        IfmRead = 1 => "IFM_READ",
        WeightRead = 2 => "WEIGHT_READ",
        SbsRead = 3 => "SBS_READ",
        Mem2memRead = 4 => "MEM2MEM_READ",
        OfmWrite = 8 => "OFM_WRITE",
        Mem2memWrite = 9 => "MEM2MEM_WRITE",
    }
}

field_enum! {
    /// AXI channel a PMU bandwidth counter observes (`PMCAXI_CHAN.ch_sel`).
    PmuAxiChannel: u8, "PMU_AXI_CHANNEL_" {
        RdCmd = 0 => "RD_CMD",
        RdIfm = 1 => "RD_IFM",
        RdWeights = 2 => "RD_WEIGHTS",
        RdScaleBias = 3 => "RD_SCALE_BIAS",
        RdMem2mem = 4 => "RD_MEM2MEM",
        WrOfm = 8 => "WR_OFM",
        WrMem2mem = 9 => "WR_MEM2MEM",
    }
}

field_enum! {
    /// PMU event types (`PMEVTYPERn.ev_type`).
    PmuEvent: u16, "PMU_EVENT_" {
        NoEvent = 0x00 => "NO_EVENT",
        Cycle = 0x11 => "CYCLE",
        NpuIdle = 0x20 => "NPU_IDLE",
        CcStalledOnBlockdep = 0x21 => "CC_STALLED_ON_BLOCKDEP",
        CcStalledOnShramReconfig = 0x22 => "CC_STALLED_ON_SHRAM_RECONFIG",
        NpuActive = 0x23 => "NPU_ACTIVE",
        MacActive = 0x30 => "MAC_ACTIVE",
        MacActive8bit = 0x31 => "MAC_ACTIVE_8BIT",
        MacActive16bit = 0x32 => "MAC_ACTIVE_16BIT",
        MacDpuActive = 0x33 => "MAC_DPU_ACTIVE",
        MacStalledByWdAcc = 0x34 => "MAC_STALLED_BY_WD_ACC",
        MacStalledByWd = 0x35 => "MAC_STALLED_BY_WD",
        MacStalledByAcc = 0x36 => "MAC_STALLED_BY_ACC",
        MacStalledByIb = 0x37 => "MAC_STALLED_BY_IB",
        MacActive32bit = 0x38 => "MAC_ACTIVE_32BIT",
        MacStalledByIntW = 0x39 => "MAC_STALLED_BY_INT_W",
        MacStalledByIntAcc = 0x3a => "MAC_STALLED_BY_INT_ACC",
        AoActive = 0x40 => "AO_ACTIVE",
        AoActive8bit = 0x41 => "AO_ACTIVE_8BIT",
        AoActive16bit = 0x42 => "AO_ACTIVE_16BIT",
        AoStalledByOfmpOb = 0x43 => "AO_STALLED_BY_OFMP_OB",
        AoStalledByOfmp = 0x44 => "AO_STALLED_BY_OFMP",
        AoStalledByOb = 0x45 => "AO_STALLED_BY_OB",
        AoStalledByAccIb = 0x46 => "AO_STALLED_BY_ACC_IB",
        AoStalledByAcc = 0x47 => "AO_STALLED_BY_ACC",
        AoStalledByIb = 0x48 => "AO_STALLED_BY_IB",
        WdActive = 0x50 => "WD_ACTIVE",
        WdStalled = 0x51 => "WD_STALLED",
        WdStalledByWs = 0x52 => "WD_STALLED_BY_WS",
        WdStalledByWdBuf = 0x53 => "WD_STALLED_BY_WD_BUF",
        WdParseActive = 0x54 => "WD_PARSE_ACTIVE",
        WdParseStalled = 0x55 => "WD_PARSE_STALLED",
        WdParseStalledIn = 0x56 => "WD_PARSE_STALLED_IN",
        WdParseStalledOut = 0x57 => "WD_PARSE_STALLED_OUT",
        WdTransWs = 0x58 => "WD_TRANS_WS",
        WdTransWb = 0x59 => "WD_TRANS_WB",
        WdTransDw0 = 0x5a => "WD_TRANS_DW0",
        WdTransDw1 = 0x5b => "WD_TRANS_DW1",
        Axi0RdTransAccepted = 0x80 => "AXI0_RD_TRANS_ACCEPTED",
        Axi0RdTransCompleted = 0x81 => "AXI0_RD_TRANS_COMPLETED",
        Axi0RdDataBeatReceived = 0x82 => "AXI0_RD_DATA_BEAT_RECEIVED",
        Axi0RdTranReqStalled = 0x83 => "AXI0_RD_TRAN_REQ_STALLED",
        Axi0WrTransAccepted = 0x84 => "AXI0_WR_TRANS_ACCEPTED",
        Axi0WrTransCompletedM = 0x85 => "AXI0_WR_TRANS_COMPLETED_M",
        Axi0WrTransCompletedS = 0x86 => "AXI0_WR_TRANS_COMPLETED_S",
        Axi0WrDataBeatWritten = 0x87 => "AXI0_WR_DATA_BEAT_WRITTEN",
        Axi0WrTranReqStalled = 0x88 => "AXI0_WR_TRAN_REQ_STALLED",
        Axi0WrDataBeatStalled = 0x89 => "AXI0_WR_DATA_BEAT_STALLED",
        Axi0EnabledCycles = 0x8c => "AXI0_ENABLED_CYCLES",
        Axi0RdStallLimit = 0x8e => "AXI0_RD_STALL_LIMIT",
        Axi0WrStallLimit = 0x8f => "AXI0_WR_STALL_LIMIT",
        AxiLatencyAny = 0xa0 => "AXI_LATENCY_ANY",
        AxiLatency32 = 0xa1 => "AXI_LATENCY_32",
        AxiLatency64 = 0xa2 => "AXI_LATENCY_64",
        AxiLatency128 = 0xa3 => "AXI_LATENCY_128",
        AxiLatency256 = 0xa4 => "AXI_LATENCY_256",
        AxiLatency512 = 0xa5 => "AXI_LATENCY_512",
        AxiLatency1024 = 0xa6 => "AXI_LATENCY_1024",
        EccDma = 0xb0 => "ECC_DMA",
        EccSb0 = 0xb1 => "ECC_SB0",
        Axi1RdTransAccepted = 0x180 => "AXI1_RD_TRANS_ACCEPTED",
        Axi1RdTransCompleted = 0x181 => "AXI1_RD_TRANS_COMPLETED",
        Axi1RdDataBeatReceived = 0x182 => "AXI1_RD_DATA_BEAT_RECEIVED",
        Axi1RdTranReqStalled = 0x183 => "AXI1_RD_TRAN_REQ_STALLED",
        Axi1WrTransAccepted = 0x184 => "AXI1_WR_TRANS_ACCEPTED",
        Axi1WrTransCompletedM = 0x185 => "AXI1_WR_TRANS_COMPLETED_M",
        Axi1WrTransCompletedS = 0x186 => "AXI1_WR_TRANS_COMPLETED_S",
        Axi1WrDataBeatWritten = 0x187 => "AXI1_WR_DATA_BEAT_WRITTEN",
        Axi1WrTranReqStalled = 0x188 => "AXI1_WR_TRAN_REQ_STALLED",
        Axi1WrDataBeatStalled = 0x189 => "AXI1_WR_DATA_BEAT_STALLED",
        Axi1EnabledCycles = 0x18c => "AXI1_ENABLED_CYCLES",
        Axi1RdStallLimit = 0x18e => "AXI1_RD_STALL_LIMIT",
        Axi1WrStallLimit = 0x18f => "AXI1_WR_STALL_LIMIT",
        EccSb1 = 0x1b1 => "ECC_SB1",
    }
}

/// `NPU_SET_IFM_PRECISION` parameter: bit 0 type, bits 2..=3 precision, bits 6..=7 format,
/// bits 8..=9 elementwise input scale mode, bits 14..=15 rounding of the input scaling.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IfmPrecision(pub u16);

impl IfmPrecision {
    /// Packs the fields.
    pub const fn new(
        ty: ActivationType,
        precision: ActivationPrecision,
        format: ActivationFormat,
        scale_mode: IfmScaleMode,
        round_mode: RoundMode,
    ) -> Self {
        IfmPrecision(
            ty as u16
                | (precision as u16) << 2
                | (format as u16) << 6
                | (scale_mode as u16) << 8
                | (round_mode as u16) << 14,
        )
    }
    /// Signedness.
    pub const fn activation_type(self) -> ActivationType {
        if self.0 & 1 != 0 {
            ActivationType::Signed
        } else {
            ActivationType::Unsigned
        }
    }
    /// Element size.
    pub const fn precision(self) -> ActivationPrecision {
        match bits(self.0 as u32, 2, 2) {
            0 => ActivationPrecision::B8,
            1 => ActivationPrecision::B16,
            2 => ActivationPrecision::B32,
            _ => ActivationPrecision::B64,
        }
    }
    /// Layout (None for the undefined encodings 2 and 3).
    pub const fn format(self) -> Option<ActivationFormat> {
        ActivationFormat::from_bits(bits(self.0 as u32, 6, 2) as u8)
    }
    /// Elementwise input scale mode (None for the undefined encoding 3).
    pub const fn scale_mode(self) -> Option<IfmScaleMode> {
        IfmScaleMode::from_bits(bits(self.0 as u32, 8, 2) as u8)
    }
    /// Rounding mode (None for the undefined encoding 3).
    pub const fn round_mode(self) -> Option<RoundMode> {
        RoundMode::from_bits(bits(self.0 as u32, 14, 2) as u8)
    }
}

/// `NPU_SET_IFM2_PRECISION` parameter: bit 0 type, bits 2..=3 precision, bits 6..=7 format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ifm2Precision(pub u16);

impl Ifm2Precision {
    /// Packs the fields.
    pub const fn new(
        ty: ActivationType,
        precision: ActivationPrecision,
        format: ActivationFormat,
    ) -> Self {
        Ifm2Precision(ty as u16 | (precision as u16) << 2 | (format as u16) << 6)
    }
    /// Signedness.
    pub const fn activation_type(self) -> ActivationType {
        IfmPrecision(self.0).activation_type()
    }
    /// Element size.
    pub const fn precision(self) -> ActivationPrecision {
        IfmPrecision(self.0).precision()
    }
    /// Layout (None for the undefined encodings).
    pub const fn format(self) -> Option<ActivationFormat> {
        IfmPrecision(self.0).format()
    }
}

/// `NPU_SET_OFM_PRECISION` parameter: bit 0 type, bits 1..=2 precision, bits 6..=7 format,
/// bit 8 scale mode, bits 14..=15 rounding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OfmPrecision(pub u16);

impl OfmPrecision {
    /// Packs the fields.
    pub const fn new(
        ty: ActivationType,
        precision: ActivationPrecision,
        format: ActivationFormat,
        scale_mode: OfmScaleMode,
        round_mode: RoundMode,
    ) -> Self {
        OfmPrecision(
            ty as u16
                | (precision as u16) << 1
                | (format as u16) << 6
                | (scale_mode as u16) << 8
                | (round_mode as u16) << 14,
        )
    }
    /// Signedness.
    pub const fn activation_type(self) -> ActivationType {
        if self.0 & 1 != 0 {
            ActivationType::Signed
        } else {
            ActivationType::Unsigned
        }
    }
    /// Element size.
    pub const fn precision(self) -> ActivationPrecision {
        match bits(self.0 as u32, 1, 2) {
            0 => ActivationPrecision::B8,
            1 => ActivationPrecision::B16,
            2 => ActivationPrecision::B32,
            _ => ActivationPrecision::B64,
        }
    }
    /// Layout (None for the undefined encodings).
    pub const fn format(self) -> Option<ActivationFormat> {
        ActivationFormat::from_bits(bits(self.0 as u32, 6, 2) as u8)
    }
    /// Per-channel or global scaling.
    pub const fn scale_mode(self) -> OfmScaleMode {
        if self.0 & (1 << 8) != 0 {
            OfmScaleMode::Global
        } else {
            OfmScaleMode::PerChannel
        }
    }
    /// Rounding mode (None for the undefined encoding 3).
    pub const fn round_mode(self) -> Option<RoundMode> {
        RoundMode::from_bits(bits(self.0 as u32, 14, 2) as u8)
    }
}

/// `NPU_SET_KERNEL_STRIDE` parameter: stride (lsb bits 0/1, msb bits 6/9 for x/y), weight
/// order (bit 2), dilation (bits 3/4), decomposition (bit 5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct KernelStride(pub u16);

impl KernelStride {
    /// Packs the fields; strides are 1..=4, dilations 1..=2.
    pub const fn new(
        stride_x: u32,
        stride_y: u32,
        dilation_x: u32,
        dilation_y: u32,
        order: WeightOrder,
        decomposition: KernelDecomposition,
    ) -> Self {
        let sx = stride_x.wrapping_sub(1);
        let sy = stride_y.wrapping_sub(1);
        let v = (sx & 1)
            | (sy & 1) << 1
            | (order as u32) << 2
            | (dilation_x.wrapping_sub(1) & 1) << 3
            | (dilation_y.wrapping_sub(1) & 1) << 4
            | (decomposition as u32) << 5
            | ((sx >> 1) & 1) << 6
            | ((sy >> 1) & 1) << 9;
        KernelStride(v as u16)
    }
    /// Horizontal stride (1..=4).
    pub const fn stride_x(self) -> u32 {
        (bits(self.0 as u32, 0, 1) | bits(self.0 as u32, 6, 1) << 1) + 1
    }
    /// Vertical stride (1..=4).
    pub const fn stride_y(self) -> u32 {
        (bits(self.0 as u32, 1, 1) | bits(self.0 as u32, 9, 1) << 1) + 1
    }
    /// Weight stream order.
    pub const fn weight_order(self) -> WeightOrder {
        if self.0 & (1 << 2) != 0 {
            WeightOrder::PartKernelFirst
        } else {
            WeightOrder::DepthFirst
        }
    }
    /// Horizontal dilation (1 or 2).
    pub const fn dilation_x(self) -> u32 {
        bits(self.0 as u32, 3, 1) + 1
    }
    /// Vertical dilation (1 or 2).
    pub const fn dilation_y(self) -> u32 {
        bits(self.0 as u32, 4, 1) + 1
    }
    /// Kernel decomposition.
    pub const fn decomposition(self) -> KernelDecomposition {
        if self.0 & (1 << 5) != 0 {
            KernelDecomposition::D4x4
        } else {
            KernelDecomposition::D8x8
        }
    }
}

/// `NPU_SET_ACTIVATION` parameter: bits 0..=4 function, bits 12..=14 clip range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Activation(pub u16);

impl Activation {
    /// Packs the fields.
    pub const fn new(function: ActivationFunction, clip: ActivationClipRange) -> Self {
        Activation(function as u16 | (clip as u16) << 12)
    }
    /// The function (None for undefined encodings).
    pub const fn function(self) -> Option<ActivationFunction> {
        ActivationFunction::from_bits(bits(self.0 as u32, 0, 5) as u8)
    }
    /// The clip range (None for undefined encodings).
    pub const fn clip_range(self) -> Option<ActivationClipRange> {
        ActivationClipRange::from_bits(bits(self.0 as u32, 12, 3) as u8)
    }
}

/// `NPU_SET_IFM2_BROADCAST` parameter: bits 0/1/2 broadcast H/W/C, bit 6 operand order,
/// bit 7 broadcast the scalar in `IFM2_SCALAR`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ifm2Broadcast(pub u16);

impl Ifm2Broadcast {
    /// Packs the fields.
    pub const fn new(h: bool, w: bool, c: bool, order: Ifm2OperandOrder, scalar: bool) -> Self {
        Ifm2Broadcast(
            h as u16
                | (w as u16) << 1
                | (c as u16) << 2
                | (order as u16) << 6
                | (scalar as u16) << 7,
        )
    }
    /// IFM2 has height 1 and is repeated over H.
    pub const fn broadcast_h(self) -> bool {
        self.0 & 1 != 0
    }
    /// IFM2 has width 1 and is repeated over W.
    pub const fn broadcast_w(self) -> bool {
        self.0 & 2 != 0
    }
    /// IFM2 has depth 1 and is repeated over C.
    pub const fn broadcast_c(self) -> bool {
        self.0 & 4 != 0
    }
    /// Operand order (ORDER_A: IFM2 is the first operand).
    pub const fn operand_order(self) -> Ifm2OperandOrder {
        if self.0 & (1 << 6) != 0 {
            Ifm2OperandOrder::OrderA
        } else {
            Ifm2OperandOrder::OrderB
        }
    }
    /// IFM2 is the constant in `NPU_SET_IFM2_SCALAR`.
    pub const fn broadcast_constant(self) -> bool {
        self.0 & (1 << 7) != 0
    }
}

/// `NPU_SET_DMA0_SRC_REGION` / `NPU_SET_DMA0_DST_REGION` parameter: bits 0..=2 region,
/// bit 8 region mode, bits 9..=10 stride mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DmaRegion(pub u16);

impl DmaRegion {
    /// Packs the fields.
    pub const fn new(region: u8, mode: DmaRegionMode, stride: DmaStrideMode) -> Self {
        DmaRegion((region as u16 & 7) | (mode as u16) << 8 | (stride as u16) << 9)
    }
    /// The region (base pointer index), for external addresses.
    pub const fn region(self) -> u8 {
        (self.0 & 7) as u8
    }
    /// External region or internal shared buffer.
    pub const fn mode(self) -> DmaRegionMode {
        if self.0 & (1 << 8) != 0 {
            DmaRegionMode::Internal
        } else {
            DmaRegionMode::External
        }
    }
    /// Stride mode (None for the undefined encoding 3).
    pub const fn stride_mode(self) -> Option<DmaStrideMode> {
        DmaStrideMode::from_bits(bits(self.0 as u32, 9, 2) as u8)
    }
}

/// Parameter bits holding the shift of `NPU_SET_OFM_SCALE` / `NPU_SET_OPA_SCALE`.
pub const SCALE_SHIFT_MASK: u16 = 0x3f;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_fields_match_vela_dumps() {
        // Values seen in the fixtures' registers.txt.
        let p = IfmPrecision(257);
        assert_eq!(p.activation_type(), ActivationType::Signed);
        assert_eq!(p.precision(), ActivationPrecision::B8);
        assert_eq!(p.format(), Some(ActivationFormat::Nhwc));
        assert_eq!(p.scale_mode(), Some(IfmScaleMode::Opa32));
        assert_eq!(p.round_mode(), Some(RoundMode::Dbl));
        let o = OfmPrecision(33093);
        assert_eq!(o.precision(), ActivationPrecision::B32);
        assert_eq!(o.format(), Some(ActivationFormat::Nhcwb16));
        assert_eq!(o.scale_mode(), OfmScaleMode::Global);
        assert_eq!(o.round_mode(), Some(RoundMode::Natural));
        assert_eq!(
            OfmPrecision::new(
                ActivationType::Signed,
                ActivationPrecision::B32,
                ActivationFormat::Nhcwb16,
                OfmScaleMode::Global,
                RoundMode::Natural
            ),
            o
        );
        let a = Activation(12304);
        assert_eq!(a.function(), Some(ActivationFunction::Table0));
        assert_eq!(a.clip_range(), Some(ActivationClipRange::ForceInt8));
        let k = KernelStride(7);
        assert_eq!((k.stride_x(), k.stride_y()), (2, 2));
        assert_eq!(k.weight_order(), WeightOrder::PartKernelFirst);
        for sx in 1..=4 {
            for sy in 1..=4 {
                let k = KernelStride::new(
                    sx,
                    sy,
                    2,
                    1,
                    WeightOrder::DepthFirst,
                    KernelDecomposition::D8x8,
                );
                assert_eq!(
                    (k.stride_x(), k.stride_y(), k.dilation_x(), k.dilation_y()),
                    (sx, sy, 2, 1)
                );
            }
        }
        let d = DmaRegion(259);
        assert_eq!((d.region(), d.mode()), (3, DmaRegionMode::Internal));
        assert!(Ifm2Broadcast(4).broadcast_c());
        assert_eq!(RoundMode::Dbl.name(), "ROUND_MODE_DBL");
    }
}
