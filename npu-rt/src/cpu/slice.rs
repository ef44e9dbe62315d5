//! The strided-slice kernel (SLICE, STRIDED_SLICE, SPLIT, SPLIT_V, UNPACK).

use super::MAX_RANK;
use super::operands::{in_out, volume};
use super::params::SliceOp;

/// Runs `p`; `None` when the rank is out of `1..=MAX_RANK`, a step is 0, the box reads outside
/// the input, or an operand does not fit its region.
pub(super) fn slice(p: &SliceOp, weights: &[u8], arena: &mut [u8]) -> Option<()> {
    let rank = p.rank as usize;
    if !(1..=MAX_RANK).contains(&rank) || p.elem_bytes == 0 || p.elem_bytes > 8 {
        return None;
    }
    let e = p.elem_bytes as usize;
    let shape = &p.shape[..rank];
    let size = &p.size[..rank];
    let nx = volume(shape)?;
    let ny = volume(size)?;
    // Input strides in elements; every index the box reads is checked to lie inside.
    let mut strides = [0i64; MAX_RANK];
    let mut s = 1i64;
    for d in (0..rank).rev() {
        strides[d] = s;
        s = s.checked_mul(i64::from(shape[d]))?;
    }
    let mut start = 0i64;
    for d in 0..rank {
        let step = i64::from(p.step[d]);
        if step == 0 {
            return None;
        }
        if size[d] == 0 {
            continue;
        }
        let first = i64::from(p.begin[d]);
        let last = first.checked_add((i64::from(size[d]) - 1).checked_mul(step)?)?;
        let n = i64::from(shape[d]);
        if first >= n || last < 0 || last >= n {
            return None;
        }
        start += first * strides[d];
    }
    let (x, y) = in_out(weights, arena, (p.x, nx), (p.y, ny), e)?;
    if ny == 0 {
        return Some(());
    }
    let mut idx = [0u32; MAX_RANK];
    let mut src = start;
    for k in 0..ny {
        let a = src as usize * e;
        y[k * e..(k + 1) * e].copy_from_slice(x.get(a..a + e)?);
        // Odometer over the box, last axis fastest, keeping the input offset in step.
        let mut d = rank;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            let jump = i64::from(p.step[d]) * strides[d];
            src += jump;
            if idx[d] < size[d] {
                break;
            }
            src -= jump * i64::from(size[d]);
            idx[d] = 0;
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::super::{Buf, Op};
    use super::*;

    fn op(begin: [u32; 2], step: [i32; 2], size: [u32; 2]) -> Op {
        let mut p = SliceOp {
            x: Buf::arena(0),
            y: Buf::arena(32),
            elem_bytes: 1,
            rank: 2,
            shape: [1; MAX_RANK],
            begin: [0; MAX_RANK],
            step: [1; MAX_RANK],
            size: [1; MAX_RANK],
        };
        p.shape[..2].copy_from_slice(&[4, 5]);
        p.begin[..2].copy_from_slice(&begin);
        p.step[..2].copy_from_slice(&step);
        p.size[..2].copy_from_slice(&size);
        Op::Slice(p)
    }

    #[test]
    fn words_round_trip_and_boxes_are_read() {
        // A 4x5 tensor holding 0..20; rows 3, 1 (step -2), columns 4, 2, 0 (step -2).
        let o = op([3, 4], [-2, -2], [2, 3]);
        let (w, n) = o.encode();
        assert_eq!(Op::decode(&w[..n]), Some(o));
        let mut arena = [0u8; 64];
        for (i, b) in arena[..20].iter_mut().enumerate() {
            *b = i as u8;
        }
        o.execute(&[], &mut arena).expect("runs");
        assert_eq!(&arena[32..38], &[19, 17, 15, 9, 7, 5]);
        // Forward steps.
        let o = op([1, 0], [1, 2], [3, 3]);
        o.execute(&[], &mut arena).expect("runs");
        assert_eq!(&arena[32..41], &[5, 7, 9, 10, 12, 14, 15, 17, 19]);
    }

    #[test]
    fn boxes_outside_the_input_and_zero_steps_are_refused() {
        let mut arena = [0u8; 64];
        assert!(
            op([3, 0], [1, 1], [2, 5])
                .execute(&[], &mut arena)
                .is_none()
        );
        assert!(
            op([0, 0], [-1, 1], [2, 5])
                .execute(&[], &mut arena)
                .is_none()
        );
        assert!(
            op([0, 0], [0, 1], [2, 5])
                .execute(&[], &mut arena)
                .is_none()
        );
        // Too few words.
        let (w, n) = op([0, 0], [1, 1], [1, 1]).encode();
        assert_eq!(Op::decode(&w[..n - 1]), None);
    }
}
