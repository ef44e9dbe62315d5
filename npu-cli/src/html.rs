//! `npu report --html FILE`: the report as one self-contained HTML page (inline CSS and SVG, no
//! script, no network): key figures beside the SRAM budget (and Vela's, with `--vela DIR`), the
//! estimated cycles of every NPU operation coloured by what bounds it, the NPU/CPU split with
//! reasons, the arena's live bytes over the schedule, where each tensor lives, and the weight
//! and command-stream bytes of each operation.
//!
//! Every key figure is written twice: formatted for people (`8,308,154`) and as a
//! machine-readable attribute (`data-key="cycles_estimate" data-value="8308154"`), the same key
//! and value as the JSON report, so tests and scripts can read the page without scraping text.

pub mod data;
mod svg;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Value as Json, json};

use crate::sim::CompiledDir;
use npu_build::error::{Error, Result};
use npu_build::ethos_u::Compiled;
use npu_build::ethos_u::perf::estimate_stream;
use npu_build::ir::Graph;
use npu_build::target::Target;

use self::data::{BufferRole, Report, StepRow};

/// Escapes text for HTML and SVG content and attribute values (node names come from user
/// models and may hold any character).
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `n` with thousands separators: `8308154` -> `8,308,154`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Vela's figures for the same model, read from a Vela output directory (`cmd_stream.bin`,
/// `weights.bin`, `meta.json`, and `summary.csv` when present).
#[derive(Clone, Debug)]
pub struct VelaFigures {
    pub dir: PathBuf,
    /// Our estimator on Vela's command stream, for the report's target.
    pub cycles_estimate: u64,
    pub time_ms: f64,
    pub npu_ops: usize,
    /// Vela's own estimate (`summary.csv` `cycles_total`).
    pub summary_cycles_total: Option<u64>,
    /// Vela's encoded weight bytes (`summary.csv` `total_npu_encoded_weights`).
    pub summary_encoded_weight_bytes: Option<u64>,
    pub sram_bytes: usize,
    pub flash_bytes: usize,
    pub dram_bytes: usize,
    /// `meta.json` `scratch_size`.
    pub arena_bytes: usize,
    pub weights_bytes: usize,
    pub command_stream_bytes: usize,
}

impl VelaFigures {
    /// Reads `dir` and estimates its stream on `target`. Vela's directory must be for the same
    /// accelerator (a different one would compare different hardware).
    pub fn load(dir: &Path, target: &Target) -> Result<Self> {
        if !dir.is_dir() {
            return Err(Error::Usage(format!(
                "--vela {}: not a directory (expected Vela's output: cmd_stream.bin, weights.bin, \
                 meta.json, summary.csv)",
                dir.display()
            )));
        }
        let v = CompiledDir::load(dir)?;
        if let Some(accel) = v.meta.get("accelerator").and_then(Json::as_str)
            && accel != target.accelerator.name
        {
            return Err(Error::Usage(format!(
                "--vela {}: compiled for {accel}, the report's target is {}",
                dir.display(),
                target.accelerator.name
            )));
        }
        let e = estimate_stream(&v.cmd_stream, target)?;
        let meta = |k: &str| v.meta.get(k).and_then(Json::as_u64).unwrap_or(0) as usize;
        let arena = meta("scratch_size");
        let consts = v.weights.len() + v.cmd_stream.len();
        // As `npu bench` counts it: the memory mode places arena and read-only data, and a
        // fast-scratch cache in SRAM adds to the SRAM.
        let (sram, dram, flash) = target.memory_use(arena, consts);
        let cache = if target.uses_cache() {
            meta("scratch_fast_size")
        } else {
            0
        };
        Ok(VelaFigures {
            dir: dir.to_path_buf(),
            cycles_estimate: e.total_cycles,
            time_ms: e.time_ms(),
            npu_ops: e.ops.len(),
            summary_cycles_total: crate::bench::summary_value(dir, "cycles_total")
                .map(|v| v as u64),
            summary_encoded_weight_bytes: crate::bench::summary_value(
                dir,
                "total_npu_encoded_weights",
            )
            .map(|v| v as u64),
            sram_bytes: sram + cache,
            flash_bytes: flash,
            dram_bytes: dram,
            arena_bytes: arena,
            weights_bytes: v.weights.len(),
            command_stream_bytes: v.cmd_stream.len(),
        })
    }

