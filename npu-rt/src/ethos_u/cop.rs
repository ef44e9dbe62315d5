//! The COP1 driver payload (header, driver actions, command stream).
