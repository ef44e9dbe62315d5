//! The QOperator format (onnxruntime's `quant_format=QOperator`, the ONNX model zoo's int8
//! models): each `QLinear*` node is rewritten into the QDQ nodes it stands for
//! (`DequantizeLinear` of every quantized input, the float operator, `QuantizeLinear` of the
//! output), which the QDQ folding then maps onto the same IR as a QDQ model.
//!
//! The operators and their input order (onnxruntime's contrib operator documentation and the
//! ONNX operator specification):
//! - `QLinearConv(x, xs, xz, w, ws, wz, ys, yz, B?)`: Conv attributes; `w` per-channel on axis 0;
//!   `B` int32 at scale `xs * ws`.
//! - `QLinearMatMul(a, as, az, b, bs, bz, ys, yz)`: `b` per-column (its last axis).
//! - `com.microsoft.QGemm(A, as, az, B, bs, bz, C?, ys?, yz?)`: Gemm attributes; `C` int32 at
//!   scale `as * bs`; without `ys` the output is float.
//! - `com.microsoft.QLinearAdd` / `QLinearMul(A, as, az, B, bs, bz, Cs, Cz)`.
//! - `com.microsoft.QLinearSigmoid` / `QLinearLeakyRelu` / `QLinearSoftmax` /
//!   `QLinearAveragePool` / `QLinearGlobalAveragePool` / `QLinearReduceMean(X, xs, xz, ys, yz)`.
//! - `com.microsoft.QLinearConcat(ys, yz, X0, x0s, x0z, X1, ...)`: `axis`.

use std::rc::Rc;

use super::builder::{Builder, Val};
use super::constant::Const;
use super::model::Node;
use super::proto::{self, attribute_type as at};
use crate::error::Result;
use crate::ir::DType;

/// QOperator operators rewritten into QDQ (default and `com.microsoft` domains).
pub(crate) const QOPERATOR: &[&str] = &[
    "QGemm",
    "QLinearAdd",
    "QLinearAveragePool",
    "QLinearConcat",
    "QLinearConv",
    "QLinearGlobalAveragePool",
    "QLinearLeakyRelu",
    "QLinearMatMul",
    "QLinearMul",
    "QLinearReduceMean",
    "QLinearSigmoid",
    "QLinearSoftmax",
];

/// Integer-arithmetic operators refused, with the reason.
const REFUSED: &[(&str, &str)] = &[
    (
        "DynamicQuantizeLinear",
        "computes its scale and zero point from the data at run time (dynamic quantization); the NPU needs every quantization fixed at compile time: quantize the model statically (onnxruntime quantize_static, QDQ or QOperator)",
    ),
    (
        "ConvInteger",
        "gives raw int32 accumulators that the model rescales with float arithmetic (dynamic quantization); quantize the model statically so the convolution becomes QLinearConv or a QDQ Conv",
    ),
    (
        "MatMulInteger",
        "gives raw int32 accumulators that the model rescales with float arithmetic (dynamic quantization); quantize the model statically so the product becomes QLinearMatMul or a QDQ MatMul",
    ),
];

/// Rewrites of one QOperator node: value names are made unique by prefixing the node's output.
struct Rewrite<'a> {
    n: &'a Node,
    prefix: String,
    nodes: Vec<Node>,
}

