//! The application: one inference of `op_conv1x1` on the Ethos-U55, then its PMU report, the
//! output checksum and the comparison with TFLite's reference output.

use core::fmt::Write;

use cortex_m_rt::entry;
#[cfg(feature = "noop-npu")]
use npu_rt::Npu;
#[cfg(not(feature = "noop-npu"))]
use npu_rt::ethos_u::EthosU;
#[cfg(not(any(feature = "noop-npu", feature = "no-pmu")))]
use npu_rt::ethos_u::driver::PmuConfig;

use firmware_corstone300::npy::{data as npy_data, fnv1a};
use firmware_corstone300::semihosting::{Console, exit};

// The command stream and the weights go to `.npu_rom` (DDR, see memory.x): the NPU cannot
// read the ITCM where the rest of .rodata lives.
npu_macros::include_model!(
    "../../fixtures/op_conv1x1/op_conv1x1.tflite",
    target = "ethos-u55-128",
    weights_section = ".npu_rom"
);

/// TFLite's input and output for fixture case 0, as `.npy` files (int8, 1x8x8x32 in, 1x8x8x64
/// out).
static INPUT_NPY: &[u8] = include_bytes!("../../../fixtures/op_conv1x1/io/input_0.npy");
static OUTPUT_NPY: &[u8] = include_bytes!("../../../fixtures/op_conv1x1/io/output_0.npy");

/// An NPU that does nothing: the baseline for measuring the driver's flash.
#[cfg(feature = "noop-npu")]
struct NoNpu;

#[cfg(feature = "noop-npu")]
impl Npu for NoNpu {
    fn run(&mut self, job: npu_rt::Job<'_>) -> Result<(), npu_rt::Error> {
        // Keep the job (and so the statics it points at) alive as the driver would, and let
        // the result be unknown to the optimizer so the error path stays in this build too.
        core::hint::black_box(&job);
        core::hint::black_box(Ok(()))
    }
}

/// The PMU report with event numbers instead of `PmuReport`'s event names (whose table of
/// every event's name costs flash).
#[cfg(all(
    feature = "pmu-numbers",
    not(any(feature = "noop-npu", feature = "no-pmu"))
))]
fn print_pmu_numbers(out: &mut Console, report: &npu_rt::ethos_u::driver::PmuReport) {
    let _ = writeln!(out, "Ethos-U PMU report:");
    if let Some(c) = report.cycles {
        let _ = writeln!(out, "  cycles: {c}");
    }
    for (e, c) in report.events.iter().zip(report.counts) {
        if *e != npu_rt::ethos_u::regs::PmuEvent::NoEvent {
            let _ = writeln!(out, "  event {:#04x}: {c}", e.bits());
        }
    }
}

#[entry]
fn main() -> ! {
    // cortex-m-rt turns these into `&'static mut` (this function runs once); as statics they
    // are in .bss, i.e. in the internal SRAM the NPU reaches.
    static mut ARENA: op_conv1x1::Arena = op_conv1x1::Arena::new();
    static mut OUTPUT: op_conv1x1::Output = op_conv1x1::Output::zeroed();

    let mut out = Console::new();
    let _ = writeln!(
        out,
        "{}: op_conv1x1 for {} ({} bytes of arena)",
        env!("CARGO_PKG_NAME"),
        op_conv1x1::TARGET,
        op_conv1x1::ARENA_SIZE
    );

    let mut input = op_conv1x1::Input::zeroed();
    let Some(data) = npy_data(INPUT_NPY) else {
        let _ = writeln!(out, "bad input .npy");
        out.flush();
        exit(2);
    };
    for (d, s) in input
        .serving_default_keras_tensor_161_0_flat_mut()
        .iter_mut()
        .zip(data)
    {
        *d = *s as i8;
    }

    #[cfg(not(feature = "noop-npu"))]
    // SAFETY: NPU_BASE is the Ethos-U55's register window on Corstone-300 (device memory,
    // always mapped) and nothing else in this firmware drives the NPU.
    let npu = unsafe { EthosU::new(firmware_corstone300::platform::NPU_BASE as *mut u32) }
        .with_platform(firmware_corstone300::platform::An547);
    #[cfg(not(any(feature = "noop-npu", feature = "no-pmu")))]
    let npu = npu.with_pmu(PmuConfig::DEFAULT);
    #[cfg(feature = "noop-npu")]
    let npu = NoNpu;
    let mut npu = npu;

    let status = match op_conv1x1::run_into(&mut npu, ARENA, &input, OUTPUT) {
        Ok(()) => {
            let got = OUTPUT.stateful_partitioned_call_1_0_flat();
            let sum = fnv1a(got.iter().map(|&v| v as u8));
            let _ = writeln!(out, "output checksum (FNV-1a): {sum:#010x}");
            let same = npy_data(OUTPUT_NPY).is_some_and(|want| {
                want.len() == got.len() && want.iter().zip(got).all(|(w, g)| *w == *g as u8)
            });
            let _ = writeln!(
                out,
                "output {} TFLite's reference",
                if same { "equals" } else { "DIFFERS FROM" }
            );
            if same { 0 } else { 1 }
        }
        Err(e) => {
            let _ = writeln!(out, "inference failed: {e}");
            1
        }
    };
    // The counters of the run, also of one that failed after the NPU started.
    #[cfg(not(any(feature = "noop-npu", feature = "no-pmu")))]
    if let Some(report) = npu.pmu_report() {
        #[cfg(not(feature = "pmu-numbers"))]
        let _ = write!(out, "{report}");
        #[cfg(feature = "pmu-numbers")]
        print_pmu_numbers(&mut out, report);
    }
    out.flush();
    exit(status)
}
