//! Register-file model of the control interface (filled in by a later milestone).
