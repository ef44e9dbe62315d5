//! Times the reference interpreter on mv2_224 (single thread):
//! `cargo bench -p npu-build --bench reference_mv2` (`BENCH_RUNS=N` to change the run count).
//!
//! Prints the median and minimum over the runs of the wall time and, on Linux, of the CPU time of
//! the running thread (from `/proc/thread-self/schedstat`), which other load on the machine does
//! not inflate. Two variants: a prepared `Interpreter` (`Interpreter::run`), and `reference::run`
//! (which also prepares: validates, encodes rescales, widens weights).

use std::path::PathBuf;
use std::time::Instant;

use npu_build::{import, reference, value::Value};

/// Nanoseconds this thread has spent on a CPU (None where schedstat is unavailable).
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Runs `f` `runs` times; returns the wall and CPU times in milliseconds.
fn measure(runs: usize, mut f: impl FnMut()) -> (Vec<f64>, Vec<f64>) {
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let c0 = thread_cpu_ns();
        let t = Instant::now();
        f();
        wall.push(t.elapsed().as_secs_f64() * 1e3);
        if let (Some(a), Some(b)) = (c0, thread_cpu_ns()) {
            cpu.push((b - a) as f64 / 1e6);
        }
    }
    (wall, cpu)
}

fn summary(mut v: Vec<f64>) -> String {
    if v.is_empty() {
        return "n/a".into();
    }
    v.sort_by(f64::total_cmp);
    format!("median {:.1} ms, min {:.1} ms", v[v.len() / 2], v[0])
}

fn main() {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/mv2_224");
    let graph = import::load(&dir.join("mv2_224.tflite")).expect("mv2_224.tflite");
    let input = Value::read_npy(&dir.join("io/input_0.npy")).expect("input_0.npy");
    let inputs = [input];

    let interp = reference::Interpreter::new(&graph).expect("prepare");
    interp.run(&inputs).expect("warm-up");
    let (pw, pc) = measure(runs, || {
        std::hint::black_box(interp.run(&inputs).expect("run"));
    });
    let (fw, fc) = measure(runs, || {
        std::hint::black_box(reference::run(&graph, &inputs).expect("run"));
    });
    println!("mv2_224 reference interpreter, {runs} runs, single thread");
    println!(
        "  Interpreter::run      wall: {}; cpu: {}",
        summary(pw),
        summary(pc)
    );
    println!(
        "  reference::run        wall: {}; cpu: {}",
        summary(fw),
        summary(fc)
    );
}
