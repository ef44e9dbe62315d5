//! Layout operators on activations: `Reshape`, `Flatten`, `Squeeze`, `Unsqueeze`, `Transpose`,
//! `Concat`, `Pad`; and the output-shape rules that constant folding shares.

use std::rc::Rc;

use super::super::builder::{Act, Builder, QConst, Val};
use super::super::layout;
use super::super::layout::element_count;
use super::super::model::Node;
use super::super::qdq::{self, normalize_axis};
use super::weights::const_layout;
use crate::error::Result;
use crate::ir::{Activation, OpKind};

/// Output shape of `Reshape(shape = spec)` (0 copies a dimension unless `allowzero`, -1 infers).
pub(crate) fn reshape_shape(
    n: &Node,
    input: &[usize],
    spec: &[i64],
    allowzero: bool,
) -> Result<Vec<usize>> {
    let total = element_count(input).ok_or_else(|| n.err("input size overflows"))?;
    let mut out = Vec::with_capacity(spec.len());
    let mut infer = None;
    for (i, &d) in spec.iter().enumerate() {
        match d {
            -1 if infer.is_none() => {
                infer = Some(i);
                out.push(1);
            }
            0 if !allowzero => out.push(*input.get(i).ok_or_else(|| {
                n.err(format!(
                    "shape {spec:?}: 0 at {i} copies a dimension the input lacks"
                ))
            })?),
            d if d >= 0 => out.push(usize::try_from(d).map_err(|_| n.err("dimension too large"))?),
            _ => return Err(n.err(format!("shape {spec:?} is not valid"))),
        }
    }
    let known = element_count(&out).ok_or_else(|| n.err(format!("shape {spec:?} overflows")))?;
    if let Some(i) = infer {
        if known == 0 || total % known != 0 {
            return Err(n.err(format!("cannot reshape {input:?} to {spec:?}")));
        }
        out[i] = total / known;
    } else if known != total {
        return Err(n.err(format!(
            "cannot reshape {input:?} ({total} elements) to {out:?} ({known} elements)"
        )));
    }
    Ok(out)
}

/// Output shape of `Flatten(axis)`.
pub(crate) fn flatten_shape(n: &Node, input: &[usize], axis: i64) -> Result<Vec<usize>> {
    let r = input.len();
    // Flatten's axis may equal the rank.
    let a = normalize_axis(axis, r + 1)
        .ok_or_else(|| n.err(format!("axis {axis} is out of range for rank {r}")))?;
    let outer = element_count(&input[..a]).ok_or_else(|| n.err("size overflows"))?;
    let inner = element_count(&input[a..]).ok_or_else(|| n.err("size overflows"))?;
    Ok(vec![outer, inner])
}

/// Output shape of `Squeeze(axes)` (all size-1 dimensions when `axes` is `None`).
pub(crate) fn squeeze_shape(n: &Node, input: &[usize], axes: Option<&[i64]>) -> Result<Vec<usize>> {
    let r = input.len();
    let drop: Vec<usize> = match axes {
        None => (0..r).filter(|&i| input[i] == 1).collect(),
        Some(ax) => ax
            .iter()
            .map(|&a| {
                let i = normalize_axis(a, r)
                    .ok_or_else(|| n.err(format!("axis {a} is out of range")))?;
                if input[i] != 1 {
                    return Err(n.err(format!("cannot squeeze axis {a} of size {}", input[i])));
                }
                Ok(i)
            })
            .collect::<Result<_>>()?,
    };
    Ok(input
        .iter()
        .enumerate()
        .filter(|(i, _)| !drop.contains(i))
        .map(|(_, &d)| d)
        .collect())
}

/// Output shape of `Unsqueeze(axes)`.
pub(crate) fn unsqueeze_shape(n: &Node, input: &[usize], axes: &[i64]) -> Result<Vec<usize>> {
    let r = input
        .len()
        .checked_add(axes.len())
        .filter(|&r| r <= 64)
        .ok_or_else(|| n.err("too many dimensions"))?;
    let mut new = vec![false; r];
    for &a in axes {
        let i = normalize_axis(a, r).ok_or_else(|| n.err(format!("axis {a} is out of range")))?;
        if std::mem::replace(&mut new[i], true) {
            return Err(n.err(format!("axis {a} is given twice")));
        }
    }
    let mut src = input.iter();
    Ok(new
        .iter()
        .map(|&is_new| {
            if is_new {
                1
            } else {
                src.next().copied().unwrap_or(1)
            }
        })
        .collect())
}

