//! Permutes and gathers on synthetic graphs: every attribute form the fixtures lack, compiled
//! for every accelerator and simulated, the lowered program where the NPU takes the operator,
//! and the CPU kernels, each byte for byte against the reference interpreter.

use super::{Builder, Rng, diff, random_input, run_all_cpu, run_compiled, run_program};
use crate::ir::{DType, Graph, OpKind, PadMode};
use crate::value::Value;

/// Reference == every compiled target (NPU where the lowering takes it, CPU otherwise) == the
/// CPU kernels; `npu` says whether the whole graph must lower to the NPU.
fn check(mut g: Graph, name: &str, npu: bool) {
    g.name = name.into();
    g.validate()
        .unwrap_or_else(|e| panic!("{name}: invalid test graph: {e}"));
    let lowered = super::super::lower(&g, &npu_rt::ethos_u::config::ETHOS_U55_128);
    assert_eq!(
        lowered.is_ok(),
        npu,
        "{name}: NPU lowering {:?}",
        lowered.err().map(|e| e.to_string())
    );
    let mut rng = Rng(0x5EED_0000 ^ name.len() as u64 ^ (name.as_bytes()[name.len() - 1] as u64));
    for trial in 0..2 {
        let inputs: Vec<Value> = g
            .inputs
            .iter()
            .map(|&t| random_input(&mut rng, &g.tensors[t]))
            .collect();
        let want = crate::reference::run(&g, &inputs)
            .unwrap_or_else(|e| panic!("{name}: reference failed: {e}"));
        let w = want[0].data.to_le_bytes();
        let size = want[0].dtype().size();
        if npu {
            let got = run_program(&g, &inputs);
            if let Some(d) = diff(&got[0], &w, size) {
                panic!("{name} trial {trial}: lowered program: {d}");
            }
        }
        for (accel, got) in run_compiled(&g, &inputs) {
            if let Some(d) = diff(&got[0], &w, size) {
                panic!("{name} trial {trial} on {accel}: {d}");
            }
        }
        let got = run_all_cpu(&g, &inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
        if let Some(d) = diff(&got[0], &w, size) {
            panic!("{name} trial {trial} on the CPU kernels: {d}");
        }
    }
}

/// One operator from `x_shape` to `y_shape`, quantization (0.05, 3) in and `out_q` out.
fn one_op(
    kind: OpKind,
    x_shape: &[usize],
    y_shape: &[usize],
    dtype: DType,
    out_q: (f32, i32),
) -> Graph {
    let mut b = Builder::default();
    let x = b.input("x", x_shape, dtype, 0.05, 3);
    let y = b.output("y", y_shape, dtype, out_q.0, out_q.1);
    b.op(kind, vec![x], vec![y]);
    b.g
}

fn permuted(shape: &[usize], perm: &[usize]) -> Vec<usize> {
    perm.iter().map(|&p| shape[p]).collect()
}

#[test]
fn transposes_of_every_rank_on_the_npu() {
    let cases: &[(&[usize], &[usize], DType)] = &[
        (&[1, 4, 8, 16], &[0, 2, 1, 3], DType::I8),
        (&[1, 3, 4, 5], &[0, 3, 1, 2], DType::I8),
        (&[1, 3, 4, 5], &[0, 2, 3, 1], DType::U8),
        (&[1, 3, 4, 5], &[0, 1, 3, 2], DType::I16),
        (&[2, 3, 4, 5], &[3, 2, 1, 0], DType::I8),
        (&[5, 7], &[1, 0], DType::I8),
        (&[3, 4, 6], &[2, 0, 1], DType::I16),
        (&[2, 3, 1, 4, 5], &[4, 0, 2, 1, 3], DType::I8),
        (&[6], &[0], DType::I8),
    ];
    for (k, (shape, perm, dt)) in cases.iter().enumerate() {
        let g = one_op(
            OpKind::Transpose {
                perm: perm.to_vec(),
            },
            shape,
            &permuted(shape, perm),
            *dt,
            (0.05, 3),
        );
        check(g, &format!("transpose{k}"), true);
    }
}

#[test]
fn transposes_needing_many_copies_run_on_the_cpu() {
    // Four dimensions of 9, none innermost in both: two unrolled, 81 copies > MAX_COPIES.
    let g = one_op(
        OpKind::Transpose {
            perm: vec![3, 2, 1, 0],
        },
        &[9, 9, 9, 9],
        &[9, 9, 9, 9],
        DType::I8,
        (0.05, 3),
    );
    check(g, "transpose_cpu", false);
}

#[test]
fn tiles() {
    let cases: &[(&[usize], &[usize], DType)] = &[
        (&[1, 4, 4, 8], &[1, 2, 3, 1], DType::I8),
        (&[1, 2, 3, 4], &[1, 2, 2, 3], DType::I16),
        (&[2, 3, 4], &[3, 1, 2], DType::U8),
        (&[3, 5], &[2, 2], DType::I8),
        (&[1, 2, 2, 2], &[1, 1, 1, 1], DType::I8),
    ];
    for (k, (shape, m, dt)) in cases.iter().enumerate() {
        let out: Vec<usize> = shape.iter().zip(m.iter()).map(|(a, b)| a * b).collect();
        let g = one_op(
            OpKind::Tile {
                multiples: m.to_vec(),
            },
            shape,
            &out,
            *dt,
            (0.05, 3),
        );
        check(g, &format!("tile{k}"), true);
    }
}

#[test]
fn mirror_pads_in_every_mode() {
    // The copy counts: runs of consecutive source rows (forwards, or backwards in H and W)
    // times columns times channel runs.
    type Case<'a> = (PadMode, &'a [usize], &'a [(usize, usize)], bool);
    let cases: &[Case] = &[
        // 4 x 4 copies.
        (
            PadMode::Reflect,
            &[1, 8, 8, 16],
            &[(0, 0), (1, 2), (2, 1), (0, 0)],
            true,
        ),
        // 4 x 4 x 3 (channels padded too).
        (
            PadMode::Reflect,
            &[1, 5, 6, 3],
            &[(0, 0), (2, 1), (1, 2), (1, 1)],
            true,
        ),
        // Pads of the whole size: 3 x 3 x 4 = 36 copies (reflected runs backwards).
        (
            PadMode::Symmetric,
            &[1, 5, 6, 3],
            &[(0, 0), (5, 1), (2, 6), (0, 3)],
            true,
        ),
        // 9 x 7 = 63 copies.
        (
            PadMode::Edge,
            &[1, 3, 4, 2],
            &[(0, 0), (6, 2), (1, 5), (0, 0)],
            true,
        ),
        // 7 x 5.
        (PadMode::Symmetric, &[4, 3], &[(2, 4), (3, 1)], true),
        // Three padded dimensions: the innermost one's 5 runs unrolled into single channels,
        // within the copy limit now that runs go backwards too.
        (
            PadMode::Reflect,
            &[3, 4, 5],
            &[(2, 2), (1, 3), (2, 2)],
            true,
        ),
        // Channels of 40 mirrored one by one with both other axes padded: the CPU.
        (
            PadMode::Reflect,
            &[1, 6, 7, 40],
            &[(0, 0), (2, 2), (3, 3), (30, 30)],
            false,
        ),
    ];
    for (k, (mode, shape, pads, npu)) in cases.iter().enumerate() {
        let out: Vec<usize> = shape
            .iter()
            .zip(pads.iter())
            .map(|(d, (a, b))| d + a + b)
            .collect();
        let g = one_op(
            OpKind::MirrorPad {
                pads: pads.to_vec(),
                mode: *mode,
            },
            shape,
            &out,
            DType::I8,
            (0.05, 3),
        );
        check(g, &format!("mirror_pad{k}"), *npu);
    }
}

#[test]
fn reverses_along_any_axes() {
    let cases: &[(&[usize], &[usize], bool)] = &[
        (&[1, 8, 8, 16], &[2], true),
        (&[1, 8, 8, 16], &[1], true),
        (&[1, 4, 5, 6], &[3], true),
        (&[1, 4, 5, 3], &[1, 2, 3], true),
        (&[7, 9], &[0, 1], true),
        // 128 rows: one copy writing them backwards.
        (&[1, 128, 2, 3], &[1], true),
        // 128 channels to reverse one by one (C is walked forwards): the CPU.
        (&[1, 2, 2, 128], &[3], false),
    ];
    for (k, (shape, axes, npu)) in cases.iter().enumerate() {
        let g = one_op(
            OpKind::Reverse {
                axes: axes.to_vec(),
            },
            shape,
            shape,
            DType::I8,
            (0.05, 3),
        );
        check(g, &format!("reverse{k}"), *npu);
    }
}

#[test]
fn gathers_along_any_axis() {
    type Case<'a> = (&'a [usize], usize, &'a [usize], &'a [usize]);
    let cases: &[Case] = &[
        (
            &[1, 8, 8, 16],
            3,
            &[3, 1, 4, 1, 5, 9, 2, 6, 15, 0],
            &[1, 8, 8, 10],
        ),
        (&[1, 6, 5, 4], 1, &[5, 0, 1, 2, 2], &[1, 5, 5, 4]),
        (&[1, 6, 5, 4], 2, &[4, 4, 3], &[1, 6, 3, 4]),
        (&[10, 3], 0, &[9, 2, 3, 4, 0], &[5, 3]),
        // Indices [2, 2] of shape [2, 2]: the output rank grows.
        (&[4, 6], 1, &[0, 1, 5, 5], &[4, 2, 2]),
    ];
    for (k, (shape, axis, idx, out)) in cases.iter().enumerate() {
        let g = one_op(
            OpKind::Gather {
                axis: *axis,
                indices: idx.to_vec(),
            },
            shape,
            out,
            DType::I8,
            (0.05, 3),
        );
        check(g, &format!("gather{k}"), true);
    }
}

