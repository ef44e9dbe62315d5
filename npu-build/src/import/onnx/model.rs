//! The decoded ONNX graph: nodes in topological order, declared inputs/outputs, initializers,
//! and typed access to node attributes.

use std::collections::{HashMap, HashSet};

use super::constant::{self, Const};
use super::proto::{self, attribute_type as at};
use crate::error::{Error, Result};

/// Oldest default-domain opset we read.
pub(crate) const MIN_OPSET: i64 = 10;

/// A graph input or output as declared.
#[derive(Clone, Debug)]
pub(crate) struct ValueDecl {
    pub name: String,
    /// A [`proto::data_type`] value.
    pub elem_type: i32,
    /// `None` if the model gives no shape; per dimension `None` = symbolic or unknown.
    pub dims: Option<Vec<Option<usize>>>,
}

/// One node, with a name for messages (its own, else its first output's).
#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub name: String,
    pub op_type: String,
    pub domain: String,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub attrs: Vec<proto::AttributeProto>,
}

/// The whole model after decoding.
pub(crate) struct Model {
    /// Version of the default (`ai.onnx`) operator set.
    pub opset: i64,
    pub nodes: Vec<Node>,
    pub inputs: Vec<ValueDecl>,
    pub outputs: Vec<ValueDecl>,
    pub initializers: Vec<(String, Const)>,
}

pub(crate) fn malformed(detail: impl Into<String>) -> Error {
    Error::Malformed {
        format: "ONNX",
        detail: detail.into(),
    }
}

impl Model {
    /// Decodes and checks a model: opset, unique value producers, every read value defined,
    /// nodes sorted topologically (a cycle is reported with a node on it).
    pub fn from_proto(m: proto::ModelProto) -> Result<Model> {
        let graph = m.graph.ok_or_else(|| {
            malformed("the file holds no graph (an empty file, or not an ONNX model)")
        })?;
        let mut opset = None;
        for o in &m.opset_import {
            if o.domain.is_empty() || o.domain == "ai.onnx" {
                opset = Some(opset.map_or(o.version, |v: i64| v.max(o.version)));
            }
        }
        let opset = opset.ok_or_else(|| {
            malformed("the model imports no version of the default operator set (opset_import)")
        })?;
        if opset < MIN_OPSET {
            return Err(malformed(format!(
                "opset {opset} is older than {MIN_OPSET}, the oldest supported; convert the model to a newer opset"
            )));
        }
        if !graph.sparse_initializer.is_empty() {
            return Err(malformed("sparse initializers are not supported"));
        }
        let mut initializers = Vec::with_capacity(graph.initializer.len());
        let mut defined: HashSet<String> = HashSet::new();
        for t in &graph.initializer {
            if t.name.is_empty() {
                return Err(malformed("an initializer has no name"));
            }
            if !defined.insert(t.name.clone()) {
                return Err(malformed(format!(
                    "initializer '{}' is defined twice",
                    t.name
                )));
            }
            initializers.push((t.name.clone(), constant::decode(t, &t.name)?));
        }
        let initializer_names = defined.clone();
        let mut inputs = Vec::new();
        for vi in &graph.input {
            // Older exporters list initializers among the inputs too; those are constants.
            if initializer_names.contains(&vi.name) {
                continue;
            }
            let decl = value_decl(vi)?;
            if !defined.insert(decl.name.clone()) {
                return Err(malformed(format!(
                    "graph input '{}' is declared twice",
                    decl.name
                )));
            }
            inputs.push(decl);
        }
        let outputs = graph
            .output
            .iter()
            .map(value_decl)
            .collect::<Result<Vec<_>>>()?;
        if outputs.is_empty() {
            return Err(malformed("the graph has no outputs"));
        }
        let nodes: Vec<Node> = graph
            .node
            .into_iter()
            .enumerate()
            .map(|(k, n)| {
                let name = if !n.name.is_empty() {
                    n.name
                } else if let Some(o) = n.output.iter().find(|o| !o.is_empty()) {
                    o.clone()
                } else {
                    format!("{}#{k}", n.op_type)
                };
                let (op_type, attrs) = tf2onnx_custom(n.op_type, n.attribute);
                Node {
                    name,
                    op_type,
                    domain: n.domain,
                    inputs: n.input,
                    outputs: n.output,
                    attrs,
                }
            })
            .collect();
        let nodes = toposort(nodes, &defined)?;
        let produced: HashSet<&str> = nodes
            .iter()
            .flat_map(|n| n.outputs.iter().map(String::as_str))
            .collect();
        for o in &outputs {
            if !defined.contains(&o.name) && !produced.contains(o.name.as_str()) {
                return Err(malformed(format!(
                    "graph output '{}' is not produced by any node",
                    o.name
                )));
            }
        }
        Ok(Model {
            opset,
            nodes,
            inputs,
            outputs,
            initializers,
        })
    }
}

