//! `ort_small_cnn_nchw`: an onnxruntime-quantized NCHW model with a float input and output.
//! Through the reference interpreter every output element must be within one quantization step
//! of the output (`output_step` in `io/io.json`) of onnxruntime's result (`io/output_K.npy`),
//! which requantizes in float where the int8 kernels use fixed-point multipliers.

use npu_build::ir::{DType, OpKind};
use npu_build::value::{Data, Value};

const MODEL: &str = "ort_small_cnn_nchw";

fn output_step() -> f64 {
    let path = npu_tests::fixtures_dir()
        .join(MODEL)
        .join("io")
        .join("io.json");
    let text = std::fs::read_to_string(&path).expect("io.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("io.json is JSON");
    json["output_step"].as_f64().expect("output_step")
}

fn floats(v: &Value) -> &[f32] {
    match &v.data {
        Data::F32(x) => x,
        other => panic!("expected f32 values, got {}", other.dtype()),
    }
}

#[test]
fn outputs_within_one_step_of_onnxruntime() {
    let dir = npu_tests::fixtures_dir().join(MODEL);
    let graph = npu_build::import::load(&dir.join(format!("{MODEL}.onnx"))).expect("import");
    let step = output_step();
    assert!(step > 0.0 && step < 1.0, "implausible output_step {step}");
    let mut worst = 0.0f64;
    let mut failures = Vec::new();
    for k in 0..3 {
        let input = Value::read_npy(&dir.join("io").join(format!("input_{k}.npy"))).expect("input");
        let want =
            Value::read_npy(&dir.join("io").join(format!("output_{k}.npy"))).expect("output");
        let got = npu_build::reference::run(&graph, std::slice::from_ref(&input))
            .unwrap_or_else(|e| panic!("input {k}: run failed: {e}"));
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].shape, want.shape, "input {k}: output shape");
        for (i, (&g, &w)) in floats(&got[0]).iter().zip(floats(&want)).enumerate() {
            let d = (f64::from(g) - f64::from(w)).abs();
            worst = worst.max(d);
            // A hair of float slack: both sides are multiples of the step up to rounding.
            if d > step * (1.0 + 1e-4) {
                failures.push(format!(
                    "input {k}, element {i}: {g} vs onnxruntime {w} ({:.2} steps)",
                    d / step
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} elements off by more than one step:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("worst difference: {:.3} output steps", worst / step);
}

/// The NCHW float model keeps its declared interface and gets exactly the conversions it needs:
/// one Quantize and one Transpose (NCHW -> NHWC) after the input, one Dequantize before the
/// output, and no other layout change.
#[test]
fn boundary_conversions_only() {
    let dir = npu_tests::fixtures_dir().join(MODEL);
    let g = npu_build::import::load(&dir.join(format!("{MODEL}.onnx"))).expect("import");
    let input = &g.tensors[g.inputs[0]];
    let output = &g.tensors[g.outputs[0]];
    assert_eq!(
        (input.shape.as_slice(), input.dtype),
        (&[1, 3, 32, 32][..], DType::F32)
    );
    assert_eq!(
        (output.shape.as_slice(), output.dtype),
        (&[1, 10][..], DType::F32)
    );
    assert_eq!(input.name, "input");
    assert_eq!(output.name, "gemm_24");
    let kinds: Vec<&str> = g.ops.iter().map(|op| op.kind.name()).collect();
    assert_eq!(
        kinds,
        [
            "Quantize",
            "Transpose",
            "Conv2D",
            "DepthwiseConv2D",
            "Conv2D",
            "Add",
            "MaxPool",
            "Conv2D",
            "Mean",
            "FullyConnected",
            "Dequantize"
        ]
    );
    assert_eq!(
        g.ops[1].kind,
        OpKind::Transpose {
            perm: vec![0, 2, 3, 1]
        }
    );
}
