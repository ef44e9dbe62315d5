#!/usr/bin/env python3
"""ONNX models as they are quantized in the wild: float networks quantized by onnxruntime's
`quantize_static` in both formats (QDQ and QOperator), with uint8 or int8 activations (U8S8,
S8S8), int8 or uint8 weights (U8U8: asymmetric per tensor), per-channel or per-tensor. Reference outputs come from onnxruntime on the
quantized model; the expectation is agreement within one output quantization step (onnxruntime
requantizes in float, the NPU in fixed point).

  /work/venv/bin/python tools/make_onnx_wild.py fixtures/onnx_wild [name ...]

Per model NAME: OUT/NAME/NAME.onnx, io/input_K.npy (float32), io/output_K.npy (float32,
onnxruntime), io/io.json (output_step, format, activation type, per_channel).

  /work/venv/bin/python tools/make_onnx_wild.py --mnv3 fixtures/onnx_wild
A keras.applications MobileNetV3Small (96x96, random weights, BatchNormalization statistics
calibrated on the calibration distribution), tf2onnx (NCHW input), quantized by onnxruntime:
mnv3s_qdq_s8s8_pc, mnv3s_qdq_u8u8_pt, mnv3s_qop_u8s8_pc (with --all: the eight QDQ/QOperator x
S8S8/U8S8 x per-channel/per-tensor variants, then --noopt and tools/compare_ort.py on OUT).

  /work/venv/bin/python tools/make_onnx_wild.py --noopt fixtures/onnx_wild
Adds io/output_noopt_K.npy to every onnxruntime model: onnxruntime with graph optimizations
disabled, which evaluates the QDQ graph node by node (DequantizeLinear, the float operator,
QuantizeLinear) instead of its fused QLinear* kernels.

  /work/venv/bin/python tools/make_onnx_wild.py --tf2onnx fixtures/onnx_wild
tf2onnx's conversion of an int8 TFLite Keras classifier with trained-like (nonzero) biases:
OUT/tf2onnx_classifier/{tf2onnx_classifier.tflite, .onnx, io/} with TFLite's reference outputs
(make_fixtures.py's pipeline): bit-exact expectation. tf2onnx writes its dense layers as a QDQ
MatMul, a float bias Add and a QuantizeLinear."""
import json, os, sys
import numpy as np
import onnx
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_ort_fixtures import Builder, Reader, graph_model, quantize_with_io  # noqa: E402


def shuffle_cnn(b):
    """PyTorch-style NCHW network: conv, depthwise, residual add, channel shuffle
    (Reshape-Transpose-Reshape), a sigmoid gate, max pool, global pool, Flatten + Gemm, Softmax."""
    x = b.conv("input", 3, 16, 3, 2)
    x = b.conv(x, 16, 16, 3, 1, groups=16, act="relu6")
    y = b.conv(x, 16, 16, 1, act=None)
    x = b.op("Add", [x, y])
    shape1 = b.name("shape")
    b.inits.append(onnx.numpy_helper.from_array(np.array([1, 2, 8, 8, 8], np.int64), shape1))
    shape2 = b.name("shape")
    b.inits.append(onnx.numpy_helper.from_array(np.array([1, 16, 8, 8], np.int64), shape2))
    x = b.op("Reshape", [x, shape1])
    x = b.op("Transpose", [x], perm=[0, 2, 1, 3, 4])
    x = b.op("Reshape", [x, shape2])
    g = b.conv(x, 16, 16, 1, act=None)
    g = b.op("Sigmoid", [g])
    x = b.op("Mul", [x, g])
    x = b.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = b.conv(x, 16, 24, 3, 1)
    x = b.op("GlobalAveragePool", [x])
    x = b.op("Flatten", [x], axis=1)
    w = b.const(b.rng.normal(0, 0.2, size=(10, 24)), "fc_w")
    bb = b.const(b.rng.normal(0, 0.1, size=(10,)), "fc_b")
    x = b.op("Gemm", [x, w, bb], transB=1)
    return b.op("Softmax", [x], axis=1), (1, 3, 16, 16), (1, 10)


