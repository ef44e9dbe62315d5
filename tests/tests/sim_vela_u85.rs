//! The virtual Ethos-U85 against Arm's compiler: Vela 5.2's U85 command streams for every
//! fixture (`fixtures/*/vela/ethos-u85-*/`), run on `npu_rt::sim::VirtualU85`, must reproduce
//! TFLite's reference outputs byte for byte.
//!
//! Streams that use something the virtual U85 does not model yet are listed in [`UNSUPPORTED`]
//! with the reason; the list is exact: the test fails if a listed directory passes or if an
//! unlisted one fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use npu_build::value::Value;
use npu_cli::sim::CompiledDir;
use npu_rt::ethos_u::config::U85Config;
use npu_tests::fixtures_dir;

/// Directories (`model/ethos-u85-N`) expected to fail, with why. Kept exact by the test.
const UNSUPPORTED: &[(&str, &str)] = &[
    (
        "op_arg_max/ethos-u85-128",
        "NPU_OP_POOL: ARGMAX_X pooling is not modelled",
    ),
    (
        "op_arg_max/ethos-u85-2048",
        "NPU_OP_POOL: ARGMAX_X pooling is not modelled",
    ),
    (
        "op_arg_max/ethos-u85-256",
        "NPU_OP_POOL: ARGMAX_X pooling is not modelled",
    ),
    (
        "op_arg_max/ethos-u85-512",
        "NPU_OP_POOL: ARGMAX_X pooling is not modelled",
    ),
    (
        "op_batch_matmul/ethos-u85-128",
        "NPU_OP_CONV with weights from IFM2 (matmul) is not modelled",
    ),
    (
        "op_batch_matmul/ethos-u85-2048",
        "NPU_OP_CONV with weights from IFM2 (matmul) is not modelled",
    ),
    (
        "op_batch_matmul/ethos-u85-256",
        "NPU_OP_CONV with weights from IFM2 (matmul) is not modelled",
    ),
    (
        "op_batch_matmul/ethos-u85-512",
        "NPU_OP_CONV with weights from IFM2 (matmul) is not modelled",
    ),
    (
        "op_resize_nearest/ethos-u85-128",
        "NPU_OP_RESIZE is not modelled",
    ),
    (
        "op_resize_nearest/ethos-u85-2048",
        "NPU_OP_RESIZE is not modelled",
    ),
    (
        "op_resize_nearest/ethos-u85-256",
        "NPU_OP_RESIZE is not modelled",
    ),
    (
        "op_resize_nearest/ethos-u85-512",
        "NPU_OP_RESIZE is not modelled",
    ),
    (
        "op_sum/ethos-u85-128",
        "runs, but the output differs from TFLite (SUM transposing to NHCWB16, REDUCE_SUM, SUB): not understood yet",
    ),
    (
        "op_sum/ethos-u85-2048",
        "runs, but the output differs from TFLite (SUM transposing to NHCWB16, REDUCE_SUM, SUB): not understood yet",
    ),
    (
        "op_sum/ethos-u85-256",
        "runs, but the output differs from TFLite (SUM transposing to NHCWB16, REDUCE_SUM, SUB): not understood yet",
    ),
    (
        "op_sum/ethos-u85-512",
        "runs, but the output differs from TFLite (SUM transposing to NHCWB16, REDUCE_SUM, SUB): not understood yet",
    ),
];

/// Every `fixtures/<model>/vela/ethos-u85-*` directory with a compiled stream, sorted.
fn u85_dirs() -> Vec<(String, PathBuf)> {
    let root = fixtures_dir();
    let mut out = Vec::new();
    for model in std::fs::read_dir(&root).expect("fixtures dir") {
        let model = model.expect("fixture entry").path();
        let vela = model.join("vela");
        if !vela.is_dir() {
            continue;
        }
        for accel in std::fs::read_dir(&vela).expect("vela dir") {
            let accel = accel.expect("accel entry").path();
            let name = accel.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if !name.starts_with("ethos-u85-") || !npu_tests::vela_compiled(&accel) {
                continue;
            }
            let key = format!(
                "{}/{name}",
                model.file_name().unwrap_or_default().to_string_lossy()
            );
            out.push((key, accel));
        }
    }
    out.sort();
    out
}

