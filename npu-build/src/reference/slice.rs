//! Slice: a strided box of the input, raw values copied.
//!
//! TFLite's SLICE, STRIDED_SLICE, SPLIT, SPLIT_V and UNPACK all copy elements without touching
//! their quantization (`reference_ops::Slice`, `StridedSlice`, `Split`, `Unpack`); the importers
//! resolve their attributes (masks, negative indices, `-1` sizes, split points) into one
//! `begin`/`step`/`size` box per output, so a single kernel serves all of them. See
//! `docs/movea.md`.

use super::util::{bad_data, node_err};
use super::{Kernel, Prepared};
use crate::error::Result;
use crate::ir::{DType, Graph, Op};
use crate::value::Data;

/// A prepared slice: the input shape and the box, checked to lie inside the input.
pub struct Slice {
    pub(crate) in_shape: Vec<usize>,
    pub(crate) begin: Vec<usize>,
    pub(crate) step: Vec<i64>,
    pub(crate) size: Vec<usize>,
}

impl Slice {
    pub(super) fn prepare(
        g: &Graph,
        op: &Op,
        begin: &[usize],
        step: &[i64],
        size: &[usize],
    ) -> Result<Prepared> {
        Ok(Prepared::new(
            Slice::new(g, op, begin, step, size)?,
            vec![op.inputs[0]],
        ))
    }

    /// Checks the box against the input and output tensors.
    pub(crate) fn new(
        g: &Graph,
        op: &Op,
        begin: &[usize],
        step: &[i64],
        size: &[usize],
    ) -> Result<Slice> {
        let (x, y) = match (op.inputs.as_slice(), op.outputs.as_slice()) {
            ([x], [y]) => (*x, *y),
            _ => return Err(node_err(op, "expects one input and one output")),
        };
        let (xt, yt) = (&g.tensors[x], &g.tensors[y]);
        if xt.dtype != yt.dtype || xt.dtype == DType::I64 {
            return Err(node_err(
                op,
                format!(
                    "input '{}' ({}) and output '{}' ({}) must have one type (not i64)",
                    xt.name, xt.dtype, yt.name, yt.dtype
                ),
            ));
        }
        let rank = xt.shape.len();
        if begin.len() != rank || step.len() != rank || size.len() != rank {
            return Err(node_err(
                op,
                format!(
                    "begin {begin:?}, step {step:?} and size {size:?} must have the input's rank {rank}"
                ),
            ));
        }
        for d in 0..rank {
            let n = xt.shape[d];
            if step[d] == 0 {
                return Err(node_err(op, format!("step of dimension {d} is 0")));
            }
            if size[d] == 0 {
                continue;
            }
            // The first and last index read must both lie inside the dimension.
            let last = (size[d] as i128 - 1) * i128::from(step[d]) + begin[d] as i128;
            if begin[d] >= n || last < 0 || last >= n as i128 {
                return Err(node_err(
                    op,
                    format!(
                        "dimension {d}: begin {}, step {}, size {} reads outside input '{}' {:?}",
                        begin[d], step[d], size[d], xt.name, xt.shape
                    ),
                ));
            }
        }
        let count = size.iter().try_fold(1usize, |a, &s| a.checked_mul(s));
        if count != Some(yt.elements()) {
            return Err(node_err(
                op,
                format!(
                    "the box {size:?} does not have the {} elements of output '{}' {:?}",
                    yt.elements(),
                    yt.name,
                    yt.shape
                ),
            ));
        }
        Ok(Slice {
            in_shape: xt.shape.clone(),
            begin: begin.to_vec(),
            step: step.to_vec(),
            size: size.to_vec(),
        })
    }

    /// Input element index of every output element, in output order.
    pub(crate) fn indices(&self) -> Vec<usize> {
        let rank = self.in_shape.len();
        let total: usize = self.size.iter().product();
        let mut strides = vec![1i64; rank];
        for d in (0..rank.saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * self.in_shape[d + 1] as i64;
        }
        let mut out = Vec::with_capacity(total);
        if total == 0 {
            return out;
        }
        let mut idx = vec![0usize; rank];
        loop {
            let mut at = 0i64;
            for d in 0..rank {
                at += (self.begin[d] as i64 + idx[d] as i64 * self.step[d]) * strides[d];
            }
            out.push(at as usize);
            // Odometer over the box, last dimension fastest.
            let mut d = rank;
            loop {
                if d == 0 {
                    return out;
                }
                d -= 1;
                idx[d] += 1;
                if idx[d] < self.size[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
    }
}

impl Kernel for Slice {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        let idx = self.indices();
        let want: usize = self.in_shape.iter().product();
        macro_rules! gather {
            ($v:expr, $variant:ident) => {{
                if $v.len() != want {
                    return Err(bad_data());
                }
                Data::$variant(idx.iter().map(|&i| $v[i]).collect())
            }};
        }
        Ok(match inputs.first().ok_or_else(bad_data)? {
            Data::I8(v) => gather!(v, I8),
            Data::U8(v) => gather!(v, U8),
            Data::I16(v) => gather!(v, I16),
            Data::I32(v) => gather!(v, I32),
            Data::F32(v) => gather!(v, F32),
            Data::I64(v) => gather!(v, I64),
        })
    }
}
