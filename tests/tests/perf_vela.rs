//! The performance estimator against Arm's: for Vela's command stream of every fixture and
//! accelerator configuration, `npu_build::ethos_u::perf` with Vela's accounting
//! ([`Options::VELA`]: LUT loads free) must land within 20% of the `cycles_total` Vela reports
//! for the same stream (`summary.csv`), under the system configuration and memory mode Vela
//! compiled for (`meta.json`). The default estimate may exceed it only by the time of the LUT
//! loads, which Vela leaves out.
//!
//! Prints one row per stream (estimates, Vela, ratios) and the geometric mean of the ratios
//! (`cargo test -p npu-tests --test perf_vela -- --nocapture`).

use std::path::{Path, PathBuf};

use npu_build::ethos_u::perf::{Options, estimate_stream, estimate_stream_with};
use npu_build::target::Target;
use npu_tests::fixtures_dir;

/// Largest accepted |estimate / Vela - 1|.
const TOLERANCE: f64 = 0.20;

/// Every `fixtures/<model>/vela/<accel>` directory, sorted.
fn vela_dirs() -> Vec<(String, String, PathBuf)> {
    let root = fixtures_dir();
    let mut out = Vec::new();
    for model in std::fs::read_dir(&root).unwrap_or_else(|e| panic!("{}: {e}", root.display())) {
        let model = model.expect("fixture entry").path();
        let vela = model.join("vela");
        if !vela.is_dir() {
            continue;
        }
        for accel in std::fs::read_dir(&vela).expect("vela dir") {
            let accel = accel.expect("accel entry").path();
            let name = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();
            out.push((name(&model), name(&accel), accel));
        }
    }
    out.sort();
    out
}

/// `column` of the data row of Vela's `summary.csv`.
fn summary_value(dir: &Path, column: &str) -> f64 {
    let path = dir.join("summary.csv");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let row: Vec<&str> = lines.next().expect("data row").split(',').collect();
    let i = header
        .iter()
        .position(|h| *h == column)
        .unwrap_or_else(|| panic!("{}: no column {column}", path.display()));
    row[i]
        .parse()
        .unwrap_or_else(|e| panic!("{}: {column} = {:?}: {e}", path.display(), row[i]))
}

/// The target Vela compiled for (`meta.json`).
fn target_of(dir: &Path) -> Target {
    let path = dir.join("meta.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let meta: serde_json::Value = serde_json::from_str(&text).expect("meta.json is JSON");
    let s = |k: &str| {
        meta[k]
            .as_str()
            .unwrap_or_else(|| panic!("{}: no {k}", path.display()))
    };
    Target::new(
        s("accelerator"),
        Some(s("system_config")),
        Some(s("memory_mode")),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One compared stream.
struct Row {
    name: String,
    /// Estimate with Vela's accounting.
    vela_mode: u64,
    /// Default estimate (LUT loads timed).
    default: u64,
    /// Vela's `cycles_total`.
    vela: u64,
}

/// Estimates every selected stream.
fn compare(select: impl Fn(&str, &str) -> bool) -> Vec<Row> {
    let mut rows = Vec::new();
    for (model, accel, dir) in vela_dirs() {
        if !select(&model, &accel) {
            continue;
        }
        let target = target_of(&dir);
        let stream = std::fs::read(dir.join("cmd_stream.bin")).expect("cmd_stream.bin");
        let name = format!("{model}/{accel}");
        let est = estimate_stream_with(&stream, &target, Options::VELA)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let default = estimate_stream(&stream, &target).unwrap_or_else(|e| panic!("{name}: {e}"));
        // The two accountings differ only in the LUT loads.
        let lut: u64 = default
            .dmas
            .iter()
            .filter(|d| d.lut)
            .map(|d| d.cost.cycles)
            .sum();
        assert!(
            default.total_cycles >= est.total_cycles
                && default.total_cycles - est.total_cycles <= lut,
            "{name}: default {} vs Vela accounting {} with {lut} cycles of LUT loads",
            default.total_cycles,
            est.total_cycles
        );
        let vela = summary_value(&dir, "cycles_total") as u64;
        assert!(vela > 0, "{name}: Vela reports 0 cycles");
        rows.push(Row {
            name,
            vela_mode: est.total_cycles,
            default: default.total_cycles,
            vela,
        });
    }
    rows
}

/// Prints the rows and the geometric means; fails listing every stream outside the tolerance.
fn check(rows: &[Row]) {
    assert!(!rows.is_empty(), "no Vela fixture streams found");
    let (mut log_sum, mut log_sum_default) = (0.0, 0.0);
    let mut bad = Vec::new();
    println!(
        "{:<36} {:>11} {:>11} {:>11} {:>7} {:>7}",
        "stream", "vela-mode", "default", "vela", "ratio", "default"
    );
    for r in rows {
        let ratio = r.vela_mode as f64 / r.vela as f64;
        let ratio_default = r.default as f64 / r.vela as f64;
        log_sum += ratio.ln();
        log_sum_default += ratio_default.ln();
        println!(
            "{:<36} {:>11} {:>11} {:>11} {ratio:>7.3} {ratio_default:>7.3}",
            r.name, r.vela_mode, r.default, r.vela
        );
        if (ratio - 1.0).abs() > TOLERANCE {
            bad.push(format!(
                "{}: {} vs {} ({ratio:.3})",
                r.name, r.vela_mode, r.vela
            ));
        }
    }
    let n = rows.len() as f64;
    println!(
        "geometric mean of {} ratios: {:.4} (default accounting: {:.4})",
        rows.len(),
        (log_sum / n).exp(),
        (log_sum_default / n).exp()
    );
    assert!(
        bad.is_empty(),
        "{} of {} streams outside {}%:\n{}",
        bad.len(),
        rows.len(),
        TOLERANCE * 100.0,
        bad.join("\n")
    );
}

/// Every single-operator fixture on every accelerator configuration.
#[test]
fn single_operator_streams_within_20_percent_of_vela() {
    let rows = compare(|model, _| model.starts_with("op_"));
    assert!(
        rows.len() >= 6 * 16,
        "expected every op_* fixture x 6 configs"
    );
    check(&rows);
}

/// The networks (MobileNetV2 224 and the others) on every configuration their fixtures have.
#[test]
fn network_streams_within_20_percent_of_vela() {
    let rows = compare(|model, _| !model.starts_with("op_"));
    check(&rows);
}
