//! Pooling: `AveragePool`, `MaxPool`, `GlobalAveragePool`, `GlobalMaxPool` and `ReduceMean`.

use std::rc::Rc;

use super::super::builder::{Act, Builder, Val};
use super::super::layout::NCHW_OVER_NHWC;
use super::super::model::Node;
use super::conv::window;
use super::to_positive;
use crate::error::Result;
use crate::ir::{Activation, OpKind, Padding, PoolAttrs, TensorId};

impl Builder {
    /// `AveragePool` / `MaxPool` over (H, W) of an NCHW input.
    pub(crate) fn pool(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(1)?;
        n.single_output()?;
        let is_max = n.op_type == "MaxPool";
        let (x, integer) = match self.input(n, 0)? {
            Val::Deq(a) => (a, false),
            Val::Int(a) if is_max => (a, true),
            other => return Err(self.not_quantized(n, 0, &other)),
        };
        let xs = self.act_shape(&x);
        let [batch, channels, h, w] = xs[..] else {
            return Err(n.err(format!(
                "input shape {xs:?} is not supported (only 4-D NCHW)"
            )));
        };
        let kernel = match n.attr_ints("kernel_shape")? {
            Some(k) if k.len() == 2 => [
                to_positive(n, "kernel_shape", k[0])?,
                to_positive(n, "kernel_shape", k[1])?,
            ],
            Some(k) => return Err(n.err(format!("kernel_shape {k:?} is not 2-D"))),
            None => return Err(n.err("kernel_shape is missing")),
        };
        if n.attr_i_or("storage_order", 0)? != 0 {
            return Err(n.err("storage_order=1 is not supported"));
        }
        let ceil_mode = n.attr_i_or("ceil_mode", 0)? != 0;
        let win = window(n, [h, w], kernel, ceil_mode)?;
        if win.dilation != (1, 1) {
            return Err(n.err("dilated pooling is not supported"));
        }
        if !is_max && n.attr_i_or("count_include_pad", 0)? != 0 && win.padding != Padding::default()
        {
            return Err(n.err(
                "count_include_pad=1 with padding is not supported (the int8 kernels average over the valid elements only)",
            ));
        }
        let attrs = PoolAttrs {
            kernel: (kernel[0], kernel[1]),
            stride: win.stride,
            padding: win.padding,
            activation: Activation::None,
        };
        let kind = if is_max {
            OpKind::MaxPool(attrs)
        } else {
            OpKind::AvgPool(attrs)
        };
        let x = self.relayout(&x, &NCHW_OVER_NHWC)?;
        let shape = vec![batch, win.out.0, win.out.1, channels];
        self.window_op(n, kind, x, shape, integer)
    }

    /// `GlobalAveragePool` (-> Mean over H, W, kept) and `GlobalMaxPool` (-> MaxPool of the
    /// whole plane).
    pub(crate) fn global_pool(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(1)?;
        let is_max = n.op_type == "GlobalMaxPool";
        let (x, integer) = match self.input(n, 0)? {
            Val::Deq(a) => (a, false),
            Val::Int(a) if is_max => (a, true),
            other => return Err(self.not_quantized(n, 0, &other)),
        };
        let xs = self.act_shape(&x);
        if !is_max && xs.len() >= 3 {
            // N, C, then any number of spatial axes (tf2onnx writes a mean over the last axis
            // of a 3-D tensor, LayerNorm's, this way).
            let spatial: Vec<usize> = (2..xs.len()).collect();
            return self.mean(n, x, &spatial, true);
        }
        let [batch, channels, h, w] = xs[..] else {
            return Err(n.err(format!(
                "input shape {xs:?} is not supported (GlobalMaxPool: only 4-D NCHW; \
                 GlobalAveragePool: rank 3 or more)"
            )));
        };
        if is_max {
            let x = self.relayout(&x, &NCHW_OVER_NHWC)?;
            let kind = OpKind::MaxPool(PoolAttrs {
                kernel: (h, w),
                stride: (1, 1),
                padding: Padding::default(),
                activation: Activation::None,
            });
            return self.window_op(n, kind, x, vec![batch, 1, 1, channels], integer);
        }
        Err(n.err(format!(
            "input shape {xs:?} is not supported (rank 3 or more)"
        )))
    }

