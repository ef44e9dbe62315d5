//! Conv2D, DepthwiseConv2D and FullyConnected (TFLite's `ConvPerChannel`,
//! `DepthwiseConvPerChannel` and `FullyConnected[PerChannel]` reference kernels).
//!
//! The accumulator is `sum((w - w_zp) * (x - x_zp)) + bias` in wrapping 32-bit arithmetic, as the
//! reference kernels compute it. For speed, inputs and weights are widened to `i16` with their
//! zero points removed first, so the inner loops are plain `i16 x i16 -> i32` dot products over
//! contiguous channels; padded taps contribute exactly 0, as in TFLite where they are skipped.

use super::util::{QInt, Rescale, bad_data, is_qint, node_err, per_tensor, with_qint, zeroed};
use super::{Kernel, Prepared};
use crate::error::Result;
use crate::ir::quant::activation_range;
use crate::ir::{Activation, ConvAttrs, DType, Graph, Op, TensorId};
use crate::value::Data;

/// Dot product of two equally long `i16` slices (wrapping `i32` accumulation).
#[inline(always)]
fn dot(a: &[i16], b: &[i16]) -> i32 {
    let b = &b[..a.len()];
    let mut s = 0i32;
    for i in 0..a.len() {
        s = s.wrapping_add(i32::from(a[i]) * i32::from(b[i]));
    }
    s
}

/// Four dot products of `x` with four rows that follow each other in `w` (each `x.len()` long).
#[inline(always)]
fn dot4(x: &[i16], w: &[i16]) -> [i32; 4] {
    let n = x.len();
    let (w0, rest) = w.split_at(n);
    let (w1, rest) = rest.split_at(n);
    let (w2, rest) = rest.split_at(n);
    let w3 = &rest[..n];
    let (mut a0, mut a1, mut a2, mut a3) = (0i32, 0i32, 0i32, 0i32);
    for i in 0..n {
        let v = i32::from(x[i]);
        a0 = a0.wrapping_add(v * i32::from(w0[i]));
        a1 = a1.wrapping_add(v * i32::from(w1[i]));
        a2 = a2.wrapping_add(v * i32::from(w2[i]));
        a3 = a3.wrapping_add(v * i32::from(w3[i]));
    }
    [a0, a1, a2, a3]
}

/// `x - zp` as `i16` (the zero point was checked to be in the element type's range, so this fits).
fn widen<T: QInt>(x: &[T], zp: i32) -> Result<Vec<i16>> {
    let mut v = zeroed::<i16>(x.len(), "widened input")?;
    for (d, &s) in v.iter_mut().zip(x) {
        *d = (s.get() - zp) as i16;
    }
    Ok(v)
}

/// Common checks and values of an int8 weighted operator.
pub(crate) struct Weighted {
    /// Weights minus their zero points.
    pub(crate) weights: Vec<i16>,
    pub(crate) bias: Vec<i32>,
    /// Real weight scale of each output channel.
    pub(crate) w_scales: Vec<f32>,
    pub(crate) in_scale: f32,
    pub(crate) in_zp: i32,
    pub(crate) in_dtype: DType,
    pub(crate) out_scale: f32,
    pub(crate) out_zp: i32,
    pub(crate) out_dtype: DType,
    /// Clamp of the fused activation (not yet intersected with the output type).
    pub(crate) act: (i32, i32),
}

fn zp_in_range(op: &Op, g: &Graph, id: TensorId, zp: i32) -> Result<()> {
    let t = &g.tensors[id];
    let (lo, hi) = t.dtype.int_range().unwrap_or((0, 0));
    if i64::from(zp) < lo || i64::from(zp) > hi {
        return Err(node_err(
            op,
            format!(
                "zero point {zp} of '{}' is outside the range of {}",
                t.name, t.dtype
            ),
        ));
    }
    Ok(())
}

