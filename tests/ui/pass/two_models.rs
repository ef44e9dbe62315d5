// Two models in one crate, each in its own module, one NPU.
npu_macros::include_model!("models/conv1x1.tflite", target = "ethos-u55-128", name = conv);
npu_macros::include_model!("models/fc.onnx", target = "ethos-u55-128", name = fc);

fn main() {
    let mut npu = npu_rt::sim::VirtualNpu::new(&npu_rt::ethos_u::config::ETHOS_U55_128);
    let mut a = conv::Arena::new();
    let mut b = fc::Arena::new();
    conv::run(&mut npu, &mut a, &conv::Input::zeroed()).unwrap();
    fc::run(&mut npu, &mut b, &fc::Input::zeroed()).unwrap();
}
