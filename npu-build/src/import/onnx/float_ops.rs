//! Float islands of more than one function: operators a quantizer left in float between
//! `DequantizeLinear` and `QuantizeLinear` that read several tensors or whole rows (onnxruntime
//! leaves `LayerNormalization` in float even in a QDQ model, and with `op_types_to_quantize`
//! it leaves whatever it is told: the Div, Softmax, Erf, ... of an attention block). They run
//! on the CPU in f32 as onnxruntime computes them: dequantize, f32 operator, quantize.
//!
//! An operator computes in float when it has no integer mapping (`LayerNormalization`, and
//! `Div`, `Pow`, `Sqrt`, `Reciprocal`, `Erf` when [`Builder::float_function`] did not make
//! them one table), when one of its inputs is already a float tensor, or when its integer
//! mapping failed (emitting nothing) on a pending operator that only a quantization could
//! finalize: that operator is then computed in float too. Float values are kept in ONNX order
//! (identity layout): the operators here read whole rows or broadcast by ONNX shapes.
//! `Reshape`, `Transpose` and friends move float values through their own mappings, `Resize`
//! takes them through [`Builder::float_act`]. The facts: `docs/onnx.md`.
//!
//! [`Builder::float_function`]: super::builder::Builder::float_function

use std::rc::Rc;

use super::builder::{Act, Builder, Pending, Val};
use super::constant::Elems;
use super::island::float_fn;
use super::layout;
use super::model::Node;
use super::qdq::{dequantize_values, normalize_axis};
use crate::error::Result;
use crate::ir::{Activation, DType, FloatBinFn, FloatFn, OpKind, TensorId};

/// Operators without an integer mapping: always float (after the table recognition). They
/// join the supported-operator list.
pub(crate) const FLOAT_ONLY: &[&str] = &[
    "Div",
    "Erf",
    "LayerNormalization",
    "Pow",
    "Reciprocal",
    "Sqrt",
];

/// Clamps: they fuse into a pending operator before them, never retried in float.
const ACTIVATIONS: &[&str] = &["Max", "Min", "Relu"];

/// Operators computed in float when an input is a float tensor.
const FLOAT_CAPABLE: &[&str] = &[
    "Abs",
    "Add",
    "Concat",
    "Div",
    "Elu",
    "Erf",
    "Exp",
    "Gelu",
    "HardSigmoid",
    "LayerNormalization",
    "LeakyRelu",
    "MatMul",
    "Max",
    "Min",
    "Mul",
    "Neg",
    "Pow",
    "Reciprocal",
    "ReduceMean",
    "ReduceSum",
    "Relu",
    "Sigmoid",
    "Softmax",
    "Sqrt",
    "Sub",
    "Tanh",
];

/// An operand of a float operator: an f32 IR tensor in ONNX order, or f32 constant values.
enum Operand {
    Tensor(TensorId),
    Const(Vec<usize>, Vec<f32>),
}

impl Builder {
    /// Maps node `n` onto f32 operators if it is a float operator (see the module docs);
    /// returns false to leave it to the integer mappings.
    pub(crate) fn float_op(&mut self, n: &Node) -> Result<bool> {
        if !(n.domain.is_empty() || n.domain == "ai.onnx") {
            return Ok(false);
        }
        let op = n.op_type.as_str();
        if !FLOAT_CAPABLE.contains(&op) {
            return Ok(false);
        }
        let float_input = n
            .inputs
            .iter()
            .any(|i| matches!(self.vals.get(i), Some(Val::Float(_))));
        // Constant arithmetic is folded elsewhere.
        let activation_input = n.inputs.iter().any(|i| {
            matches!(
                self.vals.get(i),
                Some(Val::Deq(_) | Val::Float(_) | Val::Pending(_))
            )
        });
        if !(activation_input && (FLOAT_ONLY.contains(&op) || float_input)) {
            return Ok(false);
        }
        self.bind_float(n)
    }

    /// After the integer mapping of `n` failed without emitting anything: maps it in float if
    /// it reads a pending integer operator that only a quantization could finalize and that
    /// has a float form (a Mul of a Mul with no QuantizeLinear between, say).
    pub(crate) fn float_retry(&mut self, n: &Node) -> Result<bool> {
        let op = n.op_type.as_str();
        if ACTIVATIONS.contains(&op) || !FLOAT_CAPABLE.contains(&op) {
            return Ok(false);
        }
        let floatable = n.inputs.iter().any(|i| match self.vals.get(i) {
            Some(Val::Pending(p)) => self.float_source(p).is_some(),
            _ => false,
        });
        if !floatable {
            return Ok(false);
        }
        self.bind_float(n)
    }

