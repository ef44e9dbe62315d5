npu_macros::include_model!(
    "models/conv1x1.tflite",
    target = "ethos-u55-128",
    system_config = "Ethos_U55_Ultra_Embedded"
);

fn main() {}
