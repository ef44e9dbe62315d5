//! TFLite flatbuffer importer.
//!
//! The file is read with the bounds-checked readers planus generates from TFLite's `schema.fbs`
//! ([`generated`]); its whole structure is checked first ([`schema::verify`]), then the main
//! subgraph's operators are mapped one to one onto the IR ([`ops`]). TFLite's layouts are the
//! IR's (NHWC activations, OHWI convolution weights, `[1, KH, KW, C*M]` depthwise weights,
//! `[O, I]` fully-connected weights), so tensors are copied as they are. SAME/VALID padding
//! becomes explicit padding computed exactly as TFLite's `ComputePaddingWithOffset` does.

mod dilated;
mod dynamic;
#[cfg(test)]
pub(crate) use dilated::fold_dilated_convs;
mod generated;
mod ops;
pub(crate) mod schema;

use std::collections::{HashMap, HashSet};

use crate::error::{Error, Result};
use crate::ir::{DType, Graph, Quantization, Tensor, TensorId};
use generated::tflite::{
    BufferRef, BuiltinOperator, ModelRef, OperatorRef, SubGraphRef, TensorRef, TensorType,
};
use schema::{ctx, known_union, lenient_str, raw};

/// A vector of tables, each read (and checked) on access.
type Tables<'a, T> = planus::Vector<'a, planus::Result<T>>;

const FORMAT: &str = "TFLite";

/// Highest tensor rank we accept (TFLite's kernels handle at most 6).
const MAX_RANK: usize = 8;

/// Largest tensor we accept, in bytes (the IR's limit: a model claiming more is malformed).
const MAX_TENSOR_BYTES: usize = 1 << 31;

fn malformed(detail: impl Into<String>) -> Error {
    Error::Malformed {
        format: FORMAT,
        detail: detail.into(),
    }
}

/// Imports a TFLite model from its flatbuffer bytes.
///
/// Errors name what is at fault: a truncated or corrupted file ([`Error::Malformed`] with the
/// offset), an operator we cannot run ([`Error::UnsupportedOp`] naming its first output tensor,
/// its TFLite operator name and the supported list), an invalid tensor or node.
pub fn import(bytes: &[u8], name: &str) -> Result<Graph> {
    if bytes.is_empty() {
        return Err(malformed("the file is empty"));
    }
    if bytes.len() < 8 {
        return Err(malformed(format!(
            "the file is {} bytes long, too short for a flatbuffer",
            bytes.len()
        )));
    }
    if &bytes[4..8] != b"TFL3" {
        return Err(malformed(format!(
            "no TFL3 file identifier at bytes 4..8 (found {:02x?})",
            &bytes[4..8]
        )));
    }
    let model = schema::verify(bytes)?;
    Importer::new(bytes, model, name)?.run()
}

/// Every operator of the main subgraph as `(node name, TFLite operator name)`, in order,
/// without importing them (for listings of models that do not import).
pub fn operator_list(bytes: &[u8]) -> Result<Vec<(String, String)>> {
    if bytes.len() < 8 || &bytes[4..8] != b"TFL3" {
        return Err(malformed("not a TFLite flatbuffer"));
    }
    let model = schema::verify(bytes)?;
    let imp = Importer::new(bytes, model, "model")?;
    let mut out = Vec::new();
    for (i, t) in imp.operators()?.iter().enumerate() {
        let what = format!("operators[{i}]");
        let t = ctx(t, &what)?;
        let code_index = ctx(t.opcode_index(), &what)? as usize;
        let op = imp
            .codes
            .get(code_index)
            .map_or_else(|| format!("opcode #{code_index}"), OpCode::name);
        let outputs = ints(t.outputs(), &what)?;
        out.push((imp.node_name(i, &outputs), op));
    }
    Ok(out)
}

/// One operator code: the builtin operator (or CUSTOM) and the custom name.
struct OpCode {
    builtin: i32,
    custom: Option<String>,
}

impl OpCode {
    fn name(&self) -> String {
        match &self.custom {
            Some(c) if self.builtin == i32::from(BuiltinOperator::Custom) => format!("CUSTOM({c})"),
            _ => schema::builtin_name(self.builtin),
        }
    }
}

struct Importer<'a> {
    buf: &'a [u8],
    codes: Vec<OpCode>,
    tensors: Tables<'a, TensorRef<'a>>,
    buffers: Option<Tables<'a, BufferRef<'a>>>,
    subgraph: SubGraphRef<'a>,
    graph: Graph,
    /// TFLite tensor index -> IR tensor id, for tensors imported so far.
    map: HashMap<usize, TensorId>,
    names: HashSet<String>,
    /// Bytes of constant data copied so far (bounded: tensors may share one buffer).
    const_bytes: usize,
}

