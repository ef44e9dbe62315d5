//! The kernels behind [`Op::execute`]: the dispatch to each kernel, and the kernels without a
//! module of their own (operand resolution is in `operands`).

use super::elem::{Int, load_f32, store_f32, with_int};
use super::operands::{broadcast, for_each_broadcast, in_out, operands, volume};
use super::{BinaryKind, BinaryParams, Buf, Elem, MAX_RANK, Op, PoolParams};
use crate::fixed::{
    exp_on_negative_values, multiply_by_quantized_multiplier, multiply_round_once, reciprocal,
    round_ties_even, rounding_divide_by_pot, saturating_rounding_doubling_high_mul as srdhm,
};

/// The operands of an element-wise conversion of `len` values from `from` to `to`.
fn elementwise<'a>(
    weights: &'a [u8],
    arena: &'a mut [u8],
    (x, from): (Buf, Elem),
    (y, to): (Buf, Elem),
    len: u32,
) -> Option<(&'a [u8], &'a mut [u8])> {
    let len = len as usize;
    let ([x], y) = operands(
        weights,
        arena,
        [(x, len.checked_mul(from.size())?)],
        (y, len.checked_mul(to.size())?),
    )?;
    Some((x, y))
}

pub(super) fn execute(op: &Op, weights: &[u8], arena: &mut [u8]) -> Option<()> {
    match *op {
        Op::Copy { x, y, bytes } => {
            let n = bytes as usize;
            let ([x], y) = operands(weights, arena, [(x, n)], (y, n))?;
            y.copy_from_slice(x);
            Some(())
        }
        Op::Quantize {
            x,
            y,
            len,
            to,
            scale,
            zero_point,
        } => {
            let (x, y) = elementwise(weights, arena, (x, Elem::F32), (y, to), len)?;
            with_int!(to, O => {
                quantize::<O>(x, y, len as usize, scale, zero_point);
                Some(())
            }, else None)
        }
        Op::Requantize {
            x,
            y,
            len,
            from,
            to,
            in_zp,
            out_zp,
            multiplier,
            shift,
            lo,
            hi,
        } => {
            let (x, y) = elementwise(weights, arena, (x, from), (y, to), len)?;
            let r = Requant {
                in_zp,
                out_zp,
                multiplier,
                shift,
                lo,
                hi,
            };
            with_int!(from, I => with_int!(to, O => {
                requantize::<I, O>(x, y, len as usize, r);
                Some(())
            }, else None), else None)
        }
        Op::Dequantize {
            x,
            y,
            len,
            from,
            scale,
            zero_point,
        } => {
            let (x, y) = elementwise(weights, arena, (x, from), (y, Elem::F32), len)?;
            with_int!(from, I => {
                for i in 0..len as usize {
                    let v = I::load(x, i).wrapping_sub(zero_point);
                    store_f32(y, i, (scale * f64::from(v)) as f32);
                }
                Some(())
            }, else None)
        }
        Op::Transpose {
            x,
            y,
            elem_bytes,
            rank,
            shape,
            perm,
        } => transpose(weights, arena, x, y, elem_bytes, rank, shape, perm),
        Op::Softmax {
            x,
            y,
            rows,
            depth,
            from,
            to,
            multiplier,
            shift,
            diff_min,
        } => {
            let len = rows.checked_mul(depth)?;
            let (x, y) = elementwise(weights, arena, (x, from), (y, to), len)?;
            let p = SoftmaxParams {
                depth: depth as usize,
                multiplier,
                shift,
                diff_min,
            };
            with_int!(from, I => with_int!(to, O => {
                softmax::<I, O>(x, y, rows as usize, p)
            }, else None), else None)
        }
        Op::Binary {
            a,
            y,
            b,
            kind,
            elem,
            rank,
            a_shape,
            b_shape,
            p,
        } => binary(
            weights,
            arena,
            [a, b, y],
            kind,
            elem,
            rank,
            a_shape,
            b_shape,
            p,
        ),
        Op::Pool { x, y, elem, p } => pool(weights, arena, x, y, elem, p),
        Op::Conv(p) => super::conv::conv(&p, weights, arena),
        Op::Mean(p) => super::movement::mean(&p, weights, arena),
        Op::Pad(p) => super::movement::pad(&p, weights, arena),
        Op::Resize(p) => super::movement::resize(&p, weights, arena),
        Op::Concat(p) => super::movement::concat(&p, weights, arena),
        Op::SoftmaxF32(p) => super::float::softmax(&p, weights, arena),
        Op::ClampF32(p) => super::float::clamp(&p, weights, arena),
        Op::Slice(p) => super::slice::slice(&p, weights, arena),
        Op::TransposeConv(p) => super::matmul::transpose_conv(&p, weights, arena),
        Op::BatchMatMul(p) => super::matmul::batch_matmul(&p, weights, arena),
        Op::Remap(p) => super::movement::remap(&p, weights, arena),
        Op::BatchSpace(p) => super::movement::batch_space(&p, weights, arena),
        Op::Unary(p) => p.execute(weights, arena),
        Op::Pairwise(p) => p.execute(weights, arena),
        Op::Reduce(p) => super::reduce::reduce(&p, weights, arena),
        Op::Arg(p) => super::reduce::arg(&p, weights, arena),
        Op::FloatUnary(p) => super::float::unary(&p, weights, arena),
        Op::FloatLayerNorm(p) => super::float::layer_norm(&p, weights, arena),
        Op::FloatReduce(p) => super::float::reduce(&p, weights, arena),
        Op::OrtSoftmax(p) => super::float::ort_softmax(&p, weights, arena),
        Op::Lut8 {
            x,
            y,
            len,
            elem,
            table,
        } => super::lut::lut8(x, y, len, elem, table, weights, arena),
        Op::Act16 {
            x,
            y,
            len,
            multiplier,
            shift,
            tanh,
        } => super::lut::act16(x, y, len, (multiplier, shift), tanh, weights, arena),
        Op::Lstm(p) => super::lstm::lstm(&p, weights, arena),
    }
}

