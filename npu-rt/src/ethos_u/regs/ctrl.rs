//! The control interface: APB register offsets and their bit fields.
//!
//! The MMIO driver programs these; the simulator's register-file model implements them. Offsets
//! are in bytes from the NPU's base address. 64-bit registers (QBASE, BASEPn) are a low word
//! followed by a high word.

use super::fields::{MemAttr, PmuEvent, PrivilegeLevel, SecurityLevel, State, bits};

/// Register offsets in bytes.
pub mod offset {
    /// Identification (`ID`).
    pub const ID: u32 = 0x0000;
    /// Status (`STATUS`).
    pub const STATUS: u32 = 0x0004;
    /// Command (`CMD`): start, IRQ clear, clock/power Q enables.
    pub const CMD: u32 = 0x0008;
    /// Soft reset request with the new privilege/security level (`RESET`).
    pub const RESET: u32 = 0x000c;
    /// Command queue base address, bits 0..=31 (`QBASE`).
    pub const QBASE: u32 = 0x0010;
    /// Command queue base address, bits 32..=39 (`QBASE_HI`).
    pub const QBASE_HI: u32 = 0x0014;
    /// Byte offset of the command being read from the queue (`QREAD`).
    pub const QREAD: u32 = 0x0018;
    /// Command queue memory attributes (`QCONFIG`).
    pub const QCONFIG: u32 = 0x001c;
    /// Command queue size in bytes (`QSIZE`).
    pub const QSIZE: u32 = 0x0020;
    /// Active privilege/security level (`PROT`).
    pub const PROT: u32 = 0x0024;
    /// Hardware configuration (`CONFIG`).
    pub const CONFIG: u32 = 0x0028;
    /// Register lock (`LOCK`).
    pub const LOCK: u32 = 0x002c;
    /// Memory attributes of the eight regions (`REGIONCFG`).
    pub const REGIONCFG: u32 = 0x003c;
    /// AXI limits of memory attribute 0 (`AXI_LIMIT0`).
    pub const AXI_LIMIT0: u32 = 0x0040;
    /// AXI limits of memory attribute 1 (`AXI_LIMIT1`).
    pub const AXI_LIMIT1: u32 = 0x0044;
    /// AXI limits of memory attribute 2 (`AXI_LIMIT2`).
    pub const AXI_LIMIT2: u32 = 0x0048;
    /// AXI limits of memory attribute 3 (`AXI_LIMIT3`).
    pub const AXI_LIMIT3: u32 = 0x004c;
    /// Base pointer of region 0, low word; region `n` is at `BASEP0 + 8 * n` (high word `+ 4`).
    pub const BASEP0: u32 = 0x0080;
    /// PMU control (`PMCR`).
    pub const PMCR: u32 = 0x0180;
    /// PMU counter enable set (`PMCNTENSET`).
    pub const PMCNTENSET: u32 = 0x0184;
    /// PMU counter enable clear (`PMCNTENCLR`).
    pub const PMCNTENCLR: u32 = 0x0188;
    /// PMU overflow status set (`PMOVSSET`).
    pub const PMOVSSET: u32 = 0x018c;
    /// PMU overflow status clear (`PMOVSCLR`).
    pub const PMOVSCLR: u32 = 0x0190;
    /// PMU interrupt enable set (`PMINTSET`).
    pub const PMINTSET: u32 = 0x0194;
    /// PMU interrupt enable clear (`PMINTCLR`).
    pub const PMINTCLR: u32 = 0x0198;
    /// PMU cycle counter, low word (`PMCCNTR`).
    pub const PMCCNTR: u32 = 0x01a0;
    /// PMU cycle counter, high 16 bits (`PMCCNTR_HI`).
    pub const PMCCNTR_HI: u32 = 0x01a4;
    /// PMU cycle counter start/stop events (`PMCCNTR_CFG`).
    pub const PMCCNTR_CFG: u32 = 0x01a8;
    /// PMU AXI channel selection (`PMCAXI_CHAN`).
    pub const PMCAXI_CHAN: u32 = 0x01ac;
    /// PMU event counter 0; counter `n` is at `PMEVCNTR0 + 4 * n`.
    pub const PMEVCNTR0: u32 = 0x0300;
    /// PMU event type 0; type `n` is at `PMEVTYPER0 + 4 * n`.
    pub const PMEVTYPER0: u32 = 0x0380;
    /// Shared buffer debug window start (256 words).
    pub const SHARED_BUFFER0: u32 = 0x0400;
    /// Revision (`REVISION`).
    pub const REVISION: u32 = 0x0fc0;
    /// Peripheral ID 4 (`PID4`); PID5..7 follow, then PID0..3 at `0x0fe0`.
    pub const PID4: u32 = 0x0fd0;
    /// Peripheral ID 0 (`PID0`).
    pub const PID0: u32 = 0x0fe0;
    /// Component ID 0 (`CID0`); CID1..3 follow.
    pub const CID0: u32 = 0x0ff0;
    /// Size of the register window.
    pub const WINDOW_SIZE: u32 = 0x1000;
}

