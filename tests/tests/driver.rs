//! The MMIO driver (`npu_rt::ethos_u::EthosU`) end to end against the virtual NPU's register
//! model (`npu_rt::sim::regfile::RegisterFile`): the real driver code programs the model's
//! registers, the model fetches the queue and the regions from its own physical memory, and
//! the outputs must be byte-identical with TFLite's reference outputs. Injected faults must
//! come back as their `npu_rt::Error`.
//!
//! The modelled system is not coherent, so the driver's hooks are exercised for real: the NPU
//! sees flash windows (the COP1 payload, the weights) and an SRAM window at 32-bit physical
//! addresses; the CPU's arena is a separate buffer (its data cache, so to speak) that reaches
//! the SRAM only through `Platform::clean` and comes back only through `Platform::invalidate`;
//! CPU addresses reach the NPU only through `Platform::npu_address`.

use std::cell::{Cell, RefCell};

use npu_build::cli::sim::CompiledDir;
use npu_build::value::Value;
use npu_rt::Job;
use npu_rt::error::Error;
use npu_rt::ethos_u::config::{AcceleratorConfig, ETHOS_U55_128};
use npu_rt::ethos_u::driver::{EthosU, IrqState, Mmio, Platform, PmuConfig, Settings};
use npu_rt::ethos_u::regs::PmuEvent;
use npu_rt::sim::regfile::{RegisterFile, SystemMemory};
use npu_tests::fixtures_dir;

/// Physical address of the COP1 payload (flash).
const QUEUE_AT: u64 = 0x1000_0000;
/// Physical address of region 0, the weights (flash).
const WEIGHTS_AT: u64 = 0x1100_0000;
/// Physical address of region 1, the NPU's view of the arena (SRAM).
const SRAM_AT: u64 = 0x3100_0000;

/// A compiled model: the COP1 payload, the weights and where its input and output live.
struct Model {
    payload: Vec<u8>,
    weights: Vec<u8>,
    arena_size: usize,
    input_at: usize,
    output_at: usize,
}

/// Vela's compiled model of a fixture for Ethos-U55-128.
fn vela(model: &str) -> Model {
    let dir = fixtures_dir().join(model).join("vela/ethos-u55-128");
    let c = CompiledDir::load(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let first = |key: &str| c.meta[key][0].as_u64().expect(key) as usize;
    Model {
        arena_size: c.meta["scratch_size"].as_u64().expect("scratch_size") as usize,
        input_at: first("input_offset"),
        output_at: first("output_offset"),
        payload: c.cmd_stream,
        weights: c.weights,
    }
}

/// Our compiler's model of a fixture's `.tflite` for Ethos-U55-128.
fn ours(model: &str) -> Model {
    let path = fixtures_dir().join(model).join(format!("{model}.tflite"));
    let graph = npu_build::import::load(&path).expect("import");
    let c = npu_build::ethos_u::compile(&graph, &ETHOS_U55_128).expect("compile");
    assert_eq!((c.inputs.len(), c.outputs.len()), (1, 1));
    Model {
        arena_size: c.arena_size,
        input_at: c.inputs[0].offset,
        output_at: c.outputs[0].offset,
        payload: c.command_stream,
        weights: c.weights,
    }
}

/// The bytes of `io/input_K.npy` and `io/output_K.npy` of a fixture.
fn io(model: &str, k: usize) -> (Vec<u8>, Vec<u8>) {
    let dir = fixtures_dir().join(model).join("io");
    let read = |name: String| {
        Value::read_npy(&dir.join(&name))
            .unwrap_or_else(|e| panic!("{model}/{name}: {e}"))
            .data
            .to_le_bytes()
    };
    (
        read(format!("input_{k}.npy")),
        read(format!("output_{k}.npy")),
    )
}

/// A CPU address range the NPU sees at a physical address.
struct Mapping {
    cpu: usize,
    len: usize,
    phys: u64,
    /// SRAM (kept in sync by the cache hooks) rather than flash (the same bytes).
    sram: bool,
}

/// The modelled system: the register file over the NPU's physical memory, the address map,
/// and how time passes while the driver waits.
struct Soc<'m> {
    regs: RefCell<RegisterFile<'m>>,
    map: Vec<Mapping>,
    /// Commands the NPU executes per `Platform::idle` (the model's auto-run off), if any.
    step: Option<u64>,
    /// Deliver the NPU interrupt to this state from `Platform::idle`.
    irq: Option<&'static IrqState>,
    /// Copy on clean/invalidate (false models a driver or platform that forgot them).
    sync_caches: bool,
    cleans: Cell<usize>,
    invalidates: Cell<usize>,
}

