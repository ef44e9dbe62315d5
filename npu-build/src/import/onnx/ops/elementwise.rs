//! `Add`, `Sub`, `Mul` (numpy broadcasting) and the clamps `Relu`, `Clip`, `Max`/`Min` with a
//! constant, which become fused activations of their producer when they can.

use std::rc::Rc;

use super::super::builder::{Act, Builder, Pending, QConst, Val, activation_from_bounds};
use super::super::builder::{combine_activations, fused_activation, set_fused_activation};
use super::super::constant::Const;
use super::super::layout;
use super::super::model::Node;
use super::super::{qdq, quant_params};
use super::weights::const_layout;
use crate::error::Result;
use crate::ir::{Activation, DType, OpKind, TensorId};

/// Numpy broadcast of two shapes: the reference interpreter's, one home.
pub(crate) use crate::reference::util::broadcast_shape as broadcast;

impl Builder {
    /// `Add`, `Sub`, `Mul` of quantized operands (one may be a quantized constant).
    pub(crate) fn binary(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(2)?;
        if let Some(p) = self.squared_difference(n)? {
            return self.bind_output(n, Val::Pending(Rc::new(p)));
        }
        if n.op_type == "Add" && self.bias_add(n)? {
            return Ok(());
        }
        let a = self.input(n, 0)?;
        let b = self.input(n, 1)?;
        let (ia, ib, perm) = match (&a, &b) {
            (Val::Deq(x), Val::Deq(y)) => {
                if x.perm.len() == y.perm.len() {
                    let y = self.relayout(y, &x.perm)?;
                    (x.id, y.id, x.perm.clone())
                } else {
                    let x = self.relayout(x, &layout::identity(x.perm.len()))?;
                    let y = self.relayout(y, &layout::identity(y.perm.len()))?;
                    let r = x.perm.len().max(y.perm.len());
                    (x.id, y.id, layout::identity(r))
                }
            }
            (Val::Deq(x), Val::DeqConst(c)) => {
                let (x, cid) = self.with_constant(n, 1, x, c)?;
                if n.op_type == "PRelu" {
                    self.unpad_alpha(cid, c.c.dims.len(), &x.perm);
                }
                (x.id, cid, x.perm)
            }
            (Val::DeqConst(c), Val::Deq(x)) => {
                let (x, cid) = self.with_constant(n, 0, x, c)?;
                (cid, x.id, x.perm)
            }
            (Val::DeqConst(_), Val::DeqConst(_)) => {
                return Err(n.err("both operands are constants; nothing to compute at run time"));
            }
            (Val::Deq(_), other) => return Err(self.not_quantized(n, 1, other)),
            (other, _) => return Err(self.not_quantized(n, 0, other)),
        };
        let sa = self.tensor(ia).shape.clone();
        let sb = self.tensor(ib).shape.clone();
        let shape = broadcast(&sa, &sb)
            .ok_or_else(|| n.err(format!("shapes {sa:?} and {sb:?} do not broadcast")))?;
        let activation = Activation::None;
        let kind = match n.op_type.as_str() {
            "Add" => OpKind::Add { activation },
            "Sub" => OpKind::Sub { activation },
            "Max" => OpKind::Maximum,
            "Min" => OpKind::Minimum,
            "PRelu" => OpKind::Prelu,
            _ => OpKind::Mul { activation },
        };
        let mut p = self.pending(n, kind, vec![ia, ib], shape, perm);
        if matches!(p.kind, OpKind::Maximum | OpKind::Minimum) {
            // The IR compares stored values (TFLite's kernel): exact for dequantized values only
            // when both inputs share one quantization; the output is then requantized from it.
            let (qa, qb) = (&self.tensor(ia).quant, &self.tensor(ib).quant);
            if qa != qb {
                return Err(n.err(format!(
                    "{} of inputs with different quantizations ({qa:?} and {qb:?}) is not supported",
                    n.op_type
                )));
            }
            p.keep_quant_of = Some(ia);
        }
        self.bind_output(n, Val::Pending(Rc::new(p)))
    }

    /// PRelu's constant alpha keeps its own rank (TFLite's PRELU takes alpha as the model gives
    /// it, `[1, 1, C]` for Keras): the leading 1s `with_constant` added are dropped again when
    /// the layout leaves them in front.
    fn unpad_alpha(&mut self, id: TensorId, rank: usize, perm: &[usize]) {
        let identity = perm.iter().enumerate().all(|(i, &p)| i == p);
        let shape = &mut self.g.tensors[id].shape;
        if identity && rank < shape.len() && shape[..shape.len() - rank].iter().all(|&d| d == 1) {
            shape.drain(..shape.len() - rank);
        }
    }

    /// `Mul(d, d)` of the unquantized result `d` of a `Sub`: tf2onnx's form of TFLite's
    /// SQUARED_DIFFERENCE, which becomes that operator (its integer path) again.
    fn squared_difference(&mut self, n: &Node) -> Result<Option<Pending>> {
        if n.op_type != "Mul" || n.inputs.len() != 2 || n.inputs[0] != n.inputs[1] {
            return Ok(None);
        }
        let Val::Pending(p) = self.input(n, 0)? else {
            return Ok(None);
        };
        if p.kind
            != (OpKind::Sub {
                activation: Activation::None,
            })
            || p.inner.is_some()
        {
            return Ok(None);
        }
        let mut q = (*p).clone();
        q.node = n.name.clone();
        q.op_type = n.op_type.clone();
        q.kind = OpKind::SquaredDifference;
        Ok(Some(q))
    }

