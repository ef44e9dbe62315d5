#!/usr/bin/env python3
"""Train the digits example's model: a small int8 CNN on scikit-learn's handwritten digits.

The dataset ships inside scikit-learn (1,797 8x8 grayscale images, pixel values 0..16; no
download). Everything is seeded and TensorFlow runs deterministic ops on one thread, so a second
run writes the same files byte for byte (`sha256sum` them to check).

  python3 -m venv .venv && .venv/bin/pip install -r tools/requirements.txt scikit-learn
  .venv/bin/python tools/train_digits.py fixtures/digits

OUT_DIR/ gets:
  digits.tflite, digits.onnx   full-int8 TFLite (TFLite converter) and QDQ ONNX (tf2onnx)
  test/images.npy              the held-out split, already quantized with the model's input
                               scale and zero point: int8 [N, 8, 8, 1]
  test/labels.npy              their digits: uint8 [N]
  test/tflite_logits.npy       TFLite's int8 logits for each image (reference kernels): [N, 10]
  test/train_report.json       float and int8 accuracy, seeds, versions
  digits_ort.onnx              the float model exported NCHW (tf2onnx from Keras, as a PyTorch
                               user's file would be laid out) and quantized by onnxruntime's
                               quantize_static: QDQ, uint8 activations, per-channel int8 weights
  test/images_f32_nchw.npy     the held-out images as that model takes them: float32 [N, 1, 8, 8]
  test/ort_logits.npy          onnxruntime's float output for each: float32 [N, 10]
  io/, vela/                   the usual fixture files (make_fixtures.py): three seeded random
                               inputs with TFLite's outputs, and Vela's compilations
"""
import json, os, sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["TF_DETERMINISTIC_OPS"] = "1"
os.environ["PYTHONHASHSEED"] = "0"
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"  # oneDNN kernels may reorder float sums
import numpy as np
import tensorflow as tf
import keras
from keras import layers
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures  # noqa: E402  (quantize, tf2onnx, reference_io, vela, ACCELERATORS)

SEED = 20261126
EPOCHS = 40


