//! The MMIO driver: runs a COP1 job on an Ethos-U55, U65 or U85 through its register window.
//!
//! A run ([`EthosU::run_job`], or [`crate::Npu::run`]):
//! 1. parses the COP1 payload and checks the arena and fast scratch sizes;
//! 2. checks that an NPU answers at all (`ID` is neither 0 nor all ones), then soft-resets it (`RESET`, then polls `STATUS.reset_status`, bounded);
//! 3. checks `CONFIG` (product, MACs per cycle, command stream version, custom DMA) and `ID`
//!    (architecture) against the payload's OPTIMIZER_CONFIG: a stream built for another
//!    configuration is an error, never a silently wrong result;
//! 4. programs `QCONFIG`, `REGIONCFG`, `AXI_LIMIT0..3` ([`Settings`]); on a U85 (the payload's
//!    product is 2) `MEM_ATTR0..3`, `QCONFIG`, `REGIONCFG`, `AXI_SRAM`, `AXI_EXT` instead
//!    ([`crate::ethos_u::regs::u85::ctrl`]);
//! 5. translates the buffers to NPU addresses ([`Platform::npu_address`]), cleans the data
//!    cache over them, starts the PMU ([`PmuConfig`]);
//! 6. for each command stream: `QBASE`/`QSIZE`, `BASEP0..2` (weights, arena, fast scratch),
//!    `CMD.transition_to_running_state`, then waits (polling `STATUS`, or an [`IrqState`] the
//!    interrupt handler fills), bounded by [`Settings::max_polls`];
//! 7. reads the PMU ([`EthosU::pmu_report`]), resets the NPU again if it failed or hung (so it
//!    stops touching the buffers the caller gets back), and invalidates the data cache over
//!    the arena and the fast scratch.
//!
//! The family comes from the payload's OPTIMIZER_CONFIG: it picks the register map (U85: AXI
//! and PMU registers, eight PMU counters of which [`PmuConfig`] uses four, `STATUS.branch_fault`
//! as an error), the address width (U55 32 bits, U65 and U85 40) and the extra U85 `CONFIG`
//! checks (AXI SRAM/external port counts, as `ethosu_dev_verify_optimizer_config` does).
//!
//! Sources for the sequence and the defaults: Arm's `ethos-u-core-driver`
//! (`ethosu_device_u55_u65.c`, `ethosu_config_u55.h`; `ethosu_device_u85.c`,
//! `ethosu_config_u85.h`, `ethosu_pmu_u85.c` for U85).

mod irq;
mod mmio;
mod platform;
mod pmu;
#[cfg(test)]
mod tests;

pub use irq::IrqState;
pub use mmio::{Mmio, VolatileMmio};
pub use platform::{Coherent, Platform};
use pmu::PmuMap;
pub use pmu::{PmuConfig, PmuReport};

use crate::error::Error;
use crate::ethos_u::cop::Cop1;
use crate::ethos_u::regs::ctrl::{
    AxiLimit, CmdReg, Config, Id, RegionCfg, Reset, Status, basep_offset, offset,
};
use crate::ethos_u::regs::u85::ctrl::{self as u85ctrl, Config as U85ConfigReg};
use crate::ethos_u::regs::{MemAttr, PrivilegeLevel, SecurityLevel};
use crate::npu::{Job, Npu};

/// The `region` of [`Error::NotNpuAddressable`] for the command stream.
pub const QUEUE_REGION: u8 = 8;

/// Register settings and wait bounds of a driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Privilege level the NPU's transactions get after reset.
    pub privilege: PrivilegeLevel,
    /// Security level the NPU's transactions get after reset.
    pub security: SecurityLevel,
    /// Memory attribute of command-stream reads (`QCONFIG`); on a U85 the index of the
    /// `MEM_ATTR` entry (same two bits).
    pub qconfig: MemAttr,
    /// Memory attribute of each region (`REGIONCFG`); on a U85 the `MEM_ATTR` index of each.
    pub regioncfg: RegionCfg,
    /// `AXI_LIMIT0..3` (U55/U65): burst length, memory type and outstanding transactions per
    /// attribute.
    pub axi_limits: [AxiLimit; 4],
    /// `MEM_ATTR0..3` (U85): memory domain, AXI port and memory type of each entry
    /// ([`u85ctrl::mem_attr`]).
    pub mem_attr: [u32; 4],
    /// `AXI_SRAM` (U85): outstanding transactions and burst length on the SRAM ports
    /// ([`u85ctrl::axi_limits`]).
    pub axi_sram: u32,
    /// `AXI_EXT` (U85): the same for the external ports.
    pub axi_ext: u32,
    /// Looks at `STATUS` (or [`Platform::idle`] calls in interrupt mode) before a run that has
    /// not finished is a [`Error::Timeout`].
    pub max_polls: u32,
    /// `STATUS` reads before a soft reset that has not finished is a [`Error::Timeout`].
    pub reset_polls: u32,
}