    /// `ReduceMean` (axes from the attribute before opset 18, from input 1 since).
    pub(crate) fn reduce_mean(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(2)?;
        let x = match self.input(n, 0)? {
            Val::Deq(a) => a,
            other => return Err(self.not_quantized(n, 0, &other)),
        };
        let keep = n.attr_i_or("keepdims", 1)? != 0;
        let Some(axes) = self.reduce_axes(n, x.perm.len(), 18)? else {
            return self.bind_output(n, Val::Deq(x));
        };
        self.mean(n, x, &axes, keep)
    }

    /// Mean of `x` over ONNX `axes`.
    fn mean(&mut self, n: &Node, x: Act, axes: &[usize], keep: bool) -> Result<()> {
        self.reduce_over(n, x, axes, keep, |axes, keep_dims| OpKind::Mean {
            axes,
            keep_dims,
        })
    }

    /// A pending reduction of `x` over ONNX `axes`, of the kind `kind` makes of the IR axes.
    pub(crate) fn reduce_over(
        &mut self,
        n: &Node,
        x: Act,
        axes: &[usize],
        keep: bool,
        kind: impl FnOnce(Vec<usize>, bool) -> OpKind,
    ) -> Result<()> {
        let mut ir_axes: Vec<usize> = axes
            .iter()
            .filter_map(|&a| x.perm.get(a).copied())
            .collect();
        ir_axes.sort_unstable();
        ir_axes.dedup();
        let in_shape = self.tensor(x.id).shape.clone();
        let (shape, perm) = if keep {
            let shape = in_shape
                .iter()
                .enumerate()
                .map(|(i, &d)| if ir_axes.contains(&i) { 1 } else { d })
                .collect();
            (shape, x.perm.clone())
        } else {
            let shape = in_shape
                .iter()
                .enumerate()
                .filter(|(i, _)| !ir_axes.contains(i))
                .map(|(_, &d)| d)
                .collect();
            // Remaining ONNX dims keep their order; their IR positions are renumbered.
            let kept: Vec<usize> = x
                .perm
                .iter()
                .copied()
                .filter(|p| !ir_axes.contains(p))
                .collect();
            let mut sorted = kept.clone();
            sorted.sort_unstable();
            let perm = kept
                .iter()
                .map(|p| sorted.iter().position(|s| s == p).unwrap_or(0))
                .collect();
            (shape, perm)
        };
        let kind = kind(ir_axes, keep);
        let p = self.pending(n, kind, vec![x.id], shape, perm);
        self.bind_output(n, Val::Pending(Rc::new(p)))
    }

    /// A window op computing in its input's quantization: pending for a dequantized input,
    /// emitted at once for an integer input.
    fn window_op(
        &mut self,
        n: &Node,
        kind: OpKind,
        x: Act,
        shape: Vec<usize>,
        integer: bool,
    ) -> Result<()> {
        if integer {
            return self.emit_integer(n, kind, vec![x.id], shape, x.perm, x.id);
        }
        let mut p = self.pending(n, kind, vec![x.id], shape, x.perm);
        p.keep_quant_of = Some(x.id);
        self.bind_output(n, Val::Pending(Rc::new(p)))
    }

    /// Emits an op on integer tensors (no QDQ around it): its output holds the same kind of
    /// integers as `src`, so it shares `src`'s quantization.
    pub(crate) fn emit_integer(
        &mut self,
        n: &Node,
        kind: OpKind,
        inputs: Vec<TensorId>,
        shape: Vec<usize>,
        perm: Vec<usize>,
        src: TensorId,
    ) -> Result<()> {
        let dtype = self.tensor(src).dtype;
        let out_name = n.output()?.to_string();
        let id = self.add_tensor(&out_name, shape, dtype, None, None);
        self.push_op(&n.name, kind, inputs, vec![id]);
        self.same_quant(src, id, n)?;
        self.bind_output(n, Val::Int(Act { id, perm }))
    }
}