#[allow(clippy::too_many_arguments)]
fn binary(
    weights: &[u8],
    arena: &mut [u8],
    [a, b, y]: [Buf; 3],
    kind: BinaryKind,
    elem: Elem,
    rank: u32,
    a_shape: [u32; MAX_RANK],
    b_shape: [u32; MAX_RANK],
    p: BinaryParams,
) -> Option<()> {
    let rank = rank as usize;
    if rank == 0 || rank > MAX_RANK || !matches!(elem, Elem::I8 | Elem::U8 | Elem::I16) {
        return None;
    }
    if !(0..=30).contains(&p.left_shift) {
        return None;
    }
    let (ash, bsh) = (&a_shape[..rank], &b_shape[..rank]);
    let (out, n) = broadcast(ash, bsh)?;
    let na = volume(ash)?;
    let nb = volume(bsh)?;
    let size = elem.size();
    let ([xa, xb], y) = operands(
        weights,
        arena,
        [(a, na.checked_mul(size)?), (b, nb.checked_mul(size)?)],
        (y, n.checked_mul(size)?),
    )?;
    let hi = p.hi.max(p.lo);
    let f = |x: i32, v: i32| -> i32 {
        let raw = match kind {
            BinaryKind::Add | BinaryKind::Sub => {
                let l = x.wrapping_sub(p.za).wrapping_mul(1 << p.left_shift);
                let r = v.wrapping_sub(p.zb).wrapping_mul(1 << p.left_shift);
                let l = multiply_by_quantized_multiplier(l, p.m1, p.s1);
                let r = multiply_by_quantized_multiplier(r, p.m2, p.s2);
                let sum = if kind == BinaryKind::Sub {
                    l.wrapping_sub(r)
                } else {
                    l.wrapping_add(r)
                };
                multiply_by_quantized_multiplier(sum, p.mo, p.so)
            }
            BinaryKind::Mul => multiply_by_quantized_multiplier(
                x.wrapping_sub(p.za).wrapping_mul(v.wrapping_sub(p.zb)),
                p.mo,
                p.so,
            ),
            BinaryKind::MulRoundOnce => multiply_round_once(
                x.wrapping_sub(p.za).wrapping_mul(v.wrapping_sub(p.zb)),
                p.mo,
                p.so,
            ),
        };
        raw.wrapping_add(p.zo).clamp(p.lo, hi)
    };
    with_int!(elem, T => {
        for_each_broadcast(rank, ash, bsh, &out, |k, ia, ib| {
            let v = f(<T as Int>::load(xa, ia), <T as Int>::load(xb, ib));
            <T as Int>::store(y, k, v.clamp(<T as Int>::MIN, <T as Int>::MAX));
        });
        Some(())
    }, else None)
}

