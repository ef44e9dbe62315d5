//! Our own compiler, end to end: every fixture with a `.tflite`, imported from the `.tflite` and
//! from the `.onnx`, compiled by the native Ethos-U backend for several accelerator
//! configurations and run on the virtual NPU, must reproduce TFLite's reference output
//! (`io/output_0.npy`) byte for byte.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use npu_build::ethos_u::{CompileOptions, Compiled, compile_with};
use npu_build::ir::Graph;
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

/// The U65s with Vela's `Shared_Sram` memory mode (the arena in SRAM, weights in DRAM) rather
/// than their default `Dedicated_Sram` (feature maps in an SRAM fast scratch, the arena in
/// DRAM, where it holds only inputs and outputs): there an arena budget stripes, as on the
/// U55s, through the U65s' command set.
const U65_SHARED_SRAM: [&str; 2] = ["ethos-u65-256+Shared_Sram", "ethos-u65-512+Shared_Sram"];

/// `accelerator` (its default system and memory mode) or `accelerator+Memory_Mode`.
fn target_of(spec: &str) -> Target {
    let (accelerator, mode) = match spec.split_once('+') {
        Some((a, m)) => (a, Some(m)),
        None => (spec, None),
    };
    Target::new(accelerator, None, mode).expect("known target")
}

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
    let graph = load(model, ext)?;
    let compiled = compile_case(&graph, target, tweak)
        .map_err(|e| format!("{model}.{ext} on {target}: compile: {e}"))?;
    check_outputs(&compiled, model, &format!("{model}.{ext} on {target}"), k)?;
    Ok(compiled.arena_size)
}

/// Imports `fixtures/<model>/<model>.<ext>`.
fn load(model: &str, ext: &str) -> Result<Graph, String> {
    let path = fixtures_dir().join(model).join(format!("{model}.{ext}"));
    npu_build::import::load(&path).map_err(|e| format!("{model}.{ext}: import: {e}"))
}

/// Compiles `graph` for `target` with the target's default options changed by `tweak`.
fn compile_case(
    graph: &Graph,
    target: &str,
    tweak: impl Fn(&mut CompileOptions),
) -> npu_build::Result<Compiled> {
    let t = target_of(target);
    // The target's defaults: on the U65s (Dedicated_Sram) the intermediate feature maps go to
    // the fast scratch (region 2), on the U55s (Shared_Sram) weights are copied into the arena.
    let mut options = CompileOptions::for_target(&t);
    tweak(&mut options);
    compile_with(graph, t.accelerator, &options)
}

/// Runs reference case `k` of `model` on the virtual NPU (`run_sim`: hazard checker on) and
/// compares every output byte with TFLite's; `what` names the case in the failure message.
fn check_outputs(compiled: &Compiled, model: &str, what: &str, k: usize) -> Result<(), String> {
    let (outputs, _) = compiled
        .run_sim(&fixture_inputs(model, k))
        .map_err(|e| format!("{what}: run: {e}"))?;
    let want = fixture_outputs(model, k);
    if outputs.len() != want.len() {
        return Err(format!(
            "{what}: {} outputs, expected {}",
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
        Ok(())
    } else {
        Err(format!("{what} input {k}: {}", d.join("; ")))
    }
}

/// Runs `f` on every item, on as many threads as the machine has (the test harness runs a few
/// tests at once, but the long ones below would otherwise finish alone on one core); the
/// results in the items' order.
fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    results.lock().unwrap()[i] = Some(r);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|r| r.expect("every item ran"))
        .collect()
}

/// A model's two ends on a target: its arena in size mode and in performance mode.
#[derive(Clone, Copy, Debug)]
struct Ends {
    size: usize,
    perf: usize,
}

/// The reference cases run on a size-mode compilation in [`ends`].
const SIZE_MODE_INPUTS: usize = 3;

