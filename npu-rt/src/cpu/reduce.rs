//! SUM / REDUCE_MAX / REDUCE_MIN over any axes and ARG_MAX / ARG_MIN along one axis: the
//! arithmetic of TFLite's default kernels, as `npu-build`'s reference interpreter decides it.

use super::elem::{Int, with_int};
use super::float::round_half_away_f32;
use super::operands::{in_out, operands, volume};
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

/// The walk of a reduction over the axes set in `reduced` (bit `d` for axis `d`) of a tensor
/// of `shape`: the outputs (the kept axes in order) and, for each, its inputs in input order.
pub(super) struct Reduction {
    rank: usize,
    /// Input strides in elements.
    strides: [usize; MAX_RANK],
    /// The kept axes' extents, 1 on the reduced ones.
    kept: [u32; MAX_RANK],
    /// The reduced axes' extents, 1 on the kept ones.
    red: [u32; MAX_RANK],
    /// Input elements.
    pub nx: usize,
    /// Output elements.
    pub ny: usize,
    /// Inputs per output.
    pub count: usize,
}

impl Reduction {
    /// `None` when `reduced` names an axis beyond `shape` or an element count overflows.
    pub fn new(shape: &[u32], reduced: u32) -> Option<Self> {
        let rank = shape.len();
        if rank > MAX_RANK || reduced >> rank != 0 {
            return None;
        }
        let nx = volume(shape)?;
        let mut kept = [1u32; MAX_RANK];
        let mut red = [1u32; MAX_RANK];
        for d in 0..rank {
            if reduced & (1 << d) != 0 {
                red[d] = shape[d];
            } else {
                kept[d] = shape[d];
            }
        }
        let ny = volume(&kept[..rank])?;
        let count = volume(&red[..rank])?;
        let mut strides = [0usize; MAX_RANK];
        let mut s = 1usize;
        for d in (0..rank).rev() {
            strides[d] = s;
            s *= shape[d] as usize;
        }
        Some(Reduction {
            rank,
            strides,
            kept,
            red,
            nx,
            ny,
            count,
        })
    }

    /// Odometer over the axes of `ext` (1 on the others), moving `off` by the input strides;
    /// false when it wraps around.
    fn step(&self, idx: &mut [usize; MAX_RANK], off: &mut usize, ext: &[u32; MAX_RANK]) -> bool {
        let mut d = self.rank;
        while d > 0 {
            d -= 1;
            if ext[d] <= 1 {
                continue;
            }
            idx[d] += 1;
            *off += self.strides[d];
            if idx[d] < ext[d] as usize {
                return true;
            }
            *off -= self.strides[d] * ext[d] as usize;
            idx[d] = 0;
        }
        false
    }

    /// The input offset of each output's first input, in output order (`ny` of them).
    pub fn outputs(&self) -> impl Iterator<Item = usize> + '_ {
        let (mut idx, mut base) = ([0usize; MAX_RANK], 0usize);
        (0..self.ny).map(move |_| {
            let at = base;
            self.step(&mut idx, &mut base, &self.kept);
            at
        })
    }

    /// The input offsets of the output whose first input is at `base`, in input order (none
    /// when `count` is 0).
    pub fn inputs(&self, base: usize) -> impl Iterator<Item = usize> + '_ {
        let (mut idx, mut off, mut more) = ([0usize; MAX_RANK], base, self.count > 0);
        core::iter::from_fn(move || {
            let at = more.then_some(off)?;
            more = self.step(&mut idx, &mut off, &self.red);
            Some(at)
        })
    }
}

pub(super) fn reduce(p: &ReduceOp, weights: &[u8], arena: &mut [u8]) -> Option<()> {
    if !matches!(p.elem, Elem::I8 | Elem::U8 | Elem::I16) {
        return None;
    }
    let rank = p.rank as usize;
    if !(1..=MAX_RANK).contains(&rank) {
        return None;
    }
    let walk = Reduction::new(&p.shape[..rank], p.reduced)?;
    let (nx, ny, count) = (walk.nx, walk.ny, walk.count);
    let e = p.elem.size();
    let (x, y) = in_out(weights, arena, (p.x, nx), (p.y, ny), e)?;
    with_int!(p.elem, T => {
        for (q, base) in walk.outputs().enumerate() {
            let mut acc = match p.mode {
                ReduceMode::SumRaw | ReduceMode::SumScaled => 0,
                ReduceMode::Max => <T as Int>::MIN,
                ReduceMode::Min => <T as Int>::MAX,
            };
            for off in walk.inputs(base) {
                let v = T::load(x, off);
                acc = match p.mode {
                    ReduceMode::SumRaw => wrap::<T>(acc.wrapping_add(v)),
                    ReduceMode::SumScaled => acc.wrapping_add(v),
                    ReduceMode::Max => acc.max(v),
                    ReduceMode::Min => acc.min(v),
                };
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
