//! Virtual Ethos-U: executes command streams bit-exactly (feature `sim`).
//!
//! [`VirtualNpu::run`] takes a command stream (raw, or a whole COP1 driver payload) and the
//! memory regions the base pointers address ([`Regions`]), updates a register state with every
//! command and executes each `NPU_OP_*` with the hardware's semantics, returning counters
//! ([`Stats`]). Every memory access is bounds-checked; a failure is a [`SimError`] naming the
//! byte offset of the command at fault. Runs are bounded: the stream is walked once and every
//! operation's work is checked against [`Limits`] before it starts.
//!
//! ```no_run
//! use npu_rt::ethos_u::config::ETHOS_U55_128;
//! use npu_rt::sim::{Regions, VirtualNpu};
//! # let (cmd_stream, weights) = (vec![0u8; 4], vec![0u8; 4]);
//! let mut arena = vec![0u8; 4096];
//! let mut regions = Regions::new();
//! regions.set(0, &weights).set_mut(1, &mut arena);
//! let mut npu = VirtualNpu::new(&ETHOS_U55_128);
//! let stats = npu.run(&cmd_stream, &mut regions)?;
//! println!("{} MACs", stats.macs);
//! # Ok::<(), npu_rt::sim::SimError>(())
//! ```
//!
//! The control interface (ID/STATUS/CMD/QBASE/BASEP/PMU registers) is modelled by
//! [`regfile::RegisterFile`] for driver tests.

mod error;
mod fmap;
pub mod hazard;
mod memory;
mod ops;
pub mod regfile;
mod stats;
pub mod u85;
mod walk;
mod weight_cache;

use std::vec;
use std::vec::Vec;

use crate::ethos_u::config::AcceleratorConfig;
use crate::ethos_u::cop::{Architecture, Cop1};
use crate::ethos_u::regs::ctrl::Config;
use crate::ethos_u::regs::opcode::decode;
use crate::ethos_u::regs::{Cmd0, Command, DecodeError, ElementwiseMode, PoolingMode};
// The register model lives with the register definitions (the estimator walks streams with it
// too); the alias keeps `super::state` paths of the simulator's modules.
use crate::ethos_u::state;

pub use error::{Access, SimError, SimErrorKind};
pub use memory::{BufferId, NUM_REGIONS, Regions};
pub use state::{FmRegs, RegisterState};
pub use stats::{OpKind, OpStats, Stats};
pub use u85::VirtualU85;

/// Bounds on the work of one run; protect against hangs and runaway allocation on malformed
/// streams. The defaults are far above what real networks need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Elements of any one feature map an operation reads or writes.
    pub max_elements: u64,
    /// MACs of one operation.
    pub max_op_macs: u64,
    /// Work of a whole run: MACs + output elements + DMA bytes.
    pub max_run_work: u64,
    /// Bytes of one DMA.
    pub max_dma_bytes: u64,
}

/// `Err(LimitExceeded)` for the first `(what, requested, limit)` whose request exceeds its
/// limit, in order.
pub(crate) fn within_limits(checks: &[(&'static str, u64, u64)]) -> Result<(), SimErrorKind> {
    match checks.iter().find(|(_, n, limit)| n > limit) {
        Some(&(what, requested, limit)) => Err(SimErrorKind::LimitExceeded {
            what,
            requested,
            limit,
        }),
        None => Ok(()),
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_elements: 1 << 28,
            max_op_macs: 1 << 36,
            max_run_work: 1 << 40,
            max_dma_bytes: 1 << 32,
        }
    }
}

/// What ended a command stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamEnd {
    /// `NPU_OP_STOP`.
    Stop,
    /// The last word was consumed without a STOP.
    EndOfStream,
}

/// A virtual Ethos-U55/U65 of one accelerator configuration.
pub struct VirtualNpu {
    config: &'static AcceleratorConfig,
    state: RegisterState,
    shram: Vec<u8>,
    limits: Limits,
    cache: weight_cache::WeightCache,
    check_config: bool,
    /// Work done since the last reset (MACs + output elements + DMA bytes).
    pub(crate) work: u64,
    /// Counters of the last completed run (for callers going through the `Npu` trait).
    last_stats: Option<Stats>,
    /// DMAs and operations in flight, when hazards are checked (see [`hazard`]).
    hazards: Option<hazard::Tracker>,
}

