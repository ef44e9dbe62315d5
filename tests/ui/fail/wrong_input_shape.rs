npu_macros::include_model!("models/conv1x1.tflite", target = "ethos-u55-128", name = conv);

fn main() {
    let mut npu = npu_rt::sim::VirtualNpu::new(&npu_rt::ethos_u::config::ETHOS_U55_128);
    let mut arena = conv::Arena::new();
    // The model takes [1, 8, 8, 32]; this is [1, 8, 8, 16].
    let input = conv::Input {
        serving_default_keras_tensor_161_0: [[[[0i8; 16]; 8]; 8]; 1],
    };
    let _ = conv::run(&mut npu, &mut arena, &input);
}
