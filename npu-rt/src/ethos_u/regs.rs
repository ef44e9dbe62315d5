//! Command-stream opcodes and register fields of Ethos-U55/U65.
