npu_macros::include_model!("models/conv1x1.tflite", sram_limit = "lots");

fn main() {}
