//! Test-only: lowered programs executed by [`super::exec_model`] against TFLite's outputs (the
//! fixtures) and against the reference interpreter (synthetic graphs covering the decompositions:
//! padded average pools, dilation above 2, depth multipliers, broadcasts, concat rescaling, pad).

use std::path::Path;

use npu_rt::ethos_u::config::{ALL as ALL_ACCELERATORS, ETHOS_U55_128};

use super::exec_model::Machine;
use crate::ir::{
    Activation, ConvAttrs, DType, Graph, Op, OpKind, Padding, PoolAttrs, Quantization, ResizeMode,
    Tensor, TensorId,
};
use crate::value::{Data, Value};

/// The differences between two byte strings of `size`-byte elements, as a message.
fn diff(got: &[u8], want: &[u8], size: usize) -> Option<String> {
    if got == want {
        return None;
    }
    if got.len() != want.len() {
        return Some(format!("{} bytes instead of {}", got.len(), want.len()));
    }
    let bad: Vec<usize> = (0..got.len() / size)
        .filter(|&i| got[i * size..(i + 1) * size] != want[i * size..(i + 1) * size])
        .collect();
    let show: Vec<String> = bad
        .iter()
        .take(6)
        .map(|&i| {
            format!(
                "[{i}] {:?} != {:?}",
                &got[i * size..(i + 1) * size],
                &want[i * size..(i + 1) * size]
            )
        })
        .collect();
    Some(format!(
        "{} of {} elements differ: {}",
        bad.len(),
        got.len() / size,
        show.join(", ")
    ))
}

fn run_program(g: &Graph, inputs: &[Value]) -> Vec<Vec<u8>> {
    let p = super::lower(g, &ETHOS_U55_128)
        .unwrap_or_else(|e| panic!("{}: lowering failed: {e}", g.name));
    let bytes: Vec<Vec<u8>> = inputs.iter().map(|v| v.data.to_le_bytes()).collect();
    let mut m = Machine::new(&p, &bytes);
    m.run(&p);
    (0..g.outputs.len()).map(|k| m.output(&p, k)).collect()
}

// ------------------------------------------------------------------------------------------
// Fixtures: lowered program == TFLite's outputs.
// ------------------------------------------------------------------------------------------

fn check_fixture(model: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(model);
    let g = crate::import::load(&dir.join(format!("{model}.tflite"))).expect("fixture loads");
    let n = g.inputs.len();
    for k in 0..3 {
        let inputs: Vec<Value> = (0..n)
            .map(|j| {
                let f = if n == 1 {
                    format!("input_{k}.npy")
                } else {
                    format!("input_{k}_{j}.npy")
                };
                Value::read_npy(&dir.join("io").join(f)).expect("input npy")
            })
            .collect();
        let got = run_program(&g, &inputs);
        let want =
            Value::read_npy(&dir.join("io").join(format!("output_{k}.npy"))).expect("output npy");
        let size = want.dtype().size();
        if let Some(d) = diff(&got[0], &want.data.to_le_bytes(), size) {
            panic!("{model} input {k}: {d}");
        }
        for (accel, got) in run_compiled(&g, &inputs) {
            if let Some(d) = diff(&got[0], &want.data.to_le_bytes(), size) {
                panic!("{model} input {k} compiled for {accel} and simulated: {d}");
            }
        }
    }
}

/// The whole backend (blocks, weight encoding, allocation, emission) for every accelerator,
/// run on the virtual NPU: `(accelerator, output bytes)`.
fn run_compiled(g: &Graph, inputs: &[Value]) -> Vec<(&'static str, Vec<Vec<u8>>)> {
    ALL_ACCELERATORS
        .iter()
        .map(|&accel| {
            let compiled = crate::ethos_u::compile(g, accel)
                .unwrap_or_else(|e| panic!("{}: compile for {}: {e}", g.name, accel.name));
            let (outputs, _) = compiled
                .run_sim(inputs)
                .unwrap_or_else(|e| panic!("{}: simulation on {}: {e}", g.name, accel.name));
            (
                accel.name,
                outputs.iter().map(|v| v.data.to_le_bytes()).collect(),
            )
        })
        .collect()
}

/// The graph with every operator on the CPU (the kernels of `npu_rt::cpu`): output bytes.
fn run_all_cpu(g: &Graph, inputs: &[Value]) -> Result<Vec<Vec<u8>>, String> {
    let options = crate::ethos_u::CompileOptions {
        force_cpu: g.ops.iter().map(|op| op.name.clone()).collect(),
        ..Default::default()
    };
    let compiled = crate::ethos_u::compile_with(g, &ETHOS_U55_128, &options)
        .map_err(|e| format!("compile for the CPU: {e}"))?;
    if compiled.npu_ops != 0 || compiled.cpu_ops() < g.ops.len() {
        return Err(format!(
            "{} NPU operations, {} CPU steps left",
            compiled.npu_ops,
            compiled.cpu_ops()
        ));
    }
    let (outputs, _) = compiled
        .run_sim(inputs)
        .map_err(|e| format!("CPU run: {e}"))?;
    Ok(outputs.iter().map(|v| v.data.to_le_bytes()).collect())
}

macro_rules! fixture_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                check_fixture(stringify!($name));
            }
        )*
    };
}

fixture_tests!(
    op_conv1x1,
    op_conv3x3_s1_relu6,
    op_conv3x3_s2,
    op_conv5x5_valid,
    op_dwconv3x3_s1,
    op_dwconv3x3_s2,
    op_fc,
    op_reshape_fc,
    op_add,
    op_mul,
    op_maxpool3x3_s2,
    op_avgpool2x2,
    op_concat,
);

// ------------------------------------------------------------------------------------------
// Synthetic graphs: lowered program == reference interpreter.
// ------------------------------------------------------------------------------------------

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
}

#[derive(Default)]
struct Builder {
    g: Graph,
}

impl Builder {
    fn tensor(
        &mut self,
        name: &str,
        shape: &[usize],
        dtype: DType,
        q: Option<(f32, i32)>,
    ) -> TensorId {
        self.g.add_tensor(Tensor {
            name: name.into(),
            shape: shape.to_vec(),
            dtype,
            quant: q.map(|(s, z)| Quantization::per_tensor(s, z)),
            data: None,
        })
    }

    fn input(&mut self, name: &str, shape: &[usize], dtype: DType, s: f32, z: i32) -> TensorId {
        let t = self.tensor(name, shape, dtype, Some((s, z)));
        self.g.inputs.push(t);
        t
    }

    fn output(&mut self, name: &str, shape: &[usize], dtype: DType, s: f32, z: i32) -> TensorId {
        let t = self.tensor(name, shape, dtype, Some((s, z)));
        self.g.outputs.push(t);
        t
    }

    fn konst(
        &mut self,
        name: &str,
        shape: &[usize],
        dtype: DType,
        q: Quantization,
        data: Vec<u8>,
    ) -> TensorId {
        self.g.add_tensor(Tensor {
            name: name.into(),
            shape: shape.to_vec(),
            dtype,
            quant: Some(q),
            data: Some(data),
        })
    }

    /// Random int8 weights with per-channel scales along `axis` (`channels` of them).
    fn weights(
        &mut self,
        rng: &mut Rng,
        shape: &[usize],
        axis: usize,
        channels: usize,
    ) -> TensorId {
        let n: usize = shape.iter().product();
        let data = (0..n).map(|_| rng.range(-127, 127) as i8 as u8).collect();
        let scale = (0..channels)
            .map(|c| 0.002 + 0.0005 * (c % 7) as f32)
            .collect();
        let q = Quantization {
            scale,
            zero_point: vec![0; channels],
            axis: Some(axis),
        };
        self.konst("w", shape, DType::I8, q, data)
    }

    fn bias(&mut self, rng: &mut Rng, n: usize, scale: f32) -> TensorId {
        let data = (0..n)
            .flat_map(|_| (rng.range(-3000, 3000) as i32).to_le_bytes())
            .collect();
        self.konst(
            "b",
            &[n],
            DType::I32,
            Quantization::per_tensor(scale, 0),
            data,
        )
    }

    fn op(&mut self, kind: OpKind, inputs: Vec<TensorId>, outputs: Vec<TensorId>) {
        let name = format!("op{}", self.g.ops.len());
        self.g.ops.push(Op {
            name,
            kind,
            inputs,
            outputs,
        });
    }
}

fn random_input(rng: &mut Rng, t: &Tensor) -> Value {
    let n = t.elements();
    let data = match t.dtype {
        DType::I8 => Data::I8((0..n).map(|_| rng.range(-128, 127) as i8).collect()),
        DType::U8 => Data::U8((0..n).map(|_| rng.range(0, 255) as u8).collect()),
        DType::I16 => Data::I16((0..n).map(|_| rng.range(-32768, 32767) as i16).collect()),
        DType::I32 => Data::I32((0..n).map(|_| rng.next() as i32).collect()),
        other => panic!("no random {other}"),
    };
    Value::new(t.shape.clone(), data).expect("value")
}

/// Lowered program == reference interpreter on a few random inputs.
fn check_graph(g: Graph, name: &str) {
    check_graph_with(g, name, true)
}

