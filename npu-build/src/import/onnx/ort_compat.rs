//! What onnxruntime changes in a QDQ model before running it, applied to models its quantizer
//! made (`producer_name` `onnx.quantize`), so that they compute what onnxruntime's default
//! session computes.
//!
//! onnxruntime's `DoubleQDQPairsRemover` (a basic-level graph optimization, on by default;
//! `onnxruntime/core/optimizer/double_qdq_pairs_remover.cc`) rewrites `Q1 -> DQ1 -> Q2 -> DQ2`
//! whose two pairs quantize differently into `Q -> DQ` with a third quantization: the
//! intersection of the two pairs' real ranges spread over the type's range. This is not the
//! model's meaning (it moves values by many steps where the second pair's range is narrower),
//! but it is what onnxruntime runs. Its transpose optimizer first moves Transposes out from
//! between the pairs, so a chain of Transposes between DQ1 and Q2 counts as adjacent. Measured:
//! without this pass the QDQ MobileNetV3Small fixtures (squeeze-and-excite: `ReduceMean -> Q ->
//! DQ -> Transpose -> Q -> DQ`, nine times) are 14-17 output steps from onnxruntime's default
//! session; with it, 0-2 (`tests/tests/onnx_wild.rs`).

use std::collections::{HashMap, HashSet};

use super::constant::{Const, Elems};
use super::model::{Model, Node};

/// Applies onnxruntime's double-QDQ-pair merge to `model` (see the module docs). Returns how
/// many pairs were merged.
pub(crate) fn merge_double_qdq(model: &mut Model) -> usize {
    let outputs: HashSet<String> = model.outputs.iter().map(|d| d.name.clone()).collect();
    let mut merged = 0;
    // Each merge changes the graph; look again until nothing matches (a handful of passes).
    while let Some(m) = find(model, &outputs) {
        apply(model, m);
        merged += 1;
    }
    merged
}

/// One `Q1 -> DQ1 -> Transpose* -> Q2 -> DQ2` to merge: node indices and the new parameters.
struct Merge {
    q1: usize,
    dq1: usize,
    q2: usize,
    dq2: usize,
    /// The value that replaces DQ2's output (DQ1's, or the last Transpose's).
    through: String,
    scale: f32,
    zero_point: Elems,
}

fn find(model: &Model, graph_outputs: &HashSet<String>) -> Option<Merge> {
    let mut consumers: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (k, n) in model.nodes.iter().enumerate() {
        for i in n.inputs.iter().filter(|i| !i.is_empty()) {
            consumers.entry(i.as_str()).or_default().push(k);
        }
        for o in &n.outputs {
            producer.insert(o.as_str(), k);
        }
    }
    let consts: HashMap<&str, &Const> = model
        .initializers
        .iter()
        .map(|(n, c)| (n.as_str(), c))
        .collect();
    // The single consumer of `value`, unless it is a graph output.
    let only = |value: &str| -> Option<usize> {
        match consumers.get(value).map(Vec::as_slice) {
            Some([k]) if !graph_outputs.contains(value) => Some(*k),
            _ => None,
        }
    };
    let is = |k: usize, op: &str| {
        let n = &model.nodes[k];
        n.op_type == op && n.domain.is_empty()
    };
    for (dq1, n) in model.nodes.iter().enumerate() {
        if !is(dq1, "DequantizeLinear") {
            continue;
        }
        let Some(&q1) = n.inputs.first().and_then(|i| producer.get(i.as_str())) else {
            continue;
        };
        if !is(q1, "QuantizeLinear") || only(&model.nodes[q1].outputs[0]) != Some(dq1) {
            continue;
        }
        // Transposes (one consumer each), then Q2.
        let mut through = n.outputs.first()?.clone();
        let mut next = only(&through);
        while let Some(t) = next.filter(|&t| is(t, "Transpose")) {
            through = model.nodes[t].outputs.first()?.clone();
            next = only(&through);
        }
        let Some(q2) = next.filter(|&k| is(k, "QuantizeLinear")) else {
            continue;
        };
        let Some(dq2) = only(&model.nodes[q2].outputs[0]).filter(|&k| is(k, "DequantizeLinear"))
        else {
            continue;
        };
        let (Some(p1), Some(p2)) = (
            pair_params(&consts, &model.nodes[q1], n),
            pair_params(&consts, &model.nodes[q2], &model.nodes[dq2]),
        ) else {
            continue;
        };
        // Identical pairs: onnxruntime drops the middle pair, which changes no value.
        let Some((scale, zero_point)) = merged_params(p1, p2) else {
            continue;
        };
        return Some(Merge {
            q1,
            dq1,
            q2,
            dq2,
            through,
            scale,
            zero_point,
        });
    }
    None
}

