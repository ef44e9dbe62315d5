//! `ConvTranspose` -> IR TransposeConv2D, and `MatMul` of two activations -> IR BatchMatMul.

use std::rc::Rc;

use super::super::builder::{Builder, Val};
use super::super::layout::{self, NCHW_OVER_NHWC};
use super::super::model::Node;
use super::super::quant_params::QParams;
use super::{to_positive, to_usize};
use crate::error::{Error, Result};
use crate::ir::{Activation, DType, OpKind, TensorId, TransposeConvAttrs};
use crate::reference::util::broadcast_shape;

impl Builder {
    /// `ConvTranspose`: NCHW input, `[C_in, C_out, KH, KW]` weights (group 1, dilations 1) ->
    /// IR TransposeConv2D with OHWI weights.
    ///
    /// ONNX places input pixel `i` at output `i * stride + k - pads_begin`; the output size is
    /// `stride * (in - 1) + output_padding + k - pads_begin - pads_end`, or `output_shape` when
    /// given (then the pads follow from it: the total split evenly, the odd one at the end
    /// unless `auto_pad` is SAME_LOWER, per the ONNX operator specification).
    pub(crate) fn conv_transpose(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(3)?;
        let x = match self.input(n, 0)? {
            Val::Deq(a) => a,
            other => return Err(self.not_quantized(n, 0, &other)),
        };
        let xs = self.act_shape(&x);
        let [batch, c_in, h, w] = xs[..] else {
            return Err(n.err(format!(
                "input shape {xs:?} is not supported (only 2-D transposed convolution of a 4-D NCHW input)"
            )));
        };
        let wq = self.weights_input(n, 1)?;
        let [wc_in, c_out, kh, kw] = wq.c.dims[..] else {
            return Err(n.err(format!(
                "weights shape {:?} is not [C_in, C_out, KH, KW]",
                wq.c.dims
            )));
        };
        if wc_in != c_in || kh == 0 || kw == 0 || c_out == 0 {
            return Err(n.err(format!(
                "weights {:?} do not fit {c_in} input channels",
                wq.c.dims
            )));
        }
        if let Some(k) = n.attr_ints("kernel_shape")?
            && (k.len() != 2 || k[0] != kh as i64 || k[1] != kw as i64)
        {
            return Err(n.err(format!(
                "kernel_shape {k:?} does not match the weights' {kh}x{kw}"
            )));
        }
        let group = n.attr_i_or("group", 1)?;
        if group != 1 {
            return Err(n.err(format!("group {group} is not supported (only group 1)")));
        }
        let pair = |name: &str, default: usize, positive: bool| -> Result<[usize; 2]> {
            match n.attr_ints(name)? {
                None => Ok([default; 2]),
                Some(v) if v.len() == 2 => {
                    let f = |x: i64| {
                        if positive {
                            to_positive(n, name, x)
                        } else {
                            to_usize(n, name, x)
                        }
                    };
                    Ok([f(v[0])?, f(v[1])?])
                }
                Some(v) => Err(n.err(format!("{name} has {} values, 2 expected", v.len()))),
            }
        };
        let stride = pair("strides", 1, true)?;
        let dilation = pair("dilations", 1, true)?;
        if dilation != [1, 1] {
            return Err(n.err(format!("dilations {dilation:?} are not supported (only 1)")));
        }
        let out_pad = pair("output_padding", 0, false)?;
        let auto_pad = n.attr_s("auto_pad")?.unwrap_or_else(|| "NOTSET".into());
        // End pads may be negative (tf2onnx writes -1 for an output one longer than the full
        // result): outputs past the full extent, which only the bias reaches.
        let pads: [i64; 4] = match n.attr_ints("pads")? {
            None => [0; 4],
            Some(v) if v.len() == 4 => {
                to_usize(n, "pad", v[0])?;
                to_usize(n, "pad", v[1])?;
                if v[2].abs() > 1 << 31 || v[3].abs() > 1 << 31 {
                    return Err(n.err(format!("pads {v:?} are out of range")));
                }
                [v[0], v[1], v[2], v[3]]
            }
            Some(v) => return Err(n.err(format!("pads has {} values, 4 expected", v.len()))),
        };
        let output_shape = match n.attr_ints("output_shape")? {
            None => None,
            Some(v) if v.len() == 2 || v.len() == 4 => {
                let v = &v[v.len() - 2..];
                Some([
                    to_positive(n, "output_shape", v[0])?,
                    to_positive(n, "output_shape", v[1])?,
                ])
            }
            Some(v) => {
                return Err(n.err(format!(
                    "output_shape {v:?} must give (H, W) or (N, C, H, W)"
                )));
            }
        };
        let input = [h, w];
        let kernel = [kh, kw];
        let mut begin = [0usize; 2];
        let mut out = [0usize; 2];
        for ax in 0..2 {
            // The full (uncropped) extent: stride * (in - 1) + output_padding + kernel.
            let full = input[ax]
                .checked_sub(1)
                .and_then(|v| v.checked_mul(stride[ax]))
                .and_then(|v| v.checked_add(out_pad[ax]))
                .and_then(|v| v.checked_add(kernel[ax]))
                .filter(|_| input[ax] > 0)
                .ok_or_else(|| n.err("the output size overflows or the input is empty"))?;
            let target = match (output_shape, auto_pad.as_str()) {
                (Some(o), _) => Some(o[ax]),
                (None, "SAME_UPPER" | "SAME_LOWER") => input[ax].checked_mul(stride[ax]),
                (None, "NOTSET" | "VALID") => None,
                (None, other) => return Err(n.err(format!("auto_pad '{other}' is not known"))),
            };
            let (b, o) = match target {
                Some(o) => {
                    let total = full.checked_sub(o).ok_or_else(|| {
                        n.err(format!(
                            "output size {o} is larger than the full result {full} (negative padding)"
                        ))
                    })?;
                    let b = if auto_pad == "SAME_UPPER" {
                        total / 2
                    } else {
                        total - total / 2
                    };
                    (b, o)
                }
                None => {
                    let (b, e) = if auto_pad == "VALID" {
                        (0, 0)
                    } else {
                        (pads[ax], pads[ax + 2])
                    };
                    let o = i64::try_from(full)
                        .ok()
                        .map(|f| f - b - e)
                        .filter(|&v| v > 0)
                        .and_then(|v| usize::try_from(v).ok())
                        .ok_or_else(|| {
                            n.err(format!("pads {pads:?} leave no output of the full {full}"))
                        })?;
                    (to_usize(n, "pad", b)?, o)
                }
            };
            begin[ax] = b;
            out[ax] = o;
        }
        if out_pad[0] >= stride[0].max(1) && out_pad[0] > 0
            || out_pad[1] >= stride[1].max(1) && out_pad[1] > 0
        {
            return Err(n.err(format!(
                "output_padding {out_pad:?} must be smaller than the strides {stride:?}"
            )));
        }
        let x = self.relayout(&x, &NCHW_OVER_NHWC)?;
        let in_q = self
            .quant_of(x.id)
            .ok_or_else(|| n.err("the input has no quantization"))?;
        // [C_in, C_out, KH, KW] -> [C_out, KH, KW, C_in]; output channels are ONNX axis 1.
        let (w_id, w_q) = self.weight_tensor(n, 1, &wq, &[1, 2, 3, 0], 1)?;
        let bias = self.bias_tensor(n, 2, in_q.scale(), &w_q, c_out)?;
        let kind = OpKind::TransposeConv2d(TransposeConvAttrs {
            stride: (stride[0], stride[1]),
            pad_top: begin[0],
            pad_left: begin[1],
            activation: Activation::None,
        });
        let mut inputs = vec![x.id, w_id];
        inputs.extend(bias);
        let p = self.pending(
            n,
            kind,
            inputs,
            vec![batch, out[0], out[1], c_out],
            NCHW_OVER_NHWC.to_vec(),
        );
        self.bind_output(n, Val::Pending(Rc::new(p)))
    }