fn value_decl(vi: &proto::ValueInfoProto) -> Result<ValueDecl> {
    if vi.name.is_empty() {
        return Err(malformed("a graph input or output has no name"));
    }
    let bad = |detail: &str| Error::InvalidTensor {
        tensor: vi.name.clone(),
        detail: detail.to_string(),
    };
    let ty = vi.r#type.as_ref().ok_or_else(|| bad("has no type"))?;
    let tt = ty
        .tensor_type
        .as_ref()
        .ok_or_else(|| bad("is not a tensor (sequences, maps and optionals are not supported)"))?;
    let dims = match &tt.shape {
        None => None,
        Some(s) => Some(
            s.dim
                .iter()
                .map(|d| match d.dim_value {
                    Some(v) if d.dim_param.is_none() => usize::try_from(v)
                        .map(Some)
                        .map_err(|_| bad(&format!("has negative dimension {v}"))),
                    _ => Ok(None),
                })
                .collect::<Result<Vec<_>>>()?,
        ),
    };
    Ok(ValueDecl {
        name: vi.name.clone(),
        elem_type: tt.elem_type,
        dims,
    })
}

/// Kahn's algorithm over value names, stable with respect to the file order.
/// Operators tf2onnx writes under TFLite's names when it has no ONNX form for them at the
/// opset asked, renamed to the standard operator that means the same: `TFL_GELU` (TFLite's
/// GELU, attribute `approximate` 0/1) is ONNX `Gelu` (opset 20; attribute `approximate`
/// "none"/"tanh").
fn tf2onnx_custom(
    op_type: String,
    mut attrs: Vec<proto::AttributeProto>,
) -> (String, Vec<proto::AttributeProto>) {
    if op_type != "TFL_GELU" {
        return (op_type, attrs);
    }
    for a in &mut attrs {
        if a.name == "approximate" && a.r#type == proto::attribute_type::INT {
            let tanh = a.i.unwrap_or(0) != 0;
            a.r#type = proto::attribute_type::STRING;
            a.i = None;
            a.s = Some(if tanh {
                b"tanh".to_vec()
            } else {
                b"none".to_vec()
            });
        }
    }
    ("Gelu".into(), attrs)
}

fn toposort(nodes: Vec<Node>, defined: &HashSet<String>) -> Result<Vec<Node>> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (k, n) in nodes.iter().enumerate() {
        for o in n.outputs.iter().filter(|o| !o.is_empty()) {
            if defined.contains(o) {
                return Err(Error::InvalidNode {
                    node: n.name.clone(),
                    op: n.op_type.clone(),
                    detail: format!("writes '{o}', which is a graph input or initializer"),
                });
            }
            if let Some(&other) = producer.get(o.as_str()) {
                return Err(Error::InvalidNode {
                    node: n.name.clone(),
                    op: n.op_type.clone(),
                    detail: format!(
                        "writes '{o}', which node '{}' also writes",
                        nodes[other].name
                    ),
                });
            }
            producer.insert(o, k);
        }
    }
    // Unmet dependencies per node and the nodes waiting on each node.
    let mut missing = vec![0usize; nodes.len()];
    let mut waiting: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (k, n) in nodes.iter().enumerate() {
        let mut deps: Vec<usize> = Vec::new();
        for i in n.inputs.iter().filter(|i| !i.is_empty()) {
            match producer.get(i.as_str()) {
                Some(&p) => deps.push(p),
                None if defined.contains(i) => {}
                None => {
                    return Err(Error::InvalidNode {
                        node: n.name.clone(),
                        op: n.op_type.clone(),
                        detail: format!(
                            "reads '{i}', which is neither a graph input, an initializer nor a node output"
                        ),
                    });
                }
            }
        }
        deps.sort_unstable();
        deps.dedup();
        missing[k] = deps.len();
        for p in deps {
            waiting[p].push(k);
        }
    }
    let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<usize>> = (0..nodes.len())
        .filter(|&k| missing[k] == 0)
        .map(std::cmp::Reverse)
        .collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(std::cmp::Reverse(k)) = ready.pop() {
        order.push(k);
        for &w in &waiting[k] {
            missing[w] -= 1;
            if missing[w] == 0 {
                ready.push(std::cmp::Reverse(w));
            }
        }
    }
    if order.len() < nodes.len() {
        // Every node left waits on another node left: walk back until one repeats.
        let mut k = (0..nodes.len()).find(|&k| missing[k] > 0).unwrap_or(0);
        let mut seen = HashSet::new();
        while seen.insert(k) {
            let next = nodes[k]
                .inputs
                .iter()
                .filter_map(|i| producer.get(i.as_str()).copied())
                .find(|&p| missing[p] > 0);
            match next {
                Some(p) => k = p,
                None => break,
            }
        }
        return Err(Error::Cycle {
            node: nodes[k].name.clone(),
        });
    }
    let mut slots: Vec<Option<Node>> = nodes.into_iter().map(Some).collect();
    Ok(order.into_iter().filter_map(|k| slots[k].take()).collect())
}

