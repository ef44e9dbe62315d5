//! int8 kernels for operators that run on the CPU.
