//! TFLite data movement I: SHAPE, SLICE, STRIDED_SLICE, SPLIT, SPLIT_V, UNPACK (-> IR Slice),
//! PACK (-> Reshape + Concat), EXPAND_DIMS and SQUEEZE (-> Reshape).
//!
//! The attributes are resolved here, once, into IR Slice boxes, following TFLite's kernels
//! (`strided_slice.cc` with `strided_slice_logic.h`, `slice.cc`, `split.cc`, `split_v.cc`,
//! `unpack.cc`, `pack.cc`); `docs/movea.md` lists the rules and their sources. SHAPE becomes a
//! constant (shapes are static); the operators that then read only constants are folded by
//! the importer (`Importer::fold`).

use super::{B, BuiltinOptionsRef, Importer, RawOp, const_ints, ctx, normalize_axis, raw};
use crate::error::Result;
use crate::ir::{DType, Op, OpKind, Tensor, TensorId};

/// Maps the operators of this family; `None` for other operators.
pub(super) fn map(im: &mut Importer, op: &RawOp) -> Result<Option<Vec<Op>>> {
    let ops = match op.code {
        B::Shape => shape(im, op)?,
        B::ReduceProd => reduce_prod(im, op)?,
        B::Slice => slice(im, op)?,
        B::StridedSlice => strided_slice(im, op)?,
        B::Split => split(im, op, false)?,
        B::SplitV => split(im, op, true)?,
        B::Unpack => unpack(im, op)?,
        B::Pack => pack(im, op)?,
        B::ExpandDims | B::Squeeze => reshape(im, op)?,
        _ => return Ok(None),
    };
    Ok(Some(ops))
}

/// Input `k` of `op` (required).
fn input(im: &mut Importer, op: &RawOp, k: usize) -> Result<TensorId> {
    match op.inputs.get(k) {
        Some(&i) if i >= 0 => im.tensor(i as usize, false),
        Some(&i) if i != -1 => Err(op.invalid(format!("input {k} refers to tensor {i}"))),
        _ => Err(op.invalid(format!("input {k} is missing"))),
    }
}

/// All outputs of `op`.
fn outputs(im: &mut Importer, op: &RawOp) -> Result<Vec<TensorId>> {
    let mut out = Vec::with_capacity(op.outputs.len());
    for &o in &op.outputs {
        let o =
            usize::try_from(o).map_err(|_| op.invalid(format!("output refers to tensor {o}")))?;
        out.push(im.tensor(o, false)?);
    }
    if out.is_empty() {
        return Err(op.invalid("has no output"));
    }
    Ok(out)
}

fn one_output(im: &mut Importer, op: &RawOp) -> Result<TensorId> {
    let out = outputs(im, op)?;
    if out.len() != 1 {
        return Err(op.invalid(format!("has {} outputs, expected 1", out.len())));
    }
    Ok(out[0])
}

/// An IR Slice op writing `y`, after checking that `y` has the box's element count.
fn slice_op(
    im: &Importer,
    op: &RawOp,
    x: TensorId,
    y: TensorId,
    begin: Vec<usize>,
    step: Vec<i64>,
    size: Vec<usize>,
) -> Result<Op> {
    let n = size.iter().try_fold(1usize, |a, &s| a.checked_mul(s));
    let yt = &im.graph.tensors[y];
    if n != Some(yt.elements()) {
        return Err(op.invalid(format!(
            "output '{}' {:?} does not hold the {size:?} box the attributes select",
            yt.name, yt.shape
        )));
    }
    Ok(Op {
        name: yt.name.clone(),
        kind: OpKind::Slice { begin, step, size },
        inputs: vec![x],
        outputs: vec![y],
    })
}

