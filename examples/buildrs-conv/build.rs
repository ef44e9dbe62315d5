//! Compiles models/conv3x3.tflite into $OUT_DIR/conv3x3.rs. Target, memory mode and SRAM limit
//! come from [package.metadata.npu] in Cargo.toml.

fn main() {
    if let Err(e) = npu_build::Model::new("models/conv3x3.tflite").compile() {
        // A readable build failure instead of a panic backtrace.
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
