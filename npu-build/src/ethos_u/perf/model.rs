//! The cost of one operation: compute cycles and memory traffic.
//!
//! This is the model Arm's Vela 5.2.0 uses for Ethos-U55/U65 (Regor core,
//! `EthosU55Performance`), applied to what a command stream actually does rather than to
//! Vela's scheduler operations (see the [module documentation](super) for the differences).
//! Shapes are `[height, width, depth]`.

use npu_rt::ethos_u::config::{AcceleratorConfig, Product};
use npu_rt::ethos_u::regs::{ElementwiseMode, IfmUpscaleMode, PoolingMode};

use super::stream::{ActivationKind, Dma, DmaEnd, FeatureMap, Ifm2, NpuOperation, OpClass};
use crate::target::{AxiPort, Target};

/// Memories the model distinguishes: the two AXI ports and the shared buffer.
pub const NUM_MEMORIES: usize = 3;
/// Index of the shared buffer (LUT DMA destination) in [`Memories`].
pub const SHRAM: usize = 2;

/// Timing of one memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Memory {
    /// Vela's name of what is on the port (`Sram`, `OffChipFlash`, `Dram`) or `Shram`.
    pub name: &'static str,
    /// Bytes per NPU cycle.
    pub bandwidth: f64,
    pub read_latency: u64,
    pub write_latency: u64,
    /// Longest burst in bytes.
    pub burst: u64,
}

/// The memories of a target and which one each region lives in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Memories {
    /// AXI0, AXI1, SHRAM.
    pub list: [Memory; NUM_MEMORIES],
    /// Memory of regions 0..=7 (0: constants, 1: arena, 2: cache/fast scratch; the others are
    /// arena-like).
    pub region: [usize; 8],
}

impl Memories {
    /// The memories of `target` (vela.ini values) and the memory mode's region placement.
    pub fn new(target: &Target) -> Self {
        let port = |p: AxiPort| {
            let c = target.system_config.port(p);
            Memory {
                name: c.area.name(),
                bandwidth: target.bytes_per_cycle(p),
                read_latency: u64::from(c.read_latency),
                write_latency: u64::from(c.write_latency),
                burst: u64::from(c.burst_length).max(1),
            }
        };
        // Vela models the shared buffer as a memory of 1 byte/cycle without latency.
        let shram = Memory {
            name: "Shram",
            bandwidth: 1.0,
            read_latency: 0,
            write_latency: 0,
            burst: 1,
        };
        let index = |p: AxiPort| match p {
            AxiPort::Axi0 => 0,
            AxiPort::Axi1 => 1,
        };
        let mode = target.memory_mode;
        let arena = index(mode.arena_mem);
        let mut region = [arena; 8];
        region[0] = index(mode.const_mem);
        region[2] = index(mode.cache_mem);
        Memories {
            list: [port(AxiPort::Axi0), port(AxiPort::Axi1), shram],
            region,
        }
    }

    /// Memory index of `region`.
    pub fn of_region(&self, region: u8) -> usize {
        self.region
            .get(usize::from(region))
            .copied()
            .unwrap_or(self.region[1])
    }

    fn get(&self, index: usize) -> &Memory {
        &self.list[index.min(NUM_MEMORIES - 1)]
    }
}

/// Cycles and bytes of one NPU operation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OpCost {
    /// Compute time (Vela's "NPU" cycles for the operation): MAC, output and command-issue
    /// limits plus the first IFM block's fetch and the last OFM block's write.
    pub compute: u64,
    /// MAC-engine cycles per OFM block (0 for elementwise operations).
    pub mac_per_block: u64,
    /// Output (AO) cycles per OFM block, or for the whole elementwise operation.
    pub ao: u64,
    /// OFM blocks (fractional: partial blocks count in micro-blocks).
    pub blocks: f64,
    /// Bytes read and written per memory, with burst inefficiency.
    pub read: [u64; NUM_MEMORIES],
    pub written: [u64; NUM_MEMORIES],
    /// Cycles each memory is busy with those bytes.
    pub access: [u64; NUM_MEMORIES],
    pub macs: u64,
}

impl OpCost {
    /// The operation's time: compute or the busiest memory, whichever is longer.
    pub fn cycles(&self) -> u64 {
        self.access.iter().copied().fold(self.compute, u64::max)
    }
}

