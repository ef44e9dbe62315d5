// A softmax over 5120 values is beyond the NPU (its int32 exponent sum may overflow past 4095
// terms). With `cpu_fallback = false` that is a compile error naming the operator and the reason.
npu_macros::include_model!(
    "models/softmax_wide.tflite",
    target = "ethos-u55-128",
    cpu_fallback = false
);

fn main() {}
