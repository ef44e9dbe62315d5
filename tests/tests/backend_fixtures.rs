//! Our own compiler, end to end: every fixture with a `.tflite`, imported from the `.tflite` and
//! from the `.onnx`, compiled by the native Ethos-U backend for several accelerator
//! configurations and run on the virtual NPU, must reproduce TFLite's reference output
//! (`io/output_0.npy`) byte for byte.

use npu_build::ethos_u::{CompileOptions, compile_with};
use npu_build::target::Target;
use npu_tests::{
    differences, fixture_inputs, fixture_output, fixture_outputs, fixtures_dir, tflite_fixtures,
};

const ALL_TARGETS: [&str; 6] = [
    "ethos-u55-32",
    "ethos-u55-64",
    "ethos-u55-128",
    "ethos-u55-256",
    "ethos-u65-256",
    "ethos-u65-512",
];

/// Compiles `model.ext` for `target`, runs case `k` on the simulator; returns a failure message.
fn run_case(model: &str, ext: &str, target: &str, k: usize) -> Option<String> {
    run_case_with(model, ext, target, k, |_| {})
}

/// [`run_case`] with the target's default options changed by `tweak`.
fn run_case_with(
    model: &str,
    ext: &str,
    target: &str,
    k: usize,
    tweak: impl Fn(&mut CompileOptions),
) -> Option<String> {
    run_case_arena(model, ext, target, k, tweak).err()
}

/// [`run_case_with`], returning the compiled arena's size when the outputs are TFLite's.
fn run_case_arena(
    model: &str,
    ext: &str,
    target: &str,
    k: usize,
    tweak: impl Fn(&mut CompileOptions),
) -> Result<usize, String> {
    let path = fixtures_dir().join(model).join(format!("{model}.{ext}"));
    let graph = match npu_build::import::load(&path) {
        Ok(g) => g,
        Err(e) => return Err(format!("{model}.{ext}: import: {e}")),
    };
    let t = Target::for_accelerator(target).expect("known target");
    // The target's defaults: on the U65s (Dedicated_Sram) the intermediate feature maps go to
    // the fast scratch (region 2), on the U55s (Shared_Sram) weights are copied into the arena.
    let mut options = CompileOptions::for_target(&t);
    tweak(&mut options);
    let compiled = match compile_with(&graph, t.accelerator, &options) {
        Ok(c) => c,
        Err(e) => return Err(format!("{model}.{ext} on {target}: compile: {e}")),
    };
    let (outputs, _) = match compiled.run_sim(&fixture_inputs(model, k)) {
        Ok(r) => r,
        Err(e) => return Err(format!("{model}.{ext} on {target}: run: {e}")),
    };
    let want = fixture_outputs(model, k);
    if outputs.len() != want.len() {
        return Err(format!(
            "{model}.{ext} on {target}: {} outputs, expected {}",
            outputs.len(),
            want.len()
        ));
    }
    let d: Vec<String> = outputs
        .iter()
        .zip(&want)
        .enumerate()
        .map(|(j, (g, w))| (j, differences(g, w)))
        .filter(|(_, d)| !d.is_empty())
        .map(|(j, d)| format!("output {j}: {d}"))
        .collect();
    if d.is_empty() {
        Ok(compiled.arena_size)
    } else {
        Err(format!(
            "{model}.{ext} on {target} input {k}: {}",
            d.join("; ")
        ))
    }
}

