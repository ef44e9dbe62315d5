npu_macros::include_model!(
    "models/conv1x1.tflite",
    target = "ethos-u55-128",
    target = "ethos-u65-256"
);

fn main() {}
