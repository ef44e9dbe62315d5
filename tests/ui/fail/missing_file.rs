npu_macros::include_model!("models/does_not_exist.onnx", target = "ethos-u55-128");

fn main() {}