impl Soc<'_> {
    fn find(&self, cpu: usize, len: usize) -> Option<(&Mapping, u64)> {
        self.map.iter().find_map(|m| {
            let off = cpu.checked_sub(m.cpu)?;
            (off.checked_add(len)? <= m.len).then_some((m, m.phys + off as u64))
        })
    }
}

/// The driver's register window: the model's registers.
struct Regs<'s, 'm>(&'s Soc<'m>);

impl Mmio for Regs<'_, '_> {
    fn read32(&mut self, off: u32) -> u32 {
        self.0.regs.borrow_mut().read32(off)
    }
    fn write32(&mut self, off: u32, value: u32) {
        self.0.regs.borrow_mut().write32(off, value)
    }
}

/// The driver's platform hooks: address map, cache maintenance, passing time.
struct Hooks<'s, 'm>(&'s Soc<'m>);

impl Platform for Hooks<'_, '_> {
    fn npu_address(&mut self, cpu: usize, len: usize) -> Option<u64> {
        self.0.find(cpu, len).map(|(_, phys)| phys)
    }

    fn clean(&mut self, data: &[u8]) {
        let soc = self.0;
        soc.cleans.set(soc.cleans.get() + 1);
        if let Some((m, phys)) = soc.find(data.as_ptr() as usize, data.len())
            && m.sram
            && soc.sync_caches
        {
            soc.regs
                .borrow_mut()
                .memory_mut()
                .write(phys, data)
                .expect("SRAM window");
        }
    }

    fn invalidate(&mut self, data: &mut [u8]) {
        let soc = self.0;
        soc.invalidates.set(soc.invalidates.get() + 1);
        if let Some((m, phys)) = soc.find(data.as_ptr() as usize, data.len())
            && m.sram
            && soc.sync_caches
        {
            let regs = soc.regs.borrow();
            data.copy_from_slice(regs.memory().read(phys, data.len()).expect("SRAM window"));
        }
    }

    fn idle(&mut self) {
        let soc = self.0;
        let mut regs = soc.regs.borrow_mut();
        if let Some(n) = soc.step {
            regs.step(n);
        }
        if let Some(irq) = soc.irq
            && regs.irq()
        {
            irq.on_interrupt(&mut *regs);
        }
    }
}

type Driver<'s, 'm> = EthosU<Regs<'s, 'm>, Hooks<'s, 'm>>;

/// How to build the system for one test.
struct Rig {
    accel: &'static AcceleratorConfig,
    step: Option<u64>,
    irq: bool,
    sync_caches: bool,
    max_polls: u32,
}

impl Default for Rig {
    fn default() -> Self {
        Rig {
            accel: &ETHOS_U55_128,
            step: None,
            irq: false,
            sync_caches: true,
            max_polls: 10_000,
        }
    }
}

