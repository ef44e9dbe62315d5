//! Accelerator configurations (MACs, cores, shared buffer) of Ethos-U55/U65 variants, and the
//! Ethos-U85 ones ([`U85Config`]).
//!
//! One [`AcceleratorConfig`] per hardware configuration Vela knows (`ethos-u55-32` ...
//! `ethos-u65-512`). The numbers are the ones Arm's Vela 5.2.0 uses
//! (`ethosu/vela/architecture_features.py`, `regor/architecture/ethosu55/ethos_u55.cpp`,
//! `regor/architecture/ethosu65/ethos_u65.cpp`); the values seen in the hardware `CONFIG`
//! register were checked against the COP1 payloads of the Vela fixtures.
//!
//! Register bit layouts live in [`super::regs`]; this module holds only per-configuration numbers.

/// Ethos-U product family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Product {
    /// Ethos-U55: one AXI master pair, 32-bit addresses, one outstanding DMA.
    U55,
    /// Ethos-U65: 40-bit addresses, wider AXI ports, two outstanding DMAs.
    U65,
}

impl Product {
    /// The value of the `product` field of the hardware `CONFIG` register (U55 = 0, U65 = 1).
    pub const fn hw_code(self) -> u32 {
        match self {
            Product::U55 => 0,
            Product::U65 => 1,
        }
    }

    /// Family name as Arm writes it (`Ethos-U55`).
    pub const fn name(self) -> &'static str {
        match self {
            Product::U55 => "Ethos-U55",
            Product::U65 => "Ethos-U65",
        }
    }
}

/// A micro-block (ublock): the smallest OFM (or IFM) volume the MAC array works on per step.
///
/// OFM block sizes are multiples of the OFM ublock width/height; the weight stream is ordered in
/// groups of `ofm_ublock.depth` output channels times `ifm_ublock.depth` input channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ublock {
    pub width: u32,
    pub height: u32,
    pub depth: u32,
}

/// Kinds of data kept in the shared buffer (SHRAM), indexing [`AcceleratorConfig::shram_granules`].
///
/// The order is Vela's `SHRAMElements`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(usize)]
pub enum ShramElement {
    /// 8-bit IFM of a convolution/pooling.
    Ifm8 = 0,
    /// 16-bit IFM of a convolution/pooling.
    Ifm16 = 1,
    /// 8-bit IFM of an elementwise operation.
    Ifm8Elementwise = 2,
    /// 16-bit IFM of an elementwise operation.
    Ifm16Elementwise = 3,
    /// 32-bit IFM (elementwise on 32-bit data).
    Ifm32 = 4,
    /// 16-bit accumulators.
    Acc16 = 5,
    /// 32-bit accumulators.
    Acc32 = 6,
    /// 40-bit accumulators.
    Acc40 = 7,
}

impl ShramElement {
    /// All elements, in index order.
    pub const ALL: [ShramElement; 8] = [
        ShramElement::Ifm8,
        ShramElement::Ifm16,
        ShramElement::Ifm8Elementwise,
        ShramElement::Ifm16Elementwise,
        ShramElement::Ifm32,
        ShramElement::Acc16,
        ShramElement::Acc32,
        ShramElement::Acc40,
    ];

    /// Bits per element in the shared buffer.
    pub const fn bits(self) -> u32 {
        match self {
            ShramElement::Ifm8 | ShramElement::Ifm8Elementwise => 8,
            ShramElement::Ifm16 | ShramElement::Ifm16Elementwise | ShramElement::Acc16 => 16,
            ShramElement::Ifm32 | ShramElement::Acc32 => 32,
            ShramElement::Acc40 => 40,
        }
    }

    /// Depth alignment (in elements) applied before converting a depth to bytes: accumulators
    /// are stored in groups of 8 channels.
    pub const fn pre_align(self) -> u32 {
        match self {
            ShramElement::Acc16 | ShramElement::Acc32 | ShramElement::Acc40 => 8,
            _ => 1,
        }
    }

    /// Byte alignment of one (x, y) position's depth: IFM rows are padded to 8 bytes.
    pub const fn post_align(self) -> u32 {
        match self {
            ShramElement::Acc16 | ShramElement::Acc32 | ShramElement::Acc40 => 1,
            _ => 8,
        }
    }
}

