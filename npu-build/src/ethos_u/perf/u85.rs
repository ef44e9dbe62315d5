//! Performance estimate of an Ethos-U85 command stream (see `docs/u85-performance.md`).
//!
//! The U85 command set has its own opcodes and field layouts, so this module has its own
//! decoder ([`decode`]) and cost model ([`op_cost`]), and produces the same [`Estimate`] as
//! the U55/U65 estimator. The model follows the one Vela 5.2.0 uses to report `cycles_total`
//! for Ethos-U85 (Regor's `EthosU85Performance` and `NetworkPerformance`), applied to each
//! `NPU_OP_*` of the stream:
//!
//! - *MAC cycles per OFM block*: the block is cut into the configuration's micro-blocks (the
//!   `ACC_FORMAT` microblock field) and the kernel into 8x8 sub-kernels; convolutions cost
//!   `max(weight decode, IFM block depth / 8 x micro-blocks)` per kernel element and
//!   micro-block depth step (part-kernel-first: 4 micro-blocks per step of 4 kernel elements
//!   per 8 IFM channels), depthwise `4 x micro-blocks` per 4 kernel elements, pooling
//!   `max(4, kernel) x micro-blocks x IFM bits / 2`; plus pipeline bubbles for single
//!   micro-block blocks, times the IFM depth passes of convolutions.
//! - *Output (AO) cycles per element* from the configuration's table (by OFM and IFM bits).
//! - *Command issue limit*, a quarter of (MAC + AO + the IFM/OFM block transfer difference).
//! - Blocks run at the slower of MAC and AO; the first IFM block's fetch and the last OFM
//!   block's write are exposed.
//! - Elementwise and resize: the larger of the AO cycles and the command issue limit.
//! - *Memory*: IFM re-fetched per OFM block and sub-kernel, OFM written once (not when it goes
//!   to the chaining buffer), weights and scales re-read per OFM block position, scaled for
//!   short bursts; per memory, the larger of total bytes / bandwidth and the busiest channel's
//!   bytes / channel bandwidth (the channel's bandwidth limited by outstanding transactions x
//!   burst / latency).
//! - The operation takes the longer of its compute and its busiest memory.
//!
//! DMAs cost the longer of reading (bytes / channel bandwidth + read latency) and writing;
//! they run on the DMA engine concurrently with the operations, ordered by the stream's
//! `NPU_OP_DMA_WAIT` / `NPU_OP_KERNEL_WAIT`, as in the U55/U65 timeline.

use npu_rt::ethos_u::config::{U85_ALL, U85Config};
use npu_rt::ethos_u::regs::u85::{Cmd0, Cmd1, Command, Commands};

use super::model::{DmaCost, OpCost, SHRAM};
use super::stream::{bad, for_each_stream};
use super::{DmaEstimate, Estimate, OpEstimate, Options, Step, timeline};
use crate::error::{Error, Result};

/// Timing of one memory (vela.ini values, in NPU cycles).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct U85Memory {
    /// `Sram`, `Dram`, `OffChipFlash`.
    pub name: &'static str,
    /// Bytes per NPU cycle: 16-byte AXI x ports x clock scale.
    pub bandwidth: f64,
    /// Longest burst in bytes.
    pub burst: u64,
    pub read_latency: u64,
    pub write_latency: u64,
    /// Outstanding read / write transactions per port.
    pub max_reads: u64,
    pub max_writes: u64,
    pub ports: u64,
}

/// A Vela system configuration for Ethos-U85.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct U85System {
    pub name: &'static str,
    pub clock_hz: f64,
    pub axi0: U85Memory,
    pub axi1: U85Memory,
}

const fn mem(
    name: &'static str,
    ports: u64,
    clock_scale: f64,
    burst: u64,
    latency: (u64, u64),
    outstanding: (u64, u64),
) -> U85Memory {
    U85Memory {
        name,
        bandwidth: 16.0 * ports as f64 * clock_scale,
        burst,
        read_latency: latency.0,
        write_latency: latency.1,
        max_reads: outstanding.0,
        max_writes: outstanding.1,
        ports,
    }
}

/// The Ethos-U85 system configurations of Vela 5.2.0's `vela.ini` that the fixtures use.
pub const U85_SYSTEMS: [U85System; 3] = [
    U85System {
        name: "Ethos_U85_SYS_Flash_High",
        clock_hz: 500e6,
        axi0: mem("Sram", 2, 1.0, 64, (32, 32), (8, 8)),
        axi1: mem("OffChipFlash", 1, 0.0625, 128, (64, 0), (2, 0)),
    },
    U85System {
        name: "Ethos_U85_SYS_DRAM_Mid",
        clock_hz: 1e9,
        axi0: mem("Sram", 2, 1.0, 64, (32, 32), (8, 8)),
        axi1: mem("Dram", 1, 0.75, 128, (500, 250), (64, 32)),
    },
    U85System {
        name: "Ethos_U85_SYS_DRAM_High",
        clock_hz: 1e9,
        axi0: mem("Sram", 4, 1.0, 64, (32, 32), (8, 8)),
        axi1: mem("Dram", 2, 0.75, 128, (500, 250), (64, 32)),
    },
];

/// An Ethos-U85 configuration with a system configuration and memory mode.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct U85Target {
    pub config: &'static U85Config,
    pub system: &'static U85System,
    /// Vela's memory mode name.
    pub memory_mode: &'static str,
    /// AXI port (0 or 1) of regions 0 (constants), 1 (arena) and 2 (cache).
    pub const_axi: usize,
    pub arena_axi: usize,
    pub cache_axi: usize,
}

/// Memory modes of `vela.ini`: name, const, arena and cache AXI port.
const MEMORY_MODES: [(&str, usize, usize, usize); 5] = [
    ("Sram_Only", 0, 0, 0),
    ("Shared_Sram", 1, 0, 0),
    ("Dedicated_Sram", 1, 1, 0),
    ("Dedicated_Sram_384KB", 1, 1, 0),
    ("Dedicated_Sram_512KB", 1, 1, 0),
];

