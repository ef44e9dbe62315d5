//! Lowering of pooling, and of the 1x1 average-pool "no-op" used for copies, requantization
//! and stand-alone activations.

use super::Lowering;
use crate::error::Result;
use crate::ir::{Op, TensorId};

pub(super) fn lower(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    Err(cx.limit(op, "lowering of this operator is not written yet"))
}

/// Quantize (requantize) and stand-alone activations.
pub(super) fn lower_rescale(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    Err(cx.limit(op, "lowering of this operator is not written yet"))
}

/// Copies tensor `x` into tensor `y` (same element count, same quantization).
pub(super) fn lower_copy(cx: &mut Lowering<'_>, op: &Op, x: TensorId, y: TensorId) -> Result<()> {
    let _ = (x, y);
    Err(cx.limit(op, "lowering of this operator is not written yet"))
}