/// The inputs of sample `k`: `input_k.npy`, or `input_k_0.npy, input_k_1.npy, ...`.
fn inputs(io: &Path, k: usize) -> Vec<Value> {
    let single = io.join(format!("input_{k}.npy"));
    if single.exists() {
        return vec![Value::read_npy(&single).expect("input")];
    }
    (0..)
        .map(|j| io.join(format!("input_{k}_{j}.npy")))
        .take_while(|p| p.exists())
        .map(|p| Value::read_npy(&p).expect("input"))
        .collect()
}

/// The reference outputs of sample `k`.
fn outputs_of(io: &Path, k: usize) -> Vec<Value> {
    let single = io.join(format!("output_{k}.npy"));
    if single.exists() {
        return vec![Value::read_npy(&single).expect("output")];
    }
    (0..)
        .map(|j| io.join(format!("output_{k}_{j}.npy")))
        .take_while(|p| p.exists())
        .map(|p| Value::read_npy(&p).expect("output"))
        .collect()
}

/// Runs one directory on the given samples; `Err` describes the first failure.
fn run_dir(dir: &Path, samples: &[usize]) -> Result<(), String> {
    let compiled = CompiledDir::load(dir).map_err(|e| e.to_string())?;
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let config = U85Config::by_name(name).ok_or("unknown U85 configuration")?;
    let meta = compiled.meta.get("accelerator").and_then(|v| v.as_str());
    if meta != Some(name) {
        return Err(format!("meta.json accelerator {meta:?}"));
    }
    let io = dir
        .parent()
        .and_then(Path::parent)
        .ok_or("model dir")?
        .join("io");
    let runs: Vec<Vec<Value>> = samples.iter().map(|&k| inputs(&io, k)).collect();
    let results = compiled
        .run_sequence_u85(config, &runs)
        .map_err(|e| e.to_string())?;
    for (&k, (outputs, stats)) in samples.iter().zip(results) {
        let expected = outputs_of(&io, k);
        if outputs.len() != expected.len() || expected.is_empty() {
            return Err(format!("input {k}: output count {}", outputs.len()));
        }
        let squeeze = |s: &[usize]| s.iter().copied().filter(|&d| d != 1).collect::<Vec<_>>();
        for (j, (got, want)) in outputs.iter().zip(&expected).enumerate() {
            if squeeze(&got.shape) != squeeze(&want.shape) {
                return Err(format!("input {k} output {j}: shape {:?}", got.shape));
            }
            let (g, e) = (got.data.to_le_bytes(), want.data.to_le_bytes());
            let diff = g.iter().zip(&e).filter(|(a, b)| a != b).count();
            if diff != 0 || g.len() != e.len() {
                return Err(format!(
                    "input {k} output {j}: {diff} of {} bytes differ",
                    e.len()
                ));
            }
        }
        if !stats.stopped {
            return Err("the stream did not end at NPU_OP_STOP".into());
        }
    }
    Ok(())
}

#[test]
fn vela_u85_streams_bit_exact() {
    let dirs = u85_dirs();
    assert_eq!(dirs.len(), 228, "U85 streams in the fixtures");
    let expected: BTreeMap<&str, &str> = UNSUPPORTED.iter().copied().collect();
    assert_eq!(
        expected.len(),
        UNSUPPORTED.len(),
        "duplicate UNSUPPORTED entries"
    );
    for key in expected.keys() {
        assert!(
            dirs.iter().any(|(k, _)| k == key),
            "UNSUPPORTED names {key}, which is not a U85 stream"
        );
    }
    let mut passed = 0;
    let mut surprises = Vec::new();
    for (key, dir) in &dirs {
        // mv2_224 runs all three of its samples; the others their first.
        let samples: &[usize] = if key.starts_with("mv2_224/") {
            &[0, 1, 2]
        } else {
            &[0]
        };
        let result = run_dir(dir, samples);
        match (&result, expected.get(key.as_str())) {
            (Ok(()), None) => passed += 1,
            (Err(e), Some(_)) => println!("expected failure: {key}: {e}"),
            (Ok(()), Some(why)) => surprises.push(format!(
                "{key}: listed as unsupported ({why}) but bit-exact now"
            )),
            (Err(e), None) => surprises.push(format!("{key}: {e}")),
        }
    }
    println!("{passed} of {} U85 streams bit-exact", dirs.len());
    assert!(
        surprises.is_empty(),
        "{} unexpected results:\n{}",
        surprises.len(),
        surprises.join("\n")
    );
    assert_eq!(passed + UNSUPPORTED.len(), dirs.len());
}