/// [`Ends`] of `model.tflite` on `target`, computed once per test binary (the tests below share
/// them): the size-mode program checked bit-exact on every reference input
/// ([`SIZE_MODE_INPUTS`]), the performance-mode one on the first (the other tests run it on
/// every target too, except mv2_224's).
fn ends(model: &str, target: &'static str) -> Result<Ends, String> {
    type Cell = Arc<OnceLock<Result<Ends, String>>>;
    static CACHE: Mutex<Vec<((String, &str), Cell)>> = Mutex::new(Vec::new());
    let cell = {
        let mut cache = CACHE.lock().unwrap();
        let key = (model.to_string(), target);
        match cache.iter().find(|(k, _)| *k == key) {
            Some((_, c)) => c.clone(),
            None => {
                let c = Cell::default();
                cache.push((key, c.clone()));
                c
            }
        }
    };
    // Another thread computing the same ends makes this one wait for them.
    cell.get_or_init(|| {
        let graph = load(model, "tflite")?;
        let size = compile_case(&graph, target, |o| o.optimise_size = true)
            .map_err(|e| format!("{model} on {target}, size mode: compile: {e}"))?;
        if graph.variables.is_empty() {
            for k in 0..SIZE_MODE_INPUTS {
                check_outputs(&size, model, &format!("{model} on {target}, size mode"), k)?;
            }
        } else {
            // A stateful model's reference cases run in order on one arena (see
            // `stateful_fixtures_carry_their_state_on_every_target`).
            let runs: Vec<_> = (0..SIZE_MODE_INPUTS)
                .map(|k| fixture_inputs(model, k))
                .collect();
            let outputs = size
                .run_sim_sequence(&runs)
                .map_err(|e| format!("{model} on {target}, size mode: run: {e}"))?;
            for (k, got) in outputs.iter().enumerate() {
                let d = differences(&got[0], &fixture_outputs(model, k)[0]);
                if !d.is_empty() {
                    return Err(format!("{model} on {target}, size mode, input {k}: {d}"));
                }
            }
        }
        let perf = compile_case(&graph, target, |_| {})
            .map_err(|e| format!("{model} on {target}: compile: {e}"))?;
        check_outputs(&perf, model, &format!("{model} on {target}"), 0)?;
        Ok(Ends {
            size: size.arena_size,
            perf: perf.arena_size,
        })
    })
    .clone()
}

/// Compiles `graph` (fixture `model`) for `target` under `budget`, checks that the arena fits and
/// the first reference case is bit-exact; returns the arena.
fn check_budget(graph: &Graph, model: &str, target: &str, budget: usize) -> Result<usize, String> {
    let what = format!("{model} on {target}, arena_budget {budget}");
    let compiled = compile_case(graph, target, |o| o.arena_budget = Some(budget))
        .map_err(|e| format!("{what}: compile: {e}"))?;
    if compiled.arena_size > budget {
        return Err(format!(
            "{what}: arena {} over the budget",
            compiled.arena_size
        ));
    }
    check_outputs(&compiled, model, &what, 0)?;
    Ok(compiled.arena_size)
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
/// NPU operations form chains of their own), every reference input; and under a budget: where
/// its size-mode arena is smaller than its performance-mode one, halfway between, else (every
/// fixture when this was written: one operator gains nothing from striping) equal to the
/// arena. The arena fits and the output is bit-exact.
#[test]
fn single_op_fixtures_in_size_mode_and_under_a_budget_on_every_target() {
    let jobs: Vec<(String, &str)> = single_op_fixtures()
        .into_iter()
        .flat_map(|m| ALL_TARGETS.map(|t| (m.clone(), t)))
        .collect();
    let results = par_map(&jobs, |(model, target)| -> Result<bool, String> {
        let e = ends(model, target)?;
        let graph = load(model, "tflite")?;
        check_budget(
            &graph,
            model,
            target,
            e.size + e.perf.saturating_sub(e.size) / 2,
        )?;
        Ok(e.perf > e.size)
    });
    let between = results.iter().filter(|r| matches!(r, Ok(true))).count();
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    eprintln!(
        "{} single-op cases in size mode and under a budget, {between} of them between two \
         different ends",
        jobs.len()
    );
    assert!(
        failures.is_empty(),
        "{} failed:\n{failures:#?}",
        failures.len()
    );
}

/// The networks with mv2_224 (`optimise = "size"` and `sram_limit` between the two ends) on every
/// target, and on the U65s in the `Shared_Sram` memory mode too ([`U65_SHARED_SRAM`]): size mode bit-exact on every reference input; budgets equal to the size-mode arena
/// and a third and two thirds of the way from it to the performance-mode arena fit and stay
/// bit-exact (on the virtual NPU, hazard checker on). mv2_224's output is constant; its striped
/// chains run the same kernels as the others', and `npu-build`'s stripe tests check random data.
#[test]
fn networks_in_size_mode_and_under_budgets_on_every_target() {
    let mut models = network_fixtures();
    models.push("mv2_224".into());
    let jobs: Vec<(String, &str)> = models
        .iter()
        .flat_map(|m| {
            ALL_TARGETS
                .iter()
                .chain(&U65_SHARED_SRAM)
                .map(|&t| (m.clone(), t))
        })
        .collect();
    let results = par_map(&jobs, |(model, target)| -> Result<usize, String> {
        let e = ends(model, target)?;
        let graph = load(model, "tflite")?;
        let mut budgets = vec![e.size];
        if e.perf > e.size {
            budgets.extend([
                e.size + (e.perf - e.size) / 3,
                e.size + 2 * (e.perf - e.size) / 3,
            ]);
        }
        budgets.dedup();
        let mut failures = Vec::new();
        for &budget in &budgets {
            if let Err(f) = check_budget(&graph, model, target, budget) {
                failures.push(f);
            }
        }
        if failures.is_empty() {
            Ok(budgets.len())
        } else {
            Err(failures.join("\n"))
        }
    });
    let checked: usize = results.iter().filter_map(|r| r.as_ref().ok()).sum();
    let gaps = results.iter().filter(|r| matches!(r, Ok(3))).count();
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    eprintln!(
        "{} network cases in size mode, {checked} budgets checked ({gaps} cases with three)",
        jobs.len()
    );
    assert!(
        failures.is_empty(),
        "{} failed:\n{failures:#?}",
        failures.len()
    );
    // With the arena in SRAM (the U55s, [`U65_SHARED_SRAM`]) all but the smallest networks
    // stripe; on the U65s' default Dedicated_Sram the feature maps live in the fast scratch
    // and both ends are the arena of the inputs and outputs.
    assert!(gaps >= 20, "only {gaps} cases with a gap between the ends");
}

/// A small xorshift generator: the random budgets below without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
}

