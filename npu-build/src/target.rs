//! Accelerator configurations, system configurations and memory modes.
//!
//! A [`Target`] combines the NPU ([`AcceleratorConfig`], from `npu-rt`), the system around it
//! ([`SystemConfig`]: clock, what sits on each AXI port and how fast it is) and the memory mode
//! ([`MemoryMode`]: which port holds the constant data, the arena and the cache). The names and
//! numbers are those of Arm Vela's `config_files/Arm/vela.ini` (Vela 5.2.0), so a model compiled
//! for `ethos-u55-128` / `Ethos_U55_High_End_Embedded` / `Shared_Sram` is comparable with Vela's
//! output for the same options.

use npu_rt::ethos_u::config::{AcceleratorConfig, Product};

use crate::error::{Error, NameKind, Result};

pub use npu_rt::ethos_u::config::NAMES as ACCELERATOR_NAMES;

/// A kind of memory the NPU reaches through an AXI port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemArea {
    Sram,
    Dram,
    OnChipFlash,
    OffChipFlash,
}

impl MemArea {
    /// Vela's name (`Sram`, `OffChipFlash`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            MemArea::Sram => "Sram",
            MemArea::Dram => "Dram",
            MemArea::OnChipFlash => "OnChipFlash",
            MemArea::OffChipFlash => "OffChipFlash",
        }
    }
}

/// One of the NPU's two AXI master ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AxiPort {
    Axi0,
    Axi1,
}

/// The memory on one AXI port and its characteristics (Vela's `<Area>_*` keys).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PortConfig {
    /// What the port connects to.
    pub area: MemArea,
    /// Memory clock relative to the NPU core clock (bandwidth scale).
    pub clock_scale: f64,
    /// AXI ports used for this memory (bandwidth multiplier).
    pub ports_used: u32,
    /// Burst length in bytes.
    pub burst_length: u32,
    /// Read latency in NPU cycles.
    pub read_latency: u32,
    /// Write latency in NPU cycles.
    pub write_latency: u32,
    /// Outstanding read transactions.
    pub max_reads: u32,
    /// Outstanding write transactions.
    pub max_writes: u32,
}

/// A system configuration: the NPU clock and the memories on its AXI ports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SystemConfig {
    /// Vela's name (`Ethos_U55_High_End_Embedded`).
    pub name: &'static str,
    /// NPU core clock in Hz.
    pub core_clock_hz: f64,
    pub axi0: PortConfig,
    pub axi1: PortConfig,
}

impl SystemConfig {
    /// The memory on `port`.
    pub const fn port(&self, port: AxiPort) -> &PortConfig {
        match port {
            AxiPort::Axi0 => &self.axi0,
            AxiPort::Axi1 => &self.axi1,
        }
    }
}

/// Where constant data, the arena (scratch tensors) and the cache live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryMode {
    /// Vela's name (`Shared_Sram`).
    pub name: &'static str,
    /// Port of the read-only data: command stream, weights, biases (region 0).
    pub const_mem: AxiPort,
    /// Port of the arena: intermediate tensors, inputs and outputs (region 1).
    pub arena_mem: AxiPort,
    /// Port of the cache / fast scratch (region 2; must be SRAM).
    pub cache_mem: AxiPort,
    /// Bytes of the cache when the arena lives elsewhere; `None` = the whole address space.
    pub arena_cache_size: Option<u64>,
}

const SRAM_32: PortConfig = PortConfig {
    area: MemArea::Sram,
    clock_scale: 1.0,
    ports_used: 1,
    burst_length: 32,
    read_latency: 32,
    write_latency: 32,
    max_reads: 4,
    max_writes: 4,
};

const fn flash(clock_scale: f64) -> PortConfig {
    PortConfig {
        area: MemArea::OffChipFlash,
        clock_scale,
        ports_used: 1,
        burst_length: 128,
        read_latency: 64,
        write_latency: 0,
        max_reads: 2,
        max_writes: 0,
    }
}

const fn dram(clock_scale: f64, max_reads: u32, max_writes: u32) -> PortConfig {
    PortConfig {
        area: MemArea::Dram,
        clock_scale,
        ports_used: 1,
        burst_length: 128,
        read_latency: 500,
        write_latency: 250,
        max_reads,
        max_writes,
    }
}

const fn sram(max: u32) -> PortConfig {
    PortConfig {
        max_reads: max,
        max_writes: max,
        ..SRAM_32
    }
}

