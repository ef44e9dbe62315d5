#!/usr/bin/env python3
"""Converts the ONNX backend node tests for quantization (onnx 1.23:
`onnx.backend.test.case.node.collect_testcases`, the 45 cases whose name mentions quantize,
qlinear or integer) into project fixtures, once.

  /work/venv/bin/python tools/convert_onnx_node_tests.py fixtures/onnx_node_tests

Per case NAME: OUT/NAME/NAME.onnx, io/input_0.npy (the first graph input: the activation),
io/output_K.npy (the expected outputs of the ONNX reference implementation).
The conversion: the node tests feed every operand (scales, zero points, weights) as a graph
input; an NPU compiler needs them fixed at compile time, so every input but the first becomes
an initializer holding the test's value (the computation is unchanged)."""
import os, re, sys
import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.test.case import node


def tensor(value, name):
    """An initializer of a test value (numpy array, or a TensorProto for types numpy lacks)."""
    if isinstance(value, onnx.TensorProto):
        t = onnx.TensorProto()
        t.CopyFrom(value)
        t.name = name
        return t
    return numpy_helper.from_array(np.asarray(value), name)


def save(path, value):
    """PATH.npy, or PATH.pb (a TensorProto) for element types numpy cannot store (float8, int4)."""
    if isinstance(value, onnx.TensorProto):
        open(path + ".pb", "wb").write(value.SerializeToString())
    else:
        np.save(path + ".npy", np.asarray(value))


def main():
    out = sys.argv[1]
    cases = [c for c in node.collect_testcases(None) if re.search(r"quantize|qlinear|integer", c.name)]
    for c in cases:
        d = os.path.join(out, c.name)
        os.makedirs(os.path.join(d, "io"), exist_ok=True)
        m = onnx.ModelProto()
        m.CopyFrom(c.model)
        inputs, outputs = c.data_sets[0]
        g = m.graph
        keep = [g.input[0]]
        for vi, value in zip(list(g.input)[1:], inputs[1:]):
            g.initializer.append(tensor(value, vi.name))
        del g.input[:]
        g.input.extend(keep)
        onnx.save(m, os.path.join(d, c.name + ".onnx"))
        save(os.path.join(d, "io", "input_0"), inputs[0])
        for k, y in enumerate(outputs):
            save(os.path.join(d, "io", f"output_{k}"), y)
        print("converted", c.name, flush=True)


if __name__ == "__main__":
    main()
