//! Element-wise math kernels: Abs and Neg ([`UnaryOp`]), and Maximum, Minimum,
//! SquaredDifference and PRelu with numpy broadcasting ([`PairwiseOp`]). The arithmetic is that
//! of TFLite's reference kernels as `npu-build`'s reference interpreter prepares it
//! (`reference::unary`, `reference::pairwise`), which decides every parameter.

use super::elem::{Int, load_f32, store_f32, with_int};
use super::operands::{broadcast, for_each_broadcast, operands, volume};
use super::params::{Word, code_word, record};
use super::words::{Reader, Writer};
use super::{BinaryParams, Buf, Elem, MAX_RANK};
use crate::fixed::multiply_by_quantized_multiplier as mbqm;

/// The function of a [`UnaryOp`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryKind {
    Abs = 0,
    Neg = 1,
}

/// How a [`UnaryOp`] maps integers (ignored for f32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryMode {
    /// The function of the raw value, wrapped to the type.
    Raw = 0,
    /// `f(x - zi) + zo`, clamped to the type.
    Offset = 1,
    /// `MultiplyByQuantizedMultiplier(f(x - zi), multiplier, shift) + zo`, clamped to the type.
    Rescaled = 2,
}

code_word!(UnaryKind { Abs, Neg });
code_word!(UnaryMode {
    Raw,
    Offset,
    Rescaled
});

record! {
    /// `y = f(x)` over `len` elements.
    pub struct UnaryOp {
        pub x: Buf,
        pub y: Buf,
        pub len: u32,
        pub elem: Elem,
        pub kind: UnaryKind,
        pub mode: UnaryMode,
        pub zi: i32,
        pub zo: i32,
        pub multiplier: i32,
        pub shift: i32,
    }
}

impl UnaryOp {
    /// The integer function of one stored value for a type of range `lo..=hi`.
    #[inline(always)]
    fn apply(&self, v: i32, lo: i32, hi: i32) -> i32 {
        let f = |d: i32| match self.kind {
            UnaryKind::Abs => d.wrapping_abs(),
            UnaryKind::Neg => d.wrapping_neg(),
        };
        match self.mode {
            UnaryMode::Raw => f(v),
            UnaryMode::Offset => f(v.wrapping_sub(self.zi))
                .wrapping_add(self.zo)
                .clamp(lo, hi),
            UnaryMode::Rescaled => mbqm(f(v.wrapping_sub(self.zi)), self.multiplier, self.shift)
                .wrapping_add(self.zo)
                .clamp(lo, hi),
        }
    }

    pub(super) fn execute(&self, weights: &[u8], arena: &mut [u8]) -> Option<()> {
        let n = self.len as usize;
        let bytes = n.checked_mul(self.elem.size())?;
        let ([x], y) = operands(weights, arena, [(self.x, bytes)], (self.y, bytes))?;
        if !(-31..=30).contains(&self.shift) {
            return None;
        }
        with_int!(self.elem, T => {
            for i in 0..n {
                // Raw results wrap to the type (the C++ cast); the others are clamped already.
                let v = self.apply(<T as Int>::load(x, i), <T as Int>::MIN, <T as Int>::MAX);
                <T as Int>::store(y, i, wrap::<T>(v));
            }
            Some(())
        }, else {
            for i in 0..n {
                let v = load_f32(x, i);
                store_f32(y, i, match self.kind {
                    UnaryKind::Abs => v.abs(),
                    UnaryKind::Neg => -v,
                });
            }
            Some(())
        })
    }
}

/// `v` reduced modulo the width of `T` (a no-op for values already in range).
#[inline(always)]
fn wrap<T: Int>(v: i32) -> i32 {
    match T::SIZE {
        1 if T::MIN == 0 => i32::from(v as u8),
        1 => i32::from(v as i8),
        2 => i32::from(v as i16),
        _ => v,
    }
}

/// The function of a [`PairwiseOp`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairwiseKind {
    Maximum = 0,
    Minimum = 1,
    SquaredDifference = 2,
    Prelu = 3,
    /// f32 only (float islands), as are the three after it.
    Add = 4,
    Sub = 5,
    Mul = 6,
    Div = 7,
}