impl core::fmt::Debug for VirtualNpu {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("VirtualNpu")
            .field("config", &self.config.name)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl VirtualNpu {
    /// A reset NPU of the given configuration, with default [`Limits`].
    pub fn new(config: &'static AcceleratorConfig) -> Self {
        VirtualNpu {
            config,
            state: RegisterState::default(),
            shram: vec![0; config.shram_bytes() as usize],
            limits: Limits::default(),
            cache: weight_cache::WeightCache::default(),
            check_config: true,
            work: 0,
            last_stats: None,
            hazards: Some(hazard::Tracker::new(
                config.max_outstanding_dma,
                config.max_outstanding_kernels,
            )),
        }
    }

    /// Whether commands are checked for hazards: a command touching memory that a DMA or an
    /// operation still in flight writes (default on; see [`hazard`]).
    pub fn with_hazard_check(mut self, check: bool) -> Self {
        self.hazards = check.then(|| {
            hazard::Tracker::new(
                self.config.max_outstanding_dma,
                self.config.max_outstanding_kernels,
            )
        });
        self
    }

    /// Replaces the limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Whether `run` rejects COP1 payloads built for another configuration (default true).
    pub fn with_config_check(mut self, check: bool) -> Self {
        self.check_config = check;
        self
    }

    /// Enables or disables the cache of decoded weight streams (default enabled).
    pub fn with_weight_cache(mut self, enabled: bool) -> Self {
        self.cache.enabled = enabled;
        self
    }

    /// The accelerator configuration.
    pub fn config(&self) -> &'static AcceleratorConfig {
        self.config
    }

    /// The current register state.
    pub fn state(&self) -> &RegisterState {
        &self.state
    }

    /// The shared buffer (SHRAM) contents.
    pub fn shram(&self) -> &[u8] {
        &self.shram
    }

    /// The `CONFIG` register value of this configuration.
    pub fn config_register(&self) -> Config {
        Config::new(
            self.config.hw_macs_per_cc(),
            0,
            self.config.hw_shram_size_kib(),
            self.config.hw_product(),
        )
    }

    /// Clears the register state and the shared buffer (a soft reset).
    pub fn reset(&mut self) {
        self.state = RegisterState::default();
        self.shram.iter_mut().for_each(|b| *b = 0);
        self.work = 0;
        if let Some(h) = self.hazards.as_mut() {
            h.clear();
        }
    }

    /// Resets, then runs a raw command stream or a COP1 payload to its end or `NPU_OP_STOP`.
    pub fn run(&mut self, stream: &[u8], regions: &mut Regions) -> Result<Stats, SimError> {
        self.reset();
        let mut stats = Stats::default();
        walk::run(self, stream, regions, &mut stats)?;
        self.last_stats = Some(stats.clone());
        Ok(stats)
    }

    /// Counters of the last run that completed (`None` before the first), e.g. after a
    /// generated `run` function drove this NPU through the [`crate::Npu`] trait.
    pub fn last_stats(&self) -> Option<&Stats> {
        self.last_stats.as_ref()
    }

    fn check_payload_config(&self, config: u32) -> Result<(), SimError> {
        if !self.check_config {
            return Ok(());
        }
        let want = Config(config);
        let have = self.config_register();
        let same = want.macs_per_cc_log2() == have.macs_per_cc_log2()
            && want.shram_kib() == have.shram_kib()
            && want.product() == have.product();
        if same {
            Ok(())
        } else {
            Err(SimError::at(
                4,
                None,
                SimErrorKind::InvalidRegister {
                    register: "COP1 OPTIMIZER_CONFIG",
                    value: config as u64,
                    reason: "the payload was compiled for a different accelerator configuration",
                },
            ))
        }
    }

    /// Executes the command stream `bytes` (whose first byte is at `byte_base` in the caller's
    /// buffer, for error offsets) on the current state, adding to `stats`.
    pub fn execute(
        &mut self,
        bytes: &[u8],
        byte_base: usize,
        regions: &mut Regions,
        stats: &mut Stats,
    ) -> Result<StreamEnd, SimError> {
        walk::execute(self, bytes, byte_base, regions, stats)
    }

    /// Decodes and executes one command given as words (for the register-file model).
    pub(crate) fn step(
        &mut self,
        words: &[u32],
        byte_offset: usize,
        regions: &mut Regions,
        stats: &mut Stats,
    ) -> Result<(usize, Option<StreamEnd>), SimError> {
        walk::step(self, words, byte_offset, regions, stats)
    }