def mlp(b):
    """MatMul + bias Add layers (how tf2onnx and torch export Linear without Gemm), a tanh."""
    w1 = b.const(b.rng.normal(0, 0.3, size=(32, 24)), "w")
    b1 = b.const(b.rng.normal(0, 0.1, size=(24,)), "b")
    x = b.op("Add", [b.op("MatMul", ["input", w1]), b1])
    x = b.op("Relu", [x])
    w2 = b.const(b.rng.normal(0, 0.3, size=(24, 16)), "w")
    b2 = b.const(b.rng.normal(0, 0.1, size=(16,)), "b")
    x = b.op("Add", [b.op("MatMul", [x, w2]), b2])
    x = b.op("Tanh", [x])
    w3 = b.const(b.rng.normal(0, 0.3, size=(16, 8)), "w")
    b3 = b.const(b.rng.normal(0, 0.1, size=(8,)), "b")
    return b.op("Add", [b.op("MatMul", [x, w3]), b3]), (1, 32), (1, 8)


def act_mix(b):
    """ONNX-only activation forms with no TFLite twin, as exporters write them after a
    convolution: hard-swish as x * HardSigmoid(x), swish as x * Sigmoid(x), GELU's Erf expansion
    0.5 x (1 + Erf(x / sqrt 2)). (onnxruntime leaves ReduceSum in float, so it is not here.)"""
    x = b.conv("input", 3, 8, 3, 1, act=None)
    x = b.op("Mul", [x, b.op("HardSigmoid", [x])])
    x = b.op("Mul", [x, b.op("Sigmoid", [x])])
    e = b.op("Erf", [b.op("Div", [x, b.const(np.array(np.sqrt(2.0)), "sqrt2")])])
    g = b.op("Mul", [b.op("Mul", [x, b.op("Add", [e, b.const(np.array(1.0), "one")])]),
                     b.const(np.array(0.5), "half")])
    return g, (1, 3, 8, 8), (1, 8, 8, 8)


def linear(b, x, din, dout, p):
    """torch.nn.Linear as torch.onnx writes it without Gemm: MatMul + bias Add."""
    w = b.const(b.rng.normal(0, 1 / np.sqrt(din), size=(din, dout)), p + "_w")
    bb = b.const(b.rng.normal(0, 0.1, size=(dout,)), p + "_b")
    return b.op("Add", [b.op("MatMul", [x, w]), bb])


def layer_norm(b, x, d):
    g = b.const(1 + b.rng.normal(0, 0.1, size=(d,)), "ln_g")
    be = b.const(b.rng.normal(0, 0.1, size=(d,)), "ln_b")
    return b.op("LayerNormalization", [x, g, be], axis=-1, epsilon=1e-5)


def encoder(b, t=16, d=32, heads=2):
    """A pre-norm transformer encoder block as torch.onnx exports one (opset 17): LayerNormalization,
    Q/K/V Linear, heads by Reshape + Transpose, scores by MatMul of two activations, Div by
    sqrt(d_head), Softmax, attention MatMul, output Linear, residual Add, a GELU MLP in its Erf
    form, a final LayerNormalization, mean over tokens and a classifier."""
    x = "input"
    h = layer_norm(b, x, d)
    q, k, v = (linear(b, h, d, d, p) for p in ("q", "k", "v"))
    dh = d // heads

    def shape(vals):
        n = b.name("shape")
        b.inits.append(onnx.numpy_helper.from_array(np.array(vals, np.int64), n))
        return n

    def split_heads(z):
        return b.op("Transpose", [b.op("Reshape", [z, shape([1, t, heads, dh])])], perm=[0, 2, 1, 3])

    q, k, v = split_heads(q), split_heads(k), split_heads(v)
    s = b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])])
    s = b.op("Div", [s, b.const(np.array(np.sqrt(dh)), "sqrt_dh")])
    o = b.op("MatMul", [b.op("Softmax", [s], axis=-1), v])
    o = b.op("Reshape", [b.op("Transpose", [o], perm=[0, 2, 1, 3]), shape([1, t, d])])
    x = b.op("Add", [x, linear(b, o, d, d, "o")])
    h = linear(b, layer_norm(b, x, d), d, 2 * d, "ff1")
    e = b.op("Erf", [b.op("Div", [h, b.const(np.array(np.sqrt(2.0)), "sqrt2")])])
    h = b.op("Mul", [b.op("Mul", [h, b.op("Add", [e, b.const(np.array(1.0), "one")])]),
                     b.const(np.array(0.5), "half")])
    x = b.op("Add", [x, linear(b, h, 2 * d, d, "ff2")])
    x = b.op("ReduceMean", [layer_norm(b, x, d)], axes=[1], keepdims=0)
    return linear(b, x, d, 10, "head"), (1, t, d), (1, 10)


