//! The Ethos-U85 control interface where it differs from U55/U65 ([`super::super::ctrl`]).
//!
//! Same as U55/U65 (offsets and bit layouts): `ID`, `STATUS` (but see [`STATUS_BRANCH_FAULT`]
//! and [`STATUS_ERRORS`]), `CMD`, `RESET`, `QBASE`/`QBASE_HI`, `QREAD`, `QCONFIG`, `QSIZE`,
//! `PROT`, `CONFIG` (offset; the fields are [`Config`]), `REGIONCFG` and `BASEP0..7`.
//! Different: the four `MEM_ATTR` words sit where U55 has `AXI_LIMIT0..3`, `QCONFIG` and
//! `REGIONCFG` select one of them, `AXI_SRAM`/`AXI_EXT` hold the AXI limits, the PMU moved
//! up by `0x1000` and has eight event counters.
//!
//! Sources: Vela 5.2.0 `regor/architecture/ethosu85/ethos_u85_interface.hpp` (register map,
//! `config_r`, `status_r`, `mem_attr_r`, `axi_sram_r`, `axi_ext_r`, `pmcr_r` reset value) and
//! Arm's `ethos-u-core-driver` (`ethosu_device_u85.c`, `ethosu_config_u85.h`,
//! `ethosu_pmu_u85.c`); see `docs/u85.md`.

use crate::ethos_u::regs::fields::bits;

/// The `CONFIG.product` of Ethos-U85 (U55: 0, U65: 1).
pub const PRODUCT: u32 = 2;

/// The `ID` value of the architecture Vela 5.2 targets (`id_r`'s reset value, and the word
/// Vela writes into U85 payloads): architecture 2.0.0, product major 7.
pub const ID: u32 = 0x2000_7000;

/// NPU addresses are 40 bits wide (`ethosu_device_u85.c`'s `ADDRESS_BITS`).
pub const ADDRESS_BITS: u32 = 40;

/// Number of PMU event counters (`NPU_REG_PMEVCNTR_ARRLEN`).
pub const NUM_PMU_COUNTERS: usize = 8;

/// `STATUS` bit 9: an `NPU_OP_BRANCH` went wrong (U85 only).
pub const STATUS_BRANCH_FAULT: u32 = 1 << 9;

/// The `STATUS` error bits of a U85: bus error (2), command parse error (4), ECC fault (8),
/// branch fault (9). Bit 7, the U55/U65 weight decoder fault, is reserved on U85.
pub const STATUS_ERRORS: u32 = (1 << 2) | (1 << 4) | (1 << 8) | STATUS_BRANCH_FAULT;

/// Register offsets in bytes that are new on, or moved by, Ethos-U85.
pub mod offset {
    /// `COND_STATUS`: result flag of the last condition (`NPU_OP_BRANCH`).
    pub const COND_STATUS: u32 = 0x0030;
    /// `POWER_CTRL`: MAC power ramp cycles.
    pub const POWER_CTRL: u32 = 0x0038;
    /// Memory attribute entry 0 (`MEM_ATTR[0]`); entry `n` is at `MEM_ATTR0 + 4 * n`, `n < 4`.
    pub const MEM_ATTR0: u32 = 0x0040;
    /// AXI limits of the SRAM ports (`AXI_SRAM`).
    pub const AXI_SRAM: u32 = 0x0050;
    /// AXI limits of the external ports (`AXI_EXT`).
    pub const AXI_EXT: u32 = 0x0054;
    /// PMU control (`PMCR`); `PMCNTENSET` ... `PMCAXI_CHAN` follow at the U55/U65 distances
    /// (`+0x04` ... `+0x2c`).
    pub const PMCR: u32 = 0x1180;
    /// PMU counter enable set.
    pub const PMCNTENSET: u32 = 0x1184;
    /// PMU counter enable clear.
    pub const PMCNTENCLR: u32 = 0x1188;
    /// PMU cycle counter, low word.
    pub const PMCCNTR: u32 = 0x11a0;
    /// PMU cycle counter, high 16 bits.
    pub const PMCCNTR_HI: u32 = 0x11a4;
    /// PMU event counter 0; counter `n` is at `PMEVCNTR0 + 4 * n`, `n < 8`.
    pub const PMEVCNTR0: u32 = 0x1300;
    /// PMU event type 0; type `n` is at `PMEVTYPER0 + 4 * n`, `n < 8`.
    pub const PMEVTYPER0: u32 = 0x1380;
    /// The distance of every PMU register from its U55/U65 offset.
    pub const PMU_SHIFT: u32 = 0x1000;
    /// End of the registers Vela's map defines (`PMU_COUNTERS_REGISTERS_SIZE`).
    pub const WINDOW_SIZE: u32 = 0x1400;
}