    /// Computes `n` in float and binds its output as a float value (ONNX order).
    fn bind_float(&mut self, n: &Node) -> Result<bool> {
        let out = self.float_compute(n)?;
        self.bind_output(
            n,
            Val::Float(Act {
                perm: layout::identity(self.tensor(out).shape.len()),
                id: out,
            }),
        )?;
        Ok(true)
    }

    /// The f32 result of float operator `n` (in ONNX order).
    fn float_compute(&mut self, n: &Node) -> Result<TensorId> {
        match n.op_type.as_str() {
            "Add" | "Sub" | "Mul" | "Div" | "Max" | "Min" => self.float_binary(n),
            "LayerNormalization" => self.layer_norm(n),
            "Softmax" => self.float_softmax(n),
            "Concat" => self.float_concat(n),
            "ReduceMean" | "ReduceSum" => self.float_reduce(n),
            "MatMul" => self.float_matmul(n),
            _ => self.float_unary(n),
        }
    }

    /// The node of pending operator `p` if it can be computed in float instead (it needs an
    /// output quantization and has a float form).
    fn float_source(&self, p: &Pending) -> Option<Rc<Node>> {
        let src = p.source.as_ref()?;
        let computable = p.keep_quant_of.is_none()
            && !p.float_ok
            && p.inner.is_none()
            && FLOAT_CAPABLE.contains(&src.op_type.as_str());
        computable.then(|| src.clone())
    }

    /// Input `i` of `n` as a float operand.
    fn float_operand(&mut self, n: &Node, i: usize) -> Result<Operand> {
        let v = self.input(n, i)?;
        let act = match v {
            Val::Float(a) => a,
            Val::Deq(a) => Act {
                id: self.dequantized(a.id, &n.name)?,
                perm: a.perm,
            },
            Val::Pending(p) => {
                if let Some(src) = self.float_source(&p) {
                    let id = self.float_compute(&src)?;
                    return Ok(Operand::Tensor(id));
                }
                // A movement of a dequantized tensor computes in its input's quantization.
                let id = match p.keep_quant_of {
                    Some(src) if p.inner.is_none() => {
                        let q = self
                            .quant_of(src)
                            .ok_or_else(|| n.err(format!("input {i} has no known quantization")))?;
                        let dtype = self.tensor(src).dtype;
                        let name = format!("{}_before_float", p.node);
                        let id = self.finalize(&p, &q, dtype, &name)?;
                        self.dequantized(id, &n.name)?
                    }
                    _ => self.finalize_float(&p, &format!("{}_float", p.node))?,
                };
                Act {
                    id,
                    perm: p.perm.clone(),
                }
            }
            Val::Const(c) => {
                let Elems::F32(v) = &c.elems else {
                    return Err(n.err(format!(
                        "input {i} is a constant of type {}: a float operator takes FLOAT",
                        c.elems.type_name()
                    )));
                };
                return Ok(Operand::Const(c.dims.clone(), v.clone()));
            }
            Val::DeqConst(qc) => {
                // The product of an f32 scale and a small integer is exact in a double, so
                // this is onnxruntime's f32 dequantization.
                let v = dequantize_values(&qc).iter().map(|&x| x as f32).collect();
                return Ok(Operand::Const(qc.c.dims.clone(), v));
            }
            other @ Val::Int(_) => return Err(self.not_quantized(n, i, &other)),
        };
        let ident = layout::identity(act.perm.len());
        Ok(Operand::Tensor(self.relayout(&act, &ident)?.id))
    }

    /// Input `i` of `n` as an f32 activation in ONNX order (for operators with their own
    /// mapping that also take float values: Resize).
    pub(crate) fn float_act(&mut self, n: &Node, i: usize) -> Result<Act> {
        let o = self.float_operand(n, i)?;
        let id = self.float_tensor(n, i, o)?;
        Ok(Act {
            perm: layout::identity(self.tensor(id).shape.len()),
            id,
        })
    }

