npu_macros::include_model!("models/conv1x1.tflite", target = 128);

fn main() {}
