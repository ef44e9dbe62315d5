#!/usr/bin/env python3
"""Whole networks we did not build the compiler for: keras.applications architectures at small
resolutions with seeded random weights (no download), plus a tiny ViT, a YOLO-style head and a
DS-CNN, each converted to full-int8 TFLite and to ONNX (tf2onnx), with one random input and
TFLite's output (reference kernels; BUILTIN where those crash: KERNELS=BUILTIN).

  .venv/bin/python tools/survey_models.py OUT_DIR [name ...]
  tools/survey_check.sh NAME [target]     # from OUT_DIR: our reference and virtual NPU vs TFLite

Not fixtures (too large to commit); the issue notes give the measured table.
"""
import os, sys, numpy as np
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf, keras
from keras import layers
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402
A = keras.applications

def tiny_vit():
    inp = keras.Input((32, 32, 3), batch_size=1)
    x = layers.Conv2D(32, 4, strides=4)(inp)
    x = layers.Reshape((64, 32))(x)
    for _ in range(2):
        x = mf.encoder_block(x)
    x = layers.GlobalAveragePooling1D()(x)
    return keras.Model(inp, layers.Dense(10)(x))

def yolo_head():
    inp = keras.Input((64, 64, 3), batch_size=1)
    x = layers.Conv2D(16, 3, strides=2, padding="same")(inp); x = layers.LeakyReLU(0.1)(x)
    a = layers.Conv2D(32, 3, strides=2, padding="same")(x); a = layers.LeakyReLU(0.1)(a)
    b = layers.Conv2D(64, 3, strides=2, padding="same")(a); b = layers.LeakyReLU(0.1)(b)
    u = layers.UpSampling2D(2)(b)
    c = layers.Concatenate()([u, a])
    c = layers.Conv2D(32, 1)(c); c = layers.Activation("sigmoid")(c)
    return keras.Model(inp, [layers.Conv2D(18, 1)(c), layers.Conv2D(18, 1)(b)])

def ds_cnn():
    inp = keras.Input((49, 10, 1), batch_size=1)
    x = layers.Conv2D(64, (10, 4), strides=(2, 2), padding="same")(inp)
    x = layers.BatchNormalization()(x); x = layers.ReLU()(x)
    for _ in range(4):
        x = layers.DepthwiseConv2D(3, padding="same")(x); x = layers.BatchNormalization()(x); x = layers.ReLU()(x)
        x = layers.Conv2D(64, 1)(x); x = layers.BatchNormalization()(x); x = layers.ReLU()(x)
    x = layers.AveragePooling2D((25, 5))(x)
    x = layers.Flatten()(x)
    return keras.Model(inp, layers.Dense(12, activation="softmax")(x))

MODELS = {
    "mnv3s": lambda: A.MobileNetV3Small(input_shape=(96, 96, 3), weights=None, classes=10, include_preprocessing=False),
    "mnv3l": lambda: A.MobileNetV3Large(input_shape=(96, 96, 3), weights=None, classes=10, include_preprocessing=False),
    "effb0": lambda: A.EfficientNetB0(input_shape=(64, 64, 3), weights=None, classes=10),
    "effv2b0": lambda: A.EfficientNetV2B0(input_shape=(64, 64, 3), weights=None, classes=10, include_preprocessing=False),
    "resnet50v2": lambda: A.ResNet50V2(input_shape=(64, 64, 3), weights=None, classes=10),
    "densenet121": lambda: A.DenseNet121(input_shape=(64, 64, 3), weights=None, classes=10),
    "nasnetm": lambda: A.NASNetMobile(input_shape=(64, 64, 3), weights=None, classes=10),
    "convnext": lambda: A.ConvNeXtTiny(input_shape=(64, 64, 3), weights=None, classes=10, include_preprocessing=False),
    "xception": lambda: A.Xception(input_shape=(71, 71, 3), weights=None, classes=10),
    "inceptionv3": lambda: A.InceptionV3(input_shape=(75, 75, 3), weights=None, classes=10),
    "mnv1": lambda: A.MobileNet(input_shape=(96, 96, 3), alpha=0.25, weights=None, classes=10),
    "tiny_vit": tiny_vit,
    "yolo_head": yolo_head,
    "ds_cnn": ds_cnn,
}

def convert(name, out):
    keras.utils.set_random_seed(7)
    m = MODELS[name]()
    p = f"{out}/{name}.tflite"
    if not os.path.exists(p): open(p, "wb").write(mf.to_tflite(m, np.random.default_rng(0), samples=8))
    r = mf.tf2onnx(p, f"{out}/{name}.onnx")
    if r.returncode: print(name, "tf2onnx failed", r.stderr[-300:])
    it = tf.lite.Interpreter(p, experimental_op_resolver_type=getattr(tf.lite.experimental.OpResolverType, os.environ.get("KERNELS", "BUILTIN_REF")))
    it.allocate_tensors()
    ins = it.get_input_details()
    x = np.random.default_rng(1).integers(-128, 128, size=ins[0]["shape"], dtype=np.int8)
    np.save(f"{out}/{name}_in.npy", x)
    it.set_tensor(ins[0]["index"], x); it.invoke()
    for j, d in enumerate(it.get_output_details()):
        np.save(f"{out}/{name}_out{j}.npy", it.get_tensor(d["index"]))
    print("built", name, flush=True)

if __name__ == "__main__":
    for n in sys.argv[2:] or MODELS:
        try:
            convert(n, sys.argv[1])
        except Exception as e:
            print(n, "FAILED", repr(e)[:300], flush=True)