/// Reads and checks `[x, w, bias?] -> out` with `out_ch` output channels along weight axis
/// `w_axis`.
pub(crate) fn weighted(
    g: &Graph,
    op: &Op,
    out_ch: usize,
    w_axis: usize,
    act: Activation,
) -> Result<Weighted> {
    if !(op.inputs.len() == 2 || op.inputs.len() == 3) || op.outputs.len() != 1 {
        return Err(node_err(
            op,
            "expects inputs [x, weights, bias?] and one output",
        ));
    }
    let (x, w, out) = (op.inputs[0], op.inputs[1], op.outputs[0]);
    let (xt, wt, ot) = (&g.tensors[x], &g.tensors[w], &g.tensors[out]);
    if !matches!(xt.dtype, DType::I8 | DType::U8) || !is_qint(ot.dtype) {
        return Err(node_err(
            op,
            format!(
                "input '{}' ({}) must be i8 or u8 and output '{}' ({}) an integer type",
                xt.name, xt.dtype, ot.name, ot.dtype
            ),
        ));
    }
    let (in_scale, in_zp) = per_tensor(g, op, x)?;
    let (out_scale, out_zp) = per_tensor(g, op, out)?;
    zp_in_range(op, g, x, in_zp)?;
    let raw: Vec<i32> = match (wt.dtype, wt.data.as_deref()) {
        (DType::I8, Some(d)) => d.iter().map(|&b| i32::from(b as i8)).collect(),
        (DType::U8, Some(d)) => d.iter().map(|&b| i32::from(b)).collect(),
        _ => {
            return Err(node_err(
                op,
                format!("weights '{}' must be a constant i8 or u8 tensor", wt.name),
            ));
        }
    };
    let q = wt.quant.as_ref().ok_or_else(|| {
        node_err(
            op,
            format!("weights '{}' have no quantization parameters", wt.name),
        )
    })?;
    let per_channel = q.scale.len() > 1;
    if per_channel && (q.scale.len() != out_ch || q.axis.is_some_and(|a| a != w_axis)) {
        return Err(node_err(
            op,
            format!(
                "weights '{}' have {} scales along axis {:?}; expected {out_ch} along axis {w_axis}",
                wt.name,
                q.scale.len(),
                q.axis
            ),
        ));
    }
    if q.scale.is_empty() || !(q.zero_point.len() == 1 || q.zero_point.len() == q.scale.len()) {
        return Err(node_err(
            op,
            format!("weights '{}' have inconsistent quantization", wt.name),
        ));
    }
    let w_scales: Vec<f32> = (0..out_ch)
        .map(|c| q.scale_at(c.min(q.scale.len() - 1)))
        .collect();
    let w_zps: Vec<i32> = (0..out_ch)
        .map(|c| q.zero_point_at(c.min(q.zero_point.len() - 1)))
        .collect();
    for &z in &w_zps {
        zp_in_range(op, g, w, z)?;
    }
    if let Some(s) = w_scales.iter().find(|s| !(s.is_finite() && **s >= 0.0)) {
        return Err(node_err(
            op,
            format!("weights '{}' have an invalid scale {s}", wt.name),
        ));
    }
    // Zero points apply along the channel axis: axis 0 ([O, ...]) or the last axis (depthwise).
    let inner = if w_axis == 0 {
        raw.len() / out_ch.max(1)
    } else {
        1
    };
    let weights = raw
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let c = if w_axis == 0 {
                i / inner.max(1)
            } else {
                i % out_ch.max(1)
            };
            (v - w_zps[c]) as i16
        })
        .collect();
    let bias = match op.inputs.get(2) {
        None => vec![0; out_ch],
        Some(&b) => {
            let bt = &g.tensors[b];
            match bt.data_i32() {
                Some(v) if v.len() == out_ch => v,
                _ => {
                    return Err(node_err(
                        op,
                        format!(
                            "bias '{}' must be a constant i32 tensor of {out_ch} values",
                            bt.name
                        ),
                    ));
                }
            }
        }
    };
    let act = activation_range(act, out_scale, out_zp, ot.dtype);
    Ok(Weighted {
        weights,
        bias,
        w_scales,
        in_scale,
        in_zp,
        in_dtype: xt.dtype,
        out_scale,
        out_zp,
        out_dtype: ot.dtype,
        act,
    })
}

