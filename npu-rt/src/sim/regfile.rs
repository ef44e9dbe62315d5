//! Register-file model of the NPU's control interface, for driver tests.
//!
//! A driver programs [`RegisterFile`] with [`RegisterFile::write32`]/[`RegisterFile::read32`]
//! at the documented offsets ([`crate::ethos_u::regs::ctrl::offset`]) exactly as it programs
//! silicon: soft reset through `RESET` (then poll `STATUS.reset_status`), `QBASE`/`QSIZE` for the
//! command stream, `BASEP0..7` for the regions, then `CMD.transition_to_running_state`. The
//! model fetches the command stream and the regions from the [`SystemMemory`] the test maps
//! (physical address -> byte buffer), executes with [`super::VirtualNpu`], and then shows what
//! hardware shows: `STATUS` (state, `irq_raised`, `cmd_end_reached`, error bits, faulting
//! channel, IRQ history), `QREAD`, the IRQ line ([`RegisterFile::irq`]) and the PMU counters.
//!
//! By default a start runs the whole queue within the `CMD` write; with
//! [`RegisterFile::set_auto_run`]`(false)` the NPU stays RUNNING and [`RegisterFile::step`]
//! advances it command by command. [`Fault`]s can be injected: a bus error, a command parse
//! error, or a hang (the NPU stays RUNNING and never raises its IRQ until reset).
//!
//! Real failures map to the same status bits: out-of-bounds or unmapped accesses are bus errors
//! (`STATUS.bus_status`, with the faulting channel), undecodable commands are parse errors.
//!
//! The cycle counter and the cycle-based PMU events come from a simple synthetic model (work
//! divided by the configuration's throughput); they are for driver plumbing, not performance.
//!
//! [`RegisterFile::new_u85`] hosts a virtual Ethos-U85 ([`super::VirtualU85`]) instead: `ID` and
//! `CONFIG` read back as a U85's, the U85 register map applies where it differs from U55/U65
//! ([`crate::ethos_u::regs::u85::ctrl`]: `MEM_ATTR0..3`, `AXI_SRAM`, `AXI_EXT`, the PMU at
//! `+0x1000` with eight event counters), and the queue runs U85 commands.

use std::boxed::Box;
use std::vec::Vec;

use crate::ethos_u::config::{AcceleratorConfig, U85Config};
use crate::ethos_u::regs::ctrl::{
    CmdReg, NUM_PMU_COUNTERS, NUM_REGIONS, PMU_CYCLE_COUNTER_BIT, Pmcr, PmevTyper, Reset, Status,
    offset,
};
use crate::ethos_u::regs::u85::ctrl as u85ctrl;
use crate::ethos_u::regs::{DmaFaultChannel, PmuEvent};

use super::error::{Access, SimError, SimErrorKind};
use super::memory::Regions;
use super::stats::Stats;
use super::{StreamEnd, VirtualNpu, VirtualU85};

/// The `ID` register value the model reports (the value Vela writes into its COP1 payloads).
pub const DEFAULT_ID: u32 = 0x1006_6001;

/// A fault to inject into the next (or current) run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// An AXI bus error after `after_commands` commands: `STATUS.bus_status`, IRQ, stopped.
    BusError {
        /// Commands executed before the fault.
        after_commands: u64,
    },
    /// A command parse error after `after_commands` commands: `STATUS.cmd_parse_error`, IRQ.
    CmdParseError {
        /// Commands executed before the fault.
        after_commands: u64,
    },
    /// The NPU stops making progress after `after_commands` commands: it stays RUNNING, never
    /// raises its IRQ, and only a soft reset recovers it.
    Hang {
        /// Commands executed before the hang.
        after_commands: u64,
    },
}

/// Physical memory the model's AXI ports see: windows of caller buffers at base addresses.
#[derive(Debug, Default)]
pub struct SystemMemory<'a> {
    windows: Vec<(u64, Window<'a>)>,
}

