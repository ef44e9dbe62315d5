//! Malformed and unsupported TFLite files give clear errors naming what is at fault, never a
//! panic: empty, truncated, corrupted and non-model files, an unsupported operator, a graph cycle,
//! a tensor whose size overflows.

use flatbuffers::{FlatBufferBuilder, WIPOffset};
use npu_build::Error;
use npu_build::import::{Format, from_bytes};

fn import(bytes: &[u8]) -> Result<npu_build::ir::Graph, Error> {
    from_bytes(bytes, Format::Tflite, "test")
}

fn fixture(model: &str) -> Vec<u8> {
    std::fs::read(
        npu_tests::fixtures_dir()
            .join(model)
            .join(format!("{model}.tflite")),
    )
    .expect("fixture")
}

/// A tensor of the hand-built models: name, shape, TensorType, buffer index.
struct T<'a> {
    name: &'a str,
    shape: &'a [i32],
    ty: i8,
    buffer: u32,
}

/// An operator of the hand-built models: opcode index, input and output tensor indices.
struct O<'a> {
    opcode: u32,
    inputs: &'a [i32],
    outputs: &'a [i32],
}

/// Vtable offset of schema field `id`.
const fn vt(id: u16) -> u16 {
    4 + 2 * id
}

/// Builds a TFLite flatbuffer with one subgraph, following `schema.fbs` (field ids in comments).
fn build(
    codes: &[i32],
    tensors: &[T],
    inputs: &[i32],
    outputs: &[i32],
    ops: &[O],
    buffers: &[&[u8]],
) -> Vec<u8> {
    let mut b = FlatBufferBuilder::new();
    let mut buffer_offsets = Vec::new();
    for data in buffers {
        let d = b.create_vector(data);
        let s = b.start_table();
        if !data.is_empty() {
            b.push_slot_always(vt(0), d); // Buffer.data
        }
        buffer_offsets.push(b.end_table(s));
    }
    let mut tensor_offsets = Vec::new();
    for t in tensors {
        let shape = b.create_vector(t.shape);
        let name = b.create_string(t.name);
        let scale = b.create_vector(&[0.05f32]);
        let zp = b.create_vector(&[0i64]);
        let qs = b.start_table();
        b.push_slot_always(vt(2), scale); // QuantizationParameters.scale
        b.push_slot_always(vt(3), zp); // QuantizationParameters.zero_point
        let q = b.end_table(qs);
        let s = b.start_table();
        b.push_slot_always(vt(0), shape); // Tensor.shape
        b.push_slot::<i8>(vt(1), t.ty, 0); // Tensor.type
        b.push_slot::<u32>(vt(2), t.buffer, 0); // Tensor.buffer
        b.push_slot_always(vt(3), name); // Tensor.name
        b.push_slot_always(vt(4), q); // Tensor.quantization
        tensor_offsets.push(b.end_table(s));
    }
    let mut op_offsets = Vec::new();
    for o in ops {
        let i = b.create_vector(o.inputs);
        let out = b.create_vector(o.outputs);
        let s = b.start_table();
        b.push_slot::<u32>(vt(0), o.opcode, 0); // Operator.opcode_index
        b.push_slot_always(vt(1), i); // Operator.inputs
        b.push_slot_always(vt(2), out); // Operator.outputs
        op_offsets.push(b.end_table(s));
    }
    let tensors_v = b.create_vector(&tensor_offsets);
    let ops_v = b.create_vector(&op_offsets);
    let in_v = b.create_vector(inputs);
    let out_v = b.create_vector(outputs);
    let sg_s = b.start_table();
    b.push_slot_always(vt(0), tensors_v); // SubGraph.tensors
    b.push_slot_always(vt(1), in_v); // SubGraph.inputs
    b.push_slot_always(vt(2), out_v); // SubGraph.outputs
    b.push_slot_always(vt(3), ops_v); // SubGraph.operators
    let sg = b.end_table(sg_s);
    let mut code_offsets: Vec<WIPOffset<_>> = Vec::new();
    for &c in codes {
        let s = b.start_table();
        b.push_slot::<i8>(vt(0), c.min(127) as i8, 0); // OperatorCode.deprecated_builtin_code
        b.push_slot::<i32>(vt(2), 1, 1); // OperatorCode.version
        b.push_slot::<i32>(vt(3), c, 0); // OperatorCode.builtin_code
        code_offsets.push(b.end_table(s));
    }
    let codes_v = b.create_vector(&code_offsets);
    let sgs = b.create_vector(&[sg]);
    let bufs = b.create_vector(&buffer_offsets);
    let m = b.start_table();
    b.push_slot::<u32>(vt(0), 3, 0); // Model.version
    b.push_slot_always(vt(1), codes_v); // Model.operator_codes
    b.push_slot_always(vt(2), sgs); // Model.subgraphs
    b.push_slot_always(vt(4), bufs); // Model.buffers
    let root = b.end_table(m);
    b.finish(root, Some("TFL3"));
    b.finished_data().to_vec()
}

