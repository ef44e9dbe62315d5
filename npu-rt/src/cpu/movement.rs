//! Pad, Resize, the parts of a Concat, and Mean: data movement and reduction kernels.

use super::elem::{Int, load_f32, store_f32, with_int};
use super::float::round_half_away_f32;
use super::operands::{in_out, next_index, operands, volume};
use super::params::{
    BatchSpaceOp, ConcatMode, ConcatOp, MeanOp, OutRequant, PadOp, RemapOp, ResizeOp,
};
use super::reduce::Reduction;
use super::{Elem, MAX_RANK};
use crate::fixed::{multiply_by_quantized_multiplier, multiply_round_once};

/// Applies `r` in place to `len` integers of type `T` in `y`.
fn requant_in_place<T: Int>(y: &mut [u8], len: usize, r: OutRequant) {
    if !r.on {
        return;
    }
    for i in 0..len {
        let v = multiply_by_quantized_multiplier(T::load(y, i).wrapping_sub(r.zi), r.m, r.s)
            .wrapping_add(r.zo);
        T::store(y, i, v.clamp(T::MIN, T::MAX));
    }
}

/// `requant` is only meaningful for integers.
fn requant_ok(elem: Elem, r: OutRequant) -> bool {
    !r.on || !matches!(elem, Elem::F32)
}

/// The first `rank` entries of `shape`, `None` for a rank out of `1..=MAX_RANK`.
fn dims(shape: &[u32; MAX_RANK], rank: u32) -> Option<&[u32]> {
    let rank = rank as usize;
    (1..=MAX_RANK).contains(&rank).then(|| &shape[..rank])
}

pub(super) fn pad(p: &PadOp, weights: &[u8], arena: &mut [u8]) -> Option<()> {
    if !requant_ok(p.elem, p.requant) {
        return None;
    }
    let shape = dims(&p.shape, p.rank)?;
    let rank = shape.len();
    let mut out = [0u32; MAX_RANK];
    for d in 0..rank {
        out[d] = shape[d].checked_add(p.before[d])?.checked_add(p.after[d])?;
    }
    let out = &out[..rank];
    let e = p.elem.size();
    let nx = volume(shape)?;
    let ny = volume(out)?;
    let (x, y) = in_out(weights, arena, (p.x, nx), (p.y, ny), e)?;
    let value = p.value.to_le_bytes();
    for slot in y.chunks_exact_mut(e) {
        slot.copy_from_slice(&value[..e]);
    }
    // Output strides in elements; each innermost input row lands contiguously.
    let mut os = [0usize; MAX_RANK];
    let mut s = 1usize;
    for d in (0..rank).rev() {
        os[d] = s;
        s *= out[d] as usize;
    }
    let inner = shape[rank - 1] as usize;
    if let Some(rows) = nx.checked_div(inner) {
        let mut idx = [0usize; MAX_RANK];
        for r in 0..rows {
            let mut at = p.before[rank - 1] as usize;
            for d in 0..rank - 1 {
                at += (idx[d] + p.before[d] as usize) * os[d];
            }
            y[at * e..(at + inner) * e].copy_from_slice(&x[r * inner * e..(r + 1) * inner * e]);
            next_index(&mut idx[..rank - 1], &shape[..rank - 1]);
        }
    }
    with_int!(p.elem, T => requant_in_place::<T>(y, ny, p.requant), else ());
    Some(())
}