/// The system configurations of Vela's `vela.ini` for Ethos-U55 and Ethos-U65.
pub static SYSTEM_CONFIGS: [SystemConfig; 6] = [
    // SRAM (1.6 GB/s) and flash (0.1 GB/s).
    SystemConfig {
        name: "Ethos_U55_Deep_Embedded",
        core_clock_hz: 200e6,
        axi0: sram(8),
        axi1: flash(0.0625),
    },
    // SRAM (4 GB/s) and flash (0.5 GB/s).
    SystemConfig {
        name: "Ethos_U55_High_End_Embedded",
        core_clock_hz: 500e6,
        axi0: sram(4),
        axi1: flash(0.125),
    },
    // SRAM (8 GB/s) and flash (0.5 GB/s).
    SystemConfig {
        name: "Ethos_U65_Embedded",
        core_clock_hz: 500e6,
        axi0: sram(8),
        axi1: flash(0.0625),
    },
    // SRAM (8 GB/s) and DRAM (3.75 GB/s).
    SystemConfig {
        name: "Ethos_U65_Mid_End",
        core_clock_hz: 500e6,
        axi0: sram(8),
        axi1: dram(0.46875, 12, 6),
    },
    // SRAM (16 GB/s) and DRAM (3.75 GB/s).
    SystemConfig {
        name: "Ethos_U65_High_End",
        core_clock_hz: 1e9,
        axi0: sram(16),
        axi1: dram(0.234375, 24, 12),
    },
    // SRAM (16 GB/s) and DRAM (12 GB/s).
    SystemConfig {
        name: "Ethos_U65_Client_Server",
        core_clock_hz: 1e9,
        axi0: sram(16),
        axi1: dram(0.75, 24, 12),
    },
];

const DEDICATED: MemoryMode = MemoryMode {
    name: "Dedicated_Sram",
    const_mem: AxiPort::Axi1,
    arena_mem: AxiPort::Axi1,
    cache_mem: AxiPort::Axi0,
    arena_cache_size: None,
};

/// The memory modes of Vela's `vela.ini`.
pub static MEMORY_MODES: [MemoryMode; 6] = [
    // Only one AXI port is used; the SRAM holds everything.
    MemoryMode {
        name: "Sram_Only",
        const_mem: AxiPort::Axi0,
        arena_mem: AxiPort::Axi0,
        cache_mem: AxiPort::Axi0,
        arena_cache_size: None,
    },
    // The SRAM is shared between the NPU and the CPU; the other memory is read-only.
    MemoryMode {
        name: "Shared_Sram",
        const_mem: AxiPort::Axi1,
        arena_mem: AxiPort::Axi0,
        cache_mem: AxiPort::Axi0,
        arena_cache_size: None,
    },
    // The SRAM is the NPU's own cache; the arena lives in (read-writeable) DRAM.
    DEDICATED,
    MemoryMode {
        name: "Dedicated_Sram_256KB",
        arena_cache_size: Some(256 * 1024),
        ..DEDICATED
    },
    MemoryMode {
        name: "Dedicated_Sram_384KB",
        arena_cache_size: Some(384 * 1024),
        ..DEDICATED
    },
    MemoryMode {
        name: "Dedicated_Sram_512KB",
        arena_cache_size: Some(512 * 1024),
        ..DEDICATED
    },
];

fn list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}

/// The accelerator called `name` (`ethos-u55-128`).
pub fn accelerator(name: &str) -> Result<&'static AcceleratorConfig> {
    AcceleratorConfig::by_name(name).ok_or_else(|| Error::UnknownName {
        what: NameKind::Accelerator,
        given: name.to_string(),
        valid: list(ACCELERATOR_NAMES.iter().copied()),
    })
}

/// The system configuration called `name` (exact, as in `vela.ini`).
pub fn system_config(name: &str) -> Result<&'static SystemConfig> {
    SYSTEM_CONFIGS
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| Error::UnknownName {
            what: NameKind::SystemConfig,
            given: name.to_string(),
            valid: list(SYSTEM_CONFIGS.iter().map(|s| s.name)),
        })
}

/// The memory mode called `name` (exact, as in `vela.ini`).
pub fn memory_mode(name: &str) -> Result<&'static MemoryMode> {
    MEMORY_MODES
        .iter()
        .find(|m| m.name == name)
        .ok_or_else(|| Error::UnknownName {
            what: NameKind::MemoryMode,
            given: name.to_string(),
            valid: list(MEMORY_MODES.iter().map(|m| m.name)),
        })
}

/// What a model is compiled for: accelerator, system and memory mode.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Target {
    pub accelerator: &'static AcceleratorConfig,
    pub system_config: &'static SystemConfig,
    pub memory_mode: &'static MemoryMode,
}

impl Target {
    /// Whether copying weights from the read-only memory into SRAM pays: the read-only data is
    /// not SRAM, and the arena is (Shared_Sram: flash weights, SRAM arena) or there is an SRAM
    /// fast scratch (Dedicated_Sram: DRAM weights and arena, the copies go to region 2).
    pub fn weight_copies_pay(&self) -> bool {
        let port = |p| self.system_config.port(p).area;
        (port(self.memory_mode.arena_mem) == MemArea::Sram || self.uses_cache())
            && port(self.memory_mode.const_mem) != MemArea::Sram
    }

