//! Constant folding of shape arithmetic: `Shape`, `Gather`, `Concat`, `Cast`, `Reshape`, ...
//! evaluated at import time when their inputs are constants (or, for `Shape`, known shapes).

use std::rc::Rc;

use super::builder::{Builder, Val};
use super::constant::{Const, Elems, MAX_FOLD_ELEMENTS};
use super::layout::element_count;
use super::model::Node;
use super::ops::elementwise::broadcast;
use super::ops::shape::transpose_perm;
use super::proto::data_type;
use super::qdq::normalize_axis;
use crate::error::Result;

/// Operators folded when their inputs are constant.
pub(crate) const FOLDABLE: &[&str] = &[
    "Add",
    "Cast",
    "Concat",
    "Constant",
    "ConstantOfShape",
    "Div",
    "Expand",
    "Flatten",
    "Gather",
    "Max",
    "Min",
    "Mul",
    "Range",
    "Reshape",
    "Shape",
    "Size",
    "Slice",
    "Squeeze",
    "Sub",
    "Transpose",
    "Unsqueeze",
];

/// Operators the importer knows only as constant folding.
const FOLD_ONLY: &[&str] = &[
    "Cast",
    "Constant",
    "ConstantOfShape",
    "Div",
    "Expand",
    "Range",
    "Shape",
    "Size",
];

/// Flat source index, in `in_dims`, of every element of `out_dims` under numpy broadcasting.
fn broadcast_indices(out_dims: &[usize], in_dims: &[usize]) -> Option<Vec<usize>> {
    let n = element_count(out_dims)?;
    if n > MAX_FOLD_ELEMENTS || in_dims.len() > out_dims.len() {
        return None;
    }
    let r = out_dims.len();
    let pad = r - in_dims.len();
    // Stride of each output axis in the input (0 where the input broadcasts).
    let mut strides = vec![0usize; r];
    let mut s = 1usize;
    for ax in (0..r).rev() {
        if ax >= pad {
            let d = in_dims[ax - pad];
            strides[ax] = if d == 1 { 0 } else { s };
            s = s.checked_mul(d)?;
        }
    }
    let mut idx = Vec::with_capacity(n);
    let mut counter = vec![0usize; r];
    let mut offset = 0usize;
    for _ in 0..n {
        idx.push(offset);
        for ax in (0..r).rev() {
            counter[ax] += 1;
            offset += strides[ax];
            if counter[ax] < out_dims[ax] {
                break;
            }
            offset -= strides[ax] * counter[ax];
            counter[ax] = 0;
        }
    }
    Some(idx)
}

fn too_big(n: &Node, dims: &[usize]) -> crate::error::Error {
    n.err(format!(
        "folding gives a constant of shape {dims:?}, more than {MAX_FOLD_ELEMENTS} elements"
    ))
}

/// Checks a folded shape against the size limit.
fn check_size(n: &Node, dims: &[usize]) -> Result<usize> {
    element_count(dims)
        .filter(|&c| c <= MAX_FOLD_ELEMENTS)
        .ok_or_else(|| too_big(n, dims))
}

impl Builder {
    /// Folds `n` if it can be evaluated now. `Ok(false)`: not constant, map it as an operator.
    pub(crate) fn try_fold(&mut self, n: &Node) -> Result<bool> {
        let op = n.op_type.as_str();
        let folded = match op {
            "Constant" => self.fold_constant(n)?,
            "Shape" | "Size" => {
                n.max_inputs(1)?;
                let shape = self.shape_of(&self.input(n, 0)?);
                let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
                if op == "Size" {
                    let c = check_size(n, &shape)?;
                    Const {
                        dims: vec![],
                        elems: Elems::I64(vec![c as i64]),
                    }
                } else {
                    let r = dims.len() as i64;
                    let clampi = |v: i64| {
                        let v = if v < 0 { v.saturating_add(r) } else { v };
                        v.clamp(0, r) as usize
                    };
                    let start = clampi(n.attr_i_or("start", 0)?);
                    let end = clampi(n.attr_i_or("end", r)?);
                    Const::i64_vec(dims.get(start..end.max(start)).unwrap_or(&[]).to_vec())
                }
            }
            _ => {
                // Every present input must be a constant.
                let mut consts = Vec::with_capacity(n.inputs.len());
                for (i, name) in n.inputs.iter().enumerate() {
                    if name.is_empty() {
                        consts.push(None);
                        continue;
                    }
                    match self.val(n, name)? {
                        Val::Const(c) => consts.push(Some(c)),
                        other => {
                            if FOLD_ONLY.contains(&op) {
                                return Err(n.err(format!(
                                    "{op} is supported only on constants (shape arithmetic), but input {i} ('{name}') is {}",
                                    other.kind_name()
                                )));
                            }
                            return Ok(false);
                        }
                    }
                }
                self.fold_op(n, &consts)?
            }
        };
        self.charge(n, folded.len())?;
        self.bind_output(n, Val::Const(Rc::new(folded)))?;
        Ok(true)
    }

