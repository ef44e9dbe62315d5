//! Test support shared with the mean and resize tests: single-operator graphs compiled by the whole
//! backend and run on the virtual NPU, compared byte for byte with the reference interpreter
//! (TFLite's reference kernels).

use npu_rt::ethos_u::config::ALL;

use crate::ethos_u::compile;
use crate::ir::{DType, Graph, Op, OpKind, Quantization, Tensor};
use crate::value::{Data, Value};

/// A graph `y = kind(x)` with per-tensor quantized input and output.
pub fn graph(
    kind: OpKind,
    (in_shape, in_dtype, in_q): (&[usize], DType, (f32, i32)),
    (out_shape, out_q): (&[usize], (f32, i32)),
) -> Graph {
    let mut g = Graph {
        name: kind.name().to_string(),
        ..Graph::default()
    };
    let tensor = |name: &str, shape: &[usize], q: (f32, i32)| Tensor {
        name: name.into(),
        shape: shape.to_vec(),
        dtype: in_dtype,
        quant: Some(Quantization::per_tensor(q.0, q.1)),
        data: None,
    };
    let x = g.add_tensor(tensor("x", in_shape, in_q));
    let y = g.add_tensor(tensor("y", out_shape, out_q));
    g.inputs.push(x);
    g.outputs.push(y);
    g.ops.push(Op {
        name: "op".into(),
        kind,
        inputs: vec![x],
        outputs: vec![y],
    });
    g
}

/// `n` deterministic bytes (xorshift64) for `seed`.
pub fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

/// Deterministic 8-bit input data for the graph's first input ([`random_bytes`]).
pub fn input(g: &Graph, seed: u64) -> Value {
    let t = &g.tensors[g.inputs[0]];
    let bytes = random_bytes(t.elements(), seed);
    let data = match t.dtype {
        DType::U8 => Data::U8(bytes),
        _ => Data::I8(bytes.into_iter().map(|b| b as i8).collect()),
    };
    Value::new(t.shape.clone(), data).expect("shape matches")
}

/// Compiles `g` for every accelerator, runs `inputs` on the virtual NPU and compares the
/// first output with the reference interpreter's, byte for byte.
/// `what` names the inputs in a failure.
pub fn check_inputs(g: &Graph, inputs: &[Value], what: &str) {
    let want =
        crate::reference::run(g, inputs).unwrap_or_else(|e| panic!("{}: reference: {e}", g.name));
    for accel in ALL {
        let c = compile(g, accel)
            .unwrap_or_else(|e| panic!("{} on {}: compile: {e}", g.name, accel.name));
        let (got, _) = c
            .run_sim(inputs)
            .unwrap_or_else(|e| panic!("{} on {}: sim: {e}", g.name, accel.name));
        assert_eq!(
            got[0].data.to_le_bytes(),
            want[0].data.to_le_bytes(),
            "{} {:?} on {} ({what})",
            g.name,
            g.ops[0].kind,
            accel.name
        );
    }
}

/// Compiles `g` for every accelerator, runs three random inputs on the virtual NPU and
/// compares each output with the reference interpreter's.
pub fn check(g: &Graph) {
    g.validate().expect("valid test graph");
    for seed in 1..=3 {
        check_inputs(g, &[input(g, seed)], &format!("seed {seed}"));
    }
}