/// Number of region base pointers (BASEP0..BASEP7).
pub const NUM_REGIONS: usize = 8;
/// Number of PMU event counters.
pub const NUM_PMU_COUNTERS: usize = 4;

/// Offset of the low word of base pointer `region` (0..=7).
pub const fn basep_offset(region: usize) -> u32 {
    offset::BASEP0 + 8 * region as u32
}

macro_rules! reg_newtype {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub struct $name(pub u32);
    };
}

const fn set_bits(v: u32, lo: u32, width: u32, x: u32) -> u32 {
    let mask = ((1u32 << width) - 1) << lo;
    (v & !mask) | ((x << lo) & mask)
}

reg_newtype!(
    /// `ID`: version and architecture revision.
    Id
);

impl Id {
    /// Packs the fields.
    pub const fn new(
        version_status: u32,
        version_minor: u32,
        version_major: u32,
        product_major: u32,
        arch: (u8, u8, u8),
    ) -> Self {
        Id((version_status & 0xf)
            | (version_minor & 0xf) << 4
            | (version_major & 0xf) << 8
            | (product_major & 0xf) << 12
            | (arch.2 as u32 & 0xf) << 16
            | (arch.1 as u32) << 20
            | (arch.0 as u32 & 0xf) << 28)
    }
    /// Product major (4 = Ethos-U55, 5 = Ethos-U65 in the driver's convention).
    pub const fn product_major(self) -> u32 {
        bits(self.0, 12, 4)
    }
    /// Architecture revision (major, minor, patch).
    pub const fn arch(self) -> (u8, u8, u8) {
        (
            bits(self.0, 28, 4) as u8,
            bits(self.0, 20, 8) as u8,
            bits(self.0, 16, 4) as u8,
        )
    }
}

reg_newtype!(
    /// `STATUS`: run state, IRQ and error flags, faulting channel, IRQ history.
    Status
);

impl Status {
    /// Bit 0: running.
    pub const STATE: u32 = 1 << 0;
    /// Bit 1: interrupt raised (cleared by `CMD.clear_irq`).
    pub const IRQ_RAISED: u32 = 1 << 1;
    /// Bit 2: an AXI bus error occurred.
    pub const BUS_STATUS: u32 = 1 << 2;
    /// Bit 3: a reset is in progress.
    pub const RESET_STATUS: u32 = 1 << 3;
    /// Bit 4: the command stream could not be parsed.
    pub const CMD_PARSE_ERROR: u32 = 1 << 4;
    /// Bit 5: `NPU_OP_STOP` or the end of the queue was reached.
    pub const CMD_END_REACHED: u32 = 1 << 5;
    /// Bit 6: a PMU interrupt was raised.
    pub const PMU_IRQ_RAISED: u32 = 1 << 6;
    /// Bit 7: weight decoder fault.
    pub const WD_FAULT: u32 = 1 << 7;
    /// Bit 8: ECC fault.
    pub const ECC_FAULT: u32 = 1 << 8;

