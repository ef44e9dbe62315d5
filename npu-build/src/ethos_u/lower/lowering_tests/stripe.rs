//! Striping (`ethos_u::stripe`): a chain of spatial operations compiled whole, for the
//! smallest arena (`optimise_size`) and under random arena budgets, against the reference
//! interpreter, byte for byte.

use super::*;
use crate::error::Error;
use crate::ethos_u::{CompileOptions, compile_with};

/// conv 3x3 (pad 1, ReLU) -> depthwise 3x3 stride 2 (ReLU6) -> conv 1x1 -> depthwise 3x3
/// dilation 2 -> max pool 3x3 (pad 1) -> Add of the conv 1x1's output (a residual: a second
/// operand read in stripes from a whole tensor): every kind of row mapping a stripe has to
/// invert, on an input whose height is not a multiple of anything.
fn chain_graph(rng: &mut Rng) -> Graph {
    let mut b = Builder::default();
    let x = b.input("x", &[1, 23, 17, 8], DType::I8, 0.04, 3);
    let w1 = b.weights(rng, &[12, 3, 3, 8], 0, 12);
    let b1 = b.bias(rng, 12, 0.04 * 0.002);
    let t1 = b.tensor("t1", &[1, 23, 17, 12], DType::I8, Some((0.05, -3)));
    let a1 = conv_attrs((1, 1), (1, 1), pads(1, 1, 1, 1), Activation::Relu);
    b.op(OpKind::Conv2d(a1), vec![x, w1, b1], vec![t1]);
    let w2 = b.weights(rng, &[1, 3, 3, 12], 3, 12);
    let b2 = b.bias(rng, 12, 0.05 * 0.002);
    let t2 = b.tensor("t2", &[1, 12, 9, 12], DType::I8, Some((0.03, 1)));
    let a2 = conv_attrs((2, 2), (1, 1), pads(1, 1, 1, 1), Activation::Relu6);
    b.op(
        OpKind::DepthwiseConv2d {
            attrs: a2,
            depth_multiplier: 1,
        },
        vec![t1, w2, b2],
        vec![t2],
    );
    let w3 = b.weights(rng, &[16, 1, 1, 12], 0, 16);
    let b3 = b.bias(rng, 16, 0.03 * 0.002);
    let t3 = b.tensor("t3", &[1, 12, 9, 16], DType::I8, Some((0.06, -2)));
    let a3 = conv_attrs((1, 1), (1, 1), pads(0, 0, 0, 0), Activation::None);
    b.op(OpKind::Conv2d(a3), vec![t2, w3, b3], vec![t3]);
    let w4 = b.weights(rng, &[1, 3, 3, 16], 3, 16);
    let b4 = b.bias(rng, 16, 0.06 * 0.002);
    let t4 = b.tensor("t4", &[1, 12, 9, 16], DType::I8, Some((0.07, 4)));
    let a4 = conv_attrs((1, 1), (2, 2), pads(2, 2, 2, 2), Activation::None);
    b.op(
        OpKind::DepthwiseConv2d {
            attrs: a4,
            depth_multiplier: 1,
        },
        vec![t3, w4, b4],
        vec![t4],
    );
    let t5 = b.tensor("t5", &[1, 12, 9, 16], DType::I8, Some((0.07, 4)));
    b.op(
        OpKind::MaxPool(PoolAttrs {
            kernel: (3, 3),
            stride: (1, 1),
            padding: pads(1, 1, 1, 1),
            activation: Activation::None,
        }),
        vec![t4],
        vec![t5],
    );
    let y = b.output("y", &[1, 12, 9, 16], DType::I8, 0.09, -1);
    b.op(
        OpKind::Add {
            activation: Activation::None,
        },
        vec![t5, t3],
        vec![y],
    );
    b.g.name = "stripe_chain".into();
    b.g
}

#[test]
fn striped_chains_match_the_reference_under_any_budget() {
    let mut rng = Rng(23);
    let g = chain_graph(&mut rng);
    g.validate().expect("valid test graph");
    let inputs: Vec<Vec<Value>> = (0..2)
        .map(|_| vec![random_input(&mut rng, &g.tensors[g.inputs[0]])])
        .collect();
    let want: Vec<Vec<u8>> = inputs
        .iter()
        .map(|i| {
            crate::reference::run(&g, i).expect("reference")[0]
                .data
                .to_le_bytes()
        })
        .collect();
    for accel in [&ETHOS_U55_128, &npu_rt::ethos_u::config::ETHOS_U55_32] {
        let check = |options: &CompileOptions, what: &str| -> Result<usize, Error> {
            let c = compile_with(&g, accel, options)?;
            for (i, w) in inputs.iter().zip(&want) {
                let (out, _) = c
                    .run_sim(i)
                    .unwrap_or_else(|e| panic!("{what} on {}: {e}", accel.name));
                if let Some(d) = diff(&out[0].data.to_le_bytes(), w, 1) {
                    panic!("{what} on {}: {d}", accel.name);
                }
            }
            Ok(c.arena_size)
        };
        let whole = check(&CompileOptions::default(), "unstriped").expect("compiles");
        let size = CompileOptions {
            optimise_size: true,
            ..Default::default()
        };
        let smallest = check(&size, "optimise_size").expect("compiles");
        // The smallest arena comes from rolling buffers whose rows wrap around (tile 2 of the
        // feature-map registers): the runs above went through that addressing.
        let striped = compile_with(&g, accel, &size).expect("compiles");
        let wrapped = striped
            .program
            .ops
            .iter()
            .filter(|op| op.ifm.wrap.is_some() || op.ofm.wrap.is_some())
            .count();
        assert!(wrapped > 0, "{}: no rolling buffer wraps", accel.name);
        assert!(
            smallest < whole,
            "{}: striping left the arena at {whole} bytes",
            accel.name
        );
        // Budgets between the two fit; below the smallest, the error names it.
        for _ in 0..6 {
            let budget = rng.range(smallest as i64, whole as i64) as usize;
            let o = CompileOptions {
                arena_budget: Some(budget),
                ..Default::default()
            };
            let got = check(&o, &format!("budget {budget}")).expect("a feasible budget compiles");
            assert!(
                got <= budget,
                "{}: {got} bytes for budget {budget}",
                accel.name
            );
        }
        let o = CompileOptions {
            arena_budget: Some(smallest - 1),
            ..Default::default()
        };
        match check(&o, "infeasible") {
            Err(Error::Budget { needed, limit, .. }) => {
                assert_eq!((needed, limit), (smallest as u64, smallest as u64 - 1));
            }
            other => panic!("{}: expected a budget error, got {other:?}", accel.name),
        }
    }
}
