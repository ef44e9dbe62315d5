#!/bin/bash
# survey_check.sh NAME [target]: our reference interpreter and virtual NPU against TFLite's
# output for a model made by survey_models.py, from both formats. Run it in that OUT_DIR;
# NPU (default: target/release/npu of this repository) and EXTRA (e.g. "--optimise size")
# are read from the environment; PYTHON is a Python with numpy.
n=$1; t=${2:-ethos-u55-128}
NPU=${NPU:-$(cd "$(dirname "$0")/.." && pwd)/target/release/npu}
PYTHON=${PYTHON:-python3}
for f in tflite onnx; do
  [ -f $n.$f ] || continue
  for e in reference sim; do
    outs=()
    k=0; for o in ${n}_out*.npy; do outs+=(--output $PWD/got_${n}_${f}_${e}_$k.npy); k=$((k+1)); done
    if ! msg=$($NPU run --engine $e -t $t $EXTRA $n.$f --input ${n}_in.npy "${outs[@]}" 2>&1); then
      echo "$n.$f $e: ERROR: $(echo "$msg" | tail -2 | cut -c1-400)"; continue
    fi
    k=0; ok=1
    for o in ${n}_out*.npy; do
      $PYTHON -c "
import numpy as np,sys
a=np.load('$o'); b=np.load('$PWD/got_${n}_${f}_${e}_$k.npy')
if a.shape!=b.shape or a.dtype!=b.dtype: print('shape/dtype', a.shape, b.shape, a.dtype, b.dtype); sys.exit(1)
d=np.abs(a.astype(int)-b.astype(int)); 
if d.max()>0: print('max diff', d.max(), 'n diff', (d>0).sum(), 'of', d.size); sys.exit(1)
" || ok=0
      k=$((k+1))
    done
    [ $ok = 1 ] && echo "$n.$f $e: bit-exact" || echo "$n.$f $e: MISMATCH"
  done
done
