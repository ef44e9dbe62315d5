//! int8 reference interpreter of the IR, bit-exact with TFLite's reference kernels.
//!
//! Every operator is "prepared" once (shapes and types checked, rescale factors encoded as TFLite
//! encodes them, weights widened) and then run in graph order. The arithmetic follows the kernels
//! TFLite's `BUILTIN_REF` op resolver selects; each kernel module names the TFLite function it
//! reproduces and the choices made where TFLite has none (ONNX-only cases).
//!
//! ```no_run
//! use npu_build::{import, reference, value::Value};
//! let graph = import::load(std::path::Path::new("model.tflite"))?;
//! let input = Value::read_npy(std::path::Path::new("input.npy"))?;
//! let outputs = reference::run(&graph, &[input])?;
//! # Ok::<(), npu_build::Error>(())
//! ```

pub(crate) mod act_fn;
pub(crate) mod binary;
pub(crate) mod conv;
pub(crate) mod convert;
pub(crate) mod float;
pub(crate) mod movement;
pub(crate) mod pairwise;
pub(crate) mod pool;
pub(crate) mod reduce;
pub(crate) mod remap;
pub(crate) mod softmax;
pub(crate) mod unary;
pub(crate) mod util;
// movea
pub(crate) mod slice;
// matmul
pub(crate) mod lstm;
pub(crate) mod matmul;
pub(crate) mod transpose_conv;

use crate::error::{Error, Result};
use crate::ir::{DType, Graph, OpKind, TensorId};
use crate::value::{Data, Value};

/// Runs `graph` on `inputs` (in graph input order) and returns the outputs in graph output order.
///
/// Inputs must match the graph inputs' dtypes and shapes exactly ([`Error::BadInput`] otherwise).
pub fn run(graph: &Graph, inputs: &[Value]) -> Result<Vec<Value>> {
    Interpreter::new(graph)?.run(inputs)
}

/// A prepared operator: how to compute its output from its data inputs.
trait Kernel: Send + Sync {
    /// Computes the output from the data inputs (in the order given at preparation).
    fn run(&self, inputs: &[&Data]) -> Result<Data>;

    /// Like [`Kernel::run`], plus the new values of the operator's [`Graph::variables`] among
    /// its inputs, in input order (none for operators without state).
    fn run_with_state(&self, inputs: &[&Data]) -> Result<(Data, Vec<Data>)> {
        Ok((self.run(inputs)?, Vec::new()))
    }
}

/// A kernel and the tensors it reads at run time (constant weights are baked into the kernel).
struct Prepared {
    kernel: Box<dyn Kernel>,
    inputs: Vec<TensorId>,
}

impl Prepared {
    fn new(kernel: impl Kernel + 'static, inputs: Vec<TensorId>) -> Prepared {
        Prepared {
            kernel: Box::new(kernel),
            inputs,
        }
    }
}

struct Step {
    op: usize,
    prepared: Prepared,
    /// Activations no later step reads, freed after this one.
    free: Vec<TensorId>,
}

/// A graph prepared for repeated runs.
pub struct Interpreter<'g> {
    graph: &'g Graph,
    steps: Vec<Step>,
    /// Constant tensors read as data (not baked into a kernel), decoded once.
    consts: Vec<Option<Data>>,
}

