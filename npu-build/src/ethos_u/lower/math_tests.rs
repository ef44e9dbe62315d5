//! Test-only: Abs, Neg, Maximum, Minimum, PRelu and SquaredDifference (lowered to the NPU)
//! against TFLite's outputs (fixtures) and the reference interpreter (synthetic graphs covering
//! what the fixtures lack: other quantizations, broadcasts, scalars, alpha outside [0, 1], uint8,
//! int16).

use super::*;

fixture_tests!(
    op_abs,
    op_maximum,
    op_minimum,
    op_prelu,
    op_add_broadcast,
    op_squared_difference
);

fn konst_i8(b: &mut Builder, name: &str, shape: &[usize], q: (f32, i32), v: &[i8]) -> TensorId {
    b.konst(
        name,
        shape,
        DType::I8,
        Quantization::per_tensor(q.0, q.1),
        v.iter().map(|&x| x as u8).collect(),
    )
}

fn typed_binary(
    kind: OpKind,
    dtype: DType,
    a: (&[usize], f32, i32),
    bq: (&[usize], f32, i32),
    y: (&[usize], f32, i32),
) -> Graph {
    let mut b = Builder::default();
    let ta = b.input("a", a.0, dtype, a.1, a.2);
    let tb = b.input("b", bq.0, dtype, bq.1, bq.2);
    let ty = b.output("y", y.0, dtype, y.1, y.2);
    b.op(kind, vec![ta, tb], vec![ty]);
    b.g
}

#[test]
fn maximum_minimum_raw_values_any_quantization_and_broadcast() {
    let full: &[usize] = &[1, 4, 5, 6];
    for (kind, tag) in [(OpKind::Maximum, "max"), (OpKind::Minimum, "min")] {
        // Different quantizations everywhere: TFLite compares and copies stored values.
        check_graph(
            binary_graph(
                kind.clone(),
                (full, 0.1, 3),
                (full, 0.02, -7),
                (full, 0.5, 9),
            ),
            &format!("{tag}_mixed_quant"),
        );
        // First operand broadcast (swapped), second broadcast over H and W, rank 1.
        check_graph(
            binary_graph(
                kind.clone(),
                (&[1, 4, 1, 6], 0.1, 3),
                (full, 0.1, 3),
                (full, 0.1, 3),
            ),
            &format!("{tag}_bcast_a"),
        );
        check_graph(
            binary_graph(kind.clone(), (full, 0.1, 3), (&[6], 0.1, 0), (full, 0.1, 3)),
            &format!("{tag}_rank1_b"),
        );
        for dtype in [DType::U8, DType::I16] {
            check_graph(
                typed_binary(
                    kind.clone(),
                    dtype,
                    (full, 0.1, 0),
                    (&[1, 1, 5, 1], 0.2, 0),
                    (full, 0.1, 0),
                ),
                &format!("{tag}_{dtype}"),
            );
        }
        // A scalar constant (IFM2_SCALAR), first and second.
        for first in [true, false] {
            let mut b = Builder::default();
            let k = konst_i8(&mut b, "k", &[1], (0.3, 2), &[-17]);
            let x = b.input("x", full, DType::I8, 0.05, -1);
            let y = b.output("y", full, DType::I8, 0.05, -1);
            let ins = if first { vec![k, x] } else { vec![x, k] };
            b.op(kind.clone(), ins, vec![y]);
            check_graph(b.g, &format!("{tag}_scalar_{first}"));
        }
    }
}

fn unary_graph(kind: OpKind, shape: &[usize], qi: (f32, i32), qo: (f32, i32)) -> Graph {
    let mut b = Builder::default();
    let x = b.input("x", shape, DType::I8, qi.0, qi.1);
    let y = b.output("y", shape, DType::I8, qo.0, qo.1);
    b.op(kind, vec![x], vec![y]);
    b.g
}

#[test]
fn abs_equal_and_rescaled() {
    let s: &[usize] = &[2, 7, 9];
    check_graph(
        unary_graph(OpKind::Abs, s, (0.05, 4), (0.05, -100)),
        "abs_same_scale",
    );
    check_graph(
        unary_graph(OpKind::Abs, s, (0.05, -3), (0.02, -128)),
        "abs_up",
    );
    check_graph(
        unary_graph(OpKind::Abs, s, (0.05, 127), (0.4, 5)),
        "abs_down",
    );
}

