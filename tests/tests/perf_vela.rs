//! The performance estimator against Arm's: for Vela's command stream of every fixture and
//! accelerator configuration, `npu_build::ethos_u::perf` with Vela's accounting
//! ([`Options::VELA`]: LUT loads free) must land within 20% of the `cycles_total` Vela reports
//! for the same stream (`summary.csv`), under the system configuration and memory mode Vela
//! compiled for (`meta.json`). The default estimate may exceed it only by the time of the LUT
//! loads, which Vela leaves out.
//!
//! Prints one row per stream (estimates, Vela, ratios) and the geometric mean of the ratios
//! (`cargo test -p npu-tests --test perf_vela -- --nocapture`).

use std::path::Path;

use npu_build::ethos_u::perf::{Options, estimate_stream, estimate_stream_with};
use npu_build::target::Target;
use npu_tests::vela::{summary_value, u55_u65_dirs};

/// Largest accepted |estimate / Vela - 1|.
const TOLERANCE: f64 = 0.20;

/// Models whose Vela streams the estimator is known to time outside [`TOLERANCE`] (moveb):
/// Vela's TRANSPOSE is a 1x1 AVERAGE pool with a real OFM scale (`2^31 + 1 >> 31`) and swapped
/// OFM strides, which the estimator charges as a rescaling average pool (792 cycles on
/// ethos-u55-128) where Vela reports 96 compute and 128 total cycles (docs/permutes.md).
/// Entries are a model (every configuration) or `model/accelerator`.
/// `op_arg_max/ethos-u55-32`: Vela's ARG_MAX is a chain of int16 operations with 16-bit
/// interpolating LUTs that the simulator does not model yet (docs/reduce.md); since the LUT-load
/// accounting of stand-alone table operations changed (docs/act.md) the estimate of that chain is
/// 1.21x Vela's on ethos-u55-32 only (within 20% on the five other configurations); not
/// investigated further.
const KNOWN_OUTLIERS: [&str; 2] = ["op_transpose", "op_arg_max/ethos-u55-32"];

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
    for (model, accel, dir) in u55_u65_dirs() {
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
        let outlier = KNOWN_OUTLIERS
            .iter()
            .any(|m| r.name == *m || r.name.starts_with(&format!("{m}/")));
        if outlier {
            // Kept visible: the day the estimate agrees, this list must shrink.
            if (ratio - 1.0).abs() <= TOLERANCE {
                bad.push(format!(
                    "{}: listed as an outlier but within {ratio:.3}",
                    r.name
                ));
            }
        } else if (ratio - 1.0).abs() > TOLERANCE {
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
    // op_sum: Vela's stream is wrong (docs/reduce.md): its convolution keeps the previous
    // operation's 128-wide IFM/OFM registers and computes 8x the elements Vela's own estimate
    // counts, so the estimate of the stream as it runs cannot agree with Vela's figure.
    let rows = compare(|model, _| model.starts_with("op_") && model != "op_sum");
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

/// Hand-checked cases of the cost model and the timeline, and malformed streams.
mod hand_checked {
    use super::*;
    use npu_build::ethos_u::perf::model::{self, Memories};
    use npu_rt::ethos_u::regs::{Cmd0, Cmd1};

    /// A command stream under construction.
    #[derive(Default)]
    struct Stream(Vec<u32>);

    impl Stream {
        fn c0(&mut self, op: Cmd0, param: u16) -> &mut Self {
            self.0.push(op.encode(param));
            self
        }
        fn c1(&mut self, op: Cmd1, value: u64) -> &mut Self {
            self.0.extend(op.encode_address(value));
            self
        }
        fn bytes(&self) -> Vec<u8> {
            self.0.iter().flat_map(|w| w.to_le_bytes()).collect()
        }
    }

    fn u55_128() -> Target {
        Target::for_accelerator("ethos-u55-128").unwrap()
    }

    /// The registers of a 1x1 convolution 8x8x32 -> 8x8x`depth` (NHWC, int8) with an 8x8x32
    /// block, weights and scales in the arena, starting at OFM channel `first`.
    fn conv1x1(s: &mut Stream, first: u64, depth: u16) {
        s.c0(Cmd0::SET_IFM_REGION, 1)
            .c1(Cmd1::SET_IFM_BASE0, 0x1000)
            .c0(Cmd0::SET_IFM_HEIGHT0_M1, 7)
            .c0(Cmd0::SET_IFM_HEIGHT1_M1, 7)
            .c0(Cmd0::SET_IFM_WIDTH0_M1, 7)
            .c0(Cmd0::SET_IFM_DEPTH_M1, 31)
            .c1(Cmd1::SET_IFM_STRIDE_X, 32)
            .c1(Cmd1::SET_IFM_STRIDE_Y, 256)
            .c0(Cmd0::SET_IFM_PRECISION, 1)
            .c0(Cmd0::SET_OFM_REGION, 1)
            .c1(Cmd1::SET_OFM_BASE0, first)
            .c0(Cmd0::SET_OFM_HEIGHT_M1, 7)
            .c0(Cmd0::SET_OFM_WIDTH_M1, 7)
            .c0(Cmd0::SET_OFM_DEPTH_M1, depth - 1)
            .c1(Cmd1::SET_OFM_STRIDE_X, 64)
            .c1(Cmd1::SET_OFM_STRIDE_Y, 512)
            .c0(Cmd0::SET_OFM_PRECISION, 1)
            .c0(Cmd0::SET_WEIGHT_REGION, 1)
            .c1(Cmd1::SET_WEIGHT_LENGTH, 16 * u64::from(depth))
            .c0(Cmd0::SET_SCALE_REGION, 1)
            .c1(Cmd1::SET_SCALE_LENGTH, 10 * u64::from(depth))
            .c0(Cmd0::SET_ACTIVATION_MIN, 0xff80)
            .c0(Cmd0::SET_ACTIVATION_MAX, 0x7f)
            .c0(Cmd0::SET_OFM_BLK_HEIGHT_M1, 7)
            .c0(Cmd0::SET_OFM_BLK_WIDTH_M1, 7)
            .c0(Cmd0::SET_OFM_BLK_DEPTH_M1, 31)
            .c0(Cmd0::OP_CONV, 0);
    }

    /// The worked example of docs/performance.md (Vela's `cycles_npu` for op_conv1x1 on
    /// U55-128): an AO-bound 8x8x32 -> 8x8x64 1x1 convolution in two 8x8x32 blocks.
    #[test]
    fn conv1x1_compute_cycles_by_hand() {
        let mut s = Stream::default();
        conv1x1(&mut s, 0, 64);
        let e = estimate_stream(&s.bytes(), &u55_128()).unwrap();
        let c = &e.ops[0].cost;
        // ublock 1x2x8: 8x4x4 micro-blocks per block, MAC = max(32, 4*32) * 1 step * 4 = 512.
        assert_eq!(c.mac_per_block, 512);
        // AO = 0.5 cycles per element x 2048.
        assert_eq!(c.ao, 1024);
        assert_eq!(c.blocks, 2.0);
        // First IFM block 32 + 2048/8; last OFM block 32 + 2048*(32/16)/8 (16-byte bursts of a
        // 32-deep block in 64-deep rows, SRAM bursts are 32 bytes); AO-bound:
        // 1024 * 2 + 512 + 544 + 288.
        assert_eq!(c.compute, 3392);
        assert_eq!(e.macs, 8 * 8 * 64 * 32);
        assert_eq!(e.total_cycles, c.cycles());
        assert!((e.time_ms() - c.cycles() as f64 / 500e6 * 1e3).abs() < 1e-12);
    }

    /// Two 32-channel slices of the same convolution are costed as the 64-channel one, shared
    /// half and half.
    #[test]
    fn depth_slices_cost_as_one_operation() {
        let mut whole = Stream::default();
        conv1x1(&mut whole, 0, 64);
        let mut sliced = Stream::default();
        conv1x1(&mut sliced, 0, 32);
        conv1x1(&mut sliced, 32, 32);
        let t = u55_128();
        let w = estimate_stream(&whole.bytes(), &t).unwrap();
        let s = estimate_stream(&sliced.bytes(), &t).unwrap();
        assert_eq!(s.ops.len(), 2);
        assert_eq!(s.compute_cycles, w.compute_cycles);
        assert_eq!(s.total_cycles, w.total_cycles);
        assert_eq!(s.ops[0].cost.compute, w.ops[0].cost.compute / 2);
        assert_eq!(s.macs, w.macs);
        // Not adjacent in depth: two operations, each paying its own first and last block.
        let mut apart = Stream::default();
        conv1x1(&mut apart, 0, 32);
        conv1x1(&mut apart, 4096, 32);
        let a = estimate_stream(&apart.bytes(), &t).unwrap();
        assert!(a.compute_cycles > w.compute_cycles);
    }

    /// A DMA the operation waits for delays it; one issued after the operation starts overlaps.
    #[test]
    fn dma_overlap_and_waits() {
        let t = u55_128();
        let mut op_only = Stream::default();
        conv1x1(&mut op_only, 0, 64);
        let op = estimate_stream(&op_only.bytes(), &t).unwrap().total_cycles;
        // 4096 bytes flash -> SRAM: 4096 / 1 + 64 cycles of flash latency.
        let dma = |s: &mut Stream| {
            s.c0(Cmd0::SET_DMA0_SRC_REGION, 0)
                .c0(Cmd0::SET_DMA0_DST_REGION, 1)
                .c1(Cmd1::SET_DMA0_LEN, 4096)
                .c0(Cmd0::OP_DMA_START, 0);
        };
        let mut before = Stream::default();
        dma(&mut before);
        before.c0(Cmd0::OP_DMA_WAIT, 0);
        conv1x1(&mut before, 0, 64);
        let e = estimate_stream(&before.bytes(), &t).unwrap();
        assert_eq!(e.dmas[0].cost.cycles, 4096 + 64);
        assert_eq!(e.total_cycles, 4160 + op);
        assert_eq!(e.stall_cycles, 4160);
        let mut after = Stream::default();
        conv1x1(&mut after, 0, 64);
        dma(&mut after);
        let e = estimate_stream(&after.bytes(), &t).unwrap();
        assert_eq!(e.total_cycles, op.max(4160));
        assert_eq!(e.dmas[0].start, 0);
        // A kernel wait holds the DMA until the operation ends.
        let mut waited = Stream::default();
        conv1x1(&mut waited, 0, 64);
        waited.c0(Cmd0::OP_KERNEL_WAIT, 0);
        dma(&mut waited);
        let e = estimate_stream(&waited.bytes(), &t).unwrap();
        assert_eq!(e.dmas[0].start, op);
        assert_eq!(e.total_cycles, op + 4160);
    }

    /// LUT loads (DMA into the shared buffer) are timed by default and free in Vela's accounting.
    #[test]
    fn lut_loads_by_option() {
        let mut s = Stream::default();
        s.c0(Cmd0::SET_DMA0_SRC_REGION, 0)
            .c0(Cmd0::SET_DMA0_DST_REGION, 0x100)
            .c1(Cmd1::SET_DMA0_LEN, 1024)
            .c0(Cmd0::OP_DMA_START, 0)
            .c0(Cmd0::OP_DMA_WAIT, 0);
        conv1x1(&mut s, 0, 64);
        let t = u55_128();
        let timed = estimate_stream(&s.bytes(), &t).unwrap();
        let free = estimate_stream_with(&s.bytes(), &t, Options::VELA).unwrap();
        assert!(timed.dmas[0].lut);
        // Flash (1 byte/cycle, latency 64) into the shared buffer (1 byte/cycle).
        assert_eq!(timed.dmas[0].cost.cycles, 1024 + 64);
        assert_eq!(timed.total_cycles, free.total_cycles + 1088);
    }

    /// The region placement follows the memory mode.
    #[test]
    fn regions_follow_memory_mode() {
        let shared = Memories::new(&u55_128());
        assert_eq!(shared.list[shared.of_region(0)].name, "OffChipFlash");
        assert_eq!(shared.list[shared.of_region(1)].name, "Sram");
        assert_eq!(shared.list[shared.of_region(2)].name, "Sram");
        let dedicated = Memories::new(&Target::for_accelerator("ethos-u65-256").unwrap());
        assert_eq!(dedicated.list[dedicated.of_region(0)].name, "Dram");
        assert_eq!(dedicated.list[dedicated.of_region(1)].name, "Dram");
        assert_eq!(dedicated.list[dedicated.of_region(2)].name, "Sram");
        assert_eq!(dedicated.list[dedicated.of_region(1)].bandwidth, 3.75);
        assert_eq!(dedicated.list[model::SHRAM].name, "Shram");
    }

    /// Malformed input is an error naming the offset, never a panic: truncated words, an
    /// undefined elementwise mode, and random register values before every operation.
    #[test]
    fn malformed_streams_are_errors_not_panics() {
        let t = u55_128();
        let err = estimate_stream(&[0, 0, 0], &t).unwrap_err().to_string();
        assert!(err.contains("offset"), "{err}");
        let mut s = Stream::default();
        s.c0(Cmd0::OP_ELEMENTWISE, 0x3f);
        let err = estimate_stream(&s.bytes(), &t).unwrap_err().to_string();
        assert!(err.contains("0x0") && err.contains("elementwise"), "{err}");

        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let targets: Vec<Target> = npu_build::target::ACCELERATOR_NAMES
            .iter()
            .map(|n| Target::for_accelerator(n).unwrap())
            .collect();
        for round in 0..300 {
            let mut s = Stream::default();
            for _ in 0..120 {
                let r = next();
                if r % 3 == 0 {
                    let op = Cmd1::ALL[(r >> 8) as usize % Cmd1::ALL.len()];
                    s.c1(op, next() >> (r % 40));
                } else {
                    let op = Cmd0::ALL[(r >> 8) as usize % Cmd0::ALL.len()];
                    if op != Cmd0::OP_STOP {
                        s.c0(op, (next() >> (r % 48)) as u16);
                    }
                }
            }
            let target = &targets[round % targets.len()];
            if let Ok(e) = estimate_stream(&s.bytes(), target) {
                let last = e.ops.iter().map(|o| o.end).max().unwrap_or(0);
                assert!(e.total_cycles >= last);
                let sum = e
                    .ops
                    .iter()
                    .fold(0u64, |a, o| a.saturating_add(o.cost.compute));
                assert_eq!(sum, e.compute_cycles);
            }
        }
    }
}
