//! Every CPU kernel against TFLite: each fixture (single operators and all of MobileNetV2),
//! imported from `.tflite` and from `.onnx`, compiled with every operator forced to the CPU,
//! run through the mixed-step runner, must reproduce TFLite's reference output byte for byte
//! on every input, and every intermediate tensor must equal the reference interpreter's (itself
//! checked against TFLite's tensors in `reference_tflite.rs`); mv2's final output is nearly
//! constant, so the intermediates are what test it. A second pass forces only one operator kind
//! at a time, so CPU steps sit between NPU command streams over the same arena.

use npu_build::ethos_u::{CompileOptions, Step, compile_with};
use npu_rt::ethos_u::config::ETHOS_U55_128;
use npu_tests::{differences, fixture_inputs, fixture_output, fixtures_dir, tflite_fixtures};

/// Every IR operator name.
const ALL_KINDS: &[&str] = &[
    "Conv2D",
    "DepthwiseConv2D",
    "FullyConnected",
    "Add",
    "Sub",
    "Mul",
    "Mean",
    "AveragePool",
    "MaxPool",
    "Concat",
    "Reshape",
    "Pad",
    "Resize",
    "Softmax",
    "Transpose",
    "Quantize",
    "Dequantize",
    "Activation",
    // movea
    "Slice",
    // matmul
    "TransposeConv2D",
    "BatchMatMul",
    // moveb
    "Tile",
    "MirrorPad",
    "Reverse",
    "Gather",
    "DepthToSpace",
    "SpaceToDepth",
    // elem
    "Abs",
    "Neg",
    "Maximum",
    "Minimum",
    "SquaredDifference",
    "PRelu",
    // reduce
    "ReduceSum",
    "ReduceMax",
    "ReduceMin",
    "ArgMax",
    "ArgMin",
    // act
    "Logistic",
    "Tanh",
    "HardSwish",
    "LeakyRelu",
    "Elu",
    "Gelu",
    "Exp",
    "Log",
    "Swish",
    "Rsqrt",
    "Sqrt",
    "Table",
    "FloatFunction",
    "UnidirectionalSequenceLstm",
];

/// Input cases of every fixture.
const CASES: usize = 3;

/// Compiles `model.ext` (`model` a directory under `fixtures/`, the file named like its last
/// component) with `force` on the CPU and runs every case; failure messages.
fn check(model: &str, ext: &str, force: &[&str], all_cpu: bool) -> Vec<String> {
    let stem = model.rsplit('/').next().unwrap_or(model);
    let path = fixtures_dir().join(model).join(format!("{stem}.{ext}"));
    let graph = match npu_build::import::load(&path) {
        Ok(g) => g,
        Err(e) => return vec![format!("{model}.{ext}: import: {e}")],
    };
    let options = CompileOptions {
        force_cpu: force.iter().map(|s| s.to_string()).collect(),
        keep_intermediates: true,
        ..Default::default()
    };
    let interp = match npu_build::reference::Interpreter::new(&graph) {
        Ok(i) => i,
        Err(e) => return vec![format!("{model}.{ext}: reference: {e}")],
    };
    let c = match compile_with(&graph, &ETHOS_U55_128, &options) {
        Ok(c) => c,
        Err(e) => return vec![format!("{model}.{ext} {force:?}: compile: {e}")],
    };
    let npu_steps = c
        .steps
        .iter()
        .filter(|s| matches!(s, Step::Npu { .. }))
        .count();
    let mut failures = Vec::new();
    if all_cpu && npu_steps > 0 {
        failures.push(format!("{model}.{ext}: {npu_steps} NPU steps left"));
    }
    if c.cpu_ops() == 0 {
        failures.push(format!("{model}.{ext} {force:?}: nothing ran on the CPU"));
    }
    let mut checked = 0;
    // Stateful models (LSTM) run the cases in order on one arena, as their outputs were made.
    let sequence = (!graph.variables.is_empty()).then(|| {
        c.run_sim_sequence(
            &(0..CASES)
                .map(|k| fixture_inputs(model, k))
                .collect::<Vec<_>>(),
        )
    });
    for k in 0..CASES {
        let inputs = fixture_inputs(model, k);
        let run = match &sequence {
            Some(Ok(outs)) => Ok(outs[k].clone()),
            Some(Err(e)) => Err(e.to_string()),
            None => c
                .run_sim(&inputs)
                .map(|(o, _)| o)
                .map_err(|e| e.to_string()),
        };
        match run {
            Ok(out) => {
                for (j, got) in out.iter().enumerate() {
                    let d = differences(got, &expected_output(model, k, j, out.len()));
                    if !d.is_empty() {
                        failures.push(format!("{model}.{ext} {force:?} input {k} output {j}: {d}"));
                    }
                }
            }
            Err(e) => failures.push(format!("{model}.{ext} {force:?} input {k}: run: {e}")),
        }
        let (Ok(reference), Ok((arena, _))) = (interp.run_all(&inputs), c.run_sim_arena(&inputs))
        else {
            failures.push(format!("{model}.{ext} input {k}: intermediate run failed"));
            continue;
        };
        for (t, want) in reference.iter().enumerate() {
            let Some(want) = want else { continue };
            if graph.tensors[t].is_const() {
                continue;
            }
            let Some(got) = c.tensor_bytes(&arena, &graph, npu_build::ir::TensorId(t)) else {
                continue;
            };
            checked += 1;
            if got != want.data.to_le_bytes() {
                let name = &graph.tensors[t].name;
                failures.push(format!(
                    "{model}.{ext} {force:?} input {k}: tensor '{name}'"
                ));
            }
        }
    }
    // Every operator's output is an arena tensor.
    if checked < CASES * graph.ops.len() {
        failures.push(format!("{model}.{ext}: only {checked} tensors checked"));
    }
    failures
}

