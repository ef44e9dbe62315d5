//! Feature-map views shared by the lowerings: boxes of a feature map, dense re-views, 32-bit
//! maps as 16-bit pairs, and new scratch or constant maps.

use super::Lowering;
use crate::error::Result;
use crate::ethos_u::npu_op::{ElemType, FeatureMap, Layout};

/// A 32-bit NHWC feature map seen as 16-bit elements with twice the depth (the pooling unit
/// moves at most 16-bit elements).
pub(super) fn as_i16_pairs(fm: &FeatureMap) -> Option<FeatureMap> {
    if fm.layout != Layout::Nhwc || fm.dtype != ElemType::I32 {
        return None;
    }
    let [h, w, c] = fm.shape;
    Some(FeatureMap {
        shape: [h, w, c * 2],
        strides: [fm.strides[0], fm.strides[1], 2],
        dtype: ElemType::I16,
        zero_point: 0,
        ..fm.clone()
    })
}

/// The box of `fm` starting at `origin` (`[y, x, c]`) with size `shape`; strides are kept.
pub(super) fn slice(fm: &FeatureMap, origin: [usize; 3], shape: [usize; 3]) -> Result<FeatureMap> {
    let fits = (0..3).all(|i| origin[i] + shape[i] <= fm.shape[i]);
    // In the brick layout a box must start on a brick boundary in depth.
    let depth_ok = fm.layout == Layout::Nhwc || origin[2].is_multiple_of(16);
    if !fits || !depth_ok {
        return Err(crate::error::Error::Internal(format!(
            "slice {origin:?}+{shape:?} of a {:?} {:?} feature map",
            fm.shape, fm.layout
        )));
    }
    let depth = match fm.layout {
        Layout::Nhwc => origin[2] * fm.strides[2],
        Layout::Nhcwb16 => origin[2] / 16 * fm.strides[2],
    };
    let offset = fm.offset + origin[0] * fm.strides[0] + origin[1] * fm.strides[1] + depth;
    Ok(FeatureMap {
        offset,
        shape,
        ..fm.clone()
    })
}

/// True if `fm` is a contiguous NHWC block (its bytes are those of a dense tensor of its shape).
pub(super) fn is_contiguous(fm: &FeatureMap) -> bool {
    let [h, w, c] = fm.shape;
    let e = fm.dtype.bytes();
    fm.layout == Layout::Nhwc
        && (c <= 1 || fm.strides[2] == e)
        && (w <= 1 || fm.strides[1] == c * e)
        && (h <= 1 || fm.strides[0] == w * c * e)
}

/// `fm` re-viewed as a dense tensor of `shape` (same element count), if it is contiguous.
pub(super) fn view(fm: &FeatureMap, shape: [usize; 3]) -> Option<FeatureMap> {
    if !is_contiguous(fm) || shape.iter().product::<usize>() != fm.elements() {
        return None;
    }
    let e = fm.dtype.bytes();
    Some(FeatureMap {
        shape,
        strides: [shape[1] * shape[2] * e, shape[2] * e, e],
        ..fm.clone()
    })
}

/// A dense NHWC feature map of a new arena scratch buffer (zero point 0).
pub(super) fn scratch_fm(
    cx: &mut Lowering<'_>,
    name: String,
    shape: [usize; 3],
    dtype: ElemType,
) -> FeatureMap {
    let size = shape.iter().product::<usize>() * dtype.bytes();
    let buffer = cx.scratch_buffer(name, size);
    FeatureMap::nhwc(buffer, shape, dtype, 0)
}

/// A single int32 constant in the read-only region, as a `[1, 1, 1]` feature map (int32
/// constants are tensors, not IFM2 scalars: the scalar register holds 16 bits).
pub(super) fn const_i32(cx: &mut Lowering<'_>, name: String, value: i32) -> FeatureMap {
    let buffer = cx.const_buffer(name, value.to_le_bytes().to_vec());
    FeatureMap::nhwc(buffer, [1, 1, 1], ElemType::I32, 0)
}

/// `fm` re-viewed as `shape` (same elements, same order), if `fm` is a dense NHWC box.
pub(super) fn reshape(fm: &FeatureMap, shape: [usize; 3]) -> Option<FeatureMap> {
    if !is_dense(fm) || shape.iter().product::<usize>() != fm.elements() {
        return None;
    }
    let dense = FeatureMap::nhwc(fm.buffer, shape, fm.dtype, fm.zero_point);
    Some(FeatureMap {
        offset: fm.offset,
        ..dense
    })
}

/// True if `fm` is NHWC with the strides of a dense tensor of its own shape (strides of
/// dimensions of size 1 do not matter).
pub(super) fn is_dense(fm: &FeatureMap) -> bool {
    if fm.layout != Layout::Nhwc {
        return false;
    }
    let [h, w, c] = fm.shape;
    let e = fm.dtype.bytes();
    let want = [w * c * e, c * e, e];
    [h, w, c]
        .iter()
        .zip(fm.strides.iter().zip(want))
        .all(|(&d, (&s, want))| d <= 1 || s == want)
}