impl U85Target {
    /// `accelerator` (`ethos-u85-256`) with a system configuration and memory mode (default:
    /// the ones the fixtures were compiled with: Flash_High/Shared_Sram for 128 and 256 MACs,
    /// DRAM_Mid/Dedicated_Sram_384KB for 512, DRAM_High/Dedicated_Sram_512KB above).
    pub fn new(accelerator: &str, system: Option<&str>, mode: Option<&str>) -> Result<Self> {
        let config = U85Config::by_name(accelerator)
            .ok_or_else(|| Error::Artifact(format!("unknown Ethos-U85 '{accelerator}'")))?;
        let (def_sys, def_mode) = match config.macs {
            0..=256 => ("Ethos_U85_SYS_Flash_High", "Shared_Sram"),
            257..=512 => ("Ethos_U85_SYS_DRAM_Mid", "Dedicated_Sram_384KB"),
            _ => ("Ethos_U85_SYS_DRAM_High", "Dedicated_Sram_512KB"),
        };
        let sys_name = system.unwrap_or(def_sys);
        let system = U85_SYSTEMS
            .iter()
            .find(|s| s.name.eq_ignore_ascii_case(sys_name))
            .ok_or_else(|| {
                Error::Artifact(format!("unknown Ethos-U85 system config '{sys_name}'"))
            })?;
        let mode_name = mode.unwrap_or(def_mode);
        let &(memory_mode, const_axi, arena_axi, cache_axi) = MEMORY_MODES
            .iter()
            .find(|m| m.0.eq_ignore_ascii_case(mode_name))
            .ok_or_else(|| Error::Artifact(format!("unknown memory mode '{mode_name}'")))?;
        Ok(U85Target {
            config,
            system,
            memory_mode,
            const_axi,
            arena_axi,
            cache_axi,
        })
    }

    /// `accelerator / system config / memory mode`.
    pub fn describe(&self) -> String {
        format!(
            "{} / {} / {}",
            self.config.name, self.system.name, self.memory_mode
        )
    }

    fn memory(&self, axi: usize) -> &U85Memory {
        if axi == 0 {
            &self.system.axi0
        } else {
            &self.system.axi1
        }
    }

    /// AXI port of a region (3 and up are arena-like: inputs, outputs, variables).
    fn axi_of(&self, region: u8) -> usize {
        match region {
            0 => self.const_axi,
            2 => self.cache_axi,
            _ => self.arena_axi,
        }
    }

    /// Read buffers per channel (Mem2Mem, IFM stream, weights, fast weights, IFM, scales):
    /// Vela's `channelRBs` of the configuration.
    fn channel_rbs(&self) -> [u64; 6] {
        match self.config.macs {
            0..=128 => [64, 64, 128, 128, 104, 16],
            129..=256 => [104, 104, 128, 128, 128, 16],
            257..=512 => [128, 128, 256, 256, 128, 16],
            513..=1024 => [256, 256, 416, 208, 256, 16],
            _ => [256, 256, 512, 256, 256, 16],
        }
    }

    /// Output cycles per element by index (8, 16, 32, 64-bit OFM, 32-bit binary elementwise
    /// to narrower, 32-bit to 32-bit); from Vela's `EthosU85PerfInfo`.
    fn output_cycles(&self) -> [f64; 6] {
        match self.config.macs {
            0..=128 => [0.5, 0.5, 0.5, 1.0, 1.0, 1.0],
            129..=256 => [0.25, 0.25, 0.25, 0.5, 0.5, 0.5],
            257..=512 => [0.125, 0.125, 0.25, 0.5, 0.25, 0.25],
            513..=1024 => [0.0625, 0.125, 0.25, 0.5, 0.125, 0.25],
            _ => [0.03125, 0.0625, 0.125, 0.25, 0.0625, 0.125],
        }
    }

    /// Channel bandwidth (bytes/cycle): the memory's bandwidth, or less when the outstanding
    /// transactions (limited by the channel's read buffers) cannot cover the latency.
    fn channel_bw(&self, axi: usize, channel: Channel) -> f64 {
        let m = self.memory(axi);
        let burst_words = (m.burst / 16).max(1) as f64;
        let (outstanding, latency, rb_limit) = match channel {
            Channel::Write => (m.max_writes, m.write_latency, f64::MAX),
            c => {
                let rb = self.channel_rbs()[c as usize] as f64;
                (m.max_reads, m.read_latency, rb / burst_words)
            }
        };
        let util = rb_limit.min(outstanding as f64 * m.ports as f64 * 0.8);
        let limited = m.burst as f64 * util / latency.max(1) as f64 * 0.8;
        // A memory nobody writes (flash) has no write limit to apply.
        if limited <= 0.0 {
            return m.bandwidth;
        }
        m.bandwidth.min(limited)
    }
}

/// Memory channels of the model (index into the channel read buffers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Channel {
    Mem2Mem = 0,
    IfmStream = 1,
    Weight = 2,
    FastWeight = 3,
    Ifm = 4,
    Scale = 5,
    Write = 6,
}

/// The hardware operation an `NPU_OP_*` starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum U85Class {
    Conv,
    Depthwise,
    /// Pooling mode (`POOLING_MODE_*` value).
    Pool(u8),
    /// Elementwise mode (`ELEMENTWISE_MODE_*` value).
    Elementwise(u8),
    Resize,
}

impl U85Op {
    /// A table lookup on a 1x1 pool: a stand-alone LUT operation (sigmoid, tanh, ... as Vela
    /// lowers them), not a LUT fused into another operation's output stage.
    pub fn is_standalone_lut(&self) -> bool {
        self.lut && matches!(self.class, U85Class::Pool(_)) && self.kernel == [1, 1]
    }
}

impl U85Class {
    /// `conv`, `depthwise`, `pool`, `elementwise`, `resize`.
    pub fn name(&self) -> &'static str {
        match self {
            U85Class::Conv => "conv",
            U85Class::Depthwise => "depthwise",
            U85Class::Pool(2) => "pool.reduce_sum",
            U85Class::Pool(_) => "pool",
            U85Class::Elementwise(_) => "elementwise",
            U85Class::Resize => "resize",
        }
    }
}

