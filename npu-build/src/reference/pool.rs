//! AveragePool, MaxPool and Mean.

use super::util::{
    QInt, Rescale, bad_data, is_qint, node_err, per_tensor, reduced_shape, same_quant, strides,
    with_qint, zeroed,
};
use super::{Kernel, Prepared};
use crate::error::Result;
use crate::ir::quant::activation_range;
use crate::ir::{DType, Graph, Op, PoolAttrs};
use crate::value::Data;

/// A 2-D pooling window over NHWC data.
pub(crate) struct Window {
    pub(crate) n: usize,
    pub(crate) h: usize,
    pub(crate) w: usize,
    pub(crate) c: usize,
    pub(crate) oh: usize,
    pub(crate) ow: usize,
    pub(crate) attrs: PoolAttrs,
}

impl Window {
    fn new(g: &Graph, op: &Op, attrs: &PoolAttrs) -> Result<Window> {
        if op.inputs.len() != 1 || op.outputs.len() != 1 {
            return Err(node_err(op, "expects one input and one output"));
        }
        let xs = &g.tensors[op.inputs[0]].shape;
        let os = &g.tensors[op.outputs[0]].shape;
        let (kh, kw) = attrs.kernel;
        let (sh, sw) = attrs.stride;
        if xs.len() != 4 || os.len() != 4 || kh == 0 || kw == 0 || sh == 0 || sw == 0 {
            return Err(node_err(
                op,
                format!("input {xs:?} and output {os:?} must be 4-D, kernel and strides positive"),
            ));
        }
        let p = attrs.padding;
        let out = |i: usize, k: usize, s: usize, a: usize, b: usize| {
            i.checked_add(a)?
                .checked_add(b)?
                .checked_sub(k)
                .map(|v| v / s + 1)
        };
        let expect = out(xs[1], kh, sh, p.top, p.bottom)
            .zip(out(xs[2], kw, sw, p.left, p.right))
            .map(|(oh, ow)| vec![xs[0], oh, ow, xs[3]]);
        if expect.as_ref() != Some(os) {
            return Err(node_err(
                op,
                format!("output shape {os:?} does not match input {xs:?} and window {attrs:?}"),
            ));
        }
        Ok(Window {
            n: xs[0],
            h: xs[1],
            w: xs[2],
            c: xs[3],
            oh: os[1],
            ow: os[2],
            attrs: attrs.clone(),
        })
    }

    /// Valid input rows/columns under output `(oy, ox)`: `(y0..y1, x0..x1)`, clamped to the image
    /// as TFLite's kernels clamp the filter window.
    #[inline(always)]
    fn bounds(&self, oy: usize, ox: usize) -> (usize, usize, usize, usize) {
        let (kh, kw) = self.attrs.kernel;
        let (sh, sw) = self.attrs.stride;
        let y = (oy * sh) as isize - self.attrs.padding.top as isize;
        let x = (ox * sw) as isize - self.attrs.padding.left as isize;
        let y0 = y.max(0) as usize;
        let x0 = x.max(0) as usize;
        let y1 = (y + kh as isize).clamp(0, self.h as isize) as usize;
        let x1 = (x + kw as isize).clamp(0, self.w as isize) as usize;
        (y0, y1.max(y0), x0, x1.max(x0))
    }
}

/// Requantization applied after pooling when the output's quantization differs from the input's
/// (TFLite requires them equal; ONNX models may not).
fn requant_after(g: &Graph, op: &Op) -> Result<Option<(i32, Rescale, i32)>> {
    let (x, o) = (op.inputs[0], op.outputs[0]);
    if same_quant(&g.tensors[x].quant, &g.tensors[o].quant) {
        return Ok(None);
    }
    let (si, zi) = per_tensor(g, op, x)?;
    let (so, zo) = per_tensor(g, op, o)?;
    let r = Rescale::new(op, f64::from(si) / f64::from(so), "output")?;
    Ok(Some((zi, r, zo)))
}

pub struct Pool {
    pub(crate) win: Window,
    max: bool,
    /// Clamp of the fused activation (not yet intersected with the type).
    pub(crate) act: (i32, i32),
    /// `(input zp, factor, output zp)` when the output's quantization differs.
    pub(crate) requant: Option<(i32, Rescale, i32)>,
    pub(crate) dtype: DType,
}

impl Pool {
    pub(super) fn prepare(g: &Graph, op: &Op, attrs: &PoolAttrs, max: bool) -> Result<Prepared> {
        Ok(Prepared::new(
            Pool::new(g, op, attrs, max)?,
            vec![op.inputs[0]],
        ))
    }

