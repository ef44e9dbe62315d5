//! TransposeConv2D ([`Op::TransposeConv`](super::Op::TransposeConv)) and BatchMatMul
//! ([`MatMulOp`]): TFLite's reference integer arithmetic, wrapping 32-bit accumulators and
//! `MultiplyByQuantizedMultiplier`.
//!
//! TFLite's transposed convolution scatters each input pixel into an int32 scratch output; this
//! kernel gathers per output pixel the taps whose input lands there, the same additions in
//! another order (wrapping addition is commutative), without a scratch buffer.

use super::Elem;
use super::MAX_RANK;
use super::conv::{conv_operands, epilogue};
use super::elem::{Int, load_f32, store_f32, with_int};
use super::operands::{operands, volume};
use super::params::{ConvOp, MatMulOp};
use crate::fixed::{multiply_by_quantized_multiplier, multiply_round_once};

/// Kernel taps `(k, i)` with `i * s + k == o + pad`, `k < kernel` and `i < size`.
#[inline(always)]
fn taps(
    o: usize,
    s: usize,
    kernel: usize,
    pad: usize,
    size: usize,
) -> impl Iterator<Item = (usize, usize)> {
    let t = o + pad;
    (t % s..kernel.min(t + 1)).step_by(s).filter_map(move |k| {
        let i = (t - k) / s;
        (i < size).then_some((k, i))
    })
}

pub(super) fn transpose_conv(p: &ConvOp, weights: &[u8], arena: &mut [u8]) -> Option<()> {
    let ints = |e: Elem| matches!(e, Elem::I8 | Elem::U8 | Elem::I16);
    if !ints(p.x_elem) || !ints(p.y_elem) || !matches!(p.w_elem, Elem::I8 | Elem::I16) {
        return None;
    }
    if [p.kh, p.kw, p.sh, p.sw].contains(&0)
        || p.dh != 1
        || p.dw != 1
        || p.depth_multiplier != 0
        || p.float_scale
    {
        return None;
    }
    let nw = volume(&[p.oc, p.kh, p.kw, p.c])?;
    let ([x, w, bias, scale], y) = conv_operands(p, nw, weights, arena)?;
    if y.is_empty() {
        return Some(());
    }
    // Output index plus padding must not overflow.
    (p.oh as usize).checked_add(p.top as usize)?;
    (p.ow as usize).checked_add(p.left as usize)?;
    with_int!(p.x_elem, I => with_int!(p.y_elem, O => with_int!(p.w_elem, W => {
        run_transpose::<I, O, W>(p, x, w, bias, scale, y);
        Some(())
    }, else None), else None), else None)
}

fn run_transpose<I: Int, O: Int, W: Int>(
    p: &ConvOp,
    x: &[u8],
    w: &[u8],
    bias: &[u8],
    scale: &[u8],
    y: &mut [u8],
) {
    let [n, h, wi, c, oh, ow, oc, kh, kw, sh, sw, top, left] = [
        p.n, p.h, p.w_in, p.c, p.oh, p.ow, p.oc, p.kh, p.kw, p.sh, p.sw, p.top, p.left,
    ]
    .map(|v| v as usize);
    // `transpose_conv` refused float scales: the epilogue is the fixed-point one.
    let finish = epilogue::<O>(p, bias, scale);
    for b in 0..n {
        for oy in 0..oh {
            for ox in 0..ow {
                let out = ((b * oh + oy) * ow + ox) * oc;
                for o in 0..oc {
                    let mut acc = 0i32;
                    for (ky, iy) in taps(oy, sh, kh, top, h) {
                        for (kx, ix) in taps(ox, sw, kw, left, wi) {
                            let px = ((b * h + iy) * wi + ix) * c;
                            let wb = ((o * kh + ky) * kw + kx) * c;
                            for i in 0..c {
                                let xv = I::load(x, px + i).wrapping_sub(p.x_zp);
                                acc = acc.wrapping_add(xv.wrapping_mul(W::load(w, wb + i)));
                            }
                        }
                    }
                    O::store(y, out + o, finish(o, acc));
                }
            }
        }
    }
}

pub(super) fn batch_matmul(p: &MatMulOp, weights: &[u8], arena: &mut [u8]) -> Option<()> {
    let r = p.batch_rank as usize;
    if r > MAX_RANK - 2 {
        return None;
    }
    // Each input batch axis equals the output's or is 1 (broadcast).
    for d in 0..r {
        for s in [p.a_batch[d], p.b_batch[d]] {
            if s != p.batch[d] && s != 1 {
                return None;
            }
        }
    }
    let (m, k, n) = (p.m as usize, p.k as usize, p.n as usize);
    let nb = volume(&p.batch[..r])?;
    let na = volume(&p.a_batch[..r])?.checked_mul(m)?.checked_mul(k)?;
    let nbb = volume(&p.b_batch[..r])?.checked_mul(k)?.checked_mul(n)?;
    let ny = nb.checked_mul(m)?.checked_mul(n)?;
    // Bytes per element.
    let e = if p.float { 4 } else { 1 };
    let ([a, b], y) = operands(
        weights,
        arena,
        [(p.a, na.checked_mul(e)?), (p.b, nbb.checked_mul(e)?)],
        (p.y, ny.checked_mul(e)?),
    )?;
    if ny == 0 {
        return Some(());
    }
    // Row-major strides, in whole matrices, of the inputs' batch axes (0 where broadcast).
    let mut sa = [0usize; MAX_RANK];
    let mut sb = [0usize; MAX_RANK];
    let (mut ta, mut tb) = (1usize, 1usize);
    for d in (0..r).rev() {
        sa[d] = if p.a_batch[d] == 1 { 0 } else { ta };
        sb[d] = if p.b_batch[d] == 1 { 0 } else { tb };
        ta *= p.a_batch[d] as usize;
        tb *= p.b_batch[d] as usize;
    }
    let mut idx = [0usize; MAX_RANK];
    for bi in 0..nb {
        let (mut ai, mut bj) = (0usize, 0usize);
        for d in 0..r {
            ai += idx[d] * sa[d];
            bj += idx[d] * sb[d];
        }
        let (ab, bb, yb) = (ai * m * k, bj * k * n, bi * m * n);
        for i in 0..m {
            for j in 0..n {
                if p.float {
                    let mut acc = 0f32;
                    for kk in 0..k {
                        let ao = if p.adj_a { kk * m + i } else { i * k + kk };
                        let bo = if p.adj_b { j * k + kk } else { kk * n + j };
                        acc += load_f32(a, ab + ao) * load_f32(b, bb + bo);
                    }
                    store_f32(y, yb + i * n + j, acc);
                    continue;
                }
                let mut acc = 0i32;
                for kk in 0..k {
                    let ao = if p.adj_a { kk * m + i } else { i * k + kk };
                    let bo = if p.adj_b { j * k + kk } else { kk * n + j };
                    let av = i32::from(a[ab + ao] as i8) - p.za;
                    let bv = i32::from(b[bb + bo] as i8) - p.zb;
                    acc = acc.wrapping_add(av.wrapping_mul(bv));
                }
                let v = if p.round_once {
                    multiply_round_once(acc, p.multiplier, p.shift)
                } else {
                    multiply_by_quantized_multiplier(acc, p.multiplier, p.shift)
                }
                .wrapping_add(p.zo);
                y[yb + i * n + j] = v.clamp(-128, 127) as i8 as u8;
            }
        }
        // Odometer over the output batch axes.
        let mut d = r;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            if idx[d] < p.batch[d] as usize {
                break;
            }
            idx[d] = 0;
        }
    }
    Some(())
}