/// A feature map as one operation sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct U85Fm {
    /// `[height, width, depth]`.
    pub shape: [u64; 3],
    pub bits: u64,
    pub nhcwb16: bool,
    pub region: u8,
    /// Read from or written to the chaining buffer, not memory.
    pub chained: bool,
}

/// One U85 NPU operation, as the estimator needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct U85Op {
    pub offset: usize,
    pub class: U85Class,
    pub ifm: U85Fm,
    /// Second input of a binary elementwise operation (`None` when scalar or unary).
    pub ifm2: Option<U85Fm>,
    pub ofm: U85Fm,
    /// `[height, width]`, `[stride_y, stride_x]`, `[dilation_y, dilation_x]`.
    pub kernel: [u64; 2],
    pub stride: [u64; 2],
    pub dilation: [u64; 2],
    pub ofm_block: [u64; 3],
    /// Microblock `[height, width]`.
    pub ublock: [u64; 2],
    pub part_kernel: bool,
    pub acc48: bool,
    /// The output stage looks values up in the LUT (`ACTIVATION_FUNCTION_LUT_*`).
    pub lut: bool,
    pub fast_weights: bool,
    pub sparse: bool,
    /// Region and bytes of the weight (all cores) and scale streams.
    pub weights: Option<(u8, u64)>,
    pub scales: Option<(u8, u64)>,
}

/// One `NPU_OP_DMA_START`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct U85Dma {
    pub offset: usize,
    /// Region, or `None` for internal memory (the LUT).
    pub src: Option<u8>,
    pub dst: Option<u8>,
    pub bytes: u64,
}

/// What the command processor does, in stream order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum U85Event {
    Op(Box<U85Op>),
    Dma(U85Dma),
    DmaWait(u16),
    KernelWait(u16),
}

/// The last command written to every register. The virtual U85 keeps its own register file,
/// but it is behind `npu-rt`'s `sim` feature, which the compiler does not enable; the field
/// tables (`Command::field`) are shared.
struct Regs {
    cmd0: Vec<Option<Command>>,
    cmd1: Vec<Option<Command>>,
}

impl Regs {
    fn new() -> Self {
        Regs {
            cmd0: vec![None; 0x200],
            cmd1: vec![None; 0x200],
        }
    }

    fn apply(&mut self, cmd: &Command) -> bool {
        let (slot, code) = match *cmd {
            Command::Cmd0 { op, .. } if !op.is_operation() => (&mut self.cmd0, op as usize),
            Command::Cmd1 { op, .. } if !op.is_operation() => (&mut self.cmd1, op as usize),
            _ => return false,
        };
        if let Some(r) = slot.get_mut(code) {
            *r = Some(*cmd);
        }
        true
    }

    /// A field of a `cmd0` register (0 before the register is written, as at reset).
    fn f(&self, op: Cmd0, name: &str) -> u64 {
        self.cmd0
            .get(op as usize)
            .and_then(|c| c.as_ref())
            .and_then(|c| c.field(name))
            .map_or(0, |f| f.1)
    }

    /// The parameter of a `cmd0` register.
    fn p(&self, op: Cmd0) -> u64 {
        match self.cmd0.get(op as usize).copied().flatten() {
            Some(Command::Cmd0 { param, .. }) => u64::from(param),
            _ => 0,
        }
    }

    /// The payload (with the parameter's address bits) of a `cmd1` register.
    fn v(&self, op: Cmd1) -> u64 {
        match self.cmd1.get(op as usize).copied().flatten() {
            Some(Command::Cmd1 { param, payload, .. }) => {
                (u64::from(param & 0xff) << 32) | u64::from(payload)
            }
            _ => 0,
        }
    }
}

/// The events of a U85 `stream` (raw or a COP1 payload).
pub fn decode(stream: &[u8]) -> Result<Vec<U85Event>> {
    let mut regs = Regs::new();
    let mut events = Vec::new();
    for_each_stream(stream, |words, base| {
        walk(words, base, &mut regs, &mut events)
    })?;
    Ok(events)
}

/// Decodes one command stream; true when it ended at `NPU_OP_STOP`.
fn walk(words: &[u32], base: usize, regs: &mut Regs, events: &mut Vec<U85Event>) -> Result<bool> {
    for item in Commands::new(words, base) {
        let (offset, cmd) = item.map_err(|e| bad(e.offset(), &e.to_string()))?;
        if regs.apply(&cmd) {
            continue;
        }
        let Command::Cmd0 { op, param } = cmd else {
            // NPU_OP_BRANCH: Vela's streams do not branch; the walk goes on in order.
            continue;
        };
        let class = match op {
            Cmd0::OP_STOP => return Ok(true),
            Cmd0::OP_CONV => U85Class::Conv,
            Cmd0::OP_DEPTHWISE => U85Class::Depthwise,
            Cmd0::OP_POOL => U85Class::Pool((param & 7) as u8),
            Cmd0::OP_ELEMENTWISE => U85Class::Elementwise((param & 0x3f) as u8),
            Cmd0::OP_RESIZE => U85Class::Resize,
            Cmd0::OP_DMA_START => {
                events.push(U85Event::Dma(dma(regs, offset)));
                continue;
            }
            Cmd0::OP_DMA_WAIT => {
                events.push(U85Event::DmaWait(param & 0xf));
                continue;
            }
            Cmd0::OP_KERNEL_WAIT => {
                events.push(U85Event::KernelWait(param & 0x3));
                continue;
            }
            _ => continue,
        };
        events.push(U85Event::Op(Box::new(op_of(regs, offset, class)?)));
    }
    Ok(false)
}

