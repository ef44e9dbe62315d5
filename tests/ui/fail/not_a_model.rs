npu_macros::include_model!("models/not_a_model.bin", target = "ethos-u55-128");

fn main() {}