/// f32 -> integer as ONNX `QuantizeLinear` (the reference interpreter's rule).
pub fn quantize<O: Int>(x: &[u8], y: &mut [u8], len: usize, scale: f32, zero_point: i32) {
    for i in 0..len {
        let q = round_ties_even(load_f32(x, i) / scale);
        let q = if q.is_nan() { 0.0 } else { q };
        let q = (q + f64::from(zero_point)).clamp(f64::from(O::MIN), f64::from(O::MAX));
        O::store(y, i, q as i32);
    }
}

/// Integer requantization parameters.
#[derive(Clone, Copy)]
pub struct Requant {
    pub in_zp: i32,
    pub out_zp: i32,
    pub multiplier: i32,
    pub shift: i32,
    pub lo: i32,
    pub hi: i32,
}

/// TFLite's `Requantize` followed by a clamp to `lo..=hi` and the output type.
pub fn requantize<I: Int, O: Int>(x: &[u8], y: &mut [u8], len: usize, r: Requant) {
    let hi = r.hi.max(r.lo);
    for i in 0..len {
        let v = I::load(x, i).wrapping_sub(r.in_zp);
        let q = multiply_by_quantized_multiplier(v, r.multiplier, r.shift).wrapping_add(r.out_zp);
        O::store(y, i, q.clamp(r.lo, hi).clamp(O::MIN, O::MAX));
    }
}

#[allow(clippy::too_many_arguments)]
fn transpose(
    weights: &[u8],
    arena: &mut [u8],
    x: Buf,
    y: Buf,
    elem_bytes: u32,
    rank: u32,
    shape: [u32; MAX_RANK],
    perm: [u32; MAX_RANK],
) -> Option<()> {
    let rank = rank as usize;
    if rank == 0 || rank > MAX_RANK || elem_bytes == 0 {
        return None;
    }
    let e = elem_bytes as usize;
    let shape = &shape[..rank];
    let perm = &perm[..rank];
    // Each axis exactly once.
    let mut seen = [false; MAX_RANK];
    for &p in perm {
        let p = p as usize;
        if p >= rank || seen[p] {
            return None;
        }
        seen[p] = true;
    }
    let mut count = 1usize;
    for &d in shape {
        count = count.checked_mul(d as usize)?;
    }
    let total = count.checked_mul(e)?;
    let ([x], y) = operands(weights, arena, [(x, total)], (y, total))?;
    if count == 0 {
        return Some(());
    }
    // Input strides in elements, then the input stride of each output axis.
    let mut in_strides = [0usize; MAX_RANK];
    let mut s = 1usize;
    for d in (0..rank).rev() {
        in_strides[d] = s;
        s *= shape[d] as usize;
    }
    let mut out_dims = [0usize; MAX_RANK];
    let mut step = [0usize; MAX_RANK];
    for i in 0..rank {
        out_dims[i] = shape[perm[i] as usize] as usize;
        step[i] = in_strides[perm[i] as usize];
    }
    let mut idx = [0usize; MAX_RANK];
    let mut src = 0usize;
    for k in 0..count {
        y[k * e..(k + 1) * e].copy_from_slice(&x[src * e..(src + 1) * e]);
        // Odometer over the output axes, keeping the input offset in step.
        let mut d = rank;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            src += step[d];
            if idx[d] < out_dims[d] {
                break;
            }
            src -= step[d] * out_dims[d];
            idx[d] = 0;
        }
    }
    Some(())
}

/// Parameters of the 8-bit softmax.
#[derive(Clone, Copy)]
pub struct SoftmaxParams {
    pub depth: usize,
    pub multiplier: i32,
    pub shift: i32,
    pub diff_min: i32,
}