fn dma(r: &Regs, offset: usize) -> U85Dma {
    // region_mode 1 is internal memory (the LUT).
    let end = |reg: Cmd0| (r.f(reg, "region_mode") == 0).then_some(r.f(reg, "region") as u8);
    let len = r.v(Cmd1::SET_DMA0_LEN);
    // Stride modes D2 and D3 repeat the inner length SIZE0 (and SIZE1) times.
    let reps = match r.f(Cmd0::SET_DMA0_SRC_REGION, "stride_mode") {
        1 => r.p(Cmd0::SET_DMA0_SIZE0).max(1),
        2 => r.p(Cmd0::SET_DMA0_SIZE0).max(1) * r.p(Cmd0::SET_DMA0_SIZE1).max(1),
        _ => 1,
    };
    U85Dma {
        offset,
        src: end(Cmd0::SET_DMA0_SRC_REGION),
        dst: end(Cmd0::SET_DMA0_DST_REGION),
        bytes: len.saturating_mul(reps),
    }
}

/// Bits of an `activation_precision` field value (B8, B16, B32, B64).
fn precision_bits(v: u64) -> u64 {
    8 << v.min(3)
}

fn op_of(r: &Regs, offset: usize, class: U85Class) -> Result<U85Op> {
    use Cmd0 as C;
    let ofm_shape = [
        r.p(C::SET_OFM_HEIGHT_M1) + 1,
        r.p(C::SET_OFM_WIDTH_M1) + 1,
        r.p(C::SET_OFM_DEPTH_M1) + 1,
    ];
    let fmt = |reg: Cmd0, what: &str| -> Result<bool> {
        match r.f(reg, "activation_format") {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(bad(offset, &format!("{what}: undefined activation format"))),
        }
    };
    let chained = |reg: Cmd0| r.f(reg, "activation_storage") == 2;
    let ofm = U85Fm {
        shape: ofm_shape,
        bits: precision_bits(r.f(C::SET_OFM_PRECISION, "activation_precision")),
        nhcwb16: fmt(C::SET_OFM_PRECISION, "OFM_PRECISION")?,
        region: (r.p(C::SET_OFM_REGION) & 7) as u8,
        chained: chained(C::SET_OFM_PRECISION),
    };
    let elementwise = matches!(class, U85Class::Elementwise(_) | U85Class::Resize);
    let (kernel, stride, dilation) = if elementwise {
        ([1, 1], [1, 1], [1, 1])
    } else {
        let ks = |n: &str| r.f(C::SET_KERNEL_STRIDE, n);
        (
            [
                r.p(C::SET_KERNEL_HEIGHT_M1) + 1,
                r.p(C::SET_KERNEL_WIDTH_M1) + 1,
            ],
            [
                (ks("stride_y_msb") << 1 | ks("stride_y_lsb")) + 1,
                (ks("stride_x_msb") << 1 | ks("stride_x_lsb")) + 1,
            ],
            [ks("dilation_y") + 1, ks("dilation_x") + 1],
        )
    };
    let ifm_depth = match class {
        U85Class::Conv | U85Class::Pool(2) => r.p(C::SET_IFM_DEPTH_M1) + 1,
        _ => ofm_shape[2],
    };
    let ifm = U85Fm {
        shape: [
            r.p(C::SET_IFM_HEIGHT0_M1).max(r.p(C::SET_IFM_HEIGHT1_M1)) + 1,
            r.p(C::SET_IFM_WIDTH0_M1) + 1,
            ifm_depth,
        ],
        bits: precision_bits(r.f(C::SET_IFM_PRECISION, "activation_precision")),
        nhcwb16: fmt(C::SET_IFM_PRECISION, "IFM_PRECISION")?,
        region: (r.p(C::SET_IFM_REGION) & 7) as u8,
        chained: chained(C::SET_IFM_PRECISION),
    };
    // Unary modes: ABS, CLZ, NOT, LRELU; a scalar second input is encoded in the command.
    let ifm2 = match class {
        U85Class::Elementwise(m) if ![5, 6, 7, 36].contains(&m) => {
            let bc = r.f(C::SET_IFM2_BROADCAST, "broadcast_mode");
            (bc != 8).then(|| -> Result<U85Fm> {
                let mut shape = ofm_shape;
                // Broadcast axes: bit 0 H, bit 1 W, bit 2 C.
                for (bit, axis) in [(1, 0), (2, 1), (4, 2)] {
                    if bc & bit != 0 {
                        shape[axis] = 1;
                    }
                }
                Ok(U85Fm {
                    shape,
                    bits: precision_bits(r.f(C::SET_IFM2_PRECISION, "activation_precision")),
                    nhcwb16: fmt(C::SET_IFM2_PRECISION, "IFM2_PRECISION")?,
                    region: (r.p(C::SET_IFM2_REGION) & 7) as u8,
                    chained: chained(C::SET_IFM2_PRECISION),
                })
            })
        }
        _ => None,
    }
    .transpose()?;
    let has_weights = matches!(class, U85Class::Conv | U85Class::Depthwise);
    let weights = has_weights.then(|| {
        let bytes = [
            Cmd1::SET_WEIGHT_LENGTH,
            Cmd1::SET_WEIGHT1_LENGTH,
            Cmd1::SET_WEIGHT2_LENGTH,
            Cmd1::SET_WEIGHT3_LENGTH,
        ]
        .iter()
        .map(|&l| r.v(l) & 0xffff_ffff)
        .sum();
        ((r.p(C::SET_WEIGHT_REGION) & 7) as u8, bytes)
    });
    let scales = has_weights.then(|| {
        (
            (r.p(C::SET_SCALE_REGION) & 7) as u8,
            r.v(Cmd1::SET_SCALE_LENGTH) & 0xffff_ffff,
        )
    });
    let ublock = match r.f(C::SET_ACC_FORMAT, "microblock") {
        0 => [1, 1],
        1 => [1, 2],
        2 => [1, 4],
        3 => [2, 2],
        4 => [2, 4],
        5 => [4, 4],
        _ => return Err(bad(offset, "ACC_FORMAT: undefined microblock")),
    };
    Ok(U85Op {
        offset,
        class,
        ifm,
        ifm2,
        ofm,
        kernel,
        stride,
        dilation,
        ofm_block: [
            r.p(C::SET_OFM_BLK_HEIGHT_M1) + 1,
            r.p(C::SET_OFM_BLK_WIDTH_M1) + 1,
            r.p(C::SET_OFM_BLK_DEPTH_M1) + 1,
        ],
        ublock,
        part_kernel: r.f(C::SET_KERNEL_STRIDE, "weight_order") == 1,
        acc48: r.f(C::SET_ACC_FORMAT, "acc_format") == 1,
        lut: r.f(C::SET_ACTIVATION, "activation_function") != 0,
        fast_weights: r.f(C::SET_WEIGHT_FORMAT, "weight_format") == 1,
        sparse: r.f(C::SET_WEIGHT_FORMAT, "weight_sparsity") == 1,
        weights,
        scales,
    })
}

