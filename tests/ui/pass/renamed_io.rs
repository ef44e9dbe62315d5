// `inputs`/`outputs` name the generated fields and modules instead of the exporter's names.
npu_macros::include_model!(
    "models/conv1x1.tflite",
    inputs = [features],
    outputs = [activations]
);

fn main() {
    let mut npu = npu_rt::sim::VirtualNpu::new(&npu_rt::ethos_u::config::ETHOS_U55_128);
    let mut arena = Box::new(conv1x1::Arena::new());
    let mut input = conv1x1::Input::zeroed();
    assert_eq!(conv1x1::features::SHAPE, [1, 8, 8, 32]);
    input.features_flat_mut().fill(3);
    let output = conv1x1::run(&mut npu, &mut arena, &input).unwrap();
    assert_eq!(conv1x1::activations::SHAPE, [1, 8, 8, 64]);
    assert_eq!(output.activations.len(), 1);
    assert_eq!(output.activations_flat().len(), 8 * 8 * 64);
    assert!(conv1x1::ESTIMATED_NPU_CYCLES > 0);
    assert_eq!(conv1x1::NPU_OPERATIONS, 1);
    assert_eq!(conv1x1::CPU_OPERATIONS, 0);
}
