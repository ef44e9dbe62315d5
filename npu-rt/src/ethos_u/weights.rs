//! The NPU weight stream (compressed weights) and scale/bias stream formats.