impl<'g> Interpreter<'g> {
    /// Validates `graph` and prepares every operator.
    pub fn new(graph: &'g Graph) -> Result<Self> {
        graph.validate()?;
        let n = graph.tensors.len();
        let mut steps = Vec::with_capacity(graph.ops.len());
        let mut consts: Vec<Option<Data>> = vec![None; n];
        for (k, op) in graph.ops.iter().enumerate() {
            if op.outputs.len() != 1 {
                return Err(util::node_err(
                    op,
                    "operators with several outputs are not supported",
                ));
            }
            let prepared = prepare(graph, k)?;
            for &i in &prepared.inputs {
                let t = &graph.tensors[i];
                if let (Some(bytes), None) = (&t.data, &consts[i.index()]) {
                    let d =
                        Data::from_le_bytes(t.dtype, bytes).map_err(|_| Error::InvalidTensor {
                            tensor: t.name.clone(),
                            detail: format!(
                                "constant {} data cannot be used as an operand",
                                t.dtype
                            ),
                        })?;
                    consts[i.index()] = Some(d);
                }
            }
            steps.push(Step {
                op: k,
                prepared,
                free: Vec::new(),
            });
        }
        // Free each activation after its last reader (graph outputs are kept).
        let mut last = vec![None; n];
        for (s, step) in steps.iter().enumerate() {
            for &i in &step.prepared.inputs {
                last[i.index()] = Some(s);
            }
        }
        for (i, l) in last.iter().enumerate() {
            if let Some(s) = *l
                && !graph.outputs.contains(&TensorId(i))
                && !graph.variables.contains(&TensorId(i))
                && consts[i].is_none()
            {
                steps[s].free.push(TensorId(i));
            }
        }
        Ok(Interpreter {
            graph,
            steps,
            consts,
        })
    }

    /// Runs the prepared graph on `inputs` (graph input order).
    ///
    /// Variable tensors (LSTM states) start at zero, as in a freshly allocated TFLite
    /// interpreter; [`Interpreter::run_sequence`] carries them from one run to the next.
    pub fn run(&self, inputs: &[Value]) -> Result<Vec<Value>> {
        let acts = self.execute(inputs, false, &mut Vec::new())?;
        self.graph
            .outputs
            .iter()
            .map(|&id| self.value_of(&acts, id))
            .collect()
    }

    /// Runs the graph and returns the value of every tensor (activations and constants), indexed
    /// by tensor id: for comparing intermediate results with another engine.
    pub fn run_all(&self, inputs: &[Value]) -> Result<Vec<Option<Value>>> {
        let acts = self.execute(inputs, true, &mut Vec::new())?;
        Ok((0..self.graph.tensors.len())
            .map(|id| self.value_of(&acts, TensorId(id)).ok())
            .collect())
    }

    /// Runs the graph on each set of inputs in turn, the variable tensors (LSTM states) kept
    /// from one run to the next as TFLite's interpreter keeps them between `Invoke` calls.
    pub fn run_sequence(&self, runs: &[Vec<Value>]) -> Result<Vec<Vec<Value>>> {
        let mut vars = Vec::new();
        runs.iter()
            .map(|inputs| {
                let acts = self.execute(inputs, false, &mut vars)?;
                self.graph
                    .outputs
                    .iter()
                    .map(|&id| self.value_of(&acts, id))
                    .collect()
            })
            .collect()
    }

    fn value_of(&self, acts: &[Option<Data>], id: TensorId) -> Result<Value> {
        let t = &self.graph.tensors[id];
        let data = acts[id.index()]
            .clone()
            .or_else(|| self.consts[id.index()].clone())
            .or_else(|| {
                t.data
                    .as_ref()
                    .and_then(|b| Data::from_le_bytes(t.dtype, b).ok())
            })
            .ok_or_else(|| Error::InvalidTensor {
                tensor: t.name.clone(),
                detail: "has no value".into(),
            })?;
        Value::new(t.shape.clone(), data)
    }