/// Cycles and bytes of one DMA.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DmaCost {
    pub cycles: u64,
    pub read: [u64; NUM_MEMORIES],
    pub written: [u64; NUM_MEMORIES],
}

/// The hardware operation classes of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hw {
    Conv,
    Depthwise,
    Pooling,
    ReduceSum,
    Elementwise,
}

type Shape = [u64; 3];

fn min3(a: Shape, b: Shape) -> Shape {
    [a[0].min(b[0]), a[1].min(b[1]), a[2].min(b[2])]
}

fn ceil3(a: Shape, b: Shape) -> Shape {
    [
        a[0].div_ceil(b[0].max(1)),
        a[1].div_ceil(b[1].max(1)),
        a[2].div_ceil(b[2].max(1)),
    ]
}

fn prod(a: Shape) -> u64 {
    a[0].saturating_mul(a[1]).saturating_mul(a[2])
}

fn round_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to.max(1)).saturating_mul(to.max(1))
}

/// The storage granule of a feature map's depth: 16 for bricks.
fn depth_rounded(shape: Shape, nhcwb16: bool) -> Shape {
    if nhcwb16 {
        [shape[0], shape[1], round_up(shape[2], 16)]
    } else {
        shape
    }
}

/// Everything the formulas share for one operation.
struct Op<'a> {
    op: &'a NpuOperation,
    accel: &'a AcceleratorConfig,
    mems: &'a Memories,
    hw: Hw,
    cores: u64,
    /// OFM micro-block.
    ublock: Shape,
    /// The block configuration's OFM and IFM blocks (not clipped to the feature maps).
    ofm_block: Shape,
    ifm_block: Shape,
}

/// Bytes moved to transfer `elements` elements of a feature map in blocks of `block`: short
/// bursts cost as much bus time as full ones (`EstimateMemoryTransfer`).
fn transfer_bytes(
    cores: u64,
    read: bool,
    mem: &Memory,
    fm: &FeatureMap,
    bits: u64,
    block: Shape,
    elements: u64,
) -> u64 {
    let [_, bw, bc] = block;
    let burst_bits = if fm.nhcwb16 {
        let z_stride = fm.shape[1] * bits * 16 / 8;
        if z_stride == bc {
            bits * bw * bc
        } else if read {
            16 * bits * bw
        } else {
            16 * bits * bw * cores
        }
    } else {
        // The row stride of the operation's own view (Vela's slice shape), not the tensor's.
        let x_stride = fm.shape[2] * bits / 8;
        if read {
            if x_stride == bc {
                bits * bw * bc
            } else {
                bits * bc
            }
        } else if bc <= 16 && x_stride == bc {
            bits * bw * bc
        } else {
            (64 * 8).min(16 * bits * cores).min(bc * bits)
        }
    };
    let bytes = elements.saturating_mul(bits) / 8;
    let burst = mem.burst.min(burst_bits / 8).max(1);
    bytes.saturating_mul(mem.burst) / burst
}

impl<'a> Op<'a> {
    fn new(op: &'a NpuOperation, accel: &'a AcceleratorConfig, mems: &'a Memories) -> Self {
        let hw = match op.class {
            OpClass::Conv => Hw::Conv,
            OpClass::Depthwise => Hw::Depthwise,
            OpClass::Pool(PoolingMode::ReduceSum) => Hw::ReduceSum,
            OpClass::Pool(_) => Hw::Pooling,
            OpClass::Elementwise(_) => Hw::Elementwise,
        };
        let arch_ublock = [
            u64::from(accel.ofm_ublock.height),
            u64::from(accel.ofm_ublock.width),
            u64::from(accel.ofm_ublock.depth),
        ];
        // The hardware processes 1x4 micro-blocks for 1-row convolutions on 2x2 configs.
        let ublock = if arch_ublock[0] == 2
            && hw == Hw::Conv
            && op.ofm.shape[0] == 1
            && op.ofm.shape[1].is_multiple_of(2)
            && op.kernel.height == 1
        {
            [1, 4, arch_ublock[2]]
        } else {
            arch_ublock
        };
        let ofm_block = op.ofm_block;
        let ifm_block = Self::arch_ifm_block(op, accel, hw, ofm_block, arch_ublock);
        Op {
            op,
            accel,
            mems,
            hw,
            cores: u64::from(accel.cores.max(1)),
            ublock,
            ofm_block,
            ifm_block,
        }
    }

