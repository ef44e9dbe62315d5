//! A 3x3 convolution + ReLU6 compiled by the build script, run on the virtual Ethos-U65-256 for
//! the three fixture inputs and checked byte for byte against TFLite's reference outputs.
//!
//! `cargo run --release -p buildrs-conv`

use std::process::ExitCode;

npu_rt::include_compiled!(conv3x3);

const CASES: [(&[u8], &[u8]); 3] = [
    (
        include_bytes!("../../../fixtures/op_conv3x3_s1_relu6/io/input_0.npy"),
        include_bytes!("../../../fixtures/op_conv3x3_s1_relu6/io/output_0.npy"),
    ),
    (
        include_bytes!("../../../fixtures/op_conv3x3_s1_relu6/io/input_1.npy"),
        include_bytes!("../../../fixtures/op_conv3x3_s1_relu6/io/output_1.npy"),
    ),
    (
        include_bytes!("../../../fixtures/op_conv3x3_s1_relu6/io/input_2.npy"),
        include_bytes!("../../../fixtures/op_conv3x3_s1_relu6/io/output_2.npy"),
    ),
];

/// The int8 payload of a version 1 `.npy` file.
fn npy_i8(file: &[u8]) -> Option<&[u8]> {
    if file.len() < 10 || &file[..6] != b"\x93NUMPY" || file[6] != 1 {
        return None;
    }
    let header = u16::from_le_bytes([file[8], file[9]]) as usize;
    file.get(10 + header..)
}

fn main() -> ExitCode {
    let accel = npu_rt::ethos_u::config::AcceleratorConfig::by_name(conv3x3::TARGET)
        .expect("the generated TARGET is a known accelerator");
    let mut npu = npu_rt::sim::VirtualNpu::new(accel);
    let mut arena = conv3x3::Arena::new();
    println!(
        "conv3x3 on {}: arena {} bytes, weights {} bytes",
        conv3x3::TARGET,
        conv3x3::ARENA_SIZE,
        conv3x3::WEIGHTS.0.len()
    );
    let mut ok = true;
    for (k, (input, expected)) in CASES.iter().enumerate() {
        let (Some(input), Some(expected)) = (npy_i8(input), npy_i8(expected)) else {
            eprintln!("case {k}: unreadable fixture");
            return ExitCode::FAILURE;
        };
        let mut x = conv3x3::Input::zeroed();
        for (d, &s) in x
            .serving_default_keras_tensor_156_0_flat_mut()
            .iter_mut()
            .zip(input)
        {
            *d = s as i8;
        }
        let y = match conv3x3::run(&mut npu, &mut arena, &x) {
            Ok(y) => y,
            Err(e) => {
                eprintln!("case {k}: {e}");
                return ExitCode::FAILURE;
            }
        };
        let got: Vec<u8> = y
            .stateful_partitioned_call_1_0_flat()
            .iter()
            .map(|&v| v as u8)
            .collect();
        let exact = got == expected;
        ok &= exact;
        println!(
            "input {k}: {}",
            if exact { "bit-exact" } else { "MISMATCH" }
        );
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