/// The `perm` attribute of a `Transpose` over rank `r` (reversed axes by default).
pub(crate) fn transpose_perm(n: &Node, r: usize) -> Result<Vec<usize>> {
    match n.attr_ints("perm")? {
        None => Ok((0..r).rev().collect()),
        Some(p) => {
            let p: Vec<usize> = p
                .iter()
                .map(|&x| usize::try_from(x).unwrap_or(usize::MAX))
                .collect();
            if !layout::is_perm(&p, r) {
                return Err(n.err(format!("perm {p:?} is not a permutation of {r} axes")));
            }
            Ok(p)
        }
    }
}

impl Builder {
    /// The ONNX output shape of a Reshape / Flatten / Squeeze / Unsqueeze node.
    pub(crate) fn reshape_target(&self, n: &Node, input: &[usize]) -> Result<Vec<usize>> {
        match n.op_type.as_str() {
            "Reshape" => {
                n.max_inputs(2)?;
                let spec = self.ints_input(n, 1)?;
                reshape_shape(n, input, &spec, n.attr_i_or("allowzero", 0)? != 0)
            }
            "Flatten" => {
                n.max_inputs(1)?;
                flatten_shape(n, input, n.attr_i_or("axis", 1)?)
            }
            "Squeeze" => {
                n.max_inputs(2)?;
                let axes = match n.input(1) {
                    Some(_) => Some(self.ints_input(n, 1)?),
                    None => None,
                };
                squeeze_shape(n, input, axes.as_deref())
            }
            _ => {
                n.max_inputs(2)?;
                unsqueeze_shape(n, input, &self.ints_input(n, 1)?)
            }
        }
    }

    /// Reshape / Flatten / Squeeze / Unsqueeze of an activation or a quantized constant.
    pub(crate) fn reshape(&mut self, n: &Node) -> Result<()> {
        let x = self.input(n, 0)?;
        let in_shape = self.shape_of(&x);
        let out_shape = self.reshape_target(n, &in_shape)?;
        let out_name = n.output()?.to_string();
        let v = match x {
            Val::Int(a) => Val::Int(self.reshaped_act(&a, &out_shape, &out_name, n)?),
            Val::Deq(a) => Val::Deq(self.reshaped_act(&a, &out_shape, &out_name, n)?),
            Val::Float(a) => Val::Float(self.reshaped_act(&a, &out_shape, &out_name, n)?),
            Val::DeqConst(qc) => {
                self.charge(n, qc.c.len())?;
                Val::DeqConst(Rc::new(reshape_qconst(n, &qc, out_shape)?))
            }
            other => return Err(self.not_quantized(n, 0, &other)),
        };
        self.bind_output(n, v)
    }

    fn reshaped_act(&mut self, a: &Act, shape: &[usize], name: &str, n: &Node) -> Result<Act> {
        let id = self.reshaped(a, shape, name, n)?;
        Ok(Act {
            id,
            perm: layout::identity(shape.len()),
        })
    }

    /// `Transpose`: only the layout of the binding changes; nothing is emitted.
    pub(crate) fn transpose(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(1)?;
        let x = self.input(n, 0)?;
        let r = self.shape_of(&x).len();
        let p = transpose_perm(n, r)?;
        let moved = |a: &Act| Act {
            id: a.id,
            perm: layout::compose(&a.perm, &p).unwrap_or_default(),
        };
        let v = match x {
            Val::Int(a) => Val::Int(moved(&a)),
            Val::Deq(a) => Val::Deq(moved(&a)),
            Val::Float(a) => Val::Float(moved(&a)),
            Val::Pending(pe) => {
                let mut q = (*pe).clone();
                q.perm = layout::compose(&pe.perm, &p).unwrap_or_default();
                Val::Pending(Rc::new(q))
            }
            Val::DeqConst(qc) => {
                let c =
                    qc.c.transpose(&p)
                        .ok_or_else(|| n.err("cannot transpose the constant"))?;
                let mut q = qc.q.clone();
                q.axis = q.axis.and_then(|a| p.iter().position(|&x| x == a));
                self.charge(n, c.len())?;
                Val::DeqConst(Rc::new(QConst {
                    name: qc.name.clone(),
                    c: Rc::new(c),
                    q,
                }))
            }
            Val::Const(c) => Val::Const(Rc::new(
                c.transpose(&p)
                    .ok_or_else(|| n.err("cannot transpose the constant"))?,
            )),
        };
        self.bind_output(n, v)
    }

