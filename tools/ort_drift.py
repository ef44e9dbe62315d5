#!/usr/bin/env python3
"""Layer-by-layer comparison of our reference interpreter with onnxruntime on a quantized ONNX
model: where does the difference between the two come from?

  npu run MODEL.onnx --input IN.npy --dump-dir DUMP      # our every activation
  python3 tools/ort_drift.py MODEL.onnx IN.npy DUMP [--all]

Every quantized activation we computed (a QuantizeLinear output of the model, by name) is
also made a graph output of the model for onnxruntime; both are compared in output steps
(raw integer differences), in the model's order. Prints per tensor the largest difference and
the share of elements that differ (with --all; else the tensors where the largest difference
grows), and the operators between consecutive tensors. NCHW tensors of onnxruntime are
transposed to our NHWC.
"""
import json, sys
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

model_path, input_path, dump = sys.argv[1:4]
show_all = "--all" in sys.argv
index = json.load(open(f"{dump}/index.json"))
ours = {e["name"]: e for e in index if e["dtype"] in ("i8", "u8", "i16")}

m = onnx.load(model_path)
inferred = onnx.shape_inference.infer_shapes(m)
types = {vi.name: vi for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}
producers = {o: n for n in m.graph.node for o in n.output}
order = [o for n in m.graph.node for o in n.output if o in ours]
existing = {o.name for o in m.graph.output}
elem = {"i8": TensorProto.INT8, "u8": TensorProto.UINT8, "i16": TensorProto.INT16}
for name in order:
    if name in existing:
        continue
    vi = types.get(name) or helper.make_tensor_value_info(name, elem[ours[name]["dtype"]], None)
    m.graph.output.append(vi)
sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
x = np.load(input_path)
names = [o.name for o in sess.get_outputs()]
got = dict(zip(names, sess.run(None, {sess.get_inputs()[0].name: x})))

worst = 0
rows = []
for name in order:
    e = ours[name]
    a = np.load(f"{dump}/{e['file']}").astype(np.int64)
    if not np.issubdtype(got[name].dtype, np.integer):
        continue  # a float tensor in onnxruntime's graph (its quantization happens later)
    b = got[name].astype(np.int64)
    if b.shape != a.shape and b.ndim == 4 and b.transpose(0, 2, 3, 1).shape == a.shape:
        b = b.transpose(0, 2, 3, 1)
    if b.shape != a.shape:
        rows.append((name, None, None, f"shapes {a.shape} vs {b.shape}"))
        continue
    d = np.abs(a - b)
    rows.append((name, int(d.max()), float((d > 0).mean()), producers[name].op_type))
print(f"{len(rows)} quantized activations compared ({model_path})")
print(f"{'max':>4} {'differ':>7}  producer / tensor")
for name, mx, frac, what in rows:
    if mx is None:
        print(f"   -        -  {name}: {what}")
        continue
    if show_all or mx > worst:
        print(f"{mx:4d} {100 * frac:6.2f}%  {what:<18} {name}")
    worst = max(worst, mx)
