//! The `u85_sim_exec` fuzz target's body (`fuzz/fuzz_targets/u85_sim_exec_body.rs`) on mutated
//! U85 streams, without cargo-fuzz: every `fixtures/*/vela/ethos-u85-*/cmd_stream.bin` with
//! flipped bytes, replaced command words (opcodes the fixtures use, random parameters and
//! payloads), truncations and splices of two streams, on small random regions. A run must end
//! with statistics or an error naming an offset inside the stream, never a panic.
//!
//! `U85_FUZZ_ITERS` sets the number of mutated streams (default 3000; the stop report ran
//! 100000 and 1000000), `U85_FUZZ_SEED` the generator's seed. A panic prints the input as hex
//! (replay it with the fuzz target).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

use npu_rt::ethos_u::config::U85_ALL;
use npu_tests::fixtures_dir;

#[path = "../../fuzz/fuzz_targets/u85_sim_exec_body.rs"]
mod body;

/// A fixed xorshift generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// (payload, weights, arena size, index of the configuration in `U85_ALL`) of a U85 fixture.
type Seed = (Vec<u8>, Vec<u8>, usize, u8);

/// Every U85 fixture directory as a [`Seed`].
fn seeds() -> Vec<Seed> {
    let mut out = Vec::new();
    let mut models: Vec<_> = std::fs::read_dir(fixtures_dir())
        .expect("fixtures")
        .flatten()
        .map(|e| e.path())
        .collect();
    models.sort();
    for model in models {
        let Ok(dirs) = std::fs::read_dir(model.join("vela")) else {
            continue;
        };
        let mut dirs: Vec<_> = dirs.flatten().map(|e| e.path()).collect();
        dirs.sort();
        for dir in dirs {
            let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if !name.starts_with("ethos-u85-") {
                continue;
            }
            let (Ok(cmd), Ok(weights), Ok(meta)) = (
                std::fs::read(dir.join("cmd_stream.bin")),
                std::fs::read(dir.join("weights.bin")),
                std::fs::read_to_string(dir.join("meta.json")),
            ) else {
                continue;
            };
            let meta: serde_json::Value = serde_json::from_str(&meta).expect("meta.json");
            let arena = meta["scratch_size"].as_u64().unwrap_or(0) as usize;
            let config = U85_ALL
                .iter()
                .position(|c| c.name == name)
                .expect("a U85 configuration") as u8;
            out.push((cmd, weights, arena, config));
        }
    }
    out
}