pub(super) fn resize(p: &ResizeOp, weights: &[u8], arena: &mut [u8]) -> Option<()> {
    if !requant_ok(p.elem, p.requant) {
        return None;
    }
    let [n, h, w, c, oh, ow] = [p.n, p.h, p.w, p.c, p.oh, p.ow].map(|v| v as usize);
    let e = p.elem.size();
    let nx = volume(&[p.n, p.h, p.w, p.c])?;
    let ny = volume(&[p.n, p.oh, p.ow, p.c])?;
    let entries = oh.checked_add(ow)?.checked_mul(3)?;
    let ([x, table], y) = operands(
        weights,
        arena,
        [
            (p.x, nx.checked_mul(e)?),
            (p.table, entries.checked_mul(4)?),
        ],
        (p.y, ny.checked_mul(e)?),
    )?;
    let entry = |k: usize| {
        let b = &table[4 * k..4 * k + 4];
        i32::from_le_bytes([b[0], b[1], b[2], b[3]])
    };
    // (first source, second source, 10-bit fraction) of output row `r` / column `oh + col`.
    let coords = |k: usize, size: usize| -> Option<(usize, usize, i64)> {
        let i0 = usize::try_from(entry(3 * k)).ok().filter(|&i| i < size)?;
        let i1 = usize::try_from(entry(3 * k + 1))
            .ok()
            .filter(|&i| i < size)?;
        Some((i0, i1, i64::from(entry(3 * k + 2))))
    };
    // The loops run over every output position: none when there is nothing to write.
    if ny == 0 {
        return Some(());
    }
    for k in 0..oh {
        coords(k, h)?;
    }
    for k in 0..ow {
        coords(oh + k, w)?;
    }
    let mut q = 0usize; // output element
    for b in 0..n {
        for oy in 0..oh {
            let (y0, y1, dy) = coords(oy, h)?;
            for ox in 0..ow {
                let (x0, x1, dx) = coords(oh + ox, w)?;
                let at = |yy: usize, xx: usize| ((b * h + yy) * w + xx) * c;
                if !p.bilinear {
                    let s = at(y0, x0) * e;
                    y[q * e..(q + c) * e].copy_from_slice(&x[s..s + c * e]);
                } else if p.elem == Elem::F32 {
                    // TFLite's float reference, same operation order.
                    let (fy, fx) = (f32::from_bits(dy as u32), f32::from_bits(dx as u32));
                    let (p00, p10, p01, p11) = (at(y0, x0), at(y1, x0), at(y0, x1), at(y1, x1));
                    for ch in 0..c {
                        let v = load_f32(x, p00 + ch) * (1.0 - fy) * (1.0 - fx)
                            + load_f32(x, p10 + ch) * fy * (1.0 - fx)
                            + load_f32(x, p01 + ch) * (1.0 - fy) * fx
                            + load_f32(x, p11 + ch) * fy * fx;
                        store_f32(y, q + ch, v);
                    }
                } else {
                    let (p00, p10, p01, p11) = (at(y0, x0), at(y1, x0), at(y0, x1), at(y1, x1));
                    const ONE: i64 = 1 << 10;
                    with_int!(p.elem, T => {
                        for ch in 0..c {
                            let v = i64::from(T::load(x, p00 + ch)) * (ONE - dy) * (ONE - dx)
                                + i64::from(T::load(x, p10 + ch)) * dy * (ONE - dx)
                                + i64::from(T::load(x, p01 + ch)) * (ONE - dy) * dx
                                + i64::from(T::load(x, p11 + ch)) * dy * dx;
                            let round = if v > 0 { 1 << 19 } else { -(1 << 19) };
                            // Truncating division, then the narrowing cast TFLite does.
                            T::store(y, q + ch, ((v + round) / (1 << 20)) as i32);
                        }
                    }, else return None);
                }
                q += c;
            }
        }
    }
    with_int!(p.elem, T => requant_in_place::<T>(y, ny, p.requant), else ());
    Some(())
}

pub(super) fn concat(p: &ConcatOp, weights: &[u8], arena: &mut [u8]) -> Option<()> {
    if p.mode != ConcatMode::Copy && p.elem == Elem::F32 {
        return None;
    }
    let (outer, chunk, stride) = (p.outer as usize, p.chunk as usize, p.stride as usize);
    if chunk > stride {
        return None;
    }
    // Nothing to move (and `outer` alone is not bounded by any buffer).
    if chunk == 0 {
        return Some(());
    }
    let e = p.elem.size();
    let nx = outer.checked_mul(chunk)?;
    // The last chunk ends `chunk` elements after its start.
    let ny = match outer {
        0 => 0,
        k => (k - 1).checked_mul(stride)?.checked_add(chunk)?,
    };
    let (x, y) = in_out(weights, arena, (p.x, nx), (p.y, ny), e)?;
    let hi = p.hi.max(p.lo);
    for k in 0..outer {
        let (src, dst) = (k * chunk, k * stride);
        if p.mode == ConcatMode::Copy {
            y[dst * e..(dst + chunk) * e].copy_from_slice(&x[src * e..(src + chunk) * e]);
            continue;
        }
        with_int!(p.elem, T => {
            for i in 0..chunk {
                let v = T::load(x, src + i);
                let v = if p.mode == ConcatMode::Scale {
                    (round_half_away_f32(v as f32 * p.scale + p.bias) as i32).wrapping_add(p.zo)
                } else {
                    v
                };
                T::store(y, dst + i, v.clamp(p.lo, hi).clamp(<T as Int>::MIN, <T as Int>::MAX));
            }
        }, else return None);
    }
    Some(())
}

