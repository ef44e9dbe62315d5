//! `Conv` (regular and depthwise) and the sliding-window geometry it shares with pooling.

use std::rc::Rc;

use super::super::builder::{Builder, Val};
use super::super::layout::NCHW_OVER_NHWC;
use super::super::model::Node;
use super::{to_positive, to_usize};
use crate::error::Result;
use crate::ir::{Activation, ConvAttrs, OpKind, Padding};

/// Geometry of a 2-D sliding window over (H, W).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Window {
    pub stride: (usize, usize),
    pub dilation: (usize, usize),
    pub padding: Padding,
    /// Output (H, W).
    pub out: (usize, usize),
}

/// Reads `strides`, `dilations`, `pads` and `auto_pad` of `n` for input (H, W) and kernel (KH, KW).
/// With `ceil_mode`, the output size must come out the same as with floor rounding.
pub(crate) fn window(
    n: &Node,
    input: [usize; 2],
    kernel: [usize; 2],
    ceil_mode: bool,
) -> Result<Window> {
    let pair = |name: &str| -> Result<[usize; 2]> {
        match n.attr_ints(name)? {
            None => Ok([1, 1]),
            Some(v) if v.len() == 2 => {
                Ok([to_positive(n, name, v[0])?, to_positive(n, name, v[1])?])
            }
            Some(v) => Err(n.err(format!("{name} has {} values, 2 expected", v.len()))),
        }
    };
    let stride = pair("strides")?;
    let dilation = pair("dilations")?;
    let auto_pad = n.attr_s("auto_pad")?.unwrap_or_else(|| "NOTSET".into());
    let pads = match n.attr_ints("pads")? {
        None => [0; 4],
        Some(v) if v.len() == 4 => [
            to_usize(n, "pad", v[0])?,
            to_usize(n, "pad", v[1])?,
            to_usize(n, "pad", v[2])?,
            to_usize(n, "pad", v[3])?,
        ],
        Some(v) => return Err(n.err(format!("pads has {} values, 4 expected", v.len()))),
    };
    let mut begin = [0usize; 2];
    let mut end = [0usize; 2];
    let mut out = [0usize; 2];
    for ax in 0..2 {
        let eff = kernel[ax]
            .checked_sub(1)
            .and_then(|k| k.checked_mul(dilation[ax]))
            .and_then(|k| k.checked_add(1))
            .ok_or_else(|| n.err("kernel size overflows"))?;
        let (b, e) = match auto_pad.as_str() {
            "NOTSET" => (pads[ax], pads[ax + 2]),
            "VALID" => (0, 0),
            "SAME_UPPER" | "SAME_LOWER" => {
                let o = input[ax].div_ceil(stride[ax]);
                let total = o
                    .saturating_sub(1)
                    .checked_mul(stride[ax])
                    .and_then(|v| v.checked_add(eff))
                    .ok_or_else(|| n.err("padding overflows"))?
                    .saturating_sub(input[ax]);
                if auto_pad == "SAME_UPPER" {
                    (total / 2, total - total / 2)
                } else {
                    (total - total / 2, total / 2)
                }
            }
            other => return Err(n.err(format!("auto_pad '{other}' is not known"))),
        };
        let padded = input[ax]
            .checked_add(b)
            .and_then(|v| v.checked_add(e))
            .ok_or_else(|| n.err("padding overflows"))?;
        if padded < eff {
            return Err(n.err(format!(
                "the window ({eff}) is larger than the padded input ({padded})"
            )));
        }
        let floor = (padded - eff) / stride[ax] + 1;
        if ceil_mode && (padded - eff) % stride[ax] != 0 {
            return Err(n.err(
                "ceil_mode=1 gives a larger output than floor rounding here; only outputs that ceil_mode does not change are supported",
            ));
        }
        begin[ax] = b;
        end[ax] = e;
        out[ax] = floor;
    }
    Ok(Window {
        stride: (stride[0], stride[1]),
        dilation: (dilation[0], dilation[1]),
        padding: Padding {
            top: begin[0],
            left: begin[1],
            bottom: end[0],
            right: end[1],
        },
        out: (out[0], out[1]),
    })
}

impl Builder {
    /// `Conv`: NCHW input, OIHW weights -> IR Conv2D (OHWI) or DepthwiseConv2D (1HW(C*M)).
    pub(crate) fn conv(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(3)?;
        let x = match self.input(n, 0)? {
            Val::Deq(a) => a,
            other => return Err(self.not_quantized(n, 0, &other)),
        };
        let xs = self.act_shape(&x);
        let [batch, c_in, h, w] = xs[..] else {
            return Err(n.err(format!(
                "input shape {xs:?} is not supported (only 2-D convolution of a 4-D NCHW input)"
            )));
        };
        let wq = self.weights_input(n, 1)?;
        let [c_out, c_per_group, kh, kw] = wq.c.dims[..] else {
            return Err(n.err(format!("weights shape {:?} is not OIHW", wq.c.dims)));
        };
        if let Some(k) = n.attr_ints("kernel_shape")?
            && (k.len() != 2 || k[0] != kh as i64 || k[1] != kw as i64)
        {
            return Err(n.err(format!(
                "kernel_shape {k:?} does not match the weights' {kh}x{kw}"
            )));
        }
        let group = to_positive(n, "group", n.attr_i_or("group", 1)?)?;
        if c_per_group.checked_mul(group) != Some(c_in) || c_out % group != 0 {
            return Err(n.err(format!(
                "weights {:?} with group {group} do not fit {c_in} input channels",
                wq.c.dims
            )));
        }
        let depthwise = group > 1 && group == c_in;
        if group > 1 && !depthwise {
            return Err(n.err(format!(
                "grouped convolution (group {group} of {c_in} channels) is not supported; only group 1 or depthwise"
            )));
        }
        let win = window(n, [h, w], [kh, kw], false)?;
        let x = self.relayout(&x, &NCHW_OVER_NHWC)?;
        let in_q = self
            .quant_of(x.id)
            .ok_or_else(|| n.err("the input has no quantization"))?;
        // OIHW -> OHWI, or (C*M)1HW -> 1HW(C*M) for depthwise.
        let t: &[usize] = if depthwise {
            &[1, 2, 3, 0]
        } else {
            &[0, 2, 3, 1]
        };
        let (w_id, w_q) = self.weight_tensor(n, 1, &wq, t, 0)?;
        let bias = self.bias_tensor(n, 2, in_q.scale(), &w_q, c_out)?;
        let attrs = ConvAttrs {
            stride: win.stride,
            dilation: win.dilation,
            padding: win.padding,
            activation: Activation::None,
        };
        let kind = if depthwise {
            OpKind::DepthwiseConv2d {
                attrs,
                depth_multiplier: c_out / c_in,
            }
        } else {
            OpKind::Conv2d(attrs)
        };
        let mut inputs = vec![x.id, w_id];
        inputs.extend(bias);
        let p = self.pending(
            n,
            kind,
            inputs,
            vec![batch, win.out.0, win.out.1, c_out],
            NCHW_OVER_NHWC.to_vec(),
        );
        self.bind_output(n, Val::Pending(Rc::new(p)))
    }
}