    /// The IFM block that feeds an OFM block (`GetArchIFMBlockSize` plus the depth rule of
    /// the block search).
    fn arch_ifm_block(
        op: &NpuOperation,
        accel: &AcceleratorConfig,
        hw: Hw,
        ofm_block: Shape,
        ublock: Shape,
    ) -> Shape {
        let (upscale, rounding) = match op.upscale {
            IfmUpscaleMode::None => (1, 0),
            IfmUpscaleMode::Nearest => (2, 1),
            IfmUpscaleMode::Zeros => (2, 0),
        };
        let (dh, dw) = op.kernel.dilated();
        let need = |o: u64, stride: u64, k: u64, limit: u32, ub: u64| {
            let k = k.min(u64::from(limit));
            round_up(
                ((o.max(1) - 1) * stride + k + rounding).div_ceil(upscale),
                ub,
            )
        };
        let h = need(
            ofm_block[0],
            op.kernel.stride_y,
            dh,
            accel.sub_kernel_max.height,
            ublock[0],
        );
        let w = need(
            ofm_block[1],
            op.kernel.stride_x,
            dw,
            accel.sub_kernel_max.width,
            ublock[1],
        );
        let depth = match hw {
            Hw::Depthwise | Hw::Pooling | Hw::Elementwise => ofm_block[2],
            Hw::Conv | Hw::ReduceSum => {
                let d = op.ifm.shape[2];
                if op.ifm.bits == 16 {
                    round_up(d.min(16), 4)
                } else {
                    let cap = if op.part_kernel { 16 } else { 32 };
                    round_up(d.min(cap), u64::from(accel.ifm_ublock.depth))
                }
            }
        };
        [h, w, depth]
    }

    fn mem(&self, region: u8) -> &Memory {
        self.mems.get(self.mems.of_region(region))
    }

    /// The second input as a feature map (a scalar is one element of constant memory).
    fn ifm2(&self) -> Option<FeatureMap> {
        self.op.ifm2.map(|i| match i {
            Ifm2::Tensor(fm) => fm,
            Ifm2::Scalar { bits } => FeatureMap {
                shape: [1, 1, 1],
                bits,
                nhcwb16: false,
                region: 0,
                base: 0,
                strides: [0; 3],
            },
        })
    }

    /// Cycles to fetch the first IFM block (the slowest input's).
    fn ifm_block_cycles(&self) -> u64 {
        let bits = self.op.ifm.bits;
        let mut worst = 0;
        for fm in std::iter::once(self.op.ifm).chain(self.ifm2()) {
            let mem = self.mem(fm.region);
            let elements = prod(min3(fm.shape, self.ifm_block));
            let tx = transfer_bytes(self.cores, true, mem, &fm, bits, self.ifm_block, elements);
            worst = worst.max(mem.read_latency + (tx as f64 / mem.bandwidth) as u64);
        }
        worst
    }

    /// Cycles to write the last OFM block.
    fn ofm_block_cycles(&self) -> u64 {
        let fm = &self.op.ofm;
        let mem = self.mem(fm.region);
        let elements = prod(min3(fm.shape, self.ofm_block));
        let tx = transfer_bytes(
            self.cores,
            false,
            mem,
            fm,
            fm.bits,
            self.ofm_block,
            elements,
        );
        mem.write_latency + (tx as f64 / mem.bandwidth) as u64
    }