/// SHAPE: the input's static shape as a constant of the output's type.
fn shape(im: &mut Importer, op: &RawOp) -> Result<Vec<Op>> {
    let x = input(im, op, 0)?;
    let y = one_output(im, op)?;
    if let Some(o) = options!(op, ShapeOptions) {
        let what = op.what();
        // The output tensor's type is authoritative; the option only has to agree.
        let _ = ctx(raw::<_, i8>(o.out_type()), &what)?;
    }
    let dims = im.graph.tensors[x].shape.clone();
    let yt = &mut im.graph.tensors[y];
    if yt.shape != [dims.len()] && !(dims.is_empty() && yt.shape == [0]) {
        return Err(op.invalid(format!(
            "output '{}' {:?} cannot hold the rank-{} shape",
            yt.name,
            yt.shape,
            dims.len()
        )));
    }
    let bytes: Vec<u8> = match yt.dtype {
        DType::I32 => {
            let mut v = Vec::with_capacity(dims.len() * 4);
            for &d in &dims {
                let d = i32::try_from(d).map_err(|_| op.invalid("dimension exceeds INT32"))?;
                v.extend_from_slice(&d.to_le_bytes());
            }
            v
        }
        DType::I64 => dims
            .iter()
            .flat_map(|&d| (d as i64).to_le_bytes())
            .collect(),
        other => {
            return Err(op.invalid(format!(
                "output '{}' is {other}; SHAPE gives INT32 or INT64",
                yt.name
            )));
        }
    };
    yt.data = Some(bytes);
    Ok(Vec::new())
}

