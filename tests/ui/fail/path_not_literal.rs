const MODEL: &str = "models/conv1x1.tflite";

npu_macros::include_model!(MODEL, target = "ethos-u55-128");

fn main() {}
