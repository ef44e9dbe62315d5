// An SRAM budget below the model's natural arena (3072 bytes for digits on a U55): the compiler
// stripes chains of operations until it fits, and the output stays the same bytes.
npu_macros::include_model!("models/digits.tflite", name = whole, target = "ethos-u55-128");
npu_macros::include_model!(
    "models/digits.tflite",
    name = tight,
    target = "ethos-u55-128",
    sram_limit = 2048
);
npu_macros::include_model!(
    "models/digits.tflite",
    name = small,
    target = "ethos-u55-128",
    optimise = "size"
);

const _: () = assert!(whole::ARENA_SIZE > 2048);
const _: () = assert!(tight::ARENA_SIZE <= 2048);
const _: () = assert!(small::ARENA_SIZE <= tight::ARENA_SIZE);

fn main() {
    let mut npu = npu_rt::sim::VirtualNpu::new(&npu_rt::ethos_u::config::ETHOS_U55_128);
    for seed in 0..4i32 {
        let mut a = whole::Input::zeroed();
        for (i, v) in a.serving_default_image_0_flat_mut().iter_mut().enumerate() {
            *v = ((i as i32 * 37 + seed * 11) % 256 - 128) as i8;
        }
        let mut b = tight::Input::zeroed();
        b.serving_default_image_0_flat_mut()
            .copy_from_slice(a.serving_default_image_0_flat());
        let mut c = small::Input::zeroed();
        c.serving_default_image_0_flat_mut()
            .copy_from_slice(a.serving_default_image_0_flat());
        let x = whole::run(&mut npu, &mut whole::Arena::new(), &a).unwrap();
        let y = tight::run(&mut npu, &mut tight::Arena::new(), &b).unwrap();
        let z = small::run(&mut npu, &mut small::Arena::new(), &c).unwrap();
        assert_eq!(x.stateful_partitioned_call_1_0_flat(), y.stateful_partitioned_call_1_0_flat());
        assert_eq!(x.stateful_partitioned_call_1_0_flat(), z.stateful_partitioned_call_1_0_flat());
    }
}