const INT8: i8 = 9;
const RELU: i32 = 19;
/// An operator no branch maps (TANH, used here before, is an activation function now).
const SKIP_GRAM: i32 = 30;

/// Input -> RELU -> output, built by hand: the positive control for the builder.
fn relu_model() -> Vec<u8> {
    build(
        &[RELU],
        &[
            T {
                name: "x",
                shape: &[1, 4],
                ty: INT8,
                buffer: 0,
            },
            T {
                name: "y",
                shape: &[1, 4],
                ty: INT8,
                buffer: 0,
            },
        ],
        &[0],
        &[1],
        &[O {
            opcode: 0,
            inputs: &[0],
            outputs: &[1],
        }],
        &[&[]],
    )
}

#[test]
fn hand_built_model_imports_and_runs() {
    let g = import(&relu_model()).expect("the builder makes valid models");
    assert_eq!(g.ops.len(), 1);
    let x =
        npu_build::value::Value::new(vec![1, 4], npu_build::value::Data::I8(vec![-5, 0, 3, 127]))
            .unwrap();
    let y = npu_build::reference::run(&g, &[x]).expect("runs");
    assert_eq!(y[0].data, npu_build::value::Data::I8(vec![0, 0, 3, 127]));
}

#[test]
fn empty_file() {
    let e = import(&[]).unwrap_err();
    assert!(matches!(e, Error::Malformed { .. }), "{e}");
    assert!(e.to_string().contains("empty"), "{e}");
}