    /// Runs every step; `vars` holds the variable tensors' values (graph order; empty: zeros)
    /// and receives their values after the run.
    fn execute(
        &self,
        inputs: &[Value],
        keep_all: bool,
        vars: &mut Vec<Data>,
    ) -> Result<Vec<Option<Data>>> {
        let g = self.graph;
        if inputs.len() != g.inputs.len() {
            return Err(Error::BadInput {
                index: inputs.len().min(g.inputs.len()),
                tensor: g
                    .inputs
                    .get(inputs.len())
                    .map_or_else(|| "-".into(), |&i| g.tensors[i].name.clone()),
                detail: format!(
                    "the model takes {} input(s) but {} were given",
                    g.inputs.len(),
                    inputs.len()
                ),
            });
        }
        let mut acts: Vec<Option<Data>> = vec![None; g.tensors.len()];
        for (k, (v, &id)) in inputs.iter().zip(&g.inputs).enumerate() {
            let t = &g.tensors[id];
            let bad = |detail: String| Error::BadInput {
                index: k,
                tensor: t.name.clone(),
                detail,
            };
            if v.dtype() != t.dtype {
                return Err(bad(format!("expected {} data, got {}", t.dtype, v.dtype())));
            }
            if v.shape != t.shape {
                return Err(bad(format!(
                    "expected shape {:?}, got {:?}",
                    t.shape, v.shape
                )));
            }
            if v.data.len() != t.elements() {
                return Err(bad(format!(
                    "shape {:?} needs {} elements, got {}",
                    v.shape,
                    t.elements(),
                    v.data.len()
                )));
            }
            acts[id.index()] = Some(v.data.clone());
        }
        for (k, &id) in g.variables.iter().enumerate() {
            let t = &g.tensors[id];
            acts[id.index()] = Some(match vars.get(k) {
                Some(d) => d.clone(),
                None => Data::from_le_bytes(
                    t.dtype,
                    &vec![
                        crate::ir::variable_initial_byte(
                            t.dtype,
                            t.quant.as_ref().map_or(0, |q| q.zero_point())
                        );
                        t.byte_size()
                    ],
                )?,
            });
        }
        for step in &self.steps {
            let op = &g.ops[step.op];
            let out_id = op.outputs[0];
            let (result, updates) = {
                let mut ins = Vec::with_capacity(step.prepared.inputs.len());
                for &i in &step.prepared.inputs {
                    let d = acts[i.index()]
                        .as_ref()
                        .or(self.consts[i.index()].as_ref())
                        .ok_or_else(|| {
                            util::node_err(
                                op,
                                format!("input '{}' has no value", g.tensors[i].name),
                            )
                        })?;
                    ins.push(d);
                }
                step.prepared.kernel.run_with_state(&ins)?
            };
            let targets = op.inputs.iter().filter(|i| g.variables.contains(i));
            for (&t, d) in targets.zip(updates) {
                acts[t.index()] = Some(d);
            }
            let t = &g.tensors[out_id];
            if result.len() != t.elements() || result.dtype() != t.dtype {
                return Err(util::node_err(
                    op,
                    format!(
                        "internal error: produced {} {} values for '{}' ({:?} {})",
                        result.len(),
                        result.dtype(),
                        t.name,
                        t.shape,
                        t.dtype
                    ),
                ));
            }
            acts[out_id.index()] = Some(result);
            if !keep_all {
                for &i in &step.free {
                    acts[i.index()] = None;
                }
            }
        }
        *vars = g
            .variables
            .iter()
            .map(|&id| acts[id.index()].clone())
            .collect::<Option<Vec<_>>>()
            .unwrap_or_default();
        Ok(acts)
    }
}

