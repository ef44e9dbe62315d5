//! Elementwise f32 functions of ONNX float islands ([`OpKind::FloatUnary`]): the operators a
//! quantizer left in float run in single precision, value by value, with the very function the
//! CPU kernel uses (`npu_rt::cpu::float::unary_f32`), so both agree bit for bit.
//!
//! [`OpKind::FloatUnary`]: crate::ir::OpKind::FloatUnary

use npu_rt::cpu::float as f;

use super::util::{bad_data, node_err};
use super::{Kernel, Prepared};
use crate::error::Result;
use crate::ir::{DType, FloatFn, Graph, Op};
use crate::value::Data;

/// A prepared [`FloatFn`]: its kernel code and parameters.
pub struct FloatUnary {
    pub(crate) func: u32,
    pub(crate) alpha: f32,
    pub(crate) beta: f32,
}

/// Kernel code and parameters `(func, alpha, beta)` of `func`.
fn code(func: FloatFn) -> (u32, f32, f32) {
    match func {
        FloatFn::Sigmoid => (f::FN_SIGMOID, 0.0, 0.0),
        FloatFn::Tanh => (f::FN_TANH, 0.0, 0.0),
        FloatFn::LeakyRelu { alpha } => (f::FN_LEAKY_RELU, alpha, 0.0),
        FloatFn::HardSigmoid { alpha, beta } => (f::FN_HARD_SIGMOID, alpha, beta),
        FloatFn::Elu { alpha } => (f::FN_ELU, alpha, 0.0),
        FloatFn::Exp => (f::FN_EXP, 0.0, 0.0),
        FloatFn::Neg => (f::FN_NEG, 0.0, 0.0),
        FloatFn::Abs => (f::FN_ABS, 0.0, 0.0),
    }
}

impl FloatUnary {
    pub(super) fn prepare(g: &Graph, op: &Op, func: FloatFn) -> Result<Prepared> {
        Ok(Prepared::new(
            FloatUnary::new(g, op, func)?,
            vec![op.inputs[0]],
        ))
    }

    /// Checks the operands (one f32 input, one f32 output of the same shape).
    pub(crate) fn new(g: &Graph, op: &Op, func: FloatFn) -> Result<FloatUnary> {
        let ([x], [y]) = (op.inputs.as_slice(), op.outputs.as_slice()) else {
            return Err(node_err(op, "expects one input and one output"));
        };
        let (xt, yt) = (&g.tensors[*x], &g.tensors[*y]);
        if xt.dtype != DType::F32 || yt.dtype != DType::F32 {
            return Err(node_err(
                op,
                format!(
                    "{} of {} to {}: float functions take and give f32",
                    func.name(),
                    xt.dtype,
                    yt.dtype
                ),
            ));
        }
        if xt.shape != yt.shape {
            return Err(node_err(
                op,
                format!(
                    "input shape {:?} differs from output shape {:?}",
                    xt.shape, yt.shape
                ),
            ));
        }
        let (func, alpha, beta) = code(func);
        Ok(FloatUnary { func, alpha, beta })
    }
}

impl Kernel for FloatUnary {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        let Data::F32(x) = inputs[0] else {
            return Err(bad_data());
        };
        x.iter()
            .map(|&v| f::unary_f32(self.func, self.alpha, self.beta, v).ok_or_else(bad_data))
            .collect::<Result<Vec<f32>>>()
            .map(Data::F32)
    }
}