/// One Ethos-U hardware configuration.
///
/// All sizes are per core unless stated otherwise; `ethos-u65-512` is two 256-MAC cores that
/// split every operation's OFM depth (interleaved channels, one weight stream per core).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AcceleratorConfig {
    /// Vela's name (`ethos-u55-128`), the name users pick.
    pub name: &'static str,
    /// Product family.
    pub product: Product,
    /// MACs per cycle of one core (= ofm_ublock w*h*depth * 8-wide dot products).
    pub macs: u32,
    /// Number of cores; each gets every `cores`-th OFM channel and its own weight/scale stream.
    pub cores: u32,
    /// OFM micro-block: OFM block widths/heights/depths are multiples of it.
    pub ofm_ublock: Ublock,
    /// IFM micro-block: the IFM depth granule of the weight ordering.
    pub ifm_ublock: Ublock,
    /// Shared buffer banks per core.
    pub shram_banks: u32,
    /// Bytes per shared-buffer bank.
    pub shram_bank_bytes: u32,
    /// Banks at the start of the shared buffer reserved for OFM output.
    pub shram_reserved_output_banks: u32,
    /// Banks at the end of the shared buffer that are never used for IFM/accumulators (they hold
    /// the activation LUT on configurations with more than 16 banks).
    pub shram_reserved_end_banks: u32,
    /// Allocation granule in banks for each [`ShramElement`] (index with `as usize`).
    pub shram_granules: [u32; 8],
    /// Elementwise units (elements per cycle of the elementwise engine).
    pub elementwise_units: u32,
    /// Largest OFM block: width, height, depth.
    pub ofm_block_max: Ublock,
    /// Largest kernel the hardware handles in one pass (bigger kernels are decomposed into
    /// sub-kernels of at most this size, divided by the dilation).
    pub sub_kernel_max: Ublock,
    /// Bytes of the activation lookup table in the shared buffer.
    pub shram_lut_bytes: u32,
    /// Bytes of one LUT slot.
    pub shram_lut_slot_bytes: u32,
    /// AXI address width in bits (the largest address any base pointer + offset can reach).
    pub axi_address_bits: u32,
    /// Bytes per cycle of one AXI port.
    pub axi_port_bytes_per_cycle: u32,
    /// DMA transfers that can be outstanding at once.
    pub max_outstanding_dma: u32,
    /// Kernels (NPU operations) that can be outstanding at once (`NPU_SET_BLOCKDEP` <= this + 1).
    pub max_outstanding_kernels: u32,
    /// Performance-model cycles per output element, Vela's `output_cycles_per_elem` table.
    pub output_cycles_per_elem: [f32; 8],
    /// Performance-model cycles per element of activation functions (`activation_cycles_per_elem`).
    pub activation_cycles_per_elem: [f32; 3],
}

const fn reserved_end(banks: u32) -> u32 {
    if banks > 16 { 2 } else { 0 }
}

const fn ub(width: u32, height: u32, depth: u32) -> Ublock {
    Ublock {
        width,
        height,
        depth,
    }
}

/// The 256-MAC single-core configuration; the others override what differs.
const fn base(name: &'static str, product: Product) -> AcceleratorConfig {
    let u65 = matches!(product, Product::U65);
    AcceleratorConfig {
        name,
        product,
        macs: 256,
        cores: 1,
        ofm_ublock: ub(2, 2, 8),
        ifm_ublock: ub(2, 2, 8),
        shram_banks: 48,
        shram_bank_bytes: 1024,
        shram_reserved_output_banks: 2,
        shram_reserved_end_banks: reserved_end(48),
        shram_granules: [8, 8, 8, 8, 16, 8, 16, 20],
        elementwise_units: 8,
        ofm_block_max: ub(64, 32, 128),
        sub_kernel_max: ub(8, 8, 65536),
        shram_lut_bytes: 2048,
        shram_lut_slot_bytes: 256,
        axi_address_bits: if u65 { 40 } else { 32 },
        axi_port_bytes_per_cycle: if u65 { 16 } else { 8 },
        max_outstanding_dma: if u65 { 2 } else { 1 },
        max_outstanding_kernels: 2,
        output_cycles_per_elem: [0.625, 1.125, 0.5, 0.375, 0.5, 0.75, 0.125, 0.25],
        activation_cycles_per_elem: [1.0, 0.25, 0.0],
    }
}

/// `ethos-u55-32`: 32 MACs/cycle, 16 KB shared buffer.
pub const ETHOS_U55_32: AcceleratorConfig = AcceleratorConfig {
    macs: 32,
    ofm_ublock: ub(1, 1, 4),
    ifm_ublock: ub(1, 1, 8),
    shram_banks: 16,
    shram_reserved_end_banks: reserved_end(16),
    shram_granules: [2, 2, 2, 2, 4, 4, 4, 4],
    elementwise_units: 1,
    output_cycles_per_elem: [2.0, 3.0, 3.0, 3.0, 4.0, 6.0, 1.0, 2.0],
    activation_cycles_per_elem: [1.0, 1.0, 0.0],
    ..base("ethos-u55-32", Product::U55)
};

