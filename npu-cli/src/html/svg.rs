//! Inline SVG: the per-operation cycle bars and the arena's live-bytes step plot. Plain
//! elements with `<title>` tooltips, no script, so the page renders anywhere without a network.

use std::fmt::Write as _;

use super::data::{Report, StepRow};
use super::{esc, thousands};

/// Height of one bar and the gap under it (px): long models stay compact, yet labels at 10px
/// stay readable.
const BAR: f64 = 12.0;
const ROW: f64 = 14.0;
/// Widths (px) of the label column, the bar area and the value column of the bar chart.
const LABEL_W: f64 = 380.0;
const BARS_W: f64 = 640.0;
const VALUE_W: f64 = 150.0;
/// Characters of a node name shown in a bar label (the tooltip has all of it).
const LABEL_CHARS: usize = 52;

/// The colour of a bound: compute, or the memory by what is on it.
pub fn bound_colour(name: &str) -> &'static str {
    match name {
        "compute" => "#4e79a7",
        "Sram" => "#f28e2b",
        "OffChipFlash" => "#e15759",
        "OnChipFlash" => "#ff9da7",
        "Dram" => "#b07aa1",
        "Shram" => "#59a14f",
        _ => "#9c755f",
    }
}

/// A tick step of 1, 2 or 5 times a power of ten giving about `n` ticks up to `max`.
fn nice_step(max: f64, n: f64) -> f64 {
    if max <= 0.0 {
        return 1.0;
    }
    let raw = max / n;
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * p)
}

/// A short label of a node name: its first `;`-separated part (TFLite joins fused nodes' names
/// with `;`), cut to `n` characters from the front, since the distinctive part of a path-like
/// name is its end.
fn truncate(s: &str, n: usize) -> String {
    let s = s.split(';').next().unwrap_or(s);
    let len = s.chars().count();
    if len <= n {
        s.to_string()
    } else {
        let mut t = String::from("…");
        t.extend(s.chars().skip(len + 1 - n));
        t
    }
}