    /// The figures as JSON (the report's `"vela"` object; the page's `vela.*` keys).
    pub fn json(&self) -> Json {
        json!({
            "dir": self.dir.display().to_string(),
            "cycles_estimate": self.cycles_estimate,
            "time_ms": self.time_ms,
            "npu_ops": self.npu_ops,
            "summary_cycles_total": self.summary_cycles_total,
            "summary_encoded_weight_bytes": self.summary_encoded_weight_bytes,
            "sram_bytes": self.sram_bytes,
            "flash_bytes": self.flash_bytes,
            "dram_bytes": self.dram_bytes,
            "arena_bytes": self.arena_bytes,
            "weights_bytes": self.weights_bytes,
            "command_stream_bytes": self.command_stream_bytes,
        })
    }
}

/// What the page adds to the compiled model.
#[derive(Clone, Debug, Default)]
pub struct PageOptions {
    /// The SRAM budget (`--sram-limit`).
    pub sram_limit: Option<usize>,
    pub vela: Option<VelaFigures>,
}

/// A cell with a node or tensor name: the first `;`-separated part (TFLite joins the names of
/// fused nodes with `;`, which makes them very long), the whole name as its tooltip.
fn name_cell(name: &str) -> String {
    let short = name.split(';').next().unwrap_or(name);
    let more = if short.len() < name.len() { " …" } else { "" };
    format!(
        r#"<td class="name" title="{}">{}{more}</td>"#,
        esc(name),
        esc(short)
    )
}

/// A table cell holding a key figure: `text` for people, `value` for machines.
fn key_cell(key: &str, value: &str, text: &str) -> String {
    format!(
        r#"<td class="num" data-key="{}" data-value="{}">{}</td>"#,
        esc(key),
        esc(value),
        esc(text)
    )
}

fn int_cell(key: &str, v: u64) -> String {
    key_cell(key, &v.to_string(), &thousands(v))
}

fn empty_cell() -> &'static str {
    r#"<td class="num muted">–</td>"#
}

