npu_macros::include_model!("models/conv1x1.tflite", target = "ethos-u55-128", name = conv);
npu_macros::include_model!("models/fc.onnx", target = "ethos-u55-128", name = fc);

fn main() {
    let mut npu = npu_rt::sim::VirtualNpu::new(&npu_rt::ethos_u::config::ETHOS_U55_128);
    let mut conv_arena = conv::Arena::new();
    let mut fc_arena = fc::Arena::new();
    let features = conv::run(&mut npu, &mut conv_arena, &conv::Input::zeroed()).unwrap();
    // conv's Output ([1, 8, 8, 64]) is not fc's Input ([1, 64]).
    let _ = fc::run(&mut npu, &mut fc_arena, &features);
}