    fn fold_constant(&self, n: &Node) -> Result<Const> {
        n.max_inputs(0)?;
        if let Some(t) = n.attr_t("value")? {
            return super::constant::decode(t, &n.name);
        }
        if let Some(f) = n.attr_f("value_float")? {
            return Ok(Const {
                dims: vec![],
                elems: Elems::F32(vec![f]),
            });
        }
        if let Some(i) = n.attr_i("value_int")? {
            return Ok(Const {
                dims: vec![],
                elems: Elems::I64(vec![i]),
            });
        }
        if let Some(v) = n.attr_floats("value_floats")? {
            return Ok(Const {
                dims: vec![v.len()],
                elems: Elems::F32(v),
            });
        }
        if let Some(v) = n.attr_ints("value_ints")? {
            return Ok(Const::i64_vec(v));
        }
        Err(n.err("has no supported value attribute (value, value_float(s), value_int(s))"))
    }

    fn fold_op(&self, n: &Node, c: &[Option<Rc<Const>>]) -> Result<Const> {
        let get = |i: usize| -> Result<&Const> {
            c.get(i)
                .and_then(|x| x.as_deref())
                .ok_or_else(|| n.err(format!("input {i} is missing")))
        };
        let ints = |i: usize| -> Result<Vec<i64>> {
            get(i)?
                .elems
                .to_i64()
                .ok_or_else(|| n.err(format!("input {i} must hold integers")))
        };
        let op = n.op_type.as_str();
        let out = match op {
            "Cast" => {
                let to = n
                    .attr_i("to")?
                    .ok_or_else(|| n.err("attribute 'to' is missing"))?;
                let x = get(0)?;
                let elems = i32::try_from(to)
                    .ok()
                    .and_then(|t| x.elems.cast(t))
                    .ok_or_else(|| {
                        n.err(format!(
                            "cast to {} is not supported",
                            data_type::name(to as i32)
                        ))
                    })?;
                Const::new(x.dims.clone(), elems)
            }
            "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" => {
                let x = get(0)?;
                let dims = self.reshape_target(n, &x.dims)?;
                Const::new(dims, x.elems.clone())
            }
            "Transpose" => {
                let x = get(0)?;
                let p = transpose_perm(n, x.dims.len())?;
                x.transpose(&p)
            }
            "Gather" => fold_gather(n, get(0)?, get(1)?, &ints(1)?)?,
            "Concat" => {
                let parts: Vec<&Const> = (0..c.len()).map(get).collect::<Result<_>>()?;
                fold_concat(n, &parts)?
            }
            "Slice" => self.fold_slice(n, get(0)?, &ints(1)?, &ints(2)?, c, &ints)?,
            "Add" | "Sub" | "Mul" | "Div" | "Max" | "Min" => {
                if c.len() != 2 {
                    return Err(n.err("only two operands are supported"));
                }
                fold_arith(n, op, get(0)?, get(1)?)?
            }
            "ConstantOfShape" => {
                let dims: Vec<usize> = ints(0)?
                    .iter()
                    .map(|&d| {
                        usize::try_from(d).map_err(|_| n.err(format!("dimension {d} is negative")))
                    })
                    .collect::<Result<_>>()?;
                let count = check_size(n, &dims)?;
                let value = match n.attr_t("value")? {
                    Some(t) => super::constant::decode(t, &n.name)?,
                    None => Const {
                        dims: vec![1],
                        elems: Elems::F32(vec![0.0]),
                    },
                };
                if value.len() != 1 {
                    return Err(n.err("value must hold one element"));
                }
                value
                    .elems
                    .take(&vec![0; count])
                    .and_then(|e| Const::new(dims, e))
            }
            "Expand" => {
                let x = get(0)?;
                let shape: Vec<usize> = ints(1)?
                    .iter()
                    .map(|&d| {
                        usize::try_from(d).map_err(|_| n.err(format!("dimension {d} is negative")))
                    })
                    .collect::<Result<_>>()?;
                let dims = broadcast(&x.dims, &shape)
                    .ok_or_else(|| n.err(format!("cannot expand {:?} to {shape:?}", x.dims)))?;
                check_size(n, &dims)?;
                broadcast_indices(&dims, &x.dims)
                    .and_then(|idx| x.elems.take(&idx))
                    .and_then(|e| Const::new(dims, e))
            }
            "Range" => fold_range(n, get(0)?, get(1)?, get(2)?)?,
            _ => return Err(self.unsupported(n)),
        };
        out.ok_or_else(|| n.err("folding its constant inputs failed (inconsistent shapes)"))
    }