    /// `Concat` of quantized activations (requantizing) or of integer tensors (copying).
    pub(crate) fn concat(&mut self, n: &Node) -> Result<()> {
        let axis = n.attr_i("axis")?.ok_or_else(|| n.err("axis is missing"))?;
        if n.inputs.is_empty() {
            return Err(n.err("has no inputs"));
        }
        let vals: Vec<Val> = (0..n.inputs.len())
            .map(|i| self.input(n, i))
            .collect::<Result<_>>()?;
        let integer = vals.iter().any(|v| matches!(v, Val::Int(_)));
        let rank = self.shape_of(&vals[0]).len();
        let axis = normalize_axis(axis, rank)
            .ok_or_else(|| n.err(format!("axis {axis} is out of range for rank {rank}")))?;
        // The layout of the first activation operand is the output's.
        let perm = vals
            .iter()
            .find_map(|v| match v {
                Val::Int(a) | Val::Deq(a) => Some(a.perm.clone()),
                _ => None,
            })
            .ok_or_else(|| n.err("no operand is an activation"))?;
        if perm.len() != rank {
            return Err(n.err("operands have different ranks"));
        }
        let mut ids = Vec::with_capacity(vals.len());
        for (i, v) in vals.iter().enumerate() {
            let id = match (v, integer) {
                (Val::Int(a), true) | (Val::Deq(a), false) => {
                    if a.perm.len() != rank {
                        return Err(n.err(format!("input {i} has a different rank")));
                    }
                    self.relayout(a, &perm)?.id
                }
                (Val::DeqConst(qc), false) => {
                    if qc.c.dims.len() != rank {
                        return Err(n.err(format!("input {i} has a different rank")));
                    }
                    let key = n.req_input(i)?.to_string();
                    self.const_tensor(n, &key, qc, &const_layout(&perm))?
                }
                (other, _) => return Err(self.not_quantized(n, i, other)),
            };
            ids.push(id);
        }
        let ir_axis = perm[axis];
        let mut shape = self.tensor(ids[0]).shape.clone();
        shape[ir_axis] = 0;
        for &id in &ids {
            let s = &self.tensor(id).shape;
            let fits = s.len() == shape.len()
                && s.iter()
                    .enumerate()
                    .all(|(k, &d)| k == ir_axis || d == shape[k]);
            if !fits {
                return Err(n.err(format!(
                    "input shapes do not agree outside axis {axis}: {:?} vs {:?}",
                    s, shape
                )));
            }
            shape[ir_axis] = shape[ir_axis]
                .checked_add(s[ir_axis])
                .ok_or_else(|| n.err("size overflows"))?;
        }
        let kind = OpKind::Concat {
            axis: ir_axis,
            activation: Activation::None,
        };
        if integer {
            let first = ids[0];
            for &id in &ids[1..] {
                self.same_quant(first, id, n)?;
            }
            return self.emit_integer(n, kind, ids, shape, perm, first);
        }
        let p = self.pending(n, kind, ids, shape, perm);
        self.bind_output(n, Val::Pending(Rc::new(p)))
    }

