//! The reference interpreter on every fixture's `.tflite` must reproduce TFLite's reference-kernel
//! outputs (`io/output_K.npy`) byte for byte, for all three inputs of each model.

use std::path::{Path, PathBuf};

use npu_build::value::Value;

fn io_file(dir: &Path, stem: &str, k: usize, j: usize, count: usize) -> PathBuf {
    if count == 1 {
        dir.join(format!("{stem}_{k}.npy"))
    } else {
        dir.join(format!("{stem}_{k}_{j}.npy"))
    }
}

/// Describes the first differences between two values (empty if identical).
fn differences(got: &Value, want: &Value) -> String {
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

fn check(model: &str) {
    let dir = npu_tests::fixtures_dir().join(model);
    let graph = npu_build::import::load(&dir.join(format!("{model}.tflite")))
        .unwrap_or_else(|e| panic!("{model}: import failed: {e}"));
    let interp = npu_build::reference::Interpreter::new(&graph)
        .unwrap_or_else(|e| panic!("{model}: preparation failed: {e}"));
    let io = dir.join("io");
    let (n_in, n_out) = (graph.inputs.len(), graph.outputs.len());
    let mut failures = Vec::new();
    for k in 0..3 {
        let inputs: Vec<Value> = (0..n_in)
            .map(|j| Value::read_npy(&io_file(&io, "input", k, j, n_in)).expect("fixture input"))
            .collect();
        let outputs = interp
            .run(&inputs)
            .unwrap_or_else(|e| panic!("{model}: input {k}: run failed: {e}"));
        assert_eq!(outputs.len(), n_out);
        for (j, got) in outputs.iter().enumerate() {
            let want =
                Value::read_npy(&io_file(&io, "output", k, j, n_out)).expect("fixture output");
            let d = differences(got, &want);
            if !d.is_empty() {
                failures.push(format!("input {k}, output {j}: {d}"));
            }
        }
    }
    assert!(failures.is_empty(), "{model}:\n{}", failures.join("\n"));
}

macro_rules! fixture_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                check(stringify!($name));
            }
        )*

        /// Every fixture with a `.tflite` has a test above.
        #[test]
        fn every_tflite_fixture_is_tested() {
            let listed = [$(stringify!($name)),*];
            let mut missing = Vec::new();
            for entry in std::fs::read_dir(npu_tests::fixtures_dir()).expect("fixtures dir") {
                let entry = entry.expect("dir entry");
                let name = entry.file_name().to_string_lossy().into_owned();
                if entry.path().join(format!("{name}.tflite")).exists() && !listed.contains(&name.as_str()) {
                    missing.push(name);
                }
            }
            assert!(missing.is_empty(), "fixtures without a test: {missing:?}");
            assert_eq!(listed.len(), 17);
        }
    };
}

fixture_tests!(
    op_add,
    op_avgpool2x2,
    op_concat,
    op_conv1x1,
    op_conv3x3_s1_relu6,
    op_conv3x3_s2,
    op_conv5x5_valid,
    op_dwconv3x3_s1,
    op_dwconv3x3_s2,
    op_fc,
    op_global_avgpool,
    op_maxpool3x3_s2,
    op_mul,
    op_reshape_fc,
    op_resize_nearest,
    op_softmax,
    mv2_224,
);

/// The extra models of `tests/data/tflite_extra` (operators and attributes the fixtures lack; see
/// its README): every output byte as TFLite's reference kernels.
#[test]
fn extra_tflite_models() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/tflite_extra");
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .expect("tflite_extra dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 23, "{names:?}");
    let mut failures = Vec::new();
    for model in &names {
        let dir = root.join(model);
        let graph = match npu_build::import::load(&dir.join(format!("{model}.tflite"))) {
            Ok(g) => g,
            Err(e) => {
                failures.push(format!("{model}: import failed: {e}"));
                continue;
            }
        };
        for k in 0..3 {
            let inputs: Vec<Value> = (0..graph.inputs.len())
                .map(|j| Value::read_npy(&dir.join(format!("input_{k}_{j}.npy"))).expect("input"))
                .collect();
            let outputs = match npu_build::reference::run(&graph, &inputs) {
                Ok(o) => o,
                Err(e) => {
                    failures.push(format!("{model}: input {k}: {e}"));
                    continue;
                }
            };
            for (j, got) in outputs.iter().enumerate() {
                let want =
                    Value::read_npy(&dir.join(format!("output_{k}_{j}.npy"))).expect("output");
                let d = differences(got, &want);
                if !d.is_empty() {
                    failures.push(format!("{model}: input {k}, output {j}: {d}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
