//! The HTML report against the JSON report: every key figure the page carries
//! (`data-key`/`data-value`) equals the JSON's, one bar per NPU operation, CPU steps with their
//! reasons, and node names escaped.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use npu_build::ethos_u::perf::estimate_stream;
use npu_build::ethos_u::{CompileOptions, Step, compile_with};
use npu_build::import;
use npu_build::ir::Graph;
use npu_build::target::Target;
use npu_cli::compile::report_json_with;
use npu_cli::html::{PageOptions, VelaFigures, esc, page};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

fn model(name: &str) -> PathBuf {
    fixtures().join(name).join(format!("{name}.tflite"))
}

fn target() -> Target {
    Target::new("ethos-u55-128", None, None).unwrap()
}

/// The page and the JSON report of `graph` compiled with `force_cpu`.
fn build(graph: &Graph, force_cpu: &[&str], options: PageOptions) -> (String, Json, usize) {
    let t = target();
    let opts = CompileOptions {
        force_cpu: force_cpu.iter().map(|s| s.to_string()).collect(),
        ..CompileOptions::for_target(&t)
    };
    let c = compile_with(graph, t.accelerator, &opts).unwrap();
    let json = report_json_with(&c, &t, &options);
    let html = page(&c, graph, &t, &json, &options).unwrap();
    // The estimator's operations over every NPU step.
    let ops = c
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Npu { command_stream, .. } => {
                Some(estimate_stream(command_stream, &t).unwrap().ops.len())
            }
            Step::Cpu(_) => None,
        })
        .sum();
    (html, json, ops)
}

fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// The value of the attribute `name="..."` starting at `s`'s first occurrence of it.
fn attr<'a>(s: &'a str, name: &str) -> Option<&'a str> {
    let start = s.find(&format!("{name}=\""))? + name.len() + 2;
    let len = s[start..].find('"')?;
    Some(&s[start..start + len])
}

/// Every `(data-key, data-value)` of the page, unescaped.
fn keys(html: &str) -> Vec<(String, String)> {
    html.match_indices("data-key=\"")
        .map(|(i, _)| {
            let tag_end = html[i..].find('>').unwrap() + i;
            let tag = &html[i..tag_end];
            let key = attr(tag, "data-key").unwrap();
            let value = attr(tag, "data-value").expect("data-key without data-value");
            (unescape(key), unescape(value))
        })
        .collect()
}

/// `v`'s member at the dotted path `key` (`vela.cycles_estimate`).
fn at<'a>(v: &'a Json, key: &str) -> Option<&'a Json> {
    key.split('.').try_fold(v, |v, k| v.get(k))
}

/// Every key figure of the page equals the JSON report's; returns how many were checked.
fn check_keys(html: &str, json: &Json) -> Vec<String> {
    let keys = keys(html);
    for (k, v) in &keys {
        let j = at(json, k).unwrap_or_else(|| panic!("page key {k} is not in the JSON report"));
        match j {
            Json::Number(n) if n.is_u64() => {
                assert_eq!(v.parse::<u64>().ok(), n.as_u64(), "{k}: page {v}, JSON {n}")
            }
            Json::Number(n) => {
                assert_eq!(v.parse::<f64>().ok(), n.as_f64(), "{k}: page {v}, JSON {n}")
            }
            Json::String(s) => assert_eq!(v, s, "{k}"),
            other => panic!("{k}: JSON {other} is not a figure"),
        }
    }
    keys.into_iter().map(|(k, _)| k).collect()
}

fn count(html: &str, needle: &str) -> usize {
    html.matches(needle).count()
}