#[test]
fn depth_to_space_and_back() {
    let cases: &[(OpKind, &[usize], &[usize])] = &[
        (
            OpKind::DepthToSpace {
                block: 2,
                crd: false,
            },
            &[1, 4, 4, 16],
            &[1, 8, 8, 4],
        ),
        (
            OpKind::DepthToSpace {
                block: 2,
                crd: true,
            },
            &[1, 3, 5, 8],
            &[1, 6, 10, 2],
        ),
        (
            OpKind::DepthToSpace {
                block: 3,
                crd: false,
            },
            &[1, 2, 3, 18],
            &[1, 6, 9, 2],
        ),
        (
            OpKind::SpaceToDepth { block: 2 },
            &[1, 8, 8, 4],
            &[1, 4, 4, 16],
        ),
        (
            OpKind::SpaceToDepth { block: 3 },
            &[1, 6, 9, 2],
            &[1, 2, 3, 18],
        ),
    ];
    for (k, (kind, x, y)) in cases.iter().enumerate() {
        let g = one_op(kind.clone(), x, y, DType::I8, (0.05, 3));
        check(g, &format!("space_depth{k}"), true);
    }
}

#[test]
fn requantizing_movements_run_on_the_cpu() {
    // An ONNX model may quantize the output differently: the NPU copies decline.
    let g = one_op(
        OpKind::Tile {
            multiples: vec![1, 2, 1, 1],
        },
        &[1, 3, 4, 5],
        &[1, 6, 4, 5],
        DType::I8,
        (0.1, -7),
    );
    check(g, "tile_requant", false);
    let g = one_op(
        OpKind::Reverse { axes: vec![2] },
        &[1, 3, 4, 5],
        &[1, 3, 4, 5],
        DType::I16,
        (0.02, 0),
    );
    check(g, "reverse_requant", false);
}

