//! The reference interpreter on every fixture's `.tflite` must reproduce TFLite's reference-kernel
//! outputs (`io/output_K.npy`) byte for byte, for all three inputs of each model.

use npu_build::value::Value;
use npu_tests::{differences, io_file};

fn check(model: &str) {
    let dir = npu_tests::fixtures_dir().join(model);
    let graph = npu_build::import::load(&dir.join(format!("{model}.tflite")))
        .unwrap_or_else(|e| panic!("{model}: import failed: {e}"));
    let interp = npu_build::reference::Interpreter::new(&graph)
        .unwrap_or_else(|e| panic!("{model}: preparation failed: {e}"));
    let io = dir.join("io");
    let (n_in, n_out) = (graph.inputs.len(), graph.outputs.len());
    let mut failures = Vec::new();
    let runs: Vec<Vec<Value>> = (0..3)
        .map(|k| {
            (0..n_in)
                .map(|j| {
                    Value::read_npy(&io_file(&io, "input", k, j, n_in)).expect("fixture input")
                })
                .collect()
        })
        .collect();
    // In order on one interpreter, as the fixtures were made: stateful models (LSTM) carry
    // their state from one input to the next.
    let results = interp
        .run_sequence(&runs)
        .unwrap_or_else(|e| panic!("{model}: run failed: {e}"));
    for (k, outputs) in results.iter().enumerate() {
        assert_eq!(outputs.len(), n_out);
        for (j, got) in outputs.iter().enumerate() {
            let want =
                Value::read_npy(&io_file(&io, "output", k, j, n_out)).expect("fixture output");
            let d = differences(got, &want);
            if !d.is_empty() {
                failures.push(format!("input {k}, output {j}: {d}"));
            }
        }
    }
    assert!(failures.is_empty(), "{model}:\n{}", failures.join("\n"));
}

macro_rules! fixture_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                check(stringify!($name));
            }
        )*

        /// Every fixture with a `.tflite` has a test above.
        #[test]
        fn every_tflite_fixture_is_tested() {
            let listed = [$(stringify!($name)),*];
            let mut missing = Vec::new();
            for entry in std::fs::read_dir(npu_tests::fixtures_dir()).expect("fixtures dir") {
                let entry = entry.expect("dir entry");
                let name = entry.file_name().to_string_lossy().into_owned();
                if entry.path().join(format!("{name}.tflite")).exists() && !listed.contains(&name.as_str()) {
                    missing.push(name);
                }
            }
            assert!(missing.is_empty(), "fixtures without a test: {missing:?}");
        }
    };
}

fixture_tests!(
    op_add,
    op_avgpool2x2,
    op_concat,
    op_conv1x1,
    digits,
    net_convnext_block,
    net_vit_block,
    op_conv3x3_s1_relu6,
    op_conv3x3_s2,
    op_conv5x5_valid,
    op_dwconv3x3_s1,
    op_dwconv3x3_s2,
    op_fc,
    op_global_avgpool,
    op_maxpool3x3_s2,
    op_mul,
    op_reshape_fc,
    op_resize_nearest,
    op_softmax,
    mv2_224,
    // movea
    op_slice,
    op_strided_slice,
    op_split,
    op_split_v,
    op_pack,
    op_unpack,
    op_expand_dims,
    op_squeeze,
    op_concat_h,
    // matmul
    op_fc_3d,
    op_transpose_conv_s1_valid,
    op_transpose_conv_s2,
    op_transpose_conv_s3,
    op_batch_matmul,
    op_transpose_conv_s21_valid_relu,
    op_transpose_conv_s4_k3,
    op_batch_matmul_adj_y,
    // moveb
    op_transpose,
    op_tile,
    op_mirror_pad,
    op_reverse,
    op_gather,
    op_depth_to_space,
    op_space_to_depth,
    op_tile_wc,
    // elem
    op_abs,
    op_neg,
    op_maximum,
    op_minimum,
    op_squared_difference,
    op_prelu,
    op_lstm,
    net_lstm_kws,
    op_add_broadcast,
    // reduce
    op_sum,
    op_reduce_max,
    op_reduce_min,
    op_arg_max,
    op_mean_channels,
    op_arg_min_i64,
    op_sum_w,
    op_reduce_max_hw,
    op_reduce_min_neg_axis,
    op_mean_h,
    op_mean_w_c,
    // act
    op_logistic,
    op_tanh,
    op_hard_swish,
    op_leaky_relu,
    op_elu,
    op_gelu,
    op_exp,
    op_relu_0_to_1,
    op_log,
    op_rsqrt,
    op_logistic_int16,
    op_logistic_int16_all,
    op_logistic_int16_pot,
    op_tanh_int16,
    op_tanh_int16_all,
    op_tanh_int16_pot,
    net_mnv3s,
    net_effb0,
    net_unet,
    net_vit_encoder,
    net_ds_cnn,
    net_resnet8,
    op_strided_slice_masks,
    op_slice_to_end,
    op_split_h,
    op_split_v_w,
    op_pack_last,
    op_unpack_last,
    op_flatten_shape,
    op_concat_w,
    op_strided_slice_rewritten,
);

