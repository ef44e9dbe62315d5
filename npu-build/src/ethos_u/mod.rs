//! The Ethos-U55/U65 backend: lower -> weights -> schedule -> alloc -> emit; perf.

pub mod alloc;
pub mod weights;