/// Per-channel rescale factors `in_scale * w_scale[c] / out_scale`, in double as TFLite's
/// `PopulateConvolutionQuantizationParams` computes them, rounding as the graph's `requant`
/// says.
pub(crate) fn conv_rescales(g: &Graph, op: &Op, w: &Weighted) -> Result<Vec<Rescale>> {
    w.w_scales
        .iter()
        .map(|&ws| {
            let real = f64::from(w.in_scale) * f64::from(ws) / f64::from(w.out_scale);
            Ok(Rescale::new(op, real, "output")?.with_requant(g.requant))
        })
        .collect()
}

/// Spatial geometry shared by Conv2D and DepthwiseConv2D.
#[derive(Clone, Copy)]
pub(crate) struct Geometry {
    pub(crate) n: usize,
    pub(crate) h: usize,
    pub(crate) w: usize,
    pub(crate) c: usize,
    pub(crate) oh: usize,
    pub(crate) ow: usize,
    pub(crate) kh: usize,
    pub(crate) kw: usize,
    pub(crate) sh: usize,
    pub(crate) sw: usize,
    pub(crate) dh: usize,
    pub(crate) dw: usize,
    pub(crate) pt: usize,
    pub(crate) pl: usize,
}

impl Geometry {
    /// Checks the output shape against input, kernel `kh x kw`, strides, dilations, padding.
    pub(crate) fn new(
        g: &Graph,
        op: &Op,
        attrs: &ConvAttrs,
        kh: usize,
        kw: usize,
        out_ch: usize,
    ) -> Result<Self> {
        let xs = &g.tensors[op.inputs[0]].shape;
        let os = &g.tensors[op.outputs[0]].shape;
        if xs.len() != 4 || os.len() != 4 {
            return Err(node_err(
                op,
                format!("input {xs:?} and output {os:?} must be 4-D NHWC"),
            ));
        }
        let (sh, sw) = attrs.stride;
        let (dh, dw) = attrs.dilation;
        if sh == 0 || sw == 0 || dh == 0 || dw == 0 || kh == 0 || kw == 0 {
            return Err(node_err(
                op,
                "strides, dilations and kernel sizes must be positive",
            ));
        }
        let p = attrs.padding;
        let out = |i: usize, k: usize, s: usize, d: usize, a: usize, b: usize| -> Option<usize> {
            let eff = (k - 1).checked_mul(d)?.checked_add(1)?;
            let padded = i.checked_add(a)?.checked_add(b)?;
            Some(padded.checked_sub(eff)? / s + 1)
        };
        let oh = out(xs[1], kh, sh, dh, p.top, p.bottom);
        let ow = out(xs[2], kw, sw, dw, p.left, p.right);
        let expect = oh.zip(ow).map(|(oh, ow)| [xs[0], oh, ow, out_ch]);
        if expect.as_ref().map(|e| e.as_slice()) != Some(os.as_slice()) {
            return Err(node_err(
                op,
                format!(
                    "output shape {os:?} does not match input {xs:?}, kernel {kh}x{kw}, strides \
                     {:?}, dilations {:?} and padding {p:?} (expected {expect:?})",
                    attrs.stride, attrs.dilation
                ),
            ));
        }
        Ok(Geometry {
            n: xs[0],
            h: xs[1],
            w: xs[2],
            c: xs[3],
            oh: os[1],
            ow: os[2],
            kh,
            kw,
            sh,
            sw,
            dh,
            dw,
            pt: p.top,
            pl: p.left,
        })
    }

    /// Input row/column of kernel tap `k` for output position `o` (None when in the padding).
    #[inline(always)]
    fn tap(o: usize, s: usize, k: usize, d: usize, pad: usize, size: usize) -> Option<usize> {
        (o * s + k * d).checked_sub(pad).filter(|&i| i < size)
    }
}

/// Conv2D: `[x, w [O, KH, KW, C], bias?]`.
pub struct Conv {
    pub(crate) geo: Geometry,
    pub(crate) o: usize,
    pub(crate) wt: Weighted,
    pub(crate) rescale: Vec<Rescale>,
    /// Every rescale factor is simple (see [`Rescale::is_simple`]).
    simple: bool,
}

