#!/usr/bin/env python3
"""Small whole-network fixtures: the blocks of architectures the single-operator fixtures do
not show together, each as its exporters write them.

  net_convnext_block  ConvNeXt's block: 7x7 grouped convolution with one channel per group
                      (Keras Conv2D(groups=C), TFLite CONV_2D with a [C,7,7,1] filter),
                      LayerNormalization, Dense on a 4-D tensor (TensorFlow's Tensordot: SHAPE,
                      GATHER, REDUCE_PROD, PACK and dynamic RESHAPEs), GELU, residual Add.
  net_vit_block       a transformer encoder block on 16 patch tokens: LayerNormalization,
                      two-head MultiHeadAttention (BATCH_MATMUL of two activations, Softmax),
                      an MLP with GELU, residual Adds, and a patchifying convolution.

tf2onnx 1.17 writes TFLite's GELU as a custom 'TFL_GELU' node; the ONNX twins keep it (the
importer accepts it as ONNX Gelu). Vela keeps LayerNormalization's float NEG and the
two-activation BATCH_MATMUL on the CPU, so its raw writer refuses these graphs:
vela/ACCEL/VELA_FAILED.txt holds its message.

  net_unet            a small U-Net (64x64): max-pool downsampling, Conv2DTranspose upsampling,
                      Concatenate skips, sigmoid output.
  net_vit_encoder     a ViT-style encoder: patch Conv2D, two transformer blocks, classifier.
  net_ds_cnn          MLPerf Tiny's DS-CNN keyword spotter (49x10 MFCC input) and ResNet-8 CIFAR-10
  net_resnet8         classifier, with calibrated BatchNormalization statistics: issue 15's small
                      networks, where Vela DMAs every layer's weights.
  net_mnv3s, net_effb0 keras.applications MobileNetV3Small (96x96, include_preprocessing=False)
                      and EfficientNetB0 (64x64), 10 classes, random weights with calibrated
                      BatchNormalization statistics (see `calibrated`); Vela for ethos-u55-128 only.

  .venv/bin/python tools/make_fixtures_nets.py fixtures [name ...]
"""
import os, subprocess, sys, shutil
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402
import keras  # noqa: E402
from keras import layers  # noqa: E402


def convnext_block():
    # Batch left open, as keras.applications models have it: the converter then keeps
    # Tensordot's shape arithmetic and writes -1 into the shape signatures.
    inp = keras.Input((8, 8, 16))
    x = layers.Conv2D(16, 7, padding="same", groups=16)(inp)
    x = layers.LayerNormalization(epsilon=1e-6)(x)
    x = layers.Dense(64, activation="gelu")(x)
    x = layers.Dense(16)(x)
    return keras.Model(inp, layers.Add()([inp, x]))


def vit_block():
    inp = keras.Input((16, 16, 3), batch_size=1)
    x = layers.Conv2D(32, 4, strides=4)(inp)
    x = mf.encoder_block(layers.Reshape((16, 32))(x))
    return keras.Model(inp, layers.Dense(10)(layers.GlobalAveragePooling1D()(x)))


def unet():
    """A small U-Net: two 2x2 max-pool downsamplings, Conv2DTranspose (stride 2) upsamplings,
    Concatenate skips, a sigmoid output."""
    inp = keras.Input((64, 64, 3), batch_size=1)
    c1 = layers.Conv2D(16, 3, padding="same", activation="relu")(inp)
    c1 = layers.Conv2D(16, 3, padding="same", activation="relu")(c1)
    c2 = layers.Conv2D(32, 3, padding="same", activation="relu")(layers.MaxPooling2D(2)(c1))
    c3 = layers.Conv2D(64, 3, padding="same", activation="relu")(layers.MaxPooling2D(2)(c2))
    u2 = layers.Conv2DTranspose(32, 2, strides=2, padding="same")(c3)
    d2 = layers.Conv2D(32, 3, padding="same", activation="relu")(layers.Concatenate()([u2, c2]))
    u1 = layers.Conv2DTranspose(16, 2, strides=2, padding="same")(d2)
    d1 = layers.Conv2D(16, 3, padding="same", activation="relu")(layers.Concatenate()([u1, c1]))
    return keras.Model(inp, layers.Conv2D(1, 1, activation="sigmoid")(d1))


def vit_encoder():
    """A ViT-style encoder: a 4x4 patch convolution (64 tokens of 32), two blocks of
    LayerNormalization + two-head MultiHeadAttention + GELU MLP with residual Adds, a classifier."""
    inp = keras.Input((32, 32, 3), batch_size=1)
    x = layers.Reshape((64, 32))(layers.Conv2D(32, 4, strides=4)(inp))
    for _ in range(2):
        h = layers.LayerNormalization()(x)
        x = layers.Add()([x, layers.MultiHeadAttention(num_heads=2, key_dim=16)(h, h)])
        h = layers.LayerNormalization()(x)
        h = layers.Dense(32)(layers.Dense(64, activation="gelu")(h))
        x = layers.Add()([x, h])
    return keras.Model(inp, layers.Dense(10)(layers.GlobalAveragePooling1D()(x)))


