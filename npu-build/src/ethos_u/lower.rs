//! Lowering: the IR graph into a [`Program`] of NPU operations.

use super::npu_op::Program;
use crate::error::{Error, Result};
use crate::ir::Graph;
use npu_rt::ethos_u::config::AcceleratorConfig;

/// Lowers every operator of `graph` to NPU operations for `target`.
pub fn lower(graph: &Graph, accel: &AcceleratorConfig) -> Result<Program> {
    let _ = (graph, accel);
    Err(Error::Other("lowering is not written yet".into()))
}