impl PairwiseKind {
    /// Whether the function exists on f32 only.
    pub fn float_only(self) -> bool {
        matches!(
            self,
            PairwiseKind::Add | PairwiseKind::Sub | PairwiseKind::Mul | PairwiseKind::Div
        )
    }

    /// The f32 function (the reference interpreter uses this very function).
    #[inline(always)]
    pub fn apply_f32(self, x: f32, v: f32) -> f32 {
        match self {
            PairwiseKind::Maximum => x.max(v),
            PairwiseKind::Minimum => x.min(v),
            PairwiseKind::SquaredDifference => (x - v) * (x - v),
            PairwiseKind::Prelu => {
                if x >= 0.0 {
                    x
                } else {
                    x * v
                }
            }
            PairwiseKind::Add => x + v,
            PairwiseKind::Sub => x - v,
            PairwiseKind::Mul => x * v,
            PairwiseKind::Div => x / v,
        }
    }
}

record! {
    /// `y = f(a, b)` with numpy broadcasting; `a_shape` and `b_shape` are right-aligned to `rank`.
    ///
    /// Parameters (`p`): Maximum/Minimum use none (raw values). SquaredDifference on int8: `(v - z)
    /// << left_shift` rescaled by `(m1, s1)` and `(m2, s2)`, subtracted, squared, rescaled by
    /// `(mo, so)`, `+ zo`, clamped to `lo..=hi`; on int32 the raw `(a - b)^2`. PRelu: `d = a - za`;
    /// `d >= 0` gives `MBQM(d, m1, s1)`, else `MBQM(d (b - zb), m2, s2)`; `+ zo`, clamped.
    pub struct PairwiseOp {
        pub a: Buf,
        pub b: Buf,
        pub y: Buf,
        pub kind: PairwiseKind,
        pub elem: Elem,
        pub rank: u32,
        pub a_shape: [u32; MAX_RANK],
        pub b_shape: [u32; MAX_RANK],
        pub p: BinaryParams,
    }
}

code_word!(PairwiseKind {
    Maximum,
    Minimum,
    SquaredDifference,
    Prelu,
    Add,
    Sub,
    Mul,
    Div,
});

impl PairwiseOp {
    /// The integer function (quantized unless `elem` is i32).
    #[inline(always)]
    fn apply_int(&self, x: i32, v: i32, wide: bool) -> i32 {
        let p = &self.p;
        let hi = p.hi.max(p.lo);
        match self.kind {
            PairwiseKind::Maximum => x.max(v),
            PairwiseKind::Minimum => x.min(v),
            PairwiseKind::SquaredDifference if wide => {
                let d = x.wrapping_sub(v);
                d.wrapping_mul(d)
            }
            PairwiseKind::SquaredDifference => {
                let a = mbqm(
                    x.wrapping_sub(p.za).wrapping_mul(1 << p.left_shift),
                    p.m1,
                    p.s1,
                );
                let b = mbqm(
                    v.wrapping_sub(p.zb).wrapping_mul(1 << p.left_shift),
                    p.m2,
                    p.s2,
                );
                let d = a.wrapping_sub(b);
                mbqm(d.wrapping_mul(d), p.mo, p.so)
                    .wrapping_add(p.zo)
                    .clamp(p.lo, hi)
            }
            PairwiseKind::Prelu => {
                let d = x.wrapping_sub(p.za);
                let r = if d >= 0 {
                    mbqm(d, p.m1, p.s1)
                } else {
                    mbqm(d.wrapping_mul(v.wrapping_sub(p.zb)), p.m2, p.s2)
                };
                r.wrapping_add(p.zo).clamp(p.lo, hi)
            }
            // Refused on integers by `execute`.
            PairwiseKind::Add | PairwiseKind::Sub | PairwiseKind::Mul | PairwiseKind::Div => x,
        }
    }