    /// Resolves names; `None` picks the accelerator family's default: Ethos-U55 ->
    /// `Ethos_U55_High_End_Embedded` + `Shared_Sram`, Ethos-U65 -> `Ethos_U65_High_End` +
    /// `Dedicated_Sram`. Unknown names, and memory modes the system cannot provide (an arena on
    /// flash), are errors naming the valid choices.
    pub fn new(
        accelerator_name: &str,
        system_config_name: Option<&str>,
        memory_mode_name: Option<&str>,
    ) -> Result<Target> {
        let accelerator = accelerator(accelerator_name)?;
        let (default_system, default_mode) = match accelerator.product {
            Product::U55 => ("Ethos_U55_High_End_Embedded", "Shared_Sram"),
            Product::U65 => ("Ethos_U65_High_End", "Dedicated_Sram"),
        };
        let system_config = system_config(system_config_name.unwrap_or(default_system))?;
        let mode_name = memory_mode_name.unwrap_or(default_mode);
        let memory_mode = memory_mode(mode_name)?;
        let target = Target {
            accelerator,
            system_config,
            memory_mode,
        };
        if target.check().is_err() {
            let valid: Vec<&str> = MEMORY_MODES
                .iter()
                .filter(|m| {
                    Target {
                        memory_mode: m,
                        ..target
                    }
                    .check()
                    .is_ok()
                })
                .map(|m| m.name)
                .collect();
            return Err(Error::UnknownName {
                what: NameKind::MemoryModeForSystem,
                given: format!("{mode_name} with {}", system_config.name),
                valid: valid.join(", "),
            });
        }
        Ok(target)
    }

    /// The default target of an accelerator (see [`Target::new`]).
    pub fn for_accelerator(accelerator_name: &str) -> Result<Target> {
        Target::new(accelerator_name, None, None)
    }

