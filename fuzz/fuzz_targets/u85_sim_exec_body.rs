//! The body of the `u85_sim_exec` fuzz target, shared with the regular smoke test that replays
//! mutated fixture streams through it (`tests/tests/u85_sim_fuzz.rs`).
//!
//! Input layout (as `sim_exec`'s): byte 0 selects the Ethos-U85 configuration, bytes 1..5 the
//! arena size (little-endian, capped at 64 KiB), bytes 5..9 the length of the weights (region 0)
//! that follow; the rest is the command stream (a COP1 payload or a raw U85 stream).

use npu_rt::ethos_u::config::U85_ALL;
use npu_rt::sim::{Limits, Regions, VirtualU85};

/// Largest arena (region 1) a fuzz input gets; region 2 gets a quarter of it.
pub const MAX_ARENA: usize = 64 << 10;

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Too short for the header.
    Short,
    /// Ran to its end or `NPU_OP_STOP`, with this many operations.
    Ran(u64),
    /// Stopped with this error.
    Failed(String),
}

/// Runs `data` (the layout above) on the virtual U85 with tight limits: the run ends with
/// statistics or an error naming an offset inside the stream, never a panic.
pub fn run(data: &[u8]) -> Outcome {
    let Some((&sel, rest)) = data.split_first() else {
        return Outcome::Short;
    };
    let Some((arena_len, rest)) = rest.split_first_chunk::<4>() else {
        return Outcome::Short;
    };
    let Some((weights_len, rest)) = rest.split_first_chunk::<4>() else {
        return Outcome::Short;
    };
    let arena_len = (u32::from_le_bytes(*arena_len) as usize).min(MAX_ARENA);
    let weights_len = (u32::from_le_bytes(*weights_len) as usize).min(rest.len());
    let (weights, stream) = rest.split_at(weights_len);
    let config = U85_ALL[sel as usize % U85_ALL.len()];
    let limits = Limits {
        max_elements: 1 << 16,
        max_op_macs: 1 << 22,
        max_run_work: 1 << 24,
        max_dma_bytes: 1 << 18,
    };
    let mut npu = VirtualU85::new(config).with_limits(limits);
    let mut arena = vec![0u8; arena_len];
    let mut fast = vec![0u8; arena_len / 4];
    let mut regions = Regions::new();
    regions
        .set(0, weights)
        .set_mut(1, &mut arena)
        .set_mut(2, &mut fast);
    match npu.run(stream, &mut regions) {
        Ok(stats) => {
            assert!(stats.commands as usize <= stream.len() / 4);
            Outcome::Ran(stats.operations)
        }
        Err(e) => {
            assert!(
                e.offset <= stream.len(),
                "offset {} outside the stream: {e}",
                e.offset
            );
            Outcome::Failed(e.to_string())
        }
    }
}