/// [`check_graph`]; `model` false skips the test-only execution model (operations it does not
/// model), keeping the simulator and the CPU kernels.
fn check_graph_with(mut g: Graph, name: &str, model: bool) {
    g.name = name.into();
    g.validate()
        .unwrap_or_else(|e| panic!("{name}: invalid test graph: {e}"));
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ name.len() as u64);
    for trial in 0..3 {
        let inputs: Vec<Value> = g
            .inputs
            .iter()
            .map(|&t| random_input(&mut rng, &g.tensors[t]))
            .collect();
        let want = crate::reference::run(&g, &inputs)
            .unwrap_or_else(|e| panic!("{name}: reference failed: {e}"));
        if model {
            let got = run_program(&g, &inputs);
            for (k, w) in want.iter().enumerate() {
                if let Some(d) = diff(&got[k], &w.data.to_le_bytes(), w.dtype().size()) {
                    panic!("{name} trial {trial} output {k}: {d}");
                }
            }
        }
        for (accel, got) in run_compiled(&g, &inputs) {
            for (k, w) in want.iter().enumerate() {
                if let Some(d) = diff(&got[k], &w.data.to_le_bytes(), w.dtype().size()) {
                    panic!("{name} trial {trial} output {k} on {accel} (simulated): {d}");
                }
            }
        }
        let got = run_all_cpu(&g, &inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (k, w) in want.iter().enumerate() {
            if let Some(d) = diff(&got[k], &w.data.to_le_bytes(), w.dtype().size()) {
                panic!("{name} trial {trial} output {k} on the CPU kernels: {d}");
            }
        }
    }
}

fn pool_graph(
    max: bool,
    x_shape: [usize; 4],
    kernel: (usize, usize),
    stride: (usize, usize),
    padding: Padding,
    act: Activation,
    out_q: (f32, i32),
) -> Graph {
    let mut b = Builder::default();
    let x = b.input("x", &x_shape, DType::I8, 0.05, -3);
    let oh = (x_shape[1] + padding.top + padding.bottom - kernel.0) / stride.0 + 1;
    let ow = (x_shape[2] + padding.left + padding.right - kernel.1) / stride.1 + 1;
    let y = b.output("y", &[1, oh, ow, x_shape[3]], DType::I8, out_q.0, out_q.1);
    let attrs = PoolAttrs {
        kernel,
        stride,
        padding,
        activation: act,
    };
    let kind = if max {
        OpKind::MaxPool(attrs)
    } else {
        OpKind::AvgPool(attrs)
    };
    b.op(kind, vec![x], vec![y]);
    b.g
}

fn pads(top: usize, left: usize, bottom: usize, right: usize) -> Padding {
    Padding {
        top,
        left,
        bottom,
        right,
    }
}

#[test]
fn avgpool_padded_same() {
    let g = pool_graph(
        false,
        [1, 7, 9, 5],
        (3, 3),
        (1, 1),
        pads(1, 1, 1, 1),
        Activation::None,
        (0.05, -3),
    );
    check_graph(g, "avgpool_padded_same");
    let g = pool_graph(
        false,
        [1, 8, 8, 3],
        (2, 2),
        (2, 2),
        pads(0, 0, 1, 1),
        Activation::Relu6,
        (0.05, -3),
    );
    check_graph(g, "avgpool_padded_s2");
    let g = pool_graph(
        false,
        [1, 9, 11, 4],
        (5, 5),
        (2, 2),
        pads(2, 2, 2, 2),
        Activation::None,
        (0.05, -3),
    );
    check_graph(g, "avgpool_padded_5x5");
}

#[test]
fn avgpool_requantized_and_unpadded() {
    let g = pool_graph(
        false,
        [1, 6, 6, 4],
        (2, 2),
        (2, 2),
        pads(0, 0, 0, 0),
        Activation::None,
        (0.11, 7),
    );
    check_graph(g, "avgpool_requant");
    let g = pool_graph(
        false,
        [1, 7, 7, 4],
        (3, 3),
        (1, 1),
        pads(1, 1, 1, 1),
        Activation::Relu,
        (0.03, 2),
    );
    check_graph(g, "avgpool_requant_padded");
    let g = pool_graph(
        false,
        [1, 7, 7, 4],
        (7, 7),
        (1, 1),
        pads(0, 0, 0, 0),
        Activation::None,
        (0.05, -3),
    );
    check_graph(g, "avgpool_global");
}

#[test]
fn maxpool_padded_and_requantized() {
    let g = pool_graph(
        true,
        [1, 7, 9, 5],
        (3, 3),
        (2, 2),
        pads(1, 1, 1, 1),
        Activation::None,
        (0.05, -3),
    );
    check_graph(g, "maxpool_padded");
    let g = pool_graph(
        true,
        [1, 8, 8, 3],
        (2, 2),
        (2, 2),
        pads(0, 0, 0, 0),
        Activation::Relu,
        (0.08, 5),
    );
    check_graph(g, "maxpool_requant");
}

fn conv_graph(
    rng: &mut Rng,
    x_shape: [usize; 4],
    out_c: usize,
    kernel: (usize, usize),
    attrs: ConvAttrs,
    depth_multiplier: Option<usize>,
) -> Graph {
    let mut b = Builder::default();
    let x = b.input("x", &x_shape, DType::I8, 0.04, 3);
    let (kh, kw) = kernel;
    let dkh = attrs.dilation.0 * (kh - 1) + 1;
    let dkw = attrs.dilation.1 * (kw - 1) + 1;
    let p = attrs.padding;
    let oh = (x_shape[1] + p.top + p.bottom - dkh) / attrs.stride.0 + 1;
    let ow = (x_shape[2] + p.left + p.right - dkw) / attrs.stride.1 + 1;
    let (w, kind) = match depth_multiplier {
        None => (
            b.weights(rng, &[out_c, kh, kw, x_shape[3]], 0, out_c),
            OpKind::Conv2d(attrs),
        ),
        Some(m) => (
            b.weights(rng, &[1, kh, kw, out_c], 3, out_c),
            OpKind::DepthwiseConv2d {
                attrs,
                depth_multiplier: m,
            },
        ),
    };
    let bias = b.bias(rng, out_c, 0.04 * 0.002);
    let y = b.output("y", &[1, oh, ow, out_c], DType::I8, 0.06, -5);
    b.op(kind, vec![x, w, bias], vec![y]);
    b.g
}

fn conv_attrs(
    stride: (usize, usize),
    dilation: (usize, usize),
    padding: Padding,
    act: Activation,
) -> ConvAttrs {
    ConvAttrs {
        stride,
        dilation,
        padding,
        activation: act,
    }
}

#[test]
fn conv_dilations_and_strides() {
    let mut rng = Rng(7);
    let a = conv_attrs((1, 1), (3, 3), pads(3, 3, 3, 3), Activation::None);
    check_graph(
        conv_graph(&mut rng, [1, 9, 9, 4], 6, (3, 3), a, None),
        "conv_dil3",
    );
    let a = conv_attrs((1, 2), (4, 2), pads(4, 2, 4, 2), Activation::Relu);
    check_graph(
        conv_graph(&mut rng, [1, 10, 9, 3], 5, (3, 3), a, None),
        "conv_dil4_2",
    );
    let a = conv_attrs((2, 3), (1, 1), pads(0, 1, 2, 1), Activation::Relu6);
    check_graph(
        conv_graph(&mut rng, [1, 11, 13, 7], 9, (3, 2), a, None),
        "conv_s23_asym",
    );
    // Stride 5 with a single output row: legal (the stride never applies).
    let a = conv_attrs((5, 1), (1, 1), pads(0, 0, 0, 0), Activation::None);
    check_graph(
        conv_graph(&mut rng, [1, 3, 5, 2], 3, (3, 3), a, None),
        "conv_s5_single_row",
    );
}

#[test]
fn depthwise_multipliers() {
    let mut rng = Rng(11);
    let a = conv_attrs((1, 1), (2, 2), pads(2, 2, 2, 2), Activation::None);
    check_graph(
        conv_graph(&mut rng, [1, 8, 8, 6], 6, (3, 3), a, Some(1)),
        "dw_dil2",
    );
    let a = conv_attrs((2, 2), (1, 1), pads(1, 1, 1, 1), Activation::Relu6);
    check_graph(
        conv_graph(&mut rng, [1, 8, 7, 3], 6, (3, 3), a, Some(2)),
        "dw_mult2",
    );
    let a = conv_attrs((1, 1), (3, 3), pads(3, 3, 3, 3), Activation::None);
    check_graph(
        conv_graph(&mut rng, [1, 9, 9, 2], 8, (3, 3), a, Some(4)),
        "dw_mult4_dil3",
    );
}

#[test]
fn fully_connected_rows_and_per_tensor_scale() {
    let mut rng = Rng(13);
    let mut b = Builder::default();
    let x = b.input("x", &[6, 20], DType::I8, 0.03, -2);
    let data = (0..7 * 20)
        .map(|_| rng.range(-127, 127) as i8 as u8)
        .collect();
    let w = b.konst(
        "w",
        &[7, 20],
        DType::I8,
        Quantization::per_tensor(0.0031, 0),
        data,
    );
    let bias = b.bias(&mut rng, 7, 0.03 * 0.0031);
    let y = b.output("y", &[6, 7], DType::I8, 0.07, 4);
    b.op(
        OpKind::FullyConnected {
            activation: Activation::Relu,
        },
        vec![x, w, bias],
        vec![y],
    );
    check_graph(b.g, "fc_rows");
}

