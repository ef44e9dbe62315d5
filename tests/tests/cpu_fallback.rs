//! CPU fallback: graphs split between the NPU and the CPU, run step by step over one arena.
//!
//! - `ort_small_cnn_nchw` (float input, Quantize + Transpose in front, Dequantize behind): the
//!   conversions run on the CPU, the rest on the NPU; every output element within one output
//!   quantization step of onnxruntime, through `run_sim` and through `include_model!`.
//! - `op_softmax`: bit-exact with TFLite on the NPU (LUT path) and forced to the CPU.
//! - `cpu_fallback/softmax_wide` (made by `fixtures/cpu_fallback/make.py`): a softmax over 5120
//!   values, beyond what the NPU lowering accepts, between two NPU convolutions: NPU -> CPU ->
//!   NPU, bit-exact with TFLite's reference kernels.

use npu_build::ethos_u::{CompileOptions, Compiled, Step, compile_with};
use npu_build::value::{Data, Value};
use npu_rt::ethos_u::config::ETHOS_U55_128;
use npu_tests::{differences, fixtures_dir};

fn floats(v: &Value) -> &[f32] {
    match &v.data {
        Data::F32(x) => x,
        other => panic!("expected f32 values, got {}", other.dtype()),
    }
}

fn output_step(dir: &std::path::Path) -> f64 {
    let text = std::fs::read_to_string(dir.join("io").join("io.json")).expect("io.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("io.json is JSON");
    json["output_step"].as_f64().expect("output_step")
}

fn npy(dir: &std::path::Path, name: &str) -> Value {
    Value::read_npy(&dir.join("io").join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn kinds(c: &Compiled) -> Vec<String> {
    c.steps
        .iter()
        .map(|s| match s {
            Step::Npu { .. } => "NPU".to_string(),
            Step::Cpu(c) => c.op.clone(),
        })
        .collect()
}

/// Every element of `got` within one step (plus float slack) of `want`; returns the worst
/// difference in steps.
fn within_one_step(k: usize, got: &[f32], want: &[f32], step: f64) -> f64 {
    assert_eq!(got.len(), want.len(), "input {k}: output length");
    let mut worst = 0.0f64;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let d = (f64::from(g) - f64::from(w)).abs();
        worst = worst.max(d / step);
        assert!(
            d <= step * (1.0 + 1e-4),
            "input {k}, element {i}: {g} vs onnxruntime {w} ({:.2} steps)",
            d / step
        );
    }
    worst
}

#[test]
fn ort_small_cnn_mixed_on_the_simulator() {
    let dir = fixtures_dir().join("ort_small_cnn_nchw");
    let graph = npu_build::import::load(&dir.join("ort_small_cnn_nchw.onnx")).expect("import");
    let c = compile_with(&graph, &ETHOS_U55_128, &CompileOptions::default()).expect("compile");
    assert_eq!(
        kinds(&c),
        // The NCHW -> NHWC Transpose runs on the NPU as a strided copy (moveb).
        ["Quantize", "NPU", "Dequantize"],
        "steps"
    );
    let step = output_step(&dir);
    let mut worst = 0.0f64;
    for k in 0..3 {
        let input = npy(&dir, &format!("input_{k}.npy"));
        let want = npy(&dir, &format!("output_{k}.npy"));
        let (got, _) = c.run_sim(std::slice::from_ref(&input)).expect("run");
        assert_eq!(got[0].shape, want.shape);
        worst = worst.max(within_one_step(k, floats(&got[0]), floats(&want), step));
        // And bit-exact with the reference interpreter.
        let reference = npu_build::reference::run(&graph, &[input]).expect("reference");
        assert_eq!(differences(&got[0], &reference[0]), "", "input {k}");
    }
    eprintln!("worst difference: {worst:.3} output steps");
}

fn softmax_cases(options: &CompileOptions, want_steps: &[&str]) {
    let model = "op_softmax";
    let dir = fixtures_dir().join(model);
    for ext in ["tflite", "onnx"] {
        let graph = npu_build::import::load(&dir.join(format!("{model}.{ext}"))).expect("import");
        let c = compile_with(&graph, &ETHOS_U55_128, options).expect("compile");
        assert_eq!(kinds(&c), want_steps, "{ext}");
        for k in 0..3 {
            let inputs = npu_tests::fixture_inputs(model, k);
            let (got, _) = c.run_sim(&inputs).expect("run");
            let want = npu_tests::fixture_output(model, k);
            assert_eq!(differences(&got[0], &want), "", "{ext} input {k}");
        }
    }
}

#[test]
fn softmax_on_the_npu_is_bit_exact() {
    softmax_cases(&CompileOptions::default(), &["NPU"]);
}

#[test]
fn softmax_forced_to_the_cpu_is_bit_exact() {
    let by_kind = CompileOptions {
        force_cpu: vec!["Softmax".into()],
        ..Default::default()
    };
    softmax_cases(&by_kind, &["Softmax"]);
}

#[test]
fn force_cpu_by_node_name() {
    let dir = fixtures_dir().join("op_softmax");
    let graph = npu_build::import::load(&dir.join("op_softmax.tflite")).expect("import");
    let name = graph.ops[0].name.clone();
    let c = compile_with(
        &graph,
        &ETHOS_U55_128,
        &CompileOptions {
            force_cpu: vec![name],
            ..Default::default()
        },
    )
    .expect("compile");
    assert_eq!(kinds(&c), ["Softmax"]);
    assert_eq!(
        c.assignment[0].cpu_reason.as_deref(),
        Some(npu_build::ethos_u::partition::FORCED_REASON)
    );
}

fn softmax_wide() -> (std::path::PathBuf, npu_build::ir::Graph) {
    let dir = fixtures_dir().join("cpu_fallback").join("softmax_wide");
    let graph = npu_build::import::load(&dir.join("softmax_wide.tflite")).expect("import");
    (dir, graph)
}

#[test]
fn softmax_beyond_the_npu_limit_runs_mixed_and_bit_exact() {
    let (dir, graph) = softmax_wide();
    let c = compile_with(&graph, &ETHOS_U55_128, &CompileOptions::default()).expect("compile");
    assert_eq!(kinds(&c), ["NPU", "Softmax", "NPU"], "steps");
    let reason = c
        .assignment
        .iter()
        .find_map(|a| a.cpu_reason.clone())
        .expect("a CPU operator");
    assert!(reason.contains("depth 5120"), "{reason}");
    for k in 0..3 {
        let input = npy(&dir, &format!("input_{k}.npy"));
        let want = npy(&dir, &format!("output_{k}.npy"));
        let (got, _) = c.run_sim(&[input]).expect("run");
        assert_eq!(differences(&got[0], &want), "", "input {k}");
    }
}

#[test]
fn without_cpu_fallback_every_cpu_operator_is_an_error() {
    let strict = CompileOptions {
        cpu_fallback: false,
        ..Default::default()
    };
    let (_, graph) = softmax_wide();
    let e = compile_with(&graph, &ETHOS_U55_128, &strict)
        .expect_err("must not compile")
        .to_string();
    assert!(e.contains("CPU fallback is disabled"), "{e}");
    assert!(e.contains("(Softmax)") && e.contains("depth 5120"), "{e}");

    let dir = fixtures_dir().join("ort_small_cnn_nchw");
    let graph = npu_build::import::load(&dir.join("ort_small_cnn_nchw.onnx")).expect("import");
    let e = compile_with(&graph, &ETHOS_U55_128, &strict)
        .expect_err("must not compile")
        .to_string();
    for op in ["(Quantize)", "(Dequantize)"] {
        assert!(e.contains(op), "{op} missing in: {e}");
    }
    // The Transpose runs on the NPU (moveb).
    assert!(!e.contains("(Transpose)"), "{e}");
    assert!(e.contains("2 operator(s)"), "{e}");
}

npu_macros::include_model!(
    "../fixtures/ort_small_cnn_nchw/ort_small_cnn_nchw.onnx",
    target = "ethos-u55-128"
);

/// The generated module of a float-boundary model: f32 `Input`/`Output`, and `run` interleaving
/// the CPU conversions with the NPU command stream on the virtual NPU.
#[test]
fn ort_small_cnn_via_include_model() {
    let dir = fixtures_dir().join("ort_small_cnn_nchw");
    let step = output_step(&dir);
    let mut npu = npu_rt::sim::VirtualNpu::new(&ETHOS_U55_128);
    let mut arena = Box::new(ort_small_cnn_nchw::Arena::new());
    for k in 0..3 {
        let x = npy(&dir, &format!("input_{k}.npy"));
        let want = npy(&dir, &format!("output_{k}.npy"));
        let mut input = ort_small_cnn_nchw::Input::zeroed();
        let field: &mut [f32] = input.input_flat_mut();
        field.copy_from_slice(floats(&x));
        let out = ort_small_cnn_nchw::run(&mut npu, &mut arena, &input).expect("run");
        within_one_step(k, out.gemm_24_flat(), floats(&want), step);
    }
}

npu_macros::include_model!(
    "../fixtures/cpu_fallback/softmax_wide/softmax_wide.tflite",
    target = "ethos-u55-128"
);

/// NPU -> CPU -> NPU through the generated `run`: bit-exact with TFLite.
#[test]
fn softmax_wide_via_include_model() {
    let dir = fixtures_dir().join("cpu_fallback").join("softmax_wide");
    let mut npu = npu_rt::sim::VirtualNpu::new(&ETHOS_U55_128);
    let mut arena = Box::new(softmax_wide::Arena::new());
    for k in 0..3 {
        let x = npy(&dir, &format!("input_{k}.npy"));
        let want = npy(&dir, &format!("output_{k}.npy"));
        let mut input = softmax_wide::Input::zeroed();
        let Data::I8(xs) = &x.data else {
            panic!("int8 input")
        };
        input
            .serving_default_keras_tensor_0_flat_mut()
            .copy_from_slice(xs);
        let out = softmax_wide::run(&mut npu, &mut arena, &input).expect("run");
        let Data::I8(ws) = &want.data else {
            panic!("int8 output")
        };
        assert_eq!(
            out.stateful_partitioned_call_1_0_flat(),
            &ws[..],
            "input {k}"
        );
    }
}

/// A hand-made int8 chain (stand-alone ReLU6 with a rescale, int8 -> uint8 requantization, a
/// reshape into the graph output): each operator forced to the CPU in turn (and all at once)
/// gives every byte of the reference interpreter's result.
#[test]
fn cpu_requantize_activation_and_copy_equal_the_reference() {
    use npu_build::ir::{Activation, DType, Graph, Op, OpKind, Quantization, Tensor};
    let t = |name: &str, shape: &[usize], dtype: DType, q: (f32, i32)| Tensor {
        name: name.into(),
        shape: shape.to_vec(),
        dtype,
        quant: Some(Quantization::per_tensor(q.0, q.1)),
        data: None,
    };
    let mut g = Graph {
        name: "chain".into(),
        ..Default::default()
    };
    let x = g.add_tensor(t("x", &[1, 4, 4, 8], DType::I8, (0.05, -3)));
    let a = g.add_tensor(t("a", &[1, 4, 4, 8], DType::I8, (0.03, -100)));
    let q = g.add_tensor(t("q", &[1, 4, 4, 8], DType::U8, (0.02, 7)));
    let y = g.add_tensor(t("y", &[1, 128], DType::U8, (0.02, 7)));
    let op = |name: &str, kind: OpKind, i, o| Op {
        name: name.into(),
        kind,
        inputs: vec![i],
        outputs: vec![o],
    };
    g.ops = vec![
        op("relu6", OpKind::Activation(Activation::Relu6), x, a),
        op("requant", OpKind::Quantize, a, q),
        op("flatten", OpKind::Reshape, q, y),
    ];
    g.inputs = vec![x];
    g.outputs = vec![y];
    let mut seed = 7u32;
    let inputs: Vec<Value> = (0..3)
        .map(|_| {
            let data: Vec<i8> = (0..128)
                .map(|_| {
                    seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (seed >> 24) as i8
                })
                .collect();
            Value::new(vec![1, 4, 4, 8], Data::I8(data)).expect("value")
        })
        .collect();
    for force in [
        vec![],
        vec!["relu6"],
        vec!["requant"],
        vec!["flatten"],
        vec!["relu6", "requant", "flatten"],
    ] {
        let options = CompileOptions {
            force_cpu: force.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        let c = compile_with(&g, &ETHOS_U55_128, &options).expect("compile");
        assert_eq!(c.cpu_ops(), force.len(), "{force:?}");
        for (k, input) in inputs.iter().enumerate() {
            let want = npu_build::reference::run(&g, std::slice::from_ref(input)).expect("ref");
            let (got, _) = c.run_sim(std::slice::from_ref(input)).expect("run");
            assert_eq!(differences(&got[0], &want[0]), "", "{force:?} input {k}");
        }
    }
}

/// `model` (from .tflite and .onnx) with the operators `pattern` selects forced to the CPU:
/// the steps are `want_steps`, every output byte equal to TFLite's for the three inputs.
fn forced_cpu_cases(model: &str, pattern: &str, want_steps: &[&str]) {
    let dir = fixtures_dir().join(model);
    let options = CompileOptions {
        force_cpu: vec![pattern.into()],
        ..Default::default()
    };
    for ext in ["tflite", "onnx"] {
        let graph = npu_build::import::load(&dir.join(format!("{model}.{ext}"))).expect("import");
        let c = compile_with(&graph, &ETHOS_U55_128, &options).expect("compile");
        assert_eq!(kinds(&c), want_steps, "{model}.{ext}");
        for k in 0..3 {
            let inputs = npu_tests::fixture_inputs(model, k);
            let (got, _) = c.run_sim(&inputs).expect("run");
            let want = npu_tests::fixture_output(model, k);
            assert_eq!(got.len(), 1, "{model}.{ext}: outputs");
            assert_eq!(differences(&got[0], &want), "", "{model}.{ext} input {k}");
        }
    }
}

#[test]
fn add_forced_to_the_cpu_is_bit_exact() {
    forced_cpu_cases("op_add", "Add", &["Add"]);
}

#[test]
fn mul_forced_to_the_cpu_is_bit_exact() {
    forced_cpu_cases("op_mul", "Mul", &["Mul"]);
}

#[test]
fn maxpool_forced_to_the_cpu_is_bit_exact() {
    forced_cpu_cases("op_maxpool3x3_s2", "MaxPool", &["MaxPool"]);
}

#[test]
fn avgpool_forced_to_the_cpu_is_bit_exact() {
    forced_cpu_cases("op_avgpool2x2", "AveragePool", &["AveragePool"]);
}

npu_macros::include_model!(
    "../fixtures/op_lstm/op_lstm.tflite",
    target = "ethos-u55-128"
);

/// A stateful model through the generated `run`: the LSTM's state starts at TFLite's initial
/// value on the arena's first run and carries over between runs (the fixture's three outputs
/// come from one TFLite Micro interpreter invoked in order); `reset_state` starts over.
#[test]
fn lstm_state_carries_over_through_include_model() {
    let dir = fixtures_dir().join("op_lstm");
    let mut npu = npu_rt::sim::VirtualNpu::new(&ETHOS_U55_128);
    let mut arena = Box::new(op_lstm::Arena::new());
    let run = |npu: &mut npu_rt::sim::VirtualNpu, arena: &mut op_lstm::Arena, k: usize| {
        let x = npy(&dir, &format!("input_{k}.npy"));
        let mut input = op_lstm::Input::zeroed();
        let Data::I8(xs) = &x.data else {
            panic!("int8 input")
        };
        input
            .serving_default_input_1_0_flat_mut()
            .copy_from_slice(xs);
        let out = op_lstm::run(npu, arena, &input).expect("run");
        out.stateful_partitioned_call_0_flat().to_vec()
    };
    let want = |k: usize| match npy(&dir, &format!("output_{k}.npy")).data {
        Data::I8(v) => v,
        _ => panic!("int8 output"),
    };
    for k in 0..3 {
        assert_eq!(
            run(&mut npu, &mut arena, k),
            want(k),
            "input {k} in sequence"
        );
    }
    // Input 1 from a fresh state differs from input 1 after input 0 (the state matters)...
    op_lstm::reset_state(&mut arena);
    let fresh = run(&mut npu, &mut arena, 1);
    assert_ne!(fresh, want(1), "the state has an effect");
    // ...and after a reset, the sequence replays exactly.
    op_lstm::reset_state(&mut arena);
    for k in 0..3 {
        assert_eq!(
            run(&mut npu, &mut arena, k),
            want(k),
            "input {k} after reset"
        );
    }
}