    fn operation(
        &mut self,
        op: Cmd0,
        param: u16,
        offset: usize,
        regions: &mut Regions,
        stats: &mut Stats,
    ) -> Result<Option<StreamEnd>, SimError> {
        let err = |kind| SimError::at(offset, Some(op.name()), kind);
        let lut_base = self.config.shram_lut_address() as usize;
        let kind = match op {
            Cmd0::OP_STOP => return Ok(walk::stop(param, stats)),
            Cmd0::OP_IRQ => return Ok(walk::irq(param, stats)),
            // Everything completes synchronously; the waits only retire what the hazard
            // checker holds in flight.
            Cmd0::OP_DMA_WAIT => {
                if let Some(h) = self.hazards.as_mut() {
                    h.dma_wait(param);
                }
                return Ok(None);
            }
            Cmd0::OP_KERNEL_WAIT => {
                if let Some(h) = self.hazards.as_mut() {
                    h.kernel_wait(param);
                }
                return Ok(None);
            }
            Cmd0::OP_PMU_MASK => return Ok(None),
            Cmd0::OP_CONV => OpKind::Conv,
            Cmd0::OP_DEPTHWISE => OpKind::Depthwise,
            Cmd0::OP_POOL => {
                OpKind::Pool(PoolingMode::from_bits((param & 7) as u8).ok_or_else(|| {
                    err(SimErrorKind::InvalidRegister {
                        register: "NPU_OP_POOL",
                        value: param as u64,
                        reason: "undefined pooling mode",
                    })
                })?)
            }
            Cmd0::OP_ELEMENTWISE => OpKind::Elementwise(
                ElementwiseMode::from_bits((param & 0x3f) as u8).ok_or_else(|| {
                    err(SimErrorKind::InvalidRegister {
                        register: "NPU_OP_ELEMENTWISE",
                        value: param as u64,
                        reason: "undefined elementwise mode",
                    })
                })?,
            ),
            Cmd0::OP_DMA_START => OpKind::Dma,
            _ => return Ok(None),
        };
        let mut st = OpStats::new(offset, kind);
        let lim = self.limits;
        if self.hazards.is_some() {
            regions.start_trace();
        }
        let result = match kind {
            OpKind::Conv | OpKind::Depthwise => ops::conv::run(
                &self.state,
                kind == OpKind::Depthwise,
                self.config,
                regions,
                &self.shram,
                lut_base,
                &ops::conv::ConvLimits {
                    max_elements: lim.max_elements,
                    max_macs: lim.max_op_macs,
                },
                &mut self.cache,
                &mut st,
            ),
            OpKind::Pool(mode) => ops::pool::run(
                &self.state,
                mode,
                regions,
                &self.shram,
                lut_base,
                lim.max_elements,
                &mut st,
            ),
            OpKind::Elementwise(mode) => ops::elementwise::run(
                &self.state,
                mode,
                regions,
                &self.shram,
                lut_base,
                lim.max_elements,
                &mut st,
            ),
            OpKind::Dma => ops::dma::run(
                &self.state,
                regions,
                &mut self.shram,
                lim.max_dma_bytes,
                &mut st,
            ),
        };
        let spans = regions.take_trace();
        result.map_err(err)?;
        if let Some(h) = self.hazards.as_mut() {
            match kind {
                OpKind::Dma => h.dma(offset, spans),
                _ => h.kernel(offset, spans),
            }
            .map_err(err)?;
        }
        walk::account(&mut self.work, &lim, st, stats).map_err(err)?;
        Ok(None)
    }
}

/// The U55/U65 command set and its dispatch, for the shared walker.
impl walk::Machine for VirtualNpu {
    type Command = Command;

    fn decode(words: &[u32], byte_offset: usize) -> Result<Command, DecodeError> {
        decode(words, 0, byte_offset)
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
        // `RegisterState::apply` takes every `cmd1` command: only `cmd0` operations run.
        let Command::Cmd0 { op, param } = cmd else {
            return Ok(None);
        };
        self.operation(op, param, offset, regions, stats)
    }

    fn check_payload(&self, cop: &Cop1<'_>) -> Result<(), SimError> {
        // Many U85 opcodes share codes with U55/U65 ones of another meaning: running such a
        // stream would not fail but compute garbage, whatever `check_config` says. The U85
        // command set has its own model, `VirtualU85`.
        if let Some(Architecture::EthosU85) = cop.architecture() {
            let value = cop.optimizer_config().map_or(0, |(config, _)| config);
            return Err(SimError::at(
                4,
                None,
                SimErrorKind::InvalidRegister {
                    register: "COP1 OPTIMIZER_CONFIG",
                    value: value as u64,
                    reason: "the payload is for Ethos-U85: run it on `sim::VirtualU85`",
                },
            ));
        }
        if let Some((config, _id)) = cop.optimizer_config() {
            self.check_payload_config(config)?;
        }
        Ok(())
    }
}