impl Node {
    /// An [`Error::InvalidNode`] about this node.
    pub fn err(&self, detail: impl Into<String>) -> Error {
        Error::InvalidNode {
            node: self.name.clone(),
            op: self.op_type.clone(),
            detail: detail.into(),
        }
    }

    /// Name of input `i`, `None` if absent or empty (an omitted optional input).
    pub fn input(&self, i: usize) -> Option<&str> {
        self.inputs
            .get(i)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    /// Name of input `i`, which must be present.
    pub fn req_input(&self, i: usize) -> Result<&str> {
        self.input(i)
            .ok_or_else(|| self.err(format!("input {i} is missing")))
    }

    /// Name of the (single) output.
    pub fn output(&self) -> Result<&str> {
        match self.outputs.first().map(String::as_str) {
            Some(o) if !o.is_empty() => Ok(o),
            _ => Err(self.err("has no output")),
        }
    }

    /// Fails if the node uses more than `n` inputs.
    pub fn max_inputs(&self, n: usize) -> Result<()> {
        match self.inputs.iter().skip(n).position(|i| !i.is_empty()) {
            Some(k) => Err(self.err(format!("has an unexpected input {}", k + n))),
            None => Ok(()),
        }
    }

    /// Fails if the node produces more than one (used) output.
    pub fn single_output(&self) -> Result<()> {
        if self.outputs.iter().skip(1).any(|o| !o.is_empty()) {
            return Err(self.err("only the first output is supported"));
        }
        Ok(())
    }

    fn attr(&self, name: &str, want: i32) -> Result<Option<&proto::AttributeProto>> {
        let Some(a) = self.attrs.iter().find(|a| a.name == name) else {
            return Ok(None);
        };
        if !a.ref_attr_name.is_empty() {
            return Err(self.err(format!("attribute '{name}' refers to a function attribute")));
        }
        if a.r#type != at::UNDEFINED && a.r#type != want {
            return Err(self.err(format!(
                "attribute '{name}' has type {} but {want} was expected",
                a.r#type
            )));
        }
        Ok(Some(a))
    }

    /// An `INT` attribute.
    pub fn attr_i(&self, name: &str) -> Result<Option<i64>> {
        match self.attr(name, at::INT)? {
            None => Ok(None),
            Some(a) => {
                a.i.map(Some)
                    .ok_or_else(|| self.err(format!("attribute '{name}' has no integer value")))
            }
        }
    }

    /// An `INT` attribute with a default.
    pub fn attr_i_or(&self, name: &str, default: i64) -> Result<i64> {
        Ok(self.attr_i(name)?.unwrap_or(default))
    }

    /// A `FLOAT` attribute.
    pub fn attr_f(&self, name: &str) -> Result<Option<f32>> {
        match self.attr(name, at::FLOAT)? {
            None => Ok(None),
            Some(a) => {
                a.f.map(Some)
                    .ok_or_else(|| self.err(format!("attribute '{name}' has no float value")))
            }
        }
    }

    /// An `INTS` attribute.
    pub fn attr_ints(&self, name: &str) -> Result<Option<Vec<i64>>> {
        Ok(self.attr(name, at::INTS)?.map(|a| a.ints.clone()))
    }

    /// A `FLOATS` attribute.
    pub fn attr_floats(&self, name: &str) -> Result<Option<Vec<f32>>> {
        Ok(self.attr(name, at::FLOATS)?.map(|a| a.floats.clone()))
    }

    /// A `STRING` attribute (UTF-8).
    pub fn attr_s(&self, name: &str) -> Result<Option<String>> {
        match self.attr(name, at::STRING)? {
            None => Ok(None),
            Some(a) => {
                let s = a
                    .s
                    .as_ref()
                    .ok_or_else(|| self.err(format!("attribute '{name}' has no string value")))?;
                String::from_utf8(s.clone())
                    .map(Some)
                    .map_err(|_| self.err(format!("attribute '{name}' is not UTF-8")))
            }
        }
    }

    /// A `TENSOR` attribute.
    pub fn attr_t(&self, name: &str) -> Result<Option<&proto::TensorProto>> {
        match self.attr(name, at::TENSOR)? {
            None => Ok(None),
            Some(a) => {
                a.t.as_ref()
                    .map(Some)
                    .ok_or_else(|| self.err(format!("attribute '{name}' has no tensor value")))
            }
        }
    }
}
