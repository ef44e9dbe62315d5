//! The digits model (`fixtures/digits`) on a Cortex-M55 under QEMU's `mps3-an547`: every
//! operator on the `no_std` CPU kernels, over the whole held-out set, each image's ten logits
//! compared with TFLite's (which the host's virtual NPU reproduces bit for bit). It also tries
//! the NPU build of the same model first: QEMU does not model the Ethos-U, so that must fail
//! cleanly with "no Ethos-U answered".
//!
//! Prints the predictions (one digit per image, the line `cargo run -p digits -- --predictions`
//! prints on the host), the accuracy, the stack high-water mark and the instructions of one
//! inference per CPU operator, measured with SysTick under `-icount shift=0`. Exit status 0
//! only if every output is bit-exact and the NPU path failed the expected way (or ran and
//! matched, on a system with an NPU).
//!
//! ```text
//! cargo build --release -p firmware-corstone300 --target thumbv8m.main-none-eabihf --bin digits-qemu
//! qemu-system-arm -M mps3-an547 -nographic -icount shift=0 \
//!     -semihosting-config enable=on,target=native \
//!     -kernel target/thumbv8m.main-none-eabihf/release/digits-qemu
//! ```
#![cfg_attr(target_os = "none", no_std)]
#![cfg_attr(target_os = "none", no_main)]

#[cfg(target_os = "none")]
mod app {
    use core::fmt::Write;

    use cortex_m_rt::entry;
    use firmware_corstone300::semihosting::{Console, exit};
    use firmware_corstone300::{npy, platform, stack, systick};
    use npu_rt::ethos_u::EthosU;
    use npu_rt::{Error, Job, Npu};

    // The same model twice: for the Ethos-U55 (its statics where the NPU reads them, see
    // memory.x), and with every operator on the CPU kernels.
    npu_macros::include_model!(
        "../../fixtures/digits/digits.tflite",
        name = digits_npu,
        target = "ethos-u55-128",
        weights_section = ".npu_rom",
        inputs = [image],
        outputs = [logits]
    );
    npu_macros::include_model!(
        "../../fixtures/digits/digits.tflite",
        name = digits_cpu,
        target = "ethos-u55-128",
        cpu = [
            "Conv2D",
            "DepthwiseConv2D",
            "MaxPool",
            "Mean",
            "FullyConnected"
        ],
        inputs = [image],
        outputs = [logits]
    );

    static IMAGES: &[u8] = include_bytes!("../../../../fixtures/digits/test/images.npy");
    static LABELS: &[u8] = include_bytes!("../../../../fixtures/digits/test/labels.npy");
    static TFLITE_LOGITS: &[u8] =
        include_bytes!("../../../../fixtures/digits/test/tflite_logits.npy");

    const MAX_STEPS: usize = 16;

    /// The "NPU" of the CPU-only build: it is never asked to run a command stream; it times
    /// each CPU operator with SysTick when `timing` is set.
    struct CpuOnly {
        timing: bool,
        ticks: [u32; MAX_STEPS],
        ops: [&'static str; MAX_STEPS],
        steps: usize,
    }

    impl Npu for CpuOnly {
        fn run(&mut self, _: Job<'_>) -> Result<(), Error> {
            // Every operator of digits_cpu is on the CPU: no command stream exists.
            Err(Error::NoDevice { base: 0, id: 0 })
        }

        fn cpu_op(
            &mut self,
            step: usize,
            op: &'static str,
            kernel: &mut dyn FnMut() -> Result<(), Error>,
        ) -> Result<(), Error> {
            if !self.timing {
                return kernel();
            }
            let (result, ticks) = systick::measure(kernel);
            if let (Some(t), Some(o)) = (self.ticks.get_mut(step), self.ops.get_mut(step)) {
                *t = ticks;
                *o = op;
                self.steps = self.steps.max(step + 1);
            }
            result
        }
    }

    fn argmax(v: &[i8]) -> usize {
        (0..v.len()).fold(0, |best, i| if v[i] > v[best] { i } else { best })
    }

