//! Block configuration selection: the OFM block and shared-buffer layout of each operation.

use npu_rt::ethos_u::config::AcceleratorConfig;

use super::npu_op::{BlockConfig, NpuOp};
use crate::error::{Error, Result};

/// Chooses the block configuration of `op` on `accel`.
pub fn choose(op: &NpuOp, accel: &AcceleratorConfig) -> Result<BlockConfig> {
    let _ = accel;
    Err(Error::Other(format!("{}: block selection is not written yet", op.name)))
}
