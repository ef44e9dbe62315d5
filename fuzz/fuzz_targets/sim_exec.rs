#![no_main]
//! The virtual NPU on arbitrary command streams and memory: every run ends (tight work limits)
//! with statistics or an error naming a command offset inside the stream, never a panic.
//!
//! Input layout: byte 0 selects the accelerator configuration, bytes 1..5 the arena size
//! (little-endian, capped at 256 KiB), bytes 5..9 the length of the weights (region 0) that
//! follow; the rest is the command stream (a COP1 payload or a raw stream). The seed corpus is
//! built from the fixtures' Vela output in this layout (see fuzz/README.md).

use libfuzzer_sys::fuzz_target;
use npu_rt::ethos_u::config::AcceleratorConfig;
use npu_rt::sim::{Limits, Regions, VirtualNpu};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let Some((arena_len, rest)) = rest.split_first_chunk::<4>() else { return };
    let Some((weights_len, rest)) = rest.split_first_chunk::<4>() else { return };
    let arena_len = (u32::from_le_bytes(*arena_len) as usize).min(256 << 10);
    let weights_len = (u32::from_le_bytes(*weights_len) as usize).min(rest.len());
    let (weights, stream) = rest.split_at(weights_len);
    let names = AcceleratorConfig::names();
    let config = AcceleratorConfig::by_name(names[sel as usize % names.len()]).expect("known name");
    let limits = Limits {
        max_elements: 1 << 16,
        max_op_macs: 1 << 22,
        max_run_work: 1 << 24,
        max_dma_bytes: 1 << 18,
    };
    let mut npu = VirtualNpu::new(config).with_limits(limits).with_config_check(sel & 0x80 == 0);
    let mut arena = vec![0u8; arena_len];
    let mut fast = vec![0u8; arena_len / 4];
    let mut regions = Regions::new();
    regions.set(0, weights).set_mut(1, &mut arena).set_mut(2, &mut fast);
    match npu.run(stream, &mut regions) {
        Ok(stats) => assert!(stats.commands as usize <= stream.len() / 4),
        Err(e) => assert!(e.offset <= stream.len(), "offset {} outside the stream: {e}", e.offset),
    }
});