/// An optional vector of `int`s (tensor indices, shapes) as a `Vec`, empty when absent.
fn ints(v: planus::Result<Option<planus::Vector<'_, i32>>>, what: &str) -> Result<Vec<i32>> {
    Ok(ctx(v, what)?.map_or_else(Vec::new, |v| v.iter().collect()))
}

impl<'a> Importer<'a> {
    fn new(buf: &'a [u8], root: ModelRef<'a>, name: &str) -> Result<Self> {
        let mut codes = Vec::new();
        if let Some(v) = ctx(root.operator_codes(), "Model")? {
            for (i, t) in v.iter().enumerate() {
                let what = format!("operator_codes[{i}]");
                let t = ctx(t, &what)?;
                let deprecated = ctx(t.deprecated_builtin_code(), &what)?;
                // Kept as a number: a code newer than the schema is an unsupported operator.
                let builtin: i32 = ctx(raw(t.builtin_code()), &what)?;
                let custom = ctx(lenient_str(t.custom_code()), &what)?.map(str::to_string);
                // Old files only set the deprecated byte; new ones set both (TFLite takes the max).
                codes.push(OpCode {
                    builtin: builtin.max(i32::from(deprecated)),
                    custom,
                });
            }
        }
        let subgraph = ctx(root.subgraphs(), "Model")?
            .and_then(|v| v.first())
            .ok_or_else(|| malformed("the model has no subgraph"))?;
        let subgraph = ctx(subgraph, "subgraphs[0]")?;
        let tensors = ctx(subgraph.tensors(), "subgraphs[0]")?
            .ok_or_else(|| malformed("the main subgraph has no tensors"))?;
        let buffers = ctx(root.buffers(), "Model")?;
        Ok(Importer {
            buf,
            codes,
            tensors,
            buffers,
            subgraph,
            graph: Graph {
                name: name.to_string(),
                ..Default::default()
            },
            map: HashMap::new(),
            names: HashSet::new(),
            const_bytes: 0,
        })
    }

    /// The main subgraph's operators (none when the field is absent).
    fn operators(&self) -> Result<Tables<'a, OperatorRef<'a>>> {
        Ok(ctx(self.subgraph.operators(), "subgraphs[0]")?
            .unwrap_or_else(planus::Vector::new_empty))
    }

    fn run(mut self) -> Result<Graph> {
        // Every operator must be one we support before anything else is looked at: the
        // unsupported ones (all of them, counted) are the most useful thing to report.
        let mut raw_ops = Vec::new();
        let mut unsupported = crate::error::UnsupportedSet::default();
        for (i, t) in self.operators()?.iter().enumerate() {
            let what = format!("operators[{i}]");
            let t = ctx(t, &what)?;
            let code_index = ctx(t.opcode_index(), &what)? as usize;
            let code = self.codes.get(code_index).ok_or_else(|| {
                malformed(format!(
                    "{what}: opcode_index {code_index} but the model has {} operator codes",
                    self.codes.len()
                ))
            })?;
            let inputs = ints(t.inputs(), &what)?;
            let outputs = ints(t.outputs(), &what)?;
            let node = self.node_name(i, &outputs);
            // Every supported operator is a schema operator (`operators::tests` checks it).
            let builtin = BuiltinOperator::try_from(code.builtin).ok();
            let Some(builtin) = builtin.filter(|_| ops::is_supported(code.builtin)) else {
                unsupported.add(&code.name(), &node);
                continue;
            };
            let options = ctx(known_union(t.builtin_options()), &what)?;
            let intermediates = ints(t.intermediates(), &what)?;
            raw_ops.push(ops::RawOp {
                index: i,
                node,
                code: builtin,
                op_name: code.name(),
                inputs,
                outputs,
                options,
                intermediates,
            });
        }
        if let Some(e) = unsupported.error(ops::supported_list()) {
            return Err(e);
        }

        let inputs = self.index_list(self.subgraph.inputs(), "SubGraph.inputs")?;
        for &i in &inputs {
            let id = self.tensor(i, true)?;
            self.graph.inputs.push(id);
        }
        let outputs = self.index_list(self.subgraph.outputs(), "SubGraph.outputs")?;
        for raw in &raw_ops {
            dynamic::infer(&mut self, raw)?;
            for op in ops::map(&mut self, raw)? {
                self.fold_or_push(op, &outputs)?;
            }
        }
        for &i in &outputs {
            let id = self.tensor(i, false)?;
            self.graph.outputs.push(id);
        }
        dilated::fold_dilated_convs(&mut self.graph);
        self.prune();
        // TFLite lists operators in execution order; a corrupted file may not. Reorder (stably)
        // or report the cycle.
        self.graph.toposort()?;
        Ok(self.graph)
    }

