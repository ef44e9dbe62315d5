//! SUM / REDUCE_MAX / REDUCE_MIN over any axes and ARG_MAX / ARG_MIN along one axis: the
//! arithmetic of TFLite's default kernels, as `npu-build`'s reference interpreter decides it.

use super::elem::{Int, with_int};
use super::float::round_half_away_f32;
use super::operands::{operands, volume};
use super::params::{ArgOp, ReduceMode, ReduceOp};
use super::{Elem, MAX_RANK};
use crate::fixed::multiply_by_quantized_multiplier;

/// The low bits of `v` as the integer type `T`, extended back (a C++ narrowing cast).
fn wrap<T: Int>(v: i32) -> i32 {
    match (T::MIN, T::MAX) {
        (-128, 127) => i32::from(v as i8),
        (0, 255) => i32::from(v as u8),
        (-32768, 32767) => i32::from(v as i16),
        _ => v,
    }
}

/// `round(sum * scale + bias)` in single precision, half away from zero, saturated to int32.
fn scaled_sum(sum: i32, scale: f32, bias: f32) -> i32 {
    round_half_away_f32(sum as f32 * scale + bias) as i32
}

pub(super) fn reduce(p: &ReduceOp, weights: &[u8], arena: &mut [u8]) -> Option<()> {
    if !matches!(p.elem, Elem::I8 | Elem::U8 | Elem::I16) {
        return None;
    }
    let rank = p.rank as usize;
    if !(1..=MAX_RANK).contains(&rank) || p.reduced >> rank != 0 {
        return None;
    }
    let shape = &p.shape[..rank];
    let is_reduced = |d: usize| p.reduced & (1 << d) != 0;
    let nx = volume(shape)?;
    let mut kept = [1u32; MAX_RANK];
    let mut red = [1u32; MAX_RANK];
    for d in 0..rank {
        if is_reduced(d) {
            red[d] = shape[d];
        } else {
            kept[d] = shape[d];
        }
    }
    let ny = volume(&kept[..rank])?;
    let count = volume(&red[..rank])?;
    let e = p.elem.size();
    let ([x], y) = operands(
        weights,
        arena,
        [(p.x, nx.checked_mul(e)?)],
        (p.y, ny.checked_mul(e)?),
    )?;
    // Input strides in elements.
    let mut st = [0usize; MAX_RANK];
    let mut s = 1usize;
    for d in (0..rank).rev() {
        st[d] = s;
        s *= shape[d] as usize;
    }
    // Odometer over the axes of `ext` (1 on the others), moving `off` by the input strides;
    // false when it wraps around.
    let step = |idx: &mut [usize; MAX_RANK], off: &mut usize, ext: &[u32; MAX_RANK]| {
        let mut d = rank;
        while d > 0 {
            d -= 1;
            if ext[d] <= 1 {
                continue;
            }
            idx[d] += 1;
            *off += st[d];
            if idx[d] < ext[d] as usize {
                return true;
            }
            *off -= st[d] * ext[d] as usize;
            idx[d] = 0;
        }
        false
    };
    with_int!(p.elem, T => {
        let (mut oi, mut base) = ([0usize; MAX_RANK], 0usize);
        for q in 0..ny {
            let mut acc = match p.mode {
                ReduceMode::SumRaw | ReduceMode::SumScaled => 0,
                ReduceMode::Max => <T as Int>::MIN,
                ReduceMode::Min => <T as Int>::MAX,
            };
            if count > 0 {
                let (mut ri, mut off) = ([0usize; MAX_RANK], base);
                loop {
                    let v = T::load(x, off);
                    acc = match p.mode {
                        ReduceMode::SumRaw => wrap::<T>(acc.wrapping_add(v)),
                        ReduceMode::SumScaled => acc.wrapping_add(v),
                        ReduceMode::Max => acc.max(v),
                        ReduceMode::Min => acc.min(v),
                    };
                    if !step(&mut ri, &mut off, &red) {
                        break;
                    }
                }
            }
            let mut v = match p.mode {
                ReduceMode::SumScaled if count > 0 => {
                    scaled_sum(acc, p.scale, p.bias).saturating_add(p.zo)
                }
                ReduceMode::SumScaled => 0,
                _ => acc,
            };
            if p.requant.on {
                v = multiply_by_quantized_multiplier(
                    v.wrapping_sub(p.requant.zi),
                    p.requant.m,
                    p.requant.s,
                )
                .wrapping_add(p.requant.zo);
            }
            T::store(y, q, v.clamp(<T as Int>::MIN, <T as Int>::MAX));
            step(&mut oi, &mut base, &kept);
        }
        Some(())
    }, else None)
}