def upsample(b):
    """A decoder step as PyTorch exports one (NCHW): conv, bilinear Resize x2 (half_pixel, the
    default of nn.Upsample(align_corners=False)), a Sigmoid gate, conv."""
    x = b.conv("input", 3, 8, 3, 1)
    roi = b.const(np.zeros(0), "roi")
    scales = b.const(np.array([1.0, 1.0, 2.0, 2.0]), "scales")
    x = b.op("Resize", [x, roi, scales], mode="linear", coordinate_transformation_mode="half_pixel")
    x = b.op("Mul", [x, b.op("Sigmoid", [x])])
    return b.conv(x, 8, 4, 3, 1, act=None), (1, 3, 8, 8), (1, 4, 16, 16)


BASES = {"shuffle_cnn": shuffle_cnn, "mlp": mlp, "act_mix": act_mix, "encoder": encoder,
         "upsample": upsample}
# Operators onnxruntime quantizes in the `islands` variants (`op_types_to_quantize`): the rest
# (LayerNormalization, Div, Softmax, Erf, Mul, Transpose, Reshape, ReduceMean) stays float. The
# `floatmm` variant quantizes only Add: every MatMul stays float too.
ISLANDS = ["MatMul", "Add"]
FORMATS = {"qdq": QuantFormat.QDQ, "qop": QuantFormat.QOperator}
# activation type, weight type: U8U8 is onnxruntime's asymmetric uint8 weights (per-tensor zero
# points anywhere in 0..255; per channel it makes them symmetric, zero point 128).
ACTS = {"u8s8": (QuantType.QUInt8, QuantType.QInt8), "s8s8": (QuantType.QInt8, QuantType.QInt8),
        "u8u8": (QuantType.QUInt8, QuantType.QUInt8)}


def variants():
    for base in BASES:
        if base == "encoder":
            # onnxruntime keeps LayerNormalization's QDQ node in float; `islands` leaves more.
            for act in ("s8s8", "u8s8"):
                yield f"{base}_qdq_{act}_pt", base, "qdq", act, False
            yield f"{base}_qdq_s8s8_islands", base, "qdq", "s8s8", False
            yield f"{base}_qdq_s8s8_floatmm", base, "qdq", "s8s8", False
            continue
        if base == "upsample":
            # Resize quantized by onnxruntime, and left in float (only Conv quantized).
            yield f"{base}_qdq_u8s8_pt", base, "qdq", "u8s8", False
            yield f"{base}_qdq_s8s8_floatresize", base, "qdq", "s8s8", False
            continue
        if base == "act_mix":
            # QDQ only (the forms are what QDQ exporters write), per tensor.
            for act in ("s8s8", "u8s8"):
                yield f"{base}_qdq_{act}_pt", base, "qdq", act, False
            continue
        for fmt in FORMATS:
            for act in ACTS:
                for pc in ("pc", "pt"):
                    yield f"{base}_{fmt}_{act}_{pc}", base, fmt, act, pc == "pc"


# Where the importer, following onnxruntime's default session, differs from onnxruntime's
# node-by-node evaluation (output_noopt_K.npy).
SOFTMAX_STEPS = ("{n} step(s): onnxruntime's default session runs the QDQ Softmax as its "
                 "QLinearSoftmax kernel (a table of exp values, f32 sums, and floor(1 / "
                 "output_scale): 254 for 1/255), which the importer reproduces for "
                 "onnxruntime-quantized models; the node-by-node evaluation computes the float "
                 "softmax")


def build(base):
    return graph_model(base, Builder(7), BASES[base])


def output_step(q):
    """Scale of the DequantizeLinear producing the graph output (None if the output is float)."""
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in q.graph.initializer}
    last = next((n for n in q.graph.node if q.graph.output[0].name in n.output), None)
    if last is not None and last.op_type == "DequantizeLinear":
        return float(inits[last.input[1]])
    return None


