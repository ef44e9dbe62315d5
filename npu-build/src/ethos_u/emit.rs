//! Emission: the register command stream of a placed [`Program`].

use npu_rt::ethos_u::config::AcceleratorConfig;

use super::npu_op::{Placement, Program};
use crate::error::{Error, Result};

/// Writes the command stream (ending with NPU_OP_STOP) of `program` as placed by `placement`.
pub fn emit(program: &Program, placement: &Placement, accel: &AcceleratorConfig) -> Result<Vec<u32>> {
    let _ = (program, placement, accel);
    Err(Error::Other("emission is not written yet".into()))
}
