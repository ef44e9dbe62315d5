#!/usr/bin/env python3
"""Extra single-operator fixtures for the permutes and gathers (branch moveb): the attribute values the shared
fixtures (op_transpose, op_tile, op_mirror_pad, op_reverse, op_gather, op_depth_to_space, op_space_to_depth) lack.

Same pipeline as make_op_fixtures_wave2.py (whose build_one this reuses): Keras graph -> full-int8 TFLite ->
tf2onnx twin -> TFLite BUILTIN_REF reference outputs -> Vela 5.2.0 for the six U55/U65 configurations only
(the U85 ones are not built here).

  /work/venv/bin/python tools/make_fixtures_moveb.py fixtures [model ...]
"""
import os, sys
sys.dont_write_bytecode = True
os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_op_fixtures_wave2 as w2
import make_vela_u85 as u85
import tensorflow as tf

u85.U85 = []                                   # U55/U65 only

# Built and kept in fixtures/. Tried and left out (see docs/permutes.md):
#  * op_mirror_pad_symmetric (SYMMETRIC pads on 1x6x6x8): tf2onnx emulates SYMMETRIC with float
#    arithmetic our ONNX importer does not take, and every op_ fixture needs its ONNX twin;
#  * op_transpose_nchw (perm [0, 3, 1, 2] on 1x4x6x8): our emitter's BLOCKDEP differs from Vela's
#    on its 1x1 copies (tests/emit_vela.rs);
#  * op_reverse_hc (axes [1, 3]): TFLite's REVERSE_V2 rejects non-contiguous axes.
MOVEB = {
    "op_tile_wc": (w2.unary(lambda x: tf.tile(x, [1, 1, 2, 3]), (3, 4, 5)), "TILE"),
}
w2.register(MOVEB)


if __name__ == "__main__":
    w2.build_each(MOVEB)
