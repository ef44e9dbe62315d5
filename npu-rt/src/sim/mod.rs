//! Virtual Ethos-U: executes command streams bit-exactly (feature `sim`).