    /// Vela's consistency rules: constants on DRAM or flash (or SRAM in `Sram_Only`), the arena
    /// on SRAM or DRAM, the cache on SRAM.
    fn check(&self) -> std::result::Result<(), &'static str> {
        if !matches!(self.arena_area(), MemArea::Sram | MemArea::Dram) {
            return Err("the arena must be in SRAM or DRAM");
        }
        if self.cache_area() != MemArea::Sram {
            return Err("the cache must be in SRAM");
        }
        Ok(())
    }

    /// The memory on `port`.
    pub fn area(&self, port: AxiPort) -> MemArea {
        self.system_config.port(port).area
    }

    /// Where constant data (region 0) physically lives. `Sram_Only` keeps it in the SRAM (Vela
    /// models it as on-chip flash with SRAM timing).
    pub fn const_area(&self) -> MemArea {
        self.area(self.memory_mode.const_mem)
    }

    /// Where the arena (region 1) lives.
    pub fn arena_area(&self) -> MemArea {
        self.area(self.memory_mode.arena_mem)
    }

    /// Where the cache / fast scratch (region 2) lives.
    pub fn cache_area(&self) -> MemArea {
        self.area(self.memory_mode.cache_mem)
    }

    /// The cache (fast scratch) is a separate SRAM in front of the arena (Vela's "spilling").
    pub fn uses_cache(&self) -> bool {
        self.cache_area() == MemArea::Sram
            && self.memory_mode.cache_mem != self.memory_mode.arena_mem
    }

    /// Highest address + 1 the NPU can reach (32-bit U55, 40-bit U65).
    pub fn max_address(&self) -> u64 {
        1u64 << self.accelerator.axi_address_bits
    }

    /// Cache size limit: the memory mode's, or the whole address space.
    pub fn arena_cache_size(&self) -> u64 {
        self.memory_mode
            .arena_cache_size
            .unwrap_or_else(|| self.max_address())
    }

    /// Bytes per NPU cycle the memory on `port` delivers (AXI width x ports x clock scale).
    pub fn bytes_per_cycle(&self, port: AxiPort) -> f64 {
        let p = self.system_config.port(port);
        f64::from(self.accelerator.axi_port_bytes_per_cycle)
            * f64::from(p.ports_used)
            * p.clock_scale
    }

    /// The characteristics of a memory area, if the system has it.
    pub fn port_of(&self, area: MemArea) -> Option<&'static PortConfig> {
        [&self.system_config.axi0, &self.system_config.axi1]
            .into_iter()
            .find(|p| p.area == area)
    }

    /// Splits a model's memory needs by memory kind: `(sram, dram, flash)` bytes for an arena
    /// of `arena` bytes and `consts` bytes of read-only data (command stream + weights). The
    /// cache (fast scratch) is not included.
    pub fn memory_use(&self, arena: usize, consts: usize) -> (usize, usize, usize) {
        let mut use_ = (0usize, 0usize, 0usize);
        for (area, bytes) in [(self.arena_area(), arena), (self.const_area(), consts)] {
            match area {
                MemArea::Sram => use_.0 += bytes,
                MemArea::Dram => use_.1 += bytes,
                MemArea::OnChipFlash | MemArea::OffChipFlash => use_.2 += bytes,
            }
        }
        use_
    }

    /// `ethos-u55-128 / Ethos_U55_High_End_Embedded / Shared_Sram`.
    pub fn describe(&self) -> String {
        format!(
            "{} / {} / {}",
            self.accelerator.name, self.system_config.name, self.memory_mode.name
        )
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_per_family() {
        let t = Target::new("ethos-u55-128", None, None).unwrap();
        assert_eq!(t.system_config.name, "Ethos_U55_High_End_Embedded");
        assert_eq!(t.memory_mode.name, "Shared_Sram");
        assert_eq!(t.arena_area(), MemArea::Sram);
        assert_eq!(t.const_area(), MemArea::OffChipFlash);
        for name in ["ethos-u65-256", "ethos-u65-512"] {
            let t = Target::for_accelerator(name).unwrap();
            assert_eq!(t.system_config.name, "Ethos_U65_High_End");
            assert_eq!(t.memory_mode.name, "Dedicated_Sram");
            assert_eq!(t.arena_area(), MemArea::Dram);
            assert_eq!(t.cache_area(), MemArea::Sram);
            assert!(t.uses_cache());
            assert_eq!(t.arena_cache_size(), 1 << 40);
        }
    }

    #[test]
    fn vela_numbers() {
        let t = Target::for_accelerator("ethos-u55-128").unwrap();
        // Vela's summary for the fixtures: "Design peak SRAM bandwidth 3.73 GB/s",
        // "Design peak Off-chip Flash bandwidth 0.47 GB/s" (GiB/s).
        let gib =
            |port| t.bytes_per_cycle(port) * t.system_config.core_clock_hz / (1u64 << 30) as f64;
        assert!((gib(AxiPort::Axi0) - 3.725).abs() < 0.01);
        assert!((gib(AxiPort::Axi1) - 0.4657).abs() < 0.001);
        let u65 = Target::new("ethos-u65-512", Some("Ethos_U65_Client_Server"), None).unwrap();
        assert_eq!(u65.bytes_per_cycle(AxiPort::Axi1), 12.0);
        let m = memory_mode("Dedicated_Sram_384KB").unwrap();
        assert_eq!(m.arena_cache_size, Some(393_216));
    }

    #[test]
    fn memory_use_follows_mode() {
        let shared = Target::for_accelerator("ethos-u55-64").unwrap();
        assert_eq!(shared.memory_use(100, 7), (100, 0, 7));
        let dedicated = Target::for_accelerator("ethos-u65-256").unwrap();
        assert_eq!(dedicated.memory_use(100, 7), (0, 107, 0));
        let sram_only = Target::new("ethos-u55-256", None, Some("Sram_Only")).unwrap();
        assert_eq!(sram_only.memory_use(100, 7), (107, 0, 0));
    }

    #[test]
    fn unknown_names_list_the_valid_ones() {
        let err = |r: Result<Target>| match r {
            Err(Error::UnknownName { what, valid, .. }) => (what, valid),
            other => panic!("expected UnknownName, got {other:?}"),
        };
        let (what, valid) = err(Target::new("ethos-u85-256", None, None));
        assert_eq!(what, NameKind::Accelerator);
        assert!(valid.contains("ethos-u55-32") && valid.contains("ethos-u65-512"));
        let (what, valid) = err(Target::new("ethos-u55-128", Some("Big"), None));
        assert_eq!(what, NameKind::SystemConfig);
        assert!(
            valid.contains("Ethos_U55_Deep_Embedded") && valid.contains("Ethos_U65_Client_Server")
        );
        let (what, valid) = err(Target::new("ethos-u55-128", None, Some("Shared")));
        assert_eq!(what, NameKind::MemoryMode);
        assert!(valid.contains("Shared_Sram") && valid.contains("Dedicated_Sram_512KB"));
        // An arena on flash is impossible: U55 embedded systems have no DRAM.
        let (what, valid) = err(Target::new("ethos-u55-128", None, Some("Dedicated_Sram")));
        assert_eq!(what, NameKind::MemoryModeForSystem);
        assert_eq!(valid, "Sram_Only, Shared_Sram");
    }
}