/// The U85 `CONFIG` register (`config_r`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Config(pub u32);

impl Config {
    /// Packs the fields (log2 values as the register holds them).
    pub const fn new(
        macs_per_cc_log2: u32,
        cmd_stream_version: u32,
        axi_sram_log2: u32,
        axi_ext_log2: u32,
        wd_log2: u32,
    ) -> Self {
        Config(
            (macs_per_cc_log2 & 0xf)
                | (cmd_stream_version & 0xf) << 4
                | (axi_sram_log2 & 3) << 8
                | (axi_ext_log2 & 1) << 10
                | (wd_log2 & 3) << 12
                | PRODUCT << 28,
        )
    }
    /// Bits 0..=3: log2 of the MACs per cycle.
    pub const fn macs_per_cc_log2(self) -> u32 {
        bits(self.0, 0, 4)
    }
    /// Bits 4..=7: command stream version (1).
    pub const fn cmd_stream_version(self) -> u32 {
        bits(self.0, 4, 4)
    }
    /// Bits 8..=9: log2 of the SRAM AXI ports.
    pub const fn axi_sram_log2(self) -> u32 {
        bits(self.0, 8, 2)
    }
    /// Bit 10: log2 of the external AXI ports.
    pub const fn axi_ext_log2(self) -> u32 {
        bits(self.0, 10, 1)
    }
    /// Bits 12..=13: log2 of the weight decoders (one per core).
    pub const fn wd_log2(self) -> u32 {
        bits(self.0, 12, 2)
    }
    /// Bit 27: custom DMA implemented.
    pub const fn custom_dma(self) -> bool {
        self.0 & (1 << 27) != 0
    }
    /// Bits 28..=31: product.
    pub const fn product(self) -> u32 {
        bits(self.0, 28, 4)
    }
}

/// Packs a `MEM_ATTR[n]` word (`mem_attr_r`): memory domain (bits 0..=1), AXI port (bit 2:
/// 0 = SRAM, 1 = external), AXI memory type (bits 4..=7).
pub const fn mem_attr(mem_domain: u32, axi_port_ext: bool, memtype: u32) -> u32 {
    (mem_domain & 3) | (axi_port_ext as u32) << 2 | (memtype & 0xf) << 4
}

/// Packs an `AXI_SRAM`/`AXI_EXT` word (`axi_sram_r`, `axi_ext_r`): outstanding reads minus one
/// (bits 0..=5), writes minus one (bits 8..=12), max beats (bits 16..=17: 0 = 64, 1 = 128,
/// 2 = 256 bytes).
pub const fn axi_limits(max_reads: u32, max_writes: u32, max_beats: u32) -> u32 {
    (max_reads.saturating_sub(1) & 0x3f)
        | (max_writes.saturating_sub(1) & 0x1f) << 8
        | (max_beats & 3) << 16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_words_of_the_fixtures() {
        // The OPTIMIZER_CONFIG words Vela wrote for ethos-u85-128, -512 and -2048.
        assert_eq!(Config::new(7, 1, 1, 0, 0).0, 0x2000_0117);
        assert_eq!(Config::new(9, 1, 1, 0, 1).0, 0x2000_1119);
        let c = Config(0x2000_261b);
        assert_eq!(
            (
                c.macs_per_cc_log2(),
                c.cmd_stream_version(),
                c.axi_sram_log2(),
                c.axi_ext_log2(),
                c.wd_log2(),
                c.product()
            ),
            (11, 1, 2, 1, 2, PRODUCT)
        );
        assert_eq!(axi_limits(64, 32, 2), 0x0002_1f3f);
        assert_eq!(mem_attr(0, true, 0), 4);
    }
}
