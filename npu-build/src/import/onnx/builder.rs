//! The IR under construction and what every ONNX value is bound to in it.
//!
//! ONNX QDQ graphs compute in float between `DequantizeLinear` and `QuantizeLinear`. The importer
//! walks the nodes in order and binds each ONNX value to a [`Val`]: an integer IR tensor, the
//! dequantized view of one, a constant, or a [`Pending`] operator whose output quantization is
//! known only when the `QuantizeLinear` that consumes it is reached. Operators are emitted into
//! the IR at that point, so IR order stays topological.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use super::constant::Const;
use super::layout;
use super::model::Node;
use super::quant_params::{QParams, QuantClasses};
use crate::error::{Error, Result};
use crate::ir::{Activation, DType, Graph, Op, OpKind, Quantization, Requant, Tensor, TensorId};

/// An activation: an IR tensor seen by ONNX through `perm` (`onnx_shape[i] = ir_shape[perm[i]]`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Act {
    pub id: TensorId,
    pub perm: Vec<usize>,
}

/// A quantized constant: integer values and the `DequantizeLinear` parameters that give them
/// meaning (`axis` in ONNX dimensions).
#[derive(Clone, Debug)]
pub(crate) struct QConst {
    /// Name of the integer constant (the IR tensor gets it).
    pub name: String,
    pub c: Rc<Const>,
    pub q: QParams,
}

/// An operator waiting for the quantization of its output.
#[derive(Clone, Debug)]
pub(crate) struct Pending {
    /// IR op name.
    pub node: String,
    /// ONNX operator, for messages.
    pub op_type: String,
    pub kind: OpKind,
    pub inputs: Vec<TensorId>,
    /// IR shape of the output.
    pub shape: Vec<usize>,
    /// Layout of the output (see [`Act`]).
    pub perm: Vec<usize>,
    /// The op computes in its input's quantization (pooling, resize, pad): a different output
    /// quantization needs a requantization after it.
    pub keep_quant_of: Option<TensorId>,
    /// For a stand-alone activation of another pending op: that op, finalized first.
    pub inner: Option<Rc<Pending>>,
    /// The op may run in float when no `QuantizeLinear` follows (Softmax at the end of a graph).
    pub float_ok: bool,
    /// The ONNX node, for computing it in float instead when a float operator reads it.
    pub source: Option<Rc<Node>>,
}

/// What an ONNX value is bound to.
#[derive(Clone, Debug)]
pub(crate) enum Val {
    /// An integer (quantized) activation; ONNX sees the integers themselves.
    Int(Act),
    /// The float values `DequantizeLinear` makes of an integer activation.
    Deq(Act),
    /// A true float activation (a float graph input, or a float result).
    Float(Act),
    /// A constant.
    Const(Rc<Const>),
    /// The float values `DequantizeLinear` makes of an integer constant.
    DeqConst(Rc<QConst>),
    /// The float result of an operator not emitted yet.
    Pending(Rc<Pending>),
}

impl Val {
    pub fn kind_name(&self) -> &'static str {
        match self {
            Val::Int(_) => "an integer tensor",
            Val::Deq(_) => "a dequantized tensor",
            Val::Float(_) => "a float tensor",
            Val::Const(_) => "a constant",
            Val::DeqConst(_) => "a dequantized constant",
            Val::Pending(_) => "an unquantized float result",
        }
    }
}

/// Unique names: a requested name, or it with the next free numeric suffix.
#[derive(Default)]
struct Names {
    used: HashSet<String>,
    next_suffix: HashMap<String, usize>,
}

impl Names {
    fn fresh(&mut self, base: &str) -> String {
        if self.used.insert(base.to_string()) {
            return base.to_string();
        }
        let k = self.next_suffix.entry(base.to_string()).or_insert(1);
        loop {
            let candidate = format!("{base}_{k}");
            *k += 1;
            if self.used.insert(candidate.clone()) {
                return candidate;
            }
        }
    }
}

/// The IR being built plus the bindings.
pub(crate) struct Builder {
    pub g: Graph,
    pub vals: HashMap<String, Val>,
    pub classes: QuantClasses,
    pub opset: i64,
    tensor_names: Names,
    op_names: Names,
    /// (tensor, IR transpose) -> transposed tensor, so a layout change is emitted once.
    transposed: HashMap<(TensorId, Vec<usize>), TensorId>,
    /// IR tensors made of constants, keyed by value name and layout.
    pub const_cache: HashMap<(String, Vec<usize>), TensorId>,
    /// Constant elements created so far (folding, re-layouts, IR constants).
    const_elements: usize,
}