/// One horizontal bar per NPU operation (`class="bar"`, in execution order), its length the
/// estimated cycles and its colour the bound; CPU steps appear as unlabelled-bar rows
/// (`class="cpu-row"`) where they run.
pub fn bar_chart(r: &Report) -> String {
    let max = r.ops.iter().map(|o| o.cycles).max().unwrap_or(0).max(1) as f64;
    let step = nice_step(max, 5.0);
    let rows = r.ops.len()
        + r.steps
            .iter()
            .filter(|s| matches!(s, StepRow::Cpu { .. }))
            .count();
    let top = 18.0;
    let height = top + rows as f64 * ROW + 4.0;
    let width = LABEL_W + BARS_W + VALUE_W;
    let x = |v: f64| LABEL_W + v / max * BARS_W;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="bars" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="estimated cycles per NPU operation">"#
    );
    // Grid and tick labels (cycles).
    let mut t = 0.0;
    while t <= max {
        let gx = x(t);
        let _ = write!(
            s,
            r##"<line x1="{gx:.1}" y1="{top}" x2="{gx:.1}" y2="{height}" stroke="#e3e3e3"/><text x="{gx:.1}" y="12" class="tick" text-anchor="middle">{}</text>"##,
            thousands(t as u64)
        );
        t += step;
    }
    let mut y = top;
    let mut ops = r.ops.iter().peekable();
    for (si, step) in r.steps.iter().enumerate() {
        match step {
            StepRow::Cpu { node, op, reason } => {
                let _ = write!(
                    s,
                    r##"<g class="cpu-row"><title>CPU: {} ({}): {}</title><rect x="{LABEL_W}" y="{y}" width="{BARS_W}" height="{BAR}" fill="#f1f1f1"/><text x="{lx}" y="{ty}" class="label" text-anchor="end">CPU {}</text><text x="{vx}" y="{ty}" class="value">CPU ({})</text></g>"##,
                    esc(node),
                    esc(op),
                    esc(reason),
                    esc(&truncate(node, LABEL_CHARS)),
                    esc(op),
                    lx = LABEL_W - 6.0,
                    vx = LABEL_W + 4.0,
                    ty = y + BAR - 2.0,
                );
                y += ROW;
            }
            StepRow::Npu { .. } => {
                while let Some(o) = ops.next_if(|o| o.step == si) {
                    let bound = r.bound_name(o.bound);
                    let w = (o.cycles as f64 / max * BARS_W).max(1.0);
                    let memories: Vec<String> = r
                        .memory_names
                        .iter()
                        .zip(o.access)
                        .filter(|(_, a)| *a > 0)
                        .map(|(n, a)| format!("{n} {}", thousands(a)))
                        .collect();
                    let _ = write!(
                        s,
                        r#"<g class="bar" data-op="{}" data-cycles="{}" data-bound="{}"><title>#{} {} ({}): {} cycles, bound by {}; compute {}{}{}</title><text x="{lx}" y="{ty}" class="label" text-anchor="end">#{} {}</text><rect x="{LABEL_W}" y="{y}" width="{w:.1}" height="{BAR}" fill="{}"/><text x="{vx:.1}" y="{ty}" class="value">{} · {}</text></g>"#,
                        o.index,
                        o.cycles,
                        esc(bound),
                        o.index,
                        esc(&o.name),
                        esc(&o.kind),
                        thousands(o.cycles),
                        esc(bound),
                        thousands(o.compute),
                        if memories.is_empty() { "" } else { ", memory " },
                        esc(&memories.join(", ")),
                        o.index,
                        esc(&truncate(&o.name, LABEL_CHARS)),
                        bound_colour(bound),
                        thousands(o.cycles),
                        esc(&o.kind),
                        lx = LABEL_W - 6.0,
                        vx = LABEL_W + w + 4.0,
                        ty = y + BAR - 2.0,
                    );
                    y += ROW;
                }
            }
        }
    }
    s.push_str("</svg>");
    s
}

