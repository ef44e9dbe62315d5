//! The dilated convolution of older converters: `SPACE_TO_BATCH_ND -> CONV_2D / DEPTHWISE_CONV_2D
//! -> BATCH_TO_SPACE_ND` folded into one convolution with dilation (docs/permutes.md).
//!
//! SpaceToBatch with block `(bh, bw)` and paddings splits the padded input into `bh * bw`
//! phases; a stride-1 VALID convolution of each phase is the dilated convolution of the padded
//! input at those output phases; BatchToSpace interleaves them back and crops. So the chain is
//! one convolution with dilation `(bh, bw)` and explicit padding `pad - crop` per side. The
//! padded values are the zero point in both (SpaceToBatch pads with it, the convolution's
//! padding contributes `(zp - zp) * w = 0`), so the result is bit-exact.

use crate::ir::{ConvAttrs, Graph, OpKind, Padding, TensorId};

/// The folded attributes, when `conv` (VALID, stride 1, no dilation) between SpaceToBatch
/// `(block, pads)` and BatchToSpace `(block2, crops)` is one dilated convolution.
fn folded(
    conv: &ConvAttrs,
    block: (usize, usize),
    pads: [(usize, usize); 2],
    block2: (usize, usize),
    crops: [(usize, usize); 2],
) -> Option<ConvAttrs> {
    let p = conv.padding;
    let plain = conv.stride == (1, 1)
        && conv.dilation == (1, 1)
        && (p.top, p.left, p.bottom, p.right) == (0, 0, 0, 0);
    if !plain || block != block2 {
        return None;
    }
    Some(ConvAttrs {
        stride: (1, 1),
        dilation: block,
        padding: Padding {
            top: pads[0].0.checked_sub(crops[0].0)?,
            bottom: pads[0].1.checked_sub(crops[0].1)?,
            left: pads[1].0.checked_sub(crops[1].0)?,
            right: pads[1].1.checked_sub(crops[1].1)?,
        },
        activation: conv.activation,
    })
}

/// Output size of a stride-1 convolution of `input` with `kernel` taps dilated by `d`.
fn out_size(input: usize, pad: usize, kernel: usize, d: usize) -> Option<usize> {
    let eff = kernel.checked_sub(1)?.checked_mul(d)?.checked_add(1)?;
    input.checked_add(pad)?.checked_sub(eff)?.checked_add(1)
}

/// Folds every such chain of `g` whose intermediate tensors nothing else reads.
pub(crate) fn fold_dilated_convs(g: &mut Graph) {
    let mut remove = Vec::new();
    for b in 0..g.ops.len() {
        let (x_b, y_b) = match (g.ops[b].inputs.first(), g.ops[b].outputs.first()) {
            (Some(&x), Some(&y)) => (x, y),
            _ => continue,
        };
        let attrs = match &g.ops[b].kind {
            OpKind::Conv2d(a) => a.clone(),
            OpKind::DepthwiseConv2d { attrs, .. } => attrs.clone(),
            _ => continue,
        };
        let Some(a) = g.producer(x_b) else { continue };
        let OpKind::SpaceToBatch { block, pads } = g.ops[a].kind else {
            continue;
        };
        let consumers = g.consumers(y_b);
        let [c] = consumers.as_slice() else { continue };
        let c = *c;
        let OpKind::BatchToSpace {
            block: block2,
            crops,
        } = g.ops[c].kind
        else {
            continue;
        };
        let private = |t: TensorId| g.consumers(t).len() == 1 && !g.outputs.contains(&t);
        if !private(x_b) || !private(y_b) {
            continue;
        }
        let (Some(&x), Some(&y)) = (g.ops[a].inputs.first(), g.ops[c].outputs.first()) else {
            continue;
        };
        let Some(new) = folded(&attrs, block, pads, block2, crops) else {
            continue;
        };
        let (xs, ys) = (&g.tensors[x].shape, &g.tensors[y].shape);
        let ws = &g.tensors[g.ops[b].inputs.get(1).copied().unwrap_or(x)].shape;
        if xs.len() != 4 || ys.len() != 4 || ws.len() != 4 {
            continue;
        }
        let p = new.padding;
        let oh = out_size(xs[1], p.top + p.bottom, ws[1], block.0);
        let ow = out_size(xs[2], p.left + p.right, ws[2], block.1);
        // Quantization must pass through both movements unchanged (TFLite requires it).
        let same = g.tensors[x].quant == g.tensors[x_b].quant
            && g.tensors[y].quant == g.tensors[y_b].quant;
        if oh != Some(ys[1]) || ow != Some(ys[2]) || xs[0] != ys[0] || !same {
            continue;
        }
        let name = g.ops[c].name.clone();
        let op = &mut g.ops[b];
        match &mut op.kind {
            OpKind::Conv2d(at) => *at = new,
            OpKind::DepthwiseConv2d { attrs, .. } => *attrs = new,
            _ => continue,
        }
        op.inputs[0] = x;
        op.outputs[0] = y;
        op.name = name;
        remove.push(a);
        remove.push(c);
    }
    remove.sort_unstable();
    remove.dedup();
    for i in remove.into_iter().rev() {
        g.ops.remove(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Activation;

    fn conv() -> ConvAttrs {
        ConvAttrs {
            stride: (1, 1),
            dilation: (1, 1),
            padding: Padding::default(),
            activation: Activation::Relu,
        }
    }

    #[test]
    fn same_padding_pattern_becomes_pads_minus_crops() {
        // TensorFlow's SAME dilated 3x3, rate 2, on 12x12: pads 2 + extra, crops the extra.
        let f = folded(&conv(), (2, 2), [(2, 4), (2, 3)], (2, 2), [(0, 2), (0, 1)]).unwrap();
        assert_eq!(f.dilation, (2, 2));
        assert_eq!(
            (
                f.padding.top,
                f.padding.bottom,
                f.padding.left,
                f.padding.right
            ),
            (2, 2, 2, 2)
        );
        assert_eq!(f.activation, Activation::Relu);
        // A crop larger than the padding, another block, a strided conv: no fold.
        assert!(folded(&conv(), (2, 2), [(0, 0), (0, 0)], (2, 2), [(1, 0), (0, 0)]).is_none());
        assert!(folded(&conv(), (2, 2), [(2, 2), (2, 2)], (3, 3), [(0, 0), (0, 0)]).is_none());
        let strided = ConvAttrs {
            stride: (2, 2),
            ..conv()
        };
        assert!(folded(&strided, (2, 2), [(2, 2), (2, 2)], (2, 2), [(0, 0), (0, 0)]).is_none());
    }
}