/// Most constant elements the importer creates for one model (folded values, re-laid-out
/// weights, IR constants): far above any model an NPU runs, it bounds what a hostile file can
/// make the importer allocate.
pub(crate) const CONST_BUDGET: usize = 1 << 27;

impl Builder {
    pub fn new(name: &str, opset: i64) -> Builder {
        Builder {
            g: Graph {
                name: name.to_string(),
                ..Default::default()
            },
            vals: HashMap::new(),
            classes: QuantClasses::default(),
            opset,
            tensor_names: Names::default(),
            op_names: Names::default(),
            transposed: HashMap::new(),
            const_cache: HashMap::new(),
            const_elements: 0,
        }
    }

    /// Accounts for `elements` new constant elements made for node `n`.
    pub fn charge(&mut self, n: &Node, elements: usize) -> Result<()> {
        self.const_elements = self.const_elements.saturating_add(elements);
        if self.const_elements > CONST_BUDGET {
            return Err(n.err(format!(
                "the model's constants exceed the importer's limit of {CONST_BUDGET} elements"
            )));
        }
        Ok(())
    }

    /// Adds a tensor named `name` (or a unique variation of it).
    pub fn add_tensor(
        &mut self,
        name: &str,
        shape: Vec<usize>,
        dtype: DType,
        quant: Option<Quantization>,
        data: Option<Vec<u8>>,
    ) -> TensorId {
        let name = self.tensor_names.fresh(name);
        let id = self.g.add_tensor(Tensor {
            name,
            shape,
            dtype,
            quant: quant.clone(),
            data,
        });
        if let Some(q) = quant {
            // A new tensor starts its own class, so this cannot conflict.
            let _ = self.classes.set(id, &q);
        }
        id
    }

    /// Appends an op named `name` (or a unique variation of it).
    pub fn push_op(
        &mut self,
        name: &str,
        kind: OpKind,
        inputs: Vec<TensorId>,
        outputs: Vec<TensorId>,
    ) {
        let name = self.op_names.fresh(name);
        self.g.ops.push(Op {
            name,
            kind,
            inputs,
            outputs,
        });
    }

    /// Renames tensor `id` to exactly `name`, moving any other tensor of that name aside.
    pub fn rename_tensor(&mut self, id: TensorId, name: &str) {
        if self.g.tensors[id].name == name {
            return;
        }
        let taken = self.tensor_names.used.contains(name);
        if let Some(other) = self.g.tensors.iter().position(|t| taken && t.name == name) {
            let moved = self.tensor_names.fresh(&format!("{name}_"));
            self.g.tensors[other].name = moved;
        }
        self.tensor_names.used.insert(name.to_string());
        self.g.tensors[id].name = name.to_string();
    }

    pub fn tensor(&self, id: TensorId) -> &Tensor {
        &self.g.tensors[id]
    }

    /// The binding of value `name` read by node `n`.
    pub fn val(&self, n: &Node, name: &str) -> Result<Val> {
        self.vals
            .get(name)
            .cloned()
            .ok_or_else(|| n.err(format!("reads '{name}', which has no value at this point")))
    }

    /// The binding of input `i` of `n` (which must be present).
    pub fn input(&self, n: &Node, i: usize) -> Result<Val> {
        let name = n.req_input(i)?;
        self.val(n, name)
    }

    /// The constant bound to input `i` of `n`, if present.
    pub fn const_input(&self, n: &Node, i: usize) -> Result<Option<Rc<Const>>> {
        let Some(name) = n.input(i) else {
            return Ok(None);
        };
        match self.val(n, name)? {
            Val::Const(c) => Ok(Some(c)),
            other => Err(n.err(format!(
                "input {i} ('{name}') must be a constant, but it is {}",
                other.kind_name()
            ))),
        }
    }

    /// The integer elements of constant input `i` (required).
    pub fn ints_input(&self, n: &Node, i: usize) -> Result<Vec<i64>> {
        let c = self
            .const_input(n, i)?
            .ok_or_else(|| n.err(format!("input {i} is missing")))?;
        c.elems.to_i64().ok_or_else(|| {
            n.err(format!(
                "input {i} must hold integers, but it holds {}",
                c.elems.type_name()
            ))
        })
    }

    pub fn bind(&mut self, name: &str, v: Val) {
        self.vals.insert(name.to_string(), v);
    }

    /// Binds the single output of `n`.
    pub fn bind_output(&mut self, n: &Node, v: Val) -> Result<()> {
        n.single_output()?;
        let o = n.output()?.to_string();
        self.bind(&o, v);
        Ok(())
    }