    /// A float operand as an IR tensor (constants become f32 IR constants).
    fn float_tensor(&mut self, n: &Node, i: usize, o: Operand) -> Result<TensorId> {
        Ok(match o {
            Operand::Tensor(id) => id,
            Operand::Const(dims, v) => {
                self.charge(n, v.len())?;
                let name = n.inputs.get(i).cloned().unwrap_or_else(|| n.name.clone());
                let bytes = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                self.add_tensor(&name, dims, DType::F32, None, Some(bytes))
            }
        })
    }

    fn operand_shape(&self, o: &Operand) -> Vec<usize> {
        match o {
            Operand::Tensor(id) => self.tensor(*id).shape.clone(),
            Operand::Const(dims, _) => dims.clone(),
        }
    }

    /// A new f32 result of `n` with `shape`.
    fn float_out(&mut self, n: &Node, shape: Vec<usize>) -> Result<TensorId> {
        Ok(self.add_tensor(n.output()?, shape, DType::F32, None, None))
    }

    /// Add, Sub, Mul, Div, Max or Min of two float operands, numpy broadcasting.
    fn float_binary(&mut self, n: &Node) -> Result<TensorId> {
        let kind = match n.op_type.as_str() {
            "Add" => OpKind::FloatBinary(FloatBinFn::Add),
            "Sub" => OpKind::FloatBinary(FloatBinFn::Sub),
            "Mul" => OpKind::FloatBinary(FloatBinFn::Mul),
            "Div" => OpKind::FloatBinary(FloatBinFn::Div),
            "Max" => OpKind::Maximum,
            _ => OpKind::Minimum,
        };
        if n.inputs.len() != 2 {
            return Err(n.err(format!(
                "has {} inputs: a float {} takes two",
                n.inputs.len(),
                n.op_type
            )));
        }
        let (a, b) = (self.float_operand(n, 0)?, self.float_operand(n, 1)?);
        let (sa, sb) = (self.operand_shape(&a), self.operand_shape(&b));
        let shape = crate::reference::util::broadcast_shape(&sa, &sb)
            .ok_or_else(|| n.err(format!("shapes {sa:?} and {sb:?} do not broadcast")))?;
        let (a, b) = (self.float_tensor(n, 0, a)?, self.float_tensor(n, 1, b)?);
        let out = self.float_out(n, shape)?;
        self.push_op(&n.name, kind, vec![a, b], vec![out]);
        Ok(out)
    }

    /// An elementwise f32 function of input 0.
    fn float_unary(&mut self, n: &Node) -> Result<TensorId> {
        let func = if n.op_type == "Pow" {
            // A constant scalar exponent.
            n.max_inputs(2)?;
            let e = match self.float_operand(n, 1)? {
                Operand::Const(_, v) if v.len() == 1 => v[0],
                _ => return Err(n.err("a float Pow needs a constant scalar exponent")),
            };
            if !npu_rt::cpu::float::pow_supported(e) {
                return Err(n.err(format!(
                    "Pow with exponent {e}: only -1, -0.5, 0.5, 1, 2 and 3 are supported in float"
                )));
            }
            FloatFn::Pow { exponent: e }
        } else {
            n.max_inputs(1)?;
            float_fn(n)?.ok_or_else(|| n.err("has no float implementation"))?
        };
        let x = self.float_operand(n, 0)?;
        let x = self.float_tensor(n, 0, x)?;
        let shape = self.tensor(x).shape.clone();
        let out = self.float_out(n, shape)?;
        self.push_op(&n.name, OpKind::FloatUnary(func), vec![x], vec![out]);
        Ok(out)
    }

    /// Softmax over the last axis of a float tensor.
    fn float_softmax(&mut self, n: &Node) -> Result<TensorId> {
        n.max_inputs(1)?;
        let x = self.float_operand(n, 0)?;
        let x = self.float_tensor(n, 0, x)?;
        let shape = self.tensor(x).shape.clone();
        let axis = normalize_axis(n.attr_i_or("axis", -1)?, shape.len())
            .ok_or_else(|| n.err("axis is out of range"))?;
        if axis + 1 != shape.len() {
            return Err(n.err(format!(
                "a float Softmax over axis {axis} of a rank-{} tensor: only the last axis is supported",
                shape.len()
            )));
        }
        let out = self.float_out(n, shape)?;
        self.push_op(&n.name, OpKind::Softmax { beta: 1.0 }, vec![x], vec![out]);
        Ok(out)
    }

