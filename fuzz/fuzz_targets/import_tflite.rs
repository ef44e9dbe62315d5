#![no_main]
//! Any byte string fed to the TFLite importer gives a graph or an error, never a panic.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = npu_build::import::from_bytes(data, npu_build::import::Format::Tflite, "fuzz");
});