    /// The shape ONNX sees for an activation.
    pub fn act_shape(&self, a: &Act) -> Vec<usize> {
        layout::permute(&self.g.tensors[a.id].shape, &a.perm).unwrap_or_default()
    }

    /// The shape ONNX sees for any value.
    pub fn shape_of(&self, v: &Val) -> Vec<usize> {
        match v {
            Val::Int(a) | Val::Deq(a) | Val::Float(a) => self.act_shape(a),
            Val::Const(c) => c.dims.clone(),
            Val::DeqConst(q) => q.c.dims.clone(),
            Val::Pending(p) => layout::permute(&p.shape, &p.perm).unwrap_or_default(),
        }
    }

    /// Quantization of an integer tensor as known so far.
    pub fn quant_of(&mut self, id: TensorId) -> Option<Quantization> {
        self.classes.get(id)
    }

    /// Puts integer tensors `a` and `b` in the same quantization class (they hold the same
    /// integers, so they must mean the same reals).
    pub fn same_quant(&mut self, a: TensorId, b: TensorId, node: &Node) -> Result<()> {
        self.classes.union(a, b).map_err(|pair| {
            let (x, y) = *pair;
            node.err(format!(
                "joins '{}' and '{}', which are quantized differently ({} vs {})",
                self.g.tensors[a].name,
                self.g.tensors[b].name,
                describe(&x),
                describe(&y)
            ))
        })
    }

    /// The activation with layout `want`, emitting one IR transpose (or a reshape, when only
    /// size-1 dimensions move) if the current layout differs.
    pub fn relayout(&mut self, a: &Act, want: &[usize]) -> Result<Act> {
        if a.perm == want {
            return Ok(a.clone());
        }
        if !layout::is_perm(want, a.perm.len()) {
            return Err(Error::Internal(format!(
                "layout {want:?} does not fit a rank-{} tensor",
                a.perm.len()
            )));
        }
        // IR transpose t with out[j] = in[t[j]] such that the new tensor seen through `want`
        // equals the old one seen through `a.perm`.
        let inv = layout::inverse(want);
        let t = layout::compose(&a.perm, &inv).unwrap_or_default();
        let id = self.transpose_tensor(a.id, &t)?;
        Ok(Act {
            id,
            perm: want.to_vec(),
        })
    }

    /// IR tensor `id` transposed by `t` (cached; identity returns `id`).
    pub fn transpose_tensor(&mut self, id: TensorId, t: &[usize]) -> Result<TensorId> {
        if layout::is_identity(t) {
            return Ok(id);
        }
        if let Some(&done) = self.transposed.get(&(id, t.to_vec())) {
            return Ok(done);
        }
        let src = self.g.tensors[id].clone();
        let shape = layout::permute(&src.shape, t)
            .ok_or_else(|| Error::Internal(format!("bad transpose {t:?} of '{}'", src.name)))?;
        let suffix = match t {
            [0, 2, 3, 1] => "nhwc",
            [0, 3, 1, 2] => "nchw",
            _ => "transposed",
        };
        let name = format!("{}_{suffix}", src.name);
        let out = self.add_tensor(&name, shape.clone(), src.dtype, None, None);
        let kind = if layout::keeps_data_order(&src.shape, t) {
            OpKind::Reshape
        } else {
            OpKind::Transpose { perm: t.to_vec() }
        };
        let op_name = self.g.tensors[out].name.clone();
        self.push_op(&op_name, kind, vec![id], vec![out]);
        if is_quantized_type(src.dtype) {
            // A fresh tensor joins the source's class: no conflict possible.
            let _ = self.classes.union(id, out);
        }
        self.transposed.insert((id, t.to_vec()), out);
        Ok(out)
    }

    /// An activation whose bytes are in ONNX order (layout identity up to size-1 dimensions),
    /// reshaped to `shape` (ONNX order). Emits at most one transpose and one reshape.
    pub fn reshaped(
        &mut self,
        a: &Act,
        shape: &[usize],
        name: &str,
        node: &Node,
    ) -> Result<TensorId> {
        let src_shape = self.g.tensors[a.id].shape.clone();
        let id = if layout::keeps_data_order(&src_shape, &a.perm) {
            a.id
        } else {
            let ident = layout::identity(a.perm.len());
            self.relayout(a, &ident)?.id
        };
        if self.g.tensors[id].shape == shape {
            return Ok(id);
        }
        let t = self.g.tensors[id].clone();
        if super::layout::element_count(shape) != Some(t.elements()) {
            return Err(node.err(format!(
                "cannot reshape {:?} to {shape:?}: the element counts differ",
                t.shape
            )));
        }
        let out = self.add_tensor(name, shape.to_vec(), t.dtype, None, None);
        self.push_op(&node.name, OpKind::Reshape, vec![id], vec![out]);
        if is_quantized_type(t.dtype) {
            self.same_quant(id, out, node)?;
        }
        Ok(out)
    }