fn binary_graph(
    kind: OpKind,
    a: (&[usize], f32, i32),
    bq: (&[usize], f32, i32),
    y: (&[usize], f32, i32),
) -> Graph {
    let mut b = Builder::default();
    let ta = b.input("a", a.0, DType::I8, a.1, a.2);
    let tb = b.input("b", bq.0, DType::I8, bq.1, bq.2);
    let ty = b.output("y", y.0, DType::I8, y.1, y.2);
    b.op(kind, vec![ta, tb], vec![ty]);
    b.g
}

#[test]
fn add_sub_mul_broadcasts_and_scales() {
    let add = OpKind::Add {
        activation: Activation::None,
    };
    let sub = OpKind::Sub {
        activation: Activation::Relu,
    };
    let mul = OpKind::Mul {
        activation: Activation::None,
    };
    let full: &[usize] = &[1, 4, 5, 6];
    // Second input broadcast along H and W; scale ratio far from 1.
    check_graph(
        binary_graph(
            add.clone(),
            (full, 0.1, 3),
            (&[1, 1, 1, 6], 0.01, -4),
            (full, 0.12, 1),
        ),
        "add_bcast_b",
    );
    // First input broadcast: operands swapped (reversed).
    check_graph(
        binary_graph(
            sub.clone(),
            (&[1, 4, 1, 6], 0.02, 1),
            (full, 0.05, -2),
            (full, 0.04, -9),
        ),
        "sub_bcast_a",
    );
    check_graph(
        binary_graph(sub, (&[6], 0.05, 0), (full, 0.02, 5), (full, 0.06, 0)),
        "sub_rank1_a",
    );
    // Equal scales.
    check_graph(
        binary_graph(add, (full, 0.05, 2), (full, 0.05, -7), (full, 0.1, 0)),
        "add_equal_scales",
    );
    check_graph(
        binary_graph(
            mul,
            (full, 0.05, 2),
            (&[1, 4, 5, 1], 0.02, -1),
            (full, 0.01, 3),
        ),
        "mul_bcast_c",
    );
}

#[test]
fn add_with_scalar_constant_first() {
    let mut b = Builder::default();
    let k = b.konst(
        "k",
        &[1],
        DType::I8,
        Quantization::per_tensor(0.02, 1),
        vec![77],
    );
    let x = b.input("x", &[1, 3, 4, 5], DType::I8, 0.03, -1);
    let y = b.output("y", &[1, 3, 4, 5], DType::I8, 0.05, 2);
    b.op(
        OpKind::Sub {
            activation: Activation::None,
        },
        vec![k, x],
        vec![y],
    );
    check_graph(b.g, "scalar_minus_x");
}

#[test]
fn concat_same_and_rescaled() {
    for (axis, name) in [(3usize, "concat_c"), (2, "concat_w"), (1, "concat_h")] {
        let mut b = Builder::default();
        let mut s1 = [1, 3, 4, 5];
        let mut s2 = [1, 3, 4, 5];
        s1[axis] = 2;
        s2[axis] = 3;
        let mut so = [1, 3, 4, 5];
        so[axis] = 5;
        let x1 = b.input("x1", &s1, DType::I8, 0.05, -3);
        let x2 = b.input("x2", &s2, DType::I8, 0.037, 6);
        let y = b.output("y", &so, DType::I8, 0.05, -3);
        b.op(
            OpKind::Concat {
                axis,
                activation: Activation::Relu,
            },
            vec![x1, x2],
            vec![y],
        );
        check_graph(b.g, name);
    }
}

#[test]
fn pad_values_and_requant() {
    for (value, out_q, name) in [
        (None, (0.05, -3), "pad_zp"),
        (Some(17), (0.05, -3), "pad_value"),
        (None, (0.08, 4), "pad_requant"),
    ] {
        let mut b = Builder::default();
        let x = b.input("x", &[1, 5, 6, 3], DType::I8, 0.05, -3);
        let y = b.output("y", &[1, 8, 9, 6], DType::I8, out_q.0, out_q.1);
        b.op(
            OpKind::Pad {
                pads: vec![(0, 0), (1, 2), (0, 3), (2, 1)],
                value,
            },
            vec![x],
            vec![y],
        );
        check_graph(b.g, name);
    }
}

#[test]
fn quantize_and_standalone_activation() {
    let mut b = Builder::default();
    let x = b.input("x", &[1, 4, 4, 3], DType::I8, 0.05, -3);
    let y = b.output("y", &[1, 4, 4, 3], DType::U8, 0.07, 120);
    b.op(OpKind::Quantize, vec![x], vec![y]);
    check_graph(b.g, "quantize_i8_u8");
    let mut b = Builder::default();
    let x = b.input("x", &[1, 4, 4, 3], DType::I8, 0.05, -3);
    let y = b.output("y", &[1, 4, 4, 3], DType::I8, 0.02, -128);
    b.op(OpKind::Activation(Activation::Relu6), vec![x], vec![y]);
    check_graph(b.g, "relu6_rescale");
    let mut b = Builder::default();
    let x = b.input("x", &[1, 4, 4, 3], DType::I8, 0.05, -3);
    let y = b.output("y", &[1, 4, 4, 3], DType::I8, 0.011, 9);
    b.op(OpKind::Quantize, vec![x], vec![y]);
    check_graph(b.g, "requant_up");
}

#[test]
fn reshape_into_graph_output_copies() {
    let mut b = Builder::default();
    let x = b.input("x", &[1, 2, 3, 4], DType::I8, 0.05, -3);
    let y = b.output("y", &[1, 24], DType::I8, 0.05, -3);
    b.op(OpKind::Reshape, vec![x], vec![y]);
    check_graph(b.g, "reshape_copy");
}

#[test]
fn fully_connected_per_channel_many_outputs() {
    // 64 rows x 16 outputs x 3 trials: the NATURAL-rounded multiplier against TFLite's
    // `round(double(acc) * scale)`.
    let mut rng = Rng(17);
    let mut b = Builder::default();
    let x = b.input("x", &[64, 48], DType::I8, 0.021, 5);
    let w = b.weights(&mut rng, &[16, 48], 0, 16);
    let bias = b.bias(&mut rng, 16, 0.021 * 0.002);
    let y = b.output("y", &[64, 16], DType::I8, 0.033, -6);
    b.op(
        OpKind::FullyConnected {
            activation: Activation::None,
        },
        vec![x, w, bias],
        vec![y],
    );
    check_graph(b.g, "fc_per_channel");
}

#[test]
fn uint8_conv_with_weight_zero_point() {
    let mut rng = Rng(19);
    let mut b = Builder::default();
    let x = b.input("x", &[1, 6, 6, 3], DType::U8, 0.02, 128);
    let data = (0..4 * 3 * 3 * 3)
        .map(|_| rng.range(0, 255) as u8)
        .collect();
    let w = b.konst(
        "w",
        &[4, 3, 3, 3],
        DType::U8,
        Quantization::per_tensor(0.004, 131),
        data,
    );
    let bias = b.bias(&mut rng, 4, 0.02 * 0.004);
    let y = b.output("y", &[1, 6, 6, 4], DType::U8, 0.05, 120);
    b.op(
        OpKind::Conv2d(conv_attrs(
            (1, 1),
            (1, 1),
            pads(1, 1, 1, 1),
            Activation::Relu,
        )),
        vec![x, w, bias],
        vec![y],
    );
    check_graph(b.g, "conv_u8");
}

#[test]
fn strides_above_three_unroll() {
    let mut rng = Rng(23);
    let a = conv_attrs((4, 4), (1, 1), pads(1, 1, 2, 2), Activation::None);
    check_graph(
        conv_graph(&mut rng, [1, 13, 13, 3], 4, (4, 4), a, None),
        "conv_s4_padded",
    );
    let a = conv_attrs((5, 2), (1, 1), pads(0, 1, 0, 1), Activation::Relu);
    check_graph(
        conv_graph(&mut rng, [1, 12, 9, 2], 3, (3, 3), a, None),
        "conv_s5x2",
    );
    let a = conv_attrs((4, 4), (2, 2), pads(2, 2, 2, 2), Activation::None);
    check_graph(
        conv_graph(&mut rng, [1, 11, 11, 4], 4, (3, 3), a, Some(1)),
        "dw_s4_dil2",
    );
    let g = pool_graph(
        true,
        [1, 13, 12, 3],
        (3, 3),
        (4, 4),
        pads(1, 1, 1, 1),
        Activation::None,
        (0.05, -3),
    );
    check_graph(g, "maxpool_s4");
    let g = pool_graph(
        false,
        [1, 13, 12, 3],
        (3, 3),
        (4, 5),
        pads(1, 1, 1, 1),
        Activation::None,
        (0.05, -3),
    );
    check_graph(g, "avgpool_s4x5_padded");
    let g = pool_graph(
        false,
        [1, 16, 16, 3],
        (4, 4),
        (4, 4),
        pads(0, 0, 0, 0),
        Activation::None,
        (0.05, -3),
    );
    check_graph(g, "avgpool_s4");
}