    /// Checks shapes and types and prepares the requantization.
    pub(crate) fn new(g: &Graph, op: &Op, attrs: &PoolAttrs, max: bool) -> Result<Pool> {
        let win = Window::new(g, op, attrs)?;
        let (xt, ot) = (&g.tensors[op.inputs[0]], &g.tensors[op.outputs[0]]);
        if !is_qint(xt.dtype) || xt.dtype != ot.dtype {
            return Err(node_err(
                op,
                format!(
                    "input ({}) and output ({}) must be one integer type",
                    xt.dtype, ot.dtype
                ),
            ));
        }
        let requant = requant_after(g, op)?;
        let act = match &ot.quant {
            Some(_) => {
                let (so, zo) = per_tensor(g, op, op.outputs[0])?;
                activation_range(attrs.activation, so, zo, ot.dtype)
            }
            None => (i32::MIN, i32::MAX),
        };
        Ok(Pool {
            win,
            max,
            act,
            requant,
            dtype: xt.dtype,
        })
    }

    fn run_typed<T: QInt>(&self, x: &[T]) -> Result<Data> {
        let Window {
            n, h, w, c, oh, ow, ..
        } = self.win;
        let mut out = zeroed::<T>(n * oh * ow * c, "pooling output")?;
        let (lo, hi) = (self.act.0.max(T::MIN), self.act.1.min(T::MAX));
        let mut acc = vec![0i32; c];
        for b in 0..n {
            for oy in 0..oh {
                for ox in 0..ow {
                    let (y0, y1, x0, x1) = self.win.bounds(oy, ox);
                    let count = ((y1 - y0) * (x1 - x0)) as i32;
                    acc.fill(if self.max { i32::MIN } else { 0 });
                    for iy in y0..y1 {
                        for ix in x0..x1 {
                            let p = ((b * h + iy) * w + ix) * c;
                            let row = &x[p..p + c];
                            if self.max {
                                for (a, v) in acc.iter_mut().zip(row) {
                                    *a = (*a).max(v.get());
                                }
                            } else {
                                for (a, v) in acc.iter_mut().zip(row) {
                                    *a = a.wrapping_add(v.get());
                                }
                            }
                        }
                    }
                    let base = ((b * oh + oy) * ow + ox) * c;
                    for (o, &a) in out[base..base + c].iter_mut().zip(&acc) {
                        let mut v = if self.max {
                            if count == 0 { 0 } else { a }
                        } else if count == 0 {
                            0
                        } else if a > 0 {
                            // Round half away from zero, as the reference AveragePool.
                            (a + count / 2) / count
                        } else {
                            (a - count / 2) / count
                        };
                        if let Some((zi, r, zo)) = self.requant {
                            v = r.apply(v - zi).wrapping_add(zo);
                        }
                        *o = T::put(v.clamp(lo, hi.max(lo)).clamp(T::MIN, T::MAX));
                    }
                }
            }
        }
        Ok(T::wrap(out))
    }
}

impl Kernel for Pool {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        with_qint!(self.dtype, T => {
            let x = T::slice(inputs[0]).ok_or_else(bad_data)?;
            self.run_typed::<T>(x)
        }, else Err(bad_data()))
    }
}

/// How a quantized MEAN is computed.
///
/// TFLite 2.21's reference MEAN (`reduce.cc`, `kReference`) sends every 8-bit case through
/// `QuantizedMeanOrSum`: the count is folded into the `input_scale / output_scale` multiplier
/// (shifted left by `floor(log2(count))`, at most 32 and keeping the final shift >= -31, then
/// divided by the count) and `sum(x) - zp_in * count` is rescaled with it. Older releases had
/// special cases (a 4-D height/width kernel, a truncating same-scale mean); checked against
/// TFLite 2.21 on models exercising them, they are not taken any more.
#[derive(Clone, Copy)]
enum MeanPath {
    General { rescale: Rescale },
}

pub struct Mean {
    path: MeanPath,
    pub(crate) zi: i32,
    pub(crate) zo: i32,
    pub(crate) dtype: DType,
    /// Input shape, and whether each dimension is reduced.
    pub(crate) shape: Vec<usize>,
    pub(crate) reduced: Vec<bool>,
    out_len: usize,
}

impl Mean {
    pub(super) fn prepare(g: &Graph, op: &Op, axes: &[usize], keep_dims: bool) -> Result<Prepared> {
        Ok(Prepared::new(
            Mean::new(g, op, axes, keep_dims)?,
            vec![op.inputs[0]],
        ))
    }

