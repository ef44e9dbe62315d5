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
import make_fixtures as mf
import tensorflow as tf

u85.U85 = []                                   # U55/U65 only

MOVEB = {
    "op_mirror_pad_symmetric": (w2.unary(lambda x: tf.pad(x, [[0, 0], [2, 3], [3, 1], [0, 0]], mode="SYMMETRIC"),
                                         (6, 6, 8)), "MIRROR_PAD"),
    "op_transpose_nchw": (w2.unary(lambda x: tf.transpose(x, [0, 3, 1, 2]), (4, 6, 8)), "TRANSPOSE"),
    "op_tile_wc": (w2.unary(lambda x: tf.tile(x, [1, 1, 2, 3]), (3, 4, 5)), "TILE"),
    "op_reverse_hc": (w2.unary(lambda x: tf.reverse(x, axis=[1, 3]), (4, 5, 6)), "REVERSE_V2"),
    "op_gather_h": (w2.unary(lambda x: tf.gather(x, [7, 0, 0, 3, 5], axis=1)), "GATHER"),
    "op_depth_to_space_b3": (w2.unary(lambda x: tf.nn.depth_to_space(x, 3), (2, 3, 18)), "DEPTH_TO_SPACE"),
    "op_space_to_depth_b3": (w2.unary(lambda x: tf.nn.space_to_depth(x, 3), (6, 9, 2)), "SPACE_TO_DEPTH"),
}
w2.WAVE2.update(MOVEB)
mf.MODELS.update({k: v[0] for k, v in MOVEB.items()})
w2.REQUIRED.update({k: v[1] for k, v in MOVEB.items()})


def main():
    out = sys.argv[1]
    for name in sys.argv[2:] or list(MOVEB):
        print("building", name, flush=True)
        w2.build_one(name, out)


if __name__ == "__main__":
    main()
