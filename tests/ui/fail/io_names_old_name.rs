// After renaming, the exporter's name is gone.
npu_macros::include_model!("models/conv1x1.tflite", inputs = [image], outputs = [logits]);

fn main() {
    let input = conv1x1::Input::zeroed();
    let _ = input.serving_default_keras_tensor_161_0;
}