    fn fold_slice(
        &self,
        n: &Node,
        x: &Const,
        starts: &[i64],
        ends: &[i64],
        c: &[Option<Rc<Const>>],
        ints: &dyn Fn(usize) -> Result<Vec<i64>>,
    ) -> Result<Option<Const>> {
        let axes = match c.get(3).and_then(|x| x.as_ref()) {
            Some(_) => Some(ints(3)?),
            None => None,
        };
        let steps = match c.get(4).and_then(|x| x.as_ref()) {
            Some(_) => Some(ints(4)?),
            None => None,
        };
        let ranges = super::ops::slice::slice_ranges(
            n,
            &x.dims,
            starts,
            ends,
            axes.as_deref(),
            steps.as_deref(),
        )?;
        let dims: Vec<usize> = ranges.iter().map(|r| r.2).collect();
        if check_size(n, &dims)? == 0 {
            return Ok(Const::new(dims, x.elems.empty_like()));
        }
        let mut idx = vec![0usize];
        for (ax, &(start, step, count)) in ranges.iter().enumerate() {
            let inner: usize = x.dims[ax + 1..].iter().product();
            let pick: Vec<usize> = (0..count as i64)
                .map(|i| (start + i * step) as usize)
                .collect();
            idx = idx
                .iter()
                .flat_map(|&base| pick.iter().map(move |&p| base + p * inner))
                .collect();
        }
        Ok(x.elems.take(&idx).and_then(|e| Const::new(dims, e)))
    }
}

/// `Gather` of constants: the slices of `x` at `idx` (negative from the end) along `axis`.
fn fold_gather(n: &Node, x: &Const, idx_c: &Const, idx: &[i64]) -> Result<Option<Const>> {
    let r = x.dims.len();
    let axis =
        normalize_axis(n.attr_i_or("axis", 0)?, r).ok_or_else(|| n.err("axis is out of range"))?;
    let len = x.dims[axis];
    let mut dims = x.dims[..axis].to_vec();
    dims.extend_from_slice(&idx_c.dims);
    dims.extend_from_slice(&x.dims[axis + 1..]);
    if check_size(n, &dims)? == 0 {
        return Const::new(dims, x.elems.empty_like())
            .map(Some)
            .ok_or_else(|| n.err("bad constant"));
    }
    let outer: usize = x.dims[..axis].iter().product();
    let inner: usize = x.dims[axis + 1..].iter().product();
    let mut src = Vec::new();
    for o in 0..outer {
        for &k in idx {
            let k = if k < 0 {
                k.saturating_add(len as i64)
            } else {
                k
            };
            if k < 0 || k as usize >= len {
                return Err(n.err(format!("index {k} is out of range for axis of size {len}")));
            }
            let base = (o * len + k as usize) * inner;
            src.extend(base..base + inner);
        }
    }
    Ok(x.elems.take(&src).and_then(|e| Const::new(dims, e)))
}