    /// Appends `op`, or, when it computes integers from constants only (a shape subgraph such
    /// as SHAPE -> STRIDED_SLICE -> PACK feeding a RESHAPE), runs it with the reference
    /// interpreter and makes its output a constant. Graph outputs are never folded.
    fn fold_or_push(&mut self, op: crate::ir::Op, graph_outputs: &[usize]) -> Result<()> {
        let g = &self.graph;
        let foldable = !op.inputs.is_empty()
            && op.outputs.len() == 1
            && op.inputs.iter().all(|&i| g.tensors[i].is_const())
            && op.outputs.iter().all(|&o| {
                matches!(g.tensors[o].dtype, DType::I32 | DType::I64)
                    && !graph_outputs.iter().any(|&t| self.map.get(&t) == Some(&o))
            });
        if !foldable {
            self.graph.ops.push(op);
            return Ok(());
        }
        // A graph of just this operator: constant inputs, one output.
        let mut mini = Graph {
            name: op.name.clone(),
            ..Default::default()
        };
        let mut local = op.clone();
        for id in local.inputs.iter_mut().chain(local.outputs.iter_mut()) {
            let t = self.graph.tensors[*id].clone();
            *id = mini.add_tensor(t);
        }
        mini.outputs = local.outputs.clone();
        mini.ops.push(local);
        let values = crate::reference::run(&mini, &[])?;
        let out = op.outputs[0];
        let bytes = values
            .first()
            .map(|v| v.data.to_le_bytes())
            .ok_or_else(|| Error::InvalidNode {
                node: op.name.clone(),
                op: op.kind.name().into(),
                detail: "folding produced no value".into(),
            })?;
        self.graph.tensors[out].data = Some(bytes);
        Ok(())
    }

    /// A tensor name not used yet, based on `base` (for tensors the importer adds).
    fn fresh_name(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut k = 1;
        while !self.names.insert(name.clone()) {
            name = format!("{base}#{k}");
            k += 1;
        }
        name
    }

    /// Drops tensors that were read only as attributes (axes, paddings, sizes, shapes).
    fn prune(&mut self) {
        let g = &mut self.graph;
        let mut used = vec![false; g.tensors.len()];
        for &id in g.inputs.iter().chain(&g.outputs) {
            used[id.index()] = true;
        }
        for op in &g.ops {
            for &id in op.inputs.iter().chain(&op.outputs) {
                used[id.index()] = true;
            }
        }
        let mut remap = vec![TensorId(usize::MAX); g.tensors.len()];
        let mut kept = Vec::with_capacity(g.tensors.len());
        for (i, t) in std::mem::take(&mut g.tensors).into_iter().enumerate() {
            if used[i] {
                remap[i] = TensorId(kept.len());
                kept.push(t);
            }
        }
        g.tensors = kept;
        for id in g.inputs.iter_mut().chain(g.outputs.iter_mut()) {
            *id = remap[id.index()];
        }
        for op in &mut g.ops {
            for id in op.inputs.iter_mut().chain(op.outputs.iter_mut()) {
                *id = remap[id.index()];
            }
        }
        g.variables.retain(|&id| used[id.index()]);
        for id in &mut g.variables {
            *id = remap[id.index()];
        }
    }

    /// A subgraph's list of tensor indices (inputs or outputs).
    fn index_list(
        &self,
        field: planus::Result<Option<planus::Vector<'_, i32>>>,
        what: &str,
    ) -> Result<Vec<usize>> {
        ints(field, what)?
            .iter()
            .map(|&i| {
                usize::try_from(i)
                    .ok()
                    .filter(|&i| i < self.tensors.len())
                    .ok_or_else(|| {
                        malformed(format!(
                            "{what} refers to tensor {i}, but the subgraph has {} tensors",
                            self.tensors.len()
                        ))
                    })
            })
            .collect()
    }