/// Builds the system (the CPU arena at `cpu_arena` = (address, length) mapped to the SRAM
/// window), a driver over it, and hands both to `f`.
fn with_driver<R>(
    payload: &[u8],
    weights: &[u8],
    cpu_arena: (usize, usize),
    rig: Rig,
    f: impl FnOnce(&mut Driver<'_, '_>, &Soc<'_>) -> R,
) -> R {
    // Garbage in the NPU's SRAM: only a cleaned input can reach the NPU.
    let mut sram = vec![0xa5u8; cpu_arena.1];
    let mut mem = SystemMemory::new();
    mem.map(QUEUE_AT, payload)
        .map(WEIGHTS_AT, weights)
        .map_mut(SRAM_AT, &mut sram);
    let mut regs = RegisterFile::new(rig.accel, mem);
    regs.set_auto_run(rig.step.is_none());
    let mapping = |(cpu, len): (usize, usize), phys, sram| Mapping {
        cpu,
        len,
        phys,
        sram,
    };
    let soc = Soc {
        regs: RefCell::new(regs),
        map: vec![
            mapping(range(payload), QUEUE_AT, false),
            mapping(range(weights), WEIGHTS_AT, false),
            mapping(cpu_arena, SRAM_AT, true),
        ],
        step: rig.step,
        irq: rig.irq.then(|| &*Box::leak(Box::new(IrqState::new()))),
        sync_caches: rig.sync_caches,
        cleans: Cell::new(0),
        invalidates: Cell::new(0),
    };
    let mut npu = EthosU::with_mmio(Regs(&soc))
        .with_platform(Hooks(&soc))
        .with_settings(Settings {
            max_polls: rig.max_polls,
            ..Settings::DEFAULT
        })
        .with_pmu(PmuConfig::DEFAULT);
    if let Some(irq) = soc.irq {
        npu = npu.with_irq(irq);
    }
    f(&mut npu, &soc)
}

/// Runs fixture case `k` of `m` through the driver: writes the input into the CPU arena, runs,
/// returns the output bytes the CPU sees.
fn infer(
    npu: &mut Driver<'_, '_>,
    m: &Model,
    arena: &mut [u8],
    input: &[u8],
    out_len: usize,
) -> Result<Vec<u8>, Error> {
    arena.fill(0);
    arena[m.input_at..m.input_at + input.len()].copy_from_slice(input);
    npu.run_job(Job {
        command_stream: &m.payload,
        weights: &m.weights,
        arena: &mut *arena,
        fast_scratch: &mut [],
        arena_needed: m.arena_size,
        fast_scratch_needed: 0,
    })?;
    Ok(arena[m.output_at..m.output_at + out_len].to_vec())
}

/// (address, length) of a buffer.
fn range(data: &[u8]) -> (usize, usize) {
    (data.as_ptr() as usize, data.len())
}

/// Runs the three fixture cases of `model` compiled as `m` through the driver and checks every
/// output byte; returns the PMU report of the last run.
fn check_model(model: &str, m: &Model, rig: Rig) -> npu_rt::ethos_u::driver::PmuReport {
    let mut arena = vec![0u8; m.arena_size];
    with_driver(&m.payload, &m.weights, range(&arena), rig, |npu, soc| {
        for k in 0..3 {
            let (input, want) = io(model, k);
            let got = infer(npu, m, &mut arena, &input, want.len())
                .unwrap_or_else(|e| panic!("{model} case {k}: {e}"));
            let diff = got.iter().zip(&want).filter(|(a, b)| a != b).count();
            assert!(
                diff == 0,
                "{model} case {k}: {diff} of {} output bytes differ",
                want.len()
            );
        }
        // Every run cleaned the payload, weights, arena and (empty) fast scratch, and
        // invalidated the arena and fast scratch.
        assert_eq!((soc.cleans.get(), soc.invalidates.get()), (12, 6));
        *npu.pmu_report().expect("PMU report")
    })
}

#[test]
fn vela_mv2_through_the_driver_is_bit_exact() {
    let m = vela("mv2_224");
    let report = check_model("mv2_224", &m, Rig::default());
    println!("{report}");
    assert!(report.cycles.is_some_and(|c| c > 0));
    assert!(report.count(PmuEvent::MacActive).is_some_and(|c| c > 0));
}

#[test]
fn our_mv2_through_the_driver_is_bit_exact() {
    let m = ours("mv2_224");
    check_model("mv2_224", &m, Rig::default());
}

#[test]
fn conv1x1_through_the_driver_is_bit_exact() {
    // mv2's output is the same for the three fixture inputs; this one's is not.
    check_model("op_conv1x1", &vela("op_conv1x1"), Rig::default());
    check_model("op_conv1x1", &ours("op_conv1x1"), Rig::default());
}

#[test]
fn stepping_npu_with_polling_and_with_the_interrupt_hook() {
    let m = vela("op_conv1x1");
    // One command per look at STATUS: the driver really waits for the NPU.
    check_model(
        "op_conv1x1",
        &m,
        Rig {
            step: Some(1),
            ..Rig::default()
        },
    );
    check_model(
        "op_conv1x1",
        &m,
        Rig {
            step: Some(1),
            irq: true,
            ..Rig::default()
        },
    );
    check_model(
        "op_conv1x1",
        &m,
        Rig {
            irq: true,
            ..Rig::default()
        },
    );
}

npu_macros::include_model!(
    "../fixtures/op_conv1x1/op_conv1x1.tflite",
    target = "ethos-u55-128"
);

#[test]
fn generated_run_function_on_the_driver() {
    let mut arena = Box::new(op_conv1x1::Arena::new());
    let weights: &[u8] = &op_conv1x1::WEIGHTS.0;
    let payload: &[u8] = &op_conv1x1::COMMAND_STREAM.0;
    with_driver(
        payload,
        weights,
        range(&arena.0),
        Rig::default(),
        |npu, _| {
            for k in 0..3 {
                let (input, want) = io("op_conv1x1", k);
                let mut x = op_conv1x1::Input::zeroed();
                for (d, s) in x
                    .serving_default_keras_tensor_161_0_flat_mut()
                    .iter_mut()
                    .zip(&input)
                {
                    *d = *s as i8;
                }
                let out = op_conv1x1::run(npu, &mut arena, &x).expect("run");
                let got: Vec<u8> = out
                    .stateful_partitioned_call_1_0_flat()
                    .iter()
                    .map(|&v| v as u8)
                    .collect();
                assert_eq!(got, want, "case {k}");
            }
        },
    );
}
