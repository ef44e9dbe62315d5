//! The compiler's error type: every variant names what is at fault (file, node, tensor, limit).

use std::path::PathBuf;

/// Result alias used across `npu-build`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong between a model file and a compiled artifact.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is neither ONNX nor TFLite.
    #[error("{}: not a model: {detail}", path.display())]
    NotAModel { path: PathBuf, detail: String },
    /// The model file is truncated, corrupted or inconsistent.
    #[error("malformed {format} model: {detail}")]
    Malformed {
        format: &'static str,
        detail: String,
    },
    /// An operator nothing can run.
    #[error("node '{node}': operator {op} is not supported (supported: {supported})")]
    UnsupportedOp {
        node: String,
        op: String,
        supported: String,
    },
    /// Several nodes use operators nothing can run: every such operator, with the number of
    /// nodes using it and the first one (the importer reads the whole model before failing).
    #[error(
        "the model uses operators that are not supported: {} (supported: {supported})",
        list_unsupported(ops)
    )]
    UnsupportedOps {
        ops: Vec<UnsupportedUse>,
        supported: String,
    },
    /// A supported operator used in a way that is not (attribute, dtype, shape).
    #[error("node '{node}' ({op}): {detail}")]
    InvalidNode {
        node: String,
        op: String,
        detail: String,
    },
    /// A tensor is invalid (shape, dtype, quantization, size).
    #[error("tensor '{tensor}': {detail}")]
    InvalidTensor { tensor: String, detail: String },
    /// The graph is not a DAG.
    #[error("the graph has a cycle through node '{node}'")]
    Cycle { node: String },
    /// Wrong inputs given to an interpreter or simulator run.
    #[error("input {index} ('{tensor}'): {detail}")]
    BadInput {
        index: usize,
        tensor: String,
        detail: String,
    },
    /// An operator breaks a hardware limit of the target.
    #[error("node '{node}' ({op}) exceeds a hardware limit of {target}: {limit}")]
    HardwareLimit {
        node: String,
        op: String,
        target: String,
        limit: String,
    },
    /// Unknown target / system config / memory mode / option value.
    #[error("{what} '{given}' is not known; valid: {valid}")]
    UnknownName {
        what: &'static str,
        given: String,
        valid: String,
    },
    /// The model does not fit the memory budget.
    #[error("{what} needs {needed} bytes but the limit is {limit} bytes")]
    Budget {
        what: String,
        needed: u64,
        limit: u64,
    },
    /// `inputs = [...]` / `outputs = [...]`: names that do not fit the model's tensors.
    #[error("`{which}` {detail}")]
    IoNames { which: &'static str, detail: String },
    /// A failure of the virtual NPU while running a command stream.
    #[error("virtual NPU: {0}")]
    Sim(String),
    /// Anything else, with context.
    #[error("{0}")]
    Other(String),
}

impl Error {
    /// Shorthand for [`Error::Io`].
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// One unsupported operator of a model ([`Error::UnsupportedOps`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsupportedUse {
    pub op: String,
    /// Nodes using it.
    pub count: usize,
    /// The first of them.
    pub first_node: String,
}

fn list_unsupported(ops: &[UnsupportedUse]) -> String {
    ops.iter()
        .map(|u| {
            let nodes = if u.count == 1 { "node" } else { "nodes" };
            format!("{} ({} {nodes}, first '{}')", u.op, u.count, u.first_node)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Collects unsupported operators in model order; [`UnsupportedSet::error`] gives the one
/// error for all of them (the single-node case keeps [`Error::UnsupportedOp`]).
#[derive(Default)]
pub struct UnsupportedSet(Vec<UnsupportedUse>);

impl UnsupportedSet {
    pub fn add(&mut self, op: &str, node: &str) {
        match self.0.iter_mut().find(|u| u.op == op) {
            Some(u) => u.count += 1,
            None => self.0.push(UnsupportedUse {
                op: op.to_string(),
                count: 1,
                first_node: node.to_string(),
            }),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `None` when nothing was added.
    pub fn error(self, supported: String) -> Option<Error> {
        match self.0.as_slice() {
            [] => None,
            [one] if one.count == 1 => Some(Error::UnsupportedOp {
                node: one.first_node.clone(),
                op: one.op.clone(),
                supported,
            }),
            _ => Some(Error::UnsupportedOps {
                ops: self.0,
                supported,
            }),
        }
    }
}
