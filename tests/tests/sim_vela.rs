//! The virtual NPU against Arm's compiler: Vela's command streams for every fixture and every
//! accelerator configuration, run on the simulator, must reproduce TFLite's reference outputs
//! byte for byte. Also checks the disassembler against Vela's own `registers.txt` dumps and that
//! malformed streams fail with the offset of the command at fault.

use std::path::{Path, PathBuf};

use npu_build::value::Value;
use npu_cli::sim::CompiledDir;
use npu_rt::ethos_u::config::{AcceleratorConfig, ETHOS_U55_128};
use npu_rt::ethos_u::cop::Cop1;
use npu_rt::ethos_u::regs::disasm::write_line;
use npu_rt::sim::{Regions, SimErrorKind, VirtualNpu};
use npu_tests::fixtures_dir;

/// Every `fixtures/<model>/vela/<accel>` directory of a U55/U65 configuration, as
/// `model/accel` and the directory, sorted.
fn vela_dirs() -> Vec<(String, PathBuf)> {
    npu_tests::vela::u55_u65_dirs()
        .into_iter()
        .map(|(model, accel, dir)| (format!("{model}/{accel}"), dir))
        .collect()
}

/// The inputs of sample `k`: `input_k.npy`, or `input_k_0.npy, input_k_1.npy, ...`.
fn inputs(io: &Path, k: usize) -> Vec<Value> {
    let single = io.join(format!("input_{k}.npy"));
    if single.exists() {
        return vec![Value::read_npy(&single).expect("input")];
    }
    let mut v = Vec::new();
    for j in 0.. {
        let p = io.join(format!("input_{k}_{j}.npy"));
        if !p.exists() {
            break;
        }
        v.push(Value::read_npy(&p).expect("input"));
    }
    assert!(
        !v.is_empty(),
        "no inputs for sample {k} in {}",
        io.display()
    );
    v
}

/// The reference outputs of sample `k`: `output_k.npy`, or `output_k_0.npy, ...` (SPLIT,
/// UNPACK).
fn outputs_of(io: &Path, k: usize) -> Vec<Value> {
    let single = io.join(format!("output_{k}.npy"));
    if single.exists() {
        return vec![Value::read_npy(&single).expect("output")];
    }
    let v: Vec<Value> = (0..)
        .map(|j| io.join(format!("output_{k}_{j}.npy")))
        .take_while(|p| p.exists())
        .map(|p| Value::read_npy(&p).expect("output"))
        .collect();
    assert!(
        !v.is_empty(),
        "no outputs for sample {k} in {}",
        io.display()
    );
    v
}