    /// Output-stage cycles per OFM element (`EstimateAOCyclesPerElement`).
    fn ao_per_element(&self) -> f64 {
        let op = self.op;
        let mode = match op.class {
            OpClass::Elementwise(m) => Some(m),
            _ => None,
        };
        let index = if self.hw == Hw::Elementwise && op.ifm.bits == 32 {
            if op.ifm2.is_some() { 1 } else { 0 }
        } else if mode == Some(ElementwiseMode::Mul) && op.ofm.bits == 32 {
            2
        } else if mode == Some(ElementwiseMode::Mul) || (self.hw != Hw::Elementwise && op.acc40) {
            3
        } else if matches!(mode, Some(ElementwiseMode::Add | ElementwiseMode::Sub)) {
            5
        } else if op.class == OpClass::Pool(PoolingMode::Max) {
            6
        } else {
            7
        };
        // A table lookup on a 1x1 average pool is a stand-alone LUT operation (sigmoid, tanh,
        // GELU, ... lowered the way Vela lowers them). Vela's estimate takes the activation cost
        // from the operation fused after the main one (Regor's
        // `EstimateOutputCyclesPerElement`); a stand-alone LUT operation has none, so it is
        // costed as an output stage without activation (fixtures op_logistic, op_gelu, ... on
        // ethos-u55-256, where the difference shows).
        let act = match op.activation {
            ActivationKind::Lut if op.is_standalone_lut() => 2,
            ActivationKind::Lut => 0,
            ActivationKind::Clip => 1,
            ActivationKind::None => 2,
        };
        let out = self.accel.output_cycles_per_elem[index];
        let act = self.accel.activation_cycles_per_elem[act];
        f64::from(out.max(act))
    }

    /// MAC-engine cycles of one OFM block (`EstimateMacCyclesPerBlock`).
    fn mac_cycles_per_block(&self) -> u64 {
        let op = self.op;
        let ifm_block = min3(op.ifm.shape, self.ifm_block);
        let ofm_block = min3(op.ofm.shape, self.ofm_block);
        let ub = ceil3(ofm_block, self.ublock);
        let ub_hw = ub[0] * ub[1];
        let ifm_bits = op.ifm.bits;
        let u55_32 = self.accel.product == Product::U55 && self.accel.macs == 32;
        let cycles_wb = 32 * self.ublock[2] / 8;
        let part_kernel = self.hw == Hw::Conv && op.part_kernel;
        let ifm_depth_steps = ifm_block[2].div_ceil(8);
        let sub_h = u64::from(self.accel.sub_kernel_max.height).max(1);
        let sub_w = u64::from(self.accel.sub_kernel_max.width).max(1);
        // The kernel is walked in sub-kernels of at most sub_w x sub_h: full ones and the
        // remainders along each axis, so at most four distinct sizes, each a number of times.
        let parts = |k: u64, limit: u64| [(limit, k / limit), (k % limit, 1)];
        let mut total: u64 = 0;
        for (w, nx) in parts(op.kernel.width, sub_w) {
            for (h, ny) in parts(op.kernel.height, sub_h) {
                if w == 0 || h == 0 || nx == 0 || ny == 0 {
                    continue;
                }
                let sub = w * h;
                let (steps, cycles) = match self.hw {
                    Hw::Pooling => {
                        let c = 4u64.max(sub) * prod(ub);
                        (1, if u55_32 { c } else { c * (ifm_bits / 2) })
                    }
                    Hw::Depthwise => {
                        let steps = sub.div_ceil(4);
                        let c = cycles_wb.max(4 * ub_hw * (ifm_bits / 8));
                        (steps, c * steps * ub[2])
                    }
                    Hw::Conv if part_kernel => {
                        let steps = sub.div_ceil(if ifm_bits == 16 { 2 } else { 4 });
                        let c = cycles_wb.max(4 * ub_hw);
                        (steps, c * steps * ub[2] * ifm_depth_steps)
                    }
                    _ => (sub, cycles_wb.max(4 * ub_hw) * sub * ub[2]),
                };
                // Pipeline bubbles when a block is a single micro-block wide and high.
                let mut delay = 0;
                let d = if u55_32 {
                    if op.acc40 { 7 } else { 3 }
                } else if op.acc40 && self.accel.macs <= 128 {
                    3
                } else {
                    2
                };
                if ub_hw == 1 {
                    if ub[2] == 1 {
                        delay = d * steps;
                    } else if steps > 1 {
                        delay = d * (steps - 1) * ub[2];
                    }
                }
                if u55_32 && (ub[1] == 1 || ub[0] == 1) && ub[2] > 1 && op.acc40 {
                    delay += d * ub[2];
                }
                if part_kernel {
                    delay *= ifm_depth_steps;
                }
                let each = cycles.saturating_add(delay);
                total = total.saturating_add(each.saturating_mul(nx.saturating_mul(ny)));
            }
        }
        if matches!(self.hw, Hw::Conv | Hw::ReduceSum) {
            total = total.saturating_mul(op.ifm.shape[2].div_ceil(ifm_block[2].max(1)));
        }
        total / self.cores
    }