#[derive(Debug)]
enum Window<'a> {
    Ro(&'a [u8]),
    Rw(&'a mut [u8]),
}

impl Window<'_> {
    fn len(&self) -> usize {
        match self {
            Window::Ro(b) => b.len(),
            Window::Rw(b) => b.len(),
        }
    }
}

impl<'a> SystemMemory<'a> {
    /// No memory mapped.
    pub fn new() -> Self {
        SystemMemory::default()
    }

    /// Maps a read-only buffer (flash) at physical address `base`.
    pub fn map(&mut self, base: u64, bytes: &'a [u8]) -> &mut Self {
        self.windows.push((base, Window::Ro(bytes)));
        self
    }

    /// Maps a writable buffer (SRAM) at physical address `base`.
    pub fn map_mut(&mut self, base: u64, bytes: &'a mut [u8]) -> &mut Self {
        self.windows.push((base, Window::Rw(bytes)));
        self
    }

    /// The window holding `addr`: (index, offset within it).
    fn find(&self, addr: u64) -> Option<(usize, usize)> {
        self.windows.iter().enumerate().find_map(|(i, (base, w))| {
            let off = addr.checked_sub(*base)?;
            let off = usize::try_from(off).ok()?;
            (off < w.len()).then_some((i, off))
        })
    }

    /// Reads `len` bytes at physical `addr` (within one window).
    pub fn read(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let (i, off) = self.find(addr)?;
        let w = &self.windows.get(i)?.1;
        let bytes: &[u8] = match w {
            Window::Ro(b) => b,
            Window::Rw(b) => b,
        };
        bytes.get(off..off.checked_add(len)?)
    }

    /// Writes `bytes` at physical `addr` into one writable window; `None` when unmapped,
    /// read-only or out of range (driver tests use it to model a CPU cache write-back).
    pub fn write(&mut self, addr: u64, bytes: &[u8]) -> Option<()> {
        let (i, off) = self.find(addr)?;
        match &mut self.windows.get_mut(i)?.1 {
            Window::Rw(b) => {
                let end = off.checked_add(bytes.len())?;
                b.get_mut(off..end)?.copy_from_slice(bytes);
                Some(())
            }
            Window::Ro(_) => None,
        }
    }

    /// Maps the regions whose base pointers fall inside a window; others stay unmapped.
    fn regions(&mut self, basep: &[u64; NUM_REGIONS]) -> Regions<'_> {
        let places: Vec<Option<(usize, usize)>> = basep.iter().map(|&b| self.find(b)).collect();
        let mut regions = Regions::new();
        let ids: Vec<_> = self
            .windows
            .iter_mut()
            .map(|(_, w)| match w {
                Window::Ro(b) => regions.add_buffer(b),
                Window::Rw(b) => regions.add_buffer_mut(b),
            })
            .collect();
        for (region, place) in places.iter().enumerate() {
            if let Some((i, off)) = place
                && let Some(&id) = ids.get(*i)
            {
                regions.map_region(region, id, *off);
            }
        }
        regions
    }
}

/// The most PMU event counters of any hosted NPU (U85: 8, U55/U65: 4).
const MAX_PMU_COUNTERS: usize = u85ctrl::NUM_PMU_COUNTERS;

/// The virtual NPU behind the registers (both boxed: the U55/U65 model is large).
enum Engine {
    U55(Box<VirtualNpu>),
    U85(Box<VirtualU85>),
}

impl Engine {
    fn is_u85(&self) -> bool {
        matches!(self, Engine::U85(_))
    }

    /// A freshly reset NPU of the same configuration.
    fn fresh(&self) -> Engine {
        match self {
            Engine::U55(n) => Engine::U55(Box::new(VirtualNpu::new(n.config()))),
            Engine::U85(n) => Engine::U85(Box::new(VirtualU85::new(n.config()))),
        }
    }

    fn config_word(&self) -> u32 {
        match self {
            Engine::U55(n) => n.config_register().0,
            Engine::U85(n) => n.config_register().0,
        }
    }

    fn pmu_counters(&self) -> usize {
        if self.is_u85() {
            u85ctrl::NUM_PMU_COUNTERS
        } else {
            NUM_PMU_COUNTERS
        }
    }