impl Conv {
    pub(super) fn prepare(g: &Graph, op: &Op, attrs: &ConvAttrs) -> Result<Prepared> {
        Ok(Prepared::new(Conv::new(g, op, attrs)?, vec![op.inputs[0]]))
    }

    /// Checks shapes and types and prepares the weights and rescale factors.
    pub(crate) fn new(g: &Graph, op: &Op, attrs: &ConvAttrs) -> Result<Conv> {
        if op.inputs.len() < 2 {
            return Err(node_err(op, "expects inputs [x, weights, bias?]"));
        }
        let ws = g.tensors[op.inputs[1]].shape.clone();
        if ws.len() != 4 {
            return Err(node_err(
                op,
                format!("weights {ws:?} are not [O, KH, KW, C]"),
            ));
        }
        let geo = Geometry::new(g, op, attrs, ws[1], ws[2], ws[0])?;
        if ws[3] != geo.c {
            return Err(node_err(
                op,
                format!("weights {ws:?} do not match {} input channels", geo.c),
            ));
        }
        let wt = weighted(g, op, ws[0], 0, attrs.activation)?;
        let rescale = conv_rescales(g, op, &wt)?;
        Ok(Conv {
            geo,
            o: ws[0],
            wt,
            simple: rescale.iter().all(|r| r.is_simple()),
            rescale,
        })
    }

    fn run_typed<I: QInt, O: QInt>(&self, x: &[I]) -> Result<Data> {
        let Geometry {
            n,
            h,
            w,
            c,
            oh,
            ow,
            kh,
            kw,
            sh,
            sw,
            pt,
            pl,
            ..
        } = self.geo;
        let o = self.o;
        let k = kh * kw * c;
        let x16 = widen(x, self.wt.in_zp)?;
        let mut out = zeroed::<O>(n * oh * ow * o, "convolution output")?;
        let mut patch = vec![0i16; k];
        let mut acc = vec![0i32; o];
        let pointwise = kh == 1 && kw == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0;
        for b in 0..n {
            for oy in 0..oh {
                for ox in 0..ow {
                    let src: &[i16] = if pointwise {
                        let p = ((b * h + oy) * w + ox) * c;
                        &x16[p..p + c]
                    } else {
                        self.fill_patch(&x16, &mut patch, b, oy, ox);
                        &patch
                    };
                    let mut oc = 0;
                    while oc + 4 <= o {
                        let r = dot4(src, &self.wt.weights[oc * k..(oc + 4) * k]);
                        acc[oc..oc + 4].copy_from_slice(&r);
                        oc += 4;
                    }
                    while oc < o {
                        acc[oc] = dot(src, &self.wt.weights[oc * k..(oc + 1) * k]);
                        oc += 1;
                    }
                    let base = ((b * oh + oy) * ow + ox) * o;
                    store(
                        &acc,
                        &self.wt.bias,
                        &self.rescale,
                        self.wt.out_zp,
                        self.wt.act,
                        self.simple,
                        &mut out[base..base + o],
                    );
                }
            }
        }
        Ok(O::wrap(out))
    }

    /// Gathers the receptive field of output `(b, oy, ox)` in `[KH][KW][C]` order, zeros where
    /// the window hangs over the border.
    fn fill_patch(&self, x16: &[i16], patch: &mut [i16], b: usize, oy: usize, ox: usize) {
        let Geometry {
            h,
            w,
            c,
            kh,
            kw,
            sh,
            sw,
            dh,
            dw,
            pt,
            pl,
            ..
        } = self.geo;
        let row_len = kw * c;
        for ky in 0..kh {
            let row = &mut patch[ky * row_len..(ky + 1) * row_len];
            let Some(iy) = Geometry::tap(oy, sh, ky, dh, pt, h) else {
                row.fill(0);
                continue;
            };
            let line = (b * h + iy) * w;
            // Fast path: the whole row of taps is inside the image and contiguous.
            if dw == 1
                && let Some(ix0) = (ox * sw).checked_sub(pl)
                && ix0 + kw <= w
            {
                let s = (line + ix0) * c;
                row.copy_from_slice(&x16[s..s + row_len]);
                continue;
            }
            for kx in 0..kw {
                let seg = &mut row[kx * c..(kx + 1) * c];
                match Geometry::tap(ox, sw, kx, dw, pl, w) {
                    Some(ix) => {
                        let s = (line + ix) * c;
                        seg.copy_from_slice(&x16[s..s + c]);
                    }
                    None => seg.fill(0),
                }
            }
        }
    }
}