    /// Compute cycles of a MAC operation (`EstimateMacOpCycles`), as a first-and-last
    /// operation (both the first IFM fetch and the last OFM write are exposed).
    fn mac_op(&self, cost: &mut OpCost) {
        let op = self.op;
        let ofm_block = min3(op.ofm.shape, self.ofm_block);
        let ub_per_block = prod(ceil3(ofm_block, self.ublock)).max(1);
        let blocks = prod(ceil3(op.ofm.shape, self.ublock)) as f64 / ub_per_block as f64;
        let ao_elem = self.ao_per_element();
        let ao_compute = (ao_elem * prod(ofm_block) as f64).ceil();
        // Scale/bias records (10 bytes per channel) are fetched per block.
        let bias = match op.scales {
            Some(s) if matches!(self.hw, Hw::Conv | Hw::Depthwise) => {
                10.0 * ofm_block[2] as f64 * self.mem(s.region).read_latency as f64 / 256.0
            }
            _ => 0.0,
        };
        let ao = ao_compute.max(bias);
        let mac = self.mac_cycles_per_block() as f64;
        let ifm_cycles = self.ifm_block_cycles();
        let ofm_cycles = self.ofm_block_cycles();
        let min_mem = if blocks > 1.0 {
            ofm_cycles.abs_diff(ifm_cycles) as f64
        } else {
            0.0
        };
        let cmd = (min_mem + mac + ao) / 4.0;
        let (bal_mac, bal_ao) = (mac.max(cmd), ao.max(cmd));
        let body = if bal_mac > bal_ao {
            (bal_mac * blocks).trunc() + bal_ao
        } else {
            bal_ao * blocks + bal_mac
        };
        cost.compute = (body as u64)
            .saturating_add(ofm_cycles)
            .saturating_add(ifm_cycles);
        cost.mac_per_block = mac as u64;
        cost.ao = ao as u64;
        cost.blocks = blocks;
    }

    /// Compute cycles of an elementwise operation (`EstimateElementwiseCycles`).
    fn elementwise_op(&self, cost: &mut OpCost) {
        let op = self.op;
        let elements = prod(depth_rounded(op.ofm.shape, op.ofm.nhcwb16)) as f64;
        let ao_elem = self.ao_per_element();
        let ao = (ao_elem * elements).ceil();
        let block_elements = prod(self.ofm_block).max(1) as f64;
        let block = self.ofm_block_cycles().max(self.ifm_block_cycles()) as f64;
        let cmd = ((block / block_elements + ao_elem) / 4.0 * elements).ceil();
        cost.compute = cmd.max(ao) as u64;
        cost.ao = ao as u64;
        cost.blocks = elements / block_elements;
    }

    /// Elements each input reads and the OFM writes, and how often the weights are re-read
    /// (`MeasureElementAccess`).
    fn element_access(&self) -> ([u64; 2], u64, u64) {
        let op = self.op;
        let mut ifm_read = [0u64; 2];
        let mut weight_refetch = 0;
        match self.hw {
            Hw::Elementwise => {
                let ofm_in_ifm_layout = prod(depth_rounded(op.ofm.shape, op.ifm.nhcwb16));
                let ifm2 = self.ifm2();
                if op.ifm.elements() == 1 {
                    if op.ifm.bits > 8 {
                        ifm_read[0] = prod(depth_rounded(op.ifm.shape, op.ifm.nhcwb16));
                    } else if ifm2.is_some() {
                        ifm_read[1] = ofm_in_ifm_layout;
                    }
                } else {
                    ifm_read[0] = ofm_in_ifm_layout;
                    if let Some(fm) = ifm2 {
                        if fm.elements() > 1 {
                            ifm_read[1] = ifm_read[0];
                        } else if fm.bits > 8 {
                            ifm_read[1] = prod(depth_rounded(fm.shape, op.ifm.nhcwb16));
                        }
                    }
                }
            }
            _ => {
                let ifm_block = min3(op.ifm.shape, self.ifm_block);
                let ofm_block = min3(op.ofm.shape, self.ofm_block);
                let mut ofm_blocks = ceil3(op.ofm.shape, ofm_block);
                if matches!(self.hw, Hw::Depthwise | Hw::Pooling) {
                    ofm_blocks[2] = 1;
                }
                let subkernels = op.kernel.width.div_ceil(8) * op.kernel.height.div_ceil(8);
                let ifm_fetch =
                    ifm_block[0] * ifm_block[1] * depth_rounded(op.ifm.shape, op.ifm.nhcwb16)[2];
                ifm_read[0] = ifm_fetch
                    .saturating_mul(subkernels)
                    .saturating_mul(prod(ofm_blocks));
                if matches!(self.hw, Hw::Conv | Hw::Depthwise) {
                    weight_refetch = ofm_blocks[0] * ofm_blocks[1];
                }
            }
        }
        let ofm_write = prod(depth_rounded(op.ofm.shape, op.ofm.nhcwb16));
        (ifm_read, ofm_write, weight_refetch)
    }

