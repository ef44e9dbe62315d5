//! Lowering of conv.

use super::Lowering;
use crate::error::Result;
use crate::ir::Op;

pub(super) fn lower(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    Err(cx.limit(op, "lowering of this operator is not written yet"))
}
