//! Lowering: the IR graph into a [`Program`] of NPU operations.
//!
//! One module per operator family; each exposes `lower(cx, op)` that appends NPU operations to
//! the program through the [`Lowering`] context. The context owns the mapping from IR tensors to
//! buffers, so views (reshape) and slices (concat) share bytes instead of copying them.
//!
//! Numerics (scales, shifts, rounding, clip bounds) are decided here and follow
//! TFLite's reference kernels bit for bit; where Vela's choice differs from TFLite's (e.g. the
//! float32 Mul scale), TFLite wins and the module says so.

use npu_rt::ethos_u::config::AcceleratorConfig;

pub use super::npu_op::TensorPlace;
use super::npu_op::{Buffer, BufferId, BufferKind, ElemType, FeatureMap, Io, Layout, Program};
use crate::error::{Error, Result};
use crate::ir::{DType, Graph, Op, OpKind, TensorId};

mod act_fn;
mod concat;
mod conv;
mod elementwise;
mod fmap;
mod lstm;
mod lut;
mod math;
mod matmul;
mod mean;
mod op_builders;
mod pad;
mod permute;
mod pool;
mod reduce;
mod resize;
mod softmax;
// movea
mod slice;
// matmul
mod transpose_conv;

/// State shared by the per-operator lowerings.
pub struct Lowering<'g> {
    pub graph: &'g Graph,
    pub accel: &'g AcceleratorConfig,
    pub program: Program,
    /// Where each IR tensor lives, once known.
    places: Vec<Option<TensorPlace>>,
    /// Tensors to place in the NHCWB16 brick layout (see [`brick_tensors`]).
    bricks: Vec<bool>,
}

impl<'g> Lowering<'g> {
    fn new(graph: &'g Graph, accel: &'g AcceleratorConfig) -> Self {
        Lowering {
            graph,
            accel,
            program: Program::default(),
            places: vec![None; graph.tensors.len()],
            bricks: vec![false; graph.tensors.len()],
        }
    }

    /// An [`Error::InvalidNode`] for `op`.
    pub fn invalid(op: &Op, detail: impl Into<String>) -> Error {
        Error::InvalidNode {
            node: op.name.clone(),
            op: op.kind.name().into(),
            detail: detail.into(),
        }
    }

    /// An error saying the NPU cannot run `op` for the reason `limit` (the partitioner of the
    /// CPU-fallback issue routes such operators to the CPU).
    pub fn limit(&self, op: &Op, limit: impl Into<String>) -> Error {
        Error::HardwareLimit {
            node: op.name.clone(),
            op: op.kind.name().into(),
            target: self.accel.name.into(),
            limit: limit.into(),
        }
    }

    /// The feature-map element type of IR tensor `t`.
    pub fn elem_type(&self, op: &Op, t: TensorId) -> Result<ElemType> {
        let tensor = &self.graph.tensors[t];
        match tensor.dtype {
            DType::I8 => Ok(ElemType::I8),
            DType::U8 => Ok(ElemType::U8),
            DType::I16 => Ok(ElemType::I16),
            DType::I32 => Ok(ElemType::I32),
            other => Err(self.limit(
                op,
                format!(
                    "tensor '{}' is {other}; the NPU runs i8, u8, i16 and i32",
                    tensor.name
                ),
            )),
        }
    }

    /// `(scale, zero_point)` of IR tensor `t` (per-tensor; `(1.0, 0)` when unquantized).
    pub fn quant(&self, t: TensorId) -> (f32, i32) {
        match &self.graph.tensors[t].quant {
            Some(q) => (q.scale(), q.zero_point()),
            None => (1.0, 0),
        }
    }

    /// The `[H, W, C]` view of an IR activation shape: `[N=1, H, W, C]`, `[N, C]` as `[1, N, C]`,
    /// `[C]` as `[1, 1, C]`. Other shapes (batch > 1 in 4-D, rank > 4) are a hardware-limit error.
    pub fn hwc(&self, op: &Op, t: TensorId) -> Result<[usize; 3]> {
        let tensor = &self.graph.tensors[t];
        let s = &tensor.shape;
        let hwc = match s.len() {
            0 => [1, 1, 1],
            1 => [1, 1, s[0]],
            2 => [1, s[0], s[1]],
            3 => [s[0], s[1], s[2]],
            4 if s[0] == 1 => [s[1], s[2], s[3]],
            _ => {
                return Err(self.limit(
                    op,
                    format!(
                        "tensor '{}' has shape {:?}; the NPU lowering handles batch 1 and rank <= 4",
                        tensor.name, s
                    ),
                ));
            }
        };
        if hwc.iter().any(|&d| d > 65536) {
            return Err(self.limit(
                op,
                format!(
                    "tensor '{}' has a dimension above 65536 ({:?})",
                    tensor.name, hwc
                ),
            ));
        }
        Ok(hwc)
    }

