//! Vela's compilations of the fixtures (`fixtures/<model>/vela/<accel>/`): listing them, reading
//! Vela's `summary.csv`, and what Vela's miscompiled op_sum streams compute.

use std::path::{Path, PathBuf};

use crate::{fixtures_dir, u55_u65_dir, vela_compiled};

/// Every `fixtures/<model>/vela/<accel>` directory that holds a compilation ([`vela_compiled`])
/// and that `keep` accepts, as `(model, accel, directory)`, sorted.
pub fn compiled_dirs(keep: impl Fn(&Path) -> bool) -> Vec<(String, String, PathBuf)> {
    let root = fixtures_dir();
    let name = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();
    let mut out = Vec::new();
    for model in std::fs::read_dir(&root).unwrap_or_else(|e| panic!("{}: {e}", root.display())) {
        let model = model.expect("fixture entry").path();
        let vela = model.join("vela");
        if !vela.is_dir() {
            continue;
        }
        for accel in std::fs::read_dir(&vela).expect("vela dir") {
            let accel = accel.expect("accel entry").path();
            if !vela_compiled(&accel) || !keep(&accel) {
                continue;
            }
            out.push((name(&model), name(&accel), accel));
        }
    }
    out.sort();
    out
}

/// The compilations for the U55/U65 configurations ([`u55_u65_dir`]), sorted.
pub fn u55_u65_dirs() -> Vec<(String, String, PathBuf)> {
    compiled_dirs(u55_u65_dir)
}

/// The compilations for Ethos-U85 (`ethos-u85-*`), sorted.
pub fn u85_dirs() -> Vec<(String, String, PathBuf)> {
    compiled_dirs(|dir| {
        dir.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("ethos-u85-"))
    })
}

/// `column` of the data row of Vela's `summary.csv` in `dir`.
pub fn summary_value(dir: &Path, column: &str) -> f64 {
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

/// What Vela 5.2's op_sum streams (SUM over H and W of `[1, 8, 8, 16]`, keep_dims; U55/U65 and
/// U85 alike) compute from the input bytes `x`, from TFLite's quantization alone: they sum over
/// H only and write 128 values where the output has 16, so the output holds, for each channel
/// `c`, `sum over h of (x[h][0][c] - zp_in)`, scaled by TFLite's quantized multiplier of
/// `s_in / s_out` (`0x4EBFA475 / 2^34`, the stream's scale record) with NATURAL rounding (half
/// up), plus `zp_out`, saturated to int8 (docs/reduce.md, docs/u85.md).
pub fn op_sum_first_column(x: &[u8]) -> Vec<u8> {
    let (si, zi, so, zo) = (
        0.007842489518225193f64 as f32,
        -1i64,
        0.10197906941175461f64 as f32,
        -3i64,
    );
    let real = f64::from(si) / f64::from(so);
    // TFLite's QuantizeMultiplier: real = q / 2^31 * 2^e, q in [2^30, 2^31).
    let (mut m, mut e) = (real, 0i32);
    while m >= 1.0 {
        m /= 2.0;
        e += 1;
    }
    while m < 0.5 {
        m *= 2.0;
        e -= 1;
    }
    let q = (m * 2f64.powi(31)).round() as i64;
    let s = (31 - e) as u32;
    assert_eq!((q, s), (0x4EBF_A475, 34), "the stream's OFM scale");
    (0..16)
        .map(|c| {
            let acc: i64 = (0..8).map(|h| i64::from(x[h * 128 + c] as i8) - zi).sum();
            let v = (acc * q + (1i64 << (s - 1))) >> s;
            (v + zo).clamp(-128, 127) as i8 as u8
        })
        .collect()
}
