//! Clean-up of the imported IR: stand-alone activations fused into their producers when that
//! changes nothing, `Mean(keep_dims) + Reshape` merged, dead ops and tensors removed, and the
//! quantization classes written onto the tensors.

use std::collections::HashMap;

use super::builder::{
    Builder, combine_activations, fused_activation, is_quantized_type, set_fused_activation,
};
use crate::ir::{Activation, OpKind, TensorId};

/// Runs every pass.
pub(crate) fn finish(b: &mut Builder) {
    fuse_activations(b);
    merge_mean_reshape(b);
    merge_slice_reshape(b);
    prune(b);
    resolve_quantization(b);
    merge_reshape_chains(b);
    compact(b);
}

/// Consumer count of every tensor.
fn consumer_counts(b: &Builder) -> HashMap<TensorId, usize> {
    let mut m = HashMap::new();
    for op in &b.g.ops {
        for &i in &op.inputs {
            *m.entry(i).or_insert(0) += 1;
        }
    }
    m
}

/// Index of the op producing each tensor.
fn producers(b: &Builder) -> HashMap<TensorId, usize> {
    let mut m = HashMap::new();
    for (k, op) in b.g.ops.iter().enumerate() {
        for &o in &op.outputs {
            m.insert(o, k);
        }
    }
    m
}

/// Whether `t` is read by exactly one op and is not a graph output.
fn single_use(b: &Builder, counts: &HashMap<TensorId, usize>, t: TensorId) -> bool {
    counts.get(&t) == Some(&1) && !b.g.outputs.contains(&t)
}

/// Fuses stand-alone activations into their producers where legal: the activation keeps the
/// quantization (so it is only a clamp) and nothing else reads the producer's output.
fn fuse_activations(b: &mut Builder) {
    let counts = consumer_counts(b);
    let mut prod = producers(b);
    let mut removed = vec![false; b.g.ops.len()];
    let candidates: Vec<(usize, Activation, TensorId, TensorId)> =
        b.g.ops
            .iter()
            .enumerate()
            .filter_map(
                |(k, op)| match (&op.kind, op.inputs.as_slice(), op.outputs.as_slice()) {
                    (OpKind::Activation(a), &[t], &[out]) => Some((k, *a, t, out)),
                    _ => None,
                },
            )
            .collect();
    for (k, act, t, out) in candidates {
        let Some(&p) = prod.get(&t) else {
            continue;
        };
        let Some(prev) = fused_activation(&b.g.ops[p].kind) else {
            continue;
        };
        if !single_use(b, &counts, t) || b.g.ops[p].outputs.len() != 1 {
            continue;
        }
        let same = b.g.tensors[t].dtype == b.g.tensors[out].dtype
            && b.classes.get(t).is_some()
            && b.classes.get(t) == b.classes.get(out);
        if !same {
            continue;
        }
        set_fused_activation(&mut b.g.ops[p].kind, combine_activations(prev, act));
        b.g.ops[p].outputs = vec![out];
        prod.insert(out, p);
        removed[k] = true;
    }
    drop_ops(b, &removed);
}

/// Every Reshape op: `(op index, input, output)`.
fn reshapes(b: &Builder) -> Vec<(usize, TensorId, TensorId)> {
    b.g.ops
        .iter()
        .enumerate()
        .filter_map(
            |(k, op)| match (&op.kind, op.inputs.as_slice(), op.outputs.as_slice()) {
                (OpKind::Reshape, &[t], &[out]) => Some((k, t, out)),
                _ => None,
            },
        )
        .collect()
}

/// `Mean(keep_dims = true)` followed only by a Reshape dropping the reduced axes becomes
/// `Mean(keep_dims = false)` (one op, as TFLite writes it).
fn merge_mean_reshape(b: &mut Builder) {
    let counts = consumer_counts(b);
    let prod = producers(b);
    let mut removed = vec![false; b.g.ops.len()];
    let candidates = reshapes(b);
    for (k, t, out) in candidates {
        let Some(&m) = prod.get(&t) else {
            continue;
        };
        let OpKind::Mean {
            axes,
            keep_dims: true,
        } = &b.g.ops[m].kind
        else {
            continue;
        };
        let Some(&src) = b.g.ops[m].inputs.first() else {
            continue;
        };
        let reduced: Vec<usize> = b.g.tensors[src]
            .shape
            .iter()
            .enumerate()
            .filter(|(i, _)| !axes.contains(i))
            .map(|(_, &d)| d)
            .collect();
        if !single_use(b, &counts, t) || b.g.tensors[out].shape != reduced {
            continue;
        }
        let axes = axes.clone();
        b.g.ops[m].kind = OpKind::Mean {
            axes,
            keep_dims: false,
        };
        b.g.ops[m].outputs = vec![out];
        removed[k] = true;
    }
    drop_ops(b, &removed);
}

fn drop_ops(b: &mut Builder, removed: &[bool]) {
    let mut k = 0;
    b.g.ops.retain(|_| {
        k += 1;
        !removed[k - 1]
    });
}

