//! `MatMul` and `Gemm` with constant weights -> IR FullyConnected (weights `[O, I]`).

use std::rc::Rc;

use super::super::builder::{Builder, Val};
use super::super::layout;
use super::super::model::Node;
use crate::error::Result;
use crate::ir::{Activation, OpKind};

impl Builder {
    /// `MatMul(A, B)` with constant `B [K, N]`.
    pub(crate) fn matmul(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(2)?;
        if matches!(self.input(n, 1)?, Val::Deq(_)) {
            return Err(
                n.err("MatMul of two activations is not supported (B must be constant weights)")
            );
        }
        let wq = self.weights_input(n, 1)?;
        let [k, out_ch] = wq.c.dims[..] else {
            return Err(n.err(format!("weights shape {:?} is not [K, N]", wq.c.dims)));
        };
        self.fully_connected(n, k, out_ch, &[1, 0], 1, None)
    }

    /// `Gemm(A, B, C)`: `alpha = beta = 1`, `transA = 0`, constant `B`.
    pub(crate) fn gemm(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(3)?;
        if n.attr_i_or("transA", 0)? != 0 {
            return Err(n.err("transA=1 is not supported"));
        }
        for a in ["alpha", "beta"] {
            if let Some(v) = n.attr_f(a)?
                && v != 1.0
            {
                return Err(n.err(format!("{a}={v} is not supported (only 1)")));
            }
        }
        let wq = self.weights_input(n, 1)?;
        let trans_b = n.attr_i_or("transB", 0)? != 0;
        let (k, out_ch, t, axis): (usize, usize, &[usize], usize) =
            match (wq.c.dims.as_slice(), trans_b) {
                (&[kk, nn], false) => (kk, nn, &[1, 0], 1),
                (&[nn, kk], true) => (kk, nn, &[0, 1], 0),
                _ => return Err(n.err(format!("weights shape {:?} is not 2-D", wq.c.dims))),
            };
        let a_rank = self.shape_of(&self.input(n, 0)?).len();
        if a_rank != 2 {
            return Err(n.err(format!("input A has rank {a_rank}; Gemm needs a 2-D input")));
        }
        self.fully_connected(n, k, out_ch, t, axis, Some(2))
    }

    /// Shared tail of MatMul and Gemm: weights (input 1) laid out by `t` into `[O, I]` with the
    /// output channel on ONNX axis `channel_axis`, optional bias input.
    fn fully_connected(
        &mut self,
        n: &Node,
        k: usize,
        out_ch: usize,
        t: &[usize],
        channel_axis: usize,
        bias_input: Option<usize>,
    ) -> Result<()> {
        let a = match self.input(n, 0)? {
            Val::Deq(a) => a,
            other => return Err(self.not_quantized(n, 0, &other)),
        };
        let a_shape = self.act_shape(&a);
        if a_shape.last() != Some(&k) {
            return Err(n.err(format!(
                "input shape {a_shape:?} does not end in the weights' input size {k}"
            )));
        }
        // FullyConnected reads its input as rows of K in ONNX order.
        let a = if layout::keeps_data_order(&self.tensor(a.id).shape, &a.perm) {
            a
        } else {
            self.relayout(&a, &layout::identity(a.perm.len()))?
        };
        let in_q = self
            .quant_of(a.id)
            .ok_or_else(|| n.err("the input has no quantization"))?;
        let wq = self.weights_input(n, 1)?;
        let (w_id, w_q) = self.weight_tensor(n, 1, &wq, t, channel_axis)?;
        let bias = match bias_input {
            Some(i) => self.bias_tensor(n, i, in_q.scale(), &w_q, out_ch)?,
            None => None,
        };
        let mut out_shape = a_shape;
        if let Some(last) = out_shape.last_mut() {
            *last = out_ch;
        }
        let mut inputs = vec![a.id, w_id];
        inputs.extend(bias);
        let rank = out_shape.len();
        let p = self.pending(
            n,
            OpKind::FullyConnected {
                activation: Activation::None,
            },
            inputs,
            out_shape,
            layout::identity(rank),
        );
        self.bind_output(n, Val::Pending(Rc::new(p)))
    }
}
