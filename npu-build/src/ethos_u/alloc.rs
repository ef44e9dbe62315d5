//! Liveness-based arena allocation.
//!
//! Every feature map that is not a view of another lives in the arena (region 1) from the step
//! that writes it to the last step that reads it. Buffers whose lifetimes overlap must not share
//! bytes; the others may. Placement is greedy by size (largest first, each at the lowest offset
//! that fits among the already placed buffers it overlaps in time), which is what TFLite Micro's
//! planner does and is close to optimal on chain-like networks.

/// One buffer to place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buffer {
    /// Bytes needed.
    pub size: usize,
    /// First step (inclusive) at which the buffer holds live data.
    pub first: usize,
    /// Last step (inclusive) at which the buffer holds live data.
    pub last: usize,
}

/// Result of [`plan`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Offset of each buffer (same order as the input), a multiple of the alignment.
    pub offsets: Vec<usize>,
    /// Arena size: the end of the highest placed buffer, rounded up to the alignment.
    pub size: usize,
}

/// Places `buffers` in one arena; `align` must be a power of two.
///
/// ```
/// use npu_build::ethos_u::alloc::{plan, Buffer};
/// // a -> b -> c: a and c never live together, so they can share bytes.
/// let p = plan(&[
///     Buffer { size: 96, first: 0, last: 1 },
///     Buffer { size: 48, first: 1, last: 2 },
///     Buffer { size: 96, first: 2, last: 3 },
/// ], 16);
/// assert_eq!(p.size, 96 + 48);
/// assert_eq!(p.offsets[0], p.offsets[2]);
/// ```
pub fn plan(buffers: &[Buffer], align: usize) -> Plan {
    debug_assert!(align.is_power_of_two());
    let round = |x: usize| x.div_ceil(align) * align;
    let mut order: Vec<usize> = (0..buffers.len()).collect();
    // Largest first; ties by earlier start so the result is deterministic.
    order.sort_by(|&a, &b| {
        buffers[b]
            .size
            .cmp(&buffers[a].size)
            .then(buffers[a].first.cmp(&buffers[b].first))
            .then(a.cmp(&b))
    });
    let mut offsets = vec![0usize; buffers.len()];
    let mut placed: Vec<usize> = Vec::with_capacity(buffers.len());
    let mut total = 0usize;
    for &i in &order {
        let b = &buffers[i];
        if b.size == 0 {
            offsets[i] = 0;
            continue;
        }
        // Intervals (in bytes) taken by placed buffers that overlap `b` in time, sorted by start.
        let mut busy: Vec<(usize, usize)> = placed
            .iter()
            .filter(|&&j| buffers[j].first <= b.last && b.first <= buffers[j].last)
            .map(|&j| (offsets[j], offsets[j] + round(buffers[j].size)))
            .collect();
        busy.sort_unstable();
        let need = round(b.size);
        let mut candidate = 0usize;
        for &(start, end) in &busy {
            if candidate + need <= start {
                break;
            }
            candidate = candidate.max(end);
        }
        offsets[i] = candidate;
        total = total.max(candidate + need);
        placed.push(i);
    }
    Plan {
        offsets,
        size: round(total),
    }
}

/// The smallest arena any placement can reach: the largest total size live at one step.
pub fn lower_bound(buffers: &[Buffer], align: usize) -> usize {
    let steps = buffers.iter().map(|b| b.last + 1).max().unwrap_or(0);
    (0..steps)
        .map(|s| {
            buffers
                .iter()
                .filter(|b| b.first <= s && s <= b.last)
                .map(|b| b.size.div_ceil(align) * align)
                .sum::<usize>()
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overlaps(p: &Plan, bufs: &[Buffer], align: usize) -> bool {
        for i in 0..bufs.len() {
            for j in i + 1..bufs.len() {
                let (a, b) = (&bufs[i], &bufs[j]);
                if a.size == 0 || b.size == 0 || a.last < b.first || b.last < a.first {
                    continue;
                }
                let ra = p.offsets[i]..p.offsets[i] + a.size.div_ceil(align) * align;
                let rb = p.offsets[j]..p.offsets[j] + b.size.div_ceil(align) * align;
                if ra.start < rb.end && rb.start < ra.end {
                    return true;
                }
            }
        }
        false
    }

    #[test]
    fn random_plans_are_valid_and_near_the_bound() {
        // xorshift, deterministic
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: u64| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s % m
        };
        for _ in 0..200 {
            let n = 1 + next(30) as usize;
            let bufs: Vec<Buffer> = (0..n)
                .map(|_| {
                    let first = next(20) as usize;
                    Buffer {
                        size: next(5000) as usize,
                        first,
                        last: first + next(5) as usize,
                    }
                })
                .collect();
            let p = plan(&bufs, 16);
            assert!(!overlaps(&p, &bufs, 16));
            assert!(p.offsets.iter().all(|o| o % 16 == 0));
            let lb = lower_bound(&bufs, 16);
            assert!(p.size >= lb);
            for (i, b) in bufs.iter().enumerate() {
                assert!(p.offsets[i] + b.size <= p.size);
            }
        }
    }

    #[test]
    fn chain_reaches_the_bound() {
        // A chain a->b->c->d with two live at a time.
        let sizes = [400, 300, 500, 100];
        let bufs: Vec<Buffer> = sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| Buffer {
                size,
                first: i,
                last: i + 1,
            })
            .collect();
        let p = plan(&bufs, 16);
        assert_eq!(p.size, lower_bound(&bufs, 16));
    }
}
