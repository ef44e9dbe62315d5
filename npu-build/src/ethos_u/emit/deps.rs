//! Synchronisation: which memory each command touches, the waits between DMAs and NPU
//! operations (`NPU_OP_DMA_WAIT` / `NPU_OP_KERNEL_WAIT`), and the NPU-to-NPU block dependency
//! (`NPU_SET_BLOCKDEP`), computed the way Vela's Regor core does (docs/dependencies.md).

use std::collections::VecDeque;

use super::super::npu_op::{BlockConfig, FeatureMap, Kernel, Layout};

/// A memory the NPU addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Memory {
    /// External memory through a region (base pointer).
    Region(u8),
    /// The internal shared buffer (LUT destination of DMAs, accumulators on 16-bank configs).
    Shram,
}

/// One byte range a command reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Access {
    pub write: bool,
    pub memory: Memory,
    pub start: u64,
    pub end: u64,
}

impl Access {
    pub fn read(memory: Memory, start: u64, len: u64) -> Self {
        Access {
            write: false,
            memory,
            start,
            end: start.saturating_add(len),
        }
    }

    pub fn write(memory: Memory, start: u64, len: u64) -> Self {
        Access {
            write: true,
            ..Access::read(memory, start, len)
        }
    }

    /// Two accesses conflict when they overlap in one memory and one of them writes.
    fn conflicts(&self, other: &Access) -> bool {
        self.memory == other.memory
            && self.start < other.end
            && other.start < self.end
            && (self.write || other.write)
    }
}

/// Commands of one kind (DMAs or NPU operations) that may still be running.
#[derive(Debug, Default)]
pub(super) struct Outstanding {
    queue: VecDeque<Vec<Access>>,
    max: usize,
}

impl Outstanding {
    pub fn new(max: usize) -> Self {
        Outstanding {
            queue: VecDeque::new(),
            max,
        }
    }

    /// The wait a new command with `accesses` needs: `Some(k)` = wait until at most `k` of
    /// these commands are outstanding (the newest conflicting one is the `k`-th newest, counted
    /// from 0). The waited-for commands and all older ones leave the queue.
    pub fn wait_for(&mut self, accesses: &[Access]) -> Option<u16> {
        let n = self.queue.len();
        for (waits, index) in (0..n).rev().enumerate() {
            let conflict = accesses
                .iter()
                .any(|a| self.queue[index].iter().any(|o| a.conflicts(o)));
            if conflict {
                self.queue.drain(..=index);
                return Some(waits as u16);
            }
        }
        None
    }

    /// Records a newly started command.
    pub fn push(&mut self, accesses: Vec<Access>) {
        self.queue.push_back(accesses);
        if self.queue.len() > self.max {
            self.queue.pop_front();
        }
    }
}

/// A feature map as the block-dependency calculation sees it: where its tensor is, and the
/// box the operation covers in tensor coordinates.
#[derive(Clone, Copy, Debug)]
pub(super) struct Placed<'a> {
    pub fm: &'a FeatureMap,
    pub region: u8,
    /// Address of the buffer holding the tensor.
    pub buffer_addr: u64,
    /// Bytes of that buffer.
    pub buffer_size: u64,
}

impl Placed<'_> {
    fn same_tensor(&self, other: &Placed<'_>) -> bool {
        self.region == other.region && self.buffer_addr == other.buffer_addr
    }

    fn overlaps(&self, other: &Placed<'_>) -> bool {
        self.region == other.region
            && self.buffer_addr < other.buffer_addr.saturating_add(other.buffer_size)
            && other.buffer_addr < self.buffer_addr.saturating_add(self.buffer_size)
    }

    /// Both describe boxes of one tensor laid out the same way (a reshape between them is
    /// something else).
    fn same_view(&self, other: &Placed<'_>) -> bool {
        self.same_tensor(other)
            && self.fm.strides == other.fm.strides
            && self.fm.layout == other.fm.layout
            && self.fm.dtype == other.fm.dtype
            && self.fm.reverse == other.fm.reverse
    }

    /// The box's `[y, x, c]` origin in the tensor, from its byte offset.
    fn origin(&self) -> Option<[usize; 3]> {
        let f = self.fm;
        let e = f.dtype.bytes();
        let [sy, sx, sc] = f.strides;
        if sy == 0 || sx == 0 || sc == 0 {
            return None;
        }
        let y = f.offset / sy;
        let r = f.offset % sy;
        match f.layout {
            Layout::Nhwc => Some([y, r / sx, (r % sx) / e]),
            Layout::Nhcwb16 => {
                let brick = r / sc;
                let r = r % sc;
                Some([y, r / (16 * e), brick * 16 + (r % (16 * e)) / e])
            }
        }
    }

    /// The box as `[start, end)` per axis `[y, x, c]`.
    fn area(&self) -> Option<Area> {
        let o = self.origin()?;
        let s = self.fm.shape;
        Some(Area {
            start: o,
            end: [o[0] + s[0], o[1] + s[1], o[2] + s[2]],
        })
    }
}

