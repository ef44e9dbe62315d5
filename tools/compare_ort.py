#!/usr/bin/env python3
"""Every onnxruntime-quantized model under DIR (DIR/NAME/NAME.onnx with io/input_K.npy,
io/output_K.npy from onnxruntime's default session and io/output_noopt_K.npy from its
node-by-node evaluation, as tools/make_onnx_wild.py writes them) run by `npu run` (the reference
interpreter), compared in output steps (io.json "output_step") with both, and the top-1 class.

  /work/venv/bin/python tools/compare_ort.py fixtures/onnx_wild [--npu target/release/npu]
"""
import json, os, subprocess, sys, tempfile
import numpy as np


def main():
    root = sys.argv[1]
    npu = sys.argv[sys.argv.index("--npu") + 1] if "--npu" in sys.argv else "target/release/npu"
    out = os.path.join(tempfile.mkdtemp(), "out.npy")
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if not os.path.exists(f"{d}/io/output_noopt_0.npy"):
            continue
        step = json.load(open(f"{d}/io/io.json"))["output_step"]
        noopt = default = 0.0
        top = True
        for k in range(3):
            subprocess.run([npu, "run", f"{d}/{name}.onnx", "--input", f"{d}/io/input_{k}.npy",
                            "--output", out], check=True, capture_output=True)
            ours = np.load(out)
            ref = np.load(f"{d}/io/output_{k}.npy")
            noopt = max(noopt, np.abs(ours - np.load(f"{d}/io/output_noopt_{k}.npy")).max() / step)
            default = max(default, np.abs(ours - ref).max() / step)
            top = top and ours.reshape(ours.shape[0], -1).argmax(-1).tolist() == \
                ref.reshape(ref.shape[0], -1).argmax(-1).tolist()
        print(f"{name:36s} vs node-by-node {noopt:5.2f}  vs default {default:5.2f}  top1 {top}")


if __name__ == "__main__":
    main()