    /// Where IR tensor `t` lives; allocates a dense NHWC arena buffer for it on first use.
    pub fn place(&mut self, t: TensorId) -> TensorPlace {
        if let Some(p) = self.places[t.index()] {
            return p;
        }
        let tensor = &self.graph.tensors[t];
        let io = self
            .graph
            .inputs
            .iter()
            .position(|&i| i == t)
            .map(Io::Input)
            .or_else(|| {
                self.graph
                    .outputs
                    .iter()
                    .position(|&o| o == t)
                    .map(Io::Output)
            })
            .or_else(|| {
                self.graph
                    .variables
                    .iter()
                    .position(|&v| v == t)
                    .map(Io::State)
            });
        let kind = match &tensor.data {
            Some(bytes) => BufferKind::Const(bytes.clone()),
            None => BufferKind::Arena,
        };
        let buffer = self.program.add_buffer(Buffer {
            name: tensor.name.clone(),
            size: tensor.byte_size(),
            kind,
            io,
        });
        let e = tensor.dtype.size();
        let shape = &tensor.shape;
        let c = shape.last().copied().unwrap_or(1);
        let w = if shape.len() >= 2 {
            shape[shape.len() - 2]
        } else {
            1
        };
        let place = if self.bricks.get(t.index()).copied().unwrap_or(false) {
            // Channels padded to whole 16-deep bricks.
            let c16 = c.div_ceil(16) * 16;
            let h = tensor.elements() / (w * c).max(1);
            self.program.buffers[buffer].size = h * w * c16 * e;
            TensorPlace {
                buffer,
                offset: 0,
                layout: Layout::Nhcwb16,
                strides: [w * c16 * e, 16 * e, 16 * e * w],
            }
        } else {
            TensorPlace {
                buffer,
                offset: 0,
                layout: Layout::Nhwc,
                strides: [w * c * e, c * e, e],
            }
        };
        self.places[t.index()] = Some(place);
        place
    }

    /// Makes `t` live at `place` (a view or slice of another tensor's buffer). Fails if `t`
    /// already has a place.
    pub fn set_place(&mut self, op: &Op, t: TensorId, place: TensorPlace) -> Result<()> {
        if self.places[t.index()].is_some() {
            return Err(Self::invalid(
                op,
                format!(
                    "internal: tensor '{}' was placed twice",
                    self.graph.tensors[t].name
                ),
            ));
        }
        self.places[t.index()] = Some(place);
        Ok(())
    }

    /// True if `t` has been placed already.
    pub fn is_placed(&self, t: TensorId) -> bool {
        self.places[t.index()].is_some()
    }

    /// The feature map of IR tensor `t` as `[H, W, C]` (see [`Lowering::hwc`]), with its zero point.
    pub fn fm(&mut self, op: &Op, t: TensorId) -> Result<FeatureMap> {
        let shape = self.hwc(op, t)?;
        let dtype = self.elem_type(op, t)?;
        let (_, zero_point) = self.quant(t);
        let p = self.place(t);
        Ok(FeatureMap {
            buffer: p.buffer,
            offset: p.offset,
            shape,
            strides: p.strides,
            layout: p.layout,
            dtype,
            zero_point,
            reverse: [false; 2],
            wrap: None,
        })
    }

    /// Adds a read-only constant buffer (LUTs, int32 constants) and returns its id.
    pub fn const_buffer(&mut self, name: impl Into<String>, bytes: Vec<u8>) -> BufferId {
        self.program.add_buffer(Buffer {
            name: name.into(),
            size: bytes.len(),
            kind: BufferKind::Const(bytes),
            io: None,
        })
    }

    /// Adds an arena scratch buffer (intermediates of decompositions) and returns its id.
    pub fn scratch_buffer(&mut self, name: impl Into<String>, size: usize) -> BufferId {
        self.program.add_buffer(Buffer {
            name: name.into(),
            size,
            kind: BufferKind::Arena,
            io: None,
        })
    }
}

/// Lowers every operator of `graph` to NPU operations for `accel`.
///
/// Fails on the first operator the NPU cannot run, naming it (the CPU-fallback partitioner
/// calls the per-operator check first and only lowers NPU segments).
pub fn lower(graph: &Graph, accel: &AcceleratorConfig) -> Result<Program> {
    let mut cx = Lowering::new(graph, accel);
    // Graph inputs, outputs and variables get their buffers first so they are dense NHWC and
    // flagged.
    for &t in graph
        .inputs
        .iter()
        .chain(&graph.outputs)
        .chain(&graph.variables)
    {
        cx.place(t);
    }
    for op in &graph.ops {
        lower_op(&mut cx, op)?;
    }
    cx.program.tensor_places = cx.places;
    Ok(cx.program)
}