/// `ethos-u55-64`: 64 MACs/cycle, 16 KB shared buffer.
pub const ETHOS_U55_64: AcceleratorConfig = AcceleratorConfig {
    macs: 64,
    ofm_ublock: ub(1, 1, 8),
    ifm_ublock: ub(1, 1, 8),
    shram_banks: 16,
    shram_reserved_end_banks: reserved_end(16),
    shram_granules: [2, 2, 2, 2, 4, 4, 4, 8],
    elementwise_units: 2,
    output_cycles_per_elem: [1.0, 1.5, 1.5, 1.5, 2.0, 3.0, 0.5, 1.0],
    activation_cycles_per_elem: [1.0, 1.0, 0.0],
    ..base("ethos-u55-64", Product::U55)
};

/// `ethos-u55-128`: 128 MACs/cycle, 24 KB shared buffer.
pub const ETHOS_U55_128: AcceleratorConfig = AcceleratorConfig {
    macs: 128,
    ofm_ublock: ub(2, 1, 8),
    ifm_ublock: ub(2, 1, 8),
    shram_banks: 24,
    shram_reserved_end_banks: reserved_end(24),
    shram_granules: [4, 4, 4, 4, 8, 4, 8, 12],
    elementwise_units: 4,
    output_cycles_per_elem: [0.75, 1.25, 0.75, 0.75, 1.0, 1.5, 0.25, 0.5],
    activation_cycles_per_elem: [1.0, 0.5, 0.0],
    ..base("ethos-u55-128", Product::U55)
};

/// `ethos-u55-256`: 256 MACs/cycle, 48 KB shared buffer.
pub const ETHOS_U55_256: AcceleratorConfig = base("ethos-u55-256", Product::U55);

/// `ethos-u65-256`: one 256-MAC core, 48 KB shared buffer.
pub const ETHOS_U65_256: AcceleratorConfig = base("ethos-u65-256", Product::U65);

/// `ethos-u65-512`: two 256-MAC cores (48 KB shared buffer each) splitting the OFM depth.
pub const ETHOS_U65_512: AcceleratorConfig = AcceleratorConfig {
    cores: 2,
    output_cycles_per_elem: [0.3125, 0.5625, 0.25, 0.1875, 0.25, 0.375, 0.0625, 0.125],
    activation_cycles_per_elem: [0.5, 0.125, 0.0],
    ..base("ethos-u65-512", Product::U65)
};

/// Every configuration, smallest first.
pub static ALL: [&AcceleratorConfig; 6] = [
    &ETHOS_U55_32,
    &ETHOS_U55_64,
    &ETHOS_U55_128,
    &ETHOS_U55_256,
    &ETHOS_U65_256,
    &ETHOS_U65_512,
];

/// The valid names, in [`ALL`] order (for error messages).
pub const NAMES: [&str; 6] = [
    "ethos-u55-32",
    "ethos-u55-64",
    "ethos-u55-128",
    "ethos-u55-256",
    "ethos-u65-256",
    "ethos-u65-512",
];

impl AcceleratorConfig {
    /// Looks a configuration up by its name (`ethos-u55-128`), ASCII case-insensitively.
    pub fn by_name(name: &str) -> Option<&'static AcceleratorConfig> {
        ALL.iter()
            .copied()
            .find(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// The valid names (same as [`NAMES`]).
    pub const fn names() -> &'static [&'static str] {
        &NAMES
    }

    /// MACs per cycle of the whole NPU (all cores).
    pub const fn total_macs(&self) -> u32 {
        self.macs * self.cores
    }

    /// Shared buffer bytes of one core.
    pub const fn shram_bytes(&self) -> u32 {
        self.shram_banks * self.shram_bank_bytes
    }

    /// Banks usable for IFM and accumulators (total minus the reserved end banks).
    pub const fn shram_usable_banks(&self) -> u32 {
        self.shram_banks - self.shram_reserved_end_banks
    }

    /// Banks available for IFM/accumulators; when the activation LUT is used on a configuration
    /// without reserved end banks, the LUT takes the last two banks.
    pub const fn shram_available_banks(&self, uses_lut: bool) -> u32 {
        let banks = self.shram_usable_banks();
        if uses_lut && self.shram_reserved_end_banks == 0 {
            banks - 2
        } else {
            banks
        }
    }