fn num_cell(v: u64) -> String {
    format!(r#"<td class="num">{}</td>"#, thousands(v))
}

const CSS: &str = r#"
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:#222;margin:20px 28px;max-width:1260px}
h1{font-size:22px;margin:0 0 2px}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #ddd;padding-bottom:3px}
.sub{color:#555;margin:0 0 12px}.muted{color:#999}.note{color:#555;font-size:12.5px;margin:6px 0}
table{border-collapse:collapse;font-size:13px}th,td{padding:3px 9px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
th{background:#f6f6f6;font-weight:600;position:sticky;top:0}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.scroll{max-height:520px;overflow:auto;border:1px solid #ddd}
.legend{font-size:12.5px;margin:4px 0 6px}.legend span{margin-right:14px;white-space:nowrap}.legend i{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px}
svg text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif}
svg .label,svg .value,svg .tick{font-size:10px;fill:#444}svg .axis{font-size:12px;fill:#333}
.meter{display:inline-block;width:120px;height:9px;background:#eee;vertical-align:middle;margin-left:6px}.meter b{display:block;height:100%;background:#59a14f}.meter.over b{background:#e15759}
.over{color:#c0392b;font-weight:600}.cpu{color:#9c4a00}
td.name{min-width:250px;max-width:430px;overflow-wrap:anywhere;font-size:12px}
.grid{display:flex;gap:28px;flex-wrap:wrap;align-items:flex-start}
"#;

/// The page for `c` (compiled from `graph` for `target`), with the JSON report's key figures
/// (`report`, as [`crate::compile::report_json`] makes it).
pub fn page(
    c: &Compiled,
    graph: &Graph,
    target: &Target,
    report: &Json,
    options: &PageOptions,
) -> Result<String> {
    let r = Report::new(c, graph, target)?;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>npu report: {}</title><style>{CSS}</style></head><body>"#,
        esc(&c.name)
    );
    let _ = write!(
        s,
        r#"<h1>{}</h1><p class="sub">{} · {} · {} · npu {} · {} IR operators</p>"#,
        esc(&c.name),
        esc(target.accelerator.name),
        esc(target.system_config.name),
        esc(target.memory_mode.name),
        env!("CARGO_PKG_VERSION"),
        c.ir_ops
    );
    summary(&mut s, c, &r, report, options);
    bars(&mut s, &r);
    arena(&mut s, c, &r, options);
    split(&mut s, c, &r);
    op_table(&mut s, &r);
    tensors(&mut s, &r);
    s.push_str("</body></html>\n");
    Ok(s)
}

/// Key figures, ours beside Vela's and the budget.
fn summary(s: &mut String, c: &Compiled, r: &Report, report: &Json, o: &PageOptions) {
    let v = o.vela.as_ref();
    s.push_str(
        r#"<h2>Totals</h2><table class="summary"><thead><tr><th></th><th class="num">ours</th>"#,
    );
    if v.is_some() {
        s.push_str(r#"<th class="num">Vela (our estimator on its stream)</th><th class="num">Vela's own figures (summary.csv)</th><th class="num">ours / Vela</th>"#);
    }
    s.push_str("<th>budget</th></tr></thead><tbody>");
    let ratio = |ours: u64, theirs: u64| -> String {
        if theirs == 0 {
            empty_cell().to_string()
        } else {
            format!(
                r#"<td class="num">{:.3}x</td>"#,
                ours as f64 / theirs as f64
            )
        }
    };
    let u = |k: &str| report.get(k).and_then(Json::as_u64);
    // One row: label, our key and value, Vela's (key suffix and value), Vela's own, budget.
    let mut row = |label: &str,
                   ours: String,
                   ours_v: Option<u64>,
                   vela: Option<(String, Option<u64>)>,
                   vela_own: Option<String>,
                   budget: String| {
        let _ = write!(s, "<tr><th>{}</th>{ours}", esc(label));
        if v.is_some() {
            let (cell, vv) = vela.unwrap_or((empty_cell().to_string(), None));
            s.push_str(&cell);
            s.push_str(&vela_own.unwrap_or_else(|| empty_cell().to_string()));
            match (ours_v, vv) {
                (Some(a), Some(b)) => s.push_str(&ratio(a, b)),
                _ => s.push_str(empty_cell()),
            }
        }
        let _ = write!(s, "<td>{budget}</td></tr>");
    };
    let opt_int = |key: &str, x: Option<u64>| {
        x.map_or_else(|| empty_cell().to_string(), |x| int_cell(key, x))
    };
    let vint = |key: &str, x: u64| Some((int_cell(&format!("vela.{key}"), x), Some(x)));

    // Cycles: ours from the page's own estimates (the test checks them against the JSON).
    let cycles = (!r.ops.is_empty() || report.get("cycles_estimate").is_some_and(|c| !c.is_null()))
        .then_some(r.cycles_estimate);
    let mem_bound = r
        .ops
        .iter()
        .filter(|o| !matches!(o.bound, data::Bound::Compute))
        .count();
    row(
        "NPU cycles (estimate)",
        opt_int("cycles_estimate", cycles),
        cycles,
        v.and_then(|v| vint("cycles_estimate", v.cycles_estimate)),
        v.map(|v| opt_int("vela.summary_cycles_total", v.summary_cycles_total)),
        format!(
            "{} of {} NPU operations memory-bound; CPU steps not estimated",
            mem_bound,
            r.ops.len()
        ),
    );
    let t = report
        .get("time_ms")
        .and_then(Json::as_f64)
        .map(|_| r.time_ms);
    row(
        "time (ms at the core clock)",
        t.map_or_else(
            || empty_cell().to_string(),
            |t| key_cell("time_ms", &t.to_string(), &format!("{t:.3}")),
        ),
        None,
        v.map(|v| {
            (
                key_cell(
                    "vela.time_ms",
                    &v.time_ms.to_string(),
                    &format!("{:.3}", v.time_ms),
                ),
                None,
            )
        }),
        None,
        String::new(),
    );
    let sram = u("sram_bytes").unwrap_or(0);
    let budget = match o.sram_limit {
        Some(limit) => {
            let pct = sram as f64 / limit.max(1) as f64 * 100.0;
            let over = sram as usize > limit;
            format!(
                r#"limit {} <span class="muted" data-key="sram_limit" data-value="{limit}"></span><span class="meter{}"><b style="width:{:.1}%"></b></span> {pct:.1}%{}"#,
                thousands(limit as u64),
                if over { " over" } else { "" },
                pct.min(100.0),
                if over {
                    format!(
                        r#" <span class="over">over by {} bytes</span>"#,
                        thousands(sram - limit as u64)
                    )
                } else {
                    format!(", {} bytes free", thousands(limit as u64 - sram))
                }
            )
        }
        None => r#"<span class="muted">no limit given (--sram-limit)</span>"#.to_string(),
    };
    row(
        "SRAM bytes",
        int_cell("sram_bytes", sram),
        Some(sram),
        v.and_then(|v| vint("sram_bytes", v.sram_bytes as u64)),
        None,
        budget,
    );
    for (label, key, vela) in [
        ("flash bytes", "flash_bytes", v.map(|v| v.flash_bytes)),
        ("DRAM bytes", "dram_bytes", v.map(|v| v.dram_bytes)),
        ("arena bytes", "arena_bytes", v.map(|v| v.arena_bytes)),
        (
            "read-only region bytes (weights.bin)",
            "weights_bytes",
            v.map(|v| v.weights_bytes),
        ),
    ] {
        let x = u(key).unwrap_or(0);
        row(
            label,
            int_cell(key, x),
            Some(x),
            vela.and_then(|y| vint(key, y as u64)),
            None,
            String::new(),
        );
    }
    let enc = c.encoded_weight_bytes as u64;
    row(
        "encoded weight bytes",
        int_cell("encoded_weight_bytes", enc),
        Some(enc),
        None,
        v.map(|v| {
            opt_int(
                "vela.summary_encoded_weight_bytes",
                v.summary_encoded_weight_bytes,
            )
        }),
        String::new(),
    );
    let cs = r.command_stream_bytes as u64;
    row(
        "command stream bytes",
        int_cell("command_stream_bytes", cs),
        Some(cs),
        v.and_then(|v| vint("command_stream_bytes", v.command_stream_bytes as u64)),
        None,
        String::new(),
    );
    let npu = r.ops.len() as u64;
    row(
        "NPU operations",
        int_cell("npu_ops", npu),
        Some(npu),
        v.and_then(|v| vint("npu_ops", v.npu_ops as u64)),
        None,
        String::new(),
    );
    row(
        "CPU steps",
        int_cell("cpu_ops", c.cpu_ops() as u64),
        None,
        None,
        None,
        String::new(),
    );
    row(
        "IR operators",
        int_cell("ir_ops", c.ir_ops as u64),
        None,
        None,
        None,
        String::new(),
    );
    let ms = c.compile_time.as_secs_f64() * 1e3;
    row(
        "compile time (ms)",
        key_cell("compile_ms", &ms.to_string(), &format!("{ms:.1}")),
        None,
        None,
        None,
        String::new(),
    );
    s.push_str("</tbody></table>");
    if let Some(v) = v {
        let _ = write!(
            s,
            r#"<p class="note">Vela: {}. Its cycles are our estimator on Vela's command stream for the same target, and Vela's own <code>cycles_total</code>; SRAM and flash are placed by the memory mode as ours are.</p>"#,
            esc(&v.dir.display().to_string())
        );
    }
    s.push_str(r#"<p class="note">SRAM, flash and DRAM bytes: the arena and the read-only data (weights.bin and the command stream) where the memory mode puts them.</p>"#);
}

/// The bar chart of cycles per NPU operation.
fn bars(s: &mut String, r: &Report) {
    let _ = write!(
        s,
        r#"<h2>Estimated cycles per NPU operation</h2><p class="note">One bar per NPU operation in execution order ({} bars); the colour is what bounds it in the estimate: compute when its compute cycles are at least every memory's access cycles, else the busiest memory. Hover a bar for its figures.</p>"#,
        r.ops.len()
    );
    s.push_str(&svg::legend(r));
    let _ = write!(s, r#"<div class="scroll">{}</div>"#, svg::bar_chart(r));
}

/// The live-bytes plot.
fn arena(s: &mut String, c: &Compiled, r: &Report, o: &PageOptions) {
    let peak = r.peak_live();
    let _ = write!(
        s,
        r#"<h2>Arena: live bytes over the schedule</h2><p class="note">Sum of the sizes of the arena buffers live at each position (feature maps, graph inputs and outputs, weight copies), by the allocator's liveness rule; peak <span data-peak-live-bytes="{peak}">{}</span> bytes in an arena of {} bytes (the difference is alignment and fragmentation). Shaded positions are CPU operators.</p>"#,
        thousands(peak),
        thousands(c.arena_size as u64)
    );
    s.push_str(&svg::live_plot(r, c.arena_size, o.sram_limit));
}

/// The NPU/CPU split.
fn split(s: &mut String, c: &Compiled, r: &Report) {
    let cpu: Vec<_> = c
        .assignment
        .iter()
        .filter(|a| a.cpu_reason.is_some())
        .collect();
    let _ = write!(
        s,
        r#"<h2>NPU/CPU split</h2><p class="note">{} of {} operators run on the NPU, {} on the CPU, in {} steps.</p>"#,
        c.assignment.len() - cpu.len(),
        c.assignment.len(),
        cpu.len(),
        c.steps.len()
    );
    s.push_str(r#"<div class="grid"><div><table class="steps"><thead><tr><th class="num">step</th><th>engine</th><th>runs</th><th class="num">stream bytes</th><th class="num">DMAs (bytes)</th><th class="num">cycles</th></tr></thead><tbody>"#);
    for (i, step) in r.steps.iter().enumerate() {
        match step {
            StepRow::Npu {
                ops,
                stream_bytes,
                cycles,
                dmas,
                dma_bytes,
                ..
            } => {
                let _ = write!(
                    s,
                    r#"<tr><td class="num">{i}</td><td>NPU</td><td>operations {}–{} ({})</td>{}<td class="num">{dmas} ({})</td>{}</tr>"#,
                    ops.start,
                    ops.end.saturating_sub(1),
                    ops.len(),
                    num_cell(*stream_bytes as u64),
                    thousands(*dma_bytes),
                    num_cell(*cycles)
                );
            }
            StepRow::Cpu { node, op, reason } => {
                let _ = write!(
                    s,
                    r#"<tr class="cpu"><td class="num">{i}</td><td>CPU</td><td>{} ({}): {}</td><td></td><td></td><td class="num muted">–</td></tr>"#,
                    esc(node),
                    esc(op),
                    esc(reason)
                );
            }
        }
    }
    s.push_str("</tbody></table></div>");
    if !cpu.is_empty() {
        s.push_str(r#"<div><table class="cpu-ops"><thead><tr><th>CPU operator</th><th>op</th><th>reason</th></tr></thead><tbody>"#);
        for a in cpu {
            let _ = write!(
                s,
                r#"<tr class="cpu"><td>{}</td><td>{}</td><td>{}</td></tr>"#,
                esc(&a.node),
                esc(&a.op),
                esc(a.cpu_reason.as_deref().unwrap_or_default())
            );
        }
        s.push_str("</tbody></table></div>");
    }
    s.push_str("</div>");
}

/// Per-operation figures.
fn op_table(s: &mut String, r: &Report) {
    s.push_str(r#"<h2>NPU operations</h2><p class="note">Weight and scale bytes are the lengths the command stream gives the operation (WEIGHT_LENGTH, SCALE_LENGTH over all cores); “arena” marks weights read from a DMA'd copy in the arena. Stream bytes are the command-stream bytes from the previous operation's command through this one's (the first also carries the stream header). Access cycles are per memory; the estimate does not split them by tensor.</p><div class="scroll"><table class="ops"><thead><tr><th class="num">#</th><th>node</th><th>kind</th><th>OFM (block)</th><th class="num">cycles</th><th>bound</th><th class="num">compute</th>"#);
    for m in &r.memory_names {
        let _ = write!(s, r#"<th class="num">{}</th>"#, esc(m));
    }
    s.push_str(r#"<th class="num">MACs</th><th class="num">weight bytes</th><th class="num">scale bytes</th><th class="num">stream bytes</th></tr></thead><tbody>"#);
    let shape = |v: &[u64; 3]| format!("{}×{}×{}", v[0], v[1], v[2]);
    for o in &r.ops {
        let _ = write!(
            s,
            r#"<tr><td class="num">{}</td>{}<td>{}</td><td>{} ({})</td>{}<td>{}</td>{}"#,
            o.index,
            name_cell(&o.name),
            esc(&o.kind),
            shape(&o.ofm),
            shape(&o.ofm_block),
            num_cell(o.cycles),
            esc(r.bound_name(o.bound)),
            num_cell(o.compute)
        );
        for a in o.access.iter().take(r.memory_names.len()) {
            s.push_str(&num_cell(*a));
        }
        let opt = |x: Option<u64>| x.map_or_else(|| empty_cell().to_string(), num_cell);
        let _ = write!(
            s,
            r#"{}<td class="num">{}{}</td>{}{}</tr>"#,
            num_cell(o.macs),
            o.weight_bytes.map_or_else(|| "–".to_string(), thousands),
            if o.weights_in_arena { " (arena)" } else { "" },
            opt(o.scale_bytes),
            num_cell(o.command_bytes as u64)
        );
    }
    s.push_str("</tbody></table></div>");
}

/// Every buffer: role, region, address, size, live range.
fn tensors(s: &mut String, r: &Report) {
    s.push_str(r#"<h2>Where each tensor lives</h2><p class="note">Region 0 is the read-only data (flash), region 1 the arena, region 2 the fast scratch (the SRAM when the arena is in DRAM). Sizes are before the allocator's alignment; live ranges are schedule positions (first–last).</p><div class="scroll"><table class="tensors"><thead><tr><th>buffer</th><th>role</th><th class="num">region</th><th class="num">address</th><th class="num">bytes</th><th class="num">live</th></tr></thead><tbody>"#);
    for b in &r.buffers {
        let role = match b.role {
            BufferRole::Input(k) => format!("input {k}"),
            BufferRole::Output(k) => format!("output {k}"),
            BufferRole::FeatureMap => "feature map".into(),
            BufferRole::WeightCopy => "weight copy".into(),
            BufferRole::ReadOnly => "read-only".into(),
        };
        let live = b
            .live
            .map_or_else(|| "–".to_string(), |(f, l)| format!("{f}–{l}"));
        let _ = write!(
            s,
            r#"<tr>{}<td>{role}</td><td class="num">{}</td><td class="num">0x{:x}</td>{}<td class="num">{live}</td></tr>"#,
            name_cell(&b.name),
            b.region,
            b.addr,
            num_cell(b.size as u64)
        );
    }
    s.push_str("</tbody></table></div>");
}

/// Writes `html` to `path` (an error naming the path when that fails).
pub fn write(path: &Path, html: &str) -> Result<()> {
    std::fs::write(path, html).map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(8308154), "8,308,154");
        assert_eq!(thousands(123456789012), "123,456,789,012");
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(esc("plain/name;1"), "plain/name;1");
    }
}
