//! Counters per operation and in total.

use std::vec::Vec;

use crate::ethos_u::regs::{ElementwiseMode, PoolingMode};

use super::memory::NUM_REGIONS;

/// What an operation was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// `NPU_OP_CONV`.
    Conv,
    /// `NPU_OP_DEPTHWISE`.
    Depthwise,
    /// `NPU_OP_POOL`.
    Pool(PoolingMode),
    /// `NPU_OP_ELEMENTWISE`.
    Elementwise(ElementwiseMode),
    /// `NPU_OP_DMA_START`.
    Dma,
}

impl OpKind {
    /// Short name, e.g. `conv`, `pool.max`, `elementwise.add`, `dma`.
    pub fn name(&self) -> &'static str {
        match self {
            OpKind::Conv => "conv",
            OpKind::Depthwise => "depthwise",
            OpKind::Pool(PoolingMode::Max) => "pool.max",
            OpKind::Pool(PoolingMode::Average) => "pool.average",
            OpKind::Pool(PoolingMode::ReduceSum) => "pool.reduce_sum",
            OpKind::Elementwise(m) => match m {
                ElementwiseMode::Mul => "elementwise.mul",
                ElementwiseMode::Add => "elementwise.add",
                ElementwiseMode::Sub => "elementwise.sub",
                ElementwiseMode::Min => "elementwise.min",
                ElementwiseMode::Max => "elementwise.max",
                ElementwiseMode::Lrelu => "elementwise.lrelu",
                ElementwiseMode::Abs => "elementwise.abs",
                ElementwiseMode::Clz => "elementwise.clz",
                ElementwiseMode::Shr => "elementwise.shr",
                ElementwiseMode::Shl => "elementwise.shl",
            },
            OpKind::Dma => "dma",
        }
    }
}

/// Counters of one operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpStats {
    /// Byte offset of the `NPU_OP_*` command.
    pub offset: usize,
    /// The operation.
    pub kind: OpKind,
    /// Multiply-accumulates (convolutions: OFM elements x kernel elements x IFM depth).
    pub macs: u64,
    /// Output elements written.
    pub ofm_elements: u64,
    /// Bytes read per region (IFM, IFM2, weights, scales, DMA source).
    pub bytes_read: [u64; NUM_REGIONS],
    /// Bytes written per region (OFM, DMA destination).
    pub bytes_written: [u64; NUM_REGIONS],
    /// Bytes moved by a DMA.
    pub dma_bytes: u64,
}

impl OpStats {
    /// Empty counters for an operation at `offset`.
    pub fn new(offset: usize, kind: OpKind) -> Self {
        OpStats {
            offset,
            kind,
            macs: 0,
            ofm_elements: 0,
            bytes_read: [0; NUM_REGIONS],
            bytes_written: [0; NUM_REGIONS],
            dma_bytes: 0,
        }
    }

    pub(crate) fn read(&mut self, region: u8, bytes: u64) {
        if let Some(r) = self.bytes_read.get_mut(region as usize) {
            *r = r.saturating_add(bytes);
        }
    }

    pub(crate) fn write(&mut self, region: u8, bytes: u64) {
        if let Some(r) = self.bytes_written.get_mut(region as usize) {
            *r = r.saturating_add(bytes);
        }
    }
}

/// Counters of a whole run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Every executed operation, in order.
    pub ops: Vec<OpStats>,
    /// Commands decoded (including register sets).
    pub commands: u64,
    /// Operations executed (block operations and DMAs).
    pub operations: u64,
    /// Total MACs.
    pub macs: u64,
    /// Total bytes read per region.
    pub bytes_read: [u64; NUM_REGIONS],
    /// Total bytes written per region.
    pub bytes_written: [u64; NUM_REGIONS],
    /// Total DMA bytes.
    pub dma_bytes: u64,
    /// `NPU_OP_IRQ`/`NPU_OP_STOP` masks raised, in order.
    pub irqs: Vec<u16>,
    /// True when the run ended at `NPU_OP_STOP` (false: end of the stream).
    pub stopped: bool,
}

impl Stats {
    pub(crate) fn push(&mut self, op: OpStats) {
        self.operations += 1;
        self.macs = self.macs.saturating_add(op.macs);
        self.dma_bytes = self.dma_bytes.saturating_add(op.dma_bytes);
        for (t, v) in self.bytes_read.iter_mut().zip(op.bytes_read) {
            *t = t.saturating_add(v);
        }
        for (t, v) in self.bytes_written.iter_mut().zip(op.bytes_written) {
            *t = t.saturating_add(v);
        }
        self.ops.push(op);
    }

    /// Totals per operation kind: (kind, operations, MACs).
    pub fn by_kind(&self) -> Vec<(OpKind, u64, u64)> {
        let mut v: Vec<(OpKind, u64, u64)> = Vec::new();
        for op in &self.ops {
            match v.iter_mut().find(|(k, _, _)| *k == op.kind) {
                Some(e) => {
                    e.1 += 1;
                    e.2 = e.2.saturating_add(op.macs);
                }
                None => v.push((op.kind, 1, op.macs)),
            }
        }
        v
    }
}
