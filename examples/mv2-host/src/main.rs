//! MobileNetV2 (224x224, int8) compiled while rustc expands `include_model!`, run on the
//! virtual Ethos-U55-128 for the three fixture inputs, and compared byte for byte with the
//! outputs of TFLite's reference kernels.
//!
//! The network's weights are synthetic (seeded random, `tools/make_fixtures.py`), so it does
//! not classify anything: its logits happen to be the same for every input. What it shows is
//! scale (3.5 M parameters, 301 M MACs per inference, compiled inside rustc) and exactness (every
//! output byte equals TFLite's). The `digits` example shows a trained model doing its job.
//!
//! `cargo run --release -p mv2-host` (exits non-zero on any mismatch).

use std::process::ExitCode;

use npu_rt::ethos_u::config::ETHOS_U55_128;
use npu_rt::sim::VirtualNpu;

npu_macros::include_model!("models/mv2.onnx", target = "ethos-u55-128");

/// The fixture inputs and TFLite reference outputs (int8 .npy files).
const CASES: [(&[u8], &[u8]); 3] = [
    (
        include_bytes!("../../../fixtures/mv2_224/io/input_0.npy"),
        include_bytes!("../../../fixtures/mv2_224/io/output_0.npy"),
    ),
    (
        include_bytes!("../../../fixtures/mv2_224/io/input_1.npy"),
        include_bytes!("../../../fixtures/mv2_224/io/output_1.npy"),
    ),
    (
        include_bytes!("../../../fixtures/mv2_224/io/input_2.npy"),
        include_bytes!("../../../fixtures/mv2_224/io/output_2.npy"),
    ),
];

/// The data of a version 1/2 `.npy` file of int8 values (header skipped).
fn npy_i8(file: &[u8]) -> Result<Vec<i8>, String> {
    if file.len() < 10 || &file[..6] != b"\x93NUMPY" {
        return Err("not a .npy file".into());
    }
    let (header_len, start) = match file[6] {
        1 => (u16::from_le_bytes([file[8], file[9]]) as usize, 10),
        _ => (
            u32::from_le_bytes([file[8], file[9], file[10], file[11]]) as usize,
            12,
        ),
    };
    let header =
        std::str::from_utf8(&file[start..start + header_len]).map_err(|e| e.to_string())?;
    if !header.contains("'|i1'") {
        return Err(format!("expected int8 data, header is {header}"));
    }
    Ok(file[start + header_len..]
        .iter()
        .map(|&b| b as i8)
        .collect())
}

fn top5(logits: &[i8]) -> Vec<(usize, i8)> {
    let mut idx: Vec<usize> = (0..logits.len()).collect();
    idx.sort_by(|&a, &b| logits[b].cmp(&logits[a]).then(a.cmp(&b)));
    idx.into_iter().take(5).map(|i| (i, logits[i])).collect()
}

fn main() -> ExitCode {
    println!(
        "mv2: input {:?} -> output {:?} on {}; arena {} bytes, weights {} bytes, command stream {} bytes",
        mv2::serving_default_keras_tensor_0::SHAPE,
        mv2::stateful_partitioned_call_1_0::SHAPE,
        mv2::TARGET,
        mv2::ARENA_SIZE,
        mv2::WEIGHTS.0.len(),
        mv2::COMMAND_STREAM.0.len(),
    );
    println!(
        "  synthetic weights (no training): the logits are the same for every input, so the top-5 \
         below says nothing about the images; the check is that every output byte equals TFLite's"
    );
    let mut npu = VirtualNpu::new(&ETHOS_U55_128);
    let mut arena = Box::new(mv2::Arena::new());
    let mut all_exact = true;
    for (k, (input_npy, output_npy)) in CASES.iter().enumerate() {
        let (input, expected) = match (npy_i8(input_npy), npy_i8(output_npy)) {
            (Ok(i), Ok(o)) => (i, o),
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("fixture {k}: {e}");
                return ExitCode::FAILURE;
            }
        };
        let mut x = Box::new(mv2::Input::zeroed());
        let dst = x.serving_default_keras_tensor_0_flat_mut();
        if dst.len() != input.len() {
            eprintln!(
                "input {k}: {} values, the model takes {}",
                input.len(),
                dst.len()
            );
            return ExitCode::FAILURE;
        }
        dst.copy_from_slice(&input);
        let started = std::time::Instant::now();
        let out = match mv2::run(&mut npu, &mut arena, &x) {
            Ok(out) => out,
            Err(e) => {
                eprintln!("input {k}: {e}");
                return ExitCode::FAILURE;
            }
        };
        let elapsed = started.elapsed();
        let logits = out.stateful_partitioned_call_1_0_flat();
        let exact = logits == expected.as_slice();
        all_exact &= exact;
        println!(
            "input {k}: top-5 {:?}  {}  ({:.1} ms on the simulator)",
            top5(logits),
            if exact { "bit-exact" } else { "MISMATCH" },
            elapsed.as_secs_f64() * 1e3
        );
        if let Some(stats) = npu.last_stats() {
            println!(
                "  NPU: {} operations, {} MACs, {} bytes read, {} bytes written",
                stats.ops.len(),
                stats.macs,
                stats.bytes_read.iter().sum::<u64>(),
                stats.bytes_written.iter().sum::<u64>()
            );
        }
    }
    if all_exact {
        println!("all outputs bit-exact with TFLite's reference kernels");
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
