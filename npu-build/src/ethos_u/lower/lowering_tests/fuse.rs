//! Table activations fused into the operation before them (`ethos_u::fuse_lut`): the fused
//! program is one NPU operation and reproduces the reference interpreter; a clamping first
//! operation is left alone.

use super::*;
use crate::ir::ActFn;

/// conv 3x3 (activation `act`) -> `f`, on [1, 9, 7, 8].
fn conv_then(rng: &mut Rng, act: Activation, f: ActFn) -> Graph {
    let mut b = Builder::default();
    let x = b.input("x", &[1, 9, 7, 8], DType::I8, 0.04, 3);
    let w = b.weights(rng, &[12, 3, 3, 8], 0, 12);
    let bias = b.bias(rng, 12, 0.04 * 0.002);
    let t = b.tensor("t", &[1, 9, 7, 12], DType::I8, Some((0.05, -3)));
    let a = conv_attrs((1, 1), (1, 1), pads(1, 1, 1, 1), act);
    b.op(OpKind::Conv2d(a), vec![x, w, bias], vec![t]);
    let y = b.output("y", &[1, 9, 7, 12], DType::I8, 0.03, -20);
    b.op(OpKind::ActFn(f), vec![t], vec![y]);
    b.g
}

#[test]
fn table_activations_fuse_into_the_convolution_before_them() {
    let mut rng = Rng(31);
    for (act, f, fused) in [
        (Activation::None, ActFn::HardSwish, true),
        (Activation::None, ActFn::Logistic, true),
        (Activation::Relu6, ActFn::HardSwish, false),
    ] {
        let g = conv_then(&mut rng, act, f);
        let name = format!("conv_{act:?}_{}", f.name());
        check_graph(g.clone(), &name);
        let c = crate::ethos_u::compile(&g, &ETHOS_U55_128).expect("compile");
        assert_eq!(c.npu_ops, if fused { 1 } else { 2 }, "{name}");
    }
}