    /// `Add(FC, bias)` where FC is a pending FullyConnected without bias and fused activation
    /// and `bias` a constant of one value per output channel: folds the bias into the
    /// FullyConnected (its bias operand, quantized at `input_scale * weight_scale[c]`), as
    /// TFLite's converter does. Returns false (nothing done) for any other Add.
    pub(crate) fn fold_fc_bias(&mut self, n: &Node) -> Result<bool> {
        if n.inputs.len() != 2 {
            return Ok(false);
        }
        let (p, bias_at) = match (self.input(n, 0)?, self.input(n, 1)?) {
            (Val::Pending(p), Val::DeqConst(_) | Val::Const(_)) => (p, 1),
            (Val::DeqConst(_) | Val::Const(_), Val::Pending(p)) => (p, 0),
            _ => return Ok(false),
        };
        let OpKind::FullyConnected {
            activation: Activation::None,
        } = p.kind
        else {
            return Ok(false);
        };
        if p.inputs.len() != 2 || p.inner.is_some() {
            return Ok(false);
        }
        let out_ch = p.shape.last().copied().unwrap_or(0);
        let bias_len = match self.input(n, bias_at)? {
            Val::DeqConst(qc) => qc.c.dims.clone(),
            Val::Const(c) => c.dims.clone(),
            _ => return Ok(false),
        };
        if bias_len != [out_ch] {
            return Ok(false);
        }
        let (x, w) = (p.inputs[0], p.inputs[1]);
        let Some(in_q) = self.quant_of(x) else {
            return Ok(false);
        };
        let Some(wq) = self.tensor(w).quant.clone() else {
            return Ok(false);
        };
        let w_q = QParams {
            scale: wq.scale.clone(),
            zero_point: wq.zero_point.clone(),
            dtype: self.tensor(w).dtype,
            axis: wq.axis,
        };
        let Some(bias) = self.bias_tensor(n, bias_at, in_q.scale(), &w_q, out_ch)? else {
            return Ok(false);
        };
        let mut folded = (*p).clone();
        folded.inputs.push(bias);
        self.bind_output(n, Val::Pending(Rc::new(folded)))?;
        Ok(true)
    }