/// Adds the bias, requantizes per channel, adds the output zero point and clamps.
#[inline(always)]
fn store<O: QInt>(
    acc: &[i32],
    bias: &[i32],
    rescale: &[Rescale],
    zp: i32,
    act: (i32, i32),
    simple: bool,
    out: &mut [O],
) {
    let lo = act.0.max(O::MIN);
    let hi = act.1.min(O::MAX).max(lo);
    let n = out.len().min(acc.len()).min(bias.len()).min(rescale.len());
    let (out, acc, bias, rescale) = (&mut out[..n], &acc[..n], &bias[..n], &rescale[..n]);
    // Factors below one (the usual case) skip the left shift and the saturation test.
    if simple {
        for i in 0..n {
            let v = rescale[i]
                .apply_simple(acc[i].wrapping_add(bias[i]))
                .wrapping_add(zp);
            out[i] = O::put(v.max(lo).min(hi));
        }
    } else {
        for i in 0..n {
            let v = rescale[i]
                .apply(acc[i].wrapping_add(bias[i]))
                .wrapping_add(zp);
            out[i] = O::put(v.max(lo).min(hi));
        }
    }
}

impl Kernel for Conv {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        with_qint!(self.wt.out_dtype, O => {
            with_qint!(self.wt.in_dtype, I => {
                let x = I::slice(inputs[0]).ok_or_else(bad_data)?;
                self.run_typed::<I, O>(x)
            }, else Err(bad_data()))
        }, else Err(bad_data()))
    }
}

/// DepthwiseConv2D: `[x, w [1, KH, KW, C * M], bias?]`.
pub struct Depthwise {
    pub(crate) geo: Geometry,
    pub(crate) m: usize,
    pub(crate) wt: Weighted,
    pub(crate) rescale: Vec<Rescale>,
    /// Every rescale factor is simple (see [`Rescale::is_simple`]).
    simple: bool,
}

impl Depthwise {
    pub(super) fn prepare(
        g: &Graph,
        op: &Op,
        attrs: &ConvAttrs,
        depth_multiplier: usize,
    ) -> Result<Prepared> {
        let d = Depthwise::new(g, op, attrs, depth_multiplier)?;
        Ok(Prepared::new(d, vec![op.inputs[0]]))
    }

    /// Checks shapes and types and prepares the weights and rescale factors.
    pub(crate) fn new(
        g: &Graph,
        op: &Op,
        attrs: &ConvAttrs,
        depth_multiplier: usize,
    ) -> Result<Depthwise> {
        if op.inputs.len() < 2 {
            return Err(node_err(op, "expects inputs [x, weights, bias?]"));
        }
        let ws = g.tensors[op.inputs[1]].shape.clone();
        if ws.len() != 4 || ws[0] != 1 {
            return Err(node_err(
                op,
                format!("weights {ws:?} are not [1, KH, KW, C * M]"),
            ));
        }
        let geo = Geometry::new(g, op, attrs, ws[1], ws[2], ws[3])?;
        let m = depth_multiplier;
        if m == 0 || geo.c.checked_mul(m) != Some(ws[3]) {
            return Err(node_err(
                op,
                format!(
                    "weights {ws:?} do not hold {} channels x depth multiplier {m}",
                    geo.c
                ),
            ));
        }
        let wt = weighted(g, op, ws[3], 3, attrs.activation)?;
        let rescale = conv_rescales(g, op, &wt)?;
        Ok(Depthwise {
            geo,
            m,
            wt,
            simple: rescale.iter().all(|r| r.is_simple()),
            rescale,
        })
    }