    /// Run state.
    pub const fn state(self) -> State {
        if self.0 & Self::STATE != 0 {
            State::Running
        } else {
            State::Stopped
        }
    }
    /// Interrupt raised.
    pub const fn irq_raised(self) -> bool {
        self.0 & Self::IRQ_RAISED != 0
    }
    /// Bus error.
    pub const fn bus_status(self) -> bool {
        self.0 & Self::BUS_STATUS != 0
    }
    /// Reset in progress.
    pub const fn reset_status(self) -> bool {
        self.0 & Self::RESET_STATUS != 0
    }
    /// Command stream parse error.
    pub const fn cmd_parse_error(self) -> bool {
        self.0 & Self::CMD_PARSE_ERROR != 0
    }
    /// End of command stream reached.
    pub const fn cmd_end_reached(self) -> bool {
        self.0 & Self::CMD_END_REACHED != 0
    }
    /// PMU interrupt raised.
    pub const fn pmu_irq_raised(self) -> bool {
        self.0 & Self::PMU_IRQ_RAISED != 0
    }
    /// Weight decoder fault.
    pub const fn wd_fault(self) -> bool {
        self.0 & Self::WD_FAULT != 0
    }
    /// ECC fault.
    pub const fn ecc_fault(self) -> bool {
        self.0 & Self::ECC_FAULT != 0
    }
    /// The U55/U65 error flags: bus, parse, weight decoder, ECC (U85:
    /// [`super::u85::ctrl::STATUS_ERRORS`]).
    pub const ERRORS: u32 =
        Self::BUS_STATUS | Self::CMD_PARSE_ERROR | Self::WD_FAULT | Self::ECC_FAULT;

    /// Any error flag (bus, parse, weight decoder, ECC) is set.
    pub const fn has_error(self) -> bool {
        self.0 & Self::ERRORS != 0
    }
    /// Bit 11: the AXI interface of the fault (0 = M0, 1 = M1).
    pub const fn faulting_interface(self) -> u32 {
        bits(self.0, 11, 1)
    }
    /// Bits 12..=15: the faulting channel (see [`super::fields::DmaFaultChannel`]).
    pub const fn faulting_channel(self) -> u32 {
        bits(self.0, 12, 4)
    }
    /// Bits 16..=31: which `NPU_OP_IRQ`/STOP masks have raised an interrupt.
    pub const fn irq_history_mask(self) -> u32 {
        bits(self.0, 16, 16)
    }
    /// Sets the faulting interface and channel fields.
    pub const fn with_fault(self, interface: u32, channel: u32) -> Self {
        Status(set_bits(set_bits(self.0, 11, 1, interface), 12, 4, channel))
    }
    /// Sets the IRQ history field.
    pub const fn with_irq_history(self, mask: u32) -> Self {
        Status(set_bits(self.0, 16, 16, mask))
    }
}

reg_newtype!(
    /// `CMD`: written to start the queue, clear the IRQ, request a stop, or set Q-channel enables.
    CmdReg
);

impl CmdReg {
    /// Bit 0: start executing the queue at QBASE.
    pub const TRANSITION_TO_RUNNING_STATE: u32 = 1 << 0;
    /// Bit 1: clear `STATUS.irq_raised`.
    pub const CLEAR_IRQ: u32 = 1 << 1;
    /// Bit 2: clock Q-channel enable.
    pub const CLOCK_Q_ENABLE: u32 = 1 << 2;
    /// Bit 3: power Q-channel enable.
    pub const POWER_Q_ENABLE: u32 = 1 << 3;
    /// Bit 4: stop request.
    pub const STOP_REQUEST: u32 = 1 << 4;

    /// Start requested.
    pub const fn transition_to_running_state(self) -> bool {
        self.0 & Self::TRANSITION_TO_RUNNING_STATE != 0
    }
    /// IRQ clear requested.
    pub const fn clear_irq(self) -> bool {
        self.0 & Self::CLEAR_IRQ != 0
    }
    /// Clock Q-channel enable.
    pub const fn clock_q_enable(self) -> bool {
        self.0 & Self::CLOCK_Q_ENABLE != 0
    }
    /// Power Q-channel enable.
    pub const fn power_q_enable(self) -> bool {
        self.0 & Self::POWER_Q_ENABLE != 0
    }
    /// Stop requested.
    pub const fn stop_request(self) -> bool {
        self.0 & Self::STOP_REQUEST != 0
    }
    /// Bits 16..=31: IRQ history bits to clear.
    pub const fn clear_irq_history(self) -> u32 {
        bits(self.0, 16, 16)
    }
}