#[test]
fn other_integer_types() {
    // uint8 Add, int16 Mul.
    let mut b = Builder::default();
    let ta = b.input("a", &[1, 3, 4, 5], DType::U8, 0.04, 128);
    let tb = b.input("b", &[1, 1, 4, 5], DType::U8, 0.01, 3);
    let ty = b.output("y", &[1, 3, 4, 5], DType::U8, 0.05, 100);
    b.op(
        OpKind::Add {
            activation: Activation::Relu6,
        },
        vec![ta, tb],
        vec![ty],
    );
    check_graph(b.g, "add_u8");
    let mut b = Builder::default();
    let ta = b.input("a", &[1, 3, 4, 5], DType::I16, 0.0004, 0);
    let tb = b.input("b", &[1, 3, 4, 5], DType::I16, 0.0003, 0);
    let ty = b.output("y", &[1, 3, 4, 5], DType::I16, 0.0005, 0);
    b.op(
        OpKind::Mul {
            activation: Activation::None,
        },
        vec![ta, tb],
        vec![ty],
    );
    check_graph(b.g, "mul_i16");
    // int16 pooling.
    for (max, name) in [(true, "maxpool_i16"), (false, "avgpool_i16_padded")] {
        let mut b = Builder::default();
        let x = b.input("x", &[1, 7, 7, 3], DType::I16, 0.001, 0);
        let y = b.output("y", &[1, 4, 4, 3], DType::I16, 0.001, 0);
        let attrs = PoolAttrs {
            kernel: (3, 3),
            stride: (2, 2),
            padding: pads(1, 1, 1, 1),
            activation: Activation::None,
        };
        let kind = if max {
            OpKind::MaxPool(attrs)
        } else {
            OpKind::AvgPool(attrs)
        };
        b.op(kind, vec![x], vec![y]);
        check_graph(b.g, name);
    }
}

#[test]
fn int16_conv_is_a_limit() {
    let mut rng = Rng(29);
    let mut b = Builder::default();
    let x = b.input("x", &[1, 6, 6, 3], DType::I16, 0.0005, 0);
    let w = b.weights(&mut rng, &[4, 3, 3, 3], 0, 4);
    let data = (0..4)
        .flat_map(|_| (rng.range(-300_000, 300_000)).to_le_bytes())
        .collect();
    let bias = b.konst(
        "b",
        &[4],
        DType::I64,
        Quantization::per_tensor(0.0005 * 0.002, 0),
        data,
    );
    let y = b.output("y", &[1, 6, 6, 4], DType::I16, 0.0007, 0);
    b.op(
        OpKind::Conv2d(conv_attrs(
            (1, 1),
            (1, 1),
            pads(1, 1, 1, 1),
            Activation::None,
        )),
        vec![x, w, bias],
        vec![y],
    );
    // Not lowered (no reference for TFLite's 16x8 kernels): a hardware-limit error, no panic.
    let err = super::lower(&b.g, &ETHOS_U55_128).unwrap_err();
    assert!(
        matches!(err, crate::error::Error::HardwareLimit { .. }),
        "{err}"
    );
}

// ------------------------------------------------------------------------------------------
// Property test: random small graphs, compiled and simulated == reference interpreter.
// ------------------------------------------------------------------------------------------

/// A feature map of a random graph under construction.
struct Fm {
    id: TensorId,
    shape: [usize; 4],
    q: (f32, i32),
}

fn random_activation(rng: &mut Rng) -> Activation {
    match rng.range(0, 5) {
        0 => Activation::Relu,
        1 => Activation::Relu6,
        2 => Activation::ReluN1To1,
        3 => Activation::Clip {
            min: -0.5,
            max: 2.0,
        },
        _ => Activation::None,
    }
}

fn random_q(rng: &mut Rng, around: f32) -> (f32, i32) {
    let scale = around * (0.5 + rng.range(0, 100) as f32 / 100.0);
    (scale, rng.range(-20, 20) as i32)
}

/// Output size of a window of `k` (dilated) taps with stride `s` over `n + pad` elements.
fn out_dim(n: usize, pad: usize, k: usize, s: usize) -> Option<usize> {
    (n + pad).checked_sub(k).map(|r| r / s + 1)
}

/// Random padding for a window of `k` taps: each side at most `k - 1`.
fn random_pads(rng: &mut Rng, kh: usize, kw: usize) -> Padding {
    let mut side = |k: usize| rng.range(0, k as i64 - 1) as usize;
    let (top, bottom) = (side(kh), side(kh));
    let (left, right) = (side(kw), side(kw));
    pads(top, left, bottom, right)
}

/// Appends one random operation reading `x`; `None` when the random window does not fit.
fn random_op(b: &mut Builder, rng: &mut Rng, x: &Fm, last: bool) -> Option<Fm> {
    let [_, h, w, c] = x.shape;
    let kind = rng.range(0, 4);
    let act = random_activation(rng);
    let new_fm = |b: &mut Builder, shape: [usize; 4], q: (f32, i32)| {
        let name = format!("t{}", b.g.tensors.len());
        let id = if last {
            b.output(&name, &shape, DType::I8, q.0, q.1)
        } else {
            b.tensor(&name, &shape, DType::I8, Some(q))
        };
        Fm { id, shape, q }
    };
    match kind {
        // Convolution or depthwise convolution.
        0 | 1 => {
            let depthwise = kind == 1;
            let (kh, kw) = (rng.range(1, 5) as usize, rng.range(1, 5) as usize);
            let stride = (rng.range(1, 3) as usize, rng.range(1, 3) as usize);
            let dilation = if rng.range(0, 3) == 0 { (2, 2) } else { (1, 1) };
            let (dkh, dkw) = (dilation.0 * (kh - 1) + 1, dilation.1 * (kw - 1) + 1);
            let p = random_pads(rng, dkh, dkw);
            let oh = out_dim(h, p.top + p.bottom, dkh, stride.0)?;
            let ow = out_dim(w, p.left + p.right, dkw, stride.1)?;
            let (out_c, taps) = if depthwise {
                let m = rng.range(1, 2) as usize;
                (c * m, kh * kw)
            } else {
                (rng.range(1, 24) as usize, kh * kw * c)
            };
            let weights = if depthwise {
                b.weights(rng, &[1, kh, kw, out_c], 3, out_c)
            } else {
                b.weights(rng, &[out_c, kh, kw, c], 0, out_c)
            };
            let bias = b.bias(rng, out_c, x.q.0 * 0.002);
            // About 40 output steps per standard deviation of the accumulator.
            let around = x.q.0 * 0.0035 * 70.0 * 70.0 * (taps as f32).sqrt() / 40.0;
            let y = new_fm(b, [1, oh, ow, out_c], random_q(rng, around));
            let attrs = conv_attrs(stride, dilation, p, act);
            let kind = if depthwise {
                OpKind::DepthwiseConv2d {
                    attrs,
                    depth_multiplier: out_c / c,
                }
            } else {
                OpKind::Conv2d(attrs)
            };
            b.op(kind, vec![x.id, weights, bias], vec![y.id]);
            Some(y)
        }
        // Max or average pooling.
        2 => {
            let max = rng.range(0, 1) == 0;
            let (kh, kw) = (rng.range(1, 4) as usize, rng.range(1, 4) as usize);
            let stride = (rng.range(1, 3) as usize, rng.range(1, 3) as usize);
            let p = random_pads(rng, kh, kw);
            let oh = out_dim(h, p.top + p.bottom, kh, stride.0)?;
            let ow = out_dim(w, p.left + p.right, kw, stride.1)?;
            let q = if rng.range(0, 1) == 0 {
                x.q
            } else {
                random_q(rng, x.q.0)
            };
            let y = new_fm(b, [1, oh, ow, c], q);
            let attrs = PoolAttrs {
                kernel: (kh, kw),
                stride,
                padding: p,
                activation: act,
            };
            let kind = if max {
                OpKind::MaxPool(attrs)
            } else {
                OpKind::AvgPool(attrs)
            };
            b.op(kind, vec![x.id], vec![y.id]);
            Some(y)
        }
        // Add, Sub or Mul with a second graph input, full or broadcast.
        _ => {
            let other_shape: [usize; 4] = match rng.range(0, 2) {
                0 => x.shape,
                1 => [1, 1, 1, c],
                _ => [1, h, w, 1],
            };
            let oq = random_q(rng, 0.05);
            let name = format!("in{}", b.g.tensors.len());
            let other = b.input(&name, &other_shape, DType::I8, oq.0, oq.1);
            let (kind, around) = match rng.range(0, 2) {
                0 => (OpKind::Add { activation: act }, x.q.0 + oq.0),
                1 => (OpKind::Sub { activation: act }, x.q.0 + oq.0),
                _ => (OpKind::Mul { activation: act }, x.q.0 * oq.0 * 64.0),
            };
            let y = new_fm(b, x.shape, random_q(rng, around));
            let inputs = if rng.range(0, 1) == 0 {
                vec![x.id, other]
            } else {
                vec![other, x.id]
            };
            b.op(kind, inputs, vec![y.id]);
            Some(y)
        }
    }
}

/// A random chain of one to three operations (binary operations add graph inputs).
fn random_graph(rng: &mut Rng, case: usize) -> Graph {
    loop {
        let mut b = Builder::default();
        let shape = [
            1,
            rng.range(1, 12) as usize,
            rng.range(1, 12) as usize,
            rng.range(1, 20) as usize,
        ];
        let q = random_q(rng, 0.05);
        let x = b.input("x", &shape, DType::I8, q.0, q.1);
        let mut fm = Fm { id: x, shape, q };
        let ops = rng.range(1, 3) as usize;
        let mut ok = true;
        for k in 0..ops {
            match random_op(&mut b, rng, &fm, k + 1 == ops) {
                Some(next) => fm = next,
                None => {
                    ok = false;
                    break;
                }
            }
        }
        if ok {
            b.g.name = format!("random_{case}");
            return b.g;
        }
    }
}

