"""TFLite 2.21 reference tables (BUILTIN_REF) of single activation operators for scales the
shared fixtures lack, and the act_* models of tests/tests/data/tflite_extra (argument: that
directory)."""
import json, os, sys

import numpy as np
import tensorflow as tf
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "tools"))
import make_fixtures as mf  # noqa: E402  (quantize: the full-int8 converter settings)
R = tf.lite.experimental.OpResolverType
# Scratch directory for the converted models and their tables.
GEN = os.environ.get("ACT_GEN", "/tmp/act_gen")
os.makedirs(GEN, exist_ok=True)

def convert(fn, lo, hi, shape=(1, 4, 4, 16)):
    @tf.function(input_signature=[tf.TensorSpec(shape, tf.float32)])
    def f(x):
        return fn(x)
    def rep():
        rng = np.random.default_rng(0)
        for _ in range(20):
            yield [rng.uniform(lo, hi, size=shape).astype(np.float32)]
        yield [np.full(shape, lo, np.float32)]
        yield [np.full(shape, hi, np.float32)]
    return mf.quantize(tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f), rep)

def table(model, ref=True):
    it = tf.lite.Interpreter(model_content=model, experimental_op_resolver_type=(R.BUILTIN_REF if ref else R.BUILTIN))
    it.allocate_tensors()
    i = it.get_input_details()[0]; o = it.get_output_details()[0]
    ops = [d['op_name'] for d in it._get_ops_details()]
    n = int(np.prod(i['shape']))
    x = np.resize(np.arange(-128, 128, dtype=np.int8), n).reshape(i['shape'])
    it.set_tensor(i['index'], x); it.invoke()
    y = it.get_tensor(o['index']).reshape(-1)[:256]
    return ops, i['quantization'], o['quantization'], [int(v) for v in y]

cases = [
    ("logistic_wide", tf.math.sigmoid, -12.0, 9.0),
    ("tanh_narrow", tf.math.tanh, -0.7, 1.3),
    ("hard_swish_wide", lambda x: x * tf.nn.relu6(x + 3.0) / 6.0, -9.0, 11.0),
    ("hard_swish_narrow", lambda x: x * tf.nn.relu6(x + 3.0) / 6.0, -0.4, 0.5),
    ("leaky_relu_03", lambda x: tf.nn.leaky_relu(x, 0.3), -3.0, 2.0),
    ("leaky_relu_neg", lambda x: tf.nn.leaky_relu(x, -0.5), -4.0, 1.0),
    ("leaky_relu_15", lambda x: tf.nn.leaky_relu(x, 1.5), -1.0, 6.0),
    ("gelu_tanh", lambda x: tf.nn.gelu(x, approximate=True), -5.0, 4.0),
    ("gelu_erf_wide", lambda x: tf.nn.gelu(x, approximate=False), -9.0, 7.0),
    ("exp_neg", tf.math.exp, -6.0, 0.5),
    ("log_pos", lambda x: tf.math.log(tf.nn.relu(x) + 0.01), 0.0, 5.0),
    ("swish", lambda x: x * tf.math.sigmoid(x), -6.0, 5.0),
    ("rsqrt_pos", lambda x: tf.math.rsqrt(tf.nn.relu(x) + 0.05), 0.0, 4.0),
    ("sqrt_pos", lambda x: tf.math.sqrt(tf.nn.relu(x) + 0.05), 0.0, 4.0),
]
out = {}
for name, fn, lo, hi in cases:
    m = convert(fn, lo, hi)
    open(f"{GEN}/{name}.tflite", "wb").write(m)
    ops, iq, oq, t = table(m)
    out[name] = dict(ops=ops, iq=[float(iq[0]), int(iq[1])], oq=[float(oq[0]), int(oq[1])], table=t)
    print(name, ops, iq, oq, file=sys.stderr)
json.dump(out, open(GEN + "/tables.json", "w"))

# Extra conformance models for tests/tests/data/tflite_extra (act_*): input 0 is every int8
# value (so the whole table is checked), inputs 1 and 2 random.
root = sys.argv[1] if len(sys.argv) > 1 else None
if root:
    for name, fn, lo, hi in cases:
        m = open(f"{GEN}/{name}.tflite", "rb").read()
        d = os.path.join(root, "act_" + name)
        os.makedirs(d, exist_ok=True)
        open(os.path.join(d, f"act_{name}.tflite"), "wb").write(m)
        it = tf.lite.Interpreter(model_content=m, experimental_op_resolver_type=R.BUILTIN_REF)
        it.allocate_tensors()
        i = it.get_input_details()[0]; o = it.get_output_details()[0]
        n = int(np.prod(i['shape']))
        rng = np.random.default_rng(7)
        xs = [np.resize(np.arange(-128, 128, dtype=np.int8), n).reshape(i['shape'])] + [
            rng.integers(-128, 128, size=i['shape'], dtype=np.int8) for _ in range(2)]
        for k, x in enumerate(xs):
            it.set_tensor(i['index'], x); it.invoke()
            np.save(os.path.join(d, f"input_{k}_0.npy"), x)
            np.save(os.path.join(d, f"output_{k}_0.npy"), it.get_tensor(o['index']))