reg_newtype!(
    /// `RESET`: writing requests a soft reset into the given privilege/security level.
    Reset
);

impl Reset {
    /// Packs the fields.
    pub const fn new(cpl: PrivilegeLevel, csl: SecurityLevel) -> Self {
        Reset(cpl as u32 | (csl as u32) << 1)
    }
    /// Bit 0: pending privilege level.
    pub const fn pending_cpl(self) -> PrivilegeLevel {
        if self.0 & 1 != 0 {
            PrivilegeLevel::Privileged
        } else {
            PrivilegeLevel::User
        }
    }
    /// Bit 1: pending security level.
    pub const fn pending_csl(self) -> SecurityLevel {
        if self.0 & 2 != 0 {
            SecurityLevel::NonSecure
        } else {
            SecurityLevel::Secure
        }
    }
}

reg_newtype!(
    /// `PROT`: the active privilege and security level (same layout as [`Reset`]).
    Prot
);

impl Prot {
    /// Bit 0: active privilege level.
    pub const fn active_cpl(self) -> PrivilegeLevel {
        Reset(self.0).pending_cpl()
    }
    /// Bit 1: active security level.
    pub const fn active_csl(self) -> SecurityLevel {
        Reset(self.0).pending_csl()
    }
}

reg_newtype!(
    /// `CONFIG`: MACs per cycle (log2), command stream version, shared buffer size, product.
    Config
);

impl Config {
    /// Packs the fields: `shram_kib` is the shared buffer size in KiB, `product` 0 = U55, 1 = U65.
    pub const fn new(
        macs_per_cc_log2: u32,
        cmd_stream_version: u32,
        shram_kib: u32,
        product: u32,
    ) -> Self {
        Config(
            (macs_per_cc_log2 & 0xf)
                | (cmd_stream_version & 0xf) << 4
                | (shram_kib & 0xff) << 8
                | (product & 0xf) << 28,
        )
    }
    /// Bits 0..=3: log2 of MACs per cycle.
    pub const fn macs_per_cc_log2(self) -> u32 {
        bits(self.0, 0, 4)
    }
    /// Bits 4..=7: command stream version.
    pub const fn cmd_stream_version(self) -> u32 {
        bits(self.0, 4, 4)
    }
    /// Bits 8..=15: shared buffer size in KiB.
    pub const fn shram_kib(self) -> u32 {
        bits(self.0, 8, 8)
    }
    /// Bit 27: custom DMA implemented.
    pub const fn custom_dma(self) -> bool {
        self.0 & (1 << 27) != 0
    }
    /// Bits 28..=31: product (0 = Ethos-U55, 1 = Ethos-U65).
    pub const fn product(self) -> u32 {
        bits(self.0, 28, 4)
    }
}

reg_newtype!(
    /// `QCONFIG`: memory attribute of the command queue (bits 0..=1).
    QConfig
);

impl QConfig {
    /// Memory attribute used for command reads.
    pub const fn cmd_region0(self) -> MemAttr {
        match bits(self.0, 0, 2) {
            0 => MemAttr::Axi0OutstandingCounter0,
            1 => MemAttr::Axi0OutstandingCounter1,
            2 => MemAttr::Axi1OutstandingCounter2,
            _ => MemAttr::Axi1OutstandingCounter3,
        }
    }
}

reg_newtype!(
    /// `REGIONCFG`: two bits of memory attribute per region.
    RegionCfg
);

impl RegionCfg {
    /// Memory attribute of `region` (0..=7).
    pub const fn region(self, region: usize) -> MemAttr {
        QConfig(bits(self.0, 2 * (region as u32 & 7), 2)).cmd_region0()
    }
    /// Sets the memory attribute of `region` (0..=7).
    pub const fn with_region(self, region: usize, attr: MemAttr) -> Self {
        RegionCfg(set_bits(self.0, 2 * (region as u32 & 7), 2, attr as u32))
    }
}