/// Random graphs on a random accelerator each: the compiled command stream on the virtual NPU
/// equals the reference interpreter bit for bit. `NPU_PROPTEST_CASES` and `NPU_PROPTEST_SEED`
/// run more or other cases; a failure prints the case's graph to reproduce it.
#[test]
fn random_graphs_compile_and_simulate_bit_exact() {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let cases = env("NPU_PROPTEST_CASES", 60) as usize;
    let mut rng = Rng(env("NPU_PROPTEST_SEED", 0x5EED_1234_ABCD_0001) | 1);
    let mut limits = Vec::new();
    for case in 0..cases {
        let g = random_graph(&mut rng, case);
        g.validate()
            .unwrap_or_else(|e| panic!("case {case}: invalid random graph: {e}\n{g:#?}"));
        let accel = ALL_ACCELERATORS[rng.range(0, ALL_ACCELERATORS.len() as i64 - 1) as usize];
        let compiled = match crate::ethos_u::compile(&g, accel) {
            Ok(c) => c,
            // Scales out of the hardware's range are legitimate refusals; anything else is a bug.
            Err(e @ crate::error::Error::HardwareLimit { .. }) => {
                limits.push(format!("case {case}: {e}"));
                continue;
            }
            Err(e) => panic!("case {case} on {}: {e}\n{g:#?}", accel.name),
        };
        let inputs: Vec<Value> = g
            .inputs
            .iter()
            .map(|&t| random_input(&mut rng, &g.tensors[t]))
            .collect();
        let want = crate::reference::run(&g, &inputs)
            .unwrap_or_else(|e| panic!("case {case}: reference failed: {e}\n{g:#?}"));
        let (got, _) = compiled
            .run_sim(&inputs)
            .unwrap_or_else(|e| panic!("case {case} on {}: simulation: {e}", accel.name));
        let (got, want) = (got[0].data.to_le_bytes(), want[0].data.to_le_bytes());
        if let Some(d) = diff(&got, &want, 1) {
            panic!("case {case} on {}: {d}\n{g:#?}", accel.name);
        }
        // The same graph on the CPU kernels.
        let got = run_all_cpu(&g, &inputs).unwrap_or_else(|e| panic!("case {case}: {e}\n{g:#?}"));
        if let Some(d) = diff(&got[0], &want, 1) {
            panic!("case {case} on the CPU kernels: {d}\n{g:#?}");
        }
    }
    eprintln!(
        "{} of {cases} random graphs refused by a hardware limit",
        limits.len()
    );
    // The generator makes lowerable graphs; refusals must stay rare or the test checks little.
    assert!(
        limits.len() * 10 <= cases,
        "{} of {cases} random graphs refused:\n{}",
        limits.len(),
        limits.join("\n")
    );
}

/// A float tail as onnxruntime leaves it: int8 conv on the NPU, then Dequantize, f32 Softmax and
/// an f32 Relu6 clamp on the CPU, equal to the reference interpreter bit for bit (both use
/// `npu_rt::cpu::float::exp_f32`).
#[test]
fn float_softmax_and_clamp_tail() {
    let mut rng = Rng(0xF10A7);
    let mut b = Builder::default();
    let x = b.input("x", &[1, 3, 4, 8], DType::I8, 0.05, -3);
    let w = b.weights(&mut rng, &[10, 1, 1, 8], 0, 10);
    let bias = b.bias(&mut rng, 10, 0.05 * 0.002);
    let c = b.tensor("c", &[1, 3, 4, 10], DType::I8, Some((0.08, 2)));
    b.op(
        OpKind::Conv2d(conv_attrs(
            (1, 1),
            (1, 1),
            pads(0, 0, 0, 0),
            Activation::None,
        )),
        vec![x, w, bias],
        vec![c],
    );
    let f = b.tensor("f", &[1, 3, 4, 10], DType::F32, None);
    b.op(OpKind::Dequantize, vec![c], vec![f]);
    let s = b.tensor("s", &[1, 3, 4, 10], DType::F32, None);
    b.op(OpKind::Softmax { beta: 1.7 }, vec![f], vec![s]);
    let y = b.tensor("y", &[1, 3, 4, 10], DType::F32, None);
    b.g.outputs.push(y);
    b.op(OpKind::Activation(Activation::Relu6), vec![s], vec![y]);
    let g = b.g;
    g.validate().expect("valid graph");
    let compiled = crate::ethos_u::compile(&g, &ETHOS_U55_128).expect("compile");
    let kinds: Vec<&str> = compiled
        .steps
        .iter()
        .map(|s| match s {
            crate::ethos_u::Step::Npu { .. } => "NPU",
            crate::ethos_u::Step::Cpu(c) => c.kernel.name(),
        })
        .collect();
    assert_eq!(kinds, ["NPU", "Dequantize", "Softmax", "Activation"]);
    for trial in 0..3 {
        let inputs = [random_input(&mut rng, &g.tensors[x])];
        let want = crate::reference::run(&g, &inputs).expect("reference");
        let want = want[0].data.to_le_bytes();
        let (got, _) = compiled.run_sim(&inputs).expect("run");
        assert_eq!(
            diff(&got[0].data.to_le_bytes(), &want, 4),
            None,
            "trial {trial}"
        );
        let got = run_all_cpu(&g, &inputs).expect("all on the CPU");
        assert_eq!(
            diff(&got[0], &want, 4),
            None,
            "trial {trial}, all on the CPU"
        );
    }
}

/// f32 bilinear and nearest Resize on the CPU (half-pixel centers, align-corners, plain), equal
/// to the reference interpreter's float kernels bit for bit.
#[test]
fn float_resize_on_the_cpu() {
    let modes = [
        (ResizeMode::Bilinear, false, true),
        (ResizeMode::Bilinear, true, false),
        (ResizeMode::Bilinear, false, false),
        (ResizeMode::Nearest, false, true),
    ];
    let mut rng = Rng(0x002E_512E);
    for (mode, align_corners, half_pixel_centers) in modes {
        let mut b = Builder::default();
        let x = b.input("x", &[1, 5, 7, 3], DType::I8, 0.05, -3);
        let f = b.tensor("f", &[1, 5, 7, 3], DType::F32, None);
        b.op(OpKind::Dequantize, vec![x], vec![f]);
        let y = b.tensor("y", &[1, 11, 6, 3], DType::F32, None);
        b.g.outputs.push(y);
        b.op(
            OpKind::Resize {
                mode,
                align_corners,
                half_pixel_centers,
            },
            vec![f],
            vec![y],
        );
        let g = b.g;
        g.validate().expect("valid graph");
        for trial in 0..3 {
            let inputs = [random_input(&mut rng, &g.tensors[x])];
            let want = crate::reference::run(&g, &inputs).expect("reference");
            let got = run_all_cpu(&g, &inputs).expect("CPU run");
            let d = diff(&got[0], &want[0].data.to_le_bytes(), 4);
            assert_eq!(
                d, None,
                "{mode:?} align {align_corners} half {half_pixel_centers} trial {trial}"
            );
        }
    }
}

// ------------------------------------------------------------------------------------------
// matmul: transposed convolution phases, BatchMatMul on the CPU, 3-D fully connected.
// ------------------------------------------------------------------------------------------

/// A TransposeConv2D graph: `x_shape` NHWC, `out_c` x `kernel` weights, output `out_hw`.
#[allow(clippy::too_many_arguments)]
fn transpose_conv_graph(
    rng: &mut Rng,
    x_shape: [usize; 4],
    out_c: usize,
    kernel: (usize, usize),
    stride: (usize, usize),
    pad: (usize, usize),
    out_hw: (usize, usize),
    act: Activation,
    with_bias: bool,
) -> Graph {
    let mut b = Builder::default();
    let x = b.input("x", &x_shape, DType::I8, 0.04, 3);
    let w = b.weights(rng, &[out_c, kernel.0, kernel.1, x_shape[3]], 0, out_c);
    let mut inputs = vec![x, w];
    if with_bias {
        inputs.push(b.bias(rng, out_c, 0.04 * 0.002));
    }
    let y = b.output(
        "y",
        &[x_shape[0], out_hw.0, out_hw.1, out_c],
        DType::I8,
        0.05,
        -4,
    );
    b.op(
        OpKind::TransposeConv2d(crate::ir::TransposeConvAttrs {
            stride,
            pad_top: pad.0,
            pad_left: pad.1,
            activation: act,
        }),
        inputs,
        vec![y],
    );
    b.g
}