/// The legend of the bar chart: compute, and each memory that bounds some operation, with
/// counts; the CPU-step swatch when there are CPU steps.
pub fn legend(r: &Report) -> String {
    let mut names = vec!["compute"];
    for m in &r.memory_names {
        if !names.contains(m) {
            names.push(m);
        }
    }
    let mut s = String::from(r#"<div class="legend">bound: "#);
    for n in names {
        let count = r.ops.iter().filter(|o| r.bound_name(o.bound) == n).count();
        if count == 0 && n != "compute" {
            continue;
        }
        let _ = write!(
            s,
            r#"<span><i style="background:{}"></i>{} ({count})</span>"#,
            bound_colour(n),
            esc(n)
        );
    }
    if r.steps.iter().any(|s| matches!(s, StepRow::Cpu { .. })) {
        s.push_str(r#"<span><i style="background:#f1f1f1"></i>CPU step</span>"#);
    }
    s.push_str("</div>");
    s
}

/// The live arena bytes at each schedule position as a step plot, with the allocated arena size
/// and the SRAM limit (when given) as horizontal lines; CPU positions are shaded.
pub fn live_plot(r: &Report, arena: usize, limit: Option<usize>) -> String {
    let (w, h) = (1100.0, 320.0);
    let (ml, mr, mt, mb) = (96.0, 150.0, 16.0, 48.0);
    let n = r.live_bytes.len().max(1) as f64;
    let top = [r.peak_live(), arena as u64, limit.unwrap_or(0) as u64]
        .into_iter()
        .max()
        .unwrap_or(0)
        .max(1) as f64
        * 1.08;
    let px = |p: f64| ml + p / n * (w - ml - mr);
    let py = |v: f64| mt + (1.0 - v / top) * (h - mt - mb);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="plot" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="live arena bytes over the schedule">"#
    );
    // CPU positions.
    for (p, pos) in r.positions.iter().enumerate() {
        if pos.cpu {
            let _ = write!(
                s,
                r##"<rect x="{:.1}" y="{mt}" width="{:.1}" height="{:.1}" fill="#eeeeee"/>"##,
                px(p as f64),
                px(1.0) - px(0.0),
                h - mt - mb
            );
        }
    }
    // Axes with ticks.
    let ystep = nice_step(top, 5.0);
    let mut v = 0.0;
    while v <= top {
        let y = py(v);
        let _ = write!(
            s,
            r##"<line x1="{ml}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e3e3e3"/><text x="{:.1}" y="{:.1}" class="tick" text-anchor="end">{}</text>"##,
            w - mr,
            ml - 6.0,
            y + 3.5,
            thousands(v as u64)
        );
        v += ystep;
    }
    let xstep = nice_step(n, 10.0).max(1.0);
    let mut p = 0.0;
    while p <= n {
        let x = px(p);
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#888"/><text x="{x:.1}" y="{:.1}" class="tick" text-anchor="middle">{}</text>"##,
            h - mb,
            h - mb + 4.0,
            h - mb + 16.0,
            p as u64
        );
        p += xstep;
    }
    let _ = write!(
        s,
        r##"<line x1="{ml}" y1="{mt}" x2="{ml}" y2="{b}" stroke="#888"/><line x1="{ml}" y1="{b}" x2="{r}" y2="{b}" stroke="#888"/><text x="{cx:.1}" y="{xl}" class="axis" text-anchor="middle">schedule position (NPU operations and CPU operators in execution order)</text><text transform="translate(14 {cy:.1}) rotate(-90)" class="axis" text-anchor="middle">live arena bytes</text>"##,
        b = h - mb,
        r = w - mr,
        cx = (ml + w - mr) / 2.0,
        xl = h - 10.0,
        cy = (mt + h - mb) / 2.0,
    );
    // The step line and the area under it.
    if !r.live_bytes.is_empty() {
        let mut d = format!("M{:.1},{:.1}", px(0.0), py(0.0));
        for (p, &b) in r.live_bytes.iter().enumerate() {
            let y = py(b as f64);
            let _ = write!(
                d,
                " L{:.1},{y:.1} L{:.1},{y:.1}",
                px(p as f64),
                px(p as f64 + 1.0)
            );
        }
        let _ = write!(d, " L{:.1},{:.1} Z", px(n), py(0.0));
        let _ = write!(
            s,
            r##"<path d="{d}" fill="#4e79a7" fill-opacity="0.25" stroke="#4e79a7" stroke-width="1.5"/>"##
        );
        // Tooltips per position.
        for (p, (&b, pos)) in r.live_bytes.iter().zip(&r.positions).enumerate() {
            let _ = write!(
                s,
                r#"<rect x="{:.1}" y="{mt}" width="{:.1}" height="{:.1}" fill="transparent"><title>{p}: {}: {} live bytes</title></rect>"#,
                px(p as f64),
                px(1.0) - px(0.0),
                h - mt - mb,
                esc(&pos.label),
                thousands(b)
            );
        }
    }
    let mut hline = |v: usize, colour: &str, label: &str, dash: &str| {
        let y = py(v as f64);
        let _ = write!(
            s,
            r#"<line x1="{ml}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{colour}" stroke-width="1.5" stroke-dasharray="{dash}"/><text x="{:.1}" y="{:.1}" class="tick" fill="{colour}">{label} {}</text>"#,
            w - mr,
            w - mr + 4.0,
            y + 3.5,
            thousands(v as u64)
        );
    };
    hline(arena, "#333333", "arena", "5 3");
    if let Some(l) = limit {
        hline(l, "#e15759", "limit", "2 2");
    }
    s.push_str("</svg>");
    s
}