/// Packs an `AXI_LIMITn` word.
pub const fn axi_limit(max_beats: u32, memtype: u32, max_reads: u32, max_writes: u32) -> AxiLimit {
    AxiLimit(
        (max_beats & 3)
            | (memtype & 0xf) << 4
            | (max_reads.saturating_sub(1) & 0x3f) << 16
            | (max_writes.saturating_sub(1) & 0x1f) << 24,
    )
}

impl Settings {
    /// `ethos-u-core-driver`'s defaults: privileged and secure; commands on AXI1 (counter 2);
    /// region 0 (weights) on AXI1 counter 3, region 1 (arena) on AXI0 counter 0, the others on
    /// AXI0 counter 1; 64-byte bursts, 32 outstanding reads and 16 writes; reset bound 100000
    /// reads; run bound 50 million looks at STATUS. On a U85 (`ethosu_config_u85.h`): the same
    /// `QCONFIG`/`REGIONCFG` values select `MEM_ATTR` entries, entries 0 and 1 on the SRAM
    /// port, 2 and 3 on the external port; 64 outstanding reads, 32 writes, 256-byte bursts on
    /// both.
    pub const DEFAULT: Settings = Settings {
        privilege: PrivilegeLevel::Privileged,
        security: SecurityLevel::Secure,
        qconfig: MemAttr::Axi1OutstandingCounter2,
        regioncfg: RegionCfg(0x5553),
        axi_limits: [axi_limit(0, 0, 32, 16); 4],
        mem_attr: [
            u85ctrl::mem_attr(0, false, 0),
            u85ctrl::mem_attr(0, false, 0),
            u85ctrl::mem_attr(0, true, 0),
            u85ctrl::mem_attr(0, true, 0),
        ],
        axi_sram: u85ctrl::axi_limits(64, 32, 2),
        axi_ext: u85ctrl::axi_limits(64, 32, 2),
        max_polls: 50_000_000,
        reset_polls: 100_000,
    };
}

impl Default for Settings {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// An Ethos-U55/U65 driven through its register window `M`, in a system described by `P`.
#[derive(Debug)]
pub struct EthosU<M: Mmio, P: Platform = Coherent> {
    regs: M,
    platform: P,
    settings: Settings,
    pmu: Option<PmuConfig>,
    irq: Option<&'static IrqState>,
    report: Option<PmuReport>,
}

impl EthosU<VolatileMmio> {
    /// The NPU whose register window is at `base`, with default [`Settings`], no PMU, polling.
    ///
    /// # Safety
    ///
    /// As [`VolatileMmio::new`]: `base` is the NPU's register window, valid for the life of
    /// the driver, and no other code drives this NPU.
    pub unsafe fn new(base: *mut u32) -> Self {
        // SAFETY: the caller upholds VolatileMmio::new's contract (same as ours).
        EthosU::with_mmio(unsafe { VolatileMmio::new(base) })
    }
}

impl<M: Mmio> EthosU<M> {
    /// A driver over any register access (a register-file model in tests).
    pub fn with_mmio(regs: M) -> Self {
        EthosU {
            regs,
            platform: Coherent,
            settings: Settings::DEFAULT,
            pmu: None,
            irq: None,
            report: None,
        }
    }
}

impl<M: Mmio, P: Platform> EthosU<M, P> {
    /// Uses `platform` for address translation, cache maintenance and idling.
    pub fn with_platform<Q: Platform>(self, platform: Q) -> EthosU<M, Q> {
        EthosU {
            regs: self.regs,
            platform,
            settings: self.settings,
            pmu: self.pmu,
            irq: self.irq,
            report: self.report,
        }
    }

    /// Replaces the register settings and wait bounds.
    pub fn with_settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// Counts `pmu` during every run ([`EthosU::pmu_report`]).
    pub fn with_pmu(mut self, pmu: PmuConfig) -> Self {
        self.pmu = Some(pmu);
        self
    }

    /// Waits for the interrupt handler's [`IrqState::on_interrupt`] instead of polling
    /// `STATUS`; [`Platform::idle`] runs between looks (e.g. `wfi`).
    pub fn with_irq(mut self, irq: &'static IrqState) -> Self {
        self.irq = Some(irq);
        self
    }

    /// The settings in use.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The PMU counters of the last run that got as far as starting the NPU.
    pub fn pmu_report(&self) -> Option<&PmuReport> {
        self.report.as_ref()
    }