    /// ReduceMean (axes from input 1 since opset 18) or ReduceSum (since opset 13) of a float
    /// operand.
    fn float_reduce(&mut self, n: &Node) -> Result<TensorId> {
        n.max_inputs(2)?;
        let mean = n.op_type == "ReduceMean";
        let x = self.float_operand(n, 0)?;
        let x = self.float_tensor(n, 0, x)?;
        let shape = self.tensor(x).shape.clone();
        let rank = shape.len();
        let keep_dims = n.attr_i_or("keepdims", 1)? != 0;
        let Some(mut axes) = self.reduce_axes(n, rank, if mean { 18 } else { 13 })? else {
            return Ok(x);
        };
        axes.sort_unstable();
        axes.dedup();
        let out_shape: Vec<usize> = (0..rank)
            .filter_map(|d| match (axes.contains(&d), keep_dims) {
                (true, true) => Some(1),
                (true, false) => None,
                (false, _) => Some(shape[d]),
            })
            .collect();
        let out = self.float_out(n, out_shape)?;
        self.push_op(
            &n.name,
            OpKind::FloatReduce {
                axes,
                keep_dims,
                mean,
            },
            vec![x],
            vec![out],
        );
        Ok(out)
    }

    /// MatMul of float operands of rank 2 or more (numpy broadcasting of the batch axes).
    fn float_matmul(&mut self, n: &Node) -> Result<TensorId> {
        if n.inputs.len() != 2 {
            return Err(n.err("a MatMul takes two inputs"));
        }
        let (a, b) = (self.float_operand(n, 0)?, self.float_operand(n, 1)?);
        let (sa, sb) = (self.operand_shape(&a), self.operand_shape(&b));
        if sa.len() < 2 || sb.len() < 2 {
            return Err(n.err(format!(
                "a float MatMul of shapes {sa:?} and {sb:?}: both need rank 2 or more"
            )));
        }
        let (ra, rb) = (sa.len() - 2, sb.len() - 2);
        if sa[ra + 1] != sb[rb] {
            return Err(n.err(format!("shapes {sa:?} and {sb:?} cannot be multiplied")));
        }
        let mut shape =
            crate::reference::util::broadcast_shape(&sa[..ra], &sb[..rb]).ok_or_else(|| {
                n.err(format!(
                    "the batch axes of {sa:?} and {sb:?} do not broadcast"
                ))
            })?;
        shape.extend([sa[ra], sb[rb + 1]]);
        let (a, b) = (self.float_tensor(n, 0, a)?, self.float_tensor(n, 1, b)?);
        let out = self.float_out(n, shape)?;
        self.push_op(
            &n.name,
            OpKind::BatchMatMul {
                adj_a: false,
                adj_b: false,
            },
            vec![a, b],
            vec![out],
        );
        Ok(out)
    }

    /// Concat of float operands.
    fn float_concat(&mut self, n: &Node) -> Result<TensorId> {
        let axis = n.attr_i("axis")?.ok_or_else(|| n.err("axis is missing"))?;
        let mut ids = Vec::with_capacity(n.inputs.len());
        for i in 0..n.inputs.len() {
            let o = self.float_operand(n, i)?;
            ids.push(self.float_tensor(n, i, o)?);
        }
        let first = ids
            .first()
            .map(|&id| self.tensor(id).shape.clone())
            .ok_or_else(|| n.err("has no inputs"))?;
        let axis =
            normalize_axis(axis, first.len()).ok_or_else(|| n.err("axis is out of range"))?;
        let mut shape = first.clone();
        shape[axis] = 0;
        for &id in &ids {
            let s = &self.tensor(id).shape;
            let fits =
                s.len() == first.len() && (0..s.len()).all(|d| d == axis || s[d] == first[d]);
            if !fits {
                return Err(n.err(format!(
                    "input shapes {first:?} and {s:?} differ outside axis {axis}"
                )));
            }
            shape[axis] += s[axis];
        }
        let out = self.float_out(n, shape)?;
        self.push_op(
            &n.name,
            OpKind::Concat {
                axis,
                activation: Activation::None,
            },
            ids,
            vec![out],
        );
        Ok(out)
    }

