#!/usr/bin/env python3
"""Extra fixtures of the matmul family (transposed convolution, BATCH_MATMUL): the attributes the shared
fixtures lack. Same pipeline as make_op_fixtures_wave2.py (Keras -> full-int8 TFLite -> tf2onnx twin -> TFLite
BUILTIN_REF reference outputs -> Vela 5.2.0), but only the six U55/U65 Vela configurations.

  /work/venv/bin/python tools/make_fixtures_matmul.py fixtures [model ...]
"""
import os, sys
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_op_fixtures_wave2 as w2
import make_fixtures as mf
import make_vela_u85 as u85
import tensorflow as tf
import keras
from keras import layers

u85.U85 = []                                   # U55/U65 only


def tconv(shape, filters, kernel, strides, padding, **kw):
    return lambda: mf.seq(shape, layers.Conv2DTranspose(filters, kernel, strides=strides, padding=padding,
                                                        bias_initializer=w2.rand_init(-0.5, 0.5), **kw))


MATMUL = {
    # Asymmetric stride 2x1, VALID, 3x2 kernel, no bias, then ReLU (the converter leaves a RELU operator).
    "op_transpose_conv_s21_valid_relu": (tconv((5, 6, 4), 6, (3, 2), (2, 1), "valid", use_bias=False,
                                               activation="relu"), "TRANSPOSE_CONV"),
    # Stride 4 above the 3x3 kernel: outputs only the bias reaches.
    "op_transpose_conv_s4_k3": (tconv((3, 4, 5), 4, 3, 4, "same"), "TRANSPOSE_CONV"),
    # (A broadcast batch axis, tf.matmul of (3, 7, 5) and (1, 5, 4), converts to a BATCH_MATMUL that
    # TFLite 2.21's own kernel refuses: "accum_dim_lhs != accum_dim_rhs".)
    # BATCH_MATMUL with adj_y (b transposed). Its vela/ dirs are not kept in fixtures/ (docs/matmul.md).
    "op_batch_matmul_adj_y": (w2.binary(lambda a, b: tf.matmul(a, b, transpose_b=True), (2, 6, 8), (2, 5, 8)),
                              "BATCH_MATMUL"),
}

w2.WAVE2.update(MATMUL)
w2.REQUIRED.update({k: v[1] for k, v in MATMUL.items()})
mf.MODELS.update({k: v[0] for k, v in MATMUL.items()})

if __name__ == "__main__":
    out = sys.argv[1]
    for name in sys.argv[2:] or list(MATMUL):
        print("building", name, flush=True)
        w2.build_one(name, out)