fn div_up(a: u64, b: u64) -> u64 {
    a.div_ceil(b.max(1))
}

fn round_up(a: u64, b: u64) -> u64 {
    div_up(a, b) * b.max(1)
}

fn min3(a: [u64; 3], b: [u64; 3]) -> [u64; 3] {
    [a[0].min(b[0]), a[1].min(b[1]), a[2].min(b[2])]
}

fn div_up3(a: [u64; 3], b: [u64; 3]) -> [u64; 3] {
    [div_up(a[0], b[0]), div_up(a[1], b[1]), div_up(a[2], b[2])]
}

fn prod(a: [u64; 3]) -> u64 {
    a[0].saturating_mul(a[1]).saturating_mul(a[2])
}

/// Bytes the bus moves for `elements` of a feature map read or written in `block`s: short
/// bursts (NHWC slices, narrow bricks) cost like full ones.
fn transfer_bytes(read: bool, m: &U85Memory, fm: &U85Fm, block: [u64; 3], elements: u64) -> u64 {
    let bits = fm.bits;
    let burst_bits = if fm.nhcwb16 {
        let z_stride = fm.shape[1] * bits * 16 / 8;
        if z_stride == block[2] {
            bits * block[1] * block[2]
        } else {
            16 * bits * block[1]
        }
    } else {
        let x_stride = fm.shape[2] * bits / 8;
        if read {
            if x_stride == block[2] {
                bits * block[1] * block[2]
            } else {
                bits * block[2]
            }
        } else if block[2] <= 16 && x_stride == block[2] {
            bits * block[1] * block[2]
        } else {
            (64 * 8).min(16 * bits).min(block[2] * bits)
        }
    };
    let bytes = elements.saturating_mul(bits) / 8;
    let burst = m.burst.min(burst_bits / 8).max(1);
    bytes.saturating_mul(m.burst) / burst
}

/// The IFM block the hardware fetches for `op`'s OFM block (not clipped to the IFM: burst
/// lengths are judged from the whole block, as Vela does).
fn ifm_block(op: &U85Op, cfg: &U85Config, ublock_depth: u64) -> [u64; 3] {
    if matches!(op.class, U85Class::Elementwise(_) | U85Class::Resize) {
        return op.ofm_block;
    }
    let b = op.ofm_block;
    let au = cfg.ifm_ublock;
    let need = |o: u64, stride: u64, k: u64, dil: u64| {
        let kd = ((k - 1) * dil + 1).min(8);
        (o - 1) * stride + kd
    };
    let h = round_up(
        need(b[0], op.stride[0], op.kernel[0], op.dilation[0]),
        u64::from(au.height),
    );
    let w = round_up(
        need(b[1], op.stride[1], op.kernel[1], op.dilation[1]),
        u64::from(au.width),
    );
    let d = match op.class {
        U85Class::Conv if op.part_kernel => 16,
        U85Class::Conv
            if op.ifm.bits == 32 || (cfg.macs <= 256 && ublock_depth == 16 && !op.sparse) =>
        {
            32
        }
        U85Class::Conv if op.sparse && op.ifm.bits == 8 => 128,
        U85Class::Conv => 64,
        _ => b[2],
    };
    [h, w, d]
}

/// Cycles to fetch one IFM block or write one OFM block (latency + transfer).
fn block_cycles(t: &U85Target, read: bool, fm: &U85Fm, block: [u64; 3]) -> u64 {
    if fm.chained {
        return 0;
    }
    let axi = t.axi_of(fm.region);
    let m = t.memory(axi);
    let elements = prod(min3(fm.shape, block));
    let tx = transfer_bytes(read, m, fm, block, elements);
    let lat = if read {
        m.read_latency
    } else {
        m.write_latency
    };
    lat + (tx as f64 / m.bandwidth) as u64
}

/// Output cycles per element (Vela's `GetOutputCyclesPerElement`).
fn ao_per_element(op: &U85Op, t: &U85Target) -> f64 {
    let table = t.output_cycles();
    let (ifm_bits, ofm_bits) = (op.ifm.bits, op.ofm.bits);
    if op.class == U85Class::Elementwise(11) {
        return 33.0; // DIV
    }
    if op.class == U85Class::Resize {
        return if ifm_bits == 8 { table[0] } else { table[1] };
    }
    let i = if op.ofm.chained && (ofm_bits == 32 || ifm_bits == 32) {
        4
    } else if ofm_bits == 64 {
        3
    } else if op.ifm2.is_some() && ifm_bits == 32 {
        if ofm_bits == 32 { 5 } else { 4 }
    } else if ofm_bits == 32 {
        2
    } else if ofm_bits == 16 {
        1
    } else {
        0
    };
    table[i]
}