    /// Emits `p` with output quantization `q` into a new tensor named `out_name`.
    pub fn finalize(
        &mut self,
        p: &Pending,
        q: &Quantization,
        dtype: DType,
        out_name: &str,
    ) -> Result<TensorId> {
        if matches!(p.kind, OpKind::Softmax { .. })
            && p.inner.is_none()
            && self.g.requant == Requant::Single
            && matches!(dtype, DType::I8 | DType::U8)
            && p.inputs.len() == 1
            && self.g.tensors[p.inputs[0]].dtype == dtype
            && q.scale.len() == 1
        {
            // onnxruntime runs a QDQ Softmax between 8-bit tensors of one type as its
            // QLinearSoftmax kernel, with its own table and rounding.
            let out = self.add_tensor(out_name, p.shape.clone(), dtype, Some(q.clone()), None);
            self.push_op(&p.node, OpKind::OrtSoftmax, p.inputs.clone(), vec![out]);
            return Ok(out);
        }
        if matches!(p.kind, OpKind::Softmax { .. })
            && p.inner.is_none()
            && softmax_in_float(q, dtype)
        {
            // A float island: dequantize, f32 softmax, quantize.
            let tmp = self.finalize_float(p, &format!("{out_name}_float"))?;
            return Ok(self.quantized_into(p, tmp, q, dtype, out_name, "quantize"));
        }
        if matches!(p.kind, OpKind::BatchMatMul { .. }) && dtype == DType::U8 {
            // TFLite's BATCH_MATMUL is int8 only: compute in int8 with the zero point moved by
            // 128 (the same reals), then shift to uint8 exactly.
            let mut q8 = q.clone();
            q8.zero_point.iter_mut().for_each(|z| *z -= 128);
            let tmp = self.finalize(p, &q8, DType::I8, &format!("{out_name}_int8"))?;
            return Ok(self.quantized_into(p, tmp, q, dtype, out_name, "to_uint8"));
        }
        let mut inputs = p.inputs.clone();
        if let Some(inner) = &p.inner {
            // Clamps commute with a monotonic quantization: the inner op may use the same one.
            let pre = self.finalize(inner, q, dtype, &format!("{out_name}_pre_activation"))?;
            inputs.insert(0, pre);
        }
        if let Some(src) = p.keep_quant_of {
            let in_q = self.quant_of(src);
            let in_dtype = self.g.tensors[src].dtype;
            if in_q.as_ref() != Some(q) || in_dtype != dtype {
                // Compute in the input's quantization, then requantize.
                let tmp = self.add_tensor(
                    &format!("{out_name}_before_requantize"),
                    p.shape.clone(),
                    in_dtype,
                    in_q,
                    None,
                );
                self.push_op(&p.node, p.kind.clone(), inputs, vec![tmp]);
                return Ok(self.quantized_into(p, tmp, q, dtype, out_name, "requantize"));
            }
        }
        let out = self.add_tensor(out_name, p.shape.clone(), dtype, Some(q.clone()), None);
        self.push_op(&p.node, p.kind.clone(), inputs, vec![out]);
        Ok(out)
    }

    /// A new tensor `out_name` (`q`, `dtype`, `p`'s shape) made from `tmp` by one IR Quantize
    /// named after `p`'s node and `what`: the last step of finalizing `p` in another type or
    /// quantization.
    fn quantized_into(
        &mut self,
        p: &Pending,
        tmp: TensorId,
        q: &Quantization,
        dtype: DType,
        out_name: &str,
        what: &str,
    ) -> TensorId {
        let out = self.add_tensor(out_name, p.shape.clone(), dtype, Some(q.clone()), None);
        self.push_op(
            &format!("{}_{what}", p.node),
            OpKind::Quantize,
            vec![tmp],
            vec![out],
        );
        out
    }

    /// Emits `p` computing in float (only for ops marked `float_ok`): its input is dequantized
    /// first. Used when no `QuantizeLinear` follows, e.g. a float Softmax ending the graph.
    pub fn finalize_float(&mut self, p: &Pending, out_name: &str) -> Result<TensorId> {
        let (true, [src], None) = (p.float_ok, p.inputs.as_slice(), &p.inner) else {
            return Err(Error::InvalidNode {
                node: p.node.clone(),
                op: p.op_type.clone(),
                detail: "its float output is not quantized by a QuantizeLinear, and this operator has no float implementation".into(),
            });
        };
        let src = *src;
        let f = self.dequantized(src, &p.node)?;
        let out = self.add_tensor(out_name, p.shape.clone(), DType::F32, None, None);
        self.push_op(&p.node, p.kind.clone(), vec![f], vec![out]);
        Ok(out)
    }

