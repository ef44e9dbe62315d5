#!/usr/bin/env python3
"""int16 (16x8) LOGISTIC and TANH fixtures beyond the shared op_logistic_int16: TANH, input ranges wide enough
to saturate TFLite's table, and the power-of-two input scales TFLite and Vela treat specially.

Same pipeline as make_op_fixtures_wave2.py (16x8 conversion, tf2onnx twin stamped opset 21, TFLite BUILTIN_REF
reference outputs on 3 seeded inputs uniform over int16, Vela 5.2.0 for the six U55/U65 configurations), except:
  * the calibration range is the model's own (RANGE), so the input scale is range / 32767;
  * the *_all models are [1, 64, 64, 16]: their io/input_0.npy is every int16 value once (-32768 .. 32767 in
    order) and io/output_0.npy TFLite's answer for it, an exhaustive check of the operator at that scale;
  * the *_pot models have their input scale rewritten to a power of two (POT), where TFLite multiplies the raw
    input by 3 << shift instead of rescaling it (LogisticPrepare / TanhPrepare), and Vela writes that scale.

  python3 tools/make_fixtures_int16.py OUT_DIR [model ...]
"""
import os, sys
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_op_fixtures_wave2 as w2
import make_vela_u85 as u85
import numpy as np
import tensorflow as tf

u85.U85 = []                                   # the six U55/U65 configurations only

MODELS = {
    # name: (shape, function, calibration range, rewritten input scale or None)
    "op_tanh_int16": ((8, 8, 16), tf.tanh, 1.0, None),
    "op_logistic_int16_all": ((64, 64, 16), tf.sigmoid, 12.0, None),
    "op_tanh_int16_all": ((64, 64, 16), tf.tanh, 6.0, None),
    "op_logistic_int16_pot": ((8, 8, 16), tf.sigmoid, 8.0, 1.0 / 4096),
    "op_tanh_int16_pot": ((8, 8, 16), tf.tanh, 8.0, 1.0 / 2048),
}


def convert(name, rng):
    shape, fn, hi, _ = MODELS[name]
    return w2.to_tflite_16x8(w2.seq(shape, w2.tf_op(fn)), rng, hi)


def set_input_scale(scale):
    def fn(m):
        sg = m.subgraphs[0]
        for i in sg.inputs:
            sg.tensors[i].quantization.scale = [scale]
    return fn


def exhaustive_input_0(tfl, io_dir):
    """io/input_0.npy := every int16 value, io/output_0.npy := TFLite's reference output for it."""
    it = tf.lite.Interpreter(tfl, experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    d = it.get_input_details()[0]
    assert int(np.prod(d["shape"])) == 65536, d["shape"]
    x = np.arange(-32768, 32768, dtype=np.int16).reshape(d["shape"])
    it.set_tensor(d["index"], x)
    it.invoke()
    np.save(f"{io_dir}/input_0.npy", x)
    np.save(f"{io_dir}/output_0.npy", it.get_tensor(it.get_output_details()[0]["index"]))


def build_one(name, out):
    import shutil
    d = os.path.join(out, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    tfl = os.path.join(d, name + ".tflite")
    buf = convert(name, np.random.default_rng(0))
    pot = MODELS[name][3]
    if pot is not None:
        buf = w2.rewrite(buf, set_input_scale(pot))
    open(tfl, "wb").write(buf)
    print("  tflite ops:", " ".join(w2.tflite_ops(tfl)), flush=True)
    onnx_path = w2.onnx_twin(tfl, d, name)
    if onnx_path and w2.int16_qdq_opset21(onnx_path):
        print("  onnx: int16 Q/DQ, model stamped opset 21", flush=True)
    io_dir = os.path.join(d, "io")
    w2.reference_io(tfl, io_dir, kernel_order=("BUILTIN_REF",))
    if name.endswith("_all"):
        exhaustive_input_0(tfl, io_dir)
    w2.vela_report(tfl, d)


if __name__ == "__main__":
    w2.build_each(MODELS, build_one)
