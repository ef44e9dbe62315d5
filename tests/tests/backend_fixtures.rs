//! Our own compiler, end to end: every fixture with a `.tflite`, imported from the `.tflite` and
//! from the `.onnx`, compiled by the native Ethos-U backend for several accelerator
//! configurations and run on the virtual NPU, must reproduce TFLite's reference output
//! (`io/output_0.npy`) byte for byte.

use npu_build::ethos_u::compile;
use npu_build::target::Target;
use npu_tests::{differences, fixture_inputs, fixture_output, fixtures_dir, tflite_fixtures};

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
    let path = fixtures_dir().join(model).join(format!("{model}.{ext}"));
    let graph = match npu_build::import::load(&path) {
        Ok(g) => g,
        Err(e) => return Some(format!("{model}.{ext}: import: {e}")),
    };
    let t = Target::for_accelerator(target).expect("known target");
    let compiled = match compile(&graph, t.accelerator) {
        Ok(c) => c,
        Err(e) => return Some(format!("{model}.{ext} on {target}: compile: {e}")),
    };
    let (outputs, _) = match compiled.run_sim(&fixture_inputs(model, k)) {
        Ok(r) => r,
        Err(e) => return Some(format!("{model}.{ext} on {target}: run: {e}")),
    };
    let want = fixture_output(model, k);
    let got = outputs.into_iter().next()?;
    let d = differences(&got, &want);
    (!d.is_empty()).then(|| format!("{model}.{ext} on {target} input {k}: {d}"))
}

fn check_all(models: &[String], exts: &[&str], targets: &[&str]) {
    let mut failures = Vec::new();
    let mut passed = 0;
    for model in models {
        for ext in exts {
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

#[test]
fn mv2_from_onnx_on_every_target() {
    check_all(&["mv2_224".to_string()], &["onnx"], &ALL_TARGETS);
}

#[test]
fn mv2_from_tflite_on_u55_128() {
    check_all(&["mv2_224".to_string()], &["tflite"], &["ethos-u55-128"]);
}
