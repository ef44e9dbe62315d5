//! Conv2D, DepthwiseConv2D and FullyConnected ([`ConvOp`]): TFLite's reference arithmetic, the
//! accumulator `sum((x - x_zp) * w) + bias` in wrapping 32-bit integers, then a per-channel
//! rescale. Padded taps are skipped (they would contribute 0).

use super::Elem;
use super::elem::{Int, with_int};
use super::float::round_half_away;
use super::operands::{operands, volume};
use super::params::ConvOp;
use crate::fixed::{multiply_by_quantized_multiplier, multiply_round_once};

/// Input row (or column) of kernel tap `k` for output `o`; `None` in the padding.
#[inline(always)]
fn tap(o: usize, s: usize, k: usize, d: usize, pad: usize, size: usize) -> Option<usize> {
    (o * s + k * d).checked_sub(pad).filter(|&i| i < size)
}

pub(super) fn conv(p: &ConvOp, weights: &[u8], arena: &mut [u8]) -> Option<()> {
    let ints = |e: Elem| matches!(e, Elem::I8 | Elem::U8 | Elem::I16);
    if !ints(p.x_elem) || !ints(p.y_elem) || !matches!(p.w_elem, Elem::I8 | Elem::I16) {
        return None;
    }
    let d = [p.kh, p.kw, p.sh, p.sw, p.dh, p.dw];
    if d.contains(&0) {
        return None;
    }
    let m = p.depth_multiplier;
    let dense = m == 0;
    if !dense && p.c.checked_mul(m)? != p.oc {
        return None;
    }
    // Every tap of the dilated window must be addressable; taps beyond the image are skipped.
    let nw = if dense {
        volume(&[p.oc, p.kh, p.kw, p.c])?
    } else {
        volume(&[p.kh, p.kw, p.oc])?
    };
    let ([x, w, bias, scale], y) = conv_operands(p, nw, weights, arena)?;
    // Nothing to write; and without input channels the kernel size would be unbounded by the
    // weights (the loops below are bounded by output size x weights size).
    if y.is_empty() {
        return Some(());
    }
    if p.c == 0 {
        return None;
    }
    // The window must stay within usize arithmetic for every output position.
    let span = |o: u32, s: u32, k: u32, dl: u32| {
        u64::from(o)
            .checked_mul(u64::from(s))?
            .checked_add(u64::from(k).checked_mul(u64::from(dl))?)
    };
    usize::try_from(span(p.oh, p.sh, p.kh, p.dh)?).ok()?;
    usize::try_from(span(p.ow, p.sw, p.kw, p.dw)?).ok()?;
    with_int!(p.x_elem, I => with_int!(p.y_elem, O => with_int!(p.w_elem, W => {
        run::<I, O, W>(p, x, w, bias, scale, y);
        Some(())
    }, else None), else None), else None)
}

/// The operands of a convolution (transposed or not) of `nw` weights: the input, weights,
/// biases (one i32 per output channel) and scales (8 bytes per output channel: a multiplier
/// and a shift, or one f64), and the output.
pub(super) fn conv_operands<'a>(
    p: &ConvOp,
    nw: usize,
    weights: &'a [u8],
    arena: &'a mut [u8],
) -> Option<([&'a [u8]; 4], &'a mut [u8])> {
    let nx = volume(&[p.n, p.h, p.w_in, p.c])?;
    let ny = volume(&[p.n, p.oh, p.ow, p.oc])?;
    let oc = p.oc as usize;
    operands(
        weights,
        arena,
        [
            (p.x, nx.checked_mul(p.x_elem.size())?),
            (p.w, nw.checked_mul(p.w_elem.size())?),
            (p.bias, oc.checked_mul(4)?),
            (p.scale, oc.checked_mul(8)?),
        ],
        (p.y, ny.checked_mul(p.y_elem.size())?),
    )
}

/// The little-endian i32 at byte `i` of `b`.
fn word(b: &[u8], i: usize) -> i32 {
    i32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// The output value of channel `ch` from its accumulator (convolutions and transposed ones):
/// `+ bias[ch]`, rescaled by the channel's scale, `+ y_zp`, clamped to `lo..=hi` within `O`.
pub(super) fn epilogue<'a, O: Int>(
    p: &'a ConvOp,
    bias: &'a [u8],
    scale: &'a [u8],
) -> impl Fn(usize, i32) -> i32 + 'a {
    let lo = p.lo.max(O::MIN);
    let hi = p.hi.min(O::MAX).max(lo);
    move |ch, acc| {
        let acc = acc.wrapping_add(word(bias, 4 * ch));
        let v = if p.float_scale {
            let bits = u64::from(word(scale, 8 * ch) as u32)
                | (u64::from(word(scale, 8 * ch + 4) as u32) << 32);
            let f = f64::from_bits(bits);
            round_half_away(f64::from(acc) * f) as i32
        } else if p.round_once {
            multiply_round_once(acc, word(scale, 8 * ch), word(scale, 8 * ch + 4))
        } else {
            multiply_by_quantized_multiplier(acc, word(scale, 8 * ch), word(scale, 8 * ch + 4))
        };
        v.wrapping_add(p.y_zp).clamp(lo, hi)
    }
}

fn run<I: Int, O: Int, W: Int>(
    p: &ConvOp,
    x: &[u8],
    w: &[u8],
    bias: &[u8],
    scale: &[u8],
    y: &mut [u8],
) {
    let [n, h, wi, c, oh, ow, oc, kh, kw, sh, sw, dh, dw, top, left] = [
        p.n, p.h, p.w_in, p.c, p.oh, p.ow, p.oc, p.kh, p.kw, p.sh, p.sw, p.dh, p.dw, p.top, p.left,
    ]
    .map(|v| v as usize);
    let m = p.depth_multiplier as usize;
    let finish = epilogue::<O>(p, bias, scale);
    let xv = |i: usize| I::load(x, i).wrapping_sub(p.x_zp);
    for b in 0..n {
        for oy in 0..oh {
            for ox in 0..ow {
                let out = ((b * oh + oy) * ow + ox) * oc;
                for o in 0..oc {
                    let mut acc = 0i32;
                    for ky in 0..kh {
                        let Some(iy) = tap(oy, sh, ky, dh, top, h) else {
                            continue;
                        };
                        for kx in 0..kw {
                            let Some(ix) = tap(ox, sw, kx, dw, left, wi) else {
                                continue;
                            };
                            let px = ((b * h + iy) * wi + ix) * c;
                            if let Some(ic) = o.checked_div(m) {
                                let wv = W::load(w, (ky * kw + kx) * oc + o);
                                acc = acc.wrapping_add(xv(px + ic).wrapping_mul(wv));
                            } else {
                                let wb = ((o * kh + ky) * kw + kx) * c;
                                for i in 0..c {
                                    acc = acc
                                        .wrapping_add(xv(px + i).wrapping_mul(W::load(w, wb + i)));
                                }
                            }
                        }
                    }
                    O::store(y, out + o, finish(o, acc));
                }
            }
        }
    }
}
