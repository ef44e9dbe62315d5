// One output, two names.
npu_macros::include_model!("models/conv1x1.tflite", outputs = [a, b]);

fn main() {}