/// Collapses `Reshape(Reshape(x))` into one Reshape and drops Reshapes that change nothing.
///
/// tf2onnx brackets NHWC graphs with layout changes; where a dimension is 1 the transposes
/// become Reshapes, and an 8x8x1 input turns into `[1,8,8,1] -> [1,1,8,8] -> [1,8,8,1]`. The
/// TFLite twin has neither, and the IR of the two should be the same graph.
fn merge_reshape_chains(b: &mut Builder) {
    let counts = consumer_counts(b);
    let mut prod = producers(b);
    let mut removed = vec![false; b.g.ops.len()];
    let same_kind = |b: &Builder, x: TensorId, y: TensorId| {
        let (x, y) = (&b.g.tensors[x], &b.g.tensors[y]);
        x.dtype == y.dtype && x.quant == y.quant
    };
    // In graph order, so a chain's earlier links are already collapsed.
    for k in 0..b.g.ops.len() {
        let (OpKind::Reshape, &[t], &[out]) = (
            &b.g.ops[k].kind,
            b.g.ops[k].inputs.as_slice(),
            b.g.ops[k].outputs.as_slice(),
        ) else {
            continue;
        };
        let Some(&m) = prod.get(&t) else { continue };
        if removed[m] || !matches!(b.g.ops[m].kind, OpKind::Reshape) || !single_use(b, &counts, t) {
            continue;
        }
        let &[src] = b.g.ops[m].inputs.as_slice() else {
            continue;
        };
        if same_kind(b, src, t) && same_kind(b, t, out) {
            b.g.ops[k].inputs = vec![src];
            removed[m] = true;
            prod.remove(&t);
        }
    }
    // A Reshape to its own shape: its readers read the source instead (unless it is a graph
    // output, whose tensor must stay).
    for (k, gone) in removed.clone().into_iter().enumerate() {
        if gone {
            continue;
        }
        let (OpKind::Reshape, &[src], &[out]) = (
            &b.g.ops[k].kind,
            b.g.ops[k].inputs.as_slice(),
            b.g.ops[k].outputs.as_slice(),
        ) else {
            continue;
        };
        if b.g.outputs.contains(&out)
            || b.g.tensors[src].shape != b.g.tensors[out].shape
            || !same_kind(b, src, out)
        {
            continue;
        }
        removed[k] = true;
        for op in &mut b.g.ops {
            for i in &mut op.inputs {
                if *i == out {
                    *i = src;
                }
            }
        }
    }
    drop_ops(b, &removed);
}

/// Removes ops none of whose outputs is used.
fn prune(b: &mut Builder) {
    let mut used = vec![false; b.g.tensors.len()];
    for &o in &b.g.outputs {
        used[o.index()] = true;
    }
    let mut live = vec![false; b.g.ops.len()];
    for k in (0..b.g.ops.len()).rev() {
        if b.g.ops[k].outputs.iter().any(|&o| used[o.index()]) {
            live[k] = true;
            for &i in &b.g.ops[k].inputs {
                used[i.index()] = true;
            }
        }
    }
    let dead: Vec<bool> = live.iter().map(|l| !l).collect();
    drop_ops(b, &dead);
}

/// Writes each quantization class onto its integer tensors.
fn resolve_quantization(b: &mut Builder) {
    for id in 0..b.g.tensors.len() {
        if b.g.tensors[id].quant.is_none() && is_quantized_type(b.g.tensors[id].dtype) {
            b.g.tensors[id].quant = b.classes.get(TensorId(id));
        }
    }
}

/// Drops tensors nothing refers to and renumbers the rest.
fn compact(b: &mut Builder) {
    let n = b.g.tensors.len();
    let mut keep = vec![false; n];
    for &i in b.g.inputs.iter().chain(&b.g.outputs) {
        keep[i.index()] = true;
    }
    for op in &b.g.ops {
        for &i in op.inputs.iter().chain(&op.outputs) {
            keep[i.index()] = true;
        }
    }
    let mut new_id = vec![TensorId(usize::MAX); n];
    let mut next = 0;
    for i in 0..n {
        if keep[i] {
            new_id[i] = TensorId(next);
            next += 1;
        }
    }
    let old = std::mem::take(&mut b.g.tensors);
    b.g.tensors = old
        .into_iter()
        .enumerate()
        .filter(|(i, _)| keep[*i])
        .map(|(_, t)| t)
        .collect();
    for id in b.g.inputs.iter_mut().chain(b.g.outputs.iter_mut()) {
        *id = new_id[id.index()];
    }
    for op in &mut b.g.ops {
        for id in op.inputs.iter_mut().chain(op.outputs.iter_mut()) {
            *id = new_id[id.index()];
        }
    }
}

/// A Slice whose output only a Reshape reads writes the Reshape's output directly (an IR
/// Slice's output may have any shape holding its box, as TFLite's UNPACK and shrinking
/// STRIDED_SLICE write it): ONNX `Split` + `Squeeze` becomes what TFLite's UNPACK is.
fn merge_slice_reshape(b: &mut Builder) {
    let counts = consumer_counts(b);
    let prod = producers(b);
    let mut removed = vec![false; b.g.ops.len()];
    let candidates = reshapes(b);
    for (k, t, out) in candidates {
        let Some(&m) = prod.get(&t) else {
            continue;
        };
        if !matches!(b.g.ops[m].kind, OpKind::Slice { .. })
            || !single_use(b, &counts, t)
            || b.g.tensors[t].dtype != b.g.tensors[out].dtype
        {
            continue;
        }
        b.g.ops[m].outputs = vec![out];
        removed[k] = true;
    }
    drop_ops(b, &removed);
}
