//! A small int8 CNN trained on scikit-learn's handwritten digits (`tools/train_digits.py`),
//! compiled by `include_model!` while rustc expands the macro, run on the virtual Ethos-U55-128
//! over the whole held-out set (360 images the training never saw).
//!
//! It prints the accuracy, a confusion matrix and a few digits drawn as text with their
//! predictions, checks that every output (all ten logits of every image) equals the output of
//! TFLite's reference kernels, and shows what the NPU did. Exits non-zero on any mismatch.
//!
//! `cargo run --release -p digits` (with `-- --predictions`: only the line of predicted digits,
//! one per image, that the Cortex-M55 firmware `digits-qemu` prints too, for comparing them).

mod npy;

use std::process::ExitCode;

use npu_rt::ethos_u::config::ETHOS_U55_128;
use npu_rt::sim::VirtualNpu;

// The ONNX file (tf2onnx's conversion of the TFLite model); the reference outputs come from
// TFLite, so a match also shows the two importers agree. `inputs`/`outputs` name the generated
// fields instead of the exporter's `serving_default_image_0`.
npu_macros::include_model!(
    "../../fixtures/digits/digits.onnx",
    target = "ethos-u55-128",
    inputs = [image],
    outputs = [logits]
);

/// The held-out split, quantized to the model's input (int8, [N, 8, 8, 1]).
static IMAGES: &[u8] = include_bytes!("../../../fixtures/digits/test/images.npy");
/// The true digit of each image (uint8, [N]).
static LABELS: &[u8] = include_bytes!("../../../fixtures/digits/test/labels.npy");
/// TFLite's int8 logits for each image, from its reference kernels (int8, [N, 10]).
static TFLITE_LOGITS: &[u8] = include_bytes!("../../../fixtures/digits/test/tflite_logits.npy");
/// What the training script measured (float accuracy among it).
static TRAIN_REPORT: &str = include_str!("../../../fixtures/digits/test/train_report.json");

/// The first index of the largest logit (numpy's `argmax`).
fn argmax(v: &[i8]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best
}

/// A number field of the training report.
fn report_number(key: &str) -> Option<f64> {
    let at = TRAIN_REPORT.find(&format!("\"{key}\""))?;
    let rest = TRAIN_REPORT[at + key.len() + 2..].trim_start_matches([':', ' ']);
    let end = rest.find([',', '\n', '}']).unwrap_or(rest.len());
    rest[..end].trim().parse().ok()
}