/// Random budgets on the real networks: for each network fixture and two targets drawn at
/// random (of the six and [`U65_SHARED_SRAM`]), budgets drawn between the size-mode and performance-mode arenas fit and stay
/// bit-exact; one drawn below the size-mode arena is refused with `Error::Budget`, whose
/// stated need is at least the size-mode arena, and a budget of that need compiles, fits and
/// stays bit-exact. The seed is printed; `NPU_BUDGET_SEED` replaces it. `NPU_WIDE_SWEEPS=1`
/// sweeps wider: all eight targets, mv2_224 too, and more budgets per case (several minutes).
#[test]
fn random_budgets_on_networks_fit_and_stay_bit_exact() {
    let wide = std::env::var("NPU_WIDE_SWEEPS").is_ok_and(|v| v == "1");
    let seed = std::env::var("NPU_BUDGET_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x9E37_79B9_7F4A_7C15_u64);
    eprintln!("random budgets: NPU_BUDGET_SEED={seed} (NPU_WIDE_SWEEPS={wide})");
    let mut rng = Rng(seed | 1);
    let mut models = network_fixtures();
    if wide {
        models.push("mv2_224".into());
    }
    let (between, below) = if wide { (6, 3) } else { (2, 1) };
    // Each job: a model, a target, and the draws in 0..1 (scaled to its ends once known).
    let mut jobs: Vec<(String, &str, Vec<f64>, Vec<f64>)> = Vec::new();
    let unit = |rng: &mut Rng| (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
    for model in &models {
        let pool: Vec<&'static str> = ALL_TARGETS
            .iter()
            .chain(&U65_SHARED_SRAM)
            .copied()
            .collect();
        let targets: Vec<&str> = if wide {
            pool
        } else {
            let a = rng.range(0, pool.len() - 1);
            let b = (a + rng.range(1, pool.len() - 1)) % pool.len();
            vec![pool[a], pool[b]]
        };
        for target in targets {
            let up = (0..between).map(|_| unit(&mut rng)).collect();
            let down = (0..below).map(|_| unit(&mut rng)).collect();
            jobs.push((model.clone(), target, up, down));
        }
    }
    let results = par_map(
        &jobs,
        |(model, target, up, down)| -> Result<usize, String> {
            let e = ends(model, target)?;
            let graph = load(model, "tflite")?;
            let mut failures = Vec::new();
            let mut checked = 0;
            for &u in up {
                let budget = e.size + ((e.perf.max(e.size) - e.size) as f64 * u) as usize;
                match check_budget(&graph, model, target, budget) {
                    Ok(_) => checked += 1,
                    Err(f) => failures.push(f),
                }
            }
            for &u in down {
                // Between half the size-mode arena and one byte below it.
                let budget = e.size / 2 + ((e.size - 1 - e.size / 2) as f64 * u) as usize;
                let what = format!(
                    "{model} on {target}, arena_budget {budget} (size mode: {})",
                    e.size
                );
                match compile_case(&graph, target, |o| o.arena_budget = Some(budget)) {
                    Err(npu_build::Error::Budget { needed, limit, .. })
                        if limit == budget as u64 && needed >= e.size as u64 =>
                    {
                        match check_budget(&graph, model, target, needed as usize) {
                            Ok(_) => checked += 1,
                            Err(f) => failures.push(format!("{f} (the need stated for {budget})")),
                        }
                    }
                    Err(e) => failures.push(format!("{what}: {e}")),
                    Ok(c) => failures.push(format!(
                        "{what}: compiled to an arena of {} bytes below the size-mode arena",
                        c.arena_size
                    )),
                }
            }
            if failures.is_empty() {
                Ok(checked)
            } else {
                Err(failures.join("\n"))
            }
        },
    );
    let checked: usize = results.iter().filter_map(|r| r.as_ref().ok()).sum();
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    eprintln!(
        "random budgets: {} model/target pairs, {checked} budgets checked",
        jobs.len()
    );
    assert!(
        failures.is_empty(),
        "NPU_BUDGET_SEED={seed}: {} failed:\n{failures:#?}",
        failures.len()
    );
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
/// The late layers' weights, read once, are prefetched in pieces during earlier operations
/// (`prefetch`): the stream takes at most 0.9x the cycles of Vela's (both under our estimator;
/// 7,026,526 against 7,892,480 when written) in an arena within 1% of Vela's.
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
    let vela_dir = fixtures_dir().join("mv2_224/vela/ethos-u55-128");
    let vela_stream = std::fs::read(vela_dir.join("cmd_stream.bin")).expect("Vela's stream");
    let vela = npu_build::ethos_u::perf::estimate_stream(&vela_stream, &target)
        .expect("estimate Vela's stream")
        .total_cycles;
    assert!(
        total * 10 <= vela * 9,
        "{total} cycles against Vela's {vela}: more than 0.9x"
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(vela_dir.join("meta.json")).expect("meta.json"))
            .expect("meta.json parses");
    let vela_sram = meta["scratch_size"].as_u64().expect("scratch_size") as usize;
    assert!(
        compiled.arena_size * 100 <= vela_sram * 101,
        "arena {} against Vela's {vela_sram}",
        compiled.arena_size
    );
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

/// Found by `NPU_WIDE_SWEEPS=1 NPU_BUDGET_SEED=12345`: mv2_224 on ethos-u55-32 under a budget
/// of 788,387 bytes (also 888,758; 836,432 on ethos-u55-64; 833,539 and 863,094 on the U65s
/// with Shared_Sram). A weight copy reuses ring rows of a striped chain that its last reader,
/// still in flight, does not read (its box wraps: one row at the ring's end, six at its
/// start); the hazard checker took the bounding interval of the two tiles for the read and
/// reported a hazard that is none. It now traces each tile (`npu-rt` `sim::fmap`), and these
/// budgets run bit-exact with the checker on, among the rows the two tiles do read.
#[test]
fn mv2_weight_copy_into_ring_rows_its_reader_skips_is_no_hazard() {
    let graph = load("mv2_224", "tflite").expect("import");
    for (target, budget) in [("ethos-u55-32", 788_387), ("ethos-u55-64", 836_432)] {
        check_budget(&graph, "mv2_224", target, budget).unwrap_or_else(|f| panic!("{f}"));
    }
}
