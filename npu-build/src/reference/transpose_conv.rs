//! TransposeConv2D (TFLite's `reference_integer_ops::TransposeConv`, per-channel int8).
//!
//! TFLite scatters: every input pixel adds `(x - x_zp) * w` into an int32 scratch output at
//! `(iy * stride + ky - pad, ix * stride + kx - pad)`, then adds the bias and rescales each
//! channel with `MultiplyByQuantizedMultiplier` (the multipliers of
//! `PopulateConvolutionQuantizationParams`, as for Conv2D), adds the output zero point and
//! clamps to the fused activation's range. This kernel gathers instead (per output pixel, the
//! taps whose input lands there); the sum is the same set of wrapping 32-bit additions, so the
//! result is identical, and it needs no scratch buffer.

use super::conv::{Weighted, conv_rescales, weighted};
use super::util::{QInt, Rescale, bad_data, node_err, with_qint, zeroed};
use super::{Kernel, Prepared};
use crate::error::Result;
use crate::ir::{DType, Graph, Op, TransposeConvAttrs};
use crate::value::Data;

/// Shapes of a transposed convolution, checked.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TGeometry {
    pub(crate) n: usize,
    pub(crate) h: usize,
    pub(crate) w: usize,
    pub(crate) c: usize,
    pub(crate) oh: usize,
    pub(crate) ow: usize,
    pub(crate) o: usize,
    pub(crate) kh: usize,
    pub(crate) kw: usize,
    pub(crate) sh: usize,
    pub(crate) sw: usize,
    pub(crate) pt: usize,
    pub(crate) pl: usize,
}

impl TGeometry {
    /// Checks `[x [N, H, W, C], w [O, KH, KW, C], bias?] -> [N, OH, OW, O]` and the attributes.
    pub(crate) fn new(g: &Graph, op: &Op, a: &TransposeConvAttrs) -> Result<TGeometry> {
        if !(op.inputs.len() == 2 || op.inputs.len() == 3) || op.outputs.len() != 1 {
            return Err(node_err(
                op,
                "expects inputs [x, weights, bias?] and one output",
            ));
        }
        let xs = &g.tensors[op.inputs[0]].shape;
        let ws = &g.tensors[op.inputs[1]].shape;
        let os = &g.tensors[op.outputs[0]].shape;
        let (&[n, h, w, c], &[o, kh, kw, wc], &[on, oh, ow, oo]) =
            (xs.as_slice(), ws.as_slice(), os.as_slice())
        else {
            return Err(node_err(
                op,
                format!(
                    "input {xs:?}, weights {ws:?} and output {os:?} must be 4-D (NHWC, OHWI, NHWC)"
                ),
            ));
        };
        if wc != c || oo != o || on != n || kh == 0 || kw == 0 {
            return Err(node_err(
                op,
                format!("weights {ws:?} do not match input {xs:?} and output {os:?}"),
            ));
        }
        let (sh, sw) = a.stride;
        if sh == 0 || sw == 0 {
            return Err(node_err(op, "strides must be positive"));
        }
        // Every index the kernels form must stay far from overflow.
        let reach = |i: usize, s: usize, k: usize, p: usize, out: usize| {
            i.checked_mul(s)
                .and_then(|v| v.checked_add(k))
                .and_then(|v| v.checked_add(p))
                .and_then(|v| v.checked_add(out))
                .is_some_and(|v| v < 1 << 40)
        };
        if !reach(h, sh, kh, a.pad_top, oh) || !reach(w, sw, kw, a.pad_left, ow) {
            return Err(node_err(
                op,
                "the input, stride, kernel, padding and output sizes are too large",
            ));
        }
        Ok(TGeometry {
            n,
            h,
            w,
            c,
            oh,
            ow,
            o,
            kh,
            kw,
            sh,
            sw,
            pt: a.pad_top,
            pl: a.pad_left,
        })
    }

    /// The kernel taps `(k, i)` reaching output row (or column) `o`: `i * s + k - pad == o`.
    #[inline(always)]
    pub(crate) fn taps(
        o: usize,
        s: usize,
        k: usize,
        pad: usize,
        size: usize,
    ) -> impl Iterator<Item = (usize, usize)> {
        let t = o + pad;
        // The first tap with `t - k` a multiple of `s`, then every `s`-th one.
        (t % s..k.min(t + 1)).step_by(s).filter_map(move |kk| {
            let i = (t - kk) / s;
            (i < size).then_some((kk, i))
        })
    }
}