/// Reference output `j` of case `k` (`output_K.npy`, or `output_K_J.npy` for several outputs).
fn expected_output(model: &str, k: usize, j: usize, outputs: usize) -> npu_build::value::Value {
    if outputs == 1 {
        return fixture_output(model, k);
    }
    let p = fixtures_dir()
        .join(model)
        .join("io")
        .join(format!("output_{k}_{j}.npy"));
    npu_build::value::Value::read_npy(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn assert_none(failures: Vec<String>, cases: usize) {
    assert!(
        failures.is_empty(),
        "{} of {cases} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn single_ops() -> Vec<String> {
    tflite_fixtures()
        .into_iter()
        .filter(|m| m.starts_with("op_"))
        .collect()
}

#[test]
fn every_single_op_fixture_all_on_the_cpu() {
    let models = single_ops();
    assert!(models.len() >= 16, "fixtures: {models:?}");
    let mut failures = Vec::new();
    for m in &models {
        for ext in ["tflite", "onnx"] {
            // A fixture may lack its ONNX twin (its NOTES.txt says why).
            if !fixtures_dir().join(m).join(format!("{m}.{ext}")).exists() {
                continue;
            }
            failures.extend(check(m, ext, ALL_KINDS, true));
        }
    }
    assert_none(failures, models.len() * 2);
}

#[test]
fn mobilenet_v2_all_on_the_cpu() {
    let mut failures = check("mv2_224", "tflite", ALL_KINDS, true);
    failures.extend(check("mv2_224", "onnx", ALL_KINDS, true));
    assert_none(failures, 2);
}

/// One kind on the CPU, the rest on the NPU: CPU and NPU steps alternate over one arena.
#[test]
fn mobilenet_v2_one_kind_on_the_cpu() {
    let mut failures = Vec::new();
    let kinds = ["Conv2D", "DepthwiseConv2D", "Add", "Mean", "FullyConnected"];
    for kind in kinds {
        failures.extend(check("mv2_224", "tflite", &[kind], false));
    }
    assert_none(failures, kinds.len());
}

/// `fixtures/cpu_fallback` (made by its `make.py` with TFLite's reference kernels): channel and
/// asymmetric Pad, bilinear Resize (half-pixel, align-corners), nearest Resize 5x7 -> 11x13,
/// broadcast Sub/Mul with two inputs, Mean over H,W and over C with Concat, a requantizing
/// Concat with two outputs, stride-4 Conv2D and DepthwiseConv2D with a dilation-3 Conv2D, a 3-D
/// FullyConnected, the 5120-wide Softmax: every operator on the CPU, and only the first
/// operator (by node name) on the CPU with the rest on the NPU.
#[test]
fn cpu_fallback_fixtures_mixed_and_all_on_the_cpu() {
    let models = [
        "pad_conv",
        "resize_bilinear",
        "resize_bilinear_ac",
        "resize_nearest_odd",
        "sub_broadcast",
        "mean_axes",
        "concat_scales",
        "conv_wide_stride",
        "fc_batch",
        "softmax_wide",
    ];
    let mut failures = Vec::new();
    for m in models {
        let model = format!("cpu_fallback/{m}");
        failures.extend(check(&model, "tflite", ALL_KINDS, true));
        let path = fixtures_dir().join(&model).join(format!("{m}.tflite"));
        let graph = npu_build::import::load(&path).expect("import");
        let first = graph.ops[0].name.as_str();
        failures.extend(check(&model, "tflite", &[first], false));
    }
    assert_none(failures, models.len() * 2);
}
