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

use npu_build::value::Value;
use npu_cli::sim::CompiledDir;
use npu_rt::Job;
use npu_rt::error::Error;
use npu_rt::ethos_u::config::{
    AcceleratorConfig, ETHOS_U55_64, ETHOS_U55_128, ETHOS_U55_256, ETHOS_U85_128, ETHOS_U85_256,
    U85_ALL, U85Config,
};
use npu_rt::ethos_u::driver::QUEUE_REGION;
use npu_rt::ethos_u::driver::{EthosU, IrqState, Mmio, Platform, PmuConfig, Settings};
use npu_rt::ethos_u::regs::ctrl::{Status, offset};
use npu_rt::ethos_u::regs::{DmaFaultChannel, PmuEvent};
use npu_rt::sim::regfile::{Fault, RegisterFile, SystemMemory};
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
    vela_for(model, "ethos-u55-128")
}

/// Vela's compiled model of a fixture for the accelerator `accel` (Vela's name).
fn vela_for(model: &str, accel: &str) -> Model {
    let dir = fixtures_dir().join(model).join("vela").join(accel);
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
    /// Host a virtual Ethos-U85 of this configuration instead of `accel`.
    u85: Option<&'static U85Config>,
    step: Option<u64>,
    irq: bool,
    sync_caches: bool,
    max_polls: u32,
}