#[test]
fn neg_wraps_like_tflite() {
    // Every int8 value, -128 included, in one tensor.
    let mut b = Builder::default();
    let x = b.input("x", &[1, 16, 16], DType::I8, 0.1, 3);
    let y = b.output("y", &[1, 16, 16], DType::I8, 0.2, -5);
    b.op(OpKind::Neg, vec![x], vec![y]);
    let g = b.g;
    let input = Value::new(
        vec![1, 16, 16],
        Data::I8((0..256).map(|i| (i - 128) as i8).collect()),
    )
    .expect("value");
    let want: Vec<u8> = (0..256).map(|i| (-(i - 128i32)) as i8 as u8).collect();
    assert_eq!(want[0], 0x80, "-(-128) wraps to -128");
    let got = run_program(&g, std::slice::from_ref(&input));
    assert_eq!(got[0], want);
    for (accel, got) in run_compiled(&g, std::slice::from_ref(&input)) {
        assert_eq!(got[0], want, "{accel}");
    }
    assert_eq!(run_all_cpu(&g, &[input]).expect("cpu")[0], want);
    check_graph(g, "neg_random");
}

fn prelu_graph(
    dtype: DType,
    shape: &[usize],
    alpha_shape: &[usize],
    alpha: &[i8],
    qa: (f32, i32),
) -> Graph {
    let mut b = Builder::default();
    let x = b.input(
        "x",
        shape,
        dtype,
        0.03,
        if dtype == DType::U8 { 128 } else { -2 },
    );
    let a = b.konst(
        "alpha",
        alpha_shape,
        dtype,
        Quantization::per_tensor(qa.0, qa.1),
        alpha.iter().map(|&v| v as u8).collect(),
    );
    let y = b.output(
        "y",
        shape,
        dtype,
        0.05,
        if dtype == DType::U8 { 100 } else { 7 },
    );
    b.op(OpKind::Prelu, vec![x, a], vec![y]);
    b.g
}

#[test]
fn prelu_any_alpha_is_exact() {
    let s: &[usize] = &[1, 3, 4, 6];
    // Per-channel alpha with values below 0, in [0, 1] and above 1 (Vela's max form would fail).
    let alpha: Vec<i8> = vec![-100, -3, 0, 40, 100, 127];
    check_graph(
        prelu_graph(DType::I8, s, &[1, 1, 6], &alpha, (0.02, 0)),
        "prelu_channels",
    );
    check_graph(
        prelu_graph(DType::I8, s, &[6], &alpha, (0.01, -5)),
        "prelu_rank1_alpha_zp",
    );
    // A scalar alpha (IFM2_SCALAR) and a full-shape alpha.
    check_graph(
        prelu_graph(DType::I8, s, &[1], &[-90], (0.01, 0)),
        "prelu_scalar",
    );
    let full: Vec<i8> = (0..72).map(|i| (i * 7 % 255 - 127) as i8).collect();
    check_graph(
        prelu_graph(DType::I8, s, s, &full, (0.015, 3)),
        "prelu_full_alpha",
    );
    // uint8 (alpha bytes reinterpreted as u8).
    let alpha_u8: Vec<i8> = vec![10, 100, -56, -1, 0, 77];
    check_graph(
        prelu_graph(DType::U8, s, &[6], &alpha_u8, (0.01, 128)),
        "prelu_u8",
    );
}

/// Per-channel alphas in [0, 1] (what trained PReLUs hold): Vela's three operations, MAX of the
/// two rescaled branches, proved exact at compile time; every int8/uint8 input value in every
/// channel, on every accelerator, equals the reference. Alphas above 1 or below 0 keep the
/// four-operation form.
#[test]
fn prelu_max_form_where_exact_on_every_input() {
    for dtype in [DType::I8, DType::U8] {
        let shape: &[usize] = &[1, 2, 128, 5];
        let (alpha, qa): (Vec<i8>, (f32, i32)) = if dtype == DType::I8 {
            (vec![-128, -60, 0, 60, 127], (0.5 / 255.0, -128))
        } else {
            (vec![0, 60, 127, -56, -1], (1.0 / 255.0, 0))
        };
        let g = prelu_graph(dtype, shape, &[5], &alpha, qa);
        let p = crate::ethos_u::lower::lower(&g, &ETHOS_U55_128).expect("lowering");
        assert_eq!(p.ops.len(), 3, "{dtype}: the max form");
        // x[0, h, w, c] takes all 256 values in each channel.
        let data: Vec<u8> = (0..256usize)
            .flat_map(|v| std::iter::repeat_n(v as u8, 5))
            .collect();
        let x = Value::new(
            shape.to_vec(),
            if dtype == DType::I8 {
                Data::I8(data.iter().map(|&b| b as i8).collect())
            } else {
                Data::U8(data)
            },
        )
        .expect("value");
        let want = crate::reference::run(&g, std::slice::from_ref(&x)).expect("reference");
        for (accel, got) in run_compiled(&g, std::slice::from_ref(&x)) {
            assert_eq!(got[0], want[0].data.to_le_bytes(), "{dtype} on {accel}");
        }
    }
    // Alpha above 1 (0.2 * 127 = 25.4) or negative: four operations.
    let g = prelu_graph(DType::I8, &[1, 2, 2, 2], &[2], &[127, -100], (0.2, 0));
    let p = crate::ethos_u::lower::lower(&g, &ETHOS_U55_128).expect("lowering");
    assert_eq!(p.ops.len(), 4);
}