def ds_cnn():
    """MLPerf Tiny's keyword-spotting DS-CNN (small): a 10x4 stride-2 convolution on 49x10 MFCC
    features, four depthwise-separable blocks of 64 channels, average pooling, a 12-way
    classifier with softmax."""
    inp = keras.Input((49, 10, 1), batch_size=1)
    x = layers.Conv2D(64, (10, 4), strides=(2, 2), padding="same")(inp)
    x = layers.ReLU()(layers.BatchNormalization()(x))
    for _ in range(4):
        x = layers.ReLU()(layers.BatchNormalization()(layers.DepthwiseConv2D(3, padding="same")(x)))
        x = layers.ReLU()(layers.BatchNormalization()(layers.Conv2D(64, 1)(x)))
    x = layers.Flatten()(layers.AveragePooling2D((25, 5))(x))
    return keras.Model(inp, layers.Dense(12, activation="softmax")(x))


def resnet8():
    """MLPerf Tiny's image-classification ResNet-8 (CIFAR-10, 32x32x3): a 3x3 convolution of
    16, three residual stacks of 16, 32 and 64 channels (the last two stride 2 with a 1x1
    projection shortcut), average pooling, a 10-way classifier with softmax."""
    inp = keras.Input((32, 32, 3), batch_size=1)
    x = layers.ReLU()(layers.BatchNormalization()(layers.Conv2D(16, 3, padding="same")(inp)))
    for filters, stride in [(16, 1), (32, 2), (64, 2)]:
        y = layers.Conv2D(filters, 3, strides=stride, padding="same")(x)
        y = layers.ReLU()(layers.BatchNormalization()(y))
        y = layers.BatchNormalization()(layers.Conv2D(filters, 3, padding="same")(y))
        if stride != 1:
            x = layers.Conv2D(filters, 1, strides=stride)(x)
        x = layers.ReLU()(layers.Add()([x, y]))
    x = layers.Flatten()(layers.AveragePooling2D(8)(x))
    return keras.Model(inp, layers.Dense(10, activation="softmax")(x))


def calibrated(build):
    """A keras.applications network with random weights whose BatchNormalization statistics are
    set from a batch of the calibration distribution (momentum 0, one training-mode call), so
    every layer sees normalized activations as in a trained network: with the initial
    statistics the logits of these networks are ~1e-8 and the softmax output is uniform, which
    tests nothing upstream."""
    def make():
        m = build()
        for layer in m.layers:
            if isinstance(layer, layers.BatchNormalization):
                layer.momentum = 0.0
        x = np.random.default_rng(1).uniform(-1, 1, size=(16,) + tuple(m.inputs[0].shape[1:]))
        m(x.astype(np.float32), training=True)
        return m
    return make


A = keras.applications
MODELS = {
    "net_convnext_block": convnext_block,
    "net_vit_block": vit_block,
    # issue 13's networks
    "net_unet": unet,
    "net_vit_encoder": vit_encoder,
    # issue 12's networks, at small resolutions and 10 classes (the operator mix is the same).
    "net_mnv3s": calibrated(lambda: A.MobileNetV3Small(input_shape=(96, 96, 3), weights=None, classes=10,
                                                       include_preprocessing=False)),
    "net_effb0": calibrated(lambda: A.EfficientNetB0(input_shape=(64, 64, 3), weights=None, classes=10)),
    # issue 15's small networks: MLPerf Tiny's keyword spotter and CIFAR-10 classifier.
    "net_ds_cnn": calibrated(ds_cnn),
    "net_resnet8": calibrated(resnet8),
    # issue 13's concatenation-heavy network; about 20 MB with its Vela compilation, so it is not
    # committed (build it into a scratch directory; README gives the command).
    "net_densenet121": calibrated(lambda: A.DenseNet121(input_shape=(64, 64, 3), weights=None, classes=10)),
}
# Whole keras.applications networks carry megabytes of weights per Vela compilation: one
# configuration (the README's comparison target) instead of six.
ONE_ACCEL = {"net_mnv3s", "net_effb0", "net_densenet121"}


def vela_or_failed(tfl, out, accel, system, mode):
    try:
        mf.vela(tfl, out, accel, system, mode)
    except subprocess.CalledProcessError as e:
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(out + ".tmp", ignore_errors=True)
        os.makedirs(out)
        err = (e.stderr.decode() if isinstance(e.stderr, bytes) else e.stderr or "").strip()
        lines = err.splitlines()
        msg = next((l for l in reversed(lines) if "Error" in l), lines[-1] if lines else repr(e))
        open(f"{out}/VELA_FAILED.txt", "w").write(msg.strip() + "\n")


def main():
    out = sys.argv[1]
    for name in sys.argv[2:] or list(MODELS):
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        keras.utils.set_random_seed(1234)
        tfl = os.path.join(d, name + ".tflite")
        open(tfl, "wb").write(mf.to_tflite(MODELS[name](), np.random.default_rng(0)))
        mf.tf2onnx(tfl, os.path.join(d, name + ".onnx"), check=True)
        mf.reference_io(tfl, os.path.join(d, "io"))
        for accel, system, mode in mf.ACCELERATORS:
            if name in ONE_ACCEL and accel != "ethos-u55-128":
                continue
            vela_or_failed(tfl, os.path.join(d, "vela", accel), accel, system, mode)
        print("built", name, flush=True)


if __name__ == "__main__":
    main()