impl Default for Rig {
    fn default() -> Self {
        Rig {
            accel: &ETHOS_U55_128,
            u85: None,
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
    let mut regs = match rig.u85 {
        Some(config) => RegisterFile::new_u85(config, mem),
        None => RegisterFile::new(rig.accel, mem),
    };
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

// Faults. Each must come back as its exact `npu_rt::Error` (with the raw STATUS where the
// NPU reported it), leave the NPU reset (STATUS clear, queue registers back at their reset
// values) and let the next good run on the same driver give the reference bytes again.

/// `STATUS` of an NPU stopped by a bus error on AXI interface 0, channel `channel`.
fn bus_error_status(channel: DmaFaultChannel) -> u32 {
    Status(Status::BUS_STATUS | Status::IRQ_RAISED)
        .with_fault(0, channel as u32)
        .0
}

/// `STATUS` of an NPU stopped by a command parse error (bits 4 and 1).
const PARSE_ERROR_STATUS: u32 = 0x12;

/// Asserts that the NPU was reset after a failed run: nothing running, no interrupt, no error
/// bits, and the queue registers the run programmed back at zero.
fn assert_reset(npu: &mut Driver<'_, '_>, what: &str) {
    let regs = npu.regs();
    assert_eq!(
        regs.read32(offset::STATUS),
        0,
        "{what}: STATUS after the fault"
    );
    assert_eq!(
        regs.read32(offset::QSIZE),
        0,
        "{what}: QSIZE after the fault"
    );
    assert_eq!(
        regs.read32(offset::QBASE),
        0,
        "{what}: QBASE after the fault"
    );
}

/// Runs op_conv1x1 case 1 (whose output differs from cases 0 and 2) and checks every byte.
fn assert_good_run(npu: &mut Driver<'_, '_>, m: &Model, arena: &mut [u8], what: &str) {
    let (input, want) = io("op_conv1x1", 1);
    let got = infer(npu, m, arena, &input, want.len())
        .unwrap_or_else(|e| panic!("{what}: good run after the fault: {e}"));
    assert!(got == want, "{what}: good run after the fault differs");
}

/// Injects `fault` into op_conv1x1's run on a `rig` system, expects `want`, then checks the
/// reset and a good run.
fn fault_case(what: &str, fault: Option<Fault>, rig: Rig, want: Error) {
    fault_case_on("ethos-u55-128", what, fault, rig, want)
}

/// [`fault_case`] with op_conv1x1 compiled by Vela for `accel`.
fn fault_case_on(accel: &str, what: &str, fault: Option<Fault>, rig: Rig, want: Error) {
    let m = vela_for("op_conv1x1", accel);
    let mut arena = vec![0u8; m.arena_size];
    with_driver(&m.payload, &m.weights, range(&arena), rig, |npu, soc| {
        if let Some(f) = fault {
            soc.regs.borrow_mut().inject(f);
        }
        let (input, want_out) = io("op_conv1x1", 0);
        let got = infer(npu, &m, &mut arena, &input, want_out.len());
        assert_eq!(got.err(), Some(want), "{what}");
        // The failed run still read the PMU and invalidated the arena.
        assert!(npu.pmu_report().is_some(), "{what}: PMU report");
        assert_eq!(soc.invalidates.get(), 2, "{what}: invalidates");
        assert_reset(npu, what);
        assert_good_run(npu, &m, &mut arena, what);
    });
}

#[test]
fn injected_bus_error_is_a_bus_error_with_the_raw_status() {
    for (rig, how) in [
        (Rig::default(), "polling"),
        (
            Rig {
                step: Some(2),
                ..Rig::default()
            },
            "stepping, polling",
        ),
        (
            Rig {
                step: Some(2),
                irq: true,
                ..Rig::default()
            },
            "stepping, interrupt",
        ),
    ] {
        fault_case(
            &format!("bus error ({how})"),
            Some(Fault::BusError { after_commands: 7 }),
            rig,
            Error::BusError {
                status: bus_error_status(DmaFaultChannel::IfmRead),
            },
        );
    }
    // STATUS 0x1006: IFM read channel (1) in bits 12..15, bus error (bit 2), IRQ (bit 1).
    assert_eq!(bus_error_status(DmaFaultChannel::IfmRead), 0x1006);
}

#[test]
fn injected_command_parse_error_is_a_command_error() {
    for (rig, how) in [
        (Rig::default(), "polling"),
        (
            Rig {
                step: Some(1),
                irq: true,
                ..Rig::default()
            },
            "stepping, interrupt",
        ),
    ] {
        fault_case(
            &format!("parse error ({how})"),
            Some(Fault::CmdParseError { after_commands: 3 }),
            rig,
            Error::CommandError {
                status: PARSE_ERROR_STATUS,
            },
        );
    }
}

#[test]
fn corrupted_command_word_is_a_command_error() {
    // Not injected: a command word with an opcode that does not exist (cmd0 0x3ff) in the
    // payload. The first command stream of Vela's payload starts after the 32-byte COP1
    // header (COP1 magic, OPTIMIZER_CONFIG, COMMAND_STREAM action).
    let mut m = vela("op_conv1x1");
    let good = m.payload.clone();
    let at = 32 + 4 * 5;
    m.payload[at..at + 4].copy_from_slice(&0x0000_03ffu32.to_le_bytes());
    let mut arena = vec![0u8; m.arena_size];
    with_driver(
        &m.payload,
        &m.weights,
        range(&arena),
        Rig::default(),
        |npu, _| {
            let (input, want) = io("op_conv1x1", 0);
            let got = infer(npu, &m, &mut arena, &input, want.len());
            assert_eq!(
                got.err(),
                Some(Error::CommandError {
                    status: PARSE_ERROR_STATUS
                })
            );
            assert_reset(npu, "corrupted word");
        },
    );
    // The same payload without the corruption runs.
    m.payload = good;
    check_model("op_conv1x1", &m, Rig::default());
}

#[test]
fn addressing_past_the_npu_memory_is_a_bus_error() {
    // A caller that under-states the arena (arena_needed 5120 of the 6144 the stream uses):
    // the NPU's SRAM ends at 5120 and the IFM (at 4096..6144) read runs off it. Nothing is
    // injected; the model reports the out-of-bounds read as hardware does.
    let m = vela("op_conv1x1");
    let short = 5120;
    let mut arena = vec![0u8; m.arena_size];
    let (input, _) = io("op_conv1x1", 0);
    arena[m.input_at..m.input_at + input.len()].copy_from_slice(&input);
    let cpu_arena = (arena.as_ptr() as usize, short);
    with_driver(
        &m.payload,
        &m.weights,
        cpu_arena,
        Rig::default(),
        |npu, _| {
            let err = npu.run_job(Job {
                command_stream: &m.payload,
                weights: &m.weights,
                arena: &mut arena[..short],
                fast_scratch: &mut [],
                arena_needed: short,
                fast_scratch_needed: 0,
            });
            assert_eq!(
                err,
                Err(Error::BusError {
                    status: bus_error_status(DmaFaultChannel::IfmRead)
                })
            );
            assert_reset(npu, "out of bounds");
        },
    );
}

#[test]
fn hang_exceeding_the_wait_bound_is_a_timeout() {
    // The NPU stops making progress while RUNNING (STATUS.state set, no IRQ): polling and
    // interrupt mode both give up after max_polls looks.
    for (rig, how) in [
        (
            Rig {
                max_polls: 50,
                ..Rig::default()
            },
            "polling",
        ),
        (
            Rig {
                // Enough looks for the good run (8 commands each), not for a hang.
                max_polls: 50,
                step: Some(8),
                irq: true,
                ..Rig::default()
            },
            "stepping, interrupt",
        ),
    ] {
        fault_case(
            &format!("hang ({how})"),
            Some(Fault::Hang { after_commands: 4 }),
            rig,
            Error::Timeout {
                status: Status::STATE,
            },
        );
    }
    // No fault, just an NPU slower than the bound: one command per look, 5 looks, while
    // the stream has dozens of commands.
    let m = vela("op_conv1x1");
    let mut arena = vec![0u8; m.arena_size];
    let rig = Rig {
        step: Some(1),
        max_polls: 5,
        ..Rig::default()
    };
    with_driver(&m.payload, &m.weights, range(&arena), rig, |npu, soc| {
        let (input, want) = io("op_conv1x1", 0);
        assert_eq!(
            infer(npu, &m, &mut arena, &input, want.len()).err(),
            Some(Error::Timeout {
                status: Status::STATE
            })
        );
        assert_reset(npu, "slow NPU");
        // The reset stopped it: more time passing does not run it on.
        assert_eq!(soc.regs.borrow_mut().step(u64::MAX), 0);
    });
}

#[test]
fn mac_count_mismatch_is_a_config_error() {
    // A stream compiled for Ethos-U55-128 on an Ethos-U55-64. The CONFIG words are the ones
    // Vela wrote into its payloads for the two (the fixture bytes): 128 MACs (log2 7) and
    // 24 KiB SHRAM vs 64 MACs (log2 6) and 16 KiB.
    let m128 = vela("op_conv1x1");
    let m64 = vela_for("op_conv1x1", "ethos-u55-64");
    assert_eq!(m128.payload[8..12], 0x0000_1807u32.to_le_bytes());
    assert_eq!(m64.payload[8..12], 0x0000_1006u32.to_le_bytes());
    let mut arena = vec![0u8; m64.arena_size.max(m128.arena_size)];
    let rig = Rig {
        accel: &ETHOS_U55_64,
        ..Rig::default()
    };
    with_driver(
        &m64.payload,
        &m64.weights,
        range(&arena),
        rig,
        |npu, soc| {
            let (input, want) = io("op_conv1x1", 0);
            assert_eq!(
                infer(npu, &m128, &mut arena, &input, want.len()).err(),
                Some(Error::ConfigMismatch {
                    expected: 0x0000_1807,
                    found: 0x0000_1006
                })
            );
            assert!(soc.regs.borrow().stats().ops.is_empty(), "never started");
            assert_reset(npu, "MAC mismatch");
            // The stream built for this NPU runs on the same driver.
            assert_good_run(npu, &m64, &mut arena, "MAC mismatch");
        },
    );
}

#[test]
fn product_mismatch_is_a_config_error() {
    // An Ethos-U65-256 stream on an Ethos-U55-256: same MAC count and SHRAM, other product
    // (CONFIG bits 28..31).
    let u65 = vela_for("op_conv1x1", "ethos-u65-256");
    let u55 = vela_for("op_conv1x1", "ethos-u55-256");
    assert_eq!(u65.payload[8..12], 0x1000_3008u32.to_le_bytes());
    assert_eq!(u55.payload[8..12], 0x0000_3008u32.to_le_bytes());
    let mut arena = vec![0u8; u55.arena_size.max(u65.arena_size)];
    let rig = Rig {
        accel: &ETHOS_U55_256,
        ..Rig::default()
    };
    with_driver(
        &u55.payload,
        &u55.weights,
        range(&arena),
        rig,
        |npu, soc| {
            let (input, want) = io("op_conv1x1", 0);
            assert_eq!(
                infer(npu, &u65, &mut arena, &input, want.len()).err(),
                Some(Error::ConfigMismatch {
                    expected: 0x1000_3008,
                    found: 0x0000_3008
                })
            );
            assert!(soc.regs.borrow().stats().ops.is_empty(), "never started");
            assert_good_run(npu, &u55, &mut arena, "product mismatch");
        },
    );
}

#[test]
fn arena_too_small_is_refused_before_the_npu_runs() {
    let m = vela("op_conv1x1");
    let mut arena = vec![0u8; m.arena_size];
    with_driver(
        &m.payload,
        &m.weights,
        range(&arena),
        Rig::default(),
        |npu, soc| {
            let given = m.arena_size - 16;
            let err = npu.run_job(Job {
                command_stream: &m.payload,
                weights: &m.weights,
                arena: &mut arena[..given],
                fast_scratch: &mut [],
                arena_needed: m.arena_size,
                fast_scratch_needed: 0,
            });
            assert_eq!(
                err,
                Err(Error::ArenaTooSmall {
                    needed: 6144,
                    given: 6128
                })
            );
            // Refused before any reset, cache maintenance or start.
            assert_eq!((soc.cleans.get(), soc.invalidates.get()), (0, 0));
            assert!(soc.regs.borrow().stats().ops.is_empty());
            assert_good_run(npu, &m, &mut arena, "arena too small");
        },
    );
}

#[test]
fn fast_scratch_too_small_is_refused_before_the_npu_runs() {
    let m = vela("op_conv1x1");
    let mut arena = vec![0u8; m.arena_size];
    let mut scratch = [0u8; 128];
    with_driver(
        &m.payload,
        &m.weights,
        range(&arena),
        Rig::default(),
        |npu, soc| {
            for (given, needed) in [(0, 64), (128, 256)] {
                let err = npu.run_job(Job {
                    command_stream: &m.payload,
                    weights: &m.weights,
                    arena: &mut arena,
                    fast_scratch: &mut scratch[..given],
                    arena_needed: m.arena_size,
                    fast_scratch_needed: needed,
                });
                assert_eq!(err, Err(Error::ArenaTooSmall { needed, given }));
            }
            assert_eq!((soc.cleans.get(), soc.invalidates.get()), (0, 0));
            assert!(soc.regs.borrow().stats().ops.is_empty());
            assert_good_run(npu, &m, &mut arena, "fast scratch too small");
        },
    );
}

/// Which buffer of a job lives outside the memory the NPU sees.
#[derive(Clone, Copy, Debug)]
enum Unmapped {
    Payload,
    Weights,
    Arena,
    FastScratch,
}

#[test]
fn buffers_the_npu_cannot_reach_are_refused() {
    // The system maps the payload, the weights and the arena; copies of them elsewhere in CPU
    // memory (a TCM, say) have no NPU address.
    let m = vela("op_conv1x1");
    let mut arena = vec![0u8; m.arena_size];
    let mut other_arena = vec![0u8; m.arena_size];
    let other_payload = m.payload.clone();
    let other_weights = m.weights.clone();
    let mut scratch = [0u8; 64];
    with_driver(
        &m.payload,
        &m.weights,
        range(&arena),
        Rig::default(),
        |npu, soc| {
            for which in [
                Unmapped::Payload,
                Unmapped::Weights,
                Unmapped::Arena,
                Unmapped::FastScratch,
            ] {
                // The queue starts after the payload's 32-byte COP1 header.
                let (region, cpu_address) = match which {
                    Unmapped::Payload => (QUEUE_REGION, other_payload.as_ptr() as usize + 32),
                    Unmapped::Weights => (0, other_weights.as_ptr() as usize),
                    Unmapped::Arena => (1, other_arena.as_ptr() as usize),
                    Unmapped::FastScratch => (2, scratch.as_ptr() as usize),
                };
                let err = npu.run_job(Job {
                    command_stream: match which {
                        Unmapped::Payload => &other_payload,
                        _ => &m.payload,
                    },
                    weights: match which {
                        Unmapped::Weights => &other_weights,
                        _ => &m.weights,
                    },
                    arena: match which {
                        Unmapped::Arena => &mut other_arena,
                        _ => &mut arena,
                    },
                    fast_scratch: match which {
                        Unmapped::FastScratch => &mut scratch,
                        _ => &mut [],
                    },
                    arena_needed: m.arena_size,
                    fast_scratch_needed: 0,
                });
                assert_eq!(
                    err,
                    Err(Error::NotNpuAddressable {
                        region,
                        cpu_address
                    }),
                    "{which:?}"
                );
            }
            assert!(soc.regs.borrow().stats().ops.is_empty(), "never started");
            assert_good_run(npu, &m, &mut arena, "unreachable buffers");
        },
    );
}

// Ethos-U85: the same driver on a register model hosting the virtual U85. The driver finds
// the family in the payload's OPTIMIZER_CONFIG (product 2) and programs the U85 register map
// (MEM_ATTR, AXI_SRAM/AXI_EXT, the PMU at +0x1000).

/// A rig hosting the virtual Ethos-U85 of `config`.
fn u85_rig(config: &'static U85Config) -> Rig {
    Rig {
        u85: Some(config),
        ..Rig::default()
    }
}

#[test]
fn u85_conv1x1_through_the_driver_is_bit_exact_on_every_configuration() {
    let mut ran = 0;
    for config in U85_ALL {
        // Vela's fixtures cover ethos-u85-128, -256, -512 and -2048.
        let dir = fixtures_dir().join("op_conv1x1/vela").join(config.name);
        if !dir.exists() {
            continue;
        }
        ran += 1;
        let m = vela_for("op_conv1x1", config.name);
        let report = check_model("op_conv1x1", &m, u85_rig(config));
        assert!(
            report.cycles.is_some_and(|c| c > 0),
            "{}: cycles",
            config.name
        );
        assert!(
            report.count(PmuEvent::MacActive).is_some_and(|c| c > 0),
            "{}: MAC active",
            config.name
        );
    }
    assert_eq!(ran, 4);
}

#[test]
fn u85_mv2_through_the_driver_is_bit_exact() {
    let m = vela_for("mv2_224", "ethos-u85-256");
    let report = check_model("mv2_224", &m, u85_rig(&ETHOS_U85_256));
    println!("{report}");
    assert!(report.count(PmuEvent::NpuActive).is_some_and(|c| c > 0));
}

#[test]
fn u85_reads_back_as_a_u85() {
    let m = vela_for("op_conv1x1", "ethos-u85-256");
    let mut arena = vec![0u8; m.arena_size];
    with_driver(
        &m.payload,
        &m.weights,
        range(&arena),
        u85_rig(&ETHOS_U85_256),
        |npu, _| {
            // The CONFIG and ID words Vela wrote into the payload.
            let (id, config) = npu.hardware();
            assert_eq!(m.payload[8..12], config.0.to_le_bytes());
            assert_eq!(m.payload[12..16], id.0.to_le_bytes());
            assert_eq!((config.0, id.0), (0x2000_0118, 0x2000_7000));
            assert_good_run(npu, &m, &mut arena, "U85");
        },
    );
}

#[test]
fn u85_stepping_npu_with_polling_and_with_the_interrupt_hook() {
    let m = vela_for("op_conv1x1", "ethos-u85-256");
    for (step, irq) in [(Some(1), false), (Some(1), true), (None, true)] {
        check_model(
            "op_conv1x1",
            &m,
            Rig {
                step,
                irq,
                ..u85_rig(&ETHOS_U85_256)
            },
        );
    }
}

#[test]
fn u85_injected_faults() {
    let rigs = || {
        [
            (u85_rig(&ETHOS_U85_256), "polling"),
            (
                Rig {
                    step: Some(2),
                    irq: true,
                    ..u85_rig(&ETHOS_U85_256)
                },
                "stepping, interrupt",
            ),
        ]
    };
    for (rig, how) in rigs() {
        fault_case_on(
            "ethos-u85-256",
            &format!("U85 bus error ({how})"),
            Some(Fault::BusError { after_commands: 7 }),
            rig,
            Error::BusError {
                status: bus_error_status(DmaFaultChannel::IfmRead),
            },
        );
    }
    for (rig, how) in rigs() {
        fault_case_on(
            "ethos-u85-256",
            &format!("U85 parse error ({how})"),
            Some(Fault::CmdParseError { after_commands: 3 }),
            rig,
            Error::CommandError {
                status: PARSE_ERROR_STATUS,
            },
        );
    }
    for (rig, how) in rigs() {
        fault_case_on(
            "ethos-u85-256",
            &format!("U85 hang ({how})"),
            Some(Fault::Hang { after_commands: 4 }),
            Rig {
                max_polls: 50,
                step: rig.step.map(|_| 16),
                ..rig
            },
            Error::Timeout {
                status: Status::STATE,
            },
        );
    }
}

#[test]
fn u85_corrupted_command_word_is_a_command_error() {
    // cmd0 0x3ff is no U85 opcode either.
    let mut m = vela_for("op_conv1x1", "ethos-u85-256");
    let at = 32 + 4 * 5;
    m.payload[at..at + 4].copy_from_slice(&0x0000_03ffu32.to_le_bytes());
    let mut arena = vec![0u8; m.arena_size];
    with_driver(
        &m.payload,
        &m.weights,
        range(&arena),
        u85_rig(&ETHOS_U85_256),
        |npu, _| {
            let (input, want) = io("op_conv1x1", 0);
            let got = infer(npu, &m, &mut arena, &input, want.len());
            assert_eq!(
                got.err(),
                Some(Error::CommandError {
                    status: PARSE_ERROR_STATUS
                })
            );
            assert_reset(npu, "U85 corrupted word");
        },
    );
}

#[test]
fn u85_addressing_past_the_npu_memory_is_a_bus_error() {
    // As for U55: the IFM (4096..6144) runs off an SRAM window cut at 5120.
    let m = vela_for("op_conv1x1", "ethos-u85-256");
    assert_eq!((m.input_at, m.arena_size), (4096, 6144));
    let short = 5120;
    let mut arena = vec![0u8; m.arena_size];
    let cpu_arena = (arena.as_ptr() as usize, short);
    with_driver(
        &m.payload,
        &m.weights,
        cpu_arena,
        u85_rig(&ETHOS_U85_256),
        |npu, _| {
            let err = npu.run_job(Job {
                command_stream: &m.payload,
                weights: &m.weights,
                arena: &mut arena[..short],
                fast_scratch: &mut [],
                arena_needed: short,
                fast_scratch_needed: 0,
            });
            assert_eq!(
                err,
                Err(Error::BusError {
                    status: bus_error_status(DmaFaultChannel::IfmRead)
                })
            );
            assert_reset(npu, "U85 out of bounds");
        },
    );
}

#[test]
fn u85_config_mismatches_are_config_errors() {
    let u85_256 = vela_for("op_conv1x1", "ethos-u85-256");
    let u85_128 = vela_for("op_conv1x1", "ethos-u85-128");
    let u55 = vela("op_conv1x1");
    assert_eq!(u85_128.payload[8..12], 0x2000_0117u32.to_le_bytes());
    let size = [&u85_256, &u85_128, &u55]
        .iter()
        .map(|m| m.arena_size)
        .max()
        .unwrap();
    let mut arena = vec![0u8; size];
    // On a U85-256: a U85-128 stream (MACs) and a U55-128 stream (product).
    with_driver(
        &u85_256.payload,
        &u85_256.weights,
        range(&arena),
        u85_rig(&ETHOS_U85_256),
        |npu, soc| {
            let (input, want) = io("op_conv1x1", 0);
            for (m, expected) in [(&u85_128, 0x2000_0117), (&u55, 0x0000_1807)] {
                assert_eq!(
                    infer(npu, m, &mut arena, &input, want.len()).err(),
                    Some(Error::ConfigMismatch {
                        expected,
                        found: 0x2000_0118
                    })
                );
            }
            assert!(soc.regs.borrow().stats().ops.is_empty(), "never started");
            assert_good_run(npu, &u85_256, &mut arena, "U85 mismatch");
        },
    );
    // On a U55-128: the U85-128 stream (same MACs, other product).
    with_driver(
        &u55.payload,
        &u55.weights,
        range(&arena),
        Rig::default(),
        |npu, soc| {
            let (input, want) = io("op_conv1x1", 0);
            assert_eq!(
                infer(npu, &u85_128, &mut arena, &input, want.len()).err(),
                Some(Error::ConfigMismatch {
                    expected: 0x2000_0117,
                    found: 0x0000_1807
                })
            );
            assert!(soc.regs.borrow().stats().ops.is_empty(), "never started");
            assert_good_run(npu, &u55, &mut arena, "U85 stream on a U55");
        },
    );
    // And the U85-128 stream runs on a U85-128.
    check_model("op_conv1x1", &u85_128, u85_rig(&ETHOS_U85_128));
}

#[test]
fn u85_register_model_answers_at_the_u85_offsets() {
    use npu_rt::ethos_u::regs::u85::ctrl::{self as u85ctrl, offset as u85off};
    let mut regs = RegisterFile::new_u85(&ETHOS_U85_256, SystemMemory::new());
    assert!(regs.is_u85());
    assert_eq!(regs.read32(offset::ID), u85ctrl::ID);
    assert_eq!(regs.read32(offset::CONFIG), 0x2000_0118);
    // MEM_ATTR0..3, AXI_SRAM, AXI_EXT read back.
    for (i, v) in [0, 0, 4, 4].into_iter().enumerate() {
        regs.write32(u85off::MEM_ATTR0 + 4 * i as u32, v);
    }
    regs.write32(u85off::AXI_SRAM, u85ctrl::axi_limits(64, 32, 2));
    regs.write32(u85off::AXI_EXT, u85ctrl::axi_limits(16, 8, 1));
    assert_eq!(regs.read32(u85off::MEM_ATTR0 + 8), 4);
    assert_eq!(regs.read32(u85off::AXI_SRAM), 0x0002_1f3f);
    assert_eq!(regs.read32(u85off::AXI_EXT), 0x0001_070f);
    // The PMU: eight event counters at +0x1000, nothing at the U55/U65 place.
    assert_eq!((regs.read32(u85off::PMCR) >> 11) & 0x1f, 8);
    assert_eq!(regs.read32(offset::PMCR), 0);
    regs.write32(u85off::PMEVTYPER0 + 4 * 7, PmuEvent::Cycle.bits() as u32);
    assert_eq!(
        regs.read32(u85off::PMEVTYPER0 + 4 * 7),
        PmuEvent::Cycle.bits() as u32
    );
    regs.write32(offset::PMEVTYPER0, 0x23);
    assert_eq!(
        regs.read32(u85off::PMEVTYPER0),
        0,
        "the U55 offset is not the U85 PMU"
    );
    regs.write32(u85off::PMCNTENSET, u32::MAX);
    assert_eq!(regs.read32(u85off::PMCNTENSET), 0x8000_00ff);
    // A U55/U65 model keeps four counters at the U55/U65 offsets.
    let mut u55 = RegisterFile::new(&ETHOS_U55_128, SystemMemory::new());
    assert!(!u55.is_u85());
    assert_eq!((u55.read32(offset::PMCR) >> 11) & 0x1f, 4);
    u55.write32(offset::PMCNTENSET, u32::MAX);
    assert_eq!(u55.read32(offset::PMCNTENSET), 0x8000_000f);
    assert_eq!(u55.read32(u85off::PMCR), 0);
}
