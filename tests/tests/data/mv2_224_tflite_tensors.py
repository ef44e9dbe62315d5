# Digests (FNV-1a 64 of the raw bytes) of every activation tensor of mv2_224 under TFLite's
# BUILTIN_REF kernels, for the fixture inputs.
import sys, numpy as np, tensorflow as tf
model = 'fixtures/mv2_224/mv2_224.tflite'
def fnv(b):
    h = 0xcbf29ce484222325
    for x in b:
        h ^= x; h = (h * 0x100000001b3) & 0xffffffffffffffff
    return h
it = tf.lite.Interpreter(model_path=model, experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF, experimental_preserve_all_tensors=True)
it.allocate_tensors()
lines = []
for k in range(3):
    det = it.get_input_details()[0]
    it.set_tensor(det['index'], np.load(f'fixtures/mv2_224/io/input_{k}.npy'))
    it.invoke()
    for t in it.get_tensor_details():
        if t['index'] in [d['index'] for d in it.get_input_details()]: continue
        try: v = it.get_tensor(t['index'])
        except ValueError: continue
        if v.dtype != np.int8 or v.ndim < 2: continue
        # Only activations: skip constants (weights have quantization along axis 0 or are i32).
        if len(t['quantization_parameters']['scales']) != 1: continue
        lines.append(f"{k}\t{t['name']}\t{v.size}\t{fnv(v.tobytes()):016x}")
open(sys.argv[1], 'w').write('# input\ttensor\telements\tfnv1a64 (TFLite 2.21 BUILTIN_REF, mv2_224 fixture inputs)\n' + '\n'.join(lines) + '\n')
print(len(lines))
