#!/usr/bin/env python3
"""Extra fixtures of branch `movea` (data movement I): the attributes the shared fixtures lack.

Same pipeline and layout as make_op_fixtures_wave2.py (whose build_one this reuses): Keras graph ->
full-int8 TFLite -> tf2onnx twin -> TFLite BUILTIN_REF reference outputs -> Vela 5.2.0 for the six
U55/U65 configurations only (make_fixtures.ACCELERATORS; no U85 directories).

  /work/venv/bin/python tools/make_fixtures_movea.py fixtures [model ...]
"""
import os, subprocess, sys
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_op_fixtures_wave2 as w2
import make_vela_u85 as u85
import tensorflow as tf
import keras
from keras import layers

u85.U85 = []                                   # only the six U55/U65 configurations


def flatten_dense():
    """Keras Flatten on a dynamic batch: the converter writes SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE."""
    inp = keras.Input(shape=(4, 4, 8))
    x = layers.Flatten()(inp)
    return keras.Model(inp, layers.Dense(10)(x))


def concat_w():
    a = keras.Input(shape=(4, 3, 8), batch_size=1)
    b = keras.Input(shape=(4, 5, 8), batch_size=1)
    return keras.Model([a, b], layers.Concatenate(axis=2)([a, b]))


MOVEA = {
    # Masks: negative stride on H, shrink + channel step, ellipsis, new axis, clamped negative indices.
    "op_strided_slice_masks": (w2.multi_output((8, 8, 16), lambda x: [
        x[:, ::-1, 2:7:2, :],
        x[:, 3, :, ::3],
        x[..., -5:-1],
        x[:, tf.newaxis, 1:3],
        x[:, -3:, -20:5],
    ]), "STRIDED_SLICE"),
    "op_slice_to_end": (w2.unary(lambda x: tf.slice(x, [0, 2, 0, 5], [-1, -1, 3, -1])), "SLICE"),
    "op_split_h": (w2.multi_output((8, 8, 16), lambda x: tf.split(x, 4, axis=1)), "SPLIT"),
    "op_split_v_w": (w2.multi_output((8, 8, 16), lambda x: tf.split(x, [3, -1], axis=2)), "SPLIT_V"),
    "op_pack_last": (w2.binary(lambda a, b: tf.stack([a, b], axis=3), (8, 16)), "PACK"),
    "op_unpack_last": (w2.multi_output((4, 8, 3), lambda x: tf.unstack(x, axis=3)), "UNPACK"),
    "op_flatten_shape": (flatten_dense, "SHAPE"),
    "op_concat_w": (concat_w, "CONCATENATION"),
}

w2.WAVE2.update(MOVEA)
w2.mf.MODELS.update({k: v[0] for k, v in MOVEA.items()})
w2.REQUIRED.update({k: v[1] for k, v in MOVEA.items()})


def main():
    if sys.argv[1] == "--one":
        w2.build_one(sys.argv[3], sys.argv[2])
        return
    out = sys.argv[1]
    for name in sys.argv[2:] or list(MOVEA):
        print("building", name, flush=True)
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", out, name])
        if r.returncode:
            print(f"FAILED {name}: exit status {r.returncode}", flush=True)


if __name__ == "__main__":
    main()
