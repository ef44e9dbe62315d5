//! The command-stream walker shared by the virtual U55/U65 ([`super::VirtualNpu`]) and U85
//! ([`super::VirtualU85`]).
//!
//! Both command sets have the same word layout and the same run structure: a raw stream or the
//! streams of a COP1 payload, walked once, command by command; a register-setting command
//! updates the register state, an `NPU_OP_*` runs; `NPU_OP_STOP` ends the run; errors name
//! the byte offset of the command at fault; every operation's work counts against
//! [`Limits::max_run_work`]. This module holds that structure; a simulator supplies its
//! command set and what it does with each command through [`Machine`].

use crate::sim::within_limits;
use std::vec::Vec;

use crate::ethos_u::cop::{self, Cop1};
use crate::ethos_u::regs::DecodeError;

use super::error::{SimError, SimErrorKind};
use super::memory::Regions;
use super::stats::{OpStats, Stats};
use super::{Limits, StreamEnd};

/// A simulator as the walker drives it: its command set and what each command does.
pub(crate) trait Machine {
    /// A decoded command.
    type Command;

    /// Decodes the command whose first word is `words[0]`, at `byte_offset` of the caller's
    /// buffer (for error offsets).
    fn decode(words: &[u32], byte_offset: usize) -> Result<Self::Command, DecodeError>;

    /// The number of words `cmd` occupies.
    fn words(cmd: &Self::Command) -> usize;

    /// Applies a register-setting command; returns false for operations (`NPU_OP_*`).
    fn apply(&mut self, cmd: &Self::Command) -> bool;

    /// Dispatches the operation `cmd` (a command `apply` refused) found at byte `offset`;
    /// returns how it ended the stream, if it did. Errors name the command's offset.
    fn dispatch(
        &mut self,
        cmd: Self::Command,
        offset: usize,
        regions: &mut Regions,
        stats: &mut Stats,
    ) -> Result<Option<StreamEnd>, SimError>;

    /// Checks the header of a COP1 payload (architecture, configuration) before its command
    /// streams run.
    fn check_payload(&self, cop: &Cop1<'_>) -> Result<(), SimError>;
}

/// Runs a raw command stream or a COP1 payload (every command stream in it, up to the first
/// `NPU_OP_STOP`) on the machine's current state, adding to `stats`.
pub(crate) fn run<M: Machine>(
    m: &mut M,
    stream: &[u8],
    regions: &mut Regions,
    stats: &mut Stats,
) -> Result<(), SimError> {
    if cop::is_cop1(stream) {
        let cop =
            Cop1::parse(stream).map_err(|e| SimError::at(e.offset, None, SimErrorKind::Cop(e)))?;
        m.check_payload(&cop)?;
        for (offset, bytes) in cop.command_streams() {
            if execute(m, bytes, offset, regions, stats)? == StreamEnd::Stop {
                break;
            }
        }
    } else {
        execute(m, stream, 0, regions, stats)?;
    }
    Ok(())
}

/// Executes the command stream `bytes` (whose first byte is at `byte_base` in the caller's
/// buffer, for error offsets) on the machine's current state, adding to `stats`. A trailing
/// partial word is a [`DecodeError::Truncated`] at its offset, once the whole words ran.
pub(crate) fn execute<M: Machine>(
    m: &mut M,
    bytes: &[u8],
    byte_base: usize,
    regions: &mut Regions,
    stats: &mut Stats,
) -> Result<StreamEnd, SimError> {
    let words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let mut index = 0;
    while index < words.len() {
        let offset = byte_base.saturating_add(index.saturating_mul(4));
        let (used, end) = step(m, &words[index..], offset, regions, stats)?;
        if let Some(end) = end {
            return Ok(end);
        }
        index = index.saturating_add(used);
    }
    if !bytes.len().is_multiple_of(4) {
        let offset = byte_base.saturating_add(bytes.len() & !3);
        return Err(SimError::at(
            offset,
            None,
            SimErrorKind::Decode(DecodeError::Truncated { offset }),
        ));
    }
    Ok(StreamEnd::EndOfStream)
}

/// Decodes and executes the command whose first word is `words[0]`, at `byte_offset` of its
/// stream; returns the words it used and how it ended the stream, if it did.
pub(crate) fn step<M: Machine>(
    m: &mut M,
    words: &[u32],
    byte_offset: usize,
    regions: &mut Regions,
    stats: &mut Stats,
) -> Result<(usize, Option<StreamEnd>), SimError> {
    let cmd = M::decode(words, byte_offset)
        .map_err(|e| SimError::at(e.offset(), None, SimErrorKind::Decode(e)))?;
    stats.commands += 1;
    let used = M::words(&cmd);
    if m.apply(&cmd) {
        return Ok((used, None));
    }
    let end = m.dispatch(cmd, byte_offset, regions, stats)?;
    Ok((used, end))
}

/// `NPU_OP_STOP` with parameter `param`: raises its interrupt and ends the stream.
pub(crate) fn stop(param: u16, stats: &mut Stats) -> Option<StreamEnd> {
    stats.irqs.push(param);
    stats.stopped = true;
    Some(StreamEnd::Stop)
}

/// `NPU_OP_IRQ` with parameter `param`: raises an interrupt; the stream goes on.
pub(crate) fn irq(param: u16, stats: &mut Stats) -> Option<StreamEnd> {
    stats.irqs.push(param);
    None
}

/// Books a completed operation: adds its work (MACs + output elements + DMA bytes) to the
/// run's `work`, its counters to `stats`, and fails once the run's work exceeds
/// [`Limits::max_run_work`].
pub(crate) fn account(
    work: &mut u64,
    limits: &Limits,
    st: OpStats,
    stats: &mut Stats,
) -> Result<(), SimErrorKind> {
    let op_work = st
        .macs
        .saturating_add(st.ofm_elements)
        .saturating_add(st.dma_bytes);
    *work = work.saturating_add(op_work);
    stats.push(st);
    within_limits(&[("work of one run", *work, limits.max_run_work)])?;
    Ok(())
}
