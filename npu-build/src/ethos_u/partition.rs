//! Graph partitioning: which IR operators run on the NPU and which on the CPU, and the CPU
//! operations ([`npu_rt::cpu::Op`]) of the latter with every parameter decided.
//!
//! The rule: an operator goes to the CPU when the NPU lowering refuses it for a hardware reason
//! ([`Error::HardwareLimit`] or [`Error::UnsupportedOp`]), when it converts from or to float
//! (the NPU has no float), or when the compile options force it there. Everything else stays on
//! the NPU, so NPU segments are as long as the graph allows. Each CPU operator keeps its reason
//! (the lowering's error text) for reports and for the `cpu_fallback = false` error.
//!
//! The CPU operations themselves are built in [`cpu_ops`](super::cpu_ops).

use npu_rt::cpu::Op as CpuOp;

pub use super::cpu_ops::{NoOperands, Operands, cpu_kernels};
use crate::error::Error;
use crate::ir::{DType, Graph, Op};

/// Where one IR operator runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpAssignment {
    /// Node name.
    pub node: String,
    /// Operator name (`Conv2D`, `Softmax`, ...).
    pub op: String,
    /// `None`: the NPU. `Some(reason)`: the CPU, and why.
    pub cpu_reason: Option<String>,
}

/// A CPU step of a compiled model.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuStep {
    /// Node name of the IR operator.
    pub node: String,
    /// Operator name of the IR operator.
    pub op: String,
    /// Why it runs on the CPU.
    pub reason: String,
    /// The operation with its operands and parameters.
    pub kernel: CpuOp,
}

impl CpuStep {
    /// The encoded operation, as the generated code passes it to [`npu_rt::cpu::run`].
    pub fn words(&self) -> Vec<u32> {
        let (w, n) = self.kernel.encode();
        w[..n].to_vec()
    }
}

/// Reason of operators that convert between float and integers.
pub const FLOAT_REASON: &str = "float conversion: the NPU has no floating point";
/// Reason of operators the compile options put on the CPU.
pub const FORCED_REASON: &str = "forced to the CPU by the compile options";

/// Whether `op` converts from or to float (always a CPU operator).
pub fn is_float_boundary(g: &Graph, op: &Op) -> bool {
    op.inputs.iter().chain(&op.outputs).any(|&t| {
        g.tensors
            .get(t.index())
            .is_some_and(|x| x.dtype == DType::F32)
    })
}

/// Whether `pattern` (a node name or an operator name such as `Softmax`) selects `op`.
pub fn matches(op: &Op, pattern: &str) -> bool {
    op.name == pattern || op.kind.name().eq_ignore_ascii_case(pattern)
}

/// Whether the lowering's error `e` means "the NPU cannot", so the CPU may take the operator.
pub fn is_npu_refusal(e: &Error) -> bool {
    matches!(
        e,
        Error::HardwareLimit { .. } | Error::UnsupportedOp { .. } | Error::UnsupportedOps { .. }
    )
}

/// The error of `cpu_fallback = false` for a graph with CPU operators: each one with its reason.
pub fn fallback_disabled_error(target: &str, cpu: &[OpAssignment]) -> Error {
    let list: Vec<String> = cpu
        .iter()
        .filter_map(|a| {
            a.cpu_reason
                .as_ref()
                .map(|r| format!("  node '{}' ({}): {r}", a.node, a.op))
        })
        .collect();
    Error::CpuFallbackDisabled {
        target: target.to_string(),
        ops: list,
    }
}