#[test]
fn transpose_conv_phases() {
    let mut rng = Rng(21);
    // (input, out channels, kernel, stride, crop, output size, activation, bias)
    let cases = [
        // SAME stride 2 (k 3: 8 -> 16), Vela's method too.
        (
            [1, 6, 5, 4],
            5,
            (3, 3),
            (2, 2),
            (0, 0),
            (12, 10),
            Activation::None,
            true,
        ),
        // VALID stride 1.
        (
            [1, 5, 4, 3],
            4,
            (3, 2),
            (1, 1),
            (0, 0),
            (7, 5),
            Activation::Relu,
            true,
        ),
        // Stride 3 above the kernel in x (bias-only phases), no bias.
        (
            [1, 4, 4, 2],
            3,
            (3, 2),
            (3, 3),
            (0, 0),
            (12, 12),
            Activation::None,
            false,
        ),
        // Asymmetric strides, crops and an output_padding-style extra row and column.
        (
            [1, 5, 6, 3],
            6,
            (4, 3),
            (2, 3),
            (1, 2),
            (10, 17),
            Activation::Relu6,
            true,
        ),
        // Stride 4, kernel 5, cropping 2.
        (
            [1, 3, 3, 5],
            2,
            (5, 5),
            (4, 4),
            (2, 2),
            (12, 11),
            Activation::None,
            true,
        ),
        // Stride 2 with crops (the U65 runs these upscaled: padding 2 before, 1 after; 0 and 0).
        (
            [1, 5, 4, 3],
            4,
            (4, 4),
            (2, 2),
            (1, 1),
            (10, 8),
            Activation::None,
            true,
        ),
        (
            [1, 4, 4, 2],
            3,
            (2, 2),
            (2, 2),
            (1, 1),
            (7, 7),
            Activation::Relu,
            false,
        ),
        // A crop beyond the kernel (no upscaled form: phases on every target).
        (
            [1, 4, 3, 2],
            3,
            (2, 3),
            (2, 2),
            (2, 3),
            (5, 2),
            Activation::None,
            true,
        ),
        // Outputs beyond the full result (bias only) and a 1x1 kernel.
        (
            [1, 3, 2, 4],
            3,
            (1, 1),
            (2, 2),
            (0, 0),
            (7, 5),
            Activation::None,
            true,
        ),
    ];
    for (i, (x, oc, k, s, p, o, act, bias)) in cases.into_iter().enumerate() {
        let g = transpose_conv_graph(&mut rng, x, oc, k, s, p, o, act, bias);
        check_graph(g, &format!("tconv_case{i}"));
    }
}

/// Reference == compiled (the partitioner puts what the NPU cannot run on the CPU) == every
/// operator on the CPU kernels.
fn check_graph_with_cpu(mut g: Graph, name: &str) {
    g.name = name.into();
    g.validate()
        .unwrap_or_else(|e| panic!("{name}: invalid test graph: {e}"));
    let mut rng = Rng(0x51_7CC1_B727_220A ^ name.len() as u64);
    for trial in 0..3 {
        let inputs: Vec<Value> = g
            .inputs
            .iter()
            .map(|&t| random_input(&mut rng, &g.tensors[t]))
            .collect();
        let want = crate::reference::run(&g, &inputs)
            .unwrap_or_else(|e| panic!("{name}: reference failed: {e}"));
        for (accel, got) in run_compiled(&g, &inputs) {
            for (k, w) in want.iter().enumerate() {
                if let Some(d) = diff(&got[k], &w.data.to_le_bytes(), 1) {
                    panic!("{name} trial {trial} output {k} on {accel}: {d}");
                }
            }
        }
        let got = run_all_cpu(&g, &inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (k, w) in want.iter().enumerate() {
            if let Some(d) = diff(&got[k], &w.data.to_le_bytes(), 1) {
                panic!("{name} trial {trial} output {k} on the CPU kernels: {d}");
            }
        }
    }
}

/// (a shape, b shape, adj_a, adj_b, output shape)
type MatMulCase = (
    &'static [usize],
    &'static [usize],
    bool,
    bool,
    &'static [usize],
);

#[test]
fn batch_matmul_adjoints_and_broadcast() {
    let cases: [MatMulCase; 5] = [
        (&[1, 4, 8, 16], &[1, 4, 16, 8], false, false, &[1, 4, 8, 8]),
        (&[2, 5, 3], &[2, 4, 5], true, true, &[2, 3, 4]),
        (&[3, 6, 7], &[7, 2], false, false, &[3, 6, 2]),
        (&[1, 7, 5], &[2, 3, 4, 5], false, true, &[2, 3, 7, 4]),
        (&[9, 11], &[9, 10], true, false, &[11, 10]),
    ];
    for (i, (sa, sb, adj_a, adj_b, so)) in cases.into_iter().enumerate() {
        let mut b = Builder::default();
        let a = b.input("a", sa, DType::I8, 0.02, -3);
        let bb = b.input("b", sb, DType::I8, 0.03, 5);
        let y = b.output("y", so, DType::I8, 0.09, 2);
        b.op(OpKind::BatchMatMul { adj_a, adj_b }, vec![a, bb], vec![y]);
        check_graph_with_cpu(b.g, &format!("bmm_case{i}"));
    }
}

#[test]
fn fully_connected_three_d_keeps_rows() {
    let mut rng = Rng(23);
    let cases: [(&[usize], &[usize]); 2] = [(&[2, 6, 16], &[2, 6, 8]), (&[1, 5, 12], &[5, 8])];
    for (shape, out) in cases {
        let k = shape[2];
        let mut b = Builder::default();
        let x = b.input("x", shape, DType::I8, 0.03, -2);
        let w = b.weights(&mut rng, &[8, k], 0, 8);
        let bias = b.bias(&mut rng, 8, 0.03 * 0.002);
        let y = b.output("y", out, DType::I8, 0.05, 7);
        b.op(
            OpKind::FullyConnected {
                activation: Activation::None,
            },
            vec![x, w, bias],
            vec![y],
        );
        check_graph(b.g, &format!("fc3d_{}", shape[0]));
    }
}

// moveb: permutes and gathers.
#[path = "lowering_tests/fuse.rs"]
mod fuse;
#[path = "lowering_tests/lstm.rs"]
mod lstm;
#[path = "lowering_tests/permute.rs"]
mod permute;
#[path = "lowering_tests/stripe.rs"]
mod stripe;

// elem
#[path = "math_tests.rs"]
mod math_tests;

// ------------------------------------------------------------------------------------------
// reduce: SUM / REDUCE_MAX / REDUCE_MIN over axis sets, ARG_MAX / ARG_MIN, MEAN over any axes.
// Compiled for every accelerator (NPU where the lowering takes the op, the CPU kernels
// otherwise) and with every operator forced to the CPU == reference interpreter.
// ------------------------------------------------------------------------------------------

/// Compiled programs (every accelerator) and the all-CPU program == reference interpreter.
fn check_graph_compiled(mut g: Graph, name: &str) {
    g.name = name.into();
    g.validate()
        .unwrap_or_else(|e| panic!("{name}: invalid test graph: {e}"));
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ name.len() as u64);
    for trial in 0..3 {
        let inputs: Vec<Value> = g
            .inputs
            .iter()
            .map(|&t| random_input(&mut rng, &g.tensors[t]))
            .collect();
        let want = crate::reference::run(&g, &inputs)
            .unwrap_or_else(|e| panic!("{name}: reference failed: {e}"));
        for (accel, got) in run_compiled(&g, &inputs) {
            for (k, w) in want.iter().enumerate() {
                if let Some(d) = diff(&got[k], &w.data.to_le_bytes(), w.dtype().size()) {
                    panic!("{name} trial {trial} output {k} on {accel} (simulated): {d}");
                }
            }
        }
        let got = run_all_cpu(&g, &inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (k, w) in want.iter().enumerate() {
            if let Some(d) = diff(&got[k], &w.data.to_le_bytes(), w.dtype().size()) {
                panic!("{name} trial {trial} output {k} on the CPU kernels: {d}");
            }
        }
    }
}

/// The output shape of `shape` reduced over `axes`.
fn reduced_shape(shape: &[usize], axes: &[usize], keep: bool) -> Vec<usize> {
    shape
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| match (axes.contains(&i), keep) {
            (true, true) => Some(1),
            (true, false) => None,
            (false, _) => Some(d),
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn reduce_graph(
    kind: OpKind,
    shape: &[usize],
    axes: &[usize],
    keep: bool,
    dtype: DType,
    in_q: (f32, i32),
    out_q: (f32, i32),
) -> Graph {
    let mut b = Builder::default();
    let x = b.input("x", shape, dtype, in_q.0, in_q.1);
    let out_shape = reduced_shape(shape, axes, keep);
    let y = b.output("y", &out_shape, dtype, out_q.0, out_q.1);
    b.op(kind, vec![x], vec![y]);
    b.g
}

#[test]
fn reduce_sum_max_min_over_axis_sets() {
    use crate::ir::ReduceOp;
    let cases: &[(&[usize], &[usize], bool)] = &[
        (&[1, 8, 8, 16], &[1, 2], true),
        (&[1, 8, 8, 16], &[3], false),
        (&[1, 4, 5, 6], &[1], true),
        (&[1, 4, 5, 6], &[2], false),
        (&[1, 4, 5, 6], &[1, 3], true),
        (&[1, 4, 5, 6], &[0, 1, 2, 3], false),
        (&[3, 7], &[0], false),
        (&[2, 3, 4, 5, 6], &[1, 4], true),
        (&[40, 300], &[1], false),
        (&[1, 4, 5, 6], &[], true),
    ];
    for (i, &(shape, axes, keep)) in cases.iter().enumerate() {
        for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
            let kind = OpKind::Reduce {
                op,
                axes: axes.to_vec(),
                keep_dims: keep,
            };
            let (in_q, out_q) = match op {
                ReduceOp::Sum => ((0.02, -3), (0.15, 5)),
                _ => ((0.02, -3), (0.02, -3)),
            };
            for dtype in [DType::I8, DType::U8] {
                let (zi, zo) = if dtype == DType::U8 {
                    (in_q.1 + 128, out_q.1 + 128)
                } else {
                    (in_q.1, out_q.1)
                };
                let g = reduce_graph(
                    kind.clone(),
                    shape,
                    axes,
                    keep,
                    dtype,
                    (in_q.0, zi),
                    (out_q.0, zo),
                );
                check_graph_compiled(g, &format!("reduce{i}_{}_{dtype}", op.name()));
            }
        }
    }
}

#[test]
fn reduce_requantized_and_16_bit() {
    use crate::ir::ReduceOp;
    // ONNX ReduceMax / ReduceMin with an output quantized unlike the input.
    for op in [ReduceOp::Max, ReduceOp::Min] {
        let kind = OpKind::Reduce {
            op,
            axes: vec![2],
            keep_dims: false,
        };
        let g = reduce_graph(
            kind,
            &[1, 6, 7, 5],
            &[2],
            false,
            DType::I8,
            (0.02, 4),
            (0.05, -9),
        );
        check_graph_compiled(g, &format!("requant_{}", op.name()));
    }
    // int16: zero points 0, SUM in the same quantization (wrapping int16 sum).
    for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
        let kind = OpKind::Reduce {
            op,
            axes: vec![1, 2],
            keep_dims: true,
        };
        let g = reduce_graph(
            kind,
            &[1, 3, 4, 5],
            &[1, 2],
            true,
            DType::I16,
            (0.001, 0),
            (0.001, 0),
        );
        check_graph_compiled(g, &format!("i16_{}", op.name()));
    }
}

#[test]
fn arg_max_min_every_axis_and_index_type() {
    let shape = [2, 5, 3, 4];
    for axis in 0..4 {
        for max in [true, false] {
            for (dtype, index) in [
                (DType::I8, DType::I32),
                (DType::U8, DType::I64),
                (DType::I16, DType::I32),
            ] {
                let mut b = Builder::default();
                let z = if dtype == DType::U8 { 128 } else { 0 };
                let x = b.input("x", &shape, dtype, 0.1, z);
                let out: Vec<usize> = shape
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| i != axis)
                    .map(|(_, &d)| d)
                    .collect();
                let y = b.tensor("y", &out, index, None);
                b.g.outputs.push(y);
                b.op(OpKind::ArgMinMax { axis, max }, vec![x], vec![y]);
                check_graph_compiled(b.g, &format!("arg{axis}_{max}_{dtype}_{index}"));
            }
        }
    }
}

