//! Accelerator configurations (MACs, cores, shared buffer) of Ethos-U55/U65 variants.