/// REDUCE_PROD of a constant integer tensor, folded: the shape arithmetic TensorFlow emits
/// around a `Tensordot` (`Shape -> Gather -> Prod -> Pack -> Reshape`) once SHAPE is a
/// constant. A product of feature maps has no NPU form and no use in the models we know of;
/// it is refused with that said.
fn reduce_prod(im: &mut Importer, op: &RawOp) -> Result<Vec<Op>> {
    let x = input(im, op, 0)?;
    let a = input(im, op, 1)?;
    let y = one_output(im, op)?;
    let xt = &im.graph.tensors[x];
    if !xt.is_const() || !matches!(xt.dtype, DType::I32 | DType::I64) {
        return Err(op.invalid(format!(
            "REDUCE_PROD is only supported on constant INT32/INT64 tensors (shape arithmetic); \
             input '{}' is a {} feature map",
            xt.name, xt.dtype
        )));
    }
    let shape = xt.shape.clone();
    let values = const_ints(im, op, x, "input")?;
    let rank = shape.len();
    let mut reduced = vec![false; rank];
    for v in const_ints(im, op, a, "axis")? {
        reduced[normalize_axis(op, v, rank)?] = true;
    }
    // Row-major walk of the input; each element multiplies into the output element whose
    // index is the input's with the reduced dimensions dropped.
    let out_shape: Vec<usize> = (0..rank)
        .filter(|&d| !reduced[d])
        .map(|d| shape[d])
        .collect();
    let mut out = vec![1i64; out_shape.iter().product::<usize>().max(1)];
    let mut index = vec![0usize; rank];
    for &v in &values {
        let mut o = 0usize;
        for d in (0..rank).filter(|&d| !reduced[d]) {
            o = o * shape[d] + index[d];
        }
        out[o] = out[o].wrapping_mul(v);
        for d in (0..rank).rev() {
            index[d] += 1;
            if index[d] < shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
    let yt = &mut im.graph.tensors[y];
    if yt.elements() != out.len() {
        return Err(op.invalid(format!(
            "output '{}' {:?} does not hold the {} products",
            yt.name,
            yt.shape,
            out.len()
        )));
    }
    yt.data = Some(match yt.dtype {
        DType::I32 => out.iter().flat_map(|&v| (v as i32).to_le_bytes()).collect(),
        DType::I64 => out.iter().flat_map(|&v| v.to_le_bytes()).collect(),
        other => {
            return Err(op.invalid(format!(
                "output '{}' is {other}, expected INT32 or INT64",
                yt.name
            )));
        }
    });
    Ok(Vec::new())
}

/// SLICE: `begin` and `size` (`-1`: to the end), both constant.
fn slice(im: &mut Importer, op: &RawOp) -> Result<Vec<Op>> {
    let x = input(im, op, 0)?;
    let bt = input(im, op, 1)?;
    let st = input(im, op, 2)?;
    let y = one_output(im, op)?;
    let begin = const_ints(im, op, bt, "begin")?;
    let size = const_ints(im, op, st, "size")?;
    let shape = im.graph.tensors[x].shape.clone();
    let rank = shape.len();
    if begin.len() != rank || size.len() != rank {
        return Err(op.invalid(format!(
            "begin {begin:?} and size {size:?} must have one entry per input dimension ({rank})"
        )));
    }
    let mut b_out = Vec::with_capacity(rank);
    let mut s_out = Vec::with_capacity(rank);
    for d in 0..rank {
        let n = shape[d] as i64;
        let (bg, sz) = (begin[d], size[d]);
        let sz = if sz == -1 { n - bg } else { sz };
        if bg < 0 || bg > n || sz < 0 || bg + sz > n {
            return Err(op.invalid(format!(
                "dimension {d}: begin {} and size {} do not fit the input extent {n}",
                begin[d], size[d]
            )));
        }
        b_out.push(if sz == 0 { 0 } else { bg as usize });
        s_out.push(sz as usize);
    }
    Ok(vec![slice_op(im, op, x, y, b_out, vec![1; rank], s_out)?])
}

/// One index specification of STRIDED_SLICE after the masks are read.
#[derive(Clone, Copy)]
enum Spec {
    /// A range over one input dimension.
    Range {
        begin: i64,
        end: i64,
        stride: i64,
        begin_masked: bool,
        end_masked: bool,
    },
    /// One index of an input dimension, dropped from the output.
    Shrink(i64),
    /// A new output dimension of extent 1 (reads no input dimension).
    NewAxis,
    /// The whole of as many input dimensions as the other specifications leave.
    Ellipsis,
}

/// The first index read along a dimension of extent `n` (TFLite's `StartForAxis`).
fn start_for(begin: i64, masked: bool, stride: i64, n: i64) -> i64 {
    let mut v = if masked {
        if stride > 0 {
            i64::MIN / 2
        } else {
            i64::MAX / 2
        }
    } else {
        begin
    };
    if v < 0 {
        v += n;
    }
    if stride > 0 {
        v.clamp(0, n)
    } else {
        v.clamp(-1, n - 1)
    }
}

/// One past the last index read (TFLite's `StopForAxis`); `offset` makes `end` relative to
/// the start.
fn stop_for(end: i64, masked: bool, stride: i64, n: i64, start: i64, offset: bool) -> i64 {
    let mut v = if masked {
        if stride > 0 {
            i64::MAX / 2
        } else {
            i64::MIN / 2
        }
    } else if offset {
        start + end
    } else {
        end
    };
    // An offset end is relative to the (already non-negative) start: no wrap.
    if v < 0 && (masked || !offset) {
        v += n;
    }
    if stride > 0 {
        v.clamp(0, n)
    } else {
        v.clamp(-1, n - 1)
    }
}

/// STRIDED_SLICE with every mask, negative indices and strides, and the offset flag.
fn strided_slice(im: &mut Importer, op: &RawOp) -> Result<Vec<Op>> {
    let x = input(im, op, 0)?;
    let (bt, et, st) = (input(im, op, 1)?, input(im, op, 2)?, input(im, op, 3)?);
    let y = one_output(im, op)?;
    let what = op.what();
    let o = options!(op, StridedSliceOptions);
    let field = |f: Option<planus::Result<i32>>| -> Result<i64> {
        f.map_or(Ok(0), |v| Ok(i64::from(ctx(v, &what)?)))
    };
    let begin_mask = field(o.map(|o| o.begin_mask()))?;
    let end_mask = field(o.map(|o| o.end_mask()))?;
    let ellipsis_mask = field(o.map(|o| o.ellipsis_mask()))?;
    let new_axis_mask = field(o.map(|o| o.new_axis_mask()))?;
    let shrink_mask = field(o.map(|o| o.shrink_axis_mask()))?;
    let offset = match o {
        Some(o) => ctx(o.offset(), &what)?,
        None => false,
    };
    let begin = const_ints(im, op, bt, "begin")?;
    let end = const_ints(im, op, et, "end")?;
    let strides = const_ints(im, op, st, "strides")?;
    let n_spec = begin.len();
    if end.len() != n_spec || strides.len() != n_spec || n_spec > 32 {
        return Err(op.invalid(format!(
            "begin {begin:?}, end {end:?} and strides {strides:?} must have one length (at most 32)"
        )));
    }
    let bit = |mask: i64, i: usize| mask >> i & 1 == 1;
    let mut specs = Vec::with_capacity(n_spec);
    let mut seen_ellipsis = false;
    for i in 0..n_spec {
        let spec = if bit(ellipsis_mask, i) {
            if seen_ellipsis {
                return Err(op.invalid("more than one ellipsis in ellipsis_mask"));
            }
            seen_ellipsis = true;
            Spec::Ellipsis
        } else if bit(new_axis_mask, i) {
            Spec::NewAxis
        } else if bit(shrink_mask, i) {
            Spec::Shrink(begin[i])
        } else {
            if strides[i] == 0 {
                return Err(op.invalid(format!("stride {i} is 0")));
            }
            Spec::Range {
                begin: begin[i],
                end: end[i],
                stride: strides[i],
                begin_masked: bit(begin_mask, i),
                end_masked: bit(end_mask, i),
            }
        };
        specs.push(spec);
    }
    let shape = im.graph.tensors[x].shape.clone();
    let rank = shape.len();
    let consuming = specs
        .iter()
        .filter(|s| matches!(s, Spec::Range { .. } | Spec::Shrink(_)))
        .count();
    if consuming > rank {
        return Err(op.invalid(format!(
            "{consuming} index specifications for a rank-{rank} input"
        )));
    }
    // Without an ellipsis, the dimensions left over are taken whole at the end.
    if !seen_ellipsis {
        specs.push(Spec::Ellipsis);
    }
    let mut b_out = Vec::with_capacity(rank);
    let mut step = Vec::with_capacity(rank);
    let mut size = Vec::with_capacity(rank);
    let mut d = 0usize;
    for s in specs {
        match s {
            Spec::NewAxis => {}
            Spec::Ellipsis => {
                for _ in 0..rank - consuming {
                    b_out.push(0);
                    step.push(1);
                    size.push(shape[d]);
                    d += 1;
                }
            }
            Spec::Shrink(i) => {
                let n = shape[d] as i64;
                let k = if i < 0 { i + n } else { i };
                if !(0..n).contains(&k) {
                    return Err(op.invalid(format!(
                        "shrink index {i} is out of range for dimension {d} of extent {n}"
                    )));
                }
                b_out.push(k as usize);
                step.push(1);
                size.push(1);
                d += 1;
            }
            Spec::Range {
                begin,
                end,
                stride,
                begin_masked,
                end_masked,
            } => {
                let n = shape[d] as i64;
                let start = start_for(begin, begin_masked, stride, n);
                let stop = stop_for(end, end_masked, stride, n, start, offset);
                let count = if stride > 0 {
                    (stop - start + stride - 1).div_euclid(stride)
                } else {
                    (start - stop + (-stride) - 1).div_euclid(-stride)
                }
                .max(0);
                b_out.push(if count == 0 { 0 } else { start as usize });
                step.push(stride);
                size.push(count as usize);
                d += 1;
            }
        }
    }
    Ok(vec![slice_op(im, op, x, y, b_out, step, size)?])
}

/// The constant axis (scalar or one-element) of SPLIT/SPLIT_V.
fn axis_input(im: &mut Importer, op: &RawOp, k: usize, rank: usize) -> Result<usize> {
    let t = input(im, op, k)?;
    let v = const_ints(im, op, t, "axis")?;
    match v.as_slice() {
        [a] => normalize_axis(op, *a, rank),
        _ => Err(op.invalid(format!("axis must hold one value, got {v:?}"))),
    }
}

/// SPLIT (inputs `[axis, x]`, equal parts) and SPLIT_V (inputs `[x, size_splits, axis]`, one
/// size may be `-1`): one Slice per output.
fn split(im: &mut Importer, op: &RawOp, sizes_given: bool) -> Result<Vec<Op>> {
    let (x, axis) = if sizes_given {
        let x = input(im, op, 0)?;
        let rank = im.graph.tensors[x].shape.len();
        (x, axis_input(im, op, 2, rank)?)
    } else {
        let x = input(im, op, 1)?;
        let rank = im.graph.tensors[x].shape.len();
        (x, axis_input(im, op, 0, rank)?)
    };
    let ys = outputs(im, op)?;
    let what = op.what();
    let num_splits = match op.options {
        Some(BuiltinOptionsRef::SplitVOptions(o)) if sizes_given => Some(o.num_splits()),
        Some(BuiltinOptionsRef::SplitOptions(o)) if !sizes_given => Some(o.num_splits()),
        _ => None,
    };
    if let Some(k) = num_splits {
        let k = ctx(k, &what)?;
        if usize::try_from(k).ok() != Some(ys.len()) {
            return Err(op.invalid(format!(
                "num_splits {k} but the operator has {} outputs",
                ys.len()
            )));
        }
    }
    let shape = im.graph.tensors[x].shape.clone();
    let n = shape[axis];
    let parts: Vec<usize> = if sizes_given {
        let st = input(im, op, 1)?;
        let raw = const_ints(im, op, st, "size_splits")?;
        if raw.len() != ys.len() {
            return Err(op.invalid(format!(
                "{} size_splits for {} outputs",
                raw.len(),
                ys.len()
            )));
        }
        let unknown = raw.iter().filter(|&&v| v == -1).count();
        let known: i64 = raw.iter().filter(|&&v| v != -1).sum();
        if unknown > 1 || raw.iter().any(|&v| v < -1) || known > n as i64 {
            return Err(op.invalid(format!(
                "size_splits {raw:?} do not split an extent of {n} (at most one -1)"
            )));
        }
        if unknown == 0 && known != n as i64 {
            return Err(op.invalid(format!(
                "size_splits {raw:?} add up to {known}, the axis has {n}"
            )));
        }
        raw.iter()
            .map(|&v| {
                if v == -1 {
                    (n as i64 - known) as usize
                } else {
                    v as usize
                }
            })
            .collect()
    } else {
        let k = ys.len();
        if !n.is_multiple_of(k) {
            return Err(op.invalid(format!(
                "an extent of {n} does not split into {k} equal parts"
            )));
        }
        vec![n / k; k]
    };
    let rank = shape.len();
    let mut ops = Vec::with_capacity(ys.len());
    let mut at = 0usize;
    for (&y, &part) in ys.iter().zip(&parts) {
        let mut begin = vec![0; rank];
        let mut size = shape.clone();
        begin[axis] = if part == 0 { 0 } else { at };
        size[axis] = part;
        ops.push(slice_op(im, op, x, y, begin, vec![1; rank], size)?);
        at += part;
    }
    Ok(ops)
}

/// UNPACK: one Slice of extent 1 along `axis` per output (the axis dropped from its shape).
fn unpack(im: &mut Importer, op: &RawOp) -> Result<Vec<Op>> {
    let x = input(im, op, 0)?;
    let ys = outputs(im, op)?;
    let shape = im.graph.tensors[x].shape.clone();
    let rank = shape.len();
    let what = op.what();
    let (axis, num) = match options!(op, UnpackOptions) {
        Some(o) => (i64::from(ctx(o.axis(), &what)?), Some(ctx(o.num(), &what)?)),
        None => (0, None),
    };
    if let Some(num) = num
        && usize::try_from(num).ok() != Some(ys.len())
    {
        return Err(op.invalid(format!(
            "num {num} but the operator has {} outputs",
            ys.len()
        )));
    }
    let axis = normalize_axis(op, axis, rank)?;
    if ys.len() != shape[axis] {
        return Err(op.invalid(format!(
            "{} outputs for an axis of extent {}",
            ys.len(),
            shape[axis]
        )));
    }
    let mut ops = Vec::with_capacity(ys.len());
    for (k, &y) in ys.iter().enumerate() {
        let mut begin = vec![0; rank];
        let mut size = shape.clone();
        begin[axis] = k;
        size[axis] = 1;
        ops.push(slice_op(im, op, x, y, begin, vec![1; rank], size)?);
    }
    Ok(ops)
}

/// PACK: each input gets an axis of extent 1 (a Reshape), then one Concat along it.
fn pack(im: &mut Importer, op: &RawOp) -> Result<Vec<Op>> {
    let y = one_output(im, op)?;
    let ys = im.graph.tensors[y].shape.clone();
    let what = op.what();
    let (axis, count) = match options!(op, PackOptions) {
        Some(o) => (
            i64::from(ctx(o.axis(), &what)?),
            Some(ctx(o.values_count(), &what)?),
        ),
        None => (0, None),
    };
    if let Some(c) = count
        && usize::try_from(c).ok() != Some(op.inputs.len())
    {
        return Err(op.invalid(format!(
            "values_count {c} but the operator has {} inputs",
            op.inputs.len()
        )));
    }
    let axis = normalize_axis(op, axis, ys.len())?;
    if op.inputs.is_empty() || ys[axis] != op.inputs.len() {
        return Err(op.invalid(format!(
            "{} inputs but the output {ys:?} has {} along axis {axis}",
            op.inputs.len(),
            ys[axis]
        )));
    }
    let mut ops = Vec::new();
    let mut parts = Vec::with_capacity(op.inputs.len());
    for k in 0..op.inputs.len() {
        let x = input(im, op, k)?;
        let xt = im.graph.tensors[x].clone();
        // TFLite's PACK refuses inputs quantized unlike the output (`pack.cc` Prepare).
        let yq = &im.graph.tensors[y].quant;
        if xt.dtype != DType::I32 && xt.dtype != DType::I64 && xt.quant != *yq {
            return Err(op.invalid(format!(
                "input '{}' is quantized {:?} but the output {:?} (PACK moves values unchanged)",
                xt.name, xt.quant, yq
            )));
        }
        let mut want = xt.shape.clone();
        want.insert(axis.min(want.len()), 1);
        if want
            != ys
                .iter()
                .enumerate()
                .map(|(d, &v)| if d == axis { 1 } else { v })
                .collect::<Vec<_>>()
        {
            return Err(op.invalid(format!(
                "input '{}' {:?} does not stack into output {ys:?} along axis {axis}",
                xt.name, xt.shape
            )));
        }
        let name = im.fresh_name(&format!("{}/pack_in{k}", im.graph.tensors[y].name));
        let e = im.graph.add_tensor(Tensor {
            name: name.clone(),
            shape: want,
            dtype: xt.dtype,
            quant: xt.quant.clone(),
            data: None,
        });
        ops.push(Op {
            name,
            kind: OpKind::Reshape,
            inputs: vec![x],
            outputs: vec![e],
        });
        parts.push(e);
    }
    ops.push(Op {
        name: im.graph.tensors[y].name.clone(),
        kind: OpKind::Concat {
            axis,
            activation: crate::ir::Activation::None,
        },
        inputs: parts,
        outputs: vec![y],
    });
    Ok(ops)
}

/// EXPAND_DIMS and SQUEEZE: the output tensor carries the new shape.
fn reshape(im: &mut Importer, op: &RawOp) -> Result<Vec<Op>> {
    let x = input(im, op, 0)?;
    let y = one_output(im, op)?;
    let (n_in, n_out) = (
        im.graph.tensors[x].elements(),
        im.graph.tensors[y].elements(),
    );
    if n_in != n_out {
        return Err(op.invalid(format!("reshapes {n_in} elements into a tensor of {n_out}")));
    }
    Ok(vec![Op {
        name: im.graph.tensors[y].name.clone(),
        kind: OpKind::Reshape,
        inputs: vec![x],
        outputs: vec![y],
    }])
}
