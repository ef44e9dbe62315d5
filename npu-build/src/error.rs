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
