// On an Ethos-U65 in Dedicated_Sram mode the arena is in DRAM and the intermediate feature maps
// go to the fast scratch (the NPU's SRAM), which `run` takes as a parameter of its own; on an
// Ethos-U55 (Shared_Sram) there is none. Both give the same bytes.
npu_macros::include_model!("models/digits.tflite", name = on_u65, target = "ethos-u65-256");
npu_macros::include_model!("models/digits.tflite", name = on_u55, target = "ethos-u55-256");
// A budget of 0 bytes of SRAM: everything stays in the arena, and `run` has no fast scratch.
npu_macros::include_model!(
    "models/digits.tflite",
    name = no_sram,
    target = "ethos-u65-256",
    sram_limit = 0
);

const _: () = assert!(on_u65::FAST_SCRATCH_SIZE > 0);
const _: () = assert!(on_u55::FAST_SCRATCH_SIZE == 0);
const _: () = assert!(no_sram::FAST_SCRATCH_SIZE == 0);
const _: () = assert!(core::mem::size_of::<on_u65::FastScratch>() == on_u65::FAST_SCRATCH_SIZE);

fn main() {
    let mut u65 = npu_rt::sim::VirtualNpu::new(&npu_rt::ethos_u::config::ETHOS_U65_256);
    let mut u55 = npu_rt::sim::VirtualNpu::new(&npu_rt::ethos_u::config::ETHOS_U55_256);
    let mut a = on_u65::Input::zeroed();
    let mut b = on_u55::Input::zeroed();
    let mut c = no_sram::Input::zeroed();
    for (i, v) in a.serving_default_image_0_flat_mut().iter_mut().enumerate() {
        *v = (i as i32 * 37 % 256 - 128) as i8;
    }
    b.serving_default_image_0_flat_mut()
        .copy_from_slice(a.serving_default_image_0_flat());
    c.serving_default_image_0_flat_mut()
        .copy_from_slice(a.serving_default_image_0_flat());
    let mut arena = on_u65::Arena::new();
    let mut fast = on_u65::FastScratch::new();
    let x = on_u65::run(&mut u65, &mut arena, &mut fast, &a).unwrap();
    let y = on_u55::run(&mut u55, &mut on_u55::Arena::new(), &b).unwrap();
    let z = no_sram::run(&mut u65, &mut no_sram::Arena::new(), &c).unwrap();
    assert_eq!(x.stateful_partitioned_call_1_0_flat(), y.stateful_partitioned_call_1_0_flat());
    assert_eq!(x.stateful_partitioned_call_1_0_flat(), z.stateful_partitioned_call_1_0_flat());
    // The fast scratch was used: it is not all zeros after the run.
    assert!(fast.0.iter().any(|&v| v != 0));
    // With the feature maps in SRAM the arena holds only the input and the output.
    assert!(on_u65::ARENA_SIZE < no_sram::ARENA_SIZE);
}