/// The extra models of `tests/data/tflite_extra` (operators and attributes the fixtures lack; see
/// its README): every output byte as TFLite's reference kernels.
#[test]
fn extra_tflite_models() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/tflite_extra");
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .expect("tflite_extra dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 23, "{names:?}");
    let mut failures = Vec::new();
    for model in &names {
        let dir = root.join(model);
        let graph = match npu_build::import::load(&dir.join(format!("{model}.tflite"))) {
            Ok(g) => g,
            Err(e) => {
                failures.push(format!("{model}: import failed: {e}"));
                continue;
            }
        };
        for k in 0..3 {
            let inputs: Vec<Value> = (0..graph.inputs.len())
                .map(|j| Value::read_npy(&dir.join(format!("input_{k}_{j}.npy"))).expect("input"))
                .collect();
            let outputs = match npu_build::reference::run(&graph, &inputs) {
                Ok(o) => o,
                Err(e) => {
                    failures.push(format!("{model}: input {k}: {e}"));
                    continue;
                }
            };
            for (j, got) in outputs.iter().enumerate() {
                let want =
                    Value::read_npy(&dir.join(format!("output_{k}_{j}.npy"))).expect("output");
                let d = differences(got, &want);
                if !d.is_empty() {
                    failures.push(format!("{model}: input {k}, output {j}: {d}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// FNV-1a (64-bit) of a byte string.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// mv2_224's fixture outputs are constant (its last ~20 layers carry a single value), so the
/// output comparison alone says little about most of the network. `data/mv2_224_tflite_tensors.tsv`
/// holds digests of every intermediate activation under TFLite's reference kernels (made by
/// `data/mv2_224_tflite_tensors.py`); each must match ours.
#[test]
fn mv2_224_every_intermediate_tensor() {
    let data = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let table = std::fs::read_to_string(data.join("mv2_224_tflite_tensors.tsv")).expect("tsv");
    let dir = npu_tests::fixtures_dir().join("mv2_224");
    let graph = npu_build::import::load(&dir.join("mv2_224.tflite")).expect("import");
    let interp = npu_build::reference::Interpreter::new(&graph).expect("prepare");
    let mut all = Vec::new();
    for k in 0..3 {
        let x = Value::read_npy(&dir.join(format!("io/input_{k}.npy"))).expect("input");
        all.push(interp.run_all(&[x]).expect("run"));
    }
    let (mut checked, mut failures) = (0, Vec::new());
    for line in table.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split('\t').collect();
        let (k, name, want): (usize, &str, &str) = (f[0].parse().expect("k"), f[1], f[3]);
        let id = graph
            .tensors
            .iter()
            .position(|t| t.name == name)
            .unwrap_or_else(|| panic!("no tensor '{name}' in the imported graph"));
        let v = all[k][id]
            .as_ref()
            .unwrap_or_else(|| panic!("'{name}' has no value"));
        let got = format!("{:016x}", fnv1a64(&v.data.to_le_bytes()));
        if got != want {
            failures.push(format!("input {k}: '{name}'"));
        }
        checked += 1;
    }
    assert_eq!(checked, 192);
    assert!(
        failures.is_empty(),
        "{} tensors differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A malformed LSTM (weights of the wrong shape, a state of the wrong size, a cell scale that
/// is not a power of two) is an error naming the node, from the reference and the compiler.
#[test]
fn malformed_lstm_is_an_error_naming_the_node() {
    use npu_build::ir::{LstmAttrs, OpKind};
    let dir = npu_tests::fixtures_dir().join("op_lstm");
    let graph = npu_build::import::load(&dir.join("op_lstm.tflite")).expect("import");
    let k = graph
        .ops
        .iter()
        .position(|op| matches!(op.kind, OpKind::Lstm(_)))
        .expect("an LSTM");
    let node = graph.ops[k].name.clone();
    type Breakage = Box<dyn Fn(&mut npu_build::ir::Graph)>;
    let breakages: [(&str, Breakage); 3] = [
        (
            "recurrent weights [16, 8]",
            Box::new(move |g| {
                let w = g.ops[k].inputs[6];
                g.tensors[w].shape = vec![32, 8];
            }),
        ),
        (
            "hidden state of 15 values",
            Box::new(move |g| {
                let h = g.ops[k].inputs[LstmAttrs::H];
                g.tensors[h].shape = vec![1, 15];
            }),
        ),
        (
            "cell scale 3e-5",
            Box::new(move |g| {
                let c = g.ops[k].inputs[LstmAttrs::C];
                g.tensors[c].quant.as_mut().expect("quantized").scale = vec![3e-5];
            }),
        ),
    ];
    for (what, breakage) in breakages {
        let mut g = graph.clone();
        breakage(&mut g);
        let e = npu_build::reference::Interpreter::new(&g)
            .err()
            .unwrap_or_else(|| panic!("{what}: accepted"))
            .to_string();
        assert!(e.contains(&node), "{what}: {e}");
        let t = npu_build::target::Target::for_accelerator("ethos-u55-128").expect("target");
        let e = npu_build::ethos_u::compile(&g, t.accelerator)
            .err()
            .unwrap_or_else(|| panic!("{what}: compiled"))
            .to_string();
        assert!(e.contains(&node), "{what}: {e}");
    }
}
