//! The ONNX backend node tests for quantization (onnx 1.23's own cases and reference outputs),
//! converted once by `tools/convert_onnx_node_tests.py` into `fixtures/onnx_node_tests/` (every
//! operand but the activation made an initializer). Each case either imports and runs on the
//! reference interpreter with outputs byte-identical to ONNX's, or is refused at import with an
//! error; a wrong result fails. Which cases pass is pinned below, so a change shows.

use std::path::Path;

use npu_build::value::Value;
use npu_tests::{differences, fixtures_dir};

/// The cases that import and match ONNX's reference outputs exactly.
const PASSING: &[&str] = &[
    "test_dequantizelinear",
    "test_dequantizelinear_int16",
    "test_qlinearconv",
    "test_qlinearmatmul_2D_int8_float32",
    "test_qlinearmatmul_2D_uint8_float32",
    "test_quantizelinear",
    "test_quantizelinear_int16",
];

enum Outcome {
    Pass,
    Refused(String),
    Wrong(String),
}

fn run_case(dir: &Path, name: &str) -> Outcome {
    let graph = match npu_build::import::load(&dir.join(format!("{name}.onnx"))) {
        Ok(g) => g,
        Err(e) => return Outcome::Refused(e.to_string()),
    };
    let io = dir.join("io");
    let input = match Value::read_npy(&io.join("input_0.npy")) {
        Ok(v) => v,
        Err(e) => return Outcome::Wrong(format!("imported, but its input is unreadable: {e}")),
    };
    let got = match npu_build::reference::run(&graph, &[input]) {
        Ok(v) => v,
        Err(e) => return Outcome::Wrong(format!("imported, but the run failed: {e}")),
    };
    for (k, g) in got.iter().enumerate() {
        let want = match Value::read_npy(&io.join(format!("output_{k}.npy"))) {
            Ok(v) => v,
            Err(e) => return Outcome::Wrong(format!("output {k}: {e}")),
        };
        let d = differences(g, &want);
        if !d.is_empty() {
            return Outcome::Wrong(format!("output {k}: {d}"));
        }
    }
    Outcome::Pass
}

#[test]
fn node_tests_pass_or_are_refused() {
    let root = fixtures_dir().join("onnx_node_tests");
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .expect("fixtures/onnx_node_tests")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    assert_eq!(names.len(), 45, "the 45 quantization cases of onnx 1.23");
    let (mut passed, mut wrong) = (Vec::new(), Vec::new());
    for name in &names {
        match run_case(&root.join(name), name) {
            Outcome::Pass => passed.push(name.clone()),
            Outcome::Refused(why) => eprintln!("refused {name}: {why}"),
            Outcome::Wrong(why) => wrong.push(format!("{name}: {why}")),
        }
    }
    eprintln!(
        "{} of {} pass; the others are refused",
        passed.len(),
        names.len()
    );
    assert!(wrong.is_empty(), "wrong results:\n{}", wrong.join("\n"));
    assert_eq!(passed, PASSING, "passing cases changed");
}