    /// Bytes per memory and the cycles each memory is busy with them.
    fn traffic(&self, cost: &mut OpCost) {
        let op = self.op;
        let (ifm_read, ofm_write, refetch) = self.element_access();
        let inputs = std::iter::once(op.ifm).chain(self.ifm2());
        for (fm, elements) in inputs.zip(ifm_read) {
            if elements == 0 {
                continue;
            }
            let m = self.mems.of_region(fm.region);
            let bytes = transfer_bytes(
                self.cores,
                true,
                self.mems.get(m),
                &fm,
                fm.bits,
                self.ifm_block,
                elements,
            );
            cost.read[m] = cost.read[m].saturating_add(bytes);
        }
        let m = self.mems.of_region(op.ofm.region);
        let bytes = transfer_bytes(
            self.cores,
            false,
            self.mems.get(m),
            &op.ofm,
            op.ofm.bits,
            self.ofm_block,
            ofm_write,
        );
        cost.written[m] = cost.written[m].saturating_add(bytes);
        // Weights and scales are re-read for every OFM block position.
        for s in [op.weights, op.scales].into_iter().flatten() {
            let m = self.mems.of_region(s.region);
            cost.read[m] = cost.read[m].saturating_add(refetch.saturating_mul(s.bytes));
        }
        for m in 0..NUM_MEMORIES {
            let bytes = cost.read[m].saturating_add(cost.written[m]);
            cost.access[m] = (bytes as f64 / self.mems.list[m].bandwidth) as u64;
        }
    }
}

/// The cost of one NPU operation on `accel` with memories `mems`.
pub fn op_cost(op: &NpuOperation, accel: &AcceleratorConfig, mems: &Memories) -> OpCost {
    let o = Op::new(op, accel, mems);
    let mut cost = OpCost {
        macs: op.macs(),
        ..OpCost::default()
    };
    if o.hw == Hw::Elementwise {
        o.elementwise_op(&mut cost);
    } else {
        o.mac_op(&mut cost);
    }
    o.traffic(&mut cost);
    cost
}

/// Cycles of a weight copy: a DMA of `bytes` from the read-only region (0) into region `dst`.
pub fn weight_copy_cycles(mems: &Memories, dst: u8, bytes: u64) -> u64 {
    let dma = Dma {
        offset: 0,
        src: DmaEnd::Region(0),
        dst: DmaEnd::Region(dst),
        bytes,
    };
    dma_cost(&dma, mems).cycles
}

/// The cost of one DMA: the slower of reading the source and writing the destination
/// (`MemToMemCycles`).
pub fn dma_cost(dma: &Dma, mems: &Memories) -> DmaCost {
    let index = |end: DmaEnd| match end {
        DmaEnd::Region(r) => mems.of_region(r),
        DmaEnd::Shram => SHRAM,
    };
    let (s, d) = (index(dma.src), index(dma.dst));
    let (src, dst) = (mems.get(s), mems.get(d));
    let bytes = dma.bytes as f64;
    let from = (bytes / src.bandwidth) as u64 + src.read_latency;
    let to = (bytes / dst.bandwidth) as u64 + dst.write_latency;
    let mut cost = DmaCost {
        cycles: from.max(to),
        ..DmaCost::default()
    };
    cost.read[s] = dma.bytes;
    cost.written[d] = dma.bytes;
    cost
}