#[test]
fn empty_file_on_disk() {
    let dir = std::env::temp_dir().join(format!("npu-bad-tflite-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("empty.tflite");
    std::fs::write(&path, b"").unwrap();
    let e = npu_build::import::load(&path).unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn non_model_file() {
    // A .npy file is not a flatbuffer: no TFL3 identifier.
    let npy = std::fs::read(npu_tests::fixtures_dir().join("op_add/io/input_0_0.npy")).unwrap();
    let e = import(&npy).unwrap_err();
    assert!(matches!(e, Error::Malformed { .. }), "{e}");
    assert!(e.to_string().contains("TFL3"), "{e}");
    // Through `load`, the content and the extension say it is not a model at all.
    let e = npu_build::import::load(&npu_tests::fixtures_dir().join("op_add/io/input_0_0.npy"))
        .unwrap_err();
    assert!(matches!(e, Error::NotAModel { .. }), "{e}");
    assert!(e.to_string().contains("input_0_0.npy"), "{e}");
}

#[test]
fn truncated_files() {
    for model in ["op_conv1x1", "op_add", "op_reshape_fc"] {
        let bytes = fixture(model);
        for n in (0..bytes.len()).step_by(7) {
            let e = import(&bytes[..n]).expect_err("a truncated model must not import");
            let msg = e.to_string();
            assert!(
                msg.contains("malformed TFLite model"),
                "{model} cut at {n}: unexpected error {msg}"
            );
        }
    }
    // The big model too, at a few points.
    let mv2 = fixture("mv2_224");
    for n in [8, 100, 4096, mv2.len() / 2, mv2.len() - 1] {
        let e = import(&mv2[..n]).unwrap_err();
        assert!(e.to_string().contains("malformed TFLite model"), "{e}");
    }
}

#[test]
fn truncation_error_names_the_offset() {
    let bytes = fixture("op_conv1x1");
    let e = import(&bytes[..bytes.len() / 2]).unwrap_err().to_string();
    // The verifier reports the byte range that runs past the end.
    assert!(e.contains("out of bounds") || e.contains("offset"), "{e}");
}

/// A deterministic xorshift64 generator for byte positions and values.
fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

#[test]
fn corrupted_files_never_panic() {
    // Flip bytes all over small models (deterministic positions and values): every result must be
    // an import or an error, and errors must say what is wrong.
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15u64);
    let (mut ok, mut err) = (0, 0);
    for model in [
        "op_conv1x1",
        "op_add",
        "op_concat",
        "op_softmax",
        "op_reshape_fc",
        "op_mean",
    ]
    .iter()
    .filter(|m| npu_tests::fixtures_dir().join(m).exists())
    {
        let clean = fixture(model);
        for _ in 0..400 {
            let mut bytes = clean.clone();
            for _ in 0..1 + next() % 4 {
                let pos = (next() as usize) % bytes.len();
                bytes[pos] ^= (next() % 255 + 1) as u8;
            }
            match import(&bytes) {
                Ok(g) => {
                    ok += 1;
                    // A graph that imports must also be safe to prepare and run.
                    if let Ok(interp) = npu_build::reference::Interpreter::new(&g) {
                        let inputs: Vec<_> = g
                            .inputs
                            .iter()
                            .map(|&i| {
                                let t = &g.tensors[i];
                                let n = t.elements();
                                let data = npu_build::value::Data::from_le_bytes(
                                    t.dtype,
                                    &vec![1u8; n * t.dtype.size()],
                                );
                                data.map(|d| npu_build::value::Value::new(t.shape.clone(), d))
                            })
                            .filter_map(|v| v.ok().and_then(|v| v.ok()))
                            .collect();
                        let _ = interp.run(&inputs);
                    }
                }
                Err(e) => {
                    err += 1;
                    assert!(!e.to_string().is_empty());
                }
            }
        }
    }
    assert!(err > 0 && ok + err >= 2000, "ok {ok}, err {err}");
}

#[test]
fn unsupported_operator() {
    let bytes = build(
        &[SKIP_GRAM],
        &[
            T {
                name: "x",
                shape: &[1, 4],
                ty: INT8,
                buffer: 0,
            },
            T {
                name: "skip_gram_out",
                shape: &[1, 4],
                ty: INT8,
                buffer: 0,
            },
        ],
        &[0],
        &[1],
        &[O {
            opcode: 0,
            inputs: &[0],
            outputs: &[1],
        }],
        &[&[]],
    );
    let e = import(&bytes).unwrap_err();
    assert!(matches!(e, Error::UnsupportedOp { .. }), "{e}");
    let msg = e.to_string();
    // Names the node (its output tensor), the operator and what is supported.
    assert!(msg.contains("'skip_gram_out'"), "{msg}");
    assert!(msg.contains("SKIP_GRAM"), "{msg}");
    assert!(msg.contains("CONV_2D") && msg.contains("SOFTMAX"), "{msg}");
}

#[test]
fn unsupported_operator_in_a_fixture() {
    // Turn op_mul's MUL (builtin code 18) into SKIP_GRAM (30) by editing its OperatorCode
    // in place: try each aligned int32 18 in the file until the importer reports it. (TFLite takes the
    // larger of builtin_code and the deprecated byte, so the byte may stay 18.)
    const MUL: i32 = 18;
    let clean = fixture("op_mul");
    let mut found = false;
    for pos in (0..clean.len() - 4).step_by(4) {
        if clean[pos..pos + 4] != MUL.to_le_bytes() {
            continue;
        }
        let mut bytes = clean.clone();
        bytes[pos..pos + 4].copy_from_slice(&SKIP_GRAM.to_le_bytes());
        if let Err(Error::UnsupportedOp {
            node,
            op,
            supported,
        }) = import(&bytes)
        {
            assert_eq!(op, "SKIP_GRAM");
            assert_eq!(node, "PartitionedCall_1:0");
            assert!(supported.contains("MUL"), "{supported}");
            found = true;
            break;
        }
    }
    assert!(found, "no edit of op_mul produced an unsupported SKIP_GRAM");
}

#[test]
fn graph_cycle() {
    // x -> RELU(a) -> b, but "a" is produced from "b": b = relu(a), a = relu(b).
    let bytes = build(
        &[RELU],
        &[
            T {
                name: "x",
                shape: &[1, 4],
                ty: INT8,
                buffer: 0,
            },
            T {
                name: "a",
                shape: &[1, 4],
                ty: INT8,
                buffer: 0,
            },
            T {
                name: "b",
                shape: &[1, 4],
                ty: INT8,
                buffer: 0,
            },
            T {
                name: "y",
                shape: &[1, 4],
                ty: INT8,
                buffer: 0,
            },
        ],
        &[0],
        &[3],
        &[
            O {
                opcode: 0,
                inputs: &[1],
                outputs: &[2],
            },
            O {
                opcode: 0,
                inputs: &[2],
                outputs: &[1],
            },
            O {
                opcode: 0,
                inputs: &[0],
                outputs: &[3],
            },
        ],
        &[&[]],
    );
    let e = import(&bytes).unwrap_err();
    assert!(matches!(e, Error::Cycle { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("cycle") && (msg.contains("'a'") || msg.contains("'b'")),
        "{msg}"
    );
}

#[test]
fn tensor_size_overflow() {
    // 2^30 x 2^30 x 4 int32 elements: the byte size overflows 64 bits.
    let bytes = build(
        &[RELU],
        &[
            T {
                name: "x",
                shape: &[1, 4],
                ty: INT8,
                buffer: 0,
            },
            T {
                name: "huge",
                shape: &[1 << 30, 1 << 30, 4],
                ty: INT8,
                buffer: 0,
            },
        ],
        &[0],
        &[1],
        &[O {
            opcode: 0,
            inputs: &[0],
            outputs: &[1],
        }],
        &[&[]],
    );
    let e = import(&bytes).unwrap_err();
    assert!(matches!(e, Error::InvalidTensor { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("'huge'") && msg.contains("larger than"),
        "{msg}"
    );
}

#[test]
fn operator_reading_a_missing_tensor() {
    let bytes = build(
        &[RELU],
        &[
            T {
                name: "x",
                shape: &[1, 4],
                ty: INT8,
                buffer: 0,
            },
            T {
                name: "y",
                shape: &[1, 4],
                ty: INT8,
                buffer: 0,
            },
        ],
        &[0],
        &[1],
        &[O {
            opcode: 0,
            inputs: &[7],
            outputs: &[1],
        }],
        &[&[]],
    );
    let e = import(&bytes).unwrap_err().to_string();
    assert!(e.contains("tensor") && e.contains('7'), "{e}");
}

#[test]
fn constant_of_the_wrong_size() {
    // A RELU whose input is a constant with 3 bytes for 4 int8 elements.
    let bytes = build(
        &[RELU],
        &[
            T {
                name: "c",
                shape: &[1, 4],
                ty: INT8,
                buffer: 1,
            },
            T {
                name: "y",
                shape: &[1, 4],
                ty: INT8,
                buffer: 0,
            },
            T {
                name: "x",
                shape: &[1, 4],
                ty: INT8,
                buffer: 0,
            },
        ],
        &[2],
        &[1],
        &[O {
            opcode: 0,
            inputs: &[0],
            outputs: &[1],
        }],
        &[&[], &[1, 2, 3]],
    );
    let e = import(&bytes).unwrap_err().to_string();
    assert!(e.contains("'c'") && e.contains("3 bytes"), "{e}");
}

/// Several unsupported operators: one error listing each with its node count and first node.
#[test]
fn every_unsupported_operator_is_listed_once() {
    const CUMSUM: i32 = 128;
    let t = |name| T {
        name,
        shape: &[1, 4],
        ty: INT8,
        buffer: 0,
    };
    let bytes = build(
        &[SKIP_GRAM, CUMSUM],
        &[t("x"), t("a"), t("b"), t("c")],
        &[0],
        &[3],
        &[
            O {
                opcode: 0,
                inputs: &[0],
                outputs: &[1],
            },
            O {
                opcode: 1,
                inputs: &[1],
                outputs: &[2],
            },
            O {
                opcode: 0,
                inputs: &[2],
                outputs: &[3],
            },
        ],
        &[&[]],
    );
    let e = import(&bytes).unwrap_err();
    let Error::UnsupportedOps { ops, supported } = &e else {
        panic!("unexpected error {e}");
    };
    let got: Vec<(&str, usize, &str)> = ops
        .iter()
        .map(|u| (u.op.as_str(), u.count, u.first_node.as_str()))
        .collect();
    assert_eq!(got, [("SKIP_GRAM", 2, "a"), ("CUMSUM", 1, "b")]);
    assert!(supported.contains("CONV_2D"), "{supported}");
    let msg = e.to_string();
    assert!(
        msg.contains("SKIP_GRAM (2 nodes, first 'a'), CUMSUM (1 node, first 'b')"),
        "{msg}"
    );
}

/// The TFLite operator listing of a model that does not import.
#[test]
fn operator_list_of_a_model_with_unsupported_operators() {
    let t = |name| T {
        name,
        shape: &[1, 4],
        ty: INT8,
        buffer: 0,
    };
    let bytes = build(
        &[SKIP_GRAM, 0],
        &[t("x"), t("a"), t("b")],
        &[0],
        &[2],
        &[
            O {
                opcode: 0,
                inputs: &[0],
                outputs: &[1],
            },
            O {
                opcode: 1,
                inputs: &[1, 1],
                outputs: &[2],
            },
        ],
        &[&[]],
    );
    let path = std::env::temp_dir().join(format!("npu_oplist_{}.tflite", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let list = npu_build::import::operator_list(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert_eq!(
        list,
        [
            ("a".to_string(), "SKIP_GRAM".to_string(), false),
            ("b".to_string(), "ADD".to_string(), true)
        ]
    );
}

/// Every `.tflite` under `dir`, recursively, sorted.
fn tflite_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            tflite_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "tflite") {
            out.push(p);
        }
    }
}

#[test]
fn every_fixture_truncated_or_corrupted_never_panics() {
    // The generated readers check every offset they follow; this walks all fixtures (not only
    // the small ones above) cut short at spread-out points and with bytes flipped in their
    // first kilobytes, where the tables and vectors of the structure live.
    let mut files = Vec::new();
    tflite_files(&npu_tests::fixtures_dir(), &mut files);
    assert!(files.len() > 50, "only {} fixtures found", files.len());
    let mut next = xorshift(0x2545_f491_4f6c_dd1du64);
    let mut runs = 0;
    for path in &files {
        let clean = std::fs::read(path).expect("fixture");
        let n = clean.len();
        for k in 0..12 {
            let cut = [0, 7, 8, 64, n / 3, n / 2, n - 1][k % 7].min(n) + (k / 7) * 13;
            let cut = cut.min(n.saturating_sub(1));
            let e = import(&clean[..cut]).expect_err("a truncated model must not import");
            assert!(
                e.to_string().contains("malformed TFLite model"),
                "{} cut at {cut}: {e}",
                path.display()
            );
            runs += 1;
        }
        let head = n.min(4096);
        for _ in 0..32 {
            let mut bytes = clean.clone();
            for _ in 0..1 + next() % 3 {
                let pos = (next() as usize) % head;
                bytes[pos] ^= (next() % 255 + 1) as u8;
            }
            if let Err(e) = import(&bytes) {
                assert!(!e.to_string().is_empty());
            }
            runs += 1;
        }
    }
    assert!(runs >= 44 * files.len());
}
