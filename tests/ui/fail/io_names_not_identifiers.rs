npu_macros::include_model!("models/conv1x1.tflite", inputs = ["image"]);

fn main() {}
