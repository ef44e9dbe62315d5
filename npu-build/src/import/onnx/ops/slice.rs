//! ONNX `Slice` (opset 1 attributes, opset 10+ inputs with axes and steps) and `Split`
//! (attribute or input `split`, opset 18 `num_outputs`) on activations: IR Slice ops over the
//! IR tensor, whatever its layout (an NCHW value's axes map through the activation's `perm`).
//! The values are moved as they are, keeping the input's quantization (a following
//! `QuantizeLinear` with other parameters becomes its own requantization).

use super::super::builder::{Act, Builder, Val, is_quantized_type};
use super::super::model::Node;
use super::super::qdq::normalize_axis;
use crate::error::Result;
use crate::ir::OpKind;

/// `(start, step, count)` of every axis of a tensor of `dims` for ONNX Slice's `starts`,
/// `ends`, optional `axes` and `steps`: negative indices count from the end, then starts and
/// ends are clamped to `[0, dim]` (forward) or `[0, dim - 1]` and `[-1, dim - 1]` (backward).
pub(crate) fn slice_ranges(
    n: &Node,
    dims: &[usize],
    starts: &[i64],
    ends: &[i64],
    axes: Option<&[i64]>,
    steps: Option<&[i64]>,
) -> Result<Vec<(i64, i64, usize)>> {
    let r = dims.len();
    let axes: Vec<usize> = match axes {
        Some(a) => a
            .iter()
            .map(|&a| {
                normalize_axis(a, r).ok_or_else(|| n.err(format!("axis {a} is out of range")))
            })
            .collect::<Result<_>>()?,
        None => (0..starts.len().min(r)).collect(),
    };
    let steps = match steps {
        Some(s) => s.to_vec(),
        None => vec![1; axes.len()],
    };
    if starts.len() != axes.len() || ends.len() != axes.len() || steps.len() != axes.len() {
        return Err(n.err("starts, ends, axes and steps differ in length"));
    }
    let mut seen = vec![false; r];
    let mut ranges: Vec<(i64, i64, usize)> = dims.iter().map(|&d| (0, 1, d)).collect();
    for (k, &a) in axes.iter().enumerate() {
        if std::mem::replace(&mut seen[a], true) {
            return Err(n.err(format!("axis {a} is sliced twice")));
        }
        let dim = i64::try_from(dims[a]).map_err(|_| n.err("dimension too large"))?;
        let step = steps[k];
        if step == 0 {
            return Err(n.err("step 0"));
        }
        if dim == 0 {
            ranges[a] = (0, 1, 0);
            continue;
        }
        let norm = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
        let (s, e) = if step > 0 {
            (norm(starts[k]).clamp(0, dim), norm(ends[k]).clamp(0, dim))
        } else {
            (
                norm(starts[k]).clamp(0, dim - 1),
                norm(ends[k]).clamp(-1, dim - 1),
            )
        };
        // Elements s, s + step, ... strictly before e (both within -1..=dim).
        let span = if step > 0 { e - s } else { s - e };
        let count = if span <= 0 {
            0
        } else {
            (span as u64 - 1) / step.unsigned_abs() + 1
        };
        ranges[a] = (s, step, count as usize);
    }
    Ok(ranges)
}

impl Builder {
    /// The activation operand of a Slice/Split (integer or dequantized).
    fn moved_operand(&self, n: &Node) -> Result<(Act, bool)> {
        match self.input(n, 0)? {
            Val::Int(a) => Ok((a, true)),
            Val::Deq(a) => Ok((a, false)),
            other => Err(self.not_quantized(n, 0, &other)),
        }
    }

    /// Emits an IR Slice of `a` over the ONNX-order `ranges` into a new tensor `name`.
    fn slice_of(
        &mut self,
        n: &Node,
        a: &Act,
        ranges: &[(i64, i64, usize)],
        name: &str,
    ) -> Result<Act> {
        let t = self.tensor(a.id).clone();
        let rank = t.shape.len();
        if ranges.len() != rank || a.perm.len() != rank {
            return Err(n.err("the slice does not match the input's rank"));
        }
        let mut begin = vec![0usize; rank];
        let mut step = vec![1i64; rank];
        let mut size = t.shape.clone();
        for (l, &(s, st, count)) in ranges.iter().enumerate() {
            let d = a.perm[l];
            begin[d] = if count == 0 { 0 } else { s as usize };
            step[d] = st;
            size[d] = count;
        }
        let out = self.add_tensor(name, size.clone(), t.dtype, None, None);
        self.push_op(
            &n.name,
            OpKind::Slice { begin, step, size },
            vec![a.id],
            vec![out],
        );
        if is_quantized_type(t.dtype) {
            self.same_quant(a.id, out, n)?;
        }
        Ok(Act {
            id: out,
            perm: a.perm.clone(),
        })
    }

