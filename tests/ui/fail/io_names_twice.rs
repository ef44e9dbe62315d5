// Inputs and outputs share the module's namespace.
npu_macros::include_model!("models/conv1x1.tflite", inputs = [x], outputs = [x]);

fn main() {}