    /// The register window.
    pub fn regs(&mut self) -> &mut M {
        &mut self.regs
    }

    /// The platform hooks.
    pub fn platform(&mut self) -> &mut P {
        &mut self.platform
    }

    /// The hardware's `ID` and `CONFIG` registers.
    pub fn hardware(&mut self) -> (Id, Config) {
        (
            Id(self.regs.read32(offset::ID)),
            Config(self.regs.read32(offset::CONFIG)),
        )
    }

    /// Runs `job` to completion (see the module documentation for the sequence).
    pub fn run_job(&mut self, job: Job<'_>) -> Result<(), Error> {
        let cop =
            Cop1::parse(job.command_stream).map_err(|e| Error::Payload { offset: e.offset })?;
        // Without OPTIMIZER_CONFIG nothing says what the stream was built for.
        let (want_config, want_id) = cop.optimizer_config().ok_or(Error::Payload {
            offset: job.command_stream.len(),
        })?;
        job.check_sizes()?;
        self.check_present()?;
        self.reset()?;
        self.check_hardware(want_config, want_id)?;
        let u85 = Config(want_config).product() == u85ctrl::PRODUCT;
        self.program_axi(u85);
        // U55 drives 32 address bits, U65 and U85 40.
        let limit = if Config(want_config).product() == 0 {
            1 << 32
        } else {
            1 << u85ctrl::ADDRESS_BITS
        };
        let base = [
            self.npu_address(0, job.weights, limit)?,
            self.npu_address(1, job.arena, limit)?,
            self.npu_address(2, job.fast_scratch, limit)?,
        ];

        self.platform.clean(job.command_stream);
        self.platform.clean(job.weights);
        self.platform.clean(job.arena);
        self.platform.clean(job.fast_scratch);
        let pmu_map = if u85 { PmuMap::U85 } else { PmuMap::U55 };
        if let Some(pmu) = &self.pmu {
            pmu.start(&mut self.regs, pmu_map);
        }
        let errors = if u85 {
            u85ctrl::STATUS_ERRORS
        } else {
            Status::ERRORS
        };
        let mut result = Ok(());
        for (_, stream) in cop.command_streams() {
            result = self.run_stream(stream, &base, limit, errors);
            if result.is_err() {
                break;
            }
        }
        self.report = self.pmu.map(|pmu| pmu.read(&mut self.regs, pmu_map));
        if result.is_err() {
            // Stop a faulted or hung NPU before the caller gets its buffers back.
            let _ = self.reset();
        }
        self.platform.invalidate(job.arena);
        self.platform.invalidate(job.fast_scratch);
        result
    }

    /// Programs the memory attributes and AXI limits of the family's register map.
    fn program_axi(&mut self, u85: bool) {
        let s = self.settings;
        if u85 {
            for (i, attr) in s.mem_attr.iter().enumerate() {
                self.regs
                    .write32(u85ctrl::offset::MEM_ATTR0 + 4 * i as u32, *attr);
            }
        }
        self.regs.write32(offset::QCONFIG, s.qconfig as u32);
        self.regs.write32(offset::REGIONCFG, s.regioncfg.0);
        if u85 {
            self.regs.write32(u85ctrl::offset::AXI_SRAM, s.axi_sram);
            self.regs.write32(u85ctrl::offset::AXI_EXT, s.axi_ext);
        } else {
            for (i, limit) in s.axi_limits.iter().enumerate() {
                self.regs
                    .write32(offset::AXI_LIMIT0 + 4 * i as u32, limit.0);
            }
        }
    }

    /// Soft reset into the configured privilege and security level, bounded.
    fn reset(&mut self) -> Result<(), Error> {
        let r = Reset::new(self.settings.privilege, self.settings.security);
        self.regs.write32(offset::RESET, r.0);
        let mut status = 0;
        for _ in 0..self.settings.reset_polls.max(1) {
            status = self.regs.read32(offset::STATUS);
            if !Status(status).reset_status() {
                return Ok(());
            }
        }
        Err(Error::Timeout { status })
    }

    /// Whether an Ethos-U answers at the window: an absent device (an unmapped address, a
    /// system without the NPU, an emulator that does not model it) reads as all zeros or all
    /// ones, and no Ethos-U has an `ID` of either (its architecture major version is 1 or 2).
    /// Checked before the reset so nothing is written to a window that is not an NPU.
    fn check_present(&mut self) -> Result<(), Error> {
        let id = self.regs.read32(offset::ID);
        if id == 0 || id == u32::MAX {
            return Err(Error::NoDevice {
                base: self.regs.base_address(),
                id,
            });
        }
        Ok(())
    }