    /// A float copy of integer tensor `id` (an IR Dequantize), or `id` itself if already float.
    pub fn dequantized(&mut self, id: TensorId, node: &str) -> Result<TensorId> {
        let t = self.g.tensors[id].clone();
        if t.dtype == DType::F32 {
            return Ok(id);
        }
        let out = self.add_tensor(
            &format!("{}_float", t.name),
            t.shape.clone(),
            DType::F32,
            None,
            None,
        );
        self.push_op(
            &format!("{node}_dequantize"),
            OpKind::Dequantize,
            vec![id],
            vec![out],
        );
        Ok(out)
    }
}

/// Whether tensors of `dtype` carry quantization classes.
pub(crate) fn is_quantized_type(dtype: DType) -> bool {
    matches!(dtype, DType::I8 | DType::U8 | DType::I16)
}

/// `scale=..., zero_point=...` for messages.
pub(crate) fn describe(q: &Quantization) -> String {
    if q.scale.len() == 1 {
        format!("scale {} zero point {}", q.scale(), q.zero_point())
    } else {
        format!("{} per-channel scales", q.scale.len())
    }
}

/// Whether a Softmax quantized to `q` in `dtype` must run in float: TFLite's integer Softmax
/// (the NPU's and the int8 CPU kernel's) produces only scale 1/256 with the type's lowest value
/// as zero point; onnxruntime quantizes softmax outputs to other scales (1/255, zero point -128).
pub(crate) fn softmax_in_float(q: &Quantization, dtype: DType) -> bool {
    let lowest = match dtype {
        DType::I8 => -128,
        DType::U8 => 0,
        _ => return true,
    };
    !(q.scale.len() == 1 && q.scale() == 1.0 / 256.0 && q.zero_point() == lowest)
}

/// The activation kinds an op kind can absorb (`None` if it has no fused activation).
pub(crate) fn fused_activation(kind: &OpKind) -> Option<Activation> {
    match kind {
        OpKind::Conv2d(a) => Some(a.activation),
        OpKind::DepthwiseConv2d { attrs, .. } => Some(attrs.activation),
        OpKind::FullyConnected { activation }
        | OpKind::Add { activation }
        | OpKind::Sub { activation }
        | OpKind::Mul { activation }
        | OpKind::Concat { activation, .. } => Some(*activation),
        OpKind::AvgPool(a) | OpKind::MaxPool(a) => Some(a.activation),
        _ => None,
    }
}

/// `kind` with its fused activation replaced (no-op for kinds without one).
pub(crate) fn set_fused_activation(kind: &mut OpKind, act: Activation) {
    match kind {
        OpKind::Conv2d(a) => a.activation = act,
        OpKind::DepthwiseConv2d { attrs, .. } => attrs.activation = act,
        OpKind::FullyConnected { activation }
        | OpKind::Add { activation }
        | OpKind::Sub { activation }
        | OpKind::Mul { activation }
        | OpKind::Concat { activation, .. } => *activation = act,
        OpKind::AvgPool(a) | OpKind::MaxPool(a) => a.activation = act,
        _ => {}
    }
}

/// The activation applying both `a` then `b` (an intersection of clamp ranges), named the way
/// TFLite names it when it is one of its fused activations.
pub(crate) fn combine_activations(a: Activation, b: Activation) -> Activation {
    let (alo, ahi) = a.bounds();
    let (blo, bhi) = b.bounds();
    let lo = match (alo, blo) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    };
    let hi = match (ahi, bhi) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    };
    activation_from_bounds(lo, hi)
}

/// The activation clamping to `[lo, hi]`.
pub(crate) fn activation_from_bounds(lo: Option<f32>, hi: Option<f32>) -> Activation {
    match (lo, hi) {
        (None, None) => Activation::None,
        (Some(0.0), None) => Activation::Relu,
        (Some(0.0), Some(6.0)) => Activation::Relu6,
        (Some(-1.0), Some(1.0)) => Activation::ReluN1To1,
        (l, h) => Activation::Clip {
            min: l.unwrap_or(f32::NEG_INFINITY),
            max: h.unwrap_or(f32::INFINITY),
        },
    }
}