    /// `Neg` stays a float operator, as the TFLite converter leaves it (TFLite's integer NEG
    /// negates stored values, which is not `QuantizeLinear(-DequantizeLinear(x))`): a
    /// dequantized input is dequantized by an operator, negated in f32, and left to the
    /// `QuantizeLinear` that follows.
    fn float_neg(&mut self, n: &Node) -> Result<()> {
        let x = match self.input(n, 0)? {
            Val::Float(a) => a,
            Val::Deq(a) => {
                let shape = self.tensor(a.id).shape.clone();
                let name = format!("{}_dequantized", n.req_input(0)?);
                let id = self.add_tensor(&name, shape, DType::F32, None, None);
                self.push_op(
                    &format!("{}_dequantize", n.name),
                    OpKind::Dequantize,
                    vec![a.id],
                    vec![id],
                );
                Act { id, perm: a.perm }
            }
            other => return Err(self.not_quantized(n, 0, &other)),
        };
        let shape = self.tensor(x.id).shape.clone();
        let id = self.add_tensor(n.output()?, shape, DType::F32, None, None);
        self.push_op(&n.name, OpKind::Neg, vec![x.id], vec![id]);
        self.bind_output(n, Val::Float(Act { id, perm: x.perm }))
    }

    /// `Abs` of a dequantized tensor.
    pub(crate) fn unary_math(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(1)?;
        let kind = match n.op_type.as_str() {
            "Abs" => OpKind::Abs,
            "Neg" => return self.float_neg(n),
            _ => return Err(self.unsupported(n)),
        };
        match self.input(n, 0)? {
            Val::Deq(a) => {
                let shape = self.tensor(a.id).shape.clone();
                let p = self.pending(n, kind, vec![a.id], shape, a.perm);
                self.bind_output(n, Val::Pending(Rc::new(p)))
            }
            other => Err(self.not_quantized(n, 0, &other)),
        }
    }

    /// A constant operand laid out like activation `x` (input `i` of `n`). When the constant has
    /// a higher rank than `x`, `x` is brought to ONNX layout instead.
    /// The exporter idiom "MatMul, then a float bias Add, then QuantizeLinear" (tf2onnx's dense
    /// layers, torch's Linear without Gemm): a constant vector added to a fully-connected result
    /// not quantized yet becomes that operator's int32 bias (scale input * weight scale), as
    /// TFLite's FullyConnected computes it. Returns false when the pattern does not apply.
    fn bias_add(&mut self, n: &Node) -> Result<bool> {
        let a = self.input(n, 0)?;
        let b = self.input(n, 1)?;
        let is_const = |v: &Val| matches!(v, Val::Const(_) | Val::DeqConst(_));
        let (p, ci) = match (&a, &b) {
            (Val::Pending(p), c) if is_const(c) => (Rc::clone(p), 1),
            (c, Val::Pending(p)) if is_const(c) => (Rc::clone(p), 0),
            _ => return Ok(false),
        };
        if !matches!(p.kind, OpKind::FullyConnected { .. })
            || p.inputs.len() != 2
            || p.inner.is_some()
            || p.keep_quant_of.is_some()
        {
            return Ok(false);
        }
        let w = self.tensor(p.inputs[1]).clone();
        let channels = w.shape.first().copied().unwrap_or(0);
        // The constant must run along the output channels: the last axis, as ONNX sees it.
        let c_shape = self.shape_of(if ci == 0 { &a } else { &b });
        let rank = p.perm.len();
        let along_channels = c_shape.last() == Some(&channels)
            && c_shape.iter().rev().skip(1).all(|&d| d == 1)
            && c_shape.len() <= rank
            && p.perm.last() == Some(&(rank - 1));
        let (Some(x_q), Some(w_q)) = (self.quant_of(p.inputs[0]), w.quant.clone()) else {
            return Ok(false);
        };
        if !along_channels || x_q.scale.len() != 1 {
            return Ok(false);
        }
        let wq = quant_params::QParams {
            scale: w_q.scale.clone(),
            zero_point: w_q.zero_point.clone(),
            dtype: w.dtype,
            axis: (w_q.scale.len() > 1).then_some(0),
        };
        let Some(bias) = self.bias_tensor(n, ci, x_q.scale(), &wq, channels)? else {
            return Ok(false);
        };
        let mut fused = (*p).clone();
        fused.inputs.push(bias);
        self.bind_output(n, Val::Pending(Rc::new(fused)))?;
        Ok(true)
    }