pub(super) fn arg(p: &ArgOp, weights: &[u8], arena: &mut [u8]) -> Option<()> {
    if !matches!(p.elem, Elem::I8 | Elem::U8 | Elem::I16) || p.len == 0 {
        return None;
    }
    let (outer, len, inner) = (p.outer as usize, p.len as usize, p.inner as usize);
    let nx = volume(&[p.outer, p.len, p.inner])?;
    let ny = outer.checked_mul(inner)?;
    let ib = if p.wide { 8 } else { 4 };
    let ([x], y) = operands(
        weights,
        arena,
        [(p.x, nx.checked_mul(p.elem.size())?)],
        (p.y, ny.checked_mul(ib)?),
    )?;
    with_int!(p.elem, T => {
        for o in 0..outer {
            for i in 0..inner {
                let b = o * len * inner + i;
                let (mut best, mut at) = (T::load(x, b), 0usize);
                for k in 1..len {
                    let v = T::load(x, b + k * inner);
                    if (p.max && v > best) || (!p.max && v < best) {
                        best = v;
                        at = k;
                    }
                }
                let q = (o * inner + i) * ib;
                if p.wide {
                    y[q..q + 8].copy_from_slice(&(at as u64).to_le_bytes());
                } else {
                    y[q..q + 4].copy_from_slice(&(at as u32).to_le_bytes());
                }
            }
        }
        Some(())
    }, else None)
}

#[cfg(test)]
mod tests {
    use super::super::{Buf, Elem, MAX_RANK, Op, OutRequant, run};
    use super::{ArgOp, ReduceMode, ReduceOp};

    #[test]
    fn ops_round_trip_through_their_words() {
        let mut shape = [1u32; MAX_RANK];
        shape[..3].copy_from_slice(&[2, 3, 4]);
        let ops = [
            Op::Reduce(ReduceOp {
                x: Buf::weights(4),
                y: Buf::arena(8),
                elem: Elem::U8,
                rank: 3,
                shape,
                reduced: 0b101,
                mode: ReduceMode::SumScaled,
                scale: 0.75,
                bias: -3.5,
                zo: -2,
                requant: OutRequant::OFF,
            }),
            Op::Arg(ArgOp {
                x: Buf::arena(0),
                y: Buf::arena(64),
                elem: Elem::I16,
                outer: 2,
                len: 5,
                inner: 3,
                max: false,
                wide: true,
            }),
        ];
        for op in ops {
            let (w, n) = op.encode();
            assert_eq!(Op::decode(&w[..n]), Some(op));
        }
    }

    #[test]
    fn max_over_the_middle_axis_and_argmax_ties() {
        // x = [[1, 9], [4, 9], [-2, 0]] as [3, 2] i8 at offset 0; max over axis 0 -> [4, 9].
        let mut arena = [0u8; 32];
        for (i, v) in [1i8, 9, 4, 9, -2, 0].iter().enumerate() {
            arena[i] = *v as u8;
        }
        let mut shape = [1u32; MAX_RANK];
        shape[..2].copy_from_slice(&[3, 2]);
        let op = Op::Reduce(ReduceOp {
            x: Buf::arena(0),
            y: Buf::arena(8),
            elem: Elem::I8,
            rank: 2,
            shape,
            reduced: 0b01,
            mode: ReduceMode::Max,
            scale: 0.0,
            bias: 0.0,
            zo: 0,
            requant: OutRequant::OFF,
        });
        let (w, n) = op.encode();
        run(0, &w[..n], &[], &mut arena).unwrap();
        assert_eq!(arena[8..10], [4, 9]);
        // Argmax along axis 0 as [1, 3, 2]: column 1 ties between rows 0 and 1 -> 0.
        let op = Op::Arg(ArgOp {
            x: Buf::arena(0),
            y: Buf::arena(16),
            elem: Elem::I8,
            outer: 1,
            len: 3,
            inner: 2,
            max: true,
            wide: false,
        });
        let (w, n) = op.encode();
        run(0, &w[..n], &[], &mut arena).unwrap();
        assert_eq!(arena[16..24], [1, 0, 0, 0, 0, 0, 0, 0]);
    }
}