    /// `Slice` of an activation.
    pub(crate) fn slice(&mut self, n: &Node) -> Result<()> {
        let (a, integer) = self.moved_operand(n)?;
        let dims = self.act_shape(&a);
        let ranges = if self.opset < 10 {
            n.max_inputs(1)?;
            let starts = n
                .attr_ints("starts")?
                .ok_or_else(|| n.err("starts is missing"))?;
            let ends = n
                .attr_ints("ends")?
                .ok_or_else(|| n.err("ends is missing"))?;
            let axes = n.attr_ints("axes")?;
            slice_ranges(n, &dims, &starts, &ends, axes.as_deref(), None)?
        } else {
            n.max_inputs(5)?;
            let starts = self.ints_input(n, 1)?;
            let ends = self.ints_input(n, 2)?;
            let axes = match n.input(3) {
                Some(_) => Some(self.ints_input(n, 3)?),
                None => None,
            };
            let steps = match n.input(4) {
                Some(_) => Some(self.ints_input(n, 4)?),
                None => None,
            };
            slice_ranges(n, &dims, &starts, &ends, axes.as_deref(), steps.as_deref())?
        };
        let name = n.output()?.to_string();
        let out = self.slice_of(n, &a, &ranges, &name)?;
        self.bind_output(
            n,
            if integer {
                Val::Int(out)
            } else {
                Val::Deq(out)
            },
        )
    }

    /// `Split` of an activation into its outputs.
    pub(crate) fn split(&mut self, n: &Node) -> Result<()> {
        let (a, integer) = self.moved_operand(n)?;
        let dims = self.act_shape(&a);
        let rank = dims.len();
        let axis = n.attr_i_or("axis", 0)?;
        let axis = normalize_axis(axis, rank)
            .ok_or_else(|| n.err(format!("axis {axis} is out of range for rank {rank}")))?;
        let outs: Vec<String> = n.outputs.clone();
        if outs.is_empty() {
            return Err(n.err("has no output"));
        }
        let given = if self.opset < 13 {
            n.max_inputs(1)?;
            n.attr_ints("split")?
        } else {
            n.max_inputs(2)?;
            match n.input(1) {
                Some(_) => Some(self.ints_input(n, 1)?),
                None => None,
            }
        };
        let extent = dims[axis];
        let parts: Vec<usize> = match given {
            Some(s) => {
                if s.len() != outs.len() || s.iter().any(|&v| v < 0) {
                    return Err(n.err(format!("split {s:?} for {} outputs", outs.len())));
                }
                let parts: Vec<usize> = s.iter().map(|&v| v as usize).collect();
                if parts.iter().try_fold(0usize, |a, &p| a.checked_add(p)) != Some(extent) {
                    return Err(n.err(format!("split {s:?} does not add up to {extent}")));
                }
                parts
            }
            None => {
                let k = match n.attr_i("num_outputs")? {
                    Some(k) if usize::try_from(k).ok() == Some(outs.len()) => outs.len(),
                    Some(k) => {
                        return Err(n.err(format!(
                            "num_outputs {k} but the node has {} outputs",
                            outs.len()
                        )));
                    }
                    None => {
                        if !extent.is_multiple_of(outs.len()) {
                            return Err(n.err(format!(
                                "an extent of {extent} does not split into {} equal parts",
                                outs.len()
                            )));
                        }
                        outs.len()
                    }
                };
                // Opset 18: parts of ceil(extent / k), the last one smaller.
                let chunk = extent.div_ceil(k);
                (0..k)
                    .map(|i| chunk.min(extent.saturating_sub(i * chunk)))
                    .collect()
            }
        };
        let mut at = 0usize;
        for (name, &part) in outs.iter().zip(&parts) {
            let mut ranges: Vec<(i64, i64, usize)> = dims.iter().map(|&d| (0, 1, d)).collect();
            ranges[axis] = (at as i64, 1, part);
            at += part;
            if name.is_empty() {
                continue;
            }
            let out = self.slice_of(n, &a, &ranges, name)?;
            self.bind(
                name,
                if integer {
                    Val::Int(out)
                } else {
                    Val::Deq(out)
                },
            );
        }
        Ok(())
    }
}