#[test]
fn mean_over_axis_sets() {
    let cases: &[(&[usize], &[usize], bool)] = &[
        (&[1, 8, 8, 16], &[3], true),
        (&[1, 8, 8, 16], &[1, 2], true),
        (&[1, 4, 5, 6], &[1], false),
        (&[1, 4, 5, 6], &[2], true),
        (&[1, 4, 5, 6], &[1, 3], true),
        (&[2, 3, 4, 5], &[0, 1, 2, 3], false),
    ];
    for (i, &(shape, axes, keep)) in cases.iter().enumerate() {
        let kind = OpKind::Mean {
            axes: axes.to_vec(),
            keep_dims: keep,
        };
        let g = reduce_graph(kind, shape, axes, keep, DType::I8, (0.02, -3), (0.01, 6));
        check_graph_compiled(g, &format!("mean{i}"));
    }
}

// act: element-wise functions of one tensor (LUT operations).

/// One [`crate::ir::ActFn`] from `x` (`shape`, `dtype`, input quantization) to `y`.
fn act_fn_graph(
    f: crate::ir::ActFn,
    shape: &[usize],
    dtype: DType,
    in_q: (f32, i32),
    out_q: (f32, i32),
) -> Graph {
    let mut b = Builder::default();
    let x = b.input("x", shape, dtype, in_q.0, in_q.1);
    let y = b.output("y", shape, dtype, out_q.0, out_q.1);
    b.op(OpKind::ActFn(f), vec![x], vec![y]);
    b.g
}

#[test]
fn act_fns_int8_and_uint8_every_target() {
    use crate::ir::ActFn;
    let fns = [
        (ActFn::Logistic, (1.0 / 256.0, -128), (1.0 / 256.0, 0)),
        (ActFn::Tanh, (1.0 / 128.0, 0), (1.0 / 128.0, 128)),
        (ActFn::HardSwish, (0.03, -20), (0.031, 110)),
        (ActFn::LeakyRelu { alpha: -0.3 }, (0.02, 5), (0.02, 130)),
        (ActFn::Elu { alpha: 1.0 }, (0.04, 40), (0.045, 100)),
        (ActFn::Gelu { approximate: true }, (0.05, -60), (0.05, 64)),
        (ActFn::Exp, (0.3, 127), (0.2, 0)),
        (ActFn::Log, (0.01, -128), (0.03, 255)),
        (
            ActFn::Swish {
                sigmoid: (1.0 / 256.0, -128),
            },
            (0.06, -70),
            (0.06, 60),
        ),
        (ActFn::Rsqrt, (0.05, -128), (0.04, 0)),
        (ActFn::Sqrt, (0.02, -100), (0.03, 10)),
    ];
    for (i, (f, q8, qu8)) in fns.into_iter().enumerate() {
        // Input quantization: scale 0.07 around zero point 3 (int8) / 131 (uint8).
        let g = act_fn_graph(f, &[1, 5, 7, 19], DType::I8, (0.07, 3), q8);
        check_graph(g, &format!("act_fn_{i}_{}_i8", f.name()));
        let g = act_fn_graph(f, &[3, 40], DType::U8, (0.05, 131), qu8);
        check_graph(g, &format!("act_fn_{i}_{}_u8", f.name()));
    }
}

/// Two different tables in a row and a repeated one: the LUT slots are reloaded and reused.
#[test]
fn act_fn_chain_reloads_and_reuses_tables() {
    use crate::ir::ActFn;
    let mut b = Builder::default();
    let x = b.input("x", &[1, 6, 6, 32], DType::I8, 0.05, -3);
    let s1 = b.tensor("s1", &[1, 6, 6, 32], DType::I8, Some((1.0 / 256.0, -128)));
    let t = b.tensor("t", &[1, 6, 6, 32], DType::I8, Some((1.0 / 128.0, 0)));
    let y = b.output("y", &[1, 6, 6, 32], DType::I8, 1.0 / 256.0, -128);
    b.op(OpKind::ActFn(ActFn::Logistic), vec![x], vec![s1]);
    b.op(OpKind::ActFn(ActFn::Tanh), vec![s1], vec![t]);
    b.op(OpKind::ActFn(ActFn::Logistic), vec![t], vec![y]);
    check_graph(b.g, "act_fn_chain");
}

/// int16 LOGISTIC and TANH are one pool with the built-in function, on every target, at the
/// power-of-two scales TFLite treats exactly (1/4096 both, 1/2048 tanh), at scales that saturate
/// the table, at tiny scales and at 1/2048 for LOGISTIC (not the exact form there).
#[test]
fn act_fns_int16_every_target() {
    use crate::ir::ActFn;
    for (i, f) in [ActFn::Logistic, ActFn::Tanh].into_iter().enumerate() {
        for (j, scale) in [1.0 / 4096.0, 1.0 / 2048.0, 3.05e-5, 7.3e-4, 0.02, 1.0e-7]
            .into_iter()
            .enumerate()
        {
            let g = act_fn_graph(
                f,
                &[1, 5, 7, 19],
                DType::I16,
                (scale, 0),
                (1.0 / 32768.0, 0),
            );
            let p = crate::ethos_u::lower::lower(&g, &ETHOS_U55_128).expect("int16 lowering");
            assert_eq!(p.ops.len(), 1, "{i} {j}");
            assert!(p.ops[0].activation.builtin.is_some(), "{i} {j}");
            check_graph(g, &format!("act16_{i}_{j}"));
        }
    }
}

/// int16 functions other than LOGISTIC/TANH, and int16 LOGISTIC with another output
/// quantization than TFLite's Q0.15, are errors naming the operator, never a panic.
#[test]
fn act_fn_int16_refusals_name_the_operator() {
    use crate::ir::ActFn;
    let cases = [
        (
            ActFn::HardSwish,
            (1.0 / 4096.0, 0),
            (1.0 / 32768.0, 0),
            "HardSwish",
        ),
        (
            ActFn::Logistic,
            (1.0 / 4096.0, 0),
            (1.0 / 256.0, 0),
            "1/32768",
        ),
        (
            ActFn::Tanh,
            (1.0 / 4096.0, 3),
            (1.0 / 32768.0, 0),
            "zero point",
        ),
    ];
    for (f, qi, qo, what) in cases {
        let g = act_fn_graph(f, &[1, 4, 4, 8], DType::I16, qi, qo);
        let err = crate::ethos_u::lower::lower(&g, &ETHOS_U55_128).expect_err("refused");
        let msg = err.to_string();
        assert!(msg.contains(f.name()) && msg.contains(what), "{msg}");
        let err = crate::reference::Interpreter::new(&g)
            .err()
            .expect("reference refuses");
        assert!(err.to_string().contains(what), "{err}");
    }
}