fn words(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// One mutated fuzz input built from the seeds.
fn mutate(rng: &mut Rng, seeds: &[Seed], vocab: &[u32]) -> Vec<u8> {
    let (payload, weights, arena, config) = &seeds[rng.below(seeds.len())];
    // Most mutations go to the raw stream after the 32-byte COP1 header (the payload's
    // checks would reject most header damage before any command runs).
    let raw = rng.below(4) != 0 && payload.len() > 32;
    let mut stream: Vec<u8> = if raw {
        payload[32..].to_vec()
    } else {
        payload.clone()
    };
    for _ in 0..1 + rng.below(4) {
        let n = stream.len();
        match rng.below(6) {
            0 if n > 0 => {
                let i = rng.below(n);
                stream[i] ^= 1 << rng.below(8);
            }
            1 if n >= 4 => {
                // A command word the fixtures use, with a random parameter.
                let i = rng.below(n / 4) * 4;
                let w = vocab[rng.below(vocab.len())] & 0xffff | (rng.next() as u32) << 16;
                stream[i..i + 4].copy_from_slice(&w.to_le_bytes());
            }
            2 if n >= 8 => {
                // A random cmd1 payload (addresses, lengths, strides, scales) where a cmd1
                // command word is found, else a random word.
                let mut i = rng.below(n / 4 - 1) * 4;
                let w =
                    u32::from_le_bytes([stream[i], stream[i + 1], stream[i + 2], stream[i + 3]]);
                if (w >> 14) & 3 == 1 {
                    i += 4;
                }
                let v = match rng.below(3) {
                    0 => rng.next() as u32,
                    1 => rng.below(0x1_0000) as u32,
                    _ => u32::MAX - rng.below(16) as u32,
                };
                stream[i..i + 4].copy_from_slice(&v.to_le_bytes());
            }
            3 => stream.truncate(rng.below(n + 1)),
            4 => {
                // A piece of another stream spliced in at a word boundary.
                let (other, ..) = &seeds[rng.below(seeds.len())];
                if other.len() > 32 {
                    let from = 32 + rng.below((other.len() - 32) / 4) * 4;
                    let len = (rng.below(64) * 4).min(other.len() - from);
                    let at = rng.below(n / 4 + 1) * 4;
                    let piece = other[from..from + len].to_vec();
                    stream.splice(at..at, piece);
                }
            }
            _ if n >= 8 => {
                // Two words swapped (commands out of order).
                let (i, j) = (rng.below(n / 4) * 4, rng.below(n / 4) * 4);
                for k in 0..4 {
                    stream.swap(i + k, j + k);
                }
            }
            _ => {}
        }
    }
    let arena_len = match rng.below(3) {
        0 => *arena,
        1 => rng.below(body::MAX_ARENA + 1),
        _ => arena.saturating_sub(rng.below(256)),
    };
    let weights_len = if rng.below(4) == 0 {
        rng.below(weights.len() + 1)
    } else {
        weights.len()
    };
    // Mostly the configuration the stream was compiled for (a payload for another one is
    // refused at once).
    let sel = if rng.below(4) == 0 {
        rng.next() as u8
    } else {
        *config
    };
    let mut input = vec![sel];
    input.extend_from_slice(&(arena_len as u32).to_le_bytes());
    input.extend_from_slice(&(weights_len as u32).to_le_bytes());
    input.extend_from_slice(&weights[..weights_len]);
    input.extend_from_slice(&stream);
    input
}

#[test]
fn mutated_u85_streams_never_panic() {
    let seeds = seeds();
    assert!(seeds.len() > 100, "{} U85 fixture streams", seeds.len());
    let mut vocab: Vec<u32> = seeds
        .iter()
        .flat_map(|(p, ..)| words(p.get(32..).unwrap_or(&[])))
        .filter(|w| (w >> 14) & 3 <= 1 && (w >> 10) & 0xf == 0)
        .map(|w| w & 0xffff)
        .collect();
    vocab.sort();
    vocab.dedup();
    let iters: usize = std::env::var("U85_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let seed = std::env::var("U85_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x2545_f491_4f6c_dd1d_u64);
    let mut rng = Rng(seed | 1);
    // Each panic's message once, with its first input.
    let mut panics: Vec<(String, Vec<u8>)> = Vec::new();
    // The hook keeps the panic's location and message (the payload alone has no location).
    static LAST: Mutex<String> = Mutex::new(String::new());
    std::panic::set_hook(Box::new(|info| {
        if let Ok(mut last) = LAST.lock() {
            *last = info.to_string();
        }
    }));
    // The seeds themselves first (small arenas make most of them fail, cleanly).
    let inputs = seeds.iter().map(|(p, w, a, c)| {
        let mut v = vec![*c];
        v.extend_from_slice(&(*a as u32).to_le_bytes());
        v.extend_from_slice(&(w.len() as u32).to_le_bytes());
        v.extend_from_slice(w);
        v.extend_from_slice(p);
        v
    });
    let inputs: Vec<Vec<u8>> = inputs.collect();
    let (mut ran, mut failed, mut operations) = (0usize, 0usize, 0u64);
    let mut kinds = std::collections::BTreeMap::new();
    for i in 0..inputs.len() + iters {
        let input = match inputs.get(i) {
            Some(v) => v.clone(),
            None => mutate(&mut rng, &seeds, &vocab),
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| body::run(&input)));
        match outcome {
            Ok(body::Outcome::Ran(ops)) => {
                ran += 1;
                operations += ops;
            }
            Ok(body::Outcome::Failed(ref e)) => {
                failed += 1;
                // The error's kind, without the numbers, to see what the mutations hit.
                let kind: String = e
                    .split(": ")
                    .nth(1)
                    .unwrap_or(e)
                    .chars()
                    .filter(|c| !c.is_ascii_digit())
                    .take(48)
                    .collect();
                *kinds.entry(kind).or_insert(0usize) += 1;
            }
            Ok(body::Outcome::Short) => {}
            Err(_) => {}
        }
        if outcome.is_err() {
            let msg = LAST.lock().map(|m| m.clone()).unwrap_or_default();
            if !panics.iter().any(|(m, _)| *m == msg) {
                panics.push((msg, input));
            }
        }
    }
    let _ = std::panic::take_hook();
    eprintln!(
        "{} inputs: {ran} ran to the end ({operations} operations), {failed} failed cleanly, {} distinct panics",
        inputs.len() + iters,
        panics.len()
    );
    let mut kinds: Vec<_> = kinds.into_iter().collect();
    kinds.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    for (k, n) in kinds.iter().take(12) {
        eprintln!("{n:>8}  {k}");
    }
    // The mutations keep a fair share of streams running (not all rejected at once).
    assert!(
        ran > (inputs.len() + iters) / 20,
        "only {ran} runs got to the end"
    );
    for (msg, input) in &panics {
        let hex: String = input.iter().map(|b| format!("{b:02x}")).collect();
        eprintln!("panic: {msg}\ninput ({} bytes): {hex}\n", input.len());
    }
    assert!(panics.is_empty(), "{} distinct panics", panics.len());
}
