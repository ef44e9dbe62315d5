npu_macros::include_model!("models/conv1x1.tflite", target = "ethos-u55-128", optimise = "speed");

fn main() {}
