//! Times one inference of Vela's MobileNetV2-224 command stream on the virtual NPU.
//!
//! `cargo bench -p npu-rt --features sim --bench sim_mv2 [-- ACCEL [ITERATIONS]]`
//! (default ethos-u55-128, 20 iterations; `ethos-u85-*` runs the virtual Ethos-U85). Reports the first run (weight streams decoded) and
//! the steady state (decoded weights cached), single-threaded: wall time, and on Linux the
//! thread's on-CPU time from `/proc/thread-self/schedstat` (meaningful on a loaded machine).

use std::time::{Duration, Instant};

use npu_rt::ethos_u::config::{AcceleratorConfig, U85Config};
use npu_rt::sim::{Regions, SimError, Stats, VirtualNpu, VirtualU85};

/// The virtual NPU of either command set.
enum Engine {
    U55U65(Box<VirtualNpu>),
    U85(VirtualU85),
}

impl Engine {
    fn run(&mut self, stream: &[u8], regions: &mut Regions) -> Result<Stats, SimError> {
        match self {
            Engine::U55U65(npu) => npu.run(stream, regions),
            Engine::U85(npu) => npu.run(stream, regions),
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let accel = args.first().map(String::as_str).unwrap_or("ethos-u55-128");
    let iterations: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(20);
    let mut npu = match U85Config::by_name(accel) {
        Some(u85) => Engine::U85(VirtualU85::new(u85)),
        None => Engine::U55U65(Box::new(VirtualNpu::new(
            AcceleratorConfig::by_name(accel).expect("accelerator name"),
        ))),
    };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/mv2_224/vela")
        .join(accel);
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let stream = read("cmd_stream.bin");
    let weights = read("weights.bin");
    let meta: serde_json::Value = serde_json::from_slice(&read("meta.json")).expect("meta.json");
    let scratch = meta["scratch_size"].as_u64().expect("scratch_size") as usize;
    let input_offset = meta["input_offset"][0].as_u64().expect("input_offset") as usize;
    let npy = std::fs::read(dir.join("../../io/input_0.npy")).expect("input_0.npy");
    let header = u16::from_le_bytes([npy[8], npy[9]]) as usize + 10;
    let input = &npy[header..];

    // On-CPU nanoseconds of this thread (Linux), or None.
    let cpu_ns = || -> Option<u64> {
        let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        s.split_whitespace().next()?.parse().ok()
    };
    let mut arena = vec![0u8; scratch];
    let mut run = |npu: &mut Engine| -> (Duration, Option<u64>, u64) {
        arena.iter_mut().for_each(|b| *b = 0);
        arena[input_offset..input_offset + input.len()].copy_from_slice(input);
        let mut regions = Regions::new();
        regions.set(0, &weights).set_mut(1, &mut arena);
        let (t, c) = (Instant::now(), cpu_ns());
        let stats = npu.run(&stream, &mut regions).expect("mv2 runs");
        let cpu = c.zip(cpu_ns()).map(|(a, b)| b.saturating_sub(a));
        (t.elapsed(), cpu, stats.macs)
    };
    let (first, first_cpu, macs) = run(&mut npu);
    let runs: Vec<_> = (0..iterations).map(|_| run(&mut npu)).collect();
    let mut wall: Vec<Duration> = runs.iter().map(|r| r.0).collect();
    let mut cpu: Vec<u64> = runs.iter().filter_map(|r| r.1).collect();
    wall.sort();
    cpu.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("mv2_224 on {accel}: {macs} MACs");
    println!(
        "  first run (decodes weights): wall {:8.2} ms, cpu {:8.2} ms",
        ms(first),
        first_cpu.unwrap_or(0) as f64 / 1e6
    );
    println!(
        "  steady state, {iterations} runs: wall median {:8.2} ms, best {:8.2} ms",
        ms(wall[wall.len() / 2]),
        ms(wall[0])
    );
    if !cpu.is_empty() {
        println!(
            "  steady state, {iterations} runs: cpu  median {:8.2} ms, best {:8.2} ms",
            cpu[cpu.len() / 2] as f64 / 1e6,
            cpu[0] as f64 / 1e6
        );
    }
}