    #[entry]
    fn main() -> ! {
        // cortex-m-rt turns these into `&'static mut` (this function runs once); as statics
        // they are in .bss, in the SRAM the NPU reaches.
        static mut NPU_ARENA: digits_npu::Arena = digits_npu::Arena::new();
        static mut CPU_ARENA: digits_cpu::Arena = digits_cpu::Arena::new();

        let mut out = Console::new();
        let (Some(images), Some(labels), Some(want)) = (
            npy::data(IMAGES),
            npy::data(LABELS),
            npy::data(TFLITE_LOGITS),
        ) else {
            let _ = writeln!(out, "bad .npy data");
            out.flush();
            exit(2)
        };
        let pixels = digits_cpu::image::ELEMENTS;
        let classes = digits_cpu::logits::ELEMENTS;
        let n = labels.len();
        if images.len() != n * pixels || want.len() != n * classes {
            let _ = writeln!(out, "held-out set sizes do not fit the model");
            out.flush();
            exit(2)
        }
        let _ = writeln!(
            out,
            "digits-qemu: {n} held-out images, model compiled for {} ({} NPU operations) and for the CPU ({} CPU operations, arena {} bytes)",
            digits_npu::TARGET,
            digits_npu::NPU_OPERATIONS,
            digits_cpu::CPU_OPERATIONS,
            digits_cpu::ARENA_SIZE
        );
        systick::start();
        let per_1000_ticks = systick::calibrate(100_000);
        let _ = writeln!(
            out,
            "SysTick: {per_1000_ticks} instructions per 1000 ticks (measured on a 200,000-instruction loop)"
        );
        let mut status = 0;

        // The NPU build first, on image 0.
        let mut input = digits_npu::Input::zeroed();
        for (d, &s) in input.image_flat_mut().iter_mut().zip(&images[..pixels]) {
            *d = s as i8;
        }
        // SAFETY: NPU_BASE is the Ethos-U55's register window on Corstone-300 (device memory,
        // always mapped; on QEMU's mps3-an547 it reads as zero) and nothing else in this
        // firmware drives the NPU.
        let mut npu =
            unsafe { EthosU::new(platform::NPU_BASE as *mut u32) }.with_platform(platform::An547);
        match digits_npu::run(&mut npu, NPU_ARENA, &input) {
            Ok(output) => {
                let same = output
                    .logits_flat()
                    .iter()
                    .zip(&want[..classes])
                    .all(|(g, w)| *g as u8 == *w);
                let _ = writeln!(
                    out,
                    "NPU path: ran; image 0 {} TFLite's",
                    if same { "equals" } else { "DIFFERS FROM" }
                );
                if !same {
                    status = 1;
                }
            }
            Err(e @ Error::NoDevice { .. }) => {
                let _ = writeln!(
                    out,
                    "NPU path: {e} (expected: QEMU does not model the Ethos-U)"
                );
            }
            Err(e) => {
                let _ = writeln!(out, "NPU path: FAILED: {e}");
                status = 1;
            }
        }

        // Every operator on the CPU: one timed inference, then the whole set.
        stack::paint();
        let mut cpu = CpuOnly {
            timing: true,
            ticks: [0; MAX_STEPS],
            ops: [""; MAX_STEPS],
            steps: 0,
        };
        let mut input = digits_cpu::Input::zeroed();
        let mut output = digits_cpu::Output::zeroed();
        let insns = |ticks: u32| u64::from(ticks) * per_1000_ticks / 1000;
        for (d, &s) in input.image_flat_mut().iter_mut().zip(&images[..pixels]) {
            *d = s as i8;
        }
        let (r, total) =
            systick::measure(|| digits_cpu::run_into(&mut cpu, CPU_ARENA, &input, &mut output));
        if let Err(e) = r {
            let _ = writeln!(out, "CPU inference failed: {e}");
            out.flush();
            exit(1)
        }
        let _ = writeln!(
            out,
            "one inference on the CPU kernels: {} instructions ({total} SysTick ticks)",
            insns(total)
        );
        for k in 0..cpu.steps {
            let _ = writeln!(
                out,
                "  step {k} {:<16} {:>9} instructions",
                cpu.ops[k],
                insns(cpu.ticks[k])
            );
        }
        cpu.timing = false;

        let (mut mismatches, mut correct) = (0, 0);
        let _ = write!(out, "predictions: ");
        for k in 0..n {
            for (d, &s) in input
                .image_flat_mut()
                .iter_mut()
                .zip(&images[k * pixels..(k + 1) * pixels])
            {
                *d = s as i8;
            }
            if let Err(e) = digits_cpu::run_into(&mut cpu, CPU_ARENA, &input, &mut output) {
                let _ = writeln!(out, "\nimage {k}: {e}");
                out.flush();
                exit(1)
            }
            let got = output.logits_flat();
            let reference = &want[k * classes..(k + 1) * classes];
            if got.iter().zip(reference).any(|(g, w)| *g as u8 != *w) {
                mismatches += 1;
            }
            let p = argmax(got);
            correct += usize::from(p == usize::from(labels[k]));
            let _ = write!(out, "{p}");
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "accuracy: {correct}/{n}; outputs equal to TFLite's: {}/{n}",
            n - mismatches
        );
        let _ = writeln!(out, "stack high-water mark: {} bytes", stack::high_water());
        if mismatches > 0 {
            status = 1;
        }
        let _ = writeln!(out, "{}", if status == 0 { "PASS" } else { "FAIL" });
        out.flush();
        exit(status)
    }
}

/// Host builds have nothing to run.
#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("digits-qemu is firmware: build it with --target thumbv8m.main-none-eabihf");
    std::process::exit(2);
}
