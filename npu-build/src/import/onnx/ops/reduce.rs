//! `ReduceSum`, `ReduceMax`, `ReduceMin`, `ArgMax`, `ArgMin`, and the `Cast` of an index.

use super::super::builder::{Act, Builder, Val};
use super::super::model::Node;
use super::super::qdq::normalize_axis;
use crate::error::Result;
use crate::ir::{DType, OpKind, ReduceOp};

/// ONNX `TensorProto.DataType` codes of the index types.
const ONNX_INT32: i64 = 6;
const ONNX_INT64: i64 = 7;

impl Builder {
    /// The ONNX axes a reduction node `n` of a rank-`rank` input reduces: input 1 from opset
    /// `input_from` on, the `axes` attribute before; none given means every axis, or `None`
    /// when `noop_with_empty_axes` asks for the input unchanged. Negative axes count from the
    /// end.
    pub(crate) fn reduce_axes(
        &self,
        n: &Node,
        rank: usize,
        input_from: i64,
    ) -> Result<Option<Vec<usize>>> {
        let axes = if self.opset >= input_from {
            match n.input(1) {
                Some(_) => self.ints_input(n, 1)?,
                None => Vec::new(),
            }
        } else {
            n.attr_ints("axes")?.unwrap_or_default()
        };
        if axes.is_empty() {
            if n.attr_i_or("noop_with_empty_axes", 0)? != 0 {
                return Ok(None);
            }
            return Ok(Some((0..rank).collect()));
        }
        axes.iter()
            .map(|&a| {
                normalize_axis(a, rank)
                    .ok_or_else(|| n.err(format!("axis {a} is out of range for rank {rank}")))
            })
            .collect::<Result<_>>()
            .map(Some)
    }

    /// `ReduceSum` (axes from input 1 since opset 13), `ReduceMax` / `ReduceMin` (input 1 since
    /// opset 18, the `axes` attribute before) of a dequantized tensor.
    pub(crate) fn reduce(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(2)?;
        let x = match self.input(n, 0)? {
            Val::Deq(a) => a,
            other => return Err(self.not_quantized(n, 0, &other)),
        };
        let (op, input_from) = match n.op_type.as_str() {
            "ReduceSum" => (ReduceOp::Sum, 13),
            "ReduceMax" => (ReduceOp::Max, 18),
            _ => (ReduceOp::Min, 18),
        };
        let keep = n.attr_i_or("keepdims", 1)? != 0;
        let Some(axes) = self.reduce_axes(n, x.perm.len(), input_from)? else {
            return self.bind_output(n, Val::Deq(x));
        };
        self.reduce_over(n, x, &axes, keep, |axes, keep_dims| OpKind::Reduce {
            op,
            axes,
            keep_dims,
        })
    }

    /// `ArgMax` / `ArgMin` of a dequantized (or integer) tensor: int64 indices, the axis kept
    /// as 1 when `keepdims` (a Reshape after the IR operator, which drops it).
    pub(crate) fn arg_min_max(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(1)?;
        let x = match self.input(n, 0)? {
            Val::Deq(a) | Val::Int(a) => a,
            other => return Err(self.not_quantized(n, 0, &other)),
        };
        if n.attr_i_or("select_last_index", 0)? != 0 {
            return Err(n.err(
                "select_last_index = 1 is not supported (TFLite's ARG_MAX keeps the first index)",
            ));
        }
        let rank = x.perm.len();
        let a = n.attr_i_or("axis", 0)?;
        let axis = normalize_axis(a, rank)
            .ok_or_else(|| n.err(format!("axis {a} is out of range for rank {rank}")))?;
        let keep = n.attr_i_or("keepdims", 1)? != 0;
        let ir_axis = x.perm[axis];
        let in_shape = self.tensor(x.id).shape.clone();
        let shape: Vec<usize> = in_shape
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != ir_axis)
            .map(|(_, &d)| d)
            .collect();
        // Remaining ONNX dims keep their order; their IR positions are renumbered.
        let perm: Vec<usize> = x
            .perm
            .iter()
            .filter(|&&p| p != ir_axis)
            .map(|&p| if p > ir_axis { p - 1 } else { p })
            .collect();
        let out_name = n.output()?.to_string();
        let name = if keep {
            format!("{out_name}_squeezed")
        } else {
            out_name.clone()
        };
        let id = self.add_tensor(&name, shape, DType::I64, None, None);
        let kind = OpKind::ArgMinMax {
            axis: ir_axis,
            max: n.op_type == "ArgMax",
        };
        self.push_op(&n.name, kind, vec![x.id], vec![id]);
        let mut act = Act { id, perm };
        if keep {
            let mut onnx_shape = self.act_shape(&x);
            onnx_shape[axis] = 1;
            let kept = self.reshaped(&act, &onnx_shape, &out_name, n)?;
            act = Act {
                id: kept,
                perm: (0..rank).collect(),
            };
        }
        self.bind_output(n, Val::Int(act))
    }

    /// `Cast` of an ArgMax / ArgMin result to int32 or int64: the index operator writes that
    /// type itself. Returns false for any other Cast (left to constant folding).
    pub(crate) fn cast_index(&mut self, n: &Node) -> Result<bool> {
        let Ok(Val::Int(a)) = self.input(n, 0) else {
            return Ok(false);
        };
        let to = n.attr_i_or("to", 0)?;
        let producer = self.g.ops.iter().position(|op| op.outputs.contains(&a.id));
        let Some(p) = producer else {
            return Ok(false);
        };
        // The index may pass through the Reshape of `keepdims`.
        let mut chain = vec![a.id];
        let mut k = p;
        if self.g.ops[k].kind == OpKind::Reshape {
            let src = self.g.ops[k].inputs[0];
            match self.g.ops.iter().position(|op| op.outputs.contains(&src)) {
                Some(q) => {
                    chain.push(src);
                    k = q;
                }
                None => return Ok(false),
            }
        }
        if !matches!(self.g.ops[k].kind, OpKind::ArgMinMax { .. }) {
            return Ok(false);
        }
        let dtype = match to {
            ONNX_INT32 => DType::I32,
            ONNX_INT64 => DType::I64,
            other => {
                return Err(n.err(format!(
                    "Cast of an index to ONNX type {other} is not supported (int32, int64 are)"
                )));
            }
        };
        // Retype only what this Cast alone reads: an earlier reader saw int64 indices.
        let read_elsewhere = chain.iter().any(|&t| {
            self.g
                .ops
                .iter()
                .filter(|op| op.inputs.contains(&t))
                .count()
                > usize::from(t != a.id)
        });
        if read_elsewhere && dtype != self.tensor(a.id).dtype {
            return Err(n.err("Cast of an index that other operators also read is not supported"));
        }
        for &t in &chain {
            self.g.tensors[t].dtype = dtype;
        }
        self.bind_output(n, Val::Int(a))?;
        Ok(true)
    }
}