fn check_all(models: &[String], exts: &[&str], targets: &[&str]) {
    let mut failures = Vec::new();
    let mut passed = 0;
    for model in models {
        for ext in exts {
            // A fixture may lack its ONNX twin (its NOTES.txt says why).
            if !fixtures_dir()
                .join(model)
                .join(format!("{model}.{ext}"))
                .exists()
            {
                continue;
            }
            for target in targets {
                match run_case(model, ext, target, 0) {
                    Some(f) => failures.push(f),
                    None => passed += 1,
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{passed} passed, {} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn single_op_fixtures() -> Vec<String> {
    tflite_fixtures()
        .into_iter()
        .filter(|m| m.starts_with("op_"))
        .collect()
}

#[test]
fn single_op_fixtures_from_tflite_on_every_target() {
    check_all(&single_op_fixtures(), &["tflite"], &ALL_TARGETS);
}

#[test]
fn single_op_fixtures_from_onnx_on_every_target() {
    check_all(&single_op_fixtures(), &["onnx"], &ALL_TARGETS);
}

/// The small whole networks (`tools/make_fixtures_nets.py`) and the trained digits model.
fn network_fixtures() -> Vec<String> {
    tflite_fixtures()
        .into_iter()
        .filter(|m| m.starts_with("net_") || m == "digits")
        .collect()
}

#[test]
fn network_fixtures_from_both_formats_on_every_target() {
    check_all(&network_fixtures(), &["tflite", "onnx"], &ALL_TARGETS);
}

/// Every single-operator fixture on every target in size mode (operators lowered to several
/// NPU operations form chains of their own).
#[test]
fn single_op_fixtures_in_size_mode_on_every_target() {
    let mut failures = Vec::new();
    for model in single_op_fixtures() {
        for target in ALL_TARGETS {
            if let Some(f) = run_case_with(&model, "tflite", target, 0, |o| o.optimise_size = true)
            {
                failures.push(f);
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// `optimise = "size"`: the networks with their chains of operations striped for the smallest
/// arena, every reference case, bit-exact (mv2_224's output is constant; its striped chains
/// run the same kernels as the others', and `npu-build`'s stripe tests check random data).
#[test]
fn networks_striped_for_size_are_bit_exact() {
    let mut failures = Vec::new();
    let mut models = network_fixtures();
    models.push("mv2_224".into());
    for model in &models {
        for target in ["ethos-u55-128", "ethos-u55-32"] {
            if model == "mv2_224" && target != "ethos-u55-128" {
                continue;
            }
            for k in 0..3 {
                if let Some(f) =
                    run_case_with(model, "tflite", target, k, |o| o.optimise_size = true)
                {
                    failures.push(f);
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// `sram_limit` between the two ends: every network fixture compiled with budgets a third and
/// two thirds of the way from its size-mode arena to its performance-mode arena, and with the
/// size-mode arena itself, fits each budget and stays bit-exact (on the virtual NPU, hazard
/// checker on). Random budgets on a synthetic chain: `npu-build`'s stripe tests.
#[test]
fn networks_under_budgets_between_size_and_performance_are_bit_exact() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for model in network_fixtures() {
        for target in ["ethos-u55-128", "ethos-u55-64"] {
            let ends = run_case_arena(&model, "tflite", target, 0, |o| o.optimise_size = true)
                .and_then(|small| {
                    run_case_arena(&model, "tflite", target, 0, |_| {}).map(|big| (small, big))
                });
            let (small, big) = match ends {
                Ok(e) => e,
                Err(f) => {
                    failures.push(f);
                    continue;
                }
            };
            if big <= small {
                continue;
            }
            for budget in [
                small,
                small + (big - small) / 3,
                small + 2 * (big - small) / 3,
            ] {
                match run_case_arena(&model, "tflite", target, 0, |o| {
                    o.arena_budget = Some(budget)
                }) {
                    Ok(arena) if arena <= budget => checked += 1,
                    Ok(arena) => failures.push(format!(
                        "{model} on {target}: arena {arena} over the budget {budget}"
                    )),
                    Err(f) => failures.push(format!("budget {budget}: {f}")),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(checked >= 10, "only {checked} budgets checked");
}

#[test]
fn mv2_from_onnx_on_every_target() {
    check_all(&["mv2_224".to_string()], &["onnx"], &ALL_TARGETS);
}

#[test]
fn mv2_from_tflite_on_u55_128() {
    check_all(&["mv2_224".to_string()], &["tflite"], &["ethos-u55-128"]);
}

/// mv2_224's output is constant (its last layers carry a single value), so the output check
/// above says little about most of the network. Compiled with every intermediate kept, each
/// activation our command stream writes must equal the reference interpreter's (itself checked
/// against digests of TFLite's tensors in `reference_tflite.rs`), for every input.
#[test]
fn mv2_every_intermediate_tensor_on_u55_128() {
    let path = fixtures_dir().join("mv2_224").join("mv2_224.tflite");
    let graph = npu_build::import::load(&path).expect("import");
    let accel = Target::for_accelerator("ethos-u55-128")
        .expect("target")
        .accelerator;
    let options = npu_build::ethos_u::CompileOptions {
        keep_intermediates: true,
        ..Default::default()
    };
    let compiled = npu_build::ethos_u::compile_with(&graph, accel, &options).expect("compile");
    // Most intermediates live in the NHCWB16 brick layout (read back de-bricked).
    let bricks = compiled
        .program
        .tensor_places
        .iter()
        .flatten()
        .filter(|p| p.layout == npu_build::ethos_u::npu_op::Layout::Nhcwb16)
        .count();
    assert!(bricks >= 50, "{bricks} brick tensors");
    let interp = npu_build::reference::Interpreter::new(&graph).expect("prepare");
    let mut failures = Vec::new();
    let mut checked = 0;
    for k in 0..3 {
        let inputs = fixture_inputs("mv2_224", k);
        let reference = interp.run_all(&inputs).expect("reference run");
        let (arena, _) = compiled.run_sim_arena(&inputs).expect("simulator run");
        for (t, want) in reference.iter().enumerate() {
            let Some(want) = want else { continue };
            if graph.tensors[t].is_const() {
                continue;
            }
            let Some(got) = compiled.tensor_bytes(&arena, &graph, npu_build::ir::TensorId(t))
            else {
                continue;
            };
            checked += 1;
            if got != want.data.to_le_bytes() {
                failures.push(format!("input {k}: '{}'", graph.tensors[t].name));
            }
        }
    }
    // Every op's output is an arena tensor: at least one tensor per op and input.
    assert!(
        checked >= 3 * graph.ops.len(),
        "only {checked} tensors checked"
    );
    assert!(
        failures.is_empty(),
        "{} of {checked} tensors differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Weight copies (streams DMA'd from flash into the arena where an operation reads them more
/// than once) change where weights are read, not what is computed: mv2 on ethos-u55-128 with
/// and without them gives TFLite's bytes, copies are made, and the arena does not grow.
#[test]
fn mv2_weight_copies_grow_the_arena_at_most_1_percent_and_keep_the_output() {
    let path = fixtures_dir().join("mv2_224").join("mv2_224.tflite");
    let graph = npu_build::import::load(&path).expect("import");
    let accel = Target::for_accelerator("ethos-u55-128")
        .expect("target")
        .accelerator;
    let compile = |weight_dma: bool, arena_budget: Option<usize>| {
        let options = npu_build::ethos_u::CompileOptions {
            weight_dma,
            arena_budget,
            ..Default::default()
        };
        npu_build::ethos_u::compile_with(&graph, accel, &options).expect("compile")
    };
    let (with, without) = (compile(true, None), compile(false, None));
    // Copies may grow the arena by 1% (the weights of the layers at the peak)...
    assert!(
        with.arena_size > without.arena_size
            && with.arena_size <= without.arena_size + without.arena_size / 100,
        "arena {} with copies, {} without",
        with.arena_size,
        without.arena_size
    );
    // ...but never past a budget: at the copy-free arena, copies only fill gaps.
    let tight = compile(true, Some(without.arena_size));
    assert_eq!(tight.arena_size, without.arena_size, "arena under a budget");
    for k in 0..3 {
        let want = fixture_output("mv2_224", k);
        let (out, stats) = with.run_sim(&fixture_inputs("mv2_224", k)).expect("run");
        assert_eq!(differences(&out[0], &want), "", "input {k}, weight copies");
        // mv2 has no LUTs: every DMA is a weight copy (669,504 bytes when written: the early
        // layers' small, many-times-read streams; the large late ones would grow the arena).
        assert!(stats.dma_bytes > 500_000, "{} bytes DMA'd", stats.dma_bytes);
        let (out, stats) = without.run_sim(&fixture_inputs("mv2_224", k)).expect("run");
        assert_eq!(differences(&out[0], &want), "", "input {k}, no copies");
        assert_eq!(stats.dma_bytes, 0);
    }
}

/// Weight copies start as far ahead as their transfer needs (`copy_lead`): on mv2 for
/// ethos-u55-128 the NPU waited 107,223 estimated cycles for copies issued one operation
/// ahead behind short operations, before seven expand convolutions. Now only the first
/// convolution's copy, with nothing before it to hide behind, is waited for; the streams run
/// bit-exact under the virtual NPU's hazard checker (its DMAs overlap several operations).
#[test]
fn mv2_weight_copies_start_early_enough_that_the_npu_does_not_wait() {
    let path = fixtures_dir().join("mv2_224").join("mv2_224.tflite");
    let graph = npu_build::import::load(&path).expect("import");
    let target = Target::for_accelerator("ethos-u55-128").expect("target");
    let options = CompileOptions::for_target(&target);
    let compiled = compile_with(&graph, target.accelerator, &options).expect("compile");
    let est = npu_build::ethos_u::perf::estimate_compiled(&compiled, &target).expect("estimate");
    let stalls: u64 = est.iter().map(|e| e.stall_cycles).sum();
    let total: u64 = est.iter().map(|e| e.total_cycles).sum();
    // Conv1's copy (1,584 cycles) is the only wait left.
    assert!(stalls <= 2_000, "{stalls} stall cycles of {total}");
    // Some copies run during more than the operation before their reader: issued one
    // operation ahead, a weight DMA_START is followed by its reader's registers, its
    // DMA_WAIT and kernel; issued further ahead (led copies, prefetched pieces), other
    // operations' kernels come between. A DMA_WAIT k retires the oldest DMAs until k are
    // left; each retired DMA counts the kernels issued since it started.
    use npu_build::ethos_u::perf::stream::{Event, decode};
    let mut led = 0;
    let mut outstanding: std::collections::VecDeque<usize> = Default::default();
    for event in decode(&compiled.command_stream).expect("decode") {
        match event {
            Event::Dma(_) => outstanding.push_back(0),
            Event::Op(_) => outstanding.iter_mut().for_each(|k| *k += 1),
            Event::DmaWait(k) => {
                while outstanding.len() > usize::from(k) {
                    let kernels = outstanding.pop_front().unwrap_or(0);
                    led += usize::from(kernels >= 1);
                }
            }
            Event::KernelWait(_) => {}
        }
    }
    assert!(
        led >= 7,
        "{led} weight copies issued two or more operations ahead"
    );
    let (out, _) = compiled
        .run_sim(&fixture_inputs("mv2_224", 0))
        .expect("run");
    assert_eq!(differences(&out[0], &fixture_output("mv2_224", 0)), "");
}

/// A convolution still waiting for its weight copy is split in depth (`depth_slice`) where the
/// estimator finds that faster: net_resnet8's last 3x3 convolution on ethos-u55-64 (a
/// 37,520-byte copy behind a 19,968-cycle convolution) becomes two of 32 channels, whose
/// second copy streams in while the first computes. The sliced program gives TFLite's bytes
/// for every reference input, under the hazard checker, and waits less.
#[test]
fn resnet8_waits_less_with_a_depth_sliced_convolution_and_stays_bit_exact() {
    let path = fixtures_dir()
        .join("net_resnet8")
        .join("net_resnet8.tflite");
    let graph = npu_build::import::load(&path).expect("import");
    let target = Target::for_accelerator("ethos-u55-64").expect("target");
    let timed = CompileOptions::for_target(&target);
    let untimed = CompileOptions {
        timing: None,
        ..timed.clone()
    };
    let sliced = compile_with(&graph, target.accelerator, &timed).expect("compile");
    let whole = compile_with(&graph, target.accelerator, &untimed).expect("compile");
    assert_eq!(
        sliced.npu_ops,
        whole.npu_ops + 1,
        "one convolution in two slices"
    );
    let cycles = |c: &npu_build::ethos_u::Compiled| -> (u64, u64) {
        let est = npu_build::ethos_u::perf::estimate_compiled(c, &target).expect("estimate");
        (
            est.iter().map(|e| e.total_cycles).sum(),
            est.iter().map(|e| e.stall_cycles).sum(),
        )
    };
    let ((sliced_total, sliced_stalls), (whole_total, whole_stalls)) =
        (cycles(&sliced), cycles(&whole));
    assert!(
        sliced_total < whole_total && sliced_stalls < whole_stalls,
        "sliced {sliced_total} cycles ({sliced_stalls} waiting), whole {whole_total} ({whole_stalls})"
    );
    for k in 0..3 {
        let (out, _) = sliced
            .run_sim(&fixture_inputs("net_resnet8", k))
            .expect("run");
        assert_eq!(
            differences(&out[0], &fixture_output("net_resnet8", k)),
            "",
            "input {k}"
        );
    }
}

/// The stateful fixtures (LSTM): compiled for every target, the three inputs run in order on
/// one arena (the state carries over, as the fixtures' reference outputs were made), every
/// output byte equal to the reference's.
#[test]
fn stateful_fixtures_carry_their_state_on_every_target() {
    let mut failures = Vec::new();
    for model in ["op_lstm", "net_lstm_kws"] {
        let path = fixtures_dir().join(model).join(format!("{model}.tflite"));
        let graph = npu_build::import::load(&path).expect("import");
        assert_eq!(graph.variables.len(), 2, "{model}: hidden and cell state");
        let runs: Vec<_> = (0..3).map(|k| fixture_inputs(model, k)).collect();
        for target in ALL_TARGETS {
            let t = Target::for_accelerator(target).expect("known target");
            let compiled = compile_with(&graph, t.accelerator, &CompileOptions::for_target(&t))
                .unwrap_or_else(|e| panic!("{model} on {target}: {e}"));
            let outputs = compiled
                .run_sim_sequence(&runs)
                .unwrap_or_else(|e| panic!("{model} on {target}: {e}"));
            for (k, got) in outputs.iter().enumerate() {
                let d = differences(&got[0], &fixture_outputs(model, k)[0]);
                if !d.is_empty() {
                    failures.push(format!("{model} on {target} input {k}: {d}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
