//! The virtual Ethos-U85 against Arm's compiler: Vela 5.2's U85 command streams for every
//! fixture (`fixtures/*/vela/ethos-u85-*/`), run on `npu_rt::sim::VirtualU85`, must reproduce
//! TFLite's reference outputs byte for byte.
//!
//! Streams that use something the virtual U85 does not model yet are listed in [`UNSUPPORTED`]
//! with the reason (none today); the list is exact: the test fails if a listed directory passes
//! or if an unlisted one fails. Streams Vela compiled wrongly ([`VELA_MISCOMPILED`]: op_sum)
//! are compared with an independent model of what they compute instead of TFLite's output.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use npu_build::value::Value;
use npu_cli::sim::CompiledDir;
use npu_rt::ethos_u::config::U85Config;
use npu_tests::vela::op_sum_first_column;

/// Directories (`model/ethos-u85-N`) expected to fail, with why. Kept exact by the test.
const UNSUPPORTED: &[(&str, &str)] = &[];

/// Models whose Vela 5.2 U85 stream computes something other than TFLite's reference: their
/// streams are checked against an independent model of what the stream computes (and must
/// still differ from TFLite, so a corrected compilation shows up here).
///
/// op_sum (SUM over axes {1, 2} of `[1, 8, 8, 16]`, keep_dims): Vela's TFLite reader keeps only
/// the first reduction axis (`TfLiteReader::CreateAxisAttribute` reads the axis tensor as one
/// scalar), so the stream sums over H alone (a transposing SUM pooling into `[1, 128, 8]`,
/// REDUCE_SUM over the channels, SUB of `8 * zp`) and writes 128 values where the output has
/// 16; the output bytes hold the sum over H at W = 0 (`docs/u85.md`, `docs/reduce.md`).
const VELA_MISCOMPILED: &[(&str, StreamModel)] = &[("op_sum", op_sum_first_column)];

/// The output bytes a stream computes from the input bytes.
type StreamModel = fn(&[u8]) -> Vec<u8>;

/// Every `fixtures/<model>/vela/ethos-u85-*` directory with a compiled stream, as
/// `model/accel` and the directory, sorted.
fn u85_dirs() -> Vec<(String, PathBuf)> {
    npu_tests::vela::u85_dirs()
        .into_iter()
        .map(|(model, accel, dir)| (format!("{model}/{accel}"), dir))
        .collect()
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

/// Runs one directory on the given samples; `Err` describes the first failure. With `model`,
/// the single output is compared with `model(input bytes)` instead of TFLite's, and must
/// differ from TFLite's.
fn run_dir(dir: &Path, samples: &[usize], model: Option<StreamModel>) -> Result<(), String> {
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
    for ((&k, (outputs, stats)), run) in samples.iter().zip(results).zip(&runs) {
        let expected = outputs_of(&io, k);
        if outputs.len() != expected.len() || expected.is_empty() {
            return Err(format!("input {k}: output count {}", outputs.len()));
        }
        // The expected bytes of each output: TFLite's, or the model's for output 0.
        let mut want_bytes: Vec<Vec<u8>> = expected.iter().map(|v| v.data.to_le_bytes()).collect();
        if let Some(model) = model {
            let input = run.first().ok_or("no input")?.data.to_le_bytes();
            let modelled = model(&input);
            if modelled == want_bytes[0] {
                return Err(format!(
                    "input {k}: the modelled Vela stream now agrees with TFLite"
                ));
            }
            want_bytes[0] = modelled;
        }
        let squeeze = |s: &[usize]| s.iter().copied().filter(|&d| d != 1).collect::<Vec<_>>();
        for (j, ((got, want), e)) in outputs.iter().zip(&expected).zip(&want_bytes).enumerate() {
            if squeeze(&got.shape) != squeeze(&want.shape) {
                return Err(format!("input {k} output {j}: shape {:?}", got.shape));
            }
            let g = got.data.to_le_bytes();
            let diff = g.iter().zip(e).filter(|(a, b)| a != b).count();
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
        let model = VELA_MISCOMPILED
            .iter()
            .find(|(m, _)| key.split('/').next() == Some(*m))
            .map(|&(_, f)| f);
        // mv2_224 and the modelled streams run all three samples; the others their first.
        let samples: &[usize] = if key.starts_with("mv2_224/") || model.is_some() {
            &[0, 1, 2]
        } else {
            &[0]
        };
        let result = run_dir(dir, samples, model);
        match (&result, expected.get(key.as_str())) {
            (Ok(()), None) => passed += 1,
            (Err(e), Some(_)) => println!("expected failure: {key}: {e}"),
            (Ok(()), Some(why)) => surprises.push(format!(
                "{key}: listed as unsupported ({why}) but bit-exact now"
            )),
            (Err(e), None) => surprises.push(format!("{key}: {e}")),
        }
    }
    let modelled = dirs
        .iter()
        .filter(|(k, _)| {
            VELA_MISCOMPILED
                .iter()
                .any(|(m, _)| k.split('/').next() == Some(*m))
        })
        .count();
    println!(
        "{passed} of {} U85 streams as expected: {} bit-exact with TFLite, {modelled} with the \
         model of a miscompiled stream",
        dirs.len(),
        passed - modelled
    );
    assert!(
        surprises.is_empty(),
        "{} unexpected results:\n{}",
        surprises.len(),
        surprises.join("\n")
    );
    assert_eq!(passed + UNSUPPORTED.len(), dirs.len());
}