    /// Shared-buffer byte address of the activation LUT.
    pub const fn shram_lut_address(&self) -> u32 {
        self.shram_bank_bytes * self.shram_available_banks(true)
    }

    /// Allocation granule (banks) of one kind of shared-buffer data.
    pub const fn shram_granule(&self, element: ShramElement) -> u32 {
        self.shram_granules[element as usize]
    }

    /// The `macs_per_cc` field of the hardware `CONFIG` register: log2 of the MACs per cycle of
    /// all cores (5 for ethos-u55-32 ... 9 for ethos-u65-512).
    pub const fn hw_macs_per_cc(&self) -> u32 {
        self.total_macs().ilog2()
    }

    /// The `shram_size` field of the hardware `CONFIG` register: shared buffer KiB of all cores.
    pub const fn hw_shram_size_kib(&self) -> u32 {
        self.cores * self.shram_bytes() / 1024
    }

    /// The `product` field of the hardware `CONFIG` register.
    pub const fn hw_product(&self) -> u32 {
        self.product.hw_code()
    }
}

/// One Ethos-U85 hardware configuration, as Vela 5.2.0 defines them
/// (`regor/architecture/ethosu85/ethos_u85.cpp`, `s_EthosU85Configs`).
///
/// Kept apart from [`AcceleratorConfig`] (whose shared-buffer and performance fields describe
/// U55/U65 hardware): the U85 has no SHRAM but separate IFM, accumulator, output and chaining
/// buffers, and only the virtual U85 uses these values. [`ALL`]/[`NAMES`] stay U55/U65.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct U85Config {
    /// Vela's name (`ethos-u85-256`).
    pub name: &'static str,
    /// MACs per cycle of the whole NPU (all cores).
    pub macs: u32,
    /// Cores; each has its own weight decoder (SWD streams `WEIGHT_BASE`, `WEIGHT1_BASE`, ...).
    pub cores: u32,
    /// The OFM microblocks the configuration supports (height, width, depth in [`Ublock`]'s
    /// width/height/depth fields).
    pub ofm_ublocks: &'static [Ublock],
    /// IFM microblock.
    pub ifm_ublock: Ublock,
    /// Bytes of the IFM buffer.
    pub ifm_ram_bytes: u32,
    /// Bytes of the accumulator buffer.
    pub acc_ram_bytes: u32,
    /// Bytes of the output buffer.
    pub ob_ram_bytes: u32,
    /// Bytes of the chaining buffer (`ACTIVATION_STORAGE_CHAINED`).
    pub cb_ram_bytes: u32,
    /// Bytes of the activation LUT memory (Vela's `lutram`, 2048 on every configuration).
    pub lut_bytes: u32,
    /// log2 of the number of SRAM AXI ports.
    pub axi_sram_log2: u32,
    /// log2 of the number of external AXI ports.
    pub axi_ext_log2: u32,
}

impl U85Config {
    /// The `macs_per_cc` field of the hardware `CONFIG` register (log2 of the MACs).
    pub const fn hw_macs_per_cc(&self) -> u32 {
        self.macs.ilog2()
    }

    /// Looks an Ethos-U85 configuration up by name (`ethos-u85-256`), ASCII case-insensitively.
    pub fn by_name(name: &str) -> Option<&'static U85Config> {
        U85_ALL
            .iter()
            .copied()
            .find(|c| c.name.eq_ignore_ascii_case(name))
    }
}

/// A microblock given as Vela writes its shapes, (height, width, depth).
const fn hwc(height: u32, width: u32, depth: u32) -> Ublock {
    Ublock {
        width,
        height,
        depth,
    }
}

const fn u85(
    name: &'static str,
    macs: u32,
    cores: u32,
    ofm_ublocks: &'static [Ublock],
    ifm_ublock: Ublock,
    rams: [u32; 4],
    axi: (u32, u32),
) -> U85Config {
    U85Config {
        name,
        macs,
        cores,
        ofm_ublocks,
        ifm_ublock,
        ifm_ram_bytes: rams[0],
        acc_ram_bytes: rams[1],
        ob_ram_bytes: rams[2],
        cb_ram_bytes: rams[3],
        lut_bytes: 2048,
        axi_sram_log2: axi.0,
        axi_ext_log2: axi.1,
    }
}

/// `ethos-u85-128`: 128 MACs, one core.
pub const ETHOS_U85_128: U85Config = u85(
    "ethos-u85-128",
    128,
    1,
    &[hwc(1, 2, 8), hwc(1, 1, 16)],
    hwc(1, 2, 8),
    [8192, 8192, 2048, 768],
    (1, 0),
);