/// A box in tensor coordinates, `[y, x, c]`, end exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Area {
    start: [usize; 3],
    end: [usize; 3],
}

impl Area {
    fn overlaps(&self, other: &Area) -> bool {
        (0..3).all(|i| self.start[i] < other.end[i] && other.start[i] < self.end[i])
    }
}

/// The first (or last) `n` jobs of `job` size covering `area`, in the hardware's order
/// (height, then width, then depth fastest); the last jobs come in order, the very last last.
fn jobs(area: &Area, job: [usize; 3], n: usize, from_start: bool) -> Vec<Area> {
    let size = [
        area.end[0] - area.start[0],
        area.end[1] - area.start[1],
        area.end[2] - area.start[2],
    ];
    if job.contains(&0) {
        return Vec::new();
    }
    let split = [
        size[0].div_ceil(job[0]),
        size[1].div_ceil(job[1]),
        size[2].div_ceil(job[2]),
    ];
    let (h, w, z) = (split[0], split[1], split[2]);
    let total = h.saturating_mul(w).saturating_mul(z);
    let (first, last) = if from_start {
        (0, total.min(n))
    } else {
        (total.saturating_sub(n), total)
    };
    (first..last)
        .map(|i| {
            let from = [
                area.start[0] + (i / (z * w)) * job[0],
                area.start[1] + ((i / z) % w) * job[1],
                area.start[2] + (i % z) * job[2],
            ];
            let to = [
                (from[0] + job[0]).min(area.end[0]),
                (from[1] + job[1]).min(area.end[1]),
                (from[2] + job[2]).min(area.end[2]),
            ];
            Area {
                start: from,
                end: to,
            }
        })
        .collect()
}

/// The previous NPU operation, as the next one's block dependency needs it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Producer<'a> {
    pub ofm: Placed<'a>,
    pub block: BlockConfig,
    pub used_lut: bool,
}

/// The current operation's view for the block dependency.
#[derive(Clone, Copy, Debug)]
pub(super) struct Consumer<'a> {
    /// The IFMs in the operator's original input order (the reversed operand order undone).
    pub ifms: [Option<Placed<'a>>; 2],
    /// Bytes of each original input's tensor (scalars count their element).
    pub ifm_sizes: [u64; 2],
    pub kernel: Kernel,
    pub block: BlockConfig,
    pub uses_lut: bool,
}

