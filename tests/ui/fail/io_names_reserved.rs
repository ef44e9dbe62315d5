// `run` is the generated function's name.
npu_macros::include_model!("models/conv1x1.tflite", inputs = [run]);

fn main() {}