/// MAC cycles per OFM block (Vela's `EstimateMacCyclesPerBlock`).
fn mac_cycles_per_block(
    op: &U85Op,
    t: &U85Target,
    ifm_blk: [u64; 3],
    ofm_blk: [u64; 3],
    ub: [u64; 3],
) -> u64 {
    let cfg = t.config;
    let cores = u64::from(cfg.cores).max(1);
    let n = div_up3(ofm_blk, ub);
    let n_wh = n[0] * n[1];
    let ifm_bits = op.ifm.bits;
    let wb = 32 * ub[2] / (8 * cores);
    let sparse_div = if op.sparse { 2 } else { 1 };
    let delay = if op.acc48 && cfg.macs <= 128 { 3 } else { 2 };
    let mut total = 0u64;
    let [kh, kw] = op.kernel;
    let mut x = 0;
    while x < kw {
        let mut y = 0;
        while y < kh {
            let elems = (kh - y).min(8) * (kw - x).min(8);
            let (steps, cycles) = match op.class {
                U85Class::Pool(2) => {
                    // Reduce-sum runs like a depth-first convolution.
                    let c = wb.max(ifm_blk[2] / 8 * n_wh) * elems * n[2] * (ifm_bits / 8);
                    (elems, c)
                }
                U85Class::Pool(_) => (1, elems.max(4) * prod(n) * (ifm_bits / 2)),
                U85Class::Depthwise => {
                    let s = div_up(elems, 4);
                    (s, wb.max(4 * n_wh * (ifm_bits / 8)) * s * n[2])
                }
                U85Class::Conv if !op.part_kernel => {
                    let c = wb.max(ifm_blk[2] / 8 * n_wh) * elems * n[2] * (ifm_bits / 8);
                    (elems, c / sparse_div)
                }
                _ => {
                    let s = div_up(elems, if ifm_bits == 16 { 2 } else { 4 });
                    let c = wb.max(4 * n_wh) * s * n[2] * div_up(ifm_blk[2], 8);
                    (s, c / sparse_div)
                }
            };
            let mut bubbles = if n_wh == 1 {
                if n[2] == 1 {
                    delay * steps
                } else if steps > 1 {
                    delay * (steps - 1) * n[2]
                } else {
                    0
                }
            } else {
                0
            };
            if op.class == U85Class::Conv && op.part_kernel {
                bubbles *= div_up(ifm_blk[2], 8);
            }
            total = total.saturating_add(cycles + bubbles);
            y += 8;
        }
        x += 8;
    }
    if matches!(op.class, U85Class::Conv | U85Class::Pool(2)) {
        total = total.saturating_mul(div_up(op.ifm.shape[2], ifm_blk[2]));
    }
    total
}

/// Per memory (AXI0, AXI1): bytes per channel.
type ChannelBytes = [[u64; 7]; 2];

/// Cost of one U85 operation on its own (see the module documentation).
pub fn op_cost(op: &U85Op, t: &U85Target) -> OpCost {
    let (mut cost, ch) = op_parts(op, t);
    add_access(&mut cost, &ch, t);
    cost
}

/// An operation's compute cost and the bytes it moves per memory and channel.
fn op_parts(op: &U85Op, t: &U85Target) -> (OpCost, ChannelBytes) {
    let cfg = t.config;
    let ub_depth = cfg
        .ofm_ublocks
        .iter()
        .find(|u| u64::from(u.height) == op.ublock[0] && u64::from(u.width) == op.ublock[1])
        .map_or_else(
            || u64::from(cfg.macs) / 8 / (op.ublock[0] * op.ublock[1]).max(1),
            |u| u64::from(u.depth),
        )
        .max(1);
    let ub = [op.ublock[0], op.ublock[1], ub_depth];
    let ofm_blk = min3(op.ofm.shape, op.ofm_block);
    let ifm_raw = ifm_block(op, cfg, ub_depth);
    let ifm_blk = min3(op.ifm.shape, ifm_raw);
    let ao_elem = ao_per_element(op, t);
    let ifm_cycles = {
        let a = block_cycles(t, true, &op.ifm, ifm_raw);
        let b = op.ifm2.map_or(0, |f| block_cycles(t, true, &f, ifm_raw));
        a.max(b)
    };
    let ofm_cycles = block_cycles(t, false, &op.ofm, op.ofm_block);
    let uses_macs = matches!(
        op.class,
        U85Class::Conv | U85Class::Depthwise | U85Class::Pool(_)
    );
    let mut cost = OpCost::default();
    if uses_macs {
        let ub_in_blk = prod(div_up3(ofm_blk, ub)).max(1);
        let blocks = prod(div_up3(op.ofm.shape, ub)) as f64 / ub_in_blk as f64;
        let ao_compute = (ao_elem * prod(ofm_blk) as f64).ceil();
        let bias = if op.scales.is_some_and(|s| s.1 > 0) {
            let axi = t.axi_of(op.scales.map_or(0, |s| s.0));
            10.0 * ofm_blk[2] as f64 * t.memory(axi).read_latency as f64 / 256.0
        } else {
            0.0
        };
        let ao = ao_compute.max(bias);
        let mac = mac_cycles_per_block(op, t, ifm_blk, ofm_blk, ub) as f64;
        let min_mem = if blocks > 1.0 {
            ofm_cycles.abs_diff(ifm_cycles) as f64
        } else {
            0.0
        };
        let cmd = (min_mem + mac + ao) / 4.0;
        let (bmac, bao) = (mac.max(cmd), ao.max(cmd));
        let body = if bmac > bao {
            (bmac * blocks) as u64 + bao as u64
        } else {
            (bao * blocks) as u64 + bmac as u64
        };
        cost.compute = body + ofm_cycles + ifm_cycles;
        cost.mac_per_block = mac as u64;
        cost.ao = ao as u64;
        cost.blocks = blocks;
        let k = op.kernel[0] * op.kernel[1];
        cost.macs = prod(op.ofm.shape).saturating_mul(k).saturating_mul(
            if matches!(op.class, U85Class::Conv | U85Class::Pool(2)) {
                op.ifm.shape[2]
            } else {
                1
            },
        ) / if op.sparse { 2 } else { 1 };
    } else {
        let mut shape = op.ofm.shape;
        if op.ofm.nhcwb16 {
            shape[2] = round_up(shape[2], 16);
        }
        let elements = prod(shape) as f64;
        let ao = (ao_elem * elements).ceil();
        let blk_elems = prod(op.ofm_block).max(1) as f64;
        let block = ofm_cycles.max(ifm_cycles) as f64;
        let cmd = ((block / blk_elems + ao_elem) / 4.0 * elements).ceil();
        cost.compute = ao.max(cmd) as u64;
        cost.ao = ao as u64;
        cost.blocks = elements / blk_elems;
    }
    // Memory traffic.
    let mut ch: ChannelBytes = [[0; 7]; 2];
    let rounded = |fm: &U85Fm| {
        let mut s = fm.shape;
        if fm.nhcwb16 {
            s[2] = round_up(s[2], 16);
        }
        s
    };
    let ifm_channel = if uses_macs {
        Channel::Ifm
    } else {
        Channel::IfmStream
    };
    let add = |ch: &mut ChannelBytes,
               fm: &U85Fm,
               read: bool,
               block: [u64; 3],
               elements: u64,
               channel: Channel| {
        if fm.chained || elements == 0 {
            return;
        }
        let axi = t.axi_of(fm.region);
        let bytes = transfer_bytes(read, t.memory(axi), fm, block, elements);
        ch[axi][channel as usize] = ch[axi][channel as usize].saturating_add(bytes);
    };
    if uses_macs {
        let blocks_per_dim = div_up3(op.ofm.shape, ofm_blk);
        let mut count = blocks_per_dim;
        if !matches!(op.class, U85Class::Conv | U85Class::Pool(2)) {
            count[2] = 1;
        }
        let subkernels = div_up(op.kernel[0], 8) * div_up(op.kernel[1], 8);
        let mut ifm_r = ifm_blk;
        if op.ifm.nhcwb16 {
            ifm_r[2] = round_up(ifm_r[2], 16);
        }
        let fetch = ifm_r[0] * ifm_r[1] * rounded(&op.ifm)[2];
        add(
            &mut ch,
            &op.ifm,
            true,
            ifm_raw,
            fetch.saturating_mul(subkernels).saturating_mul(prod(count)),
            Channel::Ifm,
        );
        let refetch = blocks_per_dim[0] * blocks_per_dim[1];
        let wch = if op.fast_weights {
            Channel::FastWeight
        } else {
            Channel::Weight
        };
        for (stream, channel) in [(op.weights, wch), (op.scales, Channel::Scale)] {
            if let Some((region, bytes)) = stream {
                let axi = t.axi_of(region);
                ch[axi][channel as usize] =
                    ch[axi][channel as usize].saturating_add(bytes.saturating_mul(refetch));
            }
        }
    } else {
        add(
            &mut ch,
            &op.ifm,
            true,
            ifm_raw,
            prod(rounded(&op.ifm)),
            ifm_channel,
        );
        if let Some(f) = op.ifm2 {
            let e = prod(rounded(&f));
            if e > 1 {
                add(&mut ch, &f, true, ifm_raw, e, ifm_channel);
            }
        }
    }
    add(
        &mut ch,
        &op.ofm,
        false,
        op.ofm_block,
        prod(rounded(&op.ofm)),
        Channel::Write,
    );
    (cost, ch)
}