    pub(super) fn execute(&self, weights: &[u8], arena: &mut [u8]) -> Option<()> {
        let rank = self.rank as usize;
        if rank == 0 || rank > MAX_RANK || !(0..=30).contains(&self.p.left_shift) {
            return None;
        }
        if self.kind.float_only() && self.elem != Elem::F32 {
            return None;
        }
        let (ash, bsh) = (&self.a_shape[..rank], &self.b_shape[..rank]);
        let (out, n) = broadcast(ash, bsh)?;
        let size = self.elem.size();
        let ([xa, xb], y) = operands(
            weights,
            arena,
            [
                (self.a, volume(ash)?.checked_mul(size)?),
                (self.b, volume(bsh)?.checked_mul(size)?),
            ],
            (self.y, n.checked_mul(size)?),
        )?;
        let wide = self.elem == Elem::I32;
        with_int!(self.elem, T => {
            for_each_broadcast(rank, ash, bsh, &out, |k, ia, ib| {
                let v = self.apply_int(<T as Int>::load(xa, ia), <T as Int>::load(xb, ib), wide);
                <T as Int>::store(y, k, wrap::<T>(v));
            });
            Some(())
        }, else {
            for_each_broadcast(rank, ash, bsh, &out, |k, ia, ib| {
                store_f32(y, k, self.kind.apply_f32(load_f32(xa, ia), load_f32(xb, ib)));
            });
            Some(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::Op;
    use super::*;

    #[test]
    fn ops_round_trip_through_words() {
        let ops = [
            Op::Unary(UnaryOp {
                x: Buf::weights(4),
                y: Buf::arena(8),
                len: 5,
                elem: Elem::I16,
                kind: UnaryKind::Neg,
                mode: UnaryMode::Rescaled,
                zi: -3,
                zo: 4,
                multiplier: 1 << 30,
                shift: -2,
            }),
            Op::Pairwise(PairwiseOp {
                a: Buf::arena(0),
                b: Buf::weights(0),
                y: Buf::arena(64),
                kind: PairwiseKind::Prelu,
                elem: Elem::U8,
                rank: 4,
                a_shape: [1, 2, 3, 4, 1, 1],
                b_shape: [1, 1, 1, 4, 1, 1],
                p: BinaryParams {
                    za: 1,
                    zb: 2,
                    zo: 3,
                    left_shift: 7,
                    m1: 5,
                    s1: -6,
                    m2: 7,
                    s2: 8,
                    mo: 9,
                    so: -10,
                    lo: 0,
                    hi: 255,
                },
            }),
        ];
        for op in ops {
            let (w, n) = op.encode();
            assert!(n < super::super::MAX_WORDS);
            assert_eq!(Op::decode(&w[..n]), Some(op));
            // Truncated or extended words do not decode.
            assert_eq!(Op::decode(&w[..n - 1]), None);
        }
    }

    #[test]
    fn prelu_and_max_broadcast_over_channels() {
        // x [2, 2] int8 (zp 0), alpha [2] (zp 0), unit scales: x >= 0 -> x, else x * alpha.
        let mut arena = [0u8; 16];
        arena[..4].copy_from_slice(&[5u8, (-4i8) as u8, (-3i8) as u8, 2]);
        arena[4..6].copy_from_slice(&[2u8, 3]);
        let op = PairwiseOp {
            a: Buf::arena(0),
            b: Buf::arena(4),
            y: Buf::arena(8),
            kind: PairwiseKind::Prelu,
            elem: Elem::I8,
            rank: 2,
            a_shape: [2, 2, 1, 1, 1, 1],
            b_shape: [1, 2, 1, 1, 1, 1],
            p: BinaryParams {
                m1: 1 << 30,
                s1: 1,
                m2: 1 << 30,
                s2: 1,
                lo: -128,
                hi: 127,
                ..Default::default()
            },
        };
        op.execute(&[], &mut arena).unwrap();
        assert_eq!(arena[8..12], [5u8, (-12i8) as u8, (-6i8) as u8, 2]);
        let op = PairwiseOp {
            kind: PairwiseKind::Maximum,
            ..op
        };
        op.execute(&[], &mut arena).unwrap();
        assert_eq!(arena[8..12], [5u8, 3, 2, 3]);
    }
}