    /// Integer tensor `id` as int8: uint8 (onnxruntime's U8S8 activations) is shifted by 128 with
    /// the zero point (the same reals, exactly), since TFLite's BATCH_MATMUL is int8 only.
    pub(crate) fn as_int8(&mut self, id: TensorId, node: &str) -> Result<TensorId> {
        let t = self.tensor(id).clone();
        if t.dtype != DType::U8 {
            return Ok(id);
        }
        let mut q = self
            .quant_of(id)
            .ok_or_else(|| Error::Internal(format!("'{}' has no quantization", t.name)))?;
        q.zero_point.iter_mut().for_each(|z| *z -= 128);
        let out = self.add_tensor(
            &format!("{}_int8", t.name),
            t.shape,
            DType::I8,
            Some(q),
            None,
        );
        self.push_op(
            &format!("{node}_to_int8"),
            OpKind::Quantize,
            vec![id],
            vec![out],
        );
        Ok(out)
    }

    /// `MatMul(A, B)` of two dequantized activations (numpy semantics, rank >= 2 each) -> IR
    /// BatchMatMul on the tensors in ONNX order.
    pub(crate) fn matmul_activations(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(2)?;
        let mut ids = Vec::with_capacity(2);
        let mut shapes = Vec::with_capacity(2);
        let mut adj = [false; 2];
        for (i, adj_i) in adj.iter_mut().enumerate() {
            let a = match self.input(n, i)? {
                Val::Deq(a) => a,
                other => return Err(self.not_quantized(n, i, &other)),
            };
            let shape = self.act_shape(&a);
            if shape.len() < 2 {
                return Err(n.err(format!(
                    "input {i} has shape {shape:?}; MatMul of activations needs rank 2 or more"
                )));
            }
            // BatchMatMul reads its operands in ONNX order; an operand seen through a swap of
            // its last two axes (a Transpose before the MatMul) is read through the adjoint
            // flag instead, as TFLite's converter writes it.
            let r = a.perm.len();
            let mut swapped = layout::identity(r);
            swapped.swap(r - 2, r - 1);
            let a = if a.perm == swapped {
                *adj_i = true;
                a
            } else if layout::keeps_data_order(&self.tensor(a.id).shape, &a.perm) {
                a
            } else {
                self.relayout(&a, &layout::identity(a.perm.len()))?
            };
            ids.push(self.as_int8(a.id, &n.name)?);
            shapes.push(shape);
        }
        let (sa, sb) = (&shapes[0], &shapes[1]);
        let (ra, rb) = (sa.len() - 2, sb.len() - 2);
        if sa[ra + 1] != sb[rb] {
            return Err(n.err(format!("shapes {sa:?} and {sb:?} cannot be multiplied")));
        }
        let mut out = broadcast_shape(&sa[..ra], &sb[..rb]).ok_or_else(|| {
            n.err(format!(
                "the batch axes of {sa:?} and {sb:?} do not broadcast"
            ))
        })?;
        out.extend([sa[ra], sb[rb + 1]]);
        let rank = out.len();
        let p = self.pending(
            n,
            OpKind::BatchMatMul {
                adj_a: adj[0],
                adj_b: adj[1],
            },
            ids,
            out,
            layout::identity(rank),
        );
        self.bind_output(n, Val::Pending(Rc::new(p)))
    }
}