#[test]
fn space_to_batch_and_back_alone_on_the_cpu() {
    let cases: &[(OpKind, &[usize], &[usize])] = &[
        (
            OpKind::SpaceToBatch {
                block: (2, 2),
                pads: [(2, 4), (1, 2)],
            },
            &[1, 6, 5, 3],
            &[4, 6, 4, 3],
        ),
        (
            OpKind::SpaceToBatch {
                block: (3, 1),
                pads: [(0, 1), (0, 0)],
            },
            &[2, 5, 4, 2],
            &[6, 2, 4, 2],
        ),
        (
            OpKind::BatchToSpace {
                block: (2, 2),
                crops: [(0, 2), (1, 0)],
            },
            &[4, 6, 4, 3],
            &[1, 10, 7, 3],
        ),
        (
            OpKind::BatchToSpace {
                block: (2, 1),
                crops: [(1, 0), (0, 0)],
            },
            &[4, 3, 5],
            &[2, 5, 5],
        ),
    ];
    for (k, (kind, x, y)) in cases.iter().enumerate() {
        let g = one_op(kind.clone(), x, y, DType::I8, (0.05, 3));
        check(g, &format!("batch_space{k}"), false);
    }
}

/// SpaceToBatch -> Conv2D / DepthwiseConv2D -> BatchToSpace computes what the folded dilated
/// convolution computes (two independent implementations: the movement kernels around a plain
/// convolution, and the dilated convolution), byte for byte.
#[test]
fn dilated_convolution_pattern_equals_the_folded_convolution() {
    use crate::ir::{Activation, ConvAttrs, Padding};
    for depthwise in [false, true] {
        let mut b = Builder::default();
        let mut rng = Rng(0xD11A7E ^ depthwise as u64);
        let x = b.input("x", &[1, 12, 11, 4], DType::I8, 0.05, 3);
        let s = b.tensor("s", &[4, 8, 7, 4], DType::I8, Some((0.05, 3)));
        b.op(
            OpKind::SpaceToBatch {
                block: (2, 2),
                pads: [(2, 2), (2, 1)],
            },
            vec![x],
            vec![s],
        );
        let oc = if depthwise { 8 } else { 5 };
        let (w, kind) = if depthwise {
            let w = b.weights(&mut rng, &[1, 3, 3, oc], 3, oc);
            let attrs = ConvAttrs {
                stride: (1, 1),
                dilation: (1, 1),
                padding: Padding::default(),
                activation: Activation::Relu,
            };
            (
                w,
                OpKind::DepthwiseConv2d {
                    attrs,
                    depth_multiplier: 2,
                },
            )
        } else {
            let w = b.weights(&mut rng, &[oc, 3, 3, 4], 0, oc);
            let attrs = ConvAttrs {
                stride: (1, 1),
                dilation: (1, 1),
                padding: Padding::default(),
                activation: Activation::None,
            };
            (w, OpKind::Conv2d(attrs))
        };
        let bias = b.bias(&mut rng, oc, 0.05 * 0.002);
        let t = b.tensor("t", &[4, 6, 5, oc], DType::I8, Some((0.1, -2)));
        b.op(kind, vec![s, w, bias], vec![t]);
        let y = b.output("y", &[1, 12, 9, oc], DType::I8, 0.1, -2);
        b.op(
            OpKind::BatchToSpace {
                block: (2, 2),
                crops: [(0, 0), (0, 1)],
            },
            vec![t],
            vec![y],
        );
        let mut g = b.g;
        g.validate().expect("valid chain");
        let mut folded = g.clone();
        crate::import::tflite::fold_dilated_convs(&mut folded);
        assert_eq!(folded.ops.len(), 1, "depthwise {depthwise}: not folded");
        g.name = format!("dilated_chain_{depthwise}");
        for trial in 0..3 {
            let inputs = vec![random_input(&mut rng, &g.tensors[x])];
            let want = crate::reference::run(&g, &inputs).expect("chain");
            let got = crate::reference::run(&folded, &inputs).expect("folded");
            assert_eq!(
                diff(&got[0].data.to_le_bytes(), &want[0].data.to_le_bytes(), 1),
                None,
                "depthwise {depthwise} trial {trial}"
            );
        }
        // The folded convolution through the whole backend.
        check(folded, &format!("dilated_folded_{depthwise}"), true);
    }
}
