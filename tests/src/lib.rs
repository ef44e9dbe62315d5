//! Shared helpers of the conformance tests: where the copied fixtures live, their inputs and
//! reference outputs, and a readable byte-exact comparison; in [`vela_weights`], what the tests of
//! Vela's weight streams share.

use std::path::PathBuf;

pub mod vela_weights;

use npu_build::value::Value;

pub mod vela;

/// `fixtures/` at the workspace root (copied from the shared fixtures; tests never read `../shared`).
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("fixtures")
}

/// Whether `dir` (a `fixtures/<model>/vela/<accel>/` directory) holds a compilation. Where Vela
/// leaves the operator on the CPU, its raw writer refuses the graph and the directory holds
/// `VELA_FAILED.txt` (Vela's message) instead: there is no stream to run or compare.
pub fn vela_compiled(dir: &std::path::Path) -> bool {
    dir.join("cmd_stream.bin").is_file()
}

/// Whether `dir` (a `fixtures/<model>/vela/<accel>/` directory) is a compilation for one of the
/// U55/U65 configurations `VirtualNpu` runs. The `ethos-u85-*` directories beside them are
/// Vela's U85 streams (a different command set), run by `VirtualU85` in `sim_vela_u85.rs`.
pub fn u55_u65_dir(dir: &std::path::Path) -> bool {
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    npu_build::target::ACCELERATOR_NAMES.contains(&name)
}

/// Names of the fixtures that have a `.tflite` (and its `.onnx` twin), sorted.
pub fn tflite_fixtures() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
        .expect("fixtures/ exists")
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| fixtures_dir().join(n).join(format!("{n}.tflite")).exists())
        .collect();
    names.sort();
    names
}

/// Number of graph inputs of a fixture (from its `io/io.json`).
pub fn input_count(model: &str) -> usize {
    let path = fixtures_dir().join(model).join("io").join("io.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let json: serde_json::Value = serde_json::from_str(&text).expect("io.json is JSON");
    json["inputs"].as_array().map_or(1, |a| a.len())
}

/// The inputs of case `k` of a fixture (`input_K.npy`, or `input_K_J.npy` for several inputs).
pub fn fixture_inputs(model: &str, k: usize) -> Vec<Value> {
    let io = fixtures_dir().join(model).join("io");
    let n = input_count(model);
    (0..n)
        .map(|j| {
            let name = if n == 1 {
                format!("input_{k}.npy")
            } else {
                format!("input_{k}_{j}.npy")
            };
            Value::read_npy(&io.join(&name)).unwrap_or_else(|e| panic!("{model}/{name}: {e}"))
        })
        .collect()
}

/// The reference output of case `k` of a fixture.
pub fn fixture_output(model: &str, k: usize) -> Value {
    let p = fixtures_dir()
        .join(model)
        .join("io")
        .join(format!("output_{k}.npy"));
    Value::read_npy(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// `DIR/STEM_K.npy` for a single-input (or single-output) model, `DIR/STEM_K_J.npy` for tensor
/// `J` of case `K` of a model with `count` of them: the fixtures' naming.
pub fn io_file(dir: &std::path::Path, stem: &str, k: usize, j: usize, count: usize) -> PathBuf {
    if count == 1 {
        dir.join(format!("{stem}_{k}.npy"))
    } else {
        dir.join(format!("{stem}_{k}_{j}.npy"))
    }
}

/// Every reference output of case `k` of a fixture: `output_K.npy`, or `output_K_J.npy` for
/// each output `J` of a model with several (SPLIT, UNPACK).
pub fn fixture_outputs(model: &str, k: usize) -> Vec<Value> {
    let io = fixtures_dir().join(model).join("io");
    if io.join(format!("output_{k}.npy")).exists() {
        return vec![fixture_output(model, k)];
    }
    let mut v = Vec::new();
    for j in 0.. {
        let p = io.join(format!("output_{k}_{j}.npy"));
        if !p.exists() {
            break;
        }
        v.push(Value::read_npy(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())));
    }
    assert!(!v.is_empty(), "{model}: no outputs for case {k}");
    v
}

/// Describes how `got` differs from `want` (shape, type, the first differing elements); empty if
/// they are byte-identical.
pub fn differences(got: &Value, want: &Value) -> String {
    if got.shape != want.shape || got.dtype() != want.dtype() {
        return format!(
            "got {:?} {} but expected {:?} {}",
            got.shape,
            got.dtype(),
            want.shape,
            want.dtype()
        );
    }
    let (a, b) = (got.data.to_le_bytes(), want.data.to_le_bytes());
    let size = got.dtype().size();
    let diffs: Vec<usize> = (0..a.len() / size)
        .filter(|&i| a[i * size..(i + 1) * size] != b[i * size..(i + 1) * size])
        .collect();
    if diffs.is_empty() {
        return String::new();
    }
    let show: Vec<String> = diffs
        .iter()
        .take(8)
        .map(|&i| {
            format!(
                "[{i}] {:?} != {:?}",
                &a[i * size..(i + 1) * size],
                &b[i * size..(i + 1) * size]
            )
        })
        .collect();
    format!(
        "{} of {} elements differ: {}",
        diffs.len(),
        a.len() / size,
        show.join(", ")
    )
}
