//! Accelerator configurations, system configurations and memory modes.
