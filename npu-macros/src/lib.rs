//! `include_model!`: compiles a model at build time into a typed module (see the crate README).
