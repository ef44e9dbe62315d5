//! ONNX models as onnxruntime's `quantize_static` writes them (`fixtures/onnx_wild/`, made by
//! `tools/make_onnx_wild.py`): QDQ and QOperator formats, uint8 (U8S8) and int8 (S8S8)
//! activations, per-channel and per-tensor weights, float islands (operators a quantizer leaves
//! in float, or whose output quantization the NPU cannot produce) and exporter idioms (MatMul +
//! bias Add, Flatten + Gemm, channel shuffle).
//!
//! Per model and input: the reference interpreter within one output quantization step of
//! onnxruntime (it requantizes in float where the int8 kernels use fixed-point multipliers), and
//! the compiled model on the virtual NPU (ethos-u55-128, ethos-u65-256) and with every operator
//! forced to the CPU kernels bit-exact with the reference interpreter.

use std::path::{Path, PathBuf};

use npu_build::ethos_u::{CompileOptions, compile_with};
use npu_build::ir::Graph;
use npu_build::value::{Data, Value};
use npu_rt::ethos_u::config::{AcceleratorConfig, ETHOS_U55_128, ETHOS_U65_256};
use npu_tests::{differences, fixtures_dir};

fn wild_dir() -> PathBuf {
    fixtures_dir().join("onnx_wild")
}

fn floats(v: &Value) -> &[f32] {
    match &v.data {
        Data::F32(x) => x,
        other => panic!("expected f32 values, got {}", other.dtype()),
    }
}

fn npy(dir: &Path, name: &str) -> Value {
    Value::read_npy(&dir.join("io").join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The tolerance in output steps: one, unless `io.json` states more (`tolerance_steps`, with
/// the reason in `tolerance`).
fn tolerance_steps(dir: &Path) -> f64 {
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("io/io.json")).expect("io.json"))
            .expect("io.json parses");
    json["tolerance_steps"].as_f64().unwrap_or(1.0)
}

fn output_step(dir: &Path) -> f64 {
    let text = std::fs::read_to_string(dir.join("io").join("io.json")).expect("io.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("io.json is JSON");
    json["output_step"].as_f64().expect("output_step")
}

fn load(model: &str) -> (PathBuf, Graph) {
    let dir = wild_dir().join(model);
    let graph = npu_build::import::load(&dir.join(format!("{model}.onnx")))
        .unwrap_or_else(|e| panic!("{model}: import: {e}"));
    (dir, graph)
}

/// The reference interpreter agrees with onnxruntime within one output step on every element
/// (or the model's stated tolerance), and with onnxruntime's node-by-node evaluation (graph
/// optimizations off: DequantizeLinear, the float operator, QuantizeLinear; `output_noopt_K`)
/// exactly (or within `noopt_tolerance_steps`).
fn reference_within_one_step(model: &str) {
    let (dir, _) = load(model);
    compare_outputs(model, &dir, "output", tolerance_steps(&dir));
    if dir.join("io/output_noopt_0.npy").exists() {
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("io/io.json")).expect("io.json"))
                .expect("io.json parses");
        let steps = json["noopt_tolerance_steps"].as_f64().unwrap_or(0.0);
        compare_outputs(model, &dir, "output_noopt", steps);
    }
}