    /// (MACs, output elements, AXI bytes) per cycle of the synthetic cycle model.
    fn throughput(&self) -> (u64, u64, u64) {
        match self {
            Engine::U55(n) => {
                let c = n.config();
                (
                    (c.macs * c.cores).max(1) as u64,
                    c.elementwise_units.max(1) as u64,
                    c.axi_port_bytes_per_cycle.max(1) as u64,
                )
            }
            // Synthetic: one output element per 8 MACs, 16 bytes per SRAM port.
            Engine::U85(n) => {
                let c = n.config();
                (
                    c.macs.max(1) as u64,
                    (c.macs / 8).max(1) as u64,
                    16u64 << c.axi_sram_log2,
                )
            }
        }
    }

    fn begin_queue(&mut self) {
        match self {
            Engine::U55(n) => n.work = 0,
            Engine::U85(n) => n.begin_queue(),
        }
    }

    fn step(
        &mut self,
        words: &[u32],
        byte_offset: usize,
        regions: &mut Regions,
        stats: &mut Stats,
    ) -> Result<(usize, Option<StreamEnd>), SimError> {
        match self {
            Engine::U55(n) => n.step(words, byte_offset, regions, stats),
            Engine::U85(n) => n.step(words, byte_offset, regions, stats),
        }
    }
}

/// Execution state of the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Run {
    Idle,
    Running,
    Hung,
}

/// The control interface of one virtual NPU.
pub struct RegisterFile<'a> {
    npu: Engine,
    mem: SystemMemory<'a>,
    id: u32,
    status: u32,
    cmd: u32,
    prot: u32,
    qbase: u64,
    qread: u32,
    qconfig: u32,
    qsize: u32,
    lock: u32,
    regioncfg: u32,
    axi_limit: [u32; 4],
    axi_sram: u32,
    axi_ext: u32,
    power_ctrl: u32,
    basep: [u64; NUM_REGIONS],
    pmcr: u32,
    pmcnten: u32,
    pmovs: u32,
    pmint: u32,
    pmccntr: u64,
    pmccntr_cfg: u32,
    pmcaxi_chan: u32,
    pmevcntr: [u32; MAX_PMU_COUNTERS],
    pmevtyper: [u32; MAX_PMU_COUNTERS],
    run: Run,
    auto_run: bool,
    fault: Option<Fault>,
    commands: u64,
    stats: Stats,
    last_error: Option<SimError>,
}

impl core::fmt::Debug for RegisterFile<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RegisterFile")
            .field("status", &format_args!("{:#010x}", self.status))
            .field("qbase", &self.qbase)
            .field("qsize", &self.qsize)
            .field("qread", &self.qread)
            .finish_non_exhaustive()
    }
}

impl<'a> RegisterFile<'a> {
    /// A freshly reset NPU of `config` seeing `mem`.
    pub fn new(config: &'static AcceleratorConfig, mem: SystemMemory<'a>) -> Self {
        RegisterFile::with_engine(Engine::U55(Box::new(VirtualNpu::new(config))), mem)
    }

    /// A freshly reset Ethos-U85 of `config` seeing `mem`: `ID` reads
    /// [`u85ctrl::ID`], `CONFIG` the configuration's U85 `CONFIG` word.
    pub fn new_u85(config: &'static U85Config, mem: SystemMemory<'a>) -> Self {
        RegisterFile::with_engine(Engine::U85(Box::new(VirtualU85::new(config))), mem)
    }

    fn with_engine(npu: Engine, mem: SystemMemory<'a>) -> Self {
        let id = if npu.is_u85() {
            u85ctrl::ID
        } else {
            DEFAULT_ID
        };
        let counters = npu.pmu_counters() as u32;
        RegisterFile {
            npu,
            mem,
            id,
            status: 0,
            cmd: 0,
            prot: 0,
            qbase: 0,
            qread: 0,
            qconfig: 0,
            qsize: 0,
            lock: 0,
            regioncfg: 0,
            axi_limit: [0; 4],
            axi_sram: 0,
            axi_ext: 0,
            power_ctrl: 0,
            basep: [0; NUM_REGIONS],
            pmcr: counters << 11,
            pmcnten: 0,
            pmovs: 0,
            pmint: 0,
            pmccntr: 0,
            pmccntr_cfg: 0,
            pmcaxi_chan: 0,
            pmevcntr: [0; MAX_PMU_COUNTERS],
            pmevtyper: [0; MAX_PMU_COUNTERS],
            run: Run::Idle,
            auto_run: true,
            fault: None,
            commands: 0,
            stats: Stats::default(),
            last_error: None,
        }
    }