/// SquaredDifference on the NPU (five or six int32 steps): broadcasts either way and at any
/// rank, equal scales (both factors exactly 1/2), a constant scalar operand, first or second.
#[test]
fn squared_difference_on_the_npu() {
    let full: &[usize] = &[2, 3, 4, 5];
    for (k, (a, bs, y)) in [
        (full, &[5][..], full),
        (&[2, 3, 1, 1][..], full, full),
        (full, full, full),
        (&[1, 4, 4, 8][..], &[1, 1, 1, 8][..], &[1, 4, 4, 8][..]),
    ]
    .into_iter()
    .enumerate()
    {
        check_graph(
            binary_graph(
                OpKind::SquaredDifference,
                (a, 0.05, 3),
                (bs, 0.02, -6),
                (y, 0.07, -128),
            ),
            &format!("sqdiff_{k}"),
        );
    }
    check_graph(
        binary_graph(
            OpKind::SquaredDifference,
            (&[1, 6, 6, 16], 0.031, -2),
            (&[1, 6, 6, 16], 0.031, -2),
            (&[1, 6, 6, 16], 0.011, -100),
        ),
        "sqdiff_equal_scales",
    );
    for first in [true, false] {
        let mut b = Builder::default();
        let k = konst_i8(&mut b, "k", &[1], (0.3, 2), &[-17]);
        let x = b.input("x", &[1, 4, 5, 6], DType::I8, 0.05, -1);
        let y = b.output("y", &[1, 4, 5, 6], DType::I8, 0.9, -128);
        let ins = if first { vec![k, x] } else { vec![x, k] };
        b.op(OpKind::SquaredDifference, ins, vec![y]);
        check_graph(b.g, &format!("sqdiff_scalar_{first}"));
    }
}

#[test]
fn neg_table_entries() {
    let t = super::super::math::neg_table();
    assert_eq!(t[128], 0);
    assert_eq!(t[0] as i8, -128);
    assert_eq!(t[255] as i8, -127);
    assert_eq!(t[129] as i8, -1);
}

/// Add/Sub/Mul/Maximum at ranks above 4 and batches above 1: dimensions folded into `[H, W, C]`.
#[test]
fn any_rank_broadcasts_fold_onto_the_npu() {
    let add = OpKind::Add {
        activation: Activation::None,
    };
    let mul = OpKind::Mul {
        activation: Activation::Relu,
    };
    let sub = OpKind::Sub {
        activation: Activation::None,
    };
    let o5: &[usize] = &[2, 3, 4, 5, 6];
    type Case<'a> = (OpKind, &'a [usize], &'a [usize], &'a [usize], &'a str);
    let cases: Vec<Case> = vec![
        (add.clone(), o5, &[6], o5, "add_rank5_channel"),
        (
            mul.clone(),
            &[2, 3, 1, 1, 6],
            o5,
            o5,
            "mul_rank5_first_broadcast",
        ),
        (sub.clone(), o5, &[1, 3, 4, 1, 1], o5, "sub_rank5_middle"),
        (
            add.clone(),
            &[3, 4, 5, 6],
            &[3, 4, 5, 6],
            &[3, 4, 5, 6],
            "add_batch3_same",
        ),
        (
            OpKind::Maximum,
            &[2, 4, 5, 6],
            &[1, 1, 1, 6],
            &[2, 4, 5, 6],
            "max_batch2_channel",
        ),
        (
            sub,
            &[2, 1, 1, 1, 1, 7],
            &[2, 3, 4, 5, 6, 7],
            &[2, 3, 4, 5, 6, 7],
            "sub_rank6",
        ),
    ];
    for (kind, a, b, y, name) in cases {
        check_graph(
            binary_graph(kind, (a, 0.05, 2), (b, 0.02, -3), (y, 0.06, 1)),
            name,
        );
    }
}

/// Broadcasts that alternate more than three times have no feature-map form: a limit error,
/// so the compiler puts the operator on the CPU, still bit-exact.
#[test]
fn alternating_broadcast_falls_back_to_the_cpu() {
    let add = OpKind::Add {
        activation: Activation::None,
    };
    let y: &[usize] = &[2, 3, 4, 5];
    let g = binary_graph(add, (y, 0.05, 2), (&[2, 1, 4, 1], 0.02, -3), (y, 0.06, 1));
    let e = super::super::lower(&g, &ETHOS_U55_128).expect_err("no NPU form");
    assert!(
        matches!(e, crate::error::Error::HardwareLimit { .. }),
        "{e}"
    );
    let mut rng = Rng(7);
    let inputs: Vec<Value> = g
        .inputs
        .iter()
        .map(|&t| random_input(&mut rng, &g.tensors[t]))
        .collect();
    let want = crate::reference::run(&g, &inputs).expect("reference");
    for (accel, got) in run_compiled(&g, &inputs) {
        assert_eq!(got[0], want[0].data.to_le_bytes(), "{accel}");
    }
}