/// `Concat` of constants along `axis`.
fn fold_concat(n: &Node, parts: &[&Const]) -> Result<Option<Const>> {
    let first = parts.first().ok_or_else(|| n.err("has no inputs"))?;
    let r = first.dims.len();
    let axis = normalize_axis(
        n.attr_i("axis")?.ok_or_else(|| n.err("axis is missing"))?,
        r,
    )
    .ok_or_else(|| n.err("axis is out of range"))?;
    let mut dims = first.dims.clone();
    dims[axis] = 0;
    for p in parts {
        let fits = p.dims.len() == r && (0..r).all(|k| k == axis || p.dims[k] == first.dims[k]);
        if !fits {
            return Err(n.err("constant inputs have different shapes"));
        }
        dims[axis] = dims[axis].saturating_add(p.dims[axis]);
    }
    if check_size(n, &dims)? == 0 {
        return Const::new(dims, first.elems.empty_like())
            .map(Some)
            .ok_or_else(|| n.err("bad constant"));
    }
    let outer: usize = first.dims[..axis].iter().product();
    let mut elems = first.elems.empty_like();
    for o in 0..outer {
        for p in parts {
            let chunk = p.len() / outer.max(1);
            let piece = p
                .elems
                .take(&(o * chunk..(o + 1) * chunk).collect::<Vec<_>>())
                .ok_or_else(|| n.err("bad constant"))?;
            if !elems.extend(&piece) {
                return Err(n.err("constant inputs have different types"));
            }
        }
    }
    Ok(Const::new(dims, elems))
}
fn fold_arith(n: &Node, op: &str, a: &Const, b: &Const) -> Result<Option<Const>> {
    if a.elems.onnx_type() != b.elems.onnx_type() {
        return Err(n.err(format!(
            "operand types differ ({} vs {})",
            a.elems.type_name(),
            b.elems.type_name()
        )));
    }
    let dims = broadcast(&a.dims, &b.dims).ok_or_else(|| {
        n.err(format!(
            "shapes {:?} and {:?} do not broadcast",
            a.dims, b.dims
        ))
    })?;
    check_size(n, &dims)?;
    let ia = broadcast_indices(&dims, &a.dims).ok_or_else(|| too_big(n, &dims))?;
    let ib = broadcast_indices(&dims, &b.dims).ok_or_else(|| too_big(n, &dims))?;
    let elems = if let (Some(x), Some(y)) = (a.elems.to_i64(), b.elems.to_i64()) {
        let mut out = Vec::with_capacity(ia.len());
        for (&i, &j) in ia.iter().zip(&ib) {
            let (p, q) = (x[i], y[j]);
            out.push(match op {
                "Add" => p.wrapping_add(q),
                "Sub" => p.wrapping_sub(q),
                "Mul" => p.wrapping_mul(q),
                "Div" => p
                    .checked_div(q)
                    .ok_or_else(|| n.err("integer division by zero"))?,
                "Max" => p.max(q),
                _ => p.min(q),
            });
        }
        Elems::I64(out).cast(a.elems.onnx_type())
    } else {
        let (x, y) = (a.elems.to_f64(), b.elems.to_f64());
        let out: Vec<f64> = ia
            .iter()
            .zip(&ib)
            .map(|(&i, &j)| {
                let (p, q) = (x[i], y[j]);
                match op {
                    "Add" => p + q,
                    "Sub" => p - q,
                    "Mul" => p * q,
                    "Div" => p / q,
                    "Max" => p.max(q),
                    _ => p.min(q),
                }
            })
            .collect();
        Some(Elems::F32(out.into_iter().map(|v| v as f32).collect()))
    };
    Ok(elems.and_then(|e| Const::new(dims, e)))
}

fn fold_range(n: &Node, start: &Const, limit: &Const, delta: &Const) -> Result<Option<Const>> {
    let (Some(s), Some(l), Some(d)) = (start.scalar_f64(), limit.scalar_f64(), delta.scalar_f64())
    else {
        return Err(n.err("start, limit and delta must be scalars"));
    };
    if d == 0.0 || !d.is_finite() || !s.is_finite() || !l.is_finite() {
        return Err(n.err("delta must be a non-zero finite number"));
    }
    let count = ((l - s) / d).ceil().max(0.0);
    if count > MAX_FOLD_ELEMENTS as f64 {
        return Err(too_big(n, &[count as usize]));
    }
    let count = count as usize;
    let values: Vec<f64> = (0..count).map(|i| s + i as f64 * d).collect();
    let elems = match start.elems {
        Elems::F32(_) => Some(Elems::F32(values.iter().map(|&v| v as f32).collect())),
        _ => Elems::I64(values.iter().map(|&v| v as i64).collect()).cast(start.elems.onnx_type()),
    };
    Ok(elems.and_then(|e| Const::new(vec![count], e)))
}