/// Prepares op `k` of `g`.
fn prepare(g: &Graph, k: usize) -> Result<Prepared> {
    let op = &g.ops[k];
    match &op.kind {
        OpKind::Conv2d(a) => conv::Conv::prepare(g, op, a),
        OpKind::DepthwiseConv2d {
            attrs,
            depth_multiplier,
        } => conv::Depthwise::prepare(g, op, attrs, *depth_multiplier),
        OpKind::FullyConnected { activation } => conv::FullyConnected::prepare(g, op, *activation),
        OpKind::Add { activation } => {
            binary::Binary::prepare(g, op, binary::BinaryOp::Add, *activation)
        }
        OpKind::Sub { activation } => {
            binary::Binary::prepare(g, op, binary::BinaryOp::Sub, *activation)
        }
        OpKind::Mul { activation } => {
            binary::Binary::prepare(g, op, binary::BinaryOp::Mul, *activation)
        }
        OpKind::Mean { axes, keep_dims } => pool::Mean::prepare(g, op, axes, *keep_dims),
        OpKind::AvgPool(a) => pool::Pool::prepare(g, op, a, false),
        OpKind::MaxPool(a) => pool::Pool::prepare(g, op, a, true),
        OpKind::Concat { axis, activation } => movement::Concat::prepare(g, op, *axis, *activation),
        OpKind::Reshape => movement::Copy::prepare(g, op),
        OpKind::Pad { pads, value } => movement::Pad::prepare(g, op, pads, *value),
        OpKind::Resize {
            mode,
            align_corners,
            half_pixel_centers,
        } => movement::Resize::prepare(g, op, *mode, *align_corners, *half_pixel_centers),
        OpKind::Softmax { beta } => softmax::Softmax::prepare(g, op, *beta),
        OpKind::Transpose { perm } => movement::Transpose::prepare(g, op, perm),
        OpKind::Quantize => convert::Quantize::prepare(g, op),
        OpKind::Dequantize => convert::Dequantize::prepare(g, op),
        OpKind::Activation(a) => convert::Act::prepare(g, op, *a),
        OpKind::Slice { begin, step, size } => slice::Slice::prepare(g, op, begin, step, size),
        OpKind::TransposeConv2d(a) => transpose_conv::TransposeConv::prepare(g, op, a),
        OpKind::BatchMatMul { adj_a, adj_b } => matmul::BatchMatMul::prepare(g, op, *adj_a, *adj_b),
        OpKind::Tile { .. }
        | OpKind::MirrorPad { .. }
        | OpKind::Reverse { .. }
        | OpKind::Gather { .. } => remap::Remap::prepare(g, op),
        OpKind::DepthToSpace { .. } | OpKind::SpaceToDepth { .. } => {
            remap::prepare_space_depth(g, op)
        }
        OpKind::SpaceToBatch { .. } | OpKind::BatchToSpace { .. } => {
            remap::BatchSpaceKernel::prepare(g, op)
        }
        OpKind::Abs => unary::Unary::prepare(g, op, unary::UnaryFn::Abs),
        OpKind::Neg => unary::Unary::prepare(g, op, unary::UnaryFn::Neg),
        OpKind::Maximum => pairwise::Pairwise::prepare(g, op, pairwise::PairFn::Maximum),
        OpKind::Minimum => pairwise::Pairwise::prepare(g, op, pairwise::PairFn::Minimum),
        OpKind::SquaredDifference => {
            pairwise::Pairwise::prepare(g, op, pairwise::PairFn::SquaredDifference)
        }
        OpKind::Prelu => pairwise::Pairwise::prepare(g, op, pairwise::PairFn::Prelu),
        OpKind::Reduce {
            op: kind,
            axes,
            keep_dims,
        } => reduce::Reduce::prepare(g, op, *kind, axes, *keep_dims),
        OpKind::ArgMinMax { axis, max } => reduce::ArgMinMax::prepare(g, op, *axis, *max),
        OpKind::FloatUnary(f) => float::FloatUnary::prepare(g, op, *f),
        OpKind::FloatBinary(f) => pairwise::Pairwise::prepare(g, op, pairwise::PairFn::Float(*f)),
        OpKind::FloatReduce {
            axes,
            keep_dims,
            mean,
        } => float::FloatReduce::prepare(g, op, axes, *keep_dims, *mean),
        OpKind::OrtSoftmax => softmax::OrtSoftmax::prepare(g, op),
        OpKind::LayerNorm { axis, epsilon } => float::LayerNorm::prepare(g, op, *axis, *epsilon),
        OpKind::ActFn(f) => act_fn::ActFnKernel::prepare(g, op, *f),
        OpKind::Lstm(a) => lstm::Lstm::prepare(g, op, a),
    }
}

/// Element types the interpreter accepts for graph inputs and outputs.
pub fn supported_io_dtype(dt: DType) -> bool {
    matches!(
        dt,
        DType::I8 | DType::U8 | DType::I16 | DType::I32 | DType::F32 | DType::I64
    )
}