    /// The factor applied to `sum - zi * count` (already divided by the count).
    pub(crate) fn rescale(&self) -> Rescale {
        match self.path {
            MeanPath::General { rescale } => rescale,
        }
    }

    /// Checks shapes and types and prepares the rescale factor.
    pub(crate) fn new(g: &Graph, op: &Op, axes: &[usize], keep_dims: bool) -> Result<Mean> {
        if op.inputs.len() != 1 || op.outputs.len() != 1 {
            return Err(node_err(op, "expects one input and one output"));
        }
        let (xt, ot) = (&g.tensors[op.inputs[0]], &g.tensors[op.outputs[0]]);
        if !is_qint(xt.dtype) || xt.dtype != ot.dtype {
            return Err(node_err(
                op,
                format!(
                    "input ({}) and output ({}) must be one integer type",
                    xt.dtype, ot.dtype
                ),
            ));
        }
        let rank = xt.shape.len();
        if axes.iter().any(|&a| a >= rank) {
            return Err(node_err(
                op,
                format!("axes {axes:?} out of range for rank {rank}"),
            ));
        }
        let mut reduced = vec![false; rank];
        for &a in axes {
            reduced[a] = true;
        }
        let expect = reduced_shape(&xt.shape, &reduced, keep_dims);
        if expect.iter().product::<usize>() != ot.elements() {
            return Err(node_err(
                op,
                format!(
                    "output shape {:?} does not match input {:?} reduced over {axes:?}",
                    ot.shape, xt.shape
                ),
            ));
        }
        let (si, zi) = per_tensor(g, op, op.inputs[0])?;
        let (so, zo) = per_tensor(g, op, op.outputs[0])?;
        let count: usize = xt
            .shape
            .iter()
            .zip(&reduced)
            .filter(|(_, r)| **r)
            .map(|(d, _)| d)
            .product();
        // PrepareMeanOrSum: the multiplier of input_scale / output_scale, in double.
        let base = Rescale::new(op, f64::from(si) / f64::from(so), "output")?;
        let path = {
            let count = count.max(1) as u64;
            let mut shift = 63 - count.leading_zeros() as i32;
            shift = shift.min(32).min(31 + base.shift);
            let shift = shift.max(0);
            let multiplier = ((i64::from(base.multiplier) << shift) / count as i64) as i32;
            MeanPath::General {
                rescale: Rescale::from_parts(multiplier, base.shift - shift)
                    .with_requant(g.requant),
            }
        };
        Ok(Mean {
            path,
            zi,
            zo,
            dtype: xt.dtype,
            shape: xt.shape.clone(),
            reduced,
            out_len: ot.elements(),
        })
    }

    fn run_typed<T: QInt>(&self, x: &[T]) -> Result<Data> {
        // Sum every input element into its output slot (reduced dimensions get stride 0).
        let rank = self.shape.len();
        let kept: Vec<usize> = (0..rank)
            .map(|d| if self.reduced[d] { 1 } else { self.shape[d] })
            .collect();
        let ks = strides(&kept);
        let out_strides: Vec<usize> = (0..rank)
            .map(|d| if self.reduced[d] { 0 } else { ks[d] })
            .collect();
        let in_len: usize = self.shape.iter().product();
        let count = in_len.checked_div(self.out_len).unwrap_or(0) as i32;
        let mut sums = zeroed::<i32>(self.out_len, "mean sums")?;
        let mut idx = vec![0usize; rank];
        let mut o = 0usize;
        for v in x.iter().take(in_len) {
            let s = &mut sums[o];
            *s = s.wrapping_add(v.get());
            let mut d = rank;
            while d > 0 {
                d -= 1;
                idx[d] += 1;
                o += out_strides[d];
                if idx[d] < self.shape[d] {
                    break;
                }
                o -= out_strides[d] * self.shape[d];
                idx[d] = 0;
            }
        }
        let mut out = zeroed::<T>(self.out_len, "mean output")?;
        for (q, &s) in out.iter_mut().zip(&sums) {
            let v = if count == 0 {
                0
            } else {
                match self.path {
                    MeanPath::General { rescale } => rescale
                        .apply(s.wrapping_sub(self.zi.wrapping_mul(count)))
                        .wrapping_add(self.zo),
                }
            };
            *q = T::put(v.clamp(T::MIN, T::MAX));
        }
        Ok(T::wrap(out))
    }
}

impl Kernel for Mean {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        with_qint!(self.dtype, T => {
            let x = T::slice(inputs[0]).ok_or_else(bad_data)?;
            self.run_typed::<T>(x)
        }, else Err(bad_data()))
    }
}