    fn with_constant(
        &mut self,
        n: &Node,
        i: usize,
        x: &Act,
        c: &QConst,
    ) -> Result<(Act, TensorId)> {
        if c.q.channels() > 1 {
            return Err(n.err(format!(
                "constant operand '{}' is quantized per channel; only per-tensor is supported here",
                c.name
            )));
        }
        let key = n.req_input(i)?.to_string();
        // The constant takes the activation's 8-bit type (same reals).
        let dtype = match self.tensor(x.id).dtype {
            DType::U8 => DType::U8,
            _ => DType::I8,
        };
        let r = x.perm.len();
        if c.c.dims.len() > r {
            let x = self.relayout(x, &layout::identity(r))?;
            let id = self.const_tensor_in(n, &key, c, &layout::identity(c.c.dims.len()), dtype)?;
            let perm = layout::identity(c.c.dims.len());
            return Ok((Act { id: x.id, perm }, id));
        }
        let mut padded = c.clone();
        let mut dims = vec![1; r - c.c.dims.len()];
        dims.extend_from_slice(&c.c.dims);
        self.charge(n, c.c.len())?;
        padded.c = Rc::new(Const {
            dims,
            elems: c.c.elems.clone(),
        });
        let id = self.const_tensor_in(n, &key, &padded, &const_layout(&x.perm), dtype)?;
        Ok((x.clone(), id))
    }

    /// `Relu`, `Clip`, and `Max` / `Min` with a scalar constant.
    pub(crate) fn activation(&mut self, n: &Node) -> Result<()> {
        let (x, act) = match n.op_type.as_str() {
            "Relu" => {
                n.max_inputs(1)?;
                (self.input(n, 0)?, Activation::Relu)
            }
            "Clip" => {
                n.max_inputs(3)?;
                let lo = self.scalar_input(n, 1)?;
                let hi = self.scalar_input(n, 2)?;
                (self.input(n, 0)?, activation_from_bounds(lo, hi))
            }
            _ => {
                let two_tensors = n.inputs.len() == 2
                    && matches!(self.input(n, 0)?, Val::Deq(_))
                    && matches!(self.input(n, 1)?, Val::Deq(_));
                if two_tensors {
                    // Max / Min of two tensors: the IR's Maximum / Minimum.
                    return self.binary(n);
                }
                if n.inputs.len() != 2 {
                    return Err(n.err(format!(
                        "{} inputs; only {} of a tensor and a scalar constant is supported",
                        n.inputs.len(),
                        n.op_type
                    )));
                }
                let a = self.input(n, 0)?;
                let b = self.input(n, 1)?;
                let (x, ci) = match (&a, &b) {
                    (_, Val::Const(_) | Val::DeqConst(_)) => (a, 1),
                    (Val::Const(_) | Val::DeqConst(_), _) => (b, 0),
                    _ => {
                        return Err(n.err(format!(
                            "{} of two tensors is not supported (only with a scalar constant)",
                            n.op_type
                        )));
                    }
                };
                let c = self.scalar_input(n, ci)?;
                let act = if n.op_type == "Max" {
                    activation_from_bounds(c, None)
                } else {
                    activation_from_bounds(None, c)
                };
                (x, act)
            }
        };
        let p = match x {
            Val::Pending(p) => with_activation(n, &p, act),
            Val::Deq(a) => {
                let shape = self.tensor(a.id).shape.clone();
                self.pending(n, OpKind::Activation(act), vec![a.id], shape, a.perm)
            }
            other => return Err(self.not_quantized(n, 0, &other)),
        };
        self.bind_output(n, Val::Pending(Rc::new(p)))
    }

    /// A scalar constant input as a real number (`None` if the input is omitted).
    fn scalar_input(&self, n: &Node, i: usize) -> Result<Option<f32>> {
        let Some(name) = n.input(i) else {
            return Ok(None);
        };
        let v = match self.val(n, name)? {
            Val::Const(c) => c.scalar_f64(),
            Val::DeqConst(qc) => match qdq::dequantize_values(&qc).as_slice() {
                [x] => Some(*x),
                _ => None,
            },
            other => {
                return Err(n.err(format!(
                    "input {i} ('{name}') is {}; a scalar constant is expected",
                    other.kind_name()
                )));
            }
        };
        let v = v.ok_or_else(|| n.err(format!("input {i} ('{name}') is not a scalar")))?;
        if v.is_nan() {
            return Err(n.err(format!("input {i} ('{name}') is NaN")));
        }
        Ok(Some(v as f32))
    }
}

/// `p` followed by the clamp `act`: fused into `p` when its kind has a fused activation, else a
/// stand-alone activation of it.
fn with_activation(n: &Node, p: &Rc<Pending>, act: Activation) -> Pending {
    let mut q = (**p).clone();
    if let OpKind::Activation(prev) = p.kind {
        q.kind = OpKind::Activation(combine_activations(prev, act));
        return q;
    }
    if let Some(prev) = fused_activation(&p.kind) {
        set_fused_activation(&mut q.kind, combine_activations(prev, act));
        return q;
    }
    Pending {
        node: n.name.clone(),
        op_type: n.op_type.clone(),
        kind: OpKind::Activation(act),
        inputs: Vec::new(),
        shape: p.shape.clone(),
        perm: p.perm.clone(),
        keep_quant_of: None,
        inner: Some(p.clone()),
        float_ok: false,
        source: None,
    }
}