// ------------------------------------------------------------------------------------------
// movea: Slice (SLICE, STRIDED_SLICE, SPLIT, SPLIT_V, UNPACK) on synthetic graphs.
// ------------------------------------------------------------------------------------------

/// A graph of one Slice of `x_shape` into an output of `y_shape`.
fn slice_graph(
    x_shape: &[usize],
    y_shape: &[usize],
    dtype: DType,
    begin: &[usize],
    step: &[i64],
    size: &[usize],
) -> Graph {
    let mut b = Builder::default();
    let x = b.input("x", x_shape, dtype, 0.05, -3);
    let y = b.output("y", y_shape, dtype, 0.05, -3);
    b.op(
        OpKind::Slice {
            begin: begin.to_vec(),
            step: step.to_vec(),
            size: size.to_vec(),
        },
        vec![x],
        vec![y],
    );
    b.g
}

/// Like [`check_graph`] for graphs the NPU lowering must refuse with a hardware limit: the
/// compiled program (the operator on the CPU kernel) on every accelerator, and all-CPU, must
/// both equal the reference interpreter.
fn check_graph_on_cpu(mut g: Graph, name: &str) {
    g.name = name.into();
    g.validate()
        .unwrap_or_else(|e| panic!("{name}: invalid test graph: {e}"));
    match super::lower(&g, &ETHOS_U55_128) {
        Err(crate::error::Error::HardwareLimit { .. }) => {}
        Err(e) => panic!("{name}: expected a hardware limit, got {e}"),
        Ok(_) => panic!("{name}: expected a hardware limit, but it lowered"),
    }
    let mut rng = Rng(0x51ce ^ name.len() as u64);
    for trial in 0..3 {
        let inputs: Vec<Value> = g
            .inputs
            .iter()
            .map(|&t| random_input(&mut rng, &g.tensors[t]))
            .collect();
        let want = crate::reference::run(&g, &inputs)
            .unwrap_or_else(|e| panic!("{name}: reference failed: {e}"));
        for (accel, got) in run_compiled(&g, &inputs) {
            for (k, w) in want.iter().enumerate() {
                if let Some(d) = diff(&got[k], &w.data.to_le_bytes(), w.dtype().size()) {
                    panic!("{name} trial {trial} output {k} on {accel}: {d}");
                }
            }
        }
        let got = run_all_cpu(&g, &inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (k, w) in want.iter().enumerate() {
            if let Some(d) = diff(&got[k], &w.data.to_le_bytes(), w.dtype().size()) {
                panic!("{name} trial {trial} output {k} on the CPU kernels: {d}");
            }
        }
    }
}

#[test]
fn slice_steps_on_h_and_w_run_on_the_npu() {
    let g = slice_graph(
        &[1, 8, 9, 16],
        &[1, 4, 3, 8],
        DType::I8,
        &[0, 1, 0, 4],
        &[1, 2, 3, 1],
        &[1, 4, 3, 8],
    );
    check_graph(g, "slice_steps_hw");
    // uint8 and int16 elements, a box at the far corner.
    let g = slice_graph(
        &[1, 5, 6, 7],
        &[1, 2, 2, 3],
        DType::U8,
        &[0, 3, 4, 4],
        &[1, 1, 1, 1],
        &[1, 2, 2, 3],
    );
    check_graph(g, "slice_corner_u8");
    let g = slice_graph(
        &[1, 6, 6, 5],
        &[1, 3, 2, 5],
        DType::I16,
        &[0, 0, 1, 0],
        &[1, 2, 4, 1],
        &[1, 3, 2, 5],
    );
    check_graph(g, "slice_steps_i16");
    // int32 (moved as pairs of 16-bit elements).
    let g = slice_graph(
        &[1, 4, 4, 6],
        &[1, 2, 4, 3],
        DType::I32,
        &[0, 1, 0, 2],
        &[1, 2, 1, 1],
        &[1, 2, 4, 3],
    );
    check_graph(g, "slice_i32");
}

#[test]
fn slice_of_lower_ranks_and_shrunk_outputs() {
    // Rank 2 ([N, C] is [1, N, C] on the NPU) and rank 3.
    let g = slice_graph(&[6, 10], &[3, 5], DType::I8, &[1, 2], &[2, 1], &[3, 5]);
    check_graph(g, "slice_rank2");
    let g = slice_graph(
        &[5, 6, 7],
        &[2, 3, 6],
        DType::I8,
        &[3, 1, 1],
        &[1, 2, 1],
        &[2, 3, 6],
    );
    check_graph(g, "slice_rank3");
    // UNPACK-like: one row of H, the axis dropped from the output.
    let g = slice_graph(
        &[1, 4, 6, 8],
        &[1, 6, 8],
        DType::I8,
        &[0, 2, 0, 0],
        &[1, 1, 1, 1],
        &[1, 1, 6, 8],
    );
    check_graph(g, "slice_shrink_h");
    // New axes in the output (STRIDED_SLICE new_axis_mask).
    let g = slice_graph(
        &[1, 4, 6, 8],
        &[1, 1, 4, 8],
        DType::I8,
        &[0, 0, 5, 0],
        &[1, 1, 1, 1],
        &[1, 4, 1, 8],
    );
    check_graph(g, "slice_w_column");
}

#[test]
fn slice_steps_the_strides_cannot_express_run_on_the_cpu() {
    // A step along the channels.
    let g = slice_graph(
        &[1, 4, 4, 16],
        &[1, 4, 4, 5],
        DType::I8,
        &[0, 0, 0, 1],
        &[1, 1, 1, 3],
        &[1, 4, 4, 5],
    );
    check_graph_on_cpu(g, "slice_step_c");
    // Negative steps (reversed H, reversed W).
    let g = slice_graph(
        &[1, 5, 6, 3],
        &[1, 5, 3, 3],
        DType::I8,
        &[0, 4, 5, 0],
        &[1, -1, -2, 1],
        &[1, 5, 3, 3],
    );
    check_graph_on_cpu(g, "slice_negative_steps");
    // A batch slice of a rank-4 tensor with batch 2 (outside the [H, W, C] view).
    let g = slice_graph(
        &[2, 3, 4, 5],
        &[1, 3, 4, 5],
        DType::I8,
        &[1, 0, 0, 0],
        &[1, 1, 1, 1],
        &[1, 3, 4, 5],
    );
    check_graph_on_cpu(g, "slice_batch");
}

#[test]
fn split_into_slices_then_concat_round_trips() {
    // SPLIT along C into 3 + 5, then concatenated back in the other order along C, and an
    // UNPACK-like H split feeding a W concat: one input read by several slices.
    let mut b = Builder::default();
    let x = b.input("x", &[1, 4, 4, 8], DType::I8, 0.05, -3);
    let a = b.tensor("a", &[1, 4, 4, 3], DType::I8, Some((0.05, -3)));
    let c = b.tensor("c", &[1, 4, 4, 5], DType::I8, Some((0.05, -3)));
    let y = b.output("y", &[1, 4, 4, 8], DType::I8, 0.05, -3);
    for (t, at, n) in [(a, 0, 3), (c, 3, 5)] {
        b.op(
            OpKind::Slice {
                begin: vec![0, 0, 0, at],
                step: vec![1; 4],
                size: vec![1, 4, 4, n],
            },
            vec![x],
            vec![t],
        );
    }
    b.op(
        OpKind::Concat {
            axis: 3,
            activation: Activation::None,
        },
        vec![c, a],
        vec![y],
    );
    check_graph(b.g, "split_concat_c");
    let mut b = Builder::default();
    let x = b.input("x", &[1, 4, 3, 8], DType::I8, 0.05, -3);
    let rows: Vec<TensorId> = (0..4)
        .map(|h| b.tensor(&format!("r{h}"), &[1, 1, 3, 8], DType::I8, Some((0.05, -3))))
        .collect();
    let y = b.output("y", &[1, 1, 12, 8], DType::I8, 0.05, -3);
    for (h, &r) in rows.iter().enumerate() {
        b.op(
            OpKind::Slice {
                begin: vec![0, h, 0, 0],
                step: vec![1; 4],
                size: vec![1, 1, 3, 8],
            },
            vec![x],
            vec![r],
        );
    }
    b.op(
        OpKind::Concat {
            axis: 2,
            activation: Activation::None,
        },
        rows,
        vec![y],
    );
    check_graph(b.g, "unpack_h_concat_w");
}

#[test]
fn slice_outside_the_input_is_an_error_naming_the_node() {
    let g = slice_graph(
        &[1, 4, 4, 8],
        &[1, 3, 4, 8],
        DType::I8,
        &[0, 2, 0, 0],
        &[1, 1, 1, 1],
        &[1, 3, 4, 8],
    );
    let Err(e) = crate::reference::Interpreter::new(&g) else {
        panic!("the reference accepted a box outside its input");
    };
    let msg = e.to_string();
    assert!(msg.contains("op0") && msg.contains("Slice"), "{msg}");
    let Err(e) = crate::ethos_u::compile(&g, &ETHOS_U55_128) else {
        panic!("the compiler accepted a box outside its input");
    };
    assert!(e.to_string().contains("op0"), "{e}");
}
