npu_macros::include_model!();

fn main() {}
