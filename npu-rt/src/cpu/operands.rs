//! Operand resolution shared by the dispatcher (`kernels`) and the kernel modules: the byte
//! slices of an operation's buffers, and element counts of shapes.

use super::{Buf, REGION_ARENA, REGION_WEIGHTS};

/// The input slices and the output slice of an operation. The output must be in the arena and
/// must not overlap an arena input (the compiler gives simultaneously live tensors disjoint
/// bytes).
pub(super) fn operands<'a, const N: usize>(
    weights: &'a [u8],
    arena: &'a mut [u8],
    ins: [(Buf, usize); N],
    out: (Buf, usize),
) -> Option<([&'a [u8]; N], &'a mut [u8])> {
    let (yb, ylen) = out;
    if yb.region != REGION_ARENA {
        return None;
    }
    let s = yb.offset as usize;
    let e = s.checked_add(ylen)?;
    if e > arena.len() {
        return None;
    }
    let (left, rest) = arena.split_at_mut(s);
    let (mid, right) = rest.split_at_mut(ylen);
    let (left, right): (&'a [u8], &'a [u8]) = (left, right);
    let mut res: [&'a [u8]; N] = [&[]; N];
    for (slot, (b, len)) in res.iter_mut().zip(ins) {
        let o = b.offset as usize;
        let end = o.checked_add(len)?;
        *slot = match b.region {
            REGION_WEIGHTS => weights.get(o..end)?,
            REGION_ARENA if len == 0 => &[],
            REGION_ARENA if end <= s => left.get(o..end)?,
            REGION_ARENA if o >= e => right.get(o - e..end - e)?,
            _ => return None,
        };
    }
    Some((res, mid))
}

/// Element count of the first `rank` entries of `shape`.
pub(super) fn volume(shape: &[u32]) -> Option<usize> {
    shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d as usize))
}
