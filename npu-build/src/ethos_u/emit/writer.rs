//! The command word writer: encodes commands with npu-rt's opcode types, drops register writes
//! whose value has not changed (as Vela does), and checks every value against its field width.

use std::collections::HashMap;

use npu_rt::ethos_u::regs::opcode::CMD1_FLAG;
use npu_rt::ethos_u::regs::{Cmd0, Cmd1};

use crate::error::{Error, Result};

/// Names the operation being emitted, for error messages.
#[derive(Clone, Debug)]
pub(super) struct Ctx {
    /// `op 3 'conv1'` or `LUT DMA for op 3 'sigmoid'`.
    pub node: String,
    /// The operation class (`NPU_OP_CONV` ...).
    pub op: String,
    /// The accelerator name.
    pub target: &'static str,
}

impl Ctx {
    /// A [`Error::HardwareLimit`] saying `what` does not fit its register.
    pub fn limit(&self, what: impl Into<String>) -> Error {
        Error::HardwareLimit {
            node: self.node.clone(),
            op: self.op.clone(),
            target: self.target.into(),
            limit: what.into(),
        }
    }

    /// Checks `0 <= value <= max` for the register field `what`.
    pub fn unsigned(&self, what: &str, value: u64, max: u64) -> Result<u16> {
        if value > max {
            return Err(self.limit(format!(
                "{what} = {value} does not fit its register (max {max})"
            )));
        }
        u16::try_from(value).map_err(|_| self.limit(format!("{what} = {value} exceeds 16 bits")))
    }

    /// A size minus one (`*_M1` registers): `1 <= size <= max_m1 + 1`.
    pub fn minus_one(&self, what: &str, size: usize, max_m1: u64) -> Result<u16> {
        if size == 0 {
            return Err(self.limit(format!("{what} is 0")));
        }
        self.unsigned(what, size as u64 - 1, max_m1)
    }

    /// A 16-bit two's complement field holding a signed or unsigned value
    /// (`-32768..=65535`): zero points, clip bounds, the scalar operand.
    pub fn int16(&self, what: &str, value: i64) -> Result<u16> {
        if !(-32768..=65535).contains(&value) {
            return Err(self.limit(format!("{what} = {value} does not fit 16 bits")));
        }
        Ok(value as u16)
    }
}

/// The command stream under construction.
pub(super) struct Writer {
    pub words: Vec<u32>,
    /// Last value written to each register: key = low half of the first word (opcode and
    /// control bits), value = first word | payload << 32.
    last: HashMap<u16, u64>,
    /// Largest address + 1 (2^32 on U55, 2^40 on U65).
    pub address_limit: u64,
}

impl Writer {
    pub fn new(address_bits: u32) -> Self {
        Writer {
            words: Vec::new(),
            last: HashMap::new(),
            address_limit: 1u64.checked_shl(address_bits).unwrap_or(u64::MAX),
        }
    }

    /// Records `value` for register `key`; true when it differs from the last one written.
    fn changed(&mut self, key: u16, value: u64) -> bool {
        self.last.insert(key, value) != Some(value)
    }

    /// A one-word command. Operations (`NPU_OP_*`) are always written, register sets only
    /// when their value changed.
    pub fn cmd0(&mut self, op: Cmd0, param: u16) {
        let word = op.encode(param);
        if op.is_operation() || self.changed(op.code(), u64::from(word)) {
            self.words.push(word);
        }
    }

    /// A two-word register set, written only when its value changed.
    pub fn cmd1(&mut self, op: Cmd1, param: u16, payload: u32) {
        let [w0, w1] = op.encode(param, payload);
        let key = op.code() | CMD1_FLAG as u16;
        if self.changed(key, u64::from(w0) | u64::from(w1) << 32) {
            self.words.extend([w0, w1]);
        }
    }

    /// An address, stride or length register: checked against the address width.
    pub fn address(&mut self, ctx: &Ctx, op: Cmd1, what: &str, value: u64) -> Result<()> {
        if value >= self.address_limit {
            return Err(ctx.limit(format!(
                "{what} = {value:#x} is beyond the {}-bit address range",
                self.address_limit.trailing_zeros()
            )));
        }
        let [w0, w1] = op.encode_address(value);
        self.cmd1(op, (w0 >> 16) as u16, w1);
        Ok(())
    }

    /// A stride register: a 40-bit two's complement value (negative strides walk a box
    /// backwards; a value of 2^39 and above is taken as its 40-bit pattern).
    pub fn stride(&mut self, ctx: &Ctx, op: Cmd1, what: &str, value: i64) -> Result<()> {
        if !(-(1i64 << 39)..(1i64 << 40)).contains(&value) {
            return Err(ctx.limit(format!("{what} = {value} does not fit 40 bits")));
        }
        let [w0, w1] = op.encode_address((value as u64) & ((1 << 40) - 1));
        self.cmd1(op, (w0 >> 16) as u16, w1);
        Ok(())
    }

    /// Checks that `[start, start + len)` is addressable.
    pub fn check_range(&self, ctx: &Ctx, what: &str, start: u64, len: u64) -> Result<()> {
        match start.checked_add(len) {
            Some(end) if end <= self.address_limit => Ok(()),
            _ => Err(ctx.limit(format!(
                "{what} at {start:#x} + {len:#x} bytes is beyond the {}-bit address range",
                self.address_limit.trailing_zeros()
            ))),
        }
    }
}
