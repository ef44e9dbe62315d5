//! `MatMul` and `Gemm` with constant weights -> IR FullyConnected (weights `[O, I]`).

use std::rc::Rc;

use super::super::builder::{Builder, Val};
use super::super::layout;
use super::super::model::Node;
use crate::error::Result;
use crate::ir::{Activation, OpKind};

/// How the weights of a MatMul / Gemm become FullyConnected's `[O, I]`.
struct WeightLayout<'a> {
    /// Input size (I).
    k: usize,
    /// Output channels (O).
    out_ch: usize,
    /// Transposition from ONNX dims to `[O, I]`.
    t: &'a [usize],
    /// ONNX axis of the output channels (for per-channel scales).
    channel_axis: usize,
}

impl Builder {
    /// `MatMul(A, B)` with constant `B [K, N]`.
    pub(crate) fn matmul(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(2)?;
        if matches!(self.input(n, 1)?, Val::Deq(_)) {
            return self.matmul_activations(n);
        }
        let wq = self.weights_input(n, 1)?;
        let [k, out_ch] = wq.c.dims[..] else {
            return Err(n.err(format!("weights shape {:?} is not [K, N]", wq.c.dims)));
        };
        let w = WeightLayout {
            k,
            out_ch,
            t: &[1, 0],
            channel_axis: 1,
        };
        self.fully_connected(n, false, &w, None)
    }

    /// `Gemm(A, B, C)`: `alpha = beta = 1`, constant `B`.
    pub(crate) fn gemm(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(3)?;
        let trans_a = n.attr_i_or("transA", 0)? != 0;
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
        let w = WeightLayout {
            k,
            out_ch,
            t,
            channel_axis: axis,
        };
        self.fully_connected(n, trans_a, &w, Some(2))
    }

    /// Shared tail of MatMul and Gemm: input 0 (transposed for `trans_a`), weights (input 1)
    /// laid out per `w`, optional bias input.
    fn fully_connected(
        &mut self,
        n: &Node,
        trans_a: bool,
        w: &WeightLayout,
        bias_input: Option<usize>,
    ) -> Result<()> {
        let (k, out_ch) = (w.k, w.out_ch);
        let mut a = match self.input(n, 0)? {
            Val::Deq(a) => a,
            other => return Err(self.not_quantized(n, 0, &other)),
        };
        if trans_a {
            // Gemm's A is 2-D (checked); its transpose is only a change of view.
            a.perm = layout::compose(&a.perm, &[1, 0]).unwrap_or_default();
        }
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
        let (w_id, w_q) = self.weight_tensor(n, 1, &wq, w.t, w.channel_axis)?;
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