/// 8x8 images side by side, each pixel two characters wide, darker = more ink.
fn draw(images: &[(&[i8], String)]) {
    const RAMP: &[u8] = b" .:-=+*#%@";
    for (_, caption) in images {
        print!("  {caption:<18}");
    }
    println!();
    for row in 0..8 {
        for (img, _) in images {
            print!("  ");
            for col in 0..8 {
                let v = (i32::from(img[row * 8 + col]) + 128) as usize; // 0..=255
                let c = RAMP[v * (RAMP.len() - 1) / 255] as char;
                print!("{c}{c}");
            }
            print!("  ");
        }
        println!();
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("digits: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<bool, String> {
    let only_predictions = std::env::args().skip(1).any(|a| a == "--predictions");
    let images = npy::parse(IMAGES, "|i1").map_err(|e| format!("images.npy: {e}"))?;
    let labels = npy::parse(LABELS, "|u1").map_err(|e| format!("labels.npy: {e}"))?;
    let want = npy::parse(TFLITE_LOGITS, "|i1").map_err(|e| format!("tflite_logits.npy: {e}"))?;
    let n = labels.shape.first().copied().unwrap_or(0);
    let per_image = digits::image::ELEMENTS;
    let classes = digits::logits::ELEMENTS;
    if images.shape.iter().product::<usize>() != n * per_image
        || want.shape != [n, classes]
        || classes != 10
    {
        return Err(format!(
            "held-out set shapes {:?} / {:?} / {:?} do not fit the model ({per_image} pixels in, {classes} logits out)",
            images.shape, labels.shape, want.shape
        ));
    }

    let say = !only_predictions;
    if say {
        println!(
            "digits: a CNN trained on handwritten digits, compiled by include_model! for {} ({}): {} operations on the NPU, {} on the CPU",
            digits::TARGET,
            digits::SYSTEM_CONFIG,
            digits::NPU_OPERATIONS,
            digits::CPU_OPERATIONS,
        );
        println!(
            "  input `image` {:?} int8 (scale {}, zero point {}), output `logits` {:?}; arena {} bytes, weights {} bytes, command stream {} bytes",
            digits::image::SHAPE,
            digits::image::SCALE,
            digits::image::ZERO_POINT,
            digits::logits::SHAPE,
            digits::ARENA_SIZE,
            digits::WEIGHTS.0.len(),
            digits::COMMAND_STREAM.0.len(),
        );
        println!("  running the {n} held-out images on the virtual Ethos-U55-128 ...");
    }

    let mut npu = VirtualNpu::new(&ETHOS_U55_128);
    let mut arena = digits::Arena::new();
    let mut input = digits::Input::zeroed();
    let mut output = digits::Output::zeroed();
    let mut confusion = [[0u32; 10]; 10];
    let (mut correct, mut tflite_correct, mut exact) = (0, 0, 0);
    let mut mismatches = Vec::new();
    let mut shown: Vec<(usize, usize)> = Vec::new(); // (image, prediction)
    let mut wrong: Vec<(usize, usize)> = Vec::new();
    let mut predictions = String::with_capacity(n);
    let started = std::time::Instant::now();
    for k in 0..n {
        let pixels = &images.data[k * per_image..(k + 1) * per_image];
        for (d, &s) in input.image_flat_mut().iter_mut().zip(pixels) {
            *d = s as i8;
        }
        digits::run_into(&mut npu, &mut arena, &input, &mut output)
            .map_err(|e| format!("image {k}: {e}"))?;
        let got = output.logits_flat();
        let reference: Vec<i8> = want.data[k * classes..(k + 1) * classes]
            .iter()
            .map(|&b| b as i8)
            .collect();
        if got == reference.as_slice() {
            exact += 1;
        } else {
            mismatches.push((k, got.to_vec(), reference.clone()));
        }
        let label = usize::from(labels.data[k]);
        let predicted = argmax(got);
        predictions.push(char::from(b'0' + predicted as u8));
        if label > 9 {
            return Err(format!("image {k}: label {label} is not a digit"));
        }
        confusion[label][predicted] += 1;
        correct += usize::from(predicted == label);
        tflite_correct += usize::from(argmax(&reference) == label);
        if predicted == label && shown.len() < 4 && !shown.iter().any(|&(_, p)| p == predicted) {
            shown.push((k, predicted));
        } else if predicted != label && wrong.len() < 3 {
            wrong.push((k, predicted));
        }
    }
    let elapsed = started.elapsed();
    if only_predictions {
        println!("predictions: {predictions}");
        return Ok(mismatches.is_empty());
    }

    let image_of = |k: usize| -> Vec<i8> {
        images.data[k * per_image..(k + 1) * per_image]
            .iter()
            .map(|&b| b as i8)
            .collect()
    };
    let pictures: Vec<(Vec<i8>, String)> = shown
        .iter()
        .chain(&wrong)
        .map(|&(k, p)| {
            let label = labels.data[k];
            let verdict = if usize::from(label) == p {
                "ok"
            } else {
                "WRONG"
            };
            (image_of(k), format!("#{k}: {label} -> {p} {verdict}"))
        })
        .collect();
    println!();
    println!("some held-out images (#index: true digit -> predicted digit):");
    draw(
        &pictures
            .iter()
            .map(|(img, c)| (img.as_slice(), c.clone()))
            .collect::<Vec<_>>(),
    );

    println!();
    let pct = |c: usize| 100.0 * c as f64 / n as f64;
    println!(
        "accuracy on the virtual NPU: {correct}/{n} = {:.2}%   (TFLite int8: {:.2}%, Keras float: {})",
        pct(correct),
        pct(tflite_correct),
        report_number("float_accuracy")
            .map(|a| format!("{:.2}%", a * 100.0))
            .unwrap_or_else(|| "?".into())
    );
    println!("confusion matrix (rows: true digit, columns: predicted; '.' = 0):");
    println!(
        "       {}",
        (0..10).map(|d| format!("{d:>4}")).collect::<String>()
    );
    for (d, row) in confusion.iter().enumerate() {
        let cells: String = row
            .iter()
            .map(|&c| {
                if c == 0 {
                    format!("{:>4}", ".")
                } else {
                    format!("{c:>4}")
                }
            })
            .collect();
        println!("    {d}: {cells}");
    }
    println!();
    if let Some(stats) = npu.last_stats() {
        let est = digits::ESTIMATED_NPU_CYCLES;
        println!(
            "NPU per inference: {} operations, {} MACs, {} bytes read, {} bytes written",
            stats.ops.len(),
            stats.macs,
            stats.bytes_read.iter().sum::<u64>(),
            stats.bytes_written.iter().sum::<u64>()
        );
        println!(
            "  estimated on {} at {} MHz ({}): {est} cycles = {:.1} us per image",
            digits::TARGET,
            digits::NPU_CLOCK_HZ / 1_000_000,
            digits::SYSTEM_CONFIG,
            est as f64 * 1e6 / digits::NPU_CLOCK_HZ.max(1) as f64
        );
    }
    println!(
        "  the simulator took {:.1} ms for {n} images ({:.0} us each) on this host",
        elapsed.as_secs_f64() * 1e3,
        elapsed.as_secs_f64() * 1e6 / n.max(1) as f64
    );
    if mismatches.is_empty() {
        println!(
            "every output equals TFLite's: {exact}/{n} images, all {classes} logits of each bit-exact (so every prediction is TFLite's)"
        );
        Ok(true)
    } else {
        for (k, got, reference) in mismatches.iter().take(5) {
            println!("image {k}: logits {got:?}, TFLite {reference:?}");
        }
        println!(
            "MISMATCH: {} of {n} outputs differ from TFLite's",
            mismatches.len()
        );
        Ok(false)
    }
}