/// Fills in the memory side of `cost` from the bytes per channel: per memory, the larger of
/// all its bytes at its bandwidth and the busiest channel at that channel's bandwidth.
fn add_access(cost: &mut OpCost, ch: &ChannelBytes, t: &U85Target) {
    for (axi, channels) in ch.iter().enumerate() {
        let total = channels.iter().fold(0u64, |a, &b| a.saturating_add(b));
        if total == 0 {
            continue;
        }
        let chan = [
            Channel::Mem2Mem,
            Channel::IfmStream,
            Channel::Weight,
            Channel::FastWeight,
            Channel::Ifm,
            Channel::Scale,
            Channel::Write,
        ];
        let busiest = chan
            .iter()
            .map(|&c| (channels[c as usize] as f64 / t.channel_bw(axi, c)) as u64)
            .max()
            .unwrap_or(0);
        let m = t.memory(axi);
        cost.access[axi] = ((total as f64 / m.bandwidth) as u64).max(busiest);
        cost.read[axi] = total.saturating_sub(channels[Channel::Write as usize]);
        cost.written[axi] = channels[Channel::Write as usize];
    }
}

/// Cost of one DMA: the longer of reading the source and writing the destination.
pub fn dma_cost(dma: &U85Dma, t: &U85Target) -> DmaCost {
    let mut cost = DmaCost::default();
    let b = dma.bytes as f64;
    let from = dma.src.map_or(0, |r| {
        let axi = t.axi_of(r);
        cost.read[axi] = dma.bytes;
        (b / t.channel_bw(axi, Channel::Mem2Mem)) as u64 + t.memory(axi).read_latency
    });
    let to = match dma.dst {
        Some(r) => {
            let axi = t.axi_of(r);
            cost.written[axi] = dma.bytes;
            (b / t.channel_bw(axi, Channel::Write)) as u64 + t.memory(axi).write_latency
        }
        None => {
            cost.written[SHRAM] = dma.bytes;
            0
        }
    };
    cost.cycles = from.max(to);
    cost
}

/// Estimates a U85 command stream (raw or a COP1 payload) on `target`.
pub fn estimate_stream_u85(stream: &[u8], target: &U85Target) -> Result<Estimate> {
    estimate_stream_u85_with(stream, target, Options::default())
}

/// [`estimate_stream_u85`] with explicit [`Options`] ([`Options::VELA`]: LUT loads free).
pub fn estimate_stream_u85_with(
    stream: &[u8],
    target: &U85Target,
    options: Options,
) -> Result<Estimate> {
    Ok(estimate_events_u85(&decode(stream)?, target, options))
}