/// `ethos-u85-256`: 256 MACs, one core.
pub const ETHOS_U85_256: U85Config = u85(
    "ethos-u85-256",
    256,
    1,
    &[hwc(1, 2, 16), hwc(1, 4, 8), hwc(2, 2, 8)],
    hwc(2, 2, 8),
    [16384, 16384, 2048, 1536],
    (1, 0),
);

/// `ethos-u85-512`: 512 MACs, two cores.
pub const ETHOS_U85_512: U85Config = u85(
    "ethos-u85-512",
    512,
    2,
    &[hwc(2, 2, 16), hwc(1, 4, 16)],
    hwc(2, 2, 16),
    [16384, 32768, 4096, 3072],
    (1, 0),
);

/// `ethos-u85-1024`: 1024 MACs, four cores.
pub const ETHOS_U85_1024: U85Config = u85(
    "ethos-u85-1024",
    1024,
    4,
    &[hwc(2, 2, 32), hwc(1, 4, 32), hwc(2, 4, 16)],
    hwc(4, 2, 16),
    [16384, 65536, 4096, 6144],
    (1, 1),
);

/// `ethos-u85-2048`: 2048 MACs, four cores.
pub const ETHOS_U85_2048: U85Config = u85(
    "ethos-u85-2048",
    2048,
    4,
    &[hwc(2, 2, 64), hwc(1, 4, 64), hwc(4, 4, 16)],
    hwc(4, 4, 16),
    [32768, 131072, 8192, 12288],
    (2, 1),
);

/// Every Ethos-U85 configuration, smallest first.
pub static U85_ALL: [&U85Config; 5] = [
    &ETHOS_U85_128,
    &ETHOS_U85_256,
    &ETHOS_U85_512,
    &ETHOS_U85_1024,
    &ETHOS_U85_2048,
];

/// The Ethos-U85 names, in [`U85_ALL`] order.
pub const U85_NAMES: [&str; 5] = [
    "ethos-u85-128",
    "ethos-u85-256",
    "ethos-u85-512",
    "ethos-u85-1024",
    "ethos-u85-2048",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_and_match() {
        for (cfg, name) in ALL.iter().zip(NAMES) {
            assert_eq!(cfg.name, name);
            assert_eq!(AcceleratorConfig::by_name(name), Some(*cfg));
        }
        assert_eq!(
            AcceleratorConfig::by_name("ETHOS-U55-128").map(|c| c.macs),
            Some(128)
        );
        assert!(AcceleratorConfig::by_name("ethos-u85-256").is_none());
        assert!(AcceleratorConfig::by_name("").is_none());
    }

    #[test]
    fn macs_are_ublock_times_dot_product_width() {
        for cfg in ALL {
            let u = cfg.ofm_ublock;
            assert_eq!(u.width * u.height * 8 * u.depth, cfg.macs, "{}", cfg.name);
        }
    }

    #[test]
    fn config_register_fields() {
        // (macs_per_cc, shram KiB, product) as found in the COP1 payloads Vela wrote for the
        // fixtures (words 0x1005, 0x1006, 0x1807, 0x3008, 0x1000_3008, 0x1000_6009).
        let expected = [
            (5, 16, 0),
            (6, 16, 0),
            (7, 24, 0),
            (8, 48, 0),
            (8, 48, 1),
            (9, 96, 1),
        ];
        for (cfg, e) in ALL.iter().zip(expected) {
            assert_eq!(
                (
                    cfg.hw_macs_per_cc(),
                    cfg.hw_shram_size_kib(),
                    cfg.hw_product()
                ),
                e,
                "{}",
                cfg.name
            );
        }
    }

    #[test]
    fn u85_configs() {
        for (cfg, name) in U85_ALL.iter().zip(U85_NAMES) {
            assert_eq!(cfg.name, name);
            assert_eq!(U85Config::by_name(name), Some(*cfg));
            // Every microblock holds macs / 8 elements (8-wide dot products).
            for u in cfg.ofm_ublocks {
                assert_eq!(u.width * u.height * u.depth * 8, cfg.macs, "{name}");
            }
        }
        assert!(U85Config::by_name("ethos-u55-128").is_none());
        assert_eq!(ETHOS_U85_2048.hw_macs_per_cc(), 11);
    }

    #[test]
    fn shram_banks() {
        assert_eq!(ETHOS_U55_32.shram_available_banks(true), 14);
        assert_eq!(ETHOS_U55_128.shram_available_banks(true), 22);
        assert_eq!(ETHOS_U55_128.shram_lut_address(), 22 * 1024);
        assert_eq!(ETHOS_U65_512.shram_available_banks(false), 46);
    }
}
