//! The Ethos-U85 performance estimator against Arm's: for Vela's U85 command stream of every
//! fixture (`fixtures/<model>/vela/ethos-u85-*`), `npu_build::ethos_u::perf::u85` under the
//! system configuration and memory mode Vela compiled for (`meta.json`) is compared with the
//! `cycles_total` Vela reports for the same stream (`summary.csv`). Per configuration, the
//! geometric mean of estimate / Vela must lie in [`GEOMEAN_BOUNDS`].
//!
//! Prints one row per stream and a summary per configuration (the README table):
//! `cargo test --release -p npu-tests --test perf_vela_u85 -- --nocapture`.

use std::collections::BTreeMap;
use std::path::Path;

use npu_build::ethos_u::perf::Options;
use npu_build::ethos_u::perf::u85::{U85Target, estimate_stream_u85_with};
use npu_tests::vela::{summary_value, u85_dirs};

/// Accepted range of the geometric mean of estimate / Vela per configuration. The goal is
/// within 20% ([0.8, 1.25]); measured 0.945 (ethos-u85-2048) to 0.983 (ethos-u85-256), so the
/// bound is held tighter.
const GEOMEAN_BOUNDS: (f64, f64) = (0.9, 1.1);

/// The target Vela compiled for (`meta.json`).
fn target_of(dir: &Path) -> U85Target {
    let path = dir.join("meta.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let meta: serde_json::Value = serde_json::from_str(&text).expect("meta.json is JSON");
    let s = |k: &str| meta[k].as_str();
    U85Target::new(
        s("accelerator").expect("meta.json: accelerator"),
        s("system_config"),
        s("memory_mode"),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Per configuration: (model, ratio) of every stream.
fn ratios() -> BTreeMap<String, Vec<(String, f64)>> {
    let mut by_accel: BTreeMap<String, Vec<(String, f64)>> = BTreeMap::new();
    for (model, accel, dir) in u85_dirs() {
        let stream = std::fs::read(dir.join("cmd_stream.bin")).expect("cmd_stream.bin");
        let target = target_of(&dir);
        let est = estimate_stream_u85_with(&stream, &target, Options::VELA)
            .unwrap_or_else(|e| panic!("{model}/{accel}: {e}"));
        let vela = summary_value(&dir, "cycles_total");
        let ratio = est.total_cycles as f64 / vela.max(1.0);
        println!(
            "{model:<28} {accel:<15} ours {:>10} vela {:>10} ratio {ratio:.3}",
            est.total_cycles, vela as u64
        );
        by_accel.entry(accel).or_default().push((model, ratio));
    }
    by_accel
}

#[test]
fn u85_estimates_track_vela_cycles_total() {
    let by_accel = ratios();
    assert_eq!(
        by_accel.len(),
        4,
        "expected the four ethos-u85 configurations of the fixtures"
    );
    println!("| configuration | streams | geomean ours/Vela | min | max |");
    println!("|---|---:|---:|---:|---:|");
    let mut failures = Vec::new();
    for (accel, rows) in &by_accel {
        let n = rows.len() as f64;
        let geomean = (rows.iter().map(|r| r.1.ln()).sum::<f64>() / n).exp();
        let min = rows.iter().map(|r| r.1).fold(f64::MAX, f64::min);
        let max = rows.iter().map(|r| r.1).fold(0.0, f64::max);
        println!(
            "| {accel} | {} | {geomean:.3} | {min:.3} | {max:.3} |",
            rows.len()
        );
        if !(GEOMEAN_BOUNDS.0..=GEOMEAN_BOUNDS.1).contains(&geomean) {
            failures.push(format!("{accel}: geomean {geomean:.3}"));
        }
    }
    let mut worst: Vec<(&String, &String, f64)> = by_accel
        .iter()
        .flat_map(|(a, rows)| rows.iter().map(move |(m, r)| (m, a, *r)))
        .collect();
    worst.sort_by(|x, y| y.2.ln().abs().total_cmp(&x.2.ln().abs()));
    println!("worst:");
    for (m, a, r) in worst.iter().take(12) {
        println!("  {m}/{a}: {r:.3}");
    }
    assert!(
        failures.is_empty(),
        "geomean outside {GEOMEAN_BOUNDS:?}: {failures:?}"
    );
}
