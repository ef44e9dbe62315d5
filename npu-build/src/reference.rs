//! int8 reference interpreter of the IR, bit-exact with TFLite's reference kernels.

use crate::error::{Error, Result};
use crate::ir::Graph;
use crate::value::Value;

/// Runs `graph` on `inputs` (in graph input order) and returns the outputs in graph output order.
pub fn run(_graph: &Graph, _inputs: &[Value]) -> Result<Vec<Value>> {
    Err(Error::Other("the reference interpreter is not written yet".into()))
}