/// The reference's outputs against `io/{prefix}_K.npy`, within `steps` output steps.
fn compare_outputs(model: &str, dir: &Path, prefix: &str, steps: f64) {
    let (_, graph) = load(model);
    let step = output_step(dir);
    assert!(step > 0.0 && step < 1.0, "implausible output_step {step}");
    let mut worst = 0.0f64;
    let mut failures = Vec::new();
    for k in 0..3 {
        let input = npy(dir, &format!("input_{k}.npy"));
        let want = npy(dir, &format!("{prefix}_{k}.npy"));
        let got = npu_build::reference::run(&graph, std::slice::from_ref(&input))
            .unwrap_or_else(|e| panic!("{model} input {k}: run failed: {e}"));
        assert_eq!(got[0].shape, want.shape, "{model} input {k}: output shape");
        if model.starts_with("mnv3s") {
            // The classifiers: the same class as onnxruntime.
            let top =
                |v: &[f32]| (0..v.len()).fold(0, |best, i| if v[i] > v[best] { i } else { best });
            assert_eq!(
                top(floats(&got[0])),
                top(floats(&want)),
                "{model} input {k}: top-1 differs from onnxruntime ({prefix})"
            );
        }
        for (i, (&g, &w)) in floats(&got[0]).iter().zip(floats(&want)).enumerate() {
            let d = (f64::from(g) - f64::from(w)).abs();
            worst = worst.max(d / step);
            // A hair of float slack: both sides are multiples of the step up to rounding.
            if d > step * (steps + 1e-4) {
                failures.push(format!(
                    "input {k}, element {i}: {g} vs onnxruntime ({prefix}) {w} ({:.2} steps)",
                    d / step
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{model}: {} elements off by more than {steps} step(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("{model}: worst difference from {prefix} {worst:.3} output steps");
}

/// The compiled model (NPU and CPU steps) is bit-exact with the reference interpreter.
fn compiled_bit_exact(model: &str, target: &'static AcceleratorConfig, options: &CompileOptions) {
    let (dir, graph) = load(model);
    let c = compile_with(&graph, target, options)
        .unwrap_or_else(|e| panic!("{model} on {}: compile: {e}", target.name));
    for k in 0..3 {
        let input = npy(&dir, &format!("input_{k}.npy"));
        let want = npu_build::reference::run(&graph, std::slice::from_ref(&input))
            .unwrap_or_else(|e| panic!("{model} input {k}: reference: {e}"));
        let (got, _) = c
            .run_sim(std::slice::from_ref(&input))
            .unwrap_or_else(|e| panic!("{model} on {} input {k}: run: {e}", target.name));
        assert_eq!(
            differences(&got[0], &want[0]),
            "",
            "{model} on {} input {k}",
            target.name
        );
    }
}

/// Every operator of the graph on the CPU kernels.
fn all_on_cpu(model: &str) -> CompileOptions {
    let (_, graph) = load(model);
    CompileOptions {
        force_cpu: graph.ops.iter().map(|op| op.name.clone()).collect(),
        ..Default::default()
    }
}

macro_rules! wild_tests {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                use super::*;

                #[test]
                fn reference_vs_onnxruntime() {
                    reference_within_one_step(stringify!($name));
                }

                #[test]
                fn u55_128_bit_exact() {
                    compiled_bit_exact(stringify!($name), &ETHOS_U55_128, &CompileOptions::default());
                }

                #[test]
                fn u65_256_bit_exact() {
                    compiled_bit_exact(stringify!($name), &ETHOS_U65_256, &CompileOptions::default());
                }

                #[test]
                fn cpu_kernels_bit_exact() {
                    let m = stringify!($name);
                    compiled_bit_exact(m, &ETHOS_U55_128, &all_on_cpu(m));
                }
            }
        )*

        /// Every model directory under `fixtures/onnx_wild/` is tested above.
        #[test]
        fn every_wild_model_is_listed() {
            let listed = [$(stringify!($name),)* TF2ONNX];
            let mut missing = Vec::new();
            for e in std::fs::read_dir(wild_dir()).expect("fixtures/onnx_wild") {
                let name = e.expect("entry").file_name().into_string().expect("utf-8");
                if wild_dir().join(&name).is_dir() && !listed.contains(&name.as_str()) {
                    missing.push(name);
                }
            }
            assert!(missing.is_empty(), "not listed in onnx_wild.rs: {missing:?}");
        }
    };
}

wild_tests!(
    // ONNX-only activation forms (x * HardSigmoid(x), x * Sigmoid(x), GELU's Erf expansion).
    act_mix_qdq_s8s8_pt,
    act_mix_qdq_u8s8_pt,
    mlp_qdq_s8s8_pc,
    mlp_qdq_s8s8_pt,
    mlp_qdq_u8s8_pc,
    mlp_qdq_u8s8_pt,
    mlp_qop_s8s8_pc,
    mlp_qop_s8s8_pt,
    mlp_qop_u8s8_pc,
    mlp_qop_u8s8_pt,
    shuffle_cnn_qdq_s8s8_pc,
    shuffle_cnn_qdq_s8s8_pt,
    shuffle_cnn_qdq_s8s8_pc_external,
    shuffle_cnn_qdq_u8s8_pc,
    shuffle_cnn_qdq_u8s8_pt,
    shuffle_cnn_qop_s8s8_pc,
    shuffle_cnn_qop_s8s8_pt,
    shuffle_cnn_qop_u8s8_pc,
    shuffle_cnn_qop_u8s8_pt,
    // onnxruntime's U8U8: uint8 weights, asymmetric per tensor.
    mlp_qdq_u8u8_pc,
    mlp_qdq_u8u8_pt,
    mlp_qop_u8u8_pc,
    mlp_qop_u8u8_pt,
    shuffle_cnn_qdq_u8u8_pc,
    shuffle_cnn_qdq_u8u8_pt,
    shuffle_cnn_qop_u8u8_pc,
    shuffle_cnn_qop_u8u8_pt,
    // A transformer encoder block: LayerNormalization in float (onnxruntime leaves it so), the
    // attention's MatMuls of two activations; `islands` leaves Div, Softmax, Erf, Mul, ReduceMean
    // and the head reshapes in float too, `floatmm` the MatMuls as well.
    encoder_qdq_s8s8_pt,
    encoder_qdq_u8s8_pt,
    encoder_qdq_s8s8_islands,
    // Only Add quantized: every MatMul (weights and attention) runs in f32.
    encoder_qdq_s8s8_floatmm,
    // A PyTorch-style decoder step: bilinear Resize quantized (TFLite's integer interpolation,
    // one step from onnxruntime's) and left in float.
    upsample_qdq_u8s8_pt,
    upsample_qdq_s8s8_floatresize,
    // keras.applications MobileNetV3Small through tf2onnx and onnxruntime's quantizer.
    mnv3s_qdq_s8s8_pc,
    mnv3s_qdq_u8u8_pt,
    mnv3s_qop_u8s8_pc,
);

/// tf2onnx's conversion of an int8 TFLite Keras classifier (nonzero biases; dense layers as QDQ
/// MatMul/Gemm + bias): bit-exact with TFLite's reference kernels from the `.onnx` and the
/// `.tflite`, through the reference interpreter and compiled (NPU targets, all on the CPU).
const TF2ONNX: &str = "tf2onnx_classifier";

#[test]
fn tf2onnx_classifier_bit_exact_with_tflite() {
    let model = format!("onnx_wild/{TF2ONNX}");
    let dir = wild_dir().join(TF2ONNX);
    for ext in ["onnx", "tflite"] {
        let graph = npu_build::import::load(&dir.join(format!("{TF2ONNX}.{ext}")))
            .unwrap_or_else(|e| panic!("{ext}: import: {e}"));
        let all_cpu = CompileOptions {
            force_cpu: graph.ops.iter().map(|op| op.name.clone()).collect(),
            ..Default::default()
        };
        let compiled = [
            (
                "ethos-u55-128",
                compile_with(&graph, &ETHOS_U55_128, &CompileOptions::default()),
            ),
            (
                "ethos-u65-256",
                compile_with(&graph, &ETHOS_U65_256, &CompileOptions::default()),
            ),
            ("cpu", compile_with(&graph, &ETHOS_U55_128, &all_cpu)),
        ];
        for k in 0..3 {
            let inputs = npu_tests::fixture_inputs(&model, k);
            let want = npu_tests::fixture_output(&model, k);
            let got = npu_build::reference::run(&graph, &inputs).expect("reference");
            assert_eq!(
                differences(&got[0], &want),
                "",
                "{ext} reference, input {k}"
            );
            for (target, c) in &compiled {
                let c = c
                    .as_ref()
                    .unwrap_or_else(|e| panic!("{ext} {target}: compile: {e}"));
                let (got, _) = c.run_sim(&inputs).expect("run");
                assert_eq!(differences(&got[0], &want), "", "{ext} {target}, input {k}");
            }
        }
    }
}

/// A missing or truncated external data file is an error naming the file.
#[test]
fn broken_external_data_names_the_file() {
    let model = "shuffle_cnn_qdq_s8s8_pc_external";
    let src = wild_dir().join(model);
    let tmp = std::env::temp_dir().join(format!("npu-onnx-wild-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("temp dir");
    let onnx = tmp.join(format!("{model}.onnx"));
    std::fs::copy(src.join(format!("{model}.onnx")), &onnx).expect("copy");
    let data = tmp.join(format!("{model}.onnx.data"));
    let _ = std::fs::remove_file(&data);
    let e = npu_build::import::load(&onnx)
        .expect_err("no data file")
        .to_string();
    assert!(
        e.contains(&format!("{model}.onnx.data")) && e.contains("cannot be read"),
        "{e}"
    );
    let full = std::fs::read(src.join(format!("{model}.onnx.data"))).expect("data");
    std::fs::write(&data, &full[..full.len() / 2]).expect("write");
    let e = npu_build::import::load(&onnx)
        .expect_err("truncated")
        .to_string();
    assert!(
        e.contains(&format!("{model}.onnx.data")) && e.contains("truncated"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

/// The generated module (apart from the test module of the same name).
mod via_macro {
    npu_macros::include_model!(
        "../fixtures/onnx_wild/shuffle_cnn_qdq_s8s8_pc_external/shuffle_cnn_qdq_s8s8_pc_external.onnx",
        target = "ethos-u55-128"
    );
}

/// A model with external data through `include_model!` (the side file read next to the model
/// and tracked): bit-exact with the reference interpreter.
#[test]
fn external_data_via_include_model() {
    let (dir, graph) = load("shuffle_cnn_qdq_s8s8_pc_external");
    let mut npu = npu_rt::sim::VirtualNpu::new(&ETHOS_U55_128);
    let mut arena = Box::new(via_macro::shuffle_cnn_qdq_s8s8_pc_external::Arena::new());
    for k in 0..3 {
        let x = npy(&dir, &format!("input_{k}.npy"));
        let want = npu_build::reference::run(&graph, std::slice::from_ref(&x)).expect("reference");
        let mut input = via_macro::shuffle_cnn_qdq_s8s8_pc_external::Input::zeroed();
        input.input_flat_mut().copy_from_slice(floats(&x));
        let out = via_macro::shuffle_cnn_qdq_s8s8_pc_external::run(&mut npu, &mut arena, &input)
            .expect("run");
        let got: Vec<u32> = out.softmax_35_flat().iter().map(|v| v.to_bits()).collect();
        let want: Vec<u32> = floats(&want[0]).iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, want, "input {k}");
    }
}