    fn check_hardware(&mut self, want_config: u32, want_id: u32) -> Result<(), Error> {
        let (id, hw) = self.hardware();
        let want = Config(want_config);
        if hw.product() != want.product()
            || hw.macs_per_cc_log2() != want.macs_per_cc_log2()
            || hw.cmd_stream_version() != want.cmd_stream_version()
            || (want.custom_dma() && !hw.custom_dma())
            || (want.product() == u85ctrl::PRODUCT && !same_u85_ports(want_config, hw.0))
        {
            return Err(Error::ConfigMismatch {
                expected: want_config,
                found: hw.0,
            });
        }
        let (have, need) = (id.arch(), Id(want_id).arch());
        if have.0 != need.0 || have.1 < need.1 {
            return Err(Error::ArchMismatch {
                expected: want_id,
                found: id.0,
            });
        }
        Ok(())
    }

    /// The NPU address of `data` (0 for an empty region, which the stream must not use).
    fn npu_address(&mut self, region: u8, data: &[u8], limit: u64) -> Result<u64, Error> {
        if data.is_empty() {
            return Ok(0);
        }
        let cpu = data.as_ptr() as usize;
        self.platform
            .npu_address(cpu, data.len())
            .filter(|a| {
                a.checked_add(data.len() as u64)
                    .is_some_and(|end| end <= limit)
            })
            .ok_or(Error::NotNpuAddressable {
                region,
                cpu_address: cpu,
            })
    }

    fn run_stream(
        &mut self,
        stream: &[u8],
        base: &[u64; 3],
        limit: u64,
        errors: u32,
    ) -> Result<(), Error> {
        let q = self.npu_address(QUEUE_REGION, stream, limit)?;
        self.regs.write32(offset::QBASE, q as u32);
        self.regs.write32(offset::QBASE_HI, (q >> 32) as u32);
        // COP1 streams have fewer than 2^24 words, so the byte count fits.
        self.regs.write32(offset::QSIZE, stream.len() as u32);
        for (i, b) in base.iter().enumerate() {
            self.regs.write32(basep_offset(i), *b as u32);
            self.regs.write32(basep_offset(i) + 4, (*b >> 32) as u32);
        }
        if let Some(irq) = self.irq {
            // Drop an interrupt left over from an earlier run.
            let _ = irq.take();
        }
        let q_enables = self.q_enables();
        self.regs
            .write32(offset::CMD, q_enables | CmdReg::TRANSITION_TO_RUNNING_STATE);
        self.wait(errors)
    }

    fn q_enables(&mut self) -> u32 {
        self.regs.read32(offset::CMD) & (CmdReg::CLOCK_Q_ENABLE | CmdReg::POWER_Q_ENABLE)
    }

    /// Waits for the end of the queue: stopped with `cmd_end_reached` and the interrupt
    /// raised (the interrupt tells this run's end from a stale `cmd_end_reached`). `errors` are
    /// the family's `STATUS` error bits.
    fn wait(&mut self, errors: u32) -> Result<(), Error> {
        let mut last = 0;
        for _ in 0..self.settings.max_polls {
            let status = match self.irq {
                Some(irq) => match irq.take() {
                    Some(s) => s,
                    None => {
                        self.platform.idle();
                        continue;
                    }
                },
                None => self.regs.read32(offset::STATUS),
            };
            last = status;
            let s = Status(status);
            if s.bus_status() {
                return Err(Error::BusError { status });
            }
            if s.cmd_parse_error() {
                return Err(Error::CommandError { status });
            }
            if status & errors != 0 {
                return Err(Error::Fault { status });
            }
            if !s.reset_status() && s.cmd_end_reached() && s.irq_raised() && !is_running(s) {
                if self.irq.is_none() {
                    let q = self.q_enables();
                    self.regs.write32(offset::CMD, q | CmdReg::CLEAR_IRQ);
                }
                return Ok(());
            }
            self.platform.idle();
        }
        if self.irq.is_some() {
            last = self.regs.read32(offset::STATUS);
        }
        Err(Error::Timeout { status: last })
    }
}

/// Whether two U85 `CONFIG` words agree on the AXI SRAM and external port counts (the
/// payload's stream is scheduled for them; `ethosu_dev_verify_optimizer_config` checks both).
fn same_u85_ports(a: u32, b: u32) -> bool {
    let (a, b) = (U85ConfigReg(a), U85ConfigReg(b));
    a.axi_sram_log2() == b.axi_sram_log2() && a.axi_ext_log2() == b.axi_ext_log2()
}

fn is_running(s: Status) -> bool {
    s.0 & Status::STATE != 0
}

impl<M: Mmio, P: Platform> Npu for EthosU<M, P> {
    fn run(&mut self, job: Job<'_>) -> Result<(), Error> {
        self.run_job(job)
    }
}
