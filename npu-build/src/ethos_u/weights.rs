//! Encoding of weights and per-channel scale/bias into the streams the NPU reads.
