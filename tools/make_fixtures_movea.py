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


def strided_slice_rewritten(out):
    """op_strided_slice_rewritten: the masks the converter never writes (it canonicalizes ellipsis
    and new axes away, and never sets `offset`). op_strided_slice.tflite's STRIDED_SLICE is
    rewritten into four STRIDED_SLICE operators of the same input, one output each, through
    TFLite's own schema (object API); TFLite's BUILTIN_REF kernels then give the reference."""
    import numpy as np
    from tensorflow.lite.python import schema_py_generated as s
    import flatbuffers
    name = "op_strided_slice_rewritten"
    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.join(here, "..", "fixtures", "op_strided_slice", "op_strided_slice.tflite")
    m = s.ModelT.InitFromObj(s.Model.GetRootAsModel(open(src, "rb").read(), 0))
    sg = m.subgraphs[0]
    proto = sg.operators[0]
    x = proto.inputs[0]
    out_proto = sg.tensors[proto.outputs[0]]
    # (begin, end, strides, begin_mask, end_mask, ellipsis, new_axis, shrink, offset, out shape)
    specs = [
        ([0, 2], [0, 10], [1, 3], 0, 0, 1, 0, 0, False, [1, 8, 8, 3]),            # x[..., 2:10:3]
        ([0, 0, 1, 0, 5], [1, 0, 7, 0, 6], [1, 1, 2, 1, 1], 0, 0, 8, 2, 17, False,
         [1, 3, 8]),                                                             # x[0, newaxis, 1:7:2, ..., 5]
        ([0, 1, 0, 4], [1, 6, 8, 8], [1, 1, 2, 1], 0, 0, 0, 0, 0, True, [1, 6, 4, 8]),  # offset: ends relative
        ([0, -2, 7, 0], [0, 0, 2, 0], [1, -3, -2, -5], 9, 11, 0, 0, 0, False,
         [1, 3, 3, 4]),                                                          # x[:, -2::-3, 7:2:-2, ::-5]
    ]
    def const(vals, nm):
        b = s.BufferT()
        b.data = np.array(vals, dtype=np.int32).tobytes()
        m.buffers.append(b)
        t = s.TensorT()
        t.shape = np.array([len(vals)], dtype=np.int32)
        t.type = s.TensorType.INT32
        t.buffer = len(m.buffers) - 1
        t.name = nm.encode()
        sg.tensors.append(t)
        return len(sg.tensors) - 1
    ops, outs = [], []
    for k, (b, e, st, bm, em, el, na, sh, off, shape) in enumerate(specs):
        ins = [x, const(b, f"begin_{k}"), const(e, f"end_{k}"), const(st, f"strides_{k}")]
        t = s.TensorT()
        t.shape = np.array(shape, dtype=np.int32)
        t.type = out_proto.type
        t.buffer = 0
        t.name = f"out_{k}".encode()
        t.quantization = out_proto.quantization
        sg.tensors.append(t)
        o = s.OperatorT()
        o.opcodeIndex = proto.opcodeIndex
        o.inputs = ins
        o.outputs = [len(sg.tensors) - 1]
        o.builtinOptionsType = s.BuiltinOptions.StridedSliceOptions
        opt = s.StridedSliceOptionsT()
        opt.beginMask, opt.endMask, opt.ellipsisMask = bm, em, el
        opt.newAxisMask, opt.shrinkAxisMask, opt.offset = na, sh, off
        o.builtinOptions = opt
        ops.append(o)
        outs.append(len(sg.tensors) - 1)
    sg.operators = ops
    sg.outputs = outs
    fb = flatbuffers.Builder(0)
    fb.Finish(m.Pack(fb), b"TFL3")
    buf = bytes(fb.Output())
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    tfl = os.path.join(d, name + ".tflite")
    open(tfl, "wb").write(buf)
    open(os.path.join(d, "NOTES.txt"), "w").write(strided_slice_rewritten.__doc__.strip() + "\n")
    w2.reference_io(tfl, os.path.join(d, "io"))
    w2.vela_report(tfl, d)


def main():
    if sys.argv[1] == "--rewritten":
        strided_slice_rewritten(sys.argv[2])
        return
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
