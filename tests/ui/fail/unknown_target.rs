npu_macros::include_model!("models/conv1x1.tflite", target = "ethos-u55-1024");

fn main() {}