pub(super) fn mean(p: &MeanOp, weights: &[u8], arena: &mut [u8]) -> Option<()> {
    if !matches!(p.elem, Elem::I8 | Elem::U8 | Elem::I16 | Elem::I32) {
        return None;
    }
    let walk = Reduction::new(dims(&p.shape, p.rank)?, p.reduced)?;
    let (nx, ny, count) = (walk.nx, walk.ny, walk.count);
    let e = p.elem.size();
    let (x, y) = in_out(weights, arena, (p.x, nx), (p.y, ny), e)?;
    with_int!(p.elem, T => {
        for (q, base) in walk.outputs().enumerate() {
            let mut sum = 0i32;
            for off in walk.inputs(base) {
                sum = sum.wrapping_add(T::load(x, off));
            }
            let v = if count == 0 {
                0
            } else {
                let zsum = p.zi.wrapping_mul(count as i32);
                let scaled = if p.round_once {
                    multiply_round_once(sum.wrapping_sub(zsum), p.m, p.s)
                } else {
                    multiply_by_quantized_multiplier(sum.wrapping_sub(zsum), p.m, p.s)
                };
                scaled.wrapping_add(p.zo)
            };
            T::store(y, q, v.clamp(<T as Int>::MIN, <T as Int>::MAX));
        }
        Some(())
    }, else None)
}

/// Tile, MirrorPad, Reverse, Gather: every output element read through the offset tables.
pub(super) fn remap(p: &RemapOp, weights: &[u8], arena: &mut [u8]) -> Option<()> {
    if !requant_ok(p.elem, p.requant) {
        return None;
    }
    let ins = dims(&p.in_shape, p.rank)?;
    let outs = dims(&p.out_shape, p.rank)?;
    let rank = ins.len();
    let e = p.elem.size();
    let nx = volume(ins)?;
    let ny = volume(outs)?;
    let entries: usize = outs
        .iter()
        .try_fold(0usize, |a, &d| a.checked_add(d as usize))?;
    let ([x, table], y) = operands(
        weights,
        arena,
        [
            (p.x, nx.checked_mul(e)?),
            (p.table, entries.checked_mul(4)?),
        ],
        (p.y, ny.checked_mul(e)?),
    )?;
    // Start of each dimension's table, in entries.
    let mut start = [0usize; MAX_RANK];
    let mut s = 0usize;
    for d in 0..rank {
        start[d] = s;
        s += outs[d] as usize;
    }
    let entry = |k: usize| -> Option<usize> {
        let b = table.get(k * 4..k * 4 + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    if ny > 0 {
        let mut idx = [0usize; MAX_RANK];
        for slot in y.chunks_exact_mut(e) {
            let mut at = 0usize;
            for d in 0..rank {
                at = at.checked_add(entry(start[d] + idx[d])?)?;
            }
            slot.copy_from_slice(x.get(at * e..at.checked_add(1)? * e)?);
            next_index(&mut idx[..rank], outs);
        }
    }
    with_int!(p.elem, T => requant_in_place::<T>(y, ny, p.requant), else ());
    Some(())
}

/// SpaceToBatch / BatchToSpace (TFLite's `SpaceToBatchND` / `BatchToSpaceND` index arithmetic).
pub(super) fn batch_space(p: &BatchSpaceOp, weights: &[u8], arena: &mut [u8]) -> Option<()> {
    if !requant_ok(p.elem, p.requant) || p.n == 0 || p.on == 0 || p.bh == 0 || p.bw == 0 {
        return None;
    }
    let e = p.elem.size();
    let nx = volume(&[p.n, p.h, p.w, p.c])?;
    let ny = volume(&[p.on, p.oh, p.ow, p.c])?;
    let (x, y) = in_out(weights, arena, (p.x, nx), (p.y, ny), e)?;
    let [n, h, w, c] = [p.n, p.h, p.w, p.c].map(|v| v as usize);
    let [on, oh, ow] = [p.on, p.oh, p.ow].map(|v| v as usize);
    let [bh, bw, top, left] = [p.bh, p.bw, p.top, p.left].map(|v| v as usize);
    let pad = p.pad.to_le_bytes();
    let row = c.checked_mul(e)?;
    for ob in 0..on {
        for oy in 0..oh {
            for ox in 0..ow {
                let src = if p.to_batch {
                    let (b, k) = (ob % n, ob / n);
                    let (i, j) = (k / bw, k % bw);
                    let sy = (oy * bh + i).checked_sub(top).filter(|&v| v < h);
                    let sx = (ox * bw + j).checked_sub(left).filter(|&v| v < w);
                    match (sy, sx) {
                        (Some(sy), Some(sx)) => Some((b * h + sy) * w + sx),
                        _ => None,
                    }
                } else {
                    let (sy, sx) = (oy + top, ox + left);
                    let b = ((sy % bh) * bw + sx % bw) * on + ob;
                    Some((b * h + sy / bh) * w + sx / bw)
                };
                let at = ((ob * oh + oy) * ow + ox) * row;
                let dst = y.get_mut(at..at.checked_add(row)?)?;
                match src {
                    Some(s) => dst.copy_from_slice(x.get(s * row..s.checked_add(1)? * row)?),
                    None => {
                        for slot in dst.chunks_exact_mut(e) {
                            slot.copy_from_slice(&pad[..e]);
                        }
                    }
                }
            }
        }
    }
    with_int!(p.elem, T => requant_in_place::<T>(y, ny, p.requant), else ());
    Some(())
}