/// The identity the SquaredDifference lowering rests on: an int32 MUL by TFLite's multiplier
/// with OFM scale `(1, 31 - shift)` and DBL rounding equals `MultiplyByQuantizedMultiplier`
/// (SRDHM, then a rounding shift) for every value the kernel can produce: each `(x - z) << 7`
/// of an int8 input, and each square of a difference, for many multipliers.
#[test]
fn squared_difference_steps_equal_tflite_for_every_value() {
    use crate::reference::util::Rescale;
    use npu_rt::ethos_u::numerics::scale;
    let npu = |v: i64, r: Rescale| {
        scale(
            v,
            r.multiplier as u32,
            (31 - r.shift) as u32,
            npu_rt::ethos_u::regs::RoundMode::Dbl,
            0,
        )
    };
    let mut rng = Rng(7);
    for _ in 0..40 {
        // Input factors in (0, 1/2], output factors of all sizes below 1.
        let f_in = 0.5 * (rng.next() % 1_000_000 + 1) as f64 / 1_000_000.0;
        let f_out = (rng.next() % 1_000_000 + 1) as f64 / 1e6 / (1 << (rng.next() % 12)) as f64;
        let op = Op {
            name: "t".into(),
            kind: OpKind::SquaredDifference,
            inputs: vec![],
            outputs: vec![],
        };
        let r_in = Rescale::new(&op, f_in, "in").unwrap();
        let r_out = Rescale::new(&op, f_out, "out").unwrap();
        for v in -255i32..=255 {
            let x = v << 7;
            assert_eq!(npu(x.into(), r_in), i64::from(r_in.apply(x)), "{f_in} {v}");
        }
        for d in 0i32..=32640 {
            for d in [d, -d] {
                let sq = d * d;
                assert_eq!(
                    npu(sq.into(), r_out),
                    i64::from(r_out.apply(sq)),
                    "{f_out} {d}"
                );
            }
        }
    }
}

/// Both operands broadcast and one is a constant (LayerNormalization's `rsqrt(var) * gamma`):
/// the constant is expanded to the output's shape and the op stays on the NPU, either order,
/// for Mul, Add and Sub.
#[test]
fn both_broadcast_with_a_constant_operand() {
    let gamma: Vec<i8> = (0..32i32).map(|i| (i * 37 % 256 - 128) as i8).collect();
    for (kind, tag) in [
        (
            OpKind::Mul {
                activation: Activation::None,
            },
            "mul",
        ),
        (
            OpKind::Add {
                activation: Activation::None,
            },
            "add",
        ),
        (
            OpKind::Sub {
                activation: Activation::None,
            },
            "sub",
        ),
    ] {
        for const_first in [false, true] {
            let mut b = Builder::default();
            let k = konst_i8(&mut b, "gamma", &[1, 1, 32], (0.0039, -128), &gamma);
            let x = b.input("x", &[1, 16, 1], DType::I8, 0.023, -128);
            let y = b.output("y", &[1, 16, 32], DType::I8, 0.05, 3);
            let ins = if const_first { vec![k, x] } else { vec![x, k] };
            b.op(kind.clone(), ins, vec![y]);
            check_graph(b.g, &format!("{tag}_outer_{const_first}"));
        }
    }
}

/// One alpha for every element (PyTorch's default `nn.PReLU()`, or equal per-channel values):
/// one table operation, the reference's PRelu of every input value.
#[test]
fn prelu_with_one_alpha_is_one_table() {
    let s: &[usize] = &[1, 3, 4, 6];
    for (dtype, alpha, tag) in [
        (DType::I8, vec![-90i8], "i8_scalar"),
        (DType::I8, vec![127i8; 6], "i8_equal_channels"),
        (DType::I8, vec![-128i8], "i8_min_alpha"),
        (DType::U8, vec![-56i8], "u8_scalar"),
    ] {
        let shape: &[usize] = if alpha.len() == 1 { &[1] } else { &[6] };
        let qa = if dtype == DType::U8 {
            (0.01, 128)
        } else {
            (0.02, 0)
        };
        let g = prelu_graph(dtype, s, shape, &alpha, qa);
        let p = super::super::lower(&g, &ETHOS_U55_128).expect("lowers");
        assert_eq!(p.ops.len(), 1, "{tag}: one table operation");
        assert!(p.ops[0].activation.lut.is_some(), "{tag}");
        check_graph(g, &format!("prelu_table_{tag}"));
    }
}
