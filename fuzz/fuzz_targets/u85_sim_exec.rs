#![no_main]
//! The virtual Ethos-U85 on arbitrary command streams and memory: every run ends (tight work
//! limits, small regions) with statistics or an error naming a command offset inside the
//! stream, never a panic. The body and the input layout are in `u85_sim_exec_body.rs`, which
//! the regular test `tests/tests/u85_sim_fuzz.rs` also runs on mutated fixture streams.

use libfuzzer_sys::fuzz_target;

#[path = "u85_sim_exec_body.rs"]
mod body;

fuzz_target!(|data: &[u8]| {
    let _ = body::run(data);
});
