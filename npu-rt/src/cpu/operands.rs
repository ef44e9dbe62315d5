//! Operand resolution shared by the dispatcher (`kernels`) and the kernel modules: the byte
//! slices of an operation's buffers, and element counts of shapes.

use super::{Buf, MAX_RANK, REGION_ARENA, REGION_WEIGHTS};

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

/// [`operands`] of an operation with one input of `nx` and an output of `ny` elements of `e`
/// bytes each.
pub(super) fn in_out<'a>(
    weights: &'a [u8],
    arena: &'a mut [u8],
    (x, nx): (Buf, usize),
    (y, ny): (Buf, usize),
    e: usize,
) -> Option<(&'a [u8], &'a mut [u8])> {
    let ([x], y) = operands(
        weights,
        arena,
        [(x, nx.checked_mul(e)?)],
        (y, ny.checked_mul(e)?),
    )?;
    Some((x, y))
}

/// Advances the row-major index `idx` within `shape` (last axis fastest); false when it wraps
/// around to all zeros.
pub(super) fn next_index(idx: &mut [usize], shape: &[u32]) -> bool {
    for (i, &n) in idx.iter_mut().zip(shape).rev() {
        *i += 1;
        if *i < n as usize {
            return true;
        }
        *i = 0;
    }
    false
}

/// The numpy broadcast of two shapes of the same rank and its element count; `None` when they
/// do not broadcast or the count overflows.
pub(super) fn broadcast(ash: &[u32], bsh: &[u32]) -> Option<([usize; MAX_RANK], usize)> {
    let mut out = [1usize; MAX_RANK];
    for i in 0..ash.len() {
        out[i] = match (ash[i], bsh[i]) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        } as usize;
    }
    let n = out[..ash.len()]
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))?;
    Some((out, n))
}

/// Calls `f(out_index, a_index, b_index)` over the broadcast output in row-major order.
pub(super) fn for_each_broadcast(
    rank: usize,
    ash: &[u32],
    bsh: &[u32],
    out: &[usize; MAX_RANK],
    mut f: impl FnMut(usize, usize, usize),
) {
    let n = out[..rank].iter().product::<usize>();
    if n == 0 {
        return;
    }
    // Strides in elements, 0 along broadcast axes.
    let (mut sa, mut sb) = ([0usize; MAX_RANK], [0usize; MAX_RANK]);
    let (mut ta, mut tb) = (1usize, 1usize);
    for d in (0..rank).rev() {
        sa[d] = if ash[d] == 1 { 0 } else { ta };
        sb[d] = if bsh[d] == 1 { 0 } else { tb };
        ta *= ash[d] as usize;
        tb *= bsh[d] as usize;
    }
    let mut idx = [0usize; MAX_RANK];
    let (mut ia, mut ib) = (0usize, 0usize);
    for k in 0..n {
        f(k, ia, ib);
        let mut d = rank;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            ia += sa[d];
            ib += sb[d];
            if idx[d] < out[d] {
                break;
            }
            ia -= sa[d] * out[d];
            ib -= sb[d] * out[d];
            idx[d] = 0;
        }
    }
}
