//! Float islands: operators a quantizer left in float (between a `DequantizeLinear` and a
//! `QuantizeLinear`, as onnxruntime leaves Sigmoid, Tanh, ... when told to, or when it has no
//! quantized form for them), and operators whose output quantization the NPU cannot produce.
//! They run on the CPU in f32 exactly as the model states: dequantize, f32 function, quantize,
//! as onnxruntime computes them.
//!
//! This is the importer's fallback: it runs after every recognition of a known operator or
//! function (an integer form is always preferred), from one entry point per case:
//! [`Builder::float_island`] for operators without an integer mapping and `Builder::finalize`
//! for a Softmax whose output quantization is not TFLite's (its test, `softmax_in_float`, lives
//! in `builder` with its one caller).

use super::builder::{Act, Builder, Val};
use super::model::Node;
use crate::error::Result;
use crate::ir::{DType, FloatFn, OpKind};

/// Operators the importer computes in float when nothing maps them to integers.
pub(crate) const FLOAT_ISLAND: &[&str] = &[
    "Abs",
    "Elu",
    "Exp",
    "HardSigmoid",
    "LeakyRelu",
    "Neg",
    "Sigmoid",
    "Tanh",
];

/// The f32 function of ONNX operator node `n`, if it is one (`Pow`, which needs its exponent,
/// is not: see `float_ops`).
pub(crate) fn float_fn(n: &Node) -> Result<Option<FloatFn>> {
    let alpha = |default: f32| -> Result<f32> { Ok(n.attr_f("alpha")?.unwrap_or(default)) };
    Ok(Some(match n.op_type.as_str() {
        "Sigmoid" => FloatFn::Sigmoid,
        "Tanh" => FloatFn::Tanh,
        "LeakyRelu" => FloatFn::LeakyRelu {
            alpha: alpha(0.01)?,
        },
        "HardSigmoid" => FloatFn::HardSigmoid {
            alpha: alpha(0.2)?,
            beta: n.attr_f("beta")?.unwrap_or(0.5),
        },
        "Elu" => FloatFn::Elu { alpha: alpha(1.0)? },
        "Exp" => FloatFn::Exp,
        "Neg" => FloatFn::Neg,
        "Abs" => FloatFn::Abs,
        "Sqrt" => FloatFn::Sqrt,
        "Reciprocal" => FloatFn::Reciprocal,
        "Erf" => FloatFn::Erf,
        "Relu" => FloatFn::Relu,
        "Gelu" => FloatFn::Gelu {
            approximate: match n.attr_s("approximate")?.as_deref() {
                None | Some("none") => false,
                Some("tanh") => true,
                Some(other) => {
                    return Err(n.err(format!("approximate '{other}' is not 'none' or 'tanh'")));
                }
            },
        },
        _ => return Ok(None),
    }))
}

impl Builder {
    /// Maps node `n` onto an f32 operator if it is a float-island function of a dequantized or
    /// float value (returns false for other operators). Its result is a float value: a
    /// following `QuantizeLinear` quantizes it.
    pub(crate) fn float_island(&mut self, n: &Node) -> Result<bool> {
        if !(n.domain.is_empty() || n.domain == "ai.onnx") {
            return Ok(false);
        }
        let Some(func) = float_fn(n)? else {
            return Ok(false);
        };
        n.max_inputs(1)?;
        let x = match self.input(n, 0)? {
            Val::Deq(a) => Act {
                id: self.dequantized(a.id, &n.name)?,
                perm: a.perm,
            },
            Val::Float(a) => a,
            Val::Pending(p) => Act {
                id: self.finalize_float(&p, &format!("{}_float", p.node))?,
                perm: p.perm.clone(),
            },
            other => {
                return Err(n.err(format!(
                    "input 0 is {}: a float function needs a dequantized or float tensor",
                    other.kind_name()
                )));
            }
        };
        let shape = self.tensor(x.id).shape.clone();
        let out = self.add_tensor(n.output()?, shape, DType::F32, None, None);
        self.push_op(&n.name, OpKind::FloatUnary(func), vec![x.id], vec![out]);
        self.bind_output(
            n,
            Val::Float(Act {
                id: out,
                perm: x.perm,
            }),
        )?;
        Ok(true)
    }
}
