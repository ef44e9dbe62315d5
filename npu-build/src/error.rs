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
        what: NameKind,
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
    IoNames { which: IoSide, detail: String },
    /// A failure of the virtual NPU while running a command stream.
    #[error("virtual NPU: {0}")]
    Sim(String),
    /// `cpu_fallback = false` (macro, build.rs, `--no-cpu-fallback`) with operators the NPU
    /// cannot run: each with its reason.
    #[error(
        "CPU fallback is disabled, but {} operator(s) cannot run on the NPU ({target}):\n{}",
        ops.len(),
        ops.join("\n")
    )]
    CpuFallbackDisabled { target: String, ops: Vec<String> },
    /// Input or output data that does not fit its tensor (element count, type, `.npy` file).
    #[error("{0}")]
    Data(String),
    /// An arena handed to a compiled model that does not fit it (too small, or an operand
    /// outside it).
    #[error("{0}")]
    Arena(String),
    /// A command stream that cannot be walked: the byte offset and what is wrong there.
    #[error("command stream offset {offset:#x}: {detail}")]
    CommandStream { offset: usize, detail: String },
    /// A compiled artifact (a Vela output directory's `meta.json`, a COP1 payload, a command
    /// stream file) that cannot be read.
    #[error("{0}")]
    Artifact(String),
    /// The build environment (`OUT_DIR`, `cargo metadata`) is not what a build script has.
    #[error("{0}")]
    BuildEnv(String),
    /// `[package.metadata.npu]` holds a value of the wrong kind.
    #[error("{}: [package.metadata.npu] {detail}", manifest.display())]
    Metadata { manifest: PathBuf, detail: String },
    /// A command-line request that cannot be carried out as given.
    #[error("{0}")]
    Usage(String),
    /// A broken invariant of the compiler itself (a bug, not a problem of the model).
    #[error("internal compiler error (please report it): {0}")]
    Internal(String),
}

/// What an [`Error::UnknownName`] names: the macro underlines the argument it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameKind {
    /// `target = "ethos-u55-128"`.
    Accelerator,
    /// `system_config = ...`.
    SystemConfig,
    /// `memory_mode = ...`.
    MemoryMode,
    /// A memory mode that exists but not for the chosen system configuration.
    MemoryModeForSystem,
    /// `optimise = "performance" | "size"`.
    Optimise,
    /// The generated module's name.
    ModuleName,
    /// `sram_limit` in `[package.metadata.npu]`.
    SramLimitMetadata,
}

impl std::fmt::Display for NameKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NameKind::Accelerator => "accelerator configuration",
            NameKind::SystemConfig => "system configuration",
            NameKind::MemoryMode => "memory mode",
            NameKind::MemoryModeForSystem => "memory mode for this system configuration",
            NameKind::Optimise => "optimise goal",
            NameKind::ModuleName => "module name",
            NameKind::SramLimitMetadata => "[package.metadata.npu] sram_limit",
        })
    }
}

/// Which list an [`Error::IoNames`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoSide {
    /// `inputs = [...]`.
    Inputs,
    /// `outputs = [...]`.
    Outputs,
    /// Both together (a name used in each).
    Both,
}

impl IoSide {
    /// The argument's name, `inputs` or `outputs` (`inputs/outputs` for both).
    pub fn as_str(self) -> &'static str {
        match self {
            IoSide::Inputs => "inputs",
            IoSide::Outputs => "outputs",
            IoSide::Both => "inputs/outputs",
        }
    }
}

impl std::fmt::Display for IoSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
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
