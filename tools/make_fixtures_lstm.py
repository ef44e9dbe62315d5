#!/usr/bin/env python3
"""LSTM fixtures (UNIDIRECTIONAL_SEQUENCE_LSTM, int8 via the TFLite converter from tf_keras):

  * net_lstm_kws: a keyword spotter, LSTM(64) over a 49x10 input (49 frames of 10 MFCCs), Dense(12),
    softmax;
  * --tflm DIR: rewrite an existing fixture's reference outputs (the shared op_lstm) as below.

Reference outputs come from TensorFlow Lite Micro's interpreter (pip package tflite-micro), the runtime
that runs on Cortex-M next to an Ethos-U, with the three inputs invoked in order on one interpreter (the
LSTM's state carries over, as in TFLite). TFLite's own integer LSTM uses gemmlowp's fixed-point
sigmoid/tanh where TFLite Micro uses the table-based int16 functions the NPU has built in; the two drift
apart by a step in the cell state (op_lstm: 3 of 16 outputs of input 1 differ by one). TFLite's outputs
are kept as io/tflite_output_K.npy; io.json's "kernels" says "TFLM".

Vela 5.2.0 compiles each for the six U55/U65 configurations. tf2onnx fails on the LSTM's variable state
tensors (ONNX_FAILED.txt); ONNX LSTM is out of scope.

  python3 tools/make_fixtures_lstm.py OUT_DIR [net_lstm_kws]
  python3 tools/make_fixtures_lstm.py --tflm FIXTURE_DIR
"""
import json, os, shutil, sys
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf
import make_op_fixtures_wave2 as w2
import make_vela_u85 as u85
import numpy as np

u85.U85 = []                                   # the six U55/U65 configurations only


def kws():
    import tf_keras
    tf_keras.utils.set_random_seed(1234)
    inp = tf_keras.Input((49, 10), batch_size=1)
    h = tf_keras.layers.LSTM(64)(inp)
    return tf_keras.Model(inp, tf_keras.layers.Dense(12, activation="softmax")(h))


MODELS = {"net_lstm_kws": kws}


def tflm_outputs(d):
    """io/output_K.npy := TFLite Micro's outputs for io/input_K.npy, K = 0, 1, 2 in order on one
    interpreter; TFLite's become io/tflite_output_K.npy."""
    from tflite_micro.python.tflite_micro import runtime
    name = os.path.basename(os.path.normpath(d))
    io = os.path.join(d, "io")
    it = runtime.Interpreter.from_file(os.path.join(d, name + ".tflite"))
    for k in range(3):
        x = np.load(f"{io}/input_{k}.npy")
        it.set_input(x, 0)
        it.invoke()
        y = it.get_output(0)
        if not os.path.exists(f"{io}/tflite_output_{k}.npy"):
            shutil.copy(f"{io}/output_{k}.npy", f"{io}/tflite_output_{k}.npy")
        tfl = np.load(f"{io}/tflite_output_{k}.npy")
        diff = np.abs(y.astype(np.int32) - tfl.astype(np.int32))
        print(f"  input {k}: TFLM vs TFLite: {int((diff > 0).sum())} of {diff.size} differ, max {diff.max()}",
              flush=True)
        np.save(f"{io}/output_{k}.npy", y)
    meta = json.load(open(f"{io}/io.json"))
    meta["kernels"] = "TFLM"
    json.dump(meta, open(f"{io}/io.json", "w"), indent=1)


def build_one(name, out):
    d = os.path.join(out, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    tfl = os.path.join(d, name + ".tflite")
    open(tfl, "wb").write(mf.to_tflite(MODELS[name](), np.random.default_rng(0)))
    print("  tflite ops:", " ".join(w2.tflite_ops(tfl)), flush=True)
    w2.onnx_twin(tfl, d, name, stderr_tail=4000)
    mf.reference_io(tfl, os.path.join(d, "io"))
    tflm_outputs(d)
    w2.vela_report(tfl, d)


def main():
    if sys.argv[1] == "--tflm":
        tflm_outputs(sys.argv[2])
        return
    w2.build_each(MODELS, build_one)


if __name__ == "__main__":
    main()