    /// Whether a start runs the queue to completion inside the `CMD` write (default true).
    pub fn set_auto_run(&mut self, auto: bool) {
        self.auto_run = auto;
    }

    /// Injects a fault, counted from the next start.
    pub fn inject(&mut self, fault: Fault) {
        self.fault = Some(fault);
    }

    /// The interrupt line (level): `STATUS.irq_raised`.
    pub fn irq(&self) -> bool {
        Status(self.status).irq_raised()
    }

    /// Counters of the last (or current) run.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The simulator error behind the last bus or parse error status, if any.
    pub fn last_error(&self) -> Option<&SimError> {
        self.last_error.as_ref()
    }

    /// The system memory (to inspect outputs after a run).
    pub fn memory(&self) -> &SystemMemory<'a> {
        &self.mem
    }

    /// The system memory, writable (driver tests model CPU cache write-backs with it).
    pub fn memory_mut(&mut self) -> &mut SystemMemory<'a> {
        &mut self.mem
    }

    /// Whether this model hosts an Ethos-U85.
    pub fn is_u85(&self) -> bool {
        self.npu.is_u85()
    }

    /// The U55/U65 offset of the register at `off` on the hosted NPU, so one decoder serves
    /// both maps; `None` where the hosted NPU has no register the model keeps.
    fn canonical(&self, off: u32) -> Option<u32> {
        use u85ctrl::offset as o;
        if !self.npu.is_u85() {
            return Some(off);
        }
        match off {
            // The PMU moved up by 0x1000.
            x if (o::PMCR..o::PMCR + 0x80).contains(&x)
                || (o::PMEVCNTR0..o::WINDOW_SIZE).contains(&x) =>
            {
                Some(x - o::PMU_SHIFT)
            }
            // The U55/U65 PMU place, and the internal memory debug window (not modelled).
            0x0180..0x0200 | 0x0300..0x0800 => None,
            x => Some(x),
        }
    }

    /// Index of PMU counter register `o` in the array at `base` (4 or 8 counters).
    fn pmu_index(&self, o: u32, base: u32) -> Option<usize> {
        let i = (o.checked_sub(base)? / 4) as usize;
        (o.is_multiple_of(4) && i < self.npu.pmu_counters()).then_some(i)
    }

    /// Reads a 32-bit register. Unknown offsets read as zero.
    pub fn read32(&mut self, off: u32) -> u32 {
        let cfg = self.npu.config_word();
        if self.npu.is_u85() {
            match off {
                u85ctrl::offset::AXI_SRAM => return self.axi_sram,
                u85ctrl::offset::AXI_EXT => return self.axi_ext,
                u85ctrl::offset::POWER_CTRL => return self.power_ctrl,
                _ => {}
            }
        }
        let Some(off) = self.canonical(off) else {
            return 0;
        };
        match off {
            offset::ID => self.id,
            offset::STATUS => self.status,
            // Action bits read as zero; the Q-channel enables read back.
            offset::CMD => self.cmd & (CmdReg::CLOCK_Q_ENABLE | CmdReg::POWER_Q_ENABLE),
            offset::RESET => 0,
            offset::QBASE => self.qbase as u32,
            offset::QBASE_HI => (self.qbase >> 32) as u32,
            offset::QREAD => self.qread,
            offset::QCONFIG => self.qconfig,
            offset::QSIZE => self.qsize,
            offset::PROT => self.prot,
            offset::CONFIG => cfg,
            offset::LOCK => self.lock,
            offset::REGIONCFG => self.regioncfg,
            o @ offset::AXI_LIMIT0..=offset::AXI_LIMIT3 if o.is_multiple_of(4) => self
                .axi_limit
                .get(((o - offset::AXI_LIMIT0) / 4) as usize)
                .copied()
                .unwrap_or(0),
            o @ offset::BASEP0..0x00c0 if o.is_multiple_of(4) => {
                let i = ((o - offset::BASEP0) / 8) as usize;
                let v = self.basep.get(i).copied().unwrap_or(0);
                if (o - offset::BASEP0).is_multiple_of(8) {
                    v as u32
                } else {
                    (v >> 32) as u32
                }
            }
            offset::PMCR => self.pmcr,
            offset::PMCNTENSET | offset::PMCNTENCLR => self.pmcnten,
            offset::PMOVSSET | offset::PMOVSCLR => self.pmovs,
            offset::PMINTSET | offset::PMINTCLR => self.pmint,
            offset::PMCCNTR => self.pmccntr as u32,
            offset::PMCCNTR_HI => ((self.pmccntr >> 32) & 0xffff) as u32,
            offset::PMCCNTR_CFG => self.pmccntr_cfg,
            offset::PMCAXI_CHAN => self.pmcaxi_chan,
            o @ offset::PMEVCNTR0..offset::PMEVTYPER0 => self
                .pmu_index(o, offset::PMEVCNTR0)
                .and_then(|i| self.pmevcntr.get(i))
                .copied()
                .unwrap_or(0),
            o @ offset::PMEVTYPER0..offset::SHARED_BUFFER0 => self
                .pmu_index(o, offset::PMEVTYPER0)
                .and_then(|i| self.pmevtyper.get(i))
                .copied()
                .unwrap_or(0),
            o @ offset::SHARED_BUFFER0..0x0800 if o.is_multiple_of(4) => {
                let a = (o - offset::SHARED_BUFFER0) as usize;
                let Engine::U55(npu) = &self.npu else {
                    return 0;
                };
                let s = npu.shram();
                match s.get(a..a + 4) {
                    Some(b) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                    None => 0,
                }
            }
            _ => 0,
        }
    }

    /// Writes a 32-bit register. Read-only and unknown offsets ignore writes.
    pub fn write32(&mut self, off: u32, value: u32) {
        if self.npu.is_u85() {
            match off {
                u85ctrl::offset::AXI_SRAM => return self.axi_sram = value & 0x3_1f3f,
                u85ctrl::offset::AXI_EXT => return self.axi_ext = value & 0x3_1f3f,
                u85ctrl::offset::POWER_CTRL => return self.power_ctrl = value & 0x3f,
                _ => {}
            }
        }
        let Some(off) = self.canonical(off) else {
            return;
        };
        let counters_mask = self.pmu_mask();
        match off {
            offset::CMD => self.write_cmd(value),
            offset::RESET => self.soft_reset(Reset(value)),
            offset::QBASE => self.qbase = (self.qbase & !0xffff_ffff) | value as u64,
            offset::QBASE_HI => {
                self.qbase = (self.qbase & 0xffff_ffff) | ((value as u64 & 0xff) << 32)
            }
            offset::QCONFIG => self.qconfig = value & 3,
            offset::QSIZE => self.qsize = value,
            offset::LOCK => self.lock = value,
            offset::REGIONCFG => self.regioncfg = value & 0xffff,
            o @ offset::AXI_LIMIT0..=offset::AXI_LIMIT3 if o.is_multiple_of(4) => {
                if let Some(r) = self
                    .axi_limit
                    .get_mut(((o - offset::AXI_LIMIT0) / 4) as usize)
                {
                    *r = value;
                }
            }
            o @ offset::BASEP0..0x00c0 if o.is_multiple_of(4) => {
                let rel = o - offset::BASEP0;
                if let Some(r) = self.basep.get_mut((rel / 8) as usize) {
                    *r = if rel.is_multiple_of(8) {
                        (*r & !0xffff_ffff) | value as u64
                    } else {
                        (*r & 0xffff_ffff) | ((value as u64 & 0xff) << 32)
                    };
                }
            }
            offset::PMCR => {
                if value & Pmcr::EVENT_CNT_RST != 0 {
                    self.pmevcntr = [0; MAX_PMU_COUNTERS];
                }
                if value & Pmcr::CYCLE_CNT_RST != 0 {
                    self.pmccntr = 0;
                }
                // Reset bits self-clear; the counter count field is read-only.
                self.pmcr = (value & (Pmcr::CNT_EN | Pmcr::MASK_EN))
                    | (self.npu.pmu_counters() as u32) << 11;
            }
            offset::PMCNTENSET => self.pmcnten |= value & counters_mask,
            offset::PMCNTENCLR => self.pmcnten &= !value,
            offset::PMOVSSET => self.pmovs |= value & counters_mask,
            offset::PMOVSCLR => {
                self.pmovs &= !value;
                if self.pmovs & self.pmint == 0 {
                    self.status &= !Status::PMU_IRQ_RAISED;
                }
            }
            offset::PMINTSET => self.pmint |= value & counters_mask,
            offset::PMINTCLR => self.pmint &= !value,
            offset::PMCCNTR => self.pmccntr = (self.pmccntr & !0xffff_ffff) | value as u64,
            offset::PMCCNTR_HI => {
                self.pmccntr = (self.pmccntr & 0xffff_ffff) | ((value as u64 & 0xffff) << 32)
            }
            offset::PMCCNTR_CFG => self.pmccntr_cfg = value & 0x03ff_03ff,
            offset::PMCAXI_CHAN => self.pmcaxi_chan = value & 0x7ff,
            o @ offset::PMEVCNTR0..offset::PMEVTYPER0 => {
                if let Some(r) = self
                    .pmu_index(o, offset::PMEVCNTR0)
                    .and_then(|i| self.pmevcntr.get_mut(i))
                {
                    *r = value;
                }
            }
            o @ offset::PMEVTYPER0..offset::SHARED_BUFFER0 => {
                if let Some(r) = self
                    .pmu_index(o, offset::PMEVTYPER0)
                    .and_then(|i| self.pmevtyper.get_mut(i))
                {
                    *r = value & 0x3ff;
                }
            }
            _ => {}
        }
    }

    fn soft_reset(&mut self, r: Reset) {
        let keep_id = self.id;
        let mem = core::mem::take(&mut self.mem);
        let npu = self.npu.fresh();
        let (auto, fault) = (self.auto_run, self.fault);
        *self = RegisterFile::with_engine(npu, mem);
        // Test configuration survives the reset; an injected fault that has not fired yet
        // stays armed (one that fired, like a hang, is what the reset recovers from).
        self.id = keep_id;
        self.auto_run = auto;
        self.fault = fault;
        self.prot = r.pending_cpl() as u32 | (r.pending_csl() as u32) << 1;
    }

    fn write_cmd(&mut self, value: u32) {
        let c = CmdReg(value);
        self.cmd = value;
        if c.clear_irq() {
            self.status &= !Status::IRQ_RAISED;
        }
        let clear_hist = c.clear_irq_history();
        if clear_hist != 0 {
            let s = Status(self.status);
            self.status = s.with_irq_history(s.irq_history_mask() & !clear_hist).0;
        }
        if c.stop_request() && self.run == Run::Running {
            self.run = Run::Idle;
            self.status &= !Status::STATE;
        }
        if c.transition_to_running_state() && self.run == Run::Idle {
            self.start();
        }
    }

    fn start(&mut self) {
        self.run = Run::Running;
        self.qread = 0;
        self.commands = 0;
        self.stats = Stats::default();
        self.last_error = None;
        self.status = (self.status | Status::STATE)
            & !(Status::CMD_END_REACHED | Status::BUS_STATUS | Status::CMD_PARSE_ERROR);
        self.npu.begin_queue();
        if self.auto_run {
            self.step(u64::MAX);
        }
    }

    /// Advances a RUNNING NPU by up to `max_commands` commands; returns the number executed.
    /// Does nothing when the NPU is idle or hung.
    pub fn step(&mut self, max_commands: u64) -> u64 {
        let mut done = 0u64;
        while done < max_commands && self.run == Run::Running {
            if let Some(f) = self.fault {
                let (Fault::BusError { after_commands: at }
                | Fault::CmdParseError { after_commands: at }
                | Fault::Hang { after_commands: at }) = f;
                if self.commands >= at {
                    self.fault = None;
                    match f {
                        Fault::BusError { .. } => {
                            self.fail(Status::BUS_STATUS, DmaFaultChannel::IfmRead as u32, None)
                        }
                        Fault::CmdParseError { .. } => self.fail(Status::CMD_PARSE_ERROR, 0, None),
                        Fault::Hang { .. } => self.run = Run::Hung,
                    }
                    break;
                }
            }
            if self.qread >= self.qsize {
                // End of the queue without NPU_OP_STOP.
                self.finish(0);
                break;
            }
            let Some((words, n)) = self.fetch() else {
                let err = SimError::at(
                    self.qread as usize,
                    None,
                    SimErrorKind::OutOfBounds {
                        region: 0,
                        addr: self.qbase.saturating_add(self.qread as u64),
                        len: 4,
                        region_len: 0,
                        access: Access::CmdRead,
                    },
                );
                self.fail(
                    Status::BUS_STATUS,
                    DmaFaultChannel::CmdRead as u32,
                    Some(err),
                );
                break;
            };
            let basep = self.basep;
            let before = self.stats.ops.len();
            let irqs_before = self.stats.irqs.len();
            let result = {
                let mut regions = self.mem.regions(&basep);
                let words = words.get(..n).unwrap_or(&[]);
                self.npu
                    .step(words, self.qread as usize, &mut regions, &mut self.stats)
            };
            done += 1;
            self.commands += 1;
            let new_ops: Vec<_> = self.stats.ops.get(before..).unwrap_or(&[]).to_vec();
            for op in &new_ops {
                self.count_pmu(op);
            }
            match result {
                Ok((used, end)) => {
                    self.qread = self.qread.saturating_add(4 * used as u32);
                    let mask = self.stats.irqs.last().copied().unwrap_or(0);
                    if end == Some(StreamEnd::Stop) {
                        self.finish(mask);
                    } else if self.stats.irqs.len() > irqs_before {
                        // NPU_OP_IRQ: interrupt without stopping.
                        self.raise(mask);
                    }
                }
                Err(e) => {
                    let (bit, channel) = match &e.kind {
                        SimErrorKind::Decode(_) => (Status::CMD_PARSE_ERROR, 0),
                        SimErrorKind::OutOfBounds { access, .. } => {
                            (Status::BUS_STATUS, channel_of(*access))
                        }
                        SimErrorKind::RegionUnmapped { .. }
                        | SimErrorKind::RegionReadOnly { .. } => (Status::BUS_STATUS, 0),
                        // U85's STATUS has no weight decoder fault bit (bit 7 is reserved); a
                        // corrupt weight stream shows as a parse error there (inferred).
                        SimErrorKind::Weights(_) if self.npu.is_u85() => {
                            (Status::CMD_PARSE_ERROR, DmaFaultChannel::WeightRead as u32)
                        }
                        SimErrorKind::Weights(_) => {
                            (Status::WD_FAULT, DmaFaultChannel::WeightRead as u32)
                        }
                        _ => (Status::CMD_PARSE_ERROR, 0),
                    };
                    self.fail(bit, channel, Some(e));
                }
            }
        }
        done
    }

    /// The next command's words at QREAD (the second only for `cmd1` inside the queue), or
    /// None when QREAD points outside mapped memory.
    fn fetch(&self) -> Option<([u32; 2], usize)> {
        let at = self.qbase.checked_add(self.qread as u64)?;
        let first = self.mem.read(at, 4)?;
        let w0 = u32::from_le_bytes([first[0], first[1], first[2], first[3]]);
        if (w0 >> 14) & 3 == 0 || self.qread.saturating_add(8) > self.qsize {
            // cmd0, or a cmd1 whose payload is past QSIZE (decodes as truncated).
            return Some(([w0, 0], 1));
        }
        let b = self.mem.read(at.checked_add(4)?, 4)?;
        Some(([w0, u32::from_le_bytes([b[0], b[1], b[2], b[3]])], 2))
    }

    fn raise(&mut self, mask: u16) {
        let s = Status(self.status | Status::IRQ_RAISED);
        self.status = s.with_irq_history(s.irq_history_mask() | mask as u32).0;
    }

    fn finish(&mut self, mask: u16) {
        self.run = Run::Idle;
        self.status = (self.status | Status::CMD_END_REACHED) & !Status::STATE;
        self.raise(mask);
    }

    fn fail(&mut self, bit: u32, channel: u32, err: Option<SimError>) {
        self.run = Run::Idle;
        self.last_error = err;
        self.status = Status((self.status | bit | Status::IRQ_RAISED) & !Status::STATE)
            .with_fault(0, channel)
            .0;
    }

    fn count_pmu(&mut self, op: &super::stats::OpStats) {
        if !Pmcr(self.pmcr).cnt_en() {
            return;
        }
        let (macs_per_cycle, elements_per_cycle, bytes_per_cycle) = self.npu.throughput();
        let read: u64 = op.bytes_read.iter().sum();
        let written: u64 = op.bytes_written.iter().sum();
        let mac_cycles = op.macs.div_ceil(macs_per_cycle);
        let cycles = mac_cycles
            .max(op.ofm_elements.div_ceil(elements_per_cycle))
            .max((read + written).div_ceil(bytes_per_cycle))
            .max(1);
        if self.pmcnten & PMU_CYCLE_COUNTER_BIT != 0 {
            let before = self.pmccntr;
            self.pmccntr = (self.pmccntr + cycles) & ((1 << 48) - 1);
            if self.pmccntr < before {
                self.overflow(PMU_CYCLE_COUNTER_BIT);
            }
        }
        for i in 0..self.npu.pmu_counters() {
            if self.pmcnten & (1 << i) == 0 {
                continue;
            }
            let ev = PmevTyper(self.pmevtyper.get(i).copied().unwrap_or(0)).event();
            let n = match ev {
                Some(PmuEvent::Cycle) | Some(PmuEvent::NpuActive) => cycles,
                Some(PmuEvent::MacActive) | Some(PmuEvent::MacActive8bit) => mac_cycles,
                Some(PmuEvent::Axi0RdDataBeatReceived) => read.div_ceil(16),
                Some(PmuEvent::Axi0WrDataBeatWritten) => written.div_ceil(16),
                _ => 0,
            };
            if let Some(c) = self.pmevcntr.get_mut(i) {
                let (v, o) = c.overflowing_add(n.min(u32::MAX as u64) as u32);
                *c = v;
                if o {
                    self.overflow(1 << i);
                }
            }
        }
    }

    /// The counter bits of `PMCNTENSET` and friends: the cycle counter and each event counter.
    fn pmu_mask(&self) -> u32 {
        PMU_CYCLE_COUNTER_BIT | ((1 << self.npu.pmu_counters()) - 1)
    }

    fn overflow(&mut self, bit: u32) {
        self.pmovs |= bit;
        if self.pmint & bit != 0 {
            self.status |= Status::PMU_IRQ_RAISED | Status::IRQ_RAISED;
        }
    }
}

fn channel_of(access: Access) -> u32 {
    (match access {
        Access::CmdRead => DmaFaultChannel::CmdRead,
        Access::IfmRead | Access::Ifm2Read => DmaFaultChannel::IfmRead,
        Access::WeightRead => DmaFaultChannel::WeightRead,
        Access::ScaleRead => DmaFaultChannel::SbsRead,
        Access::DmaRead => DmaFaultChannel::Mem2memRead,
        Access::DmaWrite => DmaFaultChannel::Mem2memWrite,
        Access::OfmWrite => DmaFaultChannel::OfmWrite,
    }) as u32
}
