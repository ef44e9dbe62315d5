// CUMSUM: neither the NPU nor the CPU kernels run it.
npu_macros::include_model!("models/unsupported_cumsum.tflite", target = "ethos-u55-128");

fn main() {}
