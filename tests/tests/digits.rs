//! The trained digits model (`tools/train_digits.py`) over its whole held-out set: imported from
//! the `.tflite` and from the `.onnx`, compiled for every accelerator configuration, run on the
//! virtual NPU; all ten logits of each of the 360 images must equal TFLite's reference kernels'
//! (`test/tflite_logits.npy`) byte for byte.

use npu_build::ethos_u::compile;
use npu_build::target::Target;
use npu_build::value::{Data, Value};
use npu_tests::fixtures_dir;

fn held_out(file: &str) -> Value {
    let p = fixtures_dir().join("digits").join("test").join(file);
    Value::read_npy(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn i8s(v: &Value) -> &[i8] {
    match &v.data {
        Data::I8(d) => d,
        other => panic!("expected int8, got {:?}", other.dtype()),
    }
}

fn argmax(v: &[i8]) -> usize {
    (0..v.len()).fold(0, |best, i| if v[i] > v[best] { i } else { best })
}

#[test]
fn the_committed_model_is_the_trained_one() {
    // Computed from TFLite's logits and the labels, not from anything of ours: the fixture is
    // a model that classifies (a regenerated or truncated file would show here first).
    let logits = held_out("tflite_logits.npy");
    let labels = held_out("labels.npy");
    let Data::U8(labels) = &labels.data else {
        panic!("labels are uint8")
    };
    assert_eq!(logits.shape, [labels.len(), 10]);
    let correct = i8s(&logits)
        .chunks(10)
        .zip(labels)
        .filter(|(l, y)| argmax(l) == usize::from(**y))
        .count();
    let report = std::fs::read_to_string(fixtures_dir().join("digits/test/train_report.json"))
        .expect("train_report.json");
    let report: serde_json::Value = serde_json::from_str(&report).expect("JSON");
    let said = report["int8_accuracy_tflite"]
        .as_f64()
        .expect("int8 accuracy");
    let acc = correct as f64 / labels.len() as f64;
    assert!((acc - said).abs() < 1e-9, "{acc} vs the report's {said}");
    assert!(acc > 0.95, "accuracy {acc}");
}

#[test]
fn every_held_out_image_is_bit_exact_on_every_target_and_format() {
    let images = held_out("images.npy");
    let want = held_out("tflite_logits.npy");
    let n = images.shape[0];
    let pixels = i8s(&images);
    let want = i8s(&want);
    let mut failures = Vec::new();
    for ext in ["tflite", "onnx"] {
        let path = fixtures_dir().join("digits").join(format!("digits.{ext}"));
        let graph = npu_build::import::load(&path).expect("import");
        for target in npu_rt::ethos_u::config::ALL {
            let t = Target::for_accelerator(target.name).expect("known target");
            let compiled = compile(&graph, t.accelerator).expect("compile");
            let mut bad = 0;
            for k in 0..n {
                let input = Value {
                    shape: vec![1, 8, 8, 1],
                    data: Data::I8(pixels[k * 64..(k + 1) * 64].to_vec()),
                };
                let (out, _) = compiled.run_sim(&[input]).expect("run");
                if i8s(&out[0]) != &want[k * 10..(k + 1) * 10] {
                    bad += 1;
                }
            }
            if bad > 0 {
                failures.push(format!(
                    "digits.{ext} on {}: {bad} of {n} images differ",
                    target.name
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The same trained network quantized by onnxruntime instead (`digits_ort.onnx`: float ONNX
/// from tf2onnx with an NCHW input, `quantize_static` QDQ with uint8 activations and per-channel
/// int8 weights). onnxruntime requantizes in float, the NPU in fixed point, so the expectation
/// is agreement within one quantization step of the output, on every held-out image and every
/// target, and the same predictions.
#[test]
fn onnxruntime_quantized_model_is_within_one_step_of_onnxruntime() {
    let images = held_out("images_f32_nchw.npy");
    let want = held_out("ort_logits.npy");
    let (Data::F32(pixels), Data::F32(want)) = (&images.data, &want.data) else {
        panic!("float32 images and logits")
    };
    let n = images.shape[0];
    let path = fixtures_dir().join("digits").join("digits_ort.onnx");
    let graph = npu_build::import::load(&path).expect("import");
    // One step: the scale of the quantized tensor the float output is dequantized from.
    let out = graph.outputs[0];
    let producer = graph.producer(out).expect("the output is computed");
    let step = graph.tensors[graph.ops[producer].inputs[0]]
        .quant
        .as_ref()
        .expect("quantized")
        .scale();
    let mut failures = Vec::new();
    for target in npu_rt::ethos_u::config::ALL {
        let t = Target::for_accelerator(target.name).expect("known target");
        let compiled = compile(&graph, t.accelerator).expect("compile");
        let (mut worst, mut disagree) = (0f32, 0);
        for k in 0..n {
            let input = Value {
                shape: vec![1, 1, 8, 8],
                data: Data::F32(pixels[k * 64..(k + 1) * 64].to_vec()),
            };
            let (got, _) = compiled.run_sim(&[input]).expect("run");
            let Data::F32(got) = &got[0].data else {
                panic!("float32 output")
            };
            let reference = &want[k * 10..(k + 1) * 10];
            for (g, w) in got.iter().zip(reference) {
                worst = worst.max((g - w).abs() / step);
            }
            let top = |v: &[f32]| (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b });
            disagree += usize::from(top(got) != top(reference));
        }
        println!(
            "{}: worst {worst:.3} steps, {disagree} predictions differ",
            target.name
        );
        if worst > 1.0 + 1e-3 || disagree > 0 {
            failures.push(format!(
                "{}: worst difference {worst} steps, {disagree} of {n} predictions differ",
                target.name
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