/// A lowered program and the range of NPU operations of each IR operator.
pub type PartialProgram = (Program, Vec<std::ops::Range<usize>>);

/// Lowers the operators of `graph` with `on_npu[i]` set, for a graph split between the NPU and
/// the CPU. The activations the CPU operators read or write are placed first, dense NHWC (like
/// graph inputs and outputs), so both sides find them at one place. Returns the program and, per
/// IR operator, the range of its NPU operations (empty for CPU operators); on failure, the index
/// of the operator that failed and its error.
pub fn lower_partition(
    graph: &Graph,
    accel: &AcceleratorConfig,
    on_npu: &[bool],
    bricks: Bricks,
) -> std::result::Result<PartialProgram, (usize, Error)> {
    let mut cx = Lowering::new(graph, accel);
    match bricks {
        Bricks::Never => {}
        Bricks::Wherever => cx.bricks = brick_tensors(graph, on_npu),
        Bricks::WholeWhereShared => {
            cx.bricks = brick_tensors(graph, on_npu);
            let mut readers = vec![0usize; graph.tensors.len()];
            for op in &graph.ops {
                for &t in &op.inputs {
                    if let Some(r) = readers.get_mut(t.index()) {
                        *r += 1;
                    }
                }
            }
            for ((b, t), r) in cx.bricks.iter_mut().zip(&graph.tensors).zip(readers) {
                *b &= r < 2 || t.shape.last().is_some_and(|c| c % 16 == 0);
            }
        }
    }
    for &t in graph
        .inputs
        .iter()
        .chain(&graph.outputs)
        .chain(&graph.variables)
    {
        cx.place(t);
    }
    for (op, _) in graph
        .ops
        .iter()
        .zip(on_npu.iter().chain(std::iter::repeat(&true)))
        .filter(|(_, npu)| !**npu)
    {
        for &t in op.inputs.iter().chain(&op.outputs) {
            if graph.tensors.get(t.index()).is_some_and(|x| !x.is_const()) {
                cx.place(t);
            }
        }
    }
    let mut ranges = Vec::with_capacity(graph.ops.len());
    for (i, op) in graph.ops.iter().enumerate() {
        let start = cx.program.ops.len();
        if on_npu.get(i).copied().unwrap_or(true) {
            lower_op(&mut cx, op).map_err(|e| (i, e))?;
        }
        ranges.push(start..cx.program.ops.len());
    }
    cx.program.tensor_places = cx.places;
    Ok((cx.program, ranges))
}

/// Which activations [`lower_partition`] places in the NHCWB16 brick layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bricks {
    /// None: every activation dense NHWC.
    Never,
    /// Every one [`brick_tensors`] allows.
    Wherever,
    /// As `Wherever`, except activations read by two or more operators whose depth leaves
    /// part of the last brick empty: those cannot be striped (they stay whole, often at the
    /// arena's peak), and in bricks a depth of 24 takes 32 channels of bytes (mv2_224's
    /// block_1_project output: 100,352 bytes as bricks, 75,264 dense).
    WholeWhereShared,
}

/// The activations that can live in the NHCWB16 brick layout, which the NPU reads and writes
/// in whole 16-channel bursts (NHWC with a depth that is not a multiple of 16 costs partial
/// bursts; Vela uses bricks between NPU operations too): every producer and consumer is an NPU
/// operation whose lowering addresses the whole tensor as one feature map (convolutions,
/// depthwise, pooling, elementwise without broadcasting), and the tensor is not a graph input or
/// output, a constant, or a CPU operand (those stay dense NHWC).
pub fn brick_tensors(graph: &Graph, on_npu: &[bool]) -> Vec<bool> {
    let mut ok: Vec<bool> = graph
        .tensors
        .iter()
        .map(|t| !t.is_const() && t.shape.len() == 4 && t.shape[0] == 1)
        .collect();
    for &t in graph
        .inputs
        .iter()
        .chain(&graph.outputs)
        .chain(&graph.variables)
    {
        if let Some(v) = ok.get_mut(t.index()) {
            *v = false;
        }
    }
    for (i, op) in graph.ops.iter().enumerate() {
        let npu = on_npu.get(i).copied().unwrap_or(true);
        let out_shape = op.outputs.first().map(|&o| &graph.tensors[o].shape);
        let fits = npu
            && match &op.kind {
                OpKind::Conv2d(_)
                | OpKind::DepthwiseConv2d { .. }
                | OpKind::MaxPool(_)
                | OpKind::AvgPool(_) => true,
                OpKind::Add { .. } | OpKind::Sub { .. } | OpKind::Mul { .. } => op
                    .inputs
                    .iter()
                    .all(|&x| Some(&graph.tensors[x].shape) == out_shape),
                _ => false,
            };
        if !fits {
            for &t in op.inputs.iter().chain(&op.outputs) {
                if let Some(v) = ok.get_mut(t.index()) {
                    *v = false;
                }
            }
        }
    }
    ok
}

