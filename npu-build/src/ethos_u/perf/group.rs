//! Depth slices: consecutive operations that compute one operation's OFM in parts.
//!
//! Compilers split a convolution, depthwise convolution or pooling along the OFM depth when its
//! weights are streamed into a buffer slice by slice (Vela's weight double-buffering): the
//! slices run back to back with identical geometry, each writing the next channels of the same
//! OFM. The hardware streams them as one operation (the block pipeline does not drain between
//! them), and Vela costs them as one operation, so the estimator costs such a run once, with the
//! merged shape, and shares the result among the slices by OFM depth.

use super::stream::{NpuOperation, OpClass};

/// Whether `next` is the next depth slice after `group` (whose slices so far cover `depth`
/// OFM channels starting at `group`'s OFM base).
pub fn continues(group: &NpuOperation, depth: u64, next: &NpuOperation) -> bool {
    let (a, b) = (group, next);
    let sliceable = matches!(
        a.class,
        OpClass::Conv | OpClass::Depthwise | OpClass::Pool(_)
    );
    let same_op = sliceable
        && a.class == b.class
        && a.kernel == b.kernel
        && a.pad == b.pad
        && a.ofm_block == b.ofm_block
        && a.part_kernel == b.part_kernel
        && a.acc40 == b.acc40
        && a.activation == b.activation
        && a.upscale == b.upscale
        && a.ifm2.is_none()
        && b.ifm2.is_none()
        && a.weights.map(|w| w.region) == b.weights.map(|w| w.region)
        && a.scales.map(|w| w.region) == b.scales.map(|w| w.region);
    if !same_op {
        return false;
    }
    let same_layout = |x: &super::stream::FeatureMap, y: &super::stream::FeatureMap| {
        x.shape[0] == y.shape[0]
            && x.shape[1] == y.shape[1]
            && x.bits == y.bits
            && x.nhcwb16 == y.nhcwb16
            && x.region == y.region
            && x.strides == y.strides
    };
    if !same_layout(&a.ofm, &b.ofm) || !same_layout(&a.ifm, &b.ifm) {
        return false;
    }
    if a.ofm.nhcwb16 && !depth.is_multiple_of(16) {
        return false;
    }
    let ofm_next = a.ofm.base.checked_add(a.ofm.depth_offset(depth));
    if ofm_next != Some(b.ofm.base) {
        return false;
    }
    if a.class == OpClass::Conv {
        // Every slice reads the whole IFM.
        a.ifm.base == b.ifm.base && a.ifm.shape[2] == b.ifm.shape[2]
    } else {
        // Channel-wise operations read the matching IFM channels.
        (!a.ifm.nhcwb16 || depth.is_multiple_of(16))
            && a.ifm.base.checked_add(a.ifm.depth_offset(depth)) == Some(b.ifm.base)
            && b.ifm.shape[2] == b.ofm.shape[2]
    }
}

/// Splits `ops` into runs of depth slices; returns the index ranges.
pub fn runs(ops: &[&NpuOperation]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut depth = 0;
    for (i, op) in ops.iter().enumerate() {
        if i > start && continues(ops[start], depth, op) {
            depth = depth.saturating_add(op.ofm.shape[2]);
            continue;
        }
        if i > start {
            out.push(start..i);
        }
        start = i;
        depth = op.ofm.shape[2];
    }
    if start < ops.len() {
        out.push(start..ops.len());
    }
    out
}

/// The operation a run of depth slices computes.
pub fn merge(slices: &[&NpuOperation]) -> Option<NpuOperation> {
    let (first, rest) = slices.split_first()?;
    let mut op = (*first).clone();
    for s in rest {
        op.ofm.shape[2] = op.ofm.shape[2].saturating_add(s.ofm.shape[2]);
        if op.class != OpClass::Conv {
            op.ifm.shape[2] = op.ifm.shape[2].saturating_add(s.ifm.shape[2]);
        }
        for (m, x) in [(&mut op.weights, s.weights), (&mut op.scales, s.scales)] {
            if let (Some(m), Some(x)) = (m.as_mut(), x) {
                m.bytes = m.bytes.saturating_add(x.bytes);
            }
        }
    }
    Some(op)
}
