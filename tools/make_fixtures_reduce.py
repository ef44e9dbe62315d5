#!/usr/bin/env python3
"""Extra reduction fixtures (branch `reduce`): attributes the shared op_sum, op_reduce_max,
op_reduce_min, op_arg_max and op_mean_channels lack -- other axes sets, keep_dims false, a
negative axis, ARG_MIN with int64 indices, MEAN over H and over (W, C).

Same pipeline as make_op_fixtures_wave2.py (whose build_one this reuses): Keras graph -> full-int8
TFLite -> tf2onnx twin -> TFLite reference outputs (BUILTIN_REF; SUM models use the default
kernels as op_sum does) -> Vela 5.2.0 for the six U55/U65 configurations only.

  python3 tools/make_fixtures_reduce.py OUT_DIR [model ...]
"""
import os, sys
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_op_fixtures_wave2 as w2
import make_vela_u85 as u85
import tensorflow as tf

u85.U85 = []                                   # the six U55/U65 configurations only

REDUCE = {
    "op_arg_min_i64": (w2.unary(lambda x: tf.argmin(x, axis=2, output_type=tf.int64)), "ARG_MIN"),
    "op_sum_w": (w2.unary(lambda x: tf.reduce_sum(x, axis=2, keepdims=False)), "SUM"),
    "op_reduce_max_hw": (w2.unary(lambda x: tf.reduce_max(x, axis=[1, 2], keepdims=False)), "REDUCE_MAX"),
    "op_reduce_min_neg_axis": (w2.unary(lambda x: tf.reduce_min(x, axis=-2, keepdims=True)), "REDUCE_MIN"),
    "op_mean_h": (w2.unary(lambda x: tf.reduce_mean(x, axis=1, keepdims=True)), "MEAN"),
    "op_mean_w_c": (w2.unary(lambda x: tf.reduce_mean(x, axis=[2, 3], keepdims=False)), "MEAN"),
}
w2.register(REDUCE)
w2.DEFAULT_KERNELS |= {"op_sum_w"}
w2.NOTES["op_sum_w"] = ("Reference outputs from TFLite's default kernels (io.json: BUILTIN), as for op_sum: "
                        "TFLite's reference int8 SUM kernel is wrong.\n")


if __name__ == "__main__":
    w2.build_each(REDUCE)