    fn run_typed<I: QInt, O: QInt>(&self, x: &[I]) -> Result<Data> {
        let Geometry {
            n,
            h,
            w,
            c,
            oh,
            ow,
            kh,
            kw,
            sh,
            sw,
            dh,
            dw,
            pt,
            pl,
        } = self.geo;
        let m = self.m;
        let cm = c * m;
        let x16 = widen(x, self.wt.in_zp)?;
        let mut out = zeroed::<O>(n * oh * ow * cm, "depthwise output")?;
        let mut acc = vec![0i32; cm];
        // (input pixel offset, weight tap offset) of the taps inside the image.
        let mut taps: Vec<(usize, usize)> = Vec::with_capacity(kh * kw);
        for b in 0..n {
            for oy in 0..oh {
                for ox in 0..ow {
                    taps.clear();
                    for ky in 0..kh {
                        let Some(iy) = Geometry::tap(oy, sh, ky, dh, pt, h) else {
                            continue;
                        };
                        for kx in 0..kw {
                            if let Some(ix) = Geometry::tap(ox, sw, kx, dw, pl, w) {
                                taps.push((((b * h + iy) * w + ix) * c, (ky * kw + kx) * cm));
                            }
                        }
                    }
                    if m == 1 {
                        self.accumulate_m1(&x16, &taps, &mut acc);
                    } else {
                        acc.fill(0);
                        for &(xp, wp) in &taps {
                            let xrow = &x16[xp..xp + c];
                            let wrow = &self.wt.weights[wp..wp + cm];
                            let groups = acc.chunks_exact_mut(m).zip(wrow.chunks_exact(m));
                            for ((a, wg), &xv) in groups.zip(xrow) {
                                let v = i32::from(xv);
                                for (a, &wv) in a.iter_mut().zip(wg) {
                                    *a = a.wrapping_add(v * i32::from(wv));
                                }
                            }
                        }
                    }
                    let base = ((b * oh + oy) * ow + ox) * cm;
                    // The bias is added after accumulation, as in the reference kernel.
                    store(
                        &acc,
                        &self.wt.bias,
                        &self.rescale,
                        self.wt.out_zp,
                        self.wt.act,
                        self.simple,
                        &mut out[base..base + cm],
                    );
                }
            }
        }
        Ok(O::wrap(out))
    }

    /// Depth multiplier 1: per block of 16 channels, sums all taps in registers.
    fn accumulate_m1(&self, x16: &[i16], taps: &[(usize, usize)], acc: &mut [i32]) {
        const B: usize = 16;
        let c = acc.len();
        let mut c0 = 0;
        while c0 + B <= c {
            let mut a = [0i32; B];
            for &(xp, wp) in taps {
                let xs: &[i16; B] = x16[xp + c0..xp + c0 + B].try_into().expect("block");
                let ws: &[i16; B] = self.wt.weights[wp + c0..wp + c0 + B]
                    .try_into()
                    .expect("block");
                for j in 0..B {
                    a[j] = a[j].wrapping_add(i32::from(xs[j]) * i32::from(ws[j]));
                }
            }
            acc[c0..c0 + B].copy_from_slice(&a);
            c0 += B;
        }
        for (j, a) in acc.iter_mut().enumerate().skip(c0) {
            let mut s = 0i32;
            for &(xp, wp) in taps {
                s = s.wrapping_add(i32::from(x16[xp + j]) * i32::from(self.wt.weights[wp + j]));
            }
            *a = s;
        }
    }
}

impl Kernel for Depthwise {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        with_qint!(self.wt.out_dtype, O => {
            with_qint!(self.wt.in_dtype, I => {
                let x = I::slice(inputs[0]).ok_or_else(bad_data)?;
                self.run_typed::<I, O>(x)
            }, else Err(bad_data()))
        }, else Err(bad_data()))
    }
}