/// `(scale, zero point)` of a Q/DQ pair that uses the same scalar constants (onnxruntime's
/// `IsQDQPairSupported`), the zero point as read with its type.
fn pair_params(consts: &HashMap<&str, &Const>, q: &Node, dq: &Node) -> Option<(f32, Elems)> {
    let param = |n: &Node, i: usize| n.inputs.get(i).and_then(|name| consts.get(name.as_str()));
    let (qs, qz, ds, dz) = (param(q, 1)?, param(q, 2)?, param(dq, 1)?, param(dq, 2)?);
    if qs.elems != ds.elems || qz.elems != dz.elems || qs.len() != 1 || qz.len() != 1 {
        return None;
    }
    let Elems::F32(s) = &qs.elems else {
        return None;
    };
    Some((s[0], qz.elems.clone()))
}

/// onnxruntime's `FindNewZeroPointAndScale`: the intersection of the two real ranges in f32,
/// spread over the type's range. `None` for other types or identical pairs.
fn merged_params((s1, z1): (f32, Elems), (s2, z2): (f32, Elems)) -> Option<(f32, Elems)> {
    let (lo, hi, z1, z2, signed) = match (&z1, &z2) {
        (Elems::U8(a), Elems::U8(b)) => (0i32, 255i32, i32::from(a[0]), i32::from(b[0]), false),
        (Elems::I8(a), Elems::I8(b)) => (-128, 127, i32::from(a[0]), i32::from(b[0]), true),
        _ => return None,
    };
    if z1 == z2 && (s1 - s2).abs() < 1e-20 {
        return None;
    }
    let real_min = ((lo - z1) as f32 * s1).max((lo - z2) as f32 * s2);
    let real_max = ((hi - z1) as f32 * s1).min((hi - z2) as f32 * s2);
    let scale = (real_max - real_min) / (hi - lo) as f32;
    // C's `round` (half away from zero), then the type's narrowing.
    let z = (lo as f32 - real_min / scale).round() as i32;
    if !((lo..=hi).contains(&z) && scale.is_finite() && scale > 0.0) {
        return None;
    }
    let zero_point = if signed {
        Elems::I8(vec![z as i8])
    } else {
        Elems::U8(vec![z as u8])
    };
    Some((scale, zero_point))
}

fn apply(model: &mut Model, m: Merge) {
    // New scalar initializers for the outer pair.
    let tag = model.nodes[m.q1].outputs[0].clone();
    let scale_name = format!("{tag}/double_qdq_scale");
    let zp_name = format!("{tag}/double_qdq_zero_point");
    model.initializers.push((
        scale_name.clone(),
        Const {
            dims: Vec::new(),
            elems: Elems::F32(vec![m.scale]),
        },
    ));
    model.initializers.push((
        zp_name.clone(),
        Const {
            dims: Vec::new(),
            elems: m.zero_point,
        },
    ));
    for k in [m.q1, m.dq1] {
        let n = &mut model.nodes[k];
        n.inputs[1] = scale_name.clone();
        n.inputs[2] = zp_name.clone();
    }
    // DQ2's readers read the (transposed) DQ1 values; Q2 and DQ2 go.
    let old = model.nodes[m.dq2].outputs[0].clone();
    for n in &mut model.nodes {
        for i in n.inputs.iter_mut().filter(|i| **i == old) {
            *i = m.through.clone();
        }
    }
    let (a, b) = (m.q2.max(m.dq2), m.q2.min(m.dq2));
    model.nodes.remove(a);
    model.nodes.remove(b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_range_is_the_intersection() {
        // [0, 6] (6/255, zp -128) and [-256/255, 254/255] (2/255, zp 0) meet in [0, 254/255].
        let (s, z) = merged_params(
            (6.0 / 255.0, Elems::I8(vec![-128])),
            (2.0 / 255.0, Elems::I8(vec![0])),
        )
        .expect("merged");
        assert!((s - 254.0 / 255.0 / 255.0).abs() < 1e-9, "{s}");
        assert_eq!(z, Elems::I8(vec![-128]));
        // Identical pairs stay.
        assert!(merged_params((0.1, Elems::U8(vec![3])), (0.1, Elems::U8(vec![3]))).is_none());
        // Mixed types are left alone.
        assert!(merged_params((0.1, Elems::U8(vec![3])), (0.2, Elems::I8(vec![3]))).is_none());
    }
}