def model():
    # Conv, depthwise, pointwise, pooling and a dense head: the operators a small vision model
    # uses, all on the NPU. Logits out (no softmax): the prediction is the argmax.
    inp = keras.Input(shape=(8, 8, 1), batch_size=1, name="image")
    x = layers.Conv2D(16, 3, padding="same", activation="relu")(inp)
    x = layers.DepthwiseConv2D(3, padding="same", activation="relu")(x)
    x = layers.Conv2D(32, 1, activation="relu")(x)
    x = layers.MaxPooling2D(2)(x)
    x = layers.Conv2D(32, 3, padding="same", activation="relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    out = layers.Dense(10, name="logits")(x)
    return keras.Model(inp, out)


def canonical_names(path):
    """tf2onnx numbers the names it makes up (`zero_point__66`) in an order that changes from run
    to run; number them by first use in the graph's (stable) node order instead, so the file is
    reproducible. Only names change: nodes, initializers and their values are untouched."""
    import re
    import onnx
    m = onnx.load(path)
    g = m.graph
    seen = {}

    def rename(name):
        if not re.search(r"__\d+", name):
            return name
        if name not in seen:
            seen[name] = re.sub(r"__\d+", f"__{len(seen)}", name)
        return seen[name]

    for n in g.node:
        n.input[:] = [rename(i) for i in n.input]
        n.output[:] = [rename(o) for o in n.output]
        n.name = rename(n.name)
    for t in list(g.initializer):
        t.name = rename(t.name)
    for v in list(g.input) + list(g.output) + list(g.value_info):
        v.name = rename(v.name)
    g.doc_string = "converted from " + os.path.basename(path).replace(".onnx", ".tflite")
    inits = sorted(g.initializer, key=lambda t: t.name)
    del g.initializer[:]
    g.initializer.extend(inits)
    onnx.save(m, path)


def export_ort(train, x_tr, x_te, out):
    """The same trained network through the other common path: float ONNX, then onnxruntime's
    static quantizer (its defaults: QDQ, uint8 activations; weights int8 per channel)."""
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    import tf2onnx
    spec = (tf.TensorSpec((1, 8, 8, 1), tf.float32, name="image"),)
    float_path = os.path.join(out, "digits_float.tmp.onnx")
    tf2onnx.convert.from_keras(train, input_signature=spec, opset=17, output_path=float_path,
                               inputs_as_nchw=["image"])

    class Calibration(CalibrationDataReader):
        def __init__(self):
            self.k = 0

        def get_next(self):
            self.k += 4
            if self.k >= len(x_tr):
                return None
            return {"image": x_tr[self.k:self.k + 1].transpose(0, 3, 1, 2)}

    q_path = os.path.join(out, "digits_ort.onnx")
    quantize_static(float_path, q_path, Calibration(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    os.remove(float_path)
    canonical_names(q_path)
    xs = np.ascontiguousarray(x_te.transpose(0, 3, 1, 2), dtype=np.float32)
    s = ort.InferenceSession(q_path, providers=["CPUExecutionProvider"])
    logits = np.stack([s.run(None, {"image": xs[i:i + 1]})[0][0] for i in range(len(xs))])
    np.save(os.path.join(out, "test", "images_f32_nchw.npy"), xs)
    np.save(os.path.join(out, "test", "ort_logits.npy"), logits.astype(np.float32))


def main():
    out = sys.argv[1]
    os.makedirs(os.path.join(out, "test"), exist_ok=True)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.experimental.enable_op_determinism()
    keras.utils.set_random_seed(SEED)

    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0)[..., None]  # [1797, 8, 8, 1] in [0, 1]
    y = digits.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)

    # Train with batch 32; the model is rebuilt with batch 1 for the firmware shapes.
    train = model()
    train.compile(optimizer=keras.optimizers.Adam(3e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    inp = keras.Input(shape=(8, 8, 1), batch_size=None)
    batched = keras.Model(inp, train(inp))
    batched.compile(optimizer=keras.optimizers.Adam(3e-3),
                    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                    metrics=["accuracy"])
    batched.fit(x_tr, y_tr, batch_size=32, epochs=EPOCHS, shuffle=True, verbose=0)
    float_acc = float(np.mean(np.argmax(batched.predict(x_te, verbose=0), axis=1) == y_te))

    def rep():
        for i in range(0, len(x_tr), 4):
            yield [x_tr[i:i + 1]]

    tfl = os.path.join(out, "digits.tflite")
    open(tfl, "wb").write(make_fixtures.quantize(tf.lite.TFLiteConverter.from_keras_model(train), rep))
    make_fixtures.tf2onnx(tfl, os.path.join(out, "digits.onnx"), check=True)
    canonical_names(os.path.join(out, "digits.onnx"))

    # The held-out split, quantized as the model's input wants it, and TFLite's logits for it
    # from its reference kernels.
    it = tf.lite.Interpreter(tfl, experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    (ind,), (outd,) = it.get_input_details(), it.get_output_details()
    scale, zp = ind["quantization"]
    q = np.clip(np.round(x_te / scale) + zp, -128, 127).astype(np.int8)
    logits = np.zeros((len(q), 10), dtype=np.int8)
    for i in range(len(q)):
        it.set_tensor(ind["index"], q[i:i + 1])
        it.invoke()
        logits[i] = it.get_tensor(outd["index"])[0]
    np.save(os.path.join(out, "test", "images.npy"), q)
    np.save(os.path.join(out, "test", "labels.npy"), y_te.astype(np.uint8))
    np.save(os.path.join(out, "test", "tflite_logits.npy"), logits)
    int8_acc = float(np.mean(np.argmax(logits, axis=1) == y_te))
    report = {"seed": SEED, "epochs": EPOCHS, "train_images": len(x_tr), "test_images": len(x_te),
              "float_accuracy": float_acc, "int8_accuracy_tflite": int8_acc,
              "input_scale": float(scale), "input_zero_point": int(zp),
              "tensorflow": tf.__version__, "keras": keras.__version__}
    json.dump(report, open(os.path.join(out, "test", "train_report.json"), "w"), indent=1)
    print(json.dumps(report, indent=1))

    export_ort(train, x_tr, x_te, out)
    make_fixtures.reference_io(tfl, os.path.join(out, "io"))
    for accel, system, mode in make_fixtures.ACCELERATORS:
        make_fixtures.vela(tfl, os.path.join(out, "vela", accel), accel, system, mode)


if __name__ == "__main__":
    main()
