// The model's arena needs 6144 bytes.
npu_macros::include_model!("models/conv1x1.tflite", target = "ethos-u55-128", sram_limit = "4K");

fn main() {}