impl<'a> Rewrite<'a> {
    fn new(n: &'a Node) -> Result<Rewrite<'a>> {
        let prefix = n.output()?.to_string();
        Ok(Rewrite {
            n,
            prefix,
            nodes: Vec::new(),
        })
    }

    fn push(
        &mut self,
        name: String,
        op_type: &str,
        inputs: Vec<String>,
        output: String,
        attrs: Vec<proto::AttributeProto>,
    ) {
        self.nodes.push(Node {
            name,
            op_type: op_type.to_string(),
            domain: String::new(),
            inputs,
            outputs: vec![output],
            attrs,
        });
    }

    /// Input `i` of the QOperator node ("" when absent).
    fn input(&self, i: usize) -> String {
        self.n.input(i).unwrap_or_default().to_string()
    }

    /// `DequantizeLinear(input x, input s, input z)` (per-channel along `axis`); its output name.
    fn dequantize(
        &mut self,
        role: &str,
        x: usize,
        s: usize,
        z: usize,
        axis: Option<i64>,
    ) -> String {
        let out = format!("{}/{role}_dequantized", self.prefix);
        let attrs = axis.map(|a| vec![int_attr("axis", a)]).unwrap_or_default();
        let inputs = vec![self.input(x), self.input(s), self.input(z)];
        self.push(
            format!("{}/dequantize_{role}", self.n.name),
            "DequantizeLinear",
            inputs,
            out.clone(),
            attrs,
        );
        out
    }

    /// The float operator itself (named as the QOperator node), reading `inputs`; its output name.
    fn op(
        &mut self,
        op_type: &str,
        inputs: Vec<String>,
        attrs: Vec<proto::AttributeProto>,
    ) -> String {
        let out = format!("{}/float", self.prefix);
        self.push(self.n.name.clone(), op_type, inputs, out.clone(), attrs);
        out
    }

    /// `QuantizeLinear(x, input s, input z)` into the node's own output.
    fn quantize(&mut self, x: String, s: usize, z: usize) {
        let inputs = vec![x, self.input(s), self.input(z)];
        let out = self.prefix.clone();
        self.push(
            format!("{}/quantize", self.n.name),
            "QuantizeLinear",
            inputs,
            out,
            Vec::new(),
        );
    }
}

fn int_attr(name: &str, v: i64) -> proto::AttributeProto {
    proto::AttributeProto {
        name: name.to_string(),
        r#type: at::INT,
        i: Some(v),
        ..Default::default()
    }
}

fn ints_attr(name: &str, v: Vec<i64>) -> proto::AttributeProto {
    proto::AttributeProto {
        name: name.to_string(),
        r#type: at::INTS,
        ints: v,
        ..Default::default()
    }
}

/// The node's attributes except `drop` (QOperator-only attributes).
fn attrs_but(n: &Node, drop: &[&str]) -> Vec<proto::AttributeProto> {
    n.attrs
        .iter()
        .filter(|a| !drop.contains(&a.name.as_str()))
        .cloned()
        .collect()
}

impl Builder {
    /// Maps a QOperator node (returns false for other operators). Refused integer-arithmetic
    /// operators give an error saying why.
    pub(crate) fn qoperator(&mut self, n: &Node) -> Result<bool> {
        let op = n.op_type.as_str();
        if let Some((_, why)) = REFUSED.iter().find(|(name, _)| *name == op) {
            return Err(n.err(format!("is not supported: it {why}")));
        }
        if !QOPERATOR.contains(&op) {
            return Ok(false);
        }
        n.single_output()?;
        if n.attr_i_or("channels_last", 0)? != 0 {
            return Err(n.err("channels_last = 1 (NHWC QOperator input) is not supported"));
        }
        let rank_of = |b: &Builder, i: usize| -> Result<usize> {
            let v = b.input(n, i)?;
            Ok(b.shape_of(&v).len())
        };
        let mut r = Rewrite::new(n)?;
        match op {
            "QLinearConv" => {
                n.max_inputs(9)?;
                let x = r.dequantize("x", 0, 1, 2, None);
                let w = r.dequantize("w", 3, 4, 5, Some(0));
                let mut inputs = vec![x, w];
                if n.input(8).is_some() {
                    inputs.push(r.input(8));
                }
                let y = r.op("Conv", inputs, attrs_but(n, &[]));
                r.quantize(y, 6, 7);
            }
            "QLinearMatMul" => {
                n.max_inputs(8)?;
                let b_rank = rank_of(self, 3)?;
                let a = r.dequantize("a", 0, 1, 2, None);
                let b = r.dequantize("b", 3, 4, 5, Some(b_rank.max(1) as i64 - 1));
                let y = r.op("MatMul", vec![a, b], Vec::new());
                r.quantize(y, 6, 7);
            }
            "QGemm" => {
                n.max_inputs(9)?;
                if n.attr_f("alpha")?.is_some_and(|a| a != 1.0) {
                    return Err(n.err("alpha other than 1 is not supported (the int32 bias C is at scale A_scale * B_scale)"));
                }
                let trans_b = n.attr_i_or("transB", 0)? != 0;
                let a = r.dequantize("a", 0, 1, 2, None);
                let b = r.dequantize("b", 3, 4, 5, Some(if trans_b { 0 } else { 1 }));
                let mut inputs = vec![a, b];
                if n.input(6).is_some() {
                    inputs.push(r.input(6));
                }
                let y = r.op("Gemm", inputs, attrs_but(n, &["alpha", "beta"]));
                if n.input(7).is_some() {
                    r.quantize(y, 7, 8);
                } else {
                    // A float output: the Gemm writes the node's output itself.
                    if let Some(last) = r.nodes.last_mut() {
                        last.outputs = vec![r.prefix.clone()];
                    }
                }
            }
            "QLinearAdd" | "QLinearMul" => {
                n.max_inputs(8)?;
                let a = r.dequantize("a", 0, 1, 2, None);
                let b = r.dequantize("b", 3, 4, 5, None);
                let y = r.op(&op["QLinear".len()..], vec![a, b], Vec::new());
                r.quantize(y, 6, 7);
            }
            "QLinearSigmoid"
            | "QLinearLeakyRelu"
            | "QLinearAveragePool"
            | "QLinearGlobalAveragePool" => {
                n.max_inputs(5)?;
                let x = r.dequantize("x", 0, 1, 2, None);
                let y = r.op(
                    &op["QLinear".len()..],
                    vec![x],
                    attrs_but(n, &["channels_last"]),
                );
                r.quantize(y, 3, 4);
            }
            "QLinearSoftmax" => {
                n.max_inputs(5)?;
                let rank = rank_of(self, 0)?;
                let legacy = n.attr_i_or("opset", 13)? < 13;
                let axis = n.attr_i_or("axis", if legacy { 1 } else { -1 })?;
                let shape = {
                    let v = self.input(n, 0)?;
                    self.shape_of(&v)
                };
                let axis = softmax_axis(n, &shape, axis, legacy)?;
                debug_assert!(axis < rank.max(1));
                let x = r.dequantize("x", 0, 1, 2, None);
                let y = r.op("Softmax", vec![x], vec![int_attr("axis", axis as i64)]);
                r.quantize(y, 3, 4);
            }
            "QLinearReduceMean" => {
                n.max_inputs(5)?;
                let x = r.dequantize("x", 0, 1, 2, None);
                let axes = n.attr_ints("axes")?.unwrap_or_default();
                let keep = n.attr_i_or("keepdims", 1)?;
                let y = if self.opset >= 18 {
                    // Axes are an input from opset 18 on.
                    let name = format!("{}/axes", r.prefix);
                    if !axes.is_empty() {
                        self.bind(&name, Val::Const(Rc::new(Const::i64_vec(axes))));
                        r.op(
                            "ReduceMean",
                            vec![x, name],
                            vec![int_attr("keepdims", keep)],
                        )
                    } else {
                        r.op("ReduceMean", vec![x], vec![int_attr("keepdims", keep)])
                    }
                } else {
                    let mut attrs = vec![int_attr("keepdims", keep)];
                    if !axes.is_empty() {
                        attrs.push(ints_attr("axes", axes));
                    }
                    r.op("ReduceMean", vec![x], attrs)
                };
                r.quantize(y, 3, 4);
            }
            "QLinearConcat" => {
                let k = n.inputs.len().saturating_sub(2);
                if k == 0 || !k.is_multiple_of(3) {
                    return Err(n.err(format!(
                        "has {} inputs; expected Y_scale, Y_zero_point and a (tensor, scale, zero point) triple per input",
                        n.inputs.len()
                    )));
                }
                let xs: Vec<String> = (0..k / 3)
                    .map(|j| r.dequantize(&format!("x{j}"), 2 + 3 * j, 3 + 3 * j, 4 + 3 * j, None))
                    .collect();
                let y = r.op("Concat", xs, attrs_but(n, &[]));
                r.quantize(y, 0, 1);
            }
            _ => return Ok(false),
        }
        for sub in std::mem::take(&mut r.nodes) {
            self.node(&sub)?;
        }
        Ok(true)
    }
}

/// The softmax axis of opset-13 semantics for `axis` of a tensor of `shape`. Before opset 13
/// Softmax works on the input flattened to 2-D at `axis`: that is a softmax over one axis when
/// every dimension after `axis` is 1, or when `axis` is the last one.
pub(crate) fn softmax_axis(n: &Node, shape: &[usize], axis: i64, legacy: bool) -> Result<usize> {
    let rank = shape.len();
    let a = super::qdq::normalize_axis(axis, rank)
        .ok_or_else(|| n.err(format!("axis {axis} is out of range for rank {rank}")))?;
    if !legacy {
        return Ok(a);
    }
    if shape[a + 1..].iter().all(|&d| d == 1) {
        return Ok(a);
    }
    // The flattened rows span several axes; the softmax of the last one is the same only if
    // all but the last of them are 1.
    if shape[a..rank - 1].iter().all(|&d| d == 1) {
        return Ok(rank - 1);
    }
    Err(n.err(format!(
        "softmax (before opset 13) over dimensions {a}.. of shape {shape:?} spans several axes; not supported"
    )))
}

/// Operators that QOperator models apply to integer tensors directly (they move or select
/// values, so they compute in the input's quantization).
const INT_TRANSPARENT: &[&str] = &[
    "Concat",
    "Flatten",
    "GlobalMaxPool",
    "MaxPool",
    "Pad",
    "Reshape",
    "Resize",
    "Squeeze",
    "Transpose",
    "Unsqueeze",
];

impl Builder {
    /// Maps a value-moving operator that reads integer tensors (a QOperator model's MaxPool,
    /// Reshape, ...) as the QDQ operator on their dequantized view, quantized back to the first
    /// integer input's quantization. Returns false when it does not apply.
    pub(crate) fn int_passthrough(&mut self, n: &Node) -> Result<bool> {
        if !INT_TRANSPARENT.contains(&n.op_type.as_str()) {
            return Ok(false);
        }
        let mut node = n.clone();
        let mut quant = None;
        for (i, name) in n.inputs.iter().enumerate() {
            let Some(Val::Int(a)) = self.vals.get(name).cloned() else {
                continue;
            };
            // Integers of unknown meaning are moved as they are (the mapping without a view).
            let Some(q) = self.quant_of(a.id) else {
                return Ok(false);
            };
            if quant.is_none() {
                quant = Some((q, self.tensor(a.id).dtype));
            }
            let alias = format!("{name}/as_dequantized");
            self.bind(&alias, Val::Deq(a));
            node.inputs[i] = alias;
        }
        let Some((q, dtype)) = quant else {
            return Ok(false);
        };
        // An integer Pad's constant_value is an integer of the data's type (onnxruntime writes
        // the zero point): its real value is that integer dequantized.
        if n.op_type == "Pad"
            && let Some(name) = n.input(2)
            && let Some(Val::Const(c)) = self.vals.get(name).cloned()
            && c.elems.ir_dtype().is_some_and(|t| t != DType::F32)
            && q.scale.len() == 1
        {
            let alias = format!("{name}/as_dequantized");
            let qp = super::quant_params::QParams {
                scale: q.scale.clone(),
                zero_point: q.zero_point.clone(),
                dtype,
                axis: None,
            };
            self.bind(
                &alias,
                Val::DeqConst(Rc::new(super::builder::QConst {
                    name: name.to_string(),
                    c,
                    q: qp,
                })),
            );
            node.inputs[2] = alias;
        }
        n.single_output()?;
        let out = n.output()?.to_string();
        let tmp = format!("{out}/dequantized");
        node.outputs = vec![tmp.clone()];
        self.node(&node)?;
        let v = match self.val(n, &tmp)? {
            Val::Deq(a) => Val::Int(a),
            Val::Pending(p) => {
                let id = self.finalize(&p, &q, dtype, &out)?;
                Val::Int(super::builder::Act {
                    id,
                    perm: p.perm.clone(),
                })
            }
            other => other,
        };
        self.bind(&out, v);
        Ok(true)
    }
}