    /// `LayerNormalization` (opset 17): x, a constant scale and an optional constant bias
    /// broadcast over the normalised axes.
    fn layer_norm(&mut self, n: &Node) -> Result<TensorId> {
        n.max_inputs(3)?;
        if n.outputs.iter().skip(1).any(|o| !o.is_empty()) {
            return Err(n.err(
                "outputs Mean and InvStdDev are not supported (only Y, as inference exports have)",
            ));
        }
        if n.attr_i_or("stash_type", 1)? != 1 {
            return Err(n.err("stash_type other than 1 (float) is not supported"));
        }
        let x = self.float_operand(n, 0)?;
        let x = self.float_tensor(n, 0, x)?;
        let shape = self.tensor(x).shape.clone();
        let axis = normalize_axis(n.attr_i_or("axis", -1)?, shape.len())
            .ok_or_else(|| n.err("axis is out of range"))?;
        let epsilon = n.attr_f("epsilon")?.unwrap_or(1e-5);
        let inner = shape[axis..].to_vec();
        let mut params = Vec::with_capacity(2);
        for (i, default) in [(1usize, None), (2, Some(0.0f32))] {
            let values = match (n.input(i), default) {
                (None, Some(d)) => vec![d; inner.iter().product()],
                (None, None) => return Err(n.err("input Scale is missing")),
                (Some(_), _) => match self.float_operand(n, i)? {
                    Operand::Const(dims, v) => broadcast_to(&dims, &v, &inner).ok_or_else(|| {
                        n.err(format!(
                            "input {i} of shape {dims:?} does not broadcast to the normalised shape {inner:?}"
                        ))
                    })?,
                    Operand::Tensor(_) => {
                        return Err(n.err(format!(
                            "input {i} (Scale or B) must be a constant: computed ones are not supported"
                        )));
                    }
                },
            };
            params.push(self.float_tensor(n, i, Operand::Const(inner.clone(), values))?);
        }
        let out = self.float_out(n, shape)?;
        let mut inputs = vec![x];
        inputs.extend(params);
        self.push_op(
            &n.name,
            OpKind::LayerNorm { axis, epsilon },
            inputs,
            vec![out],
        );
        Ok(out)
    }
}

/// Values of shape `dims` broadcast (numpy rules, right-aligned) to shape `to`; `None` if
/// they do not broadcast to exactly `to`.
fn broadcast_to(dims: &[usize], v: &[f32], to: &[usize]) -> Option<Vec<f32>> {
    if dims.len() > to.len() {
        // Leading 1s may be dropped.
        let extra = dims.len() - to.len();
        if dims[..extra].iter().any(|&d| d != 1) {
            return None;
        }
        return broadcast_to(&dims[extra..], v, to);
    }
    let pad = to.len() - dims.len();
    let src: Vec<usize> = std::iter::repeat_n(1, pad)
        .chain(dims.iter().copied())
        .collect();
    if src.iter().zip(to).any(|(&s, &t)| s != t && s != 1) {
        return None;
    }
    let total: usize = to.iter().product();
    if v.len() != src.iter().product::<usize>() {
        return None;
    }
    let mut out = Vec::with_capacity(total);
    let mut idx = vec![0usize; to.len()];
    for _ in 0..total {
        let mut k = 0;
        for d in 0..to.len() {
            k = k * src[d] + if src[d] == 1 { 0 } else { idx[d] };
        }
        out.push(v[k]);
        for d in (0..to.len()).rev() {
            idx[d] += 1;
            if idx[d] < to[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::broadcast_to;

    #[test]
    fn broadcasts_like_numpy() {
        assert_eq!(
            broadcast_to(&[2], &[1.0, 2.0], &[2, 2]),
            Some(vec![1.0, 2.0, 1.0, 2.0])
        );
        assert_eq!(
            broadcast_to(&[2, 1], &[1.0, 2.0], &[2, 2]),
            Some(vec![1.0, 1.0, 2.0, 2.0])
        );
        assert_eq!(
            broadcast_to(&[1, 3], &[1.0, 2.0, 3.0], &[3]),
            Some(vec![1.0, 2.0, 3.0])
        );
        assert_eq!(broadcast_to(&[3], &[1.0, 2.0, 3.0], &[2]), None);
        assert_eq!(broadcast_to(&[2], &[1.0], &[2]), None);
    }
}