/// The cost of every operation. Operations chained through the chaining buffer (an OFM with
/// `ACTIVATION_STORAGE_CHAINED` feeding the next operation) run as one pass, as Vela costs
/// such a group: compute summed, the bytes of all of them sharing the memories; the group's
/// cost goes to its last operation, the others take no time of their own.
fn op_costs(ops: &[&U85Op], dma_bytes: &[ChannelBytes], t: &U85Target) -> Vec<OpCost> {
    let mut costs = Vec::with_capacity(ops.len());
    let mut group: Option<(OpCost, ChannelBytes)> = None;
    for (i, op) in ops.iter().enumerate() {
        let (cost, mut ch) = op_parts(op, t);
        if let Some(extra) = dma_bytes.get(i) {
            for (a, c) in ch.iter_mut().zip(extra) {
                for (x, y) in a.iter_mut().zip(c) {
                    *x = x.saturating_add(*y);
                }
            }
        }
        let (mut acc, mut acc_ch) = group.take().unwrap_or_default();
        acc.compute = acc.compute.saturating_add(cost.compute);
        acc.macs = acc.macs.saturating_add(cost.macs);
        for (a, c) in acc_ch.iter_mut().zip(ch) {
            for (x, y) in a.iter_mut().zip(c) {
                *x = x.saturating_add(y);
            }
        }
        if op.ofm.chained {
            costs.push(OpCost {
                compute: 0,
                macs: 0,
                ..cost
            });
            group = Some((acc, acc_ch));
        } else {
            let mut whole = OpCost {
                compute: acc.compute,
                macs: acc.macs,
                ..cost
            };
            add_access(&mut whole, &acc_ch, t);
            costs.push(whole);
        }
    }
    costs
}

/// Places decoded U85 events on the NPU/DMA timeline: operations one after another, DMAs one
/// after another on the DMA engine, concurrently, as the waits allow (the U55/U65 timeline,
/// shared, with a DMA queue of 2).
pub fn estimate_events_u85(events: &[U85Event], target: &U85Target, options: Options) -> Estimate {
    let ops: Vec<&U85Op> = events
        .iter()
        .filter_map(|e| match e {
            U85Event::Op(op) => Some(op.as_ref()),
            _ => None,
        })
        .collect();
    // A memory-to-memory DMA shares the memories with the operation it runs beside (the last
    // one started before it, or the first if none has): its bytes join that operation's
    // traffic on the source's DMA channel and the destination's write channel, as Vela counts
    // the weight transfers that are not buffered ahead.
    let mut dma_bytes: Vec<ChannelBytes> = vec![[[0; 7]; 2]; ops.len()];
    let mut seen = 0usize;
    for e in events {
        match e {
            U85Event::Op(_) => seen += 1,
            U85Event::Dma(d) => {
                let (Some(src), Some(dst)) = (d.src, d.dst) else {
                    continue;
                };
                if let Some(ch) = dma_bytes.get_mut(seen.saturating_sub(1)) {
                    let (a, b) = (target.axi_of(src), target.axi_of(dst));
                    let m2m = &mut ch[a][Channel::Mem2Mem as usize];
                    *m2m = m2m.saturating_add(d.bytes);
                    let w = &mut ch[b][Channel::Write as usize];
                    *w = w.saturating_add(d.bytes);
                }
            }
            _ => {}
        }
    }
    let mut costs = op_costs(&ops, &dma_bytes, target).into_iter();
    let steps = events
        .iter()
        .map(|event| match event {
            U85Event::Op(op) => Step::Op(
                OpEstimate::unplaced(
                    op.offset,
                    op.class.name().to_string(),
                    op.ofm.shape,
                    op.ofm_block,
                    costs.next().unwrap_or_default(),
                ),
                op.is_standalone_lut(),
            ),
            U85Event::Dma(dma) => Step::Dma(DmaEstimate::unplaced(
                dma.offset,
                dma.bytes,
                dma.dst.is_none(),
                dma_cost(dma, target),
            )),
            U85Event::DmaWait(k) => Step::DmaWait(*k),
            U85Event::KernelWait(k) => Step::KernelWait(*k),
        })
        .collect();
    let est = Estimate::empty(
        target.describe(),
        target.system.clock_hz,
        [target.system.axi0.name, target.system.axi1.name, "Lut"],
    );
    timeline(steps, est, 2, options)
}

/// Every Ethos-U85 configuration name the estimator knows (`ethos-u85-128` ...).
pub fn u85_names() -> impl Iterator<Item = &'static str> {
    U85_ALL.iter().map(|c| c.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use npu_rt::ethos_u::regs::u85::Cmd0;

    fn words(cmds: &[u32]) -> Vec<u8> {
        cmds.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn malformed_streams_are_errors_naming_the_offset() {
        let t = U85Target::new("ethos-u85-256", None, None).unwrap();
        // Not whole words: the offset is the stream's end, as in the U55/U65 decoder.
        let e = estimate_stream_u85(&[0, 0, 0, 0, 1], &t).unwrap_err();
        assert!(matches!(e, Error::CommandStream { offset: 5, .. }), "{e}");
        // An undefined micro-block (7) in ACC_FORMAT at the operation at byte 4.
        let s = words(&[
            Cmd0::SET_ACC_FORMAT.encode(7 << 8),
            Cmd0::OP_ELEMENTWISE.encode(1),
        ]);
        let e = estimate_stream_u85(&s, &t).unwrap_err();
        assert!(matches!(e, Error::CommandStream { offset: 4, .. }), "{e}");
    }

    #[test]
    fn an_elementwise_add_costs_its_output_cycles() {
        // 1x1x1024 int8 + int8 -> int8 in SRAM (region 1, Shared_Sram) on ethos-u85-256:
        // 0.25 output cycles per element.
        let t = U85Target::new("ethos-u85-256", None, None).unwrap();
        let s = words(&[
            Cmd0::SET_OFM_DEPTH_M1.encode(1023),
            Cmd0::SET_IFM_DEPTH_M1.encode(1023),
            Cmd0::SET_IFM_REGION.encode(1),
            Cmd0::SET_IFM2_REGION.encode(1),
            Cmd0::SET_OFM_REGION.encode(1),
            Cmd0::SET_OFM_BLK_DEPTH_M1.encode(1023),
            Cmd0::OP_ELEMENTWISE.encode(1),
            Cmd0::OP_STOP.encode(0),
        ]);
        let e = estimate_stream_u85(&s, &t).unwrap();
        assert_eq!(e.ops.len(), 1);
        assert_eq!(e.ops[0].cost.compute, 256);
        assert!(e.total_cycles >= 256);
    }
}