/// TransposeConv2D: `[x, w [O, KH, KW, C], bias?]`.
pub struct TransposeConv {
    pub(crate) geo: TGeometry,
    pub(crate) wt: Weighted,
    pub(crate) rescale: Vec<Rescale>,
}

impl TransposeConv {
    pub(super) fn prepare(g: &Graph, op: &Op, a: &TransposeConvAttrs) -> Result<Prepared> {
        Ok(Prepared::new(
            TransposeConv::new(g, op, a)?,
            vec![op.inputs[0]],
        ))
    }

    /// Checks shapes and types and prepares the weights and rescale factors.
    pub(crate) fn new(g: &Graph, op: &Op, a: &TransposeConvAttrs) -> Result<TransposeConv> {
        let geo = TGeometry::new(g, op, a)?;
        let wt = weighted(g, op, geo.o, 0, a.activation)?;
        let rescale = if wt.in_dtype == DType::U8 {
            // TFLite's uint8 path (`PopulateConvolutionQuantizationParams` ->
            // `GetQuantizedConvolutionMultipler`) multiplies the two scales in float first.
            wt.w_scales
                .iter()
                .map(|&ws| {
                    let real = f64::from(wt.in_scale * ws) / f64::from(wt.out_scale);
                    Rescale::new(op, real, "output")
                })
                .collect::<Result<Vec<_>>>()?
        } else {
            conv_rescales(g, op, &wt)?
        };
        Ok(TransposeConv { geo, wt, rescale })
    }

    fn run_typed<I: QInt, O: QInt>(&self, x: &[I]) -> Result<Data> {
        let TGeometry {
            n,
            h,
            w,
            c,
            oh,
            ow,
            o,
            kh,
            kw,
            sh,
            sw,
            pt,
            pl,
        } = self.geo;
        let mut out = zeroed::<O>(n * oh * ow * o, "transposed convolution output")?;
        let lo = self.wt.act.0.max(O::MIN);
        let hi = self.wt.act.1.min(O::MAX).max(lo);
        let mut acc = vec![0i32; o];
        for b in 0..n {
            for oy in 0..oh {
                for ox in 0..ow {
                    acc.fill(0);
                    for (ky, iy) in TGeometry::taps(oy, sh, kh, pt, h) {
                        for (kx, ix) in TGeometry::taps(ox, sw, kw, pl, w) {
                            let px = ((b * h + iy) * w + ix) * c;
                            let xs = &x[px..px + c];
                            for (oc, a) in acc.iter_mut().enumerate() {
                                let wp = ((oc * kh + ky) * kw + kx) * c;
                                let wr = &self.wt.weights[wp..wp + c];
                                let mut s = *a;
                                for (&xv, &wv) in xs.iter().zip(wr) {
                                    let xv = xv.get().wrapping_sub(self.wt.in_zp);
                                    s = s.wrapping_add(xv.wrapping_mul(i32::from(wv)));
                                }
                                *a = s;
                            }
                        }
                    }
                    let base = ((b * oh + oy) * ow + ox) * o;
                    for oc in 0..o {
                        let v = self.rescale[oc]
                            .apply(acc[oc].wrapping_add(self.wt.bias[oc]))
                            .wrapping_add(self.wt.out_zp);
                        out[base + oc] = O::put(v.clamp(lo, hi));
                    }
                }
            }
        }
        Ok(O::wrap(out))
    }
}

impl Kernel for TransposeConv {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        with_qint!(self.wt.out_dtype, O => {
            with_qint!(self.wt.in_dtype, I => {
                let x = I::slice(inputs[0]).ok_or_else(bad_data)?;
                self.run_typed::<I, O>(x)
            }, else Err(bad_data()))
        }, else Err(bad_data()))
    }
}

#[cfg(test)]
mod tests {
    use super::TGeometry;

    #[test]
    fn taps_of_stride_two() {
        // k = 3, s = 2, pad 0: output 0 <- (tap 0, input 0); output 1 <- (tap 1, input 0);
        // output 2 <- (tap 0, input 1), (tap 2, input 0).
        let t = |o| TGeometry::taps(o, 2, 3, 0, 8).collect::<Vec<_>>();
        assert_eq!(t(0), vec![(0, 0)]);
        assert_eq!(t(1), vec![(1, 0)]);
        assert_eq!(t(2), vec![(0, 1), (2, 0)]);
        // Stride above the kernel: some outputs receive nothing.
        assert!(TGeometry::taps(2, 3, 2, 0, 8).next().is_none());
        // Inputs beyond the image are skipped.
        assert_eq!(
            TGeometry::taps(16, 2, 3, 0, 8).collect::<Vec<_>>(),
            vec![(2, 7)]
        );
    }
}