    /// `Pad` in constant mode.
    pub(crate) fn pad(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(4)?;
        let mode = n.attr_s("mode")?.unwrap_or_else(|| "constant".into());
        let mirror = match mode.as_str() {
            "constant" => None,
            "reflect" => Some(crate::ir::PadMode::Reflect),
            "edge" => Some(crate::ir::PadMode::Edge),
            _ => return Err(n.err(format!("mode '{mode}' is not supported"))),
        };
        let x = self.input(n, 0)?;
        let rank = self.shape_of(&x).len();
        let raw = self.ints_input(n, 1)?;
        let axes: Vec<usize> = match n.input(3) {
            Some(_) => self
                .ints_input(n, 3)?
                .iter()
                .map(|&a| {
                    normalize_axis(a, rank)
                        .ok_or_else(|| n.err(format!("axis {a} is out of range")))
                })
                .collect::<Result<_>>()?,
            None => (0..rank).collect(),
        };
        if raw.len() != 2 * axes.len() {
            return Err(n.err(format!("{} pads for {} axes", raw.len(), axes.len())));
        }
        let mut pads = vec![(0usize, 0usize); rank];
        for (k, &a) in axes.iter().enumerate() {
            let (b, e) = (raw[k], raw[k + axes.len()]);
            if b < 0 || e < 0 {
                return Err(n.err("negative pads (cropping) are not supported"));
            }
            pads[a] = (b as usize, e as usize);
        }
        if let Some(mode) = mirror {
            let perm = match &x {
                Val::Int(a) | Val::Deq(a) => a.perm.clone(),
                other => return Err(self.not_quantized(n, 0, other)),
            };
            let mut ir_pads = vec![(0usize, 0usize); rank];
            for (i, &p) in pads.iter().enumerate() {
                ir_pads[perm[i]] = p;
            }
            return self.mirror_pad(n, mode, ir_pads);
        }
        let (a, integer) = match &x {
            Val::Int(a) => (a.clone(), true),
            Val::Deq(a) => (a.clone(), false),
            other => return Err(self.not_quantized(n, 0, other)),
        };
        let mut ir_pads = vec![(0usize, 0usize); rank];
        for (i, &p) in pads.iter().enumerate() {
            ir_pads[a.perm[i]] = p;
        }
        let mut shape = self.tensor(a.id).shape.clone();
        for (d, &(b, e)) in shape.iter_mut().zip(&ir_pads) {
            *d = d
                .checked_add(b)
                .and_then(|v| v.checked_add(e))
                .ok_or_else(|| n.err("padded size overflows"))?;
        }
        let fill = match n.input(2) {
            None => None,
            Some(name) => Some(
                match self.val(n, name)? {
                    Val::Const(c) => c.scalar_f64(),
                    Val::DeqConst(qc) => qdq::dequantize_values(&qc).first().copied(),
                    _ => None,
                }
                .ok_or_else(|| n.err("constant_value must be a scalar constant"))?,
            ),
        };
        if integer {
            let v = fill.unwrap_or(0.0);
            let dtype = self.tensor(a.id).dtype;
            let (lo, hi) = dtype.int_range().unwrap_or((0, 0));
            if v.fract() != 0.0 || v < lo as f64 || v > hi as f64 {
                return Err(n.err(format!("constant_value {v} does not fit {dtype}")));
            }
            let kind = OpKind::Pad {
                pads: ir_pads,
                value: Some(v as i32),
            };
            return self.emit_integer(n, kind, vec![a.id], shape, a.perm.clone(), a.id);
        }
        let value = match fill {
            None => None,
            Some(0.0) => None,
            Some(f) => {
                let q = self
                    .quant_of(a.id)
                    .ok_or_else(|| n.err("the input has no quantization"))?;
                let dtype = self.tensor(a.id).dtype;
                let (lo, hi) = dtype.int_range().unwrap_or((0, 0));
                let v = (f / f64::from(q.scale())).round() + f64::from(q.zero_point());
                Some(v.clamp(lo as f64, hi as f64) as i32)
            }
        };
        let mut p = self.pending(
            n,
            OpKind::Pad {
                pads: ir_pads,
                value,
            },
            vec![a.id],
            shape,
            a.perm.clone(),
        );
        p.keep_quant_of = Some(a.id);
        self.bind_output(n, Val::Pending(Rc::new(p)))
    }
}

/// A quantized constant reshaped; a per-channel axis must survive as one output dimension.
fn reshape_qconst(n: &Node, qc: &QConst, dims: Vec<usize>) -> Result<QConst> {
    let mut q = qc.q.clone();
    if let Some(a) = q.axis {
        let before: usize = qc.c.dims[..a].iter().product();
        let len = qc.c.dims[a];
        q.axis = (0..dims.len())
            .find(|&k| dims[k] == len && dims[..k].iter().product::<usize>() == before);
        if q.axis.is_none() {
            return Err(n.err(format!(
                "reshaping per-channel constant '{}' to {dims:?} loses its channel axis",
                qc.name
            )));
        }
    }
    let c = super::super::constant::Const::new(dims, qc.c.elems.clone())
        .ok_or_else(|| n.err("reshape changes the element count"))?;
    Ok(QConst {
        name: qc.name.clone(),
        c: Rc::new(c),
        q,
    })
}