/// TFLite's reference 8-bit softmax (`reference_ops::Softmax`): differences from the row maximum
/// scaled to Q5.26, gemmlowp's `exp_on_negative_values`, a Q12.19 sum and its reciprocal.
/// `None` when a row's reciprocal exponent is out of range (a sum TFLite's shift leaves
/// undefined) or the shift is negative.
pub fn softmax<I: Int, O: Int>(
    x: &[u8],
    y: &mut [u8],
    rows: usize,
    p: SoftmaxParams,
) -> Option<()> {
    let d = p.depth;
    if d == 0 || !(0..=31).contains(&p.shift) {
        return (d == 0).then_some(());
    }
    let out_bits = if O::MAX > 255 { 16 } else { 8 };
    // MultiplyByQuantizedMultiplierGreaterThanOne.
    let scaled = |v: i32| srdhm(v.wrapping_mul(1 << p.shift), p.multiplier);
    for r in 0..rows {
        let base = r * d;
        let mut max = i32::MIN;
        for i in 0..d {
            max = max.max(I::load(x, base + i));
        }
        let mut sum: i32 = 0; // Q12.19
        for i in 0..d {
            let diff = I::load(x, base + i) - max;
            if diff >= p.diff_min {
                let e = exp_on_negative_values(scaled(diff));
                sum = sum.wrapping_add(rounding_divide_by_pot(e, 12));
            }
        }
        let (shifted_scale, bits_over_unit) = reciprocal(sum, 12);
        let exponent = bits_over_unit + 31 - out_bits;
        if !(0..=31).contains(&exponent) {
            return None;
        }
        for i in 0..d {
            let diff = I::load(x, base + i) - max;
            let v = if diff >= p.diff_min {
                let e = exp_on_negative_values(scaled(diff));
                let unsat = rounding_divide_by_pot(srdhm(shifted_scale, e), exponent);
                unsat.wrapping_add(O::MIN).clamp(O::MIN, O::MAX)
            } else {
                O::MIN
            };
            O::store(y, base + i, v);
        }
    }
    Some(())
}

/// TFLite's reference MaxPool / AveragePool over NHWC: the window clamped to the image.
fn pool(weights: &[u8], arena: &mut [u8], x: Buf, y: Buf, elem: Elem, p: PoolParams) -> Option<()> {
    if !matches!(elem, Elem::I8 | Elem::U8 | Elem::I16) || p.kh == 0 || p.kw == 0 {
        return None;
    }
    if p.sh == 0 || p.sw == 0 {
        return None;
    }
    let [n, h, w, c, oh, ow] = [p.n, p.h, p.w, p.c, p.oh, p.ow].map(|v| v as usize);
    let nx = volume(&[p.n, p.h, p.w, p.c])?;
    let ny = volume(&[p.n, p.oh, p.ow, p.c])?;
    let size = elem.size();
    let (x, y) = in_out(weights, arena, (x, nx), (y, ny), size)?;
    // The loops run over every output position: none when there is nothing to write.
    if ny == 0 {
        return Some(());
    }
    let hi = p.hi.max(p.lo);
    with_int!(elem, T => {
        for b in 0..n {
            for oy in 0..oh {
                // Window rows clamped to the image (i64: no overflow for any u32 parameters).
                let y0 = oy as i64 * i64::from(p.sh) - i64::from(p.top);
                let (r0, r1) = (y0.max(0), (y0 + i64::from(p.kh)).clamp(0, h as i64));
                for ox in 0..ow {
                    let x0 = ox as i64 * i64::from(p.sw) - i64::from(p.left);
                    let (c0, c1) = (x0.max(0), (x0 + i64::from(p.kw)).clamp(0, w as i64));
                    let count = (r1 - r0).max(0) * (c1 - c0).max(0);
                    for ch in 0..c {
                        let mut acc: i32 = if p.max { i32::MIN } else { 0 };
                        for iy in r0..r1 {
                            for ix in c0..c1 {
                                let i = ((b * h + iy as usize) * w + ix as usize) * c + ch;
                                let v = <T as Int>::load(x, i);
                                acc = if p.max { acc.max(v) } else { acc.wrapping_add(v) };
                            }
                        }
                        let count = i32::try_from(count).ok()?;
                        let mut v = if count == 0 {
                            0
                        } else if p.max {
                            acc
                        } else if acc > 0 {
                            // Round half away from zero, as TFLite's AveragePool.
                            acc.wrapping_add(count / 2) / count
                        } else {
                            acc.wrapping_sub(count / 2) / count
                        };
                        if p.requant {
                            v = multiply_by_quantized_multiplier(v.wrapping_sub(p.zi), p.m, p.s)
                                .wrapping_add(p.zo);
                        }
                        let v = v.clamp(p.lo, hi).clamp(<T as Int>::MIN, <T as Int>::MAX);
                        <T as Int>::store(y, ((b * oh + oy) * ow + ox) * c + ch, v);
                    }
                }
            }
        }
        Some(())
    }, else None)
}
