npu_macros::include_model!("models/conv1x1.tflite", target = "ethos-u55-128", name = conv);

fn main() {
    // The model's input is int8, not uint8.
    let input = conv::Input {
        serving_default_keras_tensor_161_0: [[[[0u8; 32]; 8]; 8]; 1],
    };
    let _ = input;
}