#[test]
fn conv1x1_page_matches_the_json_report() {
    let graph = import::load(&model("op_conv1x1")).unwrap();
    let vela_dir = fixtures().join("op_conv1x1/vela/ethos-u55-128");
    let options = PageOptions {
        sram_limit: Some(512 * 1024),
        vela: Some(VelaFigures::load(&vela_dir, &target()).unwrap()),
    };
    let (html, json, ops) = build(&graph, &[], options);
    let keys = check_keys(&html, &json);
    for k in [
        "cycles_estimate",
        "time_ms",
        "sram_bytes",
        "flash_bytes",
        "dram_bytes",
        "arena_bytes",
        "weights_bytes",
        "encoded_weight_bytes",
        "command_stream_bytes",
        "npu_ops",
        "cpu_ops",
        "ir_ops",
        "compile_ms",
        "sram_limit",
        "vela.cycles_estimate",
        "vela.summary_cycles_total",
        "vela.sram_bytes",
        "vela.flash_bytes",
        "vela.command_stream_bytes",
    ] {
        assert!(keys.iter().any(|x| x == k), "the page has no {k}");
    }
    assert!(ops > 0);
    assert_eq!(count(&html, r#"<g class="bar""#), ops);
    assert_eq!(json["npu_ops"].as_u64(), Some(ops as u64));
    assert_eq!(count(&html, r#"class="cpu-row""#), 0);
    // The live-bytes reconstruction never exceeds the allocated arena.
    let peak: u64 = attr(&html, "data-peak-live-bytes")
        .unwrap()
        .parse()
        .unwrap();
    assert!(peak > 0 && peak <= json["arena_bytes"].as_u64().unwrap());
    // Self-contained: no external resources.
    for bad in ["<script", "<link", "src=\"http", "href=\"http", "url("] {
        assert!(!html.contains(bad), "page contains {bad}");
    }
}

#[test]
fn mixed_page_shows_cpu_steps_reasons_and_escapes_names() {
    // Conv2D, Reshape, Softmax, Reshape, Conv2D: with the Softmax on the CPU, two NPU steps
    // around a CPU step.
    let path = fixtures().join("cpu_fallback/softmax_wide/softmax_wide.tflite");
    let mut graph = import::load(&path).unwrap();
    let evil = r#"<script>alert("x & y")</script>"#;
    let softmax = graph
        .ops
        .iter_mut()
        .find(|o| o.kind.name() == "Softmax")
        .expect("softmax_wide has a Softmax");
    softmax.name = evil.to_string();
    // And an NPU operator's name, which shows in the bars and the operation table.
    let npu_evil = "a<b>&c";
    let conv = graph
        .ops
        .iter_mut()
        .find(|o| o.kind.name() == "Conv2D")
        .expect("softmax_wide has a Conv2D");
    conv.name = npu_evil.to_string();
    let (html, json, ops) = build(&graph, &["Softmax"], PageOptions::default());
    check_keys(&html, &json);
    assert!(json["cpu_ops"].as_u64().unwrap() >= 1);
    assert!(
        ops >= 2,
        "expected NPU operations on both sides of the CPU step"
    );
    assert_eq!(count(&html, r#"<g class="bar""#), ops);
    assert_eq!(json["npu_ops"].as_u64(), Some(ops as u64));
    // Every CPU step of the JSON split is on the page with its node and reason.
    let steps = json["split"]["steps"].as_array().unwrap();
    let cpu: Vec<&Json> = steps.iter().filter(|s| s["engine"] == "cpu").collect();
    assert!(!cpu.is_empty());
    assert_eq!(count(&html, r#"class="cpu-row""#), cpu.len());
    for s in cpu {
        let node = s["node"].as_str().unwrap();
        let reason = s["reason"].as_str().unwrap();
        assert!(html.contains(&esc(node)), "page lacks CPU node {node}");
        assert!(html.contains(&esc(reason)), "page lacks reason {reason}");
    }
    assert!(html.contains("forced to the CPU by the compile options"));
    // Names are escaped wherever they appear.
    assert!(!html.contains("<script"));
    assert!(!html.contains(npu_evil));
    assert!(html.contains("&lt;script&gt;alert(&quot;x &amp; y&quot;)&lt;/script&gt;"));
    assert!(html.contains("a&lt;b&gt;&amp;c"));
}

#[test]
fn bad_paths_are_errors() {
    let t = target();
    assert!(VelaFigures::load(Path::new("/nonexistent/vela"), &t).is_err());
    // A Vela directory of another accelerator is refused.
    let other = fixtures().join("op_conv1x1/vela/ethos-u55-64");
    if other.is_dir() {
        assert!(VelaFigures::load(&other, &t).is_err());
    }
    let args = |v: &[&str]| v.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
    let r = npu_cli::main_with(
        args(&[
            "npu",
            "report",
            "/nonexistent/model.tflite",
            "--html",
            "/tmp/npu-html-test.html",
        ]),
        npu_cli::Defaults::default(),
    );
    assert!(r.is_err());
    let r = npu_cli::main_with(
        args(&[
            "npu",
            "report",
            model("op_conv1x1").to_str().unwrap(),
            "--html",
            "/nonexistent/dir/page.html",
        ]),
        npu_cli::Defaults::default(),
    );
    assert!(r.is_err());
}

/// `npu report --per-op`: a header, one line per NPU operation (the program's, in order, with
/// the arena bytes live while it runs and where its IFM and OFM live) and the totals.
#[test]
fn per_op_table_lists_every_operation() {
    let graph = npu_build::import::load(&model("digits")).expect("digits");
    let t = target();
    for size in [false, true] {
        let options =
            npu_build::ethos_u::CompileOptions::for_target(&t).with(|o| o.optimise_size = size);
        let c = npu_build::ethos_u::compile_with(&graph, t.accelerator, &options).expect("compile");
        let table = npu_cli::compile::per_op_table(&c, &graph, &t).expect("table");
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), c.program.ops.len() + 2, "{table}");
        assert!(lines[0].contains("cycles") && lines[0].contains("live B"));
        for (k, line) in lines[1..lines.len() - 1].iter().enumerate() {
            assert!(line.trim_start().starts_with(&format!("{k} ")), "{line}");
            assert!(line.contains("r1@0x"), "{line}");
        }
        assert!(lines[lines.len() - 1].starts_with("total "));
    }
}