def main():
    out = sys.argv[1]
    want = set(sys.argv[2:])
    tmp = os.path.join(out, ".float")
    os.makedirs(tmp, exist_ok=True)
    for name, base, fmt, act, pc in variants():
        if want and name not in want:
            continue
        d = os.path.join(out, name)
        os.makedirs(os.path.join(d, "io"), exist_ok=True)
        m, ishape = build(base)
        fp = os.path.join(tmp, base + ".onnx")
        qp = os.path.join(d, name + ".onnx")
        onnx.save(m, fp)
        extra = ({"op_types_to_quantize": ISLANDS} if name.endswith("_islands")
                 else {"op_types_to_quantize": ["Add"]} if name.endswith("_floatmm")
                 else {"op_types_to_quantize": ["Conv"]} if name.endswith("_floatresize") else {})
        quantize_with_io(fp, qp, Reader(ishape), ishape, f"{d}/io", providers=["CPUExecutionProvider"],
                         quant_format=FORMATS[fmt], per_channel=pc, activation_type=ACTS[act][0],
                         weight_type=ACTS[act][1], **extra)
        meta = {"reference": "onnxruntime " + ort.__version__, "format": fmt, "activations": act,
                "per_channel": pc, "output_step": output_step(onnx.load(qp)),
                "tolerance": "one quantization step of the output (output_step)"}
        if base == "encoder" and not name.endswith(("_islands", "_floatmm")):
            meta["noopt_tolerance_steps"] = 2
            meta["noopt_tolerance"] = SOFTMAX_STEPS.format(n=2) + ", and the attention spreads it"
        if name == "upsample_qdq_u8s8_pt":
            meta["noopt_tolerance_steps"] = 1
            meta["noopt_tolerance"] = ("one step: the quantized bilinear Resize interpolates as "
                                       "TFLite's integer kernel does (1/1024 fractions), not as "
                                       "onnxruntime's")
        if base == "shuffle_cnn" and fmt == "qdq":
            meta["noopt_tolerance_steps"], meta["noopt_tolerance"] = 1, SOFTMAX_STEPS.format(n=1)
        json.dump(meta, open(f"{d}/io/io.json", "w"), indent=1)
        print("built", name, flush=True)
    for f in os.listdir(tmp):
        os.remove(os.path.join(tmp, f))
    os.rmdir(tmp)
    external_copy(out, "shuffle_cnn_qdq_s8s8_pc")


def external_copy(out, src):
    """SRC saved with its initializers as external data in one side file (NAME.onnx.data)."""
    import shutil
    name = src + "_external"
    d = os.path.join(out, name)
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(os.path.join(out, src, "io"), os.path.join(d, "io"))
    m = onnx.load(os.path.join(out, src, src + ".onnx"))
    onnx.save(m, os.path.join(d, name + ".onnx"), save_as_external_data=True,
              all_tensors_to_one_file=True, location=name + ".onnx.data", size_threshold=0)
    print("built", name, flush=True)


def tf2onnx_models(out):
    import make_fixtures as mf
    from keras import layers

    def classifier():
        inp = mf.keras.Input(shape=(12, 12, 3), batch_size=1)
        x = layers.Conv2D(8, 3, strides=2, padding="same", activation="relu")(inp)
        x = layers.DepthwiseConv2D(3, padding="same", activation="relu")(x)
        x = layers.GlobalAveragePooling2D()(x)
        x = layers.Dense(16, activation="relu")(x)
        x = layers.Dense(10)(x)
        m = mf.keras.Model(inp, x)
        # Trained networks have nonzero biases (Keras initialises them to zero).
        rng = np.random.default_rng(5)
        for layer in m.layers:
            w = layer.get_weights()
            if len(w) == 2:
                layer.set_weights([w[0], rng.normal(0, 0.3, size=w[1].shape).astype(np.float32)])
        return m

    name = "tf2onnx_classifier"
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    mf.keras.utils.set_random_seed(1234)
    tfl = os.path.join(d, name + ".tflite")
    open(tfl, "wb").write(mf.to_tflite(classifier(), np.random.default_rng(0)))
    mf.tf2onnx(tfl, os.path.join(d, name + ".onnx"), check=True)
    mf.reference_io(tfl, os.path.join(d, "io"))
    print("built", name, flush=True)


def noopt_outputs(out):
    """io/output_noopt_K.npy for every onnxruntime-quantized model under OUT."""
    for name in sorted(os.listdir(out)):
        d = os.path.join(out, name)
        model = os.path.join(d, name + ".onnx")
        if not os.path.isfile(model) or onnx.load(model, load_external_data=False).producer_name != "onnx.quantize":
            continue
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        s = ort.InferenceSession(onnx.load(model).SerializeToString(), so, providers=["CPUExecutionProvider"])
        for k in range(3):
            x = np.load(f"{d}/io/input_{k}.npy")
            np.save(f"{d}/io/output_noopt_{k}.npy", s.run(None, {s.get_inputs()[0].name: x})[0])
        print("noopt", name, flush=True)


# The committed MobileNetV3 variants; `--mnv3 OUT --all` makes all eight QDQ/QOperator x
# S8S8/U8S8 x per channel/per tensor ones instead (measured, not committed: 2.3 MB each).
MNV3_VARIANTS = [("mnv3s_qdq_s8s8_pc", "qdq", "s8s8", True),
                 ("mnv3s_qdq_u8u8_pt", "qdq", "u8u8", False),
                 ("mnv3s_qop_u8s8_pc", "qop", "u8s8", True)]
