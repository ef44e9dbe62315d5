//! Permutation arithmetic for the NCHW -> NHWC conversion (and the element count of a shape).
//!
//! Every activation the importer tracks is an IR tensor plus a permutation `perm` saying how the
//! ONNX value sees it: `onnx_shape[i] = ir_shape[perm[i]]`. ONNX `Transpose` nodes only change
//! `perm`; an IR transpose is emitted only where an operator needs a particular layout.

/// How an NCHW ONNX value sees an NHWC IR tensor.
pub(crate) const NCHW_OVER_NHWC: [usize; 4] = [0, 3, 1, 2];

/// Product of `dims`, `None` on overflow.
pub(crate) fn element_count(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
}

pub(crate) fn identity(n: usize) -> Vec<usize> {
    (0..n).collect()
}

pub(crate) fn is_identity(p: &[usize]) -> bool {
    p.iter().enumerate().all(|(i, &x)| i == x)
}

/// Whether `p` is a permutation of `0..n`.
pub(crate) fn is_perm(p: &[usize], n: usize) -> bool {
    if p.len() != n {
        return false;
    }
    let mut seen = vec![false; n];
    for &x in p {
        match seen.get_mut(x) {
            Some(s) if !*s => *s = true,
            _ => return false,
        }
    }
    true
}

/// `v` permuted: `out[i] = v[p[i]]` (`None` if `p` indexes out of range).
pub(crate) fn permute<T: Clone>(v: &[T], p: &[usize]) -> Option<Vec<T>> {
    p.iter().map(|&i| v.get(i).cloned()).collect()
}

/// Inverse permutation (`p` must be a permutation).
pub(crate) fn inverse(p: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; p.len()];
    for (i, &x) in p.iter().enumerate() {
        if let Some(slot) = inv.get_mut(x) {
            *slot = i;
        }
    }
    inv
}

/// `r[i] = q[p[i]]`: the layout of an ONNX `Transpose(perm = p)` applied to a value seen through `q`.
pub(crate) fn compose(q: &[usize], p: &[usize]) -> Option<Vec<usize>> {
    permute(q, p)
}

/// Whether transposing a tensor of `shape` by `t` leaves its bytes in the same order
/// (only size-1 dimensions move), so that a reshape can stand in for the transpose.
pub(crate) fn keeps_data_order(shape: &[usize], t: &[usize]) -> bool {
    let moved: Vec<usize> = t
        .iter()
        .copied()
        .filter(|&i| shape.get(i).is_some_and(|&d| d != 1))
        .collect();
    moved.windows(2).all(|w| w[0] < w[1])
}

/// Source flat index of every element of `transpose(dims, perm)`, in output order.
pub(crate) fn transpose_indices(dims: &[usize], perm: &[usize]) -> Option<Vec<usize>> {
    if !is_perm(perm, dims.len()) {
        return None;
    }
    let n = element_count(dims)?;
    let rank = dims.len();
    // Row-major strides of the input.
    let mut strides = vec![1usize; rank];
    for i in (0..rank.saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].checked_mul(dims[i + 1])?;
    }
    let out_dims = permute(dims, perm)?;
    let out_strides = permute(&strides, perm)?;
    let mut idx = Vec::with_capacity(n);
    let mut counter = vec![0usize; rank];
    let mut offset = 0usize;
    for _ in 0..n {
        idx.push(offset);
        // Increment the multi-index of the output, last axis fastest.
        for ax in (0..rank).rev() {
            counter[ax] += 1;
            offset += out_strides[ax];
            if counter[ax] < out_dims[ax] {
                break;
            }
            offset -= out_strides[ax] * counter[ax];
            counter[ax] = 0;
        }
    }
    Some(idx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nchw_round_trip() {
        // Transpose(perm = [0, 3, 1, 2]) of an NHWC input sees it as NCHW...
        let p = compose(&identity(4), &NCHW_OVER_NHWC).unwrap();
        assert_eq!(p, NCHW_OVER_NHWC);
        // ... and Transpose(perm = [0, 2, 3, 1]) brings it back.
        assert!(is_identity(&compose(&p, &[0, 2, 3, 1]).unwrap()));
        assert_eq!(inverse(&NCHW_OVER_NHWC), vec![0, 2, 3, 1]);
    }

    #[test]
    fn transpose_2x3() {
        // [[0, 1, 2], [3, 4, 5]]^T = [[0, 3], [1, 4], [2, 5]]
        assert_eq!(
            transpose_indices(&[2, 3], &[1, 0]).unwrap(),
            vec![0, 3, 1, 4, 2, 5]
        );
        assert_eq!(transpose_indices(&[2, 3], &[0, 0]), None);
    }

    #[test]
    fn unit_dims_do_not_reorder() {
        assert!(keeps_data_order(&[1, 1, 1, 64], &[0, 3, 1, 2]));
        assert!(!keeps_data_order(&[1, 2, 2, 64], &[0, 3, 1, 2]));
    }
}
