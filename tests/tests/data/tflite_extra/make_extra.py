# Small int8 TFLite models covering operators and attributes the project fixtures do not (broadcast
# SUB/ADD/MUL, PAD/PADV2, bilinear and nearest resize variants, MEAN variants, SAME pooling, dilated
# and depth-multiplier convolutions, concat + stand-alone RELU6, a float-boundary model, 3-D FC),
# with three random inputs each and the outputs of TFLite 2.21 BUILTIN_REF kernels.
# Usage: python make_extra.py OUT_DIR  (needs tensorflow; the tests only read the files it wrote).
import os, sys, json, numpy as np, tensorflow as tf
out = sys.argv[1]
rng = np.random.default_rng(7)
K = tf.keras

def convert(name, model, in_shapes, float_io=False):
    def rep():
        for _ in range(32):
            yield [rng.uniform(-1, 1, s).astype(np.float32) for s in in_shapes]
    c = tf.lite.TFLiteConverter.from_keras_model(model)
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.representative_dataset = rep
    c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    if not float_io:
        c.inference_input_type = tf.int8
        c.inference_output_type = tf.int8
    b = c.convert()
    d = os.path.join(out, name); os.makedirs(d, exist_ok=True)
    open(os.path.join(d, name + '.tflite'), 'wb').write(b)
    it = tf.lite.Interpreter(model_content=b, experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    ins = it.get_input_details(); outs = it.get_output_details()
    for k in range(3):
        for j, det in enumerate(ins):
            if det['dtype'] == np.float32:
                x = rng.uniform(-1.2, 1.2, det['shape']).astype(np.float32)
            else:
                x = rng.integers(-128, 128, det['shape']).astype(det['dtype'])
            it.set_tensor(det['index'], x)
            np.save(os.path.join(d, f'input_{k}_{j}.npy'), x)
        it.invoke()
        for j, det in enumerate(outs):
            np.save(os.path.join(d, f'output_{k}_{j}.npy'), it.get_tensor(det['index']))
    ops = sorted({o['op_name'] for o in it._get_ops_details()})
    print(name, len(b), 'bytes', ops)

def inp(shape, name=None): return K.Input(shape=shape[1:], batch_size=1, name=name)

# 1. SUB/ADD/MUL with broadcast and fused relu
a = inp((1,8,8,16)); b = inp((1,1,1,16))
y = K.layers.Subtract()([a, b]); convert('sub_broadcast', K.Model([a,b], y), [(1,8,8,16),(1,1,1,16)])
a = inp((1,8,8,16)); b = inp((1,1,8,16))
y = K.layers.ReLU()(K.layers.Add()([a, b])); convert('add_broadcast_relu', K.Model([a,b], y), [(1,8,8,16),(1,1,8,16)])
a = inp((1,8,8,16)); b = inp((1,8,1,1))
y = K.layers.Multiply()([a, b]); convert('mul_broadcast', K.Model([a,b], y), [(1,8,8,16),(1,8,1,1)])
# 2. PAD and PADV2
a = inp((1,6,6,8))
y = K.layers.Lambda(lambda t: tf.pad(t, [[0,0],[1,2],[2,1],[0,0]]))(a); y = K.layers.Conv2D(8, 3, padding='valid')(y)
convert('pad_conv', K.Model(a, y), [(1,6,6,8)])
a = inp((1,6,6,8))
y = K.layers.Lambda(lambda t: tf.pad(t, [[0,0],[1,1],[1,1],[0,0]], constant_values=0.5))(a)
convert('padv2', K.Model(a, y), [(1,6,6,8)])
# 3. Resize bilinear / nearest variants
for nm, fn in [('resize_bilinear_hpc', lambda t: tf.image.resize(t, (13, 11), method='bilinear')),
               ('resize_bilinear_ac', lambda t: tf.compat.v1.image.resize_bilinear(t, (13, 11), align_corners=True)),
               ('resize_bilinear_plain', lambda t: tf.compat.v1.image.resize_bilinear(t, (16, 10), align_corners=False, half_pixel_centers=False)),
               ('resize_nearest_ac', lambda t: tf.compat.v1.image.resize_nearest_neighbor(t, (13, 11), align_corners=True)),
               ('resize_nearest_plain', lambda t: tf.compat.v1.image.resize_nearest_neighbor(t, (12, 9), align_corners=False))]:
    a = inp((1,7,5,4)); convert(nm, K.Model(a, K.layers.Lambda(fn)(a)), [(1,7,5,4)])
# 4. MEAN variants
a = inp((1,7,7,16)); convert('mean_keepdims_hw', K.Model(a, K.layers.Lambda(lambda t: tf.reduce_mean(t, axis=[1,2], keepdims=True))(a)), [(1,7,7,16)])
a = inp((1,5,6,16)); convert('mean_axis1', K.Model(a, K.layers.Lambda(lambda t: tf.reduce_mean(t, axis=[1]))(a)), [(1,5,6,16)])
a = inp((1,5,6,16)); convert('mean_axis3_keep', K.Model(a, K.layers.Lambda(lambda t: tf.reduce_mean(t, axis=[3], keepdims=True))(a)), [(1,5,6,16)])
# 5. Pools with SAME padding
a = inp((1,9,9,8)); convert('avgpool3_s2_same', K.Model(a, K.layers.AveragePooling2D(3, 2, padding='same')(a)), [(1,9,9,8)])
a = inp((1,10,10,8)); convert('maxpool2_s2_valid', K.Model(a, K.layers.MaxPooling2D(2, 2, padding='valid')(a)), [(1,10,10,8)])
# 6. Dilated conv, depth multiplier 2, strided 1x1
a = inp((1,12,12,6)); convert('conv_dilated', K.Model(a, K.layers.Conv2D(10, 3, dilation_rate=2, padding='same', activation='relu')(a)), [(1,12,12,6)])
a = inp((1,10,10,6)); convert('dwconv_mult2', K.Model(a, K.layers.DepthwiseConv2D(3, depth_multiplier=2, padding='same')(a)), [(1,10,10,6)])
a = inp((1,9,9,8)); convert('conv1x1_s2', K.Model(a, K.layers.Conv2D(12, 1, strides=2)(a)), [(1,9,9,8)])
# 7. Concat along H with a standalone RELU after (not fusable)
a = inp((1,4,6,8)); b = inp((1,3,6,8))
y = K.layers.ReLU(max_value=6.0)(K.layers.Concatenate(axis=1)([a, b])); convert('concat_h_relu6', K.Model([a,b], y), [(1,4,6,8),(1,3,6,8)])
# 8. Float boundary: QUANTIZE at the input, DEQUANTIZE at the output
a = inp((1,8,8,4)); y = K.layers.Conv2D(8, 3, padding='same', activation='relu')(a); y = K.layers.GlobalAveragePooling2D()(y); y = K.layers.Dense(5)(y); y = K.layers.Softmax()(y)
convert('float_io_cnn', K.Model(a, y), [(1,8,8,4)], float_io=True)
# 9. FC on 3-D input (keep_num_dims) and softmax on 3-D
a = inp((1,3,20)); y = K.layers.Dense(7)(a); y = K.layers.Softmax()(y)
convert('dense3d_softmax', K.Model(a, y), [(1,3,20)])

# 10. MEAN with the output quantized like the input (the case older TFLite releases special-cased):
# edit the calibrated models' output quantization, then record TFLite's outputs again.
import flatbuffers
from tensorflow.lite.python import schema_py_generated as s
for src, name in [('mean_axis1', 'mean_axis1_samequant'), ('mean_keepdims_hw', 'mean_hw_samequant')]:
    buf = open(os.path.join(out, src, src + '.tflite'), 'rb').read()
    m = s.ModelT.InitFromObj(s.Model.GetRootAsModel(buf, 0)); sg = m.subgraphs[0]
    ti = sg.tensors[sg.operators[0].inputs[0]]; to = sg.tensors[sg.operators[0].outputs[0]]
    to.quantization.scale = [ti.quantization.scale[0]]; to.quantization.zeroPoint = [ti.quantization.zeroPoint[0]]
    fb = flatbuffers.Builder(0); fb.Finish(m.Pack(fb), file_identifier=b'TFL3'); b = bytes(fb.Output())
    d = os.path.join(out, name); os.makedirs(d, exist_ok=True)
    open(os.path.join(d, name + '.tflite'), 'wb').write(b)
    it = tf.lite.Interpreter(model_content=b, experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    r = np.random.default_rng(1)
    for k in range(3):
        det = it.get_input_details()[0]; x = r.integers(-128, 128, det['shape']).astype(np.int8)
        it.set_tensor(det['index'], x); it.invoke()
        np.save(os.path.join(d, f'input_{k}_0.npy'), x)
        np.save(os.path.join(d, f'output_{k}_0.npy'), it.get_tensor(it.get_output_details()[0]['index']))
    print(name)