/// `NPU_SET_BLOCKDEP`: how many OFM blocks of the previous operation may still be in flight
/// when this one starts reading, 0..=`max`.
pub(super) fn block_dependency(
    prev: Option<&Producer<'_>>,
    cur: &Consumer<'_>,
    max: usize,
    lut_shares_accumulators: bool,
) -> u16 {
    let Some(prev) = prev else { return 0 };
    // Without reserved LUT banks the accumulators of this op would overwrite the LUT of the
    // previous one while it runs.
    if lut_shares_accumulators && prev.used_lut && !cur.uses_lut {
        return 0;
    }
    // A box written backwards finishes its first rows last: no overlap with its readers.
    if prev.ofm.fm.reverse != [false; 2] && cur.ifms.iter().flatten().any(|f| f.overlaps(&prev.ofm))
    {
        return 0;
    }
    let index = match cur.ifms[1] {
        Some(ifm2) if ifm2.same_tensor(&prev.ofm) => 1,
        _ => 0,
    };
    // A scalar operand (no feature map) is never the previous OFM.
    let ifm = match cur.ifms[index] {
        Some(f) if f.same_tensor(&prev.ofm) => f,
        _ => {
            if cur.ifms.iter().flatten().any(|f| f.overlaps(&prev.ofm)) {
                return 0;
            }
            return max as u16;
        }
    };
    if cur.ifms[1].is_some() && cur.ifm_sizes[index] < cur.ifm_sizes[1 - index] {
        // The previous OFM is a broadcast operand.
        return 0;
    }
    // Wrapped boxes (ring buffers) have no single origin to compare jobs by.
    if !ifm.same_view(&prev.ofm) || ifm.fm.wrap.is_some() || prev.ofm.fm.wrap.is_some() {
        return 0;
    }
    let (Some(prev_area), Some(cur_area)) = (prev.ofm.area(), ifm.area()) else {
        return 0;
    };
    let prev_jobs = jobs(&prev_area, prev.block.ofm_block, max, false);
    let k = &cur.kernel;
    let ob = cur.block.ofm_block;
    let ifm_job = [
        ob[0].saturating_sub(1) * k.stride_y + k.dilated_h(),
        ob[1].saturating_sub(1) * k.stride_x + k.dilated_w(),
        cur.block.ifm_block[2],
    ];
    let cur_jobs = jobs(&cur_area, ifm_job, max, true);
    let n = prev_jobs.len().min(cur_jobs.len());
    let last = prev_jobs.len().saturating_sub(1);
    for dep in 0..n {
        // Jobs i of this op and (last - j) of the previous one run together when i + j <= dep.
        let overlap = (0..=dep).any(|i| {
            let j = dep - i;
            cur_jobs
                .get(i)
                .zip(last.checked_sub(j).and_then(|p| prev_jobs.get(p)))
                .is_some_and(|(c, p)| c.overlaps(p))
        });
        if overlap {
            return dep as u16;
        }
    }
    n as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethos_u::npu_op::BufferId;

    #[test]
    fn job_order_is_height_width_depth() {
        let area = Area {
            start: [0, 0, 0],
            end: [4, 4, 32],
        };
        let first = jobs(&area, [2, 4, 16], 3, true);
        assert_eq!(first[0].start, [0, 0, 0]);
        assert_eq!(first[1].start, [0, 0, 16]);
        assert_eq!(first[2].start, [2, 0, 0]);
        let last = jobs(&area, [2, 4, 16], 3, false);
        assert_eq!(last.len(), 3);
        assert_eq!(last[2].start, [2, 0, 16]);
    }

    fn placed(fm: &FeatureMap, addr: u64) -> Placed<'_> {
        Placed {
            fm,
            region: 1,
            buffer_addr: addr,
            buffer_size: fm.extent() as u64,
        }
    }

    fn unit_block(d: usize) -> BlockConfig {
        BlockConfig {
            ofm_block: [2, 2, d],
            ifm_block: [2, 2, d],
            ifm_ib_end: 0,
            ab_start: 0,
            ifm2_ib_start: None,
            acc_format: npu_rt::ethos_u::regs::AccFormat::I32,
            part_kernel_first: false,
        }
    }

    #[test]
    fn block_dependency_cases() {
        use super::super::super::npu_op::ElemType;
        let a = FeatureMap::nhwc(BufferId(0), [8, 8, 16], ElemType::I8, 0);
        let b = FeatureMap::nhwc(BufferId(1), [8, 8, 16], ElemType::I8, 0);
        let prev = Producer {
            ofm: placed(&a, 0x1000),
            block: unit_block(16),
            used_lut: false,
        };
        fn consumer(ifms: [Option<Placed<'_>>; 2]) -> Consumer<'_> {
            Consumer {
                ifms,
                ifm_sizes: [1024, 1],
                kernel: Kernel::UNIT,
                block: unit_block(16),
                uses_lut: false,
            }
        }
        // First op: nothing to depend on.
        assert_eq!(
            block_dependency(None, &consumer([Some(placed(&b, 0)), None]), 3, false),
            0
        );
        // Unrelated, non-overlapping input (also when the first operand is a scalar).
        assert_eq!(
            block_dependency(
                Some(&prev),
                &consumer([Some(placed(&b, 0)), None]),
                3,
                false
            ),
            3
        );
        assert_eq!(
            block_dependency(
                Some(&prev),
                &consumer([None, Some(placed(&b, 0))]),
                3,
                false
            ),
            3
        );
        // Overlapping but not the same tensor: no overlap of work allowed.
        assert_eq!(
            block_dependency(
                Some(&prev),
                &consumer([Some(placed(&b, 0x1200)), None]),
                3,
                false
            ),
            0
        );
        // Direct producer -> consumer with 2x2 blocks over 8x8: the first consumer job reads
        // rows 0-1 while the last producer jobs write rows 6-7, so three jobs may overlap.
        assert_eq!(
            block_dependency(
                Some(&prev),
                &consumer([Some(placed(&a, 0x1000)), None]),
                3,
                false
            ),
            3
        );
        // A LUT user followed by a non-LUT op on a configuration whose LUT shares the
        // accumulator banks.
        let lut_prev = Producer {
            used_lut: true,
            ..prev
        };
        assert_eq!(
            block_dependency(
                Some(&lut_prev),
                &consumer([Some(placed(&b, 0)), None]),
                3,
                true
            ),
            0
        );
    }

    #[test]
    fn waits_drop_older_commands() {
        let mut q = Outstanding::new(2);
        q.push(vec![Access::write(Memory::Region(1), 0, 16)]);
        q.push(vec![Access::write(Memory::Region(1), 100, 16)]);
        // Conflicts with the older one only: one newer DMA may stay outstanding.
        assert_eq!(
            q.wait_for(&[Access::read(Memory::Region(1), 8, 4)]),
            Some(1)
        );
        assert_eq!(q.wait_for(&[Access::read(Memory::Region(1), 8, 4)]), None);
        assert_eq!(
            q.wait_for(&[Access::read(Memory::Region(1), 100, 4)]),
            Some(0)
        );
        // Reads never conflict with reads; other memories never conflict.
        q.push(vec![Access::read(Memory::Region(0), 0, 16)]);
        assert_eq!(q.wait_for(&[Access::read(Memory::Region(0), 0, 16)]), None);
        assert_eq!(q.wait_for(&[Access::write(Memory::Shram, 0, 16)]), None);
    }
}