fn run_dir(name: &str, dir: &Path, samples: &[usize]) -> usize {
    let compiled = CompiledDir::load(dir).unwrap_or_else(|e| panic!("{name}: {e}"));
    let config = compiled
        .accelerator(None)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(
        Some(config.name),
        dir.file_name().and_then(|n| n.to_str()),
        "{name}: meta accelerator"
    );
    let io = dir
        .parent()
        .and_then(Path::parent)
        .expect("model dir")
        .join("io");
    let mut runs = 0;
    // One memory for the samples in order, as the fixtures' reference outputs were made by one
    // interpreter (stateful models carry their state from one sample to the next).
    let results = compiled
        .run_sequence(
            config,
            &samples.iter().map(|&k| inputs(&io, k)).collect::<Vec<_>>(),
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    for (&k, (outputs, stats)) in samples.iter().zip(results) {
        let expected = outputs_of(&io, k);
        assert_eq!(outputs.len(), expected.len(), "{name}: output count");
        // Vela's raw output shape drops unit axes (reductions with keep_dims).
        let squeeze = |s: &[usize]| s.iter().copied().filter(|&d| d != 1).collect::<Vec<_>>();
        for (j, (got, expected)) in outputs.iter().zip(&expected).enumerate() {
            assert_eq!(
                squeeze(&got.shape),
                squeeze(&expected.shape),
                "{name} input {k} output {j}: shape"
            );
            assert_eq!(
                got.data.dtype(),
                expected.data.dtype(),
                "{name} input {k} output {j}: dtype"
            );
            let (g, e) = (got.data.to_le_bytes(), expected.data.to_le_bytes());
            let diff = g.iter().zip(&e).filter(|(a, b)| a != b).count();
            assert!(
                diff == 0 && g.len() == e.len(),
                "{name} input {k} output {j}: {diff} of {} bytes differ",
                e.len()
            );
        }
        assert!(stats.stopped, "{name}: stream ended at NPU_OP_STOP");
        assert!(stats.operations > 0);
        runs += 1;
    }
    runs
}

#[test]
fn op_fixtures_bit_exact_on_every_config() {
    let dirs: Vec<_> = vela_dirs()
        .into_iter()
        .filter(|(n, _)| !n.starts_with("mv2_224/"))
        .filter(|(n, _)| {
            !REDUCE_FIXTURES
                .iter()
                .any(|r| n.starts_with(&format!("{r}/")))
        })
        .collect();
    assert!(
        dirs.len() >= 16 * 6,
        "expected every op fixture on 6 configs, found {}",
        dirs.len()
    );
    let mut runs = 0;
    for (name, dir) in &dirs {
        runs += run_dir(name, dir, &[0, 1, 2]);
    }
    assert_eq!(runs, dirs.len() * 3);
}

#[test]
fn mv2_bit_exact_on_every_config() {
    let dirs: Vec<_> = vela_dirs()
        .into_iter()
        .filter(|(n, _)| n.starts_with("mv2_224/"))
        .collect();
    assert_eq!(dirs.len(), 6, "mv2_224 on six configs");
    let mut runs = 0;
    for (name, dir) in &dirs {
        let samples: &[usize] = if name.ends_with("/ethos-u55-128") {
            &[0, 1, 2]
        } else {
            &[0]
        };
        runs += run_dir(name, dir, samples);
    }
    assert_eq!(runs, 8);
}

/// Our disassembly of every fixture stream equals the `0x...` lines of Vela's registers.txt.
#[test]
fn disassembly_matches_vela_dumps() {
    let dirs = vela_dirs();
    assert!(!dirs.is_empty());
    for (name, dir) in dirs {
        let payload = std::fs::read(dir.join("cmd_stream.bin")).expect("cmd_stream.bin");
        let cop = Cop1::parse(&payload).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (_, stream) = cop.command_streams().next().expect("one command stream");
        let words: Vec<u32> = stream
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let mut ours = Vec::new();
        let mut i = 0;
        while i < words.len() {
            let has_payload = (words[i] >> 14) & 3 != 0;
            let mut line = String::new();
            write_line(
                &mut line,
                i * 4,
                words[i],
                words.get(i + 1).copied().filter(|_| has_payload),
            )
            .expect("format");
            ours.push(line);
            i += if has_payload { 2 } else { 1 };
        }
        let vela = std::fs::read_to_string(dir.join("registers.txt")).expect("registers.txt");
        let theirs: Vec<&str> = vela.lines().filter(|l| l.starts_with("0x")).collect();
        assert_eq!(ours.len(), theirs.len(), "{name}: command count");
        for (o, t) in ours.iter().zip(&theirs) {
            assert_eq!(o.trim_end(), t.trim_end(), "{name}");
        }
    }
}

fn conv_fixture() -> (Vec<u8>, Vec<u8>, usize) {
    let dir = fixtures_dir().join("op_conv1x1/vela/ethos-u55-128");
    let compiled = CompiledDir::load(&dir).expect("op_conv1x1");
    let scratch = compiled.meta["scratch_size"]
        .as_u64()
        .expect("scratch_size") as usize;
    (compiled.cmd_stream, compiled.weights, scratch)
}

#[test]
fn arena_too_small_is_an_error_naming_region_and_command() {
    let (stream, weights, scratch) = conv_fixture();
    let mut arena = vec![0u8; scratch / 2];
    let mut regions = Regions::new();
    regions.set(0, &weights).set_mut(1, &mut arena);
    let err = VirtualNpu::new(&ETHOS_U55_128)
        .run(&stream, &mut regions)
        .unwrap_err();
    assert!(
        matches!(err.kind, SimErrorKind::OutOfBounds { region: 1, .. }),
        "unexpected error {err}"
    );
    assert!(
        err.offset >= 32 && err.offset < stream.len(),
        "offset {} inside the stream",
        err.offset
    );
    assert!(err.command.is_some());
    assert!(err.to_string().contains("region 1"), "{err}");
}

#[test]
fn truncated_and_corrupt_streams_fail_with_offsets() {
    let (stream, weights, scratch) = conv_fixture();
    let mut arena = vec![0u8; scratch];
    let mut npu = VirtualNpu::new(&ETHOS_U55_128);
    // A raw stream cut in the middle of a cmd1 command: the payload word is missing.
    let raw = &stream[32..];
    let mut regions = Regions::new();
    regions.set(0, &weights).set_mut(1, &mut arena);
    let first_cmd1 = (0..raw.len() / 4)
        .find(|&i| raw[i * 4 + 1] & 0x40 != 0)
        .expect("a cmd1 command");
    let cut = &raw[..first_cmd1 * 4 + 4];
    let err = npu.run(cut, &mut regions).unwrap_err();
    assert_eq!(err.offset, first_cmd1 * 4, "{err}");
    // An undefined opcode in the COP1 payload: the error names its payload offset.
    let mut bad = stream.clone();
    bad[32..36].copy_from_slice(&0x0000_0004u32.to_le_bytes());
    let err = npu.run(&bad, &mut regions).unwrap_err();
    assert_eq!(err.offset, 32, "{err}");
    assert!(matches!(err.kind, SimErrorKind::Decode(_)));
    // A payload for another accelerator is refused.
    let other: &'static AcceleratorConfig =
        AcceleratorConfig::by_name("ethos-u55-64").expect("config");
    let err = VirtualNpu::new(other)
        .run(&stream, &mut regions)
        .unwrap_err();
    assert!(err.to_string().contains("different accelerator"), "{err}");
}

mod register_file {
    use super::*;
    use npu_rt::ethos_u::regs::ctrl::{CmdReg, Config, Prot, Reset, Status, basep_offset, offset};
    use npu_rt::ethos_u::regs::{PmuEvent, PrivilegeLevel, SecurityLevel, State};
    use npu_rt::sim::regfile::{Fault, RegisterFile, SystemMemory};

    const FLASH: u64 = 0x1000_0000;
    const SRAM: u64 = 0x2000_0000;
    const QUEUE: u64 = 0x3000_0000;

    struct Case {
        stream: Vec<u8>,
        config_word: u32,
        weights: Vec<u8>,
        arena: Vec<u8>,
        output: (usize, Vec<u8>),
    }

    /// op_conv1x1 on ethos-u55-128: the raw command stream out of the COP1 payload, the
    /// weights, an arena with input 0 in place, and the expected output bytes.
    fn case() -> Case {
        let dir = fixtures_dir().join("op_conv1x1/vela/ethos-u55-128");
        let compiled = CompiledDir::load(&dir).expect("op_conv1x1");
        let cop = Cop1::parse(&compiled.cmd_stream).expect("COP1");
        let (config_word, _) = cop.optimizer_config().expect("OPTIMIZER_CONFIG");
        let stream = cop.command_streams().next().expect("stream").1.to_vec();
        let meta = &compiled.meta;
        let mut arena = vec![0u8; meta["scratch_size"].as_u64().unwrap() as usize];
        let io = fixtures_dir().join("op_conv1x1/io");
        let input = Value::read_npy(&io.join("input_0.npy"))
            .unwrap()
            .data
            .to_le_bytes();
        let at = meta["input_offset"][0].as_u64().unwrap() as usize;
        arena[at..at + input.len()].copy_from_slice(&input);
        let out = Value::read_npy(&io.join("output_0.npy"))
            .unwrap()
            .data
            .to_le_bytes();
        let out_at = meta["output_offset"][0].as_u64().unwrap() as usize;
        Case {
            stream,
            config_word,
            weights: compiled.weights,
            arena,
            output: (out_at, out),
        }
    }

    /// Programs the NPU the way ethos-u-core-driver does: reset, check config, queue, base
    /// pointers, PMU, start.
    fn program(npu: &mut RegisterFile<'_>, qsize: usize) {
        npu.write32(
            offset::RESET,
            Reset::new(PrivilegeLevel::Privileged, SecurityLevel::Secure).0,
        );
        for _ in 0..8 {
            if !Status(npu.read32(offset::STATUS)).reset_status() {
                break;
            }
        }
        assert!(!Status(npu.read32(offset::STATUS)).reset_status());
        let prot = Prot(npu.read32(offset::PROT));
        assert_eq!(prot.active_cpl(), PrivilegeLevel::Privileged);
        npu.write32(offset::QBASE, QUEUE as u32);
        npu.write32(offset::QBASE_HI, (QUEUE >> 32) as u32);
        npu.write32(offset::QSIZE, qsize as u32);
        for (region, base) in [(0, FLASH), (1, SRAM)] {
            npu.write32(basep_offset(region), base as u32);
            npu.write32(basep_offset(region) + 4, (base >> 32) as u32);
        }
        npu.write32(offset::PMCR, 1);
        npu.write32(offset::PMEVTYPER0, PmuEvent::MacActive as u32);
        npu.write32(offset::PMCNTENSET, (1 << 31) | 1);
        let q = npu.read32(offset::CMD) & (CmdReg::CLOCK_Q_ENABLE | CmdReg::POWER_Q_ENABLE);
        npu.write32(offset::CMD, q | CmdReg::TRANSITION_TO_RUNNING_STATE);
    }

    #[test]
    fn driver_sequence_runs_the_queue_and_raises_the_irq() {
        let Case {
            stream,
            config_word,
            weights,
            mut arena,
            output,
        } = case();
        let mut mem = SystemMemory::new();
        mem.map(FLASH, &weights)
            .map_mut(SRAM, &mut arena)
            .map(QUEUE, &stream);
        let mut npu = RegisterFile::new(&ETHOS_U55_128, mem);
        let cfg = Config(npu.read32(offset::CONFIG));
        assert_eq!(
            (cfg.macs_per_cc_log2(), cfg.shram_kib()),
            (
                Config(config_word).macs_per_cc_log2(),
                Config(config_word).shram_kib()
            )
        );
        assert!(!npu.irq());
        program(&mut npu, stream.len());
        let status = Status(npu.read32(offset::STATUS));
        assert!(
            npu.irq() && status.irq_raised() && status.cmd_end_reached(),
            "{status:?}"
        );
        assert_eq!(status.state(), State::Stopped);
        assert!(!status.has_error(), "{status:?} {:?}", npu.last_error());
        assert_eq!(status.irq_history_mask(), 0xffff, "NPU_OP_STOP's mask");
        assert_eq!(npu.read32(offset::QREAD) as usize, stream.len());
        assert!(npu.read32(offset::PMCCNTR) > 0);
        assert!(npu.read32(offset::PMEVCNTR0) > 0, "MAC_ACTIVE counted");
        assert!(npu.stats().macs > 0);
        let got = npu
            .memory()
            .read(SRAM + output.0 as u64, output.1.len())
            .expect("output");
        assert_eq!(got, &output.1[..], "output bytes");
        npu.write32(offset::CMD, CmdReg::CLEAR_IRQ);
        assert!(!npu.irq());
    }

    #[test]
    fn stepping_shows_running_state_and_qread() {
        let Case {
            stream,
            weights,
            mut arena,
            ..
        } = case();
        let mut mem = SystemMemory::new();
        mem.map(FLASH, &weights)
            .map_mut(SRAM, &mut arena)
            .map(QUEUE, &stream);
        let mut npu = RegisterFile::new(&ETHOS_U55_128, mem);
        npu.set_auto_run(false);
        program(&mut npu, stream.len());
        assert_eq!(Status(npu.read32(offset::STATUS)).state(), State::Running);
        assert_eq!(npu.read32(offset::QREAD), 0);
        assert_eq!(npu.step(3), 3);
        let q = npu.read32(offset::QREAD);
        assert!((12..=24).contains(&q), "qread {q}");
        assert!(!npu.irq());
        npu.step(u64::MAX);
        assert!(npu.irq());
        assert_eq!(Status(npu.read32(offset::STATUS)).state(), State::Stopped);
    }

    #[test]
    fn injected_faults_show_in_status() {
        let Case {
            stream,
            weights,
            mut arena,
            ..
        } = case();
        let mut mem = SystemMemory::new();
        mem.map(FLASH, &weights)
            .map_mut(SRAM, &mut arena)
            .map(QUEUE, &stream);
        let mut npu = RegisterFile::new(&ETHOS_U55_128, mem);
        npu.inject(Fault::BusError { after_commands: 5 });
        program(&mut npu, stream.len());
        let s = Status(npu.read32(offset::STATUS));
        assert!(s.bus_status() && s.irq_raised() && s.has_error(), "{s:?}");
        assert_eq!(s.state(), State::Stopped);
        // A reset clears the error; a parse error comes next.
        npu.inject(Fault::CmdParseError { after_commands: 2 });
        program(&mut npu, stream.len());
        let s = Status(npu.read32(offset::STATUS));
        assert!(
            s.cmd_parse_error() && !s.bus_status() && s.irq_raised(),
            "{s:?}"
        );
        // A hang: running forever, no interrupt, until reset.
        npu.inject(Fault::Hang { after_commands: 4 });
        program(&mut npu, stream.len());
        let s = Status(npu.read32(offset::STATUS));
        assert_eq!(s.state(), State::Running);
        assert!(!npu.irq());
        assert_eq!(npu.step(100), 0, "a hung NPU makes no progress");
        npu.write32(offset::RESET, 0);
        assert_eq!(Status(npu.read32(offset::STATUS)).state(), State::Stopped);
    }

    #[test]
    fn real_faults_map_to_status_bits() {
        let Case {
            stream,
            weights,
            mut arena,
            ..
        } = case();
        // Arena too small: the OFM write goes past the mapped SRAM -> bus error.
        let half = arena.len() / 2;
        let mut mem = SystemMemory::new();
        mem.map(FLASH, &weights)
            .map_mut(SRAM, &mut arena[..half])
            .map(QUEUE, &stream);
        let mut npu = RegisterFile::new(&ETHOS_U55_128, mem);
        program(&mut npu, stream.len());
        let s = Status(npu.read32(offset::STATUS));
        assert!(s.bus_status() && s.irq_raised(), "{s:?}");
        let err = npu.last_error().expect("error kept");
        assert!(
            matches!(err.kind, SimErrorKind::OutOfBounds { region: 1, .. }),
            "{err}"
        );
        // QBASE pointing at unmapped memory: a command-read bus error on channel CMD_READ (0).
        let mut mem = SystemMemory::new();
        mem.map(FLASH, &weights);
        let mut npu = RegisterFile::new(&ETHOS_U55_128, mem);
        program(&mut npu, stream.len());
        let s = Status(npu.read32(offset::STATUS));
        assert!(s.bus_status() && s.faulting_channel() == 0, "{s:?}");
        // A corrupt command word: parse error.
        let mut bad = stream.clone();
        bad[0..4].copy_from_slice(&0x0000_0004u32.to_le_bytes());
        let mut mem = SystemMemory::new();
        mem.map(FLASH, &weights).map(QUEUE, &bad);
        let mut npu = RegisterFile::new(&ETHOS_U55_128, mem);
        program(&mut npu, bad.len());
        assert!(Status(npu.read32(offset::STATUS)).cmd_parse_error());
    }
}

// reduce

/// Fixtures whose Vela streams `reduce_fixtures_on_vela_streams` checks (Vela's output shapes
/// drop unit axes, and some of its streams compute something else than TFLite).
const REDUCE_FIXTURES: &[&str] = &["op_sum", "op_reduce_max", "op_reduce_min", "op_arg_max"];

/// Vela's streams of the reduce fixtures on the virtual NPU: per directory and sample, the number
/// of output bytes that differ from TFLite's (Vela's raw output shape drops the unit axes, so
/// the bytes are compared), or the simulator's error.
fn reduce_stream_results(model: &str) -> Vec<(String, Result<usize, String>)> {
    let mut out = Vec::new();
    for (name, dir) in vela_dirs()
        .into_iter()
        .filter(|(n, _)| n.starts_with(&format!("{model}/")))
    {
        let compiled = CompiledDir::load(&dir).unwrap_or_else(|e| panic!("{name}: {e}"));
        let config = compiled
            .accelerator(None)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let io = fixtures_dir().join(model).join("io");
        for k in 0..3 {
            let expected = Value::read_npy(&io.join(format!("output_{k}.npy"))).expect("output");
            let r = match compiled.run(config, &inputs(&io, k)) {
                Ok((outputs, _)) => {
                    let (g, e) = (outputs[0].data.to_le_bytes(), expected.data.to_le_bytes());
                    assert_eq!(g.len(), e.len(), "{name} input {k}: output size");
                    Ok(g.iter().zip(&e).filter(|(a, b)| a != b).count())
                }
                Err(e) => Err(e.to_string()),
            };
            out.push((format!("{name} input {k}"), r));
        }
    }
    assert_eq!(
        out.len(),
        6 * 3,
        "{model}: six configurations, three samples"
    );
    out
}

/// Vela's REDUCE_MAX and REDUCE_MIN streams (a MAX pooling over the channels re-viewed as a
/// row; REDUCE_MIN negates into int16 around it) reproduce TFLite on every configuration.
#[test]
fn reduce_max_min_vela_streams_match_tflite() {
    for model in ["op_reduce_max", "op_reduce_min"] {
        for (what, r) in reduce_stream_results(model) {
            assert_eq!(r, Ok(0), "{what}: output bytes differing from TFLite");
        }
    }
}

/// Vela 5.2.0's stream for op_sum (SUM over H and W of [1, 8, 8, 16], keep_dims) does not
/// compute TFLite's SUM. Its first operation (a 1x1 AvgPool) copies the input viewed as
/// `[8, 128, 1]` into `[128, 8]` (H innermost); its 1x1 convolution then sums the 8 H values
/// of each of the 128 (W, C) pairs, writing 128 int8 values where the output has 16: the output
/// holds `requant(sum over h of x[h, 0, c])`, the sum over H at W = 0 only. The model: the
/// convolution's `sum(x - zp_in) * M / 2^S` (weights 1, `(M, S)` TFLite's quantized multiplier
/// of `s_in / s_out`, Vela's scale record 0x4EBFA475 / 2^34 on ethos-u55-128), NATURAL
/// rounding, `+ zp_out`, clamped ([`npu_tests::vela::op_sum_first_column`], shared with the
/// U85 streams' test). The virtual NPU must give exactly that, and it differs from TFLite's SUM
/// on every element (documented in docs/reduce.md).
#[test]
fn op_sum_vela_streams_sum_only_the_first_column() {
    let io = fixtures_dir().join("op_sum").join("io");
    for (name, dir) in vela_dirs()
        .into_iter()
        .filter(|(n, _)| n.starts_with("op_sum/"))
    {
        let compiled = CompiledDir::load(&dir).unwrap_or_else(|e| panic!("{name}: {e}"));
        let config = compiled.accelerator(None).expect("accelerator");
        for k in 0..3 {
            let input = Value::read_npy(&io.join(format!("input_{k}.npy"))).expect("input");
            let model = npu_tests::vela::op_sum_first_column(&input.data.to_le_bytes());
            let (outputs, _) = compiled
                .run(config, &[input])
                .unwrap_or_else(|e| panic!("{name} input {k}: {e}"));
            assert_eq!(
                outputs[0].data.to_le_bytes(),
                model,
                "{name} input {k}: the model of Vela's stream"
            );
            let tflite = Value::read_npy(&io.join(format!("output_{k}.npy"))).expect("output");
            let differing = tflite
                .data
                .to_le_bytes()
                .iter()
                .zip(&model)
                .filter(|(a, b)| a != b)
                .count();
            assert_eq!(
                differing, 16,
                "{name} input {k}: Vela's SUM differs from TFLite"
            );
        }
    }
}

/// Vela's ARG_MAX stream (depthwise into int16, MAX pooling, then a 16-bit interpolating lookup
/// table that extracts the index from the low 7 bits) reproduces TFLite on every configuration:
/// this is the fixture that pins the 16-bit LUT's interpolation (`base + (slope * low7 + 64)
/// >> 7` on the entry the top 9 bits pick; `npu-rt/src/sim/ops/output.rs`).
#[test]
fn op_arg_max_vela_streams_match_tflite_with_16_bit_luts() {
    for (what, r) in reduce_stream_results("op_arg_max") {
        assert_eq!(r, Ok(0), "{what}: output bytes differing from TFLite");
    }
}

/// The hazard checker (on by default) on deliberately broken streams: every Vela stream with
/// waits, with its `NPU_OP_DMA_WAIT`s (then its `NPU_OP_KERNEL_WAIT`s) turned into
/// `NPU_OP_PMU_MASK 0` (one word, nothing to wait for). Vela waits only where something
/// depends on the DMA or operation, so each removal that matters must be caught, naming the
/// command and the bytes. The unmodified streams pass the same checker in
/// `every_vela_stream_reproduces_tflite` (as do ours, in every test that runs the simulator).
#[test]
fn removed_waits_are_caught_as_hazards() {
    use npu_rt::ethos_u::regs::opcode::Commands;
    use npu_rt::ethos_u::regs::{Cmd0, Command};
    let (mut streams, mut caught) = (0, [0usize; 2]);
    for (name, dir) in vela_dirs() {
        let compiled = CompiledDir::load(&dir).expect("load");
        let cop = Cop1::parse(&compiled.cmd_stream).expect("COP1");
        let raw = cop.command_streams().next().expect("stream").1.to_vec();
        let words: Vec<u32> = raw
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let accel = npu_rt::ethos_u::config::ALL
            .iter()
            .copied()
            .find(|a| dir.ends_with(a.name))
            .expect("accelerator directory");
        let scratch = compiled.meta["scratch_size"].as_u64().unwrap() as usize;
        let fast = compiled.meta["scratch_fast_size"].as_u64().unwrap_or(0) as usize;
        for (k, wait) in [Cmd0::OP_DMA_WAIT, Cmd0::OP_KERNEL_WAIT]
            .into_iter()
            .enumerate()
        {
            let mut broken = words.clone();
            let mut removed = 0;
            for item in Commands::new(&words, 0) {
                let (offset, cmd) = item.expect("Vela's stream decodes");
                if let Command::Cmd0 { op, .. } = cmd
                    && op == wait
                {
                    // Opcode in bits 0..10, parameter (now 0) in 16..32.
                    broken[offset / 4] = Cmd0::OP_PMU_MASK as u32;
                    removed += 1;
                }
            }
            if removed == 0 {
                continue;
            }
            streams += 1;
            let bytes: Vec<u8> = broken.iter().flat_map(|w| w.to_le_bytes()).collect();
            let mut arena = vec![0u8; scratch];
            let mut fast_scratch = vec![0u8; fast];
            let mut regions = Regions::new();
            regions.set(0, &compiled.weights).set_mut(1, &mut arena);
            if fast > 0 {
                regions.set_mut(2, &mut fast_scratch);
            }
            match VirtualNpu::new(accel).run(&bytes, &mut regions) {
                Err(e) if matches!(e.kind, SimErrorKind::Hazard { .. }) => {
                    assert!(e.to_string().contains("still in flight"), "{name}: {e}");
                    caught[k] += 1;
                }
                // Streams the simulator does not model (see the main test's known list).
                Err(e) if matches!(e.kind, SimErrorKind::Unsupported { .. }) => streams -= 1,
                Err(e) => panic!("{name}: unexpected error {e}"),
                Ok(_) => {}
            }
        }
    }
    // Measured: which removals matter depends on the stream; most Vela streams with DMAs copy
    // weights or LUTs that the next operation reads at once.
    assert!(streams > 0, "no Vela stream has waits");
    assert!(
        caught[0] > 0,
        "no removed DMA wait was caught in {streams} streams"
    );
    println!(
        "{streams} streams with waits; hazards caught: {} without DMA waits, {} without kernel waits",
        caught[0], caught[1]
    );
}