fn lower_op(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    match &op.kind {
        OpKind::Conv2d(_) | OpKind::DepthwiseConv2d { .. } | OpKind::FullyConnected { .. } => {
            conv::lower(cx, op)
        }
        OpKind::Add { .. } | OpKind::Sub { .. } | OpKind::Mul { .. } => elementwise::lower(cx, op),
        OpKind::AvgPool(_) | OpKind::MaxPool(_) => pool::lower(cx, op),
        OpKind::Quantize | OpKind::Activation(_) => pool::lower_rescale(cx, op),
        OpKind::Mean { .. } => mean::lower(cx, op),
        OpKind::Concat { .. } => concat::lower(cx, op),
        OpKind::Reshape => lower_reshape(cx, op),
        OpKind::Pad { .. } => pad::lower(cx, op),
        OpKind::Resize { .. } => resize::lower(cx, op),
        OpKind::Softmax { .. } => softmax::lower(cx, op),
        OpKind::Dequantize => {
            Err(cx.limit(op, "the NPU lowering has no dequantize; it runs on the CPU"))
        }
        OpKind::Transpose { .. }
        | OpKind::Tile { .. }
        | OpKind::MirrorPad { .. }
        | OpKind::Reverse { .. }
        | OpKind::Gather { .. }
        | OpKind::DepthToSpace { .. }
        | OpKind::SpaceToDepth { .. } => permute::lower(cx, op),
        OpKind::SpaceToBatch { .. } | OpKind::BatchToSpace { .. } => Err(cx.limit(
            op,
            "SpaceToBatch/BatchToSpace outside a dilated convolution run on the CPU",
        )),
        OpKind::Slice { .. } => slice::lower(cx, op),
        OpKind::TransposeConv2d(_) => transpose_conv::lower(cx, op),
        OpKind::BatchMatMul { .. } => matmul::lower(cx, op),
        OpKind::Abs
        | OpKind::Neg
        | OpKind::Maximum
        | OpKind::Minimum
        | OpKind::SquaredDifference
        | OpKind::Prelu => math::lower(cx, op),
        // SUM shares MEAN's lowering (a scaled sum).
        OpKind::Reduce {
            op: crate::ir::ReduceOp::Sum,
            ..
        } => mean::lower(cx, op),
        OpKind::Reduce { .. } | OpKind::ArgMinMax { .. } => reduce::lower(cx, op),
        OpKind::FloatUnary(_)
        | OpKind::FloatBinary(_)
        | OpKind::FloatReduce { .. }
        | OpKind::LayerNorm { .. } => Err(cx.limit(op, "the NPU has no floating point")),
        OpKind::OrtSoftmax => Err(cx.limit(
            op,
            "onnxruntime's QLinearSoftmax sums and divides in float: no NPU form",
        )),
        OpKind::ActFn(_) => act_fn::lower(cx, op),
        OpKind::Lstm(a) => lstm::lower(cx, op, a),
    }
}

/// A reshape is a view: the output shares the input's bytes (both dense NHWC).
fn lower_reshape(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    let (&x, &y) = match (op.inputs.first(), op.outputs.first()) {
        (Some(x), Some(y)) => (x, y),
        _ => return Err(Lowering::invalid(op, "needs one input and one output")),
    };
    let p = cx.place(x);
    if p.layout != Layout::Nhwc || p.offset != 0 || cx.is_placed(y) {
        // The input is a slice or brick-formatted, or the output already has a home (a graph
        // output): copy instead of aliasing.
        return pool::lower_copy(cx, op, x, y);
    }
    let e = cx.graph.tensors[y].dtype.size();
    let shape = &cx.graph.tensors[y].shape;
    let c = shape.last().copied().unwrap_or(1);
    let w = if shape.len() >= 2 {
        shape[shape.len() - 2]
    } else {
        1
    };
    cx.set_place(
        op,
        y,
        TensorPlace {
            buffer: p.buffer,
            offset: 0,
            layout: Layout::Nhwc,
            strides: [w * c * e, c * e, e],
        },
    )
}

#[cfg(test)]
mod e2e;

#[cfg(test)]
#[path = "exec_model.rs"]
mod exec_model;

#[cfg(test)]
#[path = "lowering_tests.rs"]
mod lowering_tests;