/// FullyConnected: `[x, w [O, I], bias?]`, `x` read as `[elements / I, I]`.
///
/// TFLite's reference FULLY_CONNECTED (`kReference`) rescales in floating point:
/// `round(acc * in_scale * w_scale / out_scale)` computed in double, not with a fixed-point
/// multiplier; this reproduces it.
pub struct FullyConnected {
    pub(crate) batches: usize,
    pub(crate) depth: usize,
    pub(crate) o: usize,
    pub(crate) wt: Weighted,
    /// `in_scale * w_scale[c] / out_scale` per output channel, in double.
    pub(crate) scale: Vec<f64>,
}

impl FullyConnected {
    pub(super) fn prepare(g: &Graph, op: &Op, act: Activation) -> Result<Prepared> {
        Ok(Prepared::new(
            FullyConnected::new(g, op, act)?,
            vec![op.inputs[0]],
        ))
    }

    /// Checks shapes and types and prepares the weights and rescale factors.
    pub(crate) fn new(g: &Graph, op: &Op, act: Activation) -> Result<FullyConnected> {
        if op.inputs.len() < 2 || op.outputs.len() != 1 {
            return Err(node_err(
                op,
                "expects inputs [x, weights, bias?] and one output",
            ));
        }
        let ws = g.tensors[op.inputs[1]].shape.clone();
        if ws.len() != 2 || ws[1] == 0 {
            return Err(node_err(op, format!("weights {ws:?} are not [O, I]")));
        }
        let (o, depth) = (ws[0], ws[1]);
        let xe = g.tensors[op.inputs[0]].elements();
        let oe = g.tensors[op.outputs[0]].elements();
        if !xe.is_multiple_of(depth) || (xe / depth).checked_mul(o) != Some(oe) {
            return Err(node_err(
                op,
                format!(
                    "input of {xe} elements, weights {ws:?} and output of {oe} elements do not agree"
                ),
            ));
        }
        let wt = weighted(g, op, o, 0, act)?;
        let scale = wt
            .w_scales
            .iter()
            .map(|&s| f64::from(wt.in_scale) * f64::from(s) / f64::from(wt.out_scale))
            .collect::<Vec<_>>();
        if let Some(s) = scale.iter().find(|s| !s.is_finite()) {
            return Err(node_err(
                op,
                format!("output rescale factor {s} is invalid"),
            ));
        }
        Ok(FullyConnected {
            batches: xe / depth,
            depth,
            o,
            wt,
            scale,
        })
    }

    fn run_typed<I: QInt, O: QInt>(&self, x: &[I]) -> Result<Data> {
        let (d, o) = (self.depth, self.o);
        let x16 = widen(x, self.wt.in_zp)?;
        let mut out = zeroed::<O>(self.batches * o, "fully-connected output")?;
        let (lo, hi) = (self.wt.act.0.max(O::MIN), self.wt.act.1.min(O::MAX));
        let mut acc = vec![0i32; o];
        for b in 0..self.batches {
            let xr = &x16[b * d..(b + 1) * d];
            let mut oc = 0;
            while oc + 4 <= o {
                let r = dot4(xr, &self.wt.weights[oc * d..(oc + 4) * d]);
                acc[oc..oc + 4].copy_from_slice(&r);
                oc += 4;
            }
            while oc < o {
                acc[oc] = dot(xr, &self.wt.weights[oc * d..(oc + 1) * d]);
                oc += 1;
            }
            for c in 0..o {
                let a = acc[c].wrapping_add(self.wt.bias[c]);
                let scaled = (f64::from(a) * self.scale[c]).round() as i32;
                let v = scaled.wrapping_add(self.wt.out_zp);
                out[b * o + c] = O::put(v.clamp(lo, hi.max(lo)));
            }
        }
        Ok(O::wrap(out))
    }
}

impl Kernel for FullyConnected {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        with_qint!(self.wt.out_dtype, O => {
            with_qint!(self.wt.in_dtype, I => {
                let x = I::slice(inputs[0]).ok_or_else(bad_data)?;
                self.run_typed::<I, O>(x)
            }, else Err(bad_data()))
        }, else Err(bad_data()))
    }
}
