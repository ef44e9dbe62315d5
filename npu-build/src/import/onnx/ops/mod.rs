//! ONNX operators mapped onto the IR: the operator table (`integer_node`, which
//! `dispatch` tries after the other mappings) and helpers shared by the operators.

mod conv;
pub(crate) mod elementwise;
mod matmul;
mod permute;
mod pool;
mod reduce;
mod resize;
pub(crate) mod shape;
mod softmax;
mod weights;
// movea
pub(crate) mod slice;
// matmul
mod transpose_conv;

use std::rc::Rc;

use super::builder::{Builder, Pending, Val};
use super::model::Node;
use crate::error::{Error, Result};
use crate::ir::{OpKind, TensorId};

impl Builder {
    /// The integer (or single-function float) mapping of node `n`.
    pub(crate) fn integer_node(&mut self, n: &Node) -> Result<()> {
        match n.op_type.as_str() {
            "QuantizeLinear" => self.quantize_linear(n),
            "DequantizeLinear" => self.dequantize_linear(n),
            "Conv" => self.conv(n),
            "MatMul" => self.matmul(n),
            "Gemm" => self.gemm(n),
            // matmul: MatMul + Add(bias) of a 3-D input (tf2onnx's Dense) is one FullyConnected.
            "Add" if self.fold_fc_bias(n)? => Ok(()),
            "Add" | "Sub" | "Mul" => self.binary(n),
            "Relu" | "Clip" | "Max" | "Min" => self.activation(n),
            "AveragePool" | "MaxPool" => self.pool(n),
            "GlobalAveragePool" | "GlobalMaxPool" => self.global_pool(n),
            "ReduceMean" => self.reduce_mean(n),
            "Softmax" => self.softmax(n),
            "Concat" => self.concat(n),
            "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" => self.reshape(n),
            "Transpose" => self.transpose(n),
            "Identity" => {
                let v = self.input(n, 0)?;
                self.bind_output(n, v)
            }
            "Pad" => self.pad(n),
            "Resize" => self.resize(n),
            // movea
            "Slice" => self.slice(n),
            "Split" => self.split(n),
            "ConvTranspose" => self.conv_transpose(n),
            // moveb
            "Tile" => self.tile(n),
            "ReverseSequence" => self.reverse_sequence(n),
            "Gather" => self.gather(n),
            "DepthToSpace" | "SpaceToDepth" => self.space_depth(n),
            "Abs" | "Neg" => self.unary_math(n),
            "PRelu" => self.binary(n),
            "ReduceSum" | "ReduceMax" | "ReduceMin" => self.reduce(n),
            "ArgMax" | "ArgMin" => self.arg_min_max(n),
            // The fallback after every known mapping: a float island.
            _ if self.float_island(n)? => Ok(()),
            _ => Err(self.unsupported(n)),
        }
    }

    /// The error for an operand that is not a dequantized tensor.
    pub(crate) fn not_quantized(&self, n: &Node, i: usize, v: &Val) -> Error {
        let name = n.inputs.get(i).cloned().unwrap_or_default();
        let hint = match v {
            Val::Int(_) => "integer arithmetic without DequantizeLinear is not supported",
            Val::Float(_) | Val::Const(_) => {
                "float arithmetic is not supported: the model must be quantized (QDQ)"
            }
            Val::Pending(_) => {
                "the producer's float output must be quantized by a QuantizeLinear first"
            }
            _ => "a dequantized (QDQ) tensor is expected",
        };
        n.err(format!("input {i} ('{name}') is {}: {hint}", v.kind_name()))
    }

    /// A pending op for node `n`.
    pub(crate) fn pending(
        &self,
        n: &Node,
        kind: OpKind,
        inputs: Vec<TensorId>,
        shape: Vec<usize>,
        perm: Vec<usize>,
    ) -> Pending {
        Pending {
            node: n.name.clone(),
            op_type: n.op_type.clone(),
            kind,
            inputs,
            shape,
            perm,
            keep_quant_of: None,
            inner: None,
            float_ok: false,
            source: Some(Rc::new(n.clone())),
        }
    }
}

/// A non-negative attribute value as `usize`.
pub(crate) fn to_usize(n: &Node, what: &str, v: i64) -> Result<usize> {
    usize::try_from(v).map_err(|_| n.err(format!("{what} {v} is negative")))
}

/// A positive attribute value as `usize`.
pub(crate) fn to_positive(n: &Node, what: &str, v: i64) -> Result<usize> {
    match usize::try_from(v) {
        Ok(x) if x > 0 => Ok(x),
        _ => Err(n.err(format!("{what} {v} must be positive"))),
    }
}