    /// TFLite operators have no names: use the first output tensor's.
    fn node_name(&self, op_index: usize, outputs: &[i32]) -> String {
        outputs
            .first()
            .and_then(|&o| usize::try_from(o).ok())
            .and_then(|o| self.tensor_name(o).ok())
            .unwrap_or_else(|| format!("operator #{op_index}"))
    }

    fn tensor_table(&self, index: usize) -> Result<TensorRef<'a>> {
        let what = format!("tensors[{index}]");
        let t = self.tensors.get(index).ok_or_else(|| {
            malformed(format!(
                "{what}: index {index} out of range ({} elements)",
                self.tensors.len()
            ))
        })?;
        ctx(t, &what)
    }

    fn tensor_name(&self, index: usize) -> Result<String> {
        let t = self.tensor_table(index)?;
        Ok(
            ctx(lenient_str(t.name()), &format!("tensors[{index}].name"))?
                .filter(|s| !s.is_empty())
                .map_or_else(|| format!("tensor_{index}"), str::to_string),
        )
    }

    /// Imports TFLite tensor `index` (once) and returns its IR id.
    ///
    /// Constant data is copied unless `graph_input` is set (graph inputs carry no data).
    fn tensor(&mut self, index: usize, graph_input: bool) -> Result<TensorId> {
        if let Some(&id) = self.map.get(&index) {
            return Ok(id);
        }
        if index >= self.tensors.len() {
            return Err(malformed(format!(
                "tensor index {index} is out of range ({} tensors)",
                self.tensors.len()
            )));
        }
        let what = format!("tensors[{index}]");
        let t = self.tensor_table(index)?;
        let mut name = self.tensor_name(index)?;
        if !self.names.insert(name.clone()) {
            name = format!("{name}#{index}");
            self.names.insert(name.clone());
        }
        let bad = |detail: String| Error::InvalidTensor {
            tensor: name.clone(),
            detail,
        };
        let shape_raw = ints(t.shape(), &what)?;
        if shape_raw.len() > MAX_RANK {
            return Err(bad(format!(
                "rank {} is more than the {MAX_RANK} we support",
                shape_raw.len()
            )));
        }
        let mut shape = Vec::with_capacity(shape_raw.len());
        for &d in &shape_raw {
            let d = usize::try_from(d).map_err(|_| {
                bad(format!(
                    "shape {shape_raw:?} has a negative (dynamic) dimension"
                ))
            })?;
            shape.push(d);
        }
        let ty: i8 = ctx(raw(t.type_()), &what)?;
        let dtype = match TensorType::try_from(ty) {
            Ok(TensorType::Float32) => DType::F32,
            Ok(TensorType::Int32) => DType::I32,
            Ok(TensorType::Uint8) => DType::U8,
            Ok(TensorType::Int64) => DType::I64,
            Ok(TensorType::Int16) => DType::I16,
            Ok(TensorType::Int8) => DType::I8,
            _ => {
                return Err(bad(format!(
                    "element type {} is not supported (supported: FLOAT32, INT8, UINT8, INT16, INT32, INT64)",
                    schema::tensor_type_name(ty)
                )));
            }
        };
        let bytes = shape
            .iter()
            .try_fold(dtype.size(), |a, &d| a.checked_mul(d))
            .filter(|&b| b <= MAX_TENSOR_BYTES)
            .ok_or_else(|| {
                bad(format!(
                    "shape {shape:?} of {dtype} is larger than {MAX_TENSOR_BYTES} bytes"
                ))
            })?;
        // Variable tensors (LSTM states) persist between runs and start at zero; a buffer
        // holding an initial value is not read (TFLite resets them to zero too).
        let variable = ctx(t.is_variable(), &what)?;
        if variable && graph_input {
            return Err(bad("a variable tensor cannot be a graph input".into()));
        }
        if ctx(t.sparsity(), &what)?.is_some() {
            return Err(bad("sparse tensors are not supported".into()));
        }
        let quant = self.quantization(&t, &what, &shape, &bad)?;
        let buffer_index = ctx(t.buffer(), &what)? as usize;
        let data = if graph_input || variable {
            None
        } else {
            self.buffer_data(buffer_index, &name)?
        };
        let data = match data {
            Some(d) => {
                if d.len() != bytes {
                    return Err(bad(format!(
                        "constant has {} bytes but shape {shape:?} of {dtype} needs {bytes}",
                        d.len()
                    )));
                }
                self.const_bytes = self.const_bytes.saturating_add(d.len());
                let budget = self.buf.len().saturating_mul(4).max(1 << 20);
                if self.const_bytes > budget {
                    return Err(bad(format!(
                        "constant data of the tensors read so far ({} bytes) exceeds 4x the file size: \
                         too many tensors share buffers",
                        self.const_bytes
                    )));
                }
                Some(d.to_vec())
            }
            None => None,
        };
        let id = self.graph.add_tensor(Tensor {
            name,
            shape,
            dtype,
            quant,
            data,
        });
        self.map.insert(index, id);
        if variable {
            self.graph.variables.push(id);
        }
        Ok(id)
    }

    fn quantization(
        &self,
        t: &TensorRef<'a>,
        what: &str,
        shape: &[usize],
        bad: &dyn Fn(String) -> Error,
    ) -> Result<Option<Quantization>> {
        let Some(q) = ctx(t.quantization(), what)? else {
            return Ok(None);
        };
        // Any details table, of a kind this schema knows or not, replaces scale and zero point.
        let details = match q.details() {
            Err(e)
                if matches!(
                    e.error_kind,
                    planus::errors::ErrorKind::UnknownUnionTag { .. }
                ) =>
            {
                true
            }
            r => ctx(r, what)?.is_some(),
        };
        if details {
            return Err(bad("custom quantization details are not supported".into()));
        }
        let scales = ctx(q.scale(), what)?;
        let Some(scales) = scales.filter(|s| !s.is_empty()) else {
            return Ok(None);
        };
        let scale: Vec<f32> = scales.iter().collect();
        if let Some(s) = scale.iter().find(|s| !s.is_finite() || **s < 0.0) {
            return Err(bad(format!(
                "quantization scale {s} is not a finite positive number"
            )));
        }
        let zps = ctx(q.zero_point(), what)?;
        let zero_point: Vec<i32> = match zps.filter(|z| !z.is_empty()) {
            None => vec![0; scale.len()],
            Some(z) => {
                if z.len() != scale.len() {
                    return Err(bad(format!(
                        "{} zero points for {} scales",
                        z.len(),
                        scale.len()
                    )));
                }
                z.iter()
                    .map(|v| {
                        i32::try_from(v)
                            .map_err(|_| bad(format!("zero point {v} does not fit in 32 bits")))
                    })
                    .collect::<Result<_>>()?
            }
        };
        let axis = if scale.len() > 1 {
            let dim = ctx(q.quantized_dimension(), what)?;
            let ok = usize::try_from(dim)
                .ok()
                .filter(|&d| d < shape.len() && shape[d] == scale.len());
            match ok {
                Some(d) => Some(d),
                None => {
                    return Err(bad(format!(
                        "{} per-channel scales along dimension {dim} do not match shape {shape:?}",
                        scale.len()
                    )));
                }
            }
        } else {
            None
        };
        Ok(Some(Quantization {
            scale,
            zero_point,
            axis,
        }))
    }

    /// The bytes of buffer `index` (`None` for an empty buffer: an activation).
    fn buffer_data(&self, index: usize, tensor_name: &str) -> Result<Option<&'a [u8]>> {
        if index == 0 {
            return Ok(None); // Buffer 0 is the empty sentinel.
        }
        let buffers = self.buffers.ok_or_else(|| {
            malformed(format!(
                "tensor '{tensor_name}' refers to buffer {index} but the model has none"
            ))
        })?;
        if index >= buffers.len() {
            return Err(malformed(format!(
                "tensor '{tensor_name}' refers to buffer {index} but the model has {}",
                buffers.len()
            )));
        }
        let what = format!("buffers[{index}]");
        let b = ctx(
            buffers
                .get(index)
                .ok_or_else(|| malformed(format!("{what}: out of range")))?,
            &what,
        )?;
        if let Some(d) = ctx(b.data(), &what)?
            && !d.is_empty()
        {
            return Ok(Some(d));
        }
        // Large models keep their data after the flatbuffer: offset (from the file start) and size.
        let offset = ctx(b.offset(), &what)?;
        let size = ctx(b.size(), &what)?;
        if offset > 1 && size > 0 {
            let range = usize::try_from(offset)
                .ok()
                .zip(usize::try_from(size).ok())
                .and_then(|(o, s)| Some(o..o.checked_add(s)?))
                .filter(|r| r.end <= self.buf.len());
            return match range {
                Some(r) => Ok(Some(&self.buf[r])),
                None => Err(malformed(format!(
                    "{what}: external data at offset {offset} ({size} bytes) is outside the file ({} bytes)",
                    self.buf.len()
                ))),
            };
        }
        Ok(None)
    }
}