MNV3_ALL = [(f"mnv3s_{f}_{a}_{g}", f, a, g == "pc")
            for f in ("qdq", "qop") for a in ("s8s8", "u8s8") for g in ("pc", "pt")]


def mnv3_models(out, variants=MNV3_VARIANTS):
    """MobileNetV3Small through tf2onnx and onnxruntime's quantizer (see the module docs)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    import keras
    import tf2onnx
    from keras import layers
    keras.utils.set_random_seed(3)
    m = keras.applications.MobileNetV3Small(input_shape=(96, 96, 3), weights=None, classes=10,
                                            include_preprocessing=False, classifier_activation=None)
    # Initial BatchNormalization statistics make the logits ~1e-8 (nothing upstream is tested):
    # calibrate them on the calibration distribution.
    for layer in m.layers:
        if isinstance(layer, layers.BatchNormalization):
            layer.momentum = 0.0
    m(np.random.default_rng(1).uniform(-1, 1, size=(16, 96, 96, 3)).astype(np.float32), training=True)
    tmp = os.path.join(out, ".float")
    os.makedirs(tmp, exist_ok=True)
    fp = os.path.join(tmp, "mnv3s.onnx")
    spec = (tf.TensorSpec((1, 96, 96, 3), tf.float32, name="input"),)
    tf2onnx.convert.from_keras(m, input_signature=spec, opset=17, output_path=fp, inputs_as_nchw=["input"])
    nchw = (1, 3, 96, 96)
    for name, fmt, act, pc in variants:
        rng = np.random.default_rng(0)

        class Calib(CalibrationDataReader):
            def __init__(self):
                self.k = 0

            def get_next(self):
                self.k += 1
                return None if self.k > 8 else {"input": rng.uniform(-1, 1, size=nchw).astype(np.float32)}

        d = os.path.join(out, name)
        os.makedirs(os.path.join(d, "io"), exist_ok=True)
        qp = os.path.join(d, name + ".onnx")
        quantize_with_io(fp, qp, Calib(), nchw, f"{d}/io", providers=["CPUExecutionProvider"],
                         quant_format=FORMATS[fmt], per_channel=pc, activation_type=ACTS[act][0],
                         weight_type=ACTS[act][1])
        meta = {"reference": "onnxruntime " + ort.__version__, "format": fmt, "activations": act,
                "per_channel": pc, "output_step": output_step(onnx.load(qp)),
                "tolerance_steps": MNV3_TOLERANCE.get(name, 1),
                "tolerance": "one quantization step of the output (output_step)"}
        if name in NOOPT_TOLERANCE:
            meta["noopt_tolerance_steps"], meta["noopt_tolerance"] = NOOPT_TOLERANCE[name]
        json.dump(meta, open(f"{d}/io/io.json", "w"), indent=1)
        print("built", name, flush=True)
    os.remove(fp)
    os.rmdir(tmp)


# Measured largest difference from onnxruntime's node-by-node evaluation, where not 0: the
# importer follows onnxruntime's default session, whose DoubleQDQPairsRemover changes the model.
NOOPT_WHY = ("{n} steps: onnxruntime's default session merges nine Q -> DQ -> Transpose -> Q -> DQ "
             "chains (the squeeze-and-excite gates) into one quantization of the intersected range "
             "(its DoubleQDQPairsRemover), which the importer reproduces for onnxruntime-quantized "
             "models (docs/onnx.md); the node-by-node evaluation keeps both quantizations")
NOOPT_TOLERANCE = {"mnv3s_qdq_s8s8_pc": (14, NOOPT_WHY.format(n=14)),
                   "mnv3s_qdq_u8u8_pt": (17, NOOPT_WHY.format(n=17))}

# Measured largest difference from onnxruntime's default session, in output steps.
MNV3_TOLERANCE = {"mnv3s_qdq_s8s8_pc": 1, "mnv3s_qdq_u8u8_pt": 1, "mnv3s_qop_u8s8_pc": 1}


if __name__ == "__main__":
    if sys.argv[1] == "--tf2onnx":
        tf2onnx_models(sys.argv[2])
    elif sys.argv[1] == "--mnv3":
        mnv3_models(sys.argv[2], MNV3_ALL if "--all" in sys.argv else MNV3_VARIANTS)
    elif sys.argv[1] == "--noopt":
        noopt_outputs(sys.argv[2])
    else:
        main()