reg_newtype!(
    /// `AXI_LIMITn`: burst length, memory type and outstanding transaction limits.
    AxiLimit
);

impl AxiLimit {
    /// Bits 0..=1: max beats (see [`super::fields::MaxBeats`]).
    pub const fn max_beats(self) -> u32 {
        bits(self.0, 0, 2)
    }
    /// Bits 4..=7: AXI memory type (see [`super::fields::AxiMemEncoding`]).
    pub const fn memtype(self) -> u32 {
        bits(self.0, 4, 4)
    }
    /// Bits 16..=21: outstanding reads minus one.
    pub const fn max_outstanding_read_m1(self) -> u32 {
        bits(self.0, 16, 6)
    }
    /// Bits 24..=28: outstanding writes minus one.
    pub const fn max_outstanding_write_m1(self) -> u32 {
        bits(self.0, 24, 5)
    }
}

reg_newtype!(
    /// `PMCR`: PMU enable, counter resets, number of event counters.
    Pmcr
);

impl Pmcr {
    /// Bit 0: counters enabled.
    pub const CNT_EN: u32 = 1 << 0;
    /// Bit 1: reset the event counters (self-clearing).
    pub const EVENT_CNT_RST: u32 = 1 << 1;
    /// Bit 2: reset the cycle counter (self-clearing).
    pub const CYCLE_CNT_RST: u32 = 1 << 2;
    /// Bit 3: `NPU_OP_PMU_MASK` gates counting.
    pub const MASK_EN: u32 = 1 << 3;

    /// Counters enabled.
    pub const fn cnt_en(self) -> bool {
        self.0 & Self::CNT_EN != 0
    }
    /// Bits 11..=15: number of event counters implemented (read-only).
    pub const fn num_event_cnt(self) -> u32 {
        bits(self.0, 11, 5)
    }
}

/// Bit of the cycle counter in `PMCNTENSET/CLR`, `PMOVSSET/CLR`, `PMINTSET/CLR`; event
/// counter `n` is bit `n`.
pub const PMU_CYCLE_COUNTER_BIT: u32 = 1 << 31;

reg_newtype!(
    /// `PMCCNTR_CFG`: events that start and stop the cycle counter.
    PmccntrCfg
);

impl PmccntrCfg {
    /// Bits 0..=9: start event.
    pub const fn start_event(self) -> Option<PmuEvent> {
        PmuEvent::from_bits(bits(self.0, 0, 10) as u16)
    }
    /// Bits 16..=25: stop event.
    pub const fn stop_event(self) -> Option<PmuEvent> {
        PmuEvent::from_bits(bits(self.0, 16, 10) as u16)
    }
}

reg_newtype!(
    /// `PMEVTYPERn`: the event counted by event counter `n` (bits 0..=9).
    PmevTyper
);

impl PmevTyper {
    /// The event (None for undefined encodings).
    pub const fn event(self) -> Option<PmuEvent> {
        PmuEvent::from_bits(bits(self.0, 0, 10) as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts() {
        assert_eq!(basep_offset(7), 0xb8);
        let id = Id::new(0, 0, 0, 4, (1, 0, 6));
        assert_eq!(id.arch(), (1, 0, 6));
        assert_eq!(id.product_major(), 4);
        let c = Config::new(7, 0, 24, 0);
        assert_eq!(
            (c.macs_per_cc_log2(), c.shram_kib(), c.product()),
            (7, 24, 0)
        );
        let s = Status(Status::IRQ_RAISED | Status::CMD_END_REACHED).with_fault(1, 8);
        assert!(s.irq_raised() && s.cmd_end_reached() && !s.has_error());
        assert_eq!((s.faulting_interface(), s.faulting_channel()), (1, 8));
        let r = RegionCfg(0).with_region(3, MemAttr::Axi1OutstandingCounter2);
        assert_eq!(r.region(3), MemAttr::Axi1OutstandingCounter2);
        assert_eq!(r.region(2), MemAttr::Axi0OutstandingCounter0);
    }
}
