//! Malformed ONNX input: truncated, corrupted and empty files, files that are not models, an
//! unsupported operator, a graph cycle, tensors whose size overflows. Each must give a clear error
//! naming what is at fault, never a panic.

use std::path::PathBuf;

use npu_build::Error;
use npu_build::import::onnx::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, StringStringEntryProto, TensorProto,
    ValueInfoProto, data_type,
};
use npu_build::import::{self, Format};
use npu_build::ir::Graph;
use prost::Message;

fn fixture(model: &str, file: &str) -> PathBuf {
    npu_tests::fixtures_dir().join(model).join(file)
}

fn conv_bytes() -> Vec<u8> {
    std::fs::read(fixture("op_conv1x1", "op_conv1x1.onnx")).expect("fixture")
}

fn import(bytes: &[u8]) -> Result<Graph, Error> {
    import::from_bytes(bytes, Format::Onnx, "bad")
}

fn error(bytes: &[u8]) -> Error {
    match import(bytes) {
        Ok(_) => panic!("a malformed model was accepted"),
        Err(e) => e,
    }
}

/// int8 `x [1, 4]` -> `nodes` -> `y`, with `inits`.
fn model(nodes: Vec<NodeProto>, inits: Vec<TensorProto>) -> Vec<u8> {
    let graph = GraphProto {
        node: nodes,
        name: "g".into(),
        initializer: inits,
        input: vec![ValueInfoProto::tensor("x", data_type::INT8, &[1, 4])],
        output: vec![ValueInfoProto::tensor("y", data_type::INT8, &[1, 4])],
        ..Default::default()
    };
    ModelProto::new(17, graph).encode_to_vec()
}

#[test]
fn empty_file() {
    let e = error(b"");
    assert!(matches!(e, Error::Malformed { .. }), "{e}");
    assert!(e.to_string().contains("no graph"), "{e}");
}

#[test]
fn truncated_files() {
    let bytes = conv_bytes();
    let n = bytes.len();
    let mut cuts: Vec<usize> = (1..n).step_by(n / 97 + 1).collect();
    cuts.extend(n.saturating_sub(64)..n);
    // The file ends with the optional `ai.onnx.ml` opset import (field 8, 14 bytes): cutting
    // exactly before it leaves a complete model, the only cut that does.
    let ml = n - 16;
    assert_eq!(&bytes[ml..ml + 2], b"B\x0e");
    assert!(import(&bytes[..ml]).is_ok());
    for cut in cuts.into_iter().filter(|&c| c != ml) {
        let e = error(&bytes[..cut]);
        assert!(
            matches!(
                e,
                Error::Malformed { .. } | Error::InvalidNode { .. } | Error::InvalidTensor { .. }
            ),
            "cut at {cut}: {e:?}"
        );
        assert!(!e.to_string().is_empty());
    }
    // Cut inside a field: the decoder names what it was reading.
    let e = error(&bytes[..n / 2]);
    let msg = e.to_string();
    assert!(
        msg.starts_with("malformed ONNX model: not a readable ONNX protobuf"),
        "{msg}"
    );
    assert!(msg.contains("Proto"), "{msg}");
}

#[test]
fn corrupted_bytes_never_panic() {
    let bytes = conv_bytes();
    let (mut accepted, mut refused) = (0, 0);
    for pos in (0..bytes.len()).step_by(7) {
        for flip in [0xff, 0x80, 0x01] {
            let mut b = bytes.clone();
            b[pos] ^= flip;
            // A flip inside weight data still gives a valid model; anything else an error.
            match import(&b) {
                Ok(_) => accepted += 1,
                Err(e) => {
                    assert!(!e.to_string().is_empty());
                    refused += 1;
                }
            }
        }
    }
    assert!(
        accepted > 0 && refused > 0,
        "{accepted} accepted, {refused} refused"
    );
}

#[test]
fn corrupted_initializer_is_named() {
    let mut m = ModelProto::decode(conv_bytes().as_slice()).expect("fixture decodes");
    let g = m.graph.as_mut().expect("graph");
    let w = g
        .initializer
        .iter_mut()
        .find(|t| t.name == "functional_2_1/conv2d_2_1/convolution")
        .expect("weights");
    w.raw_data.truncate(w.raw_data.len() / 2);
    let e = error(&m.encode_to_vec());
    let msg = e.to_string();
    assert!(matches!(e, Error::InvalidTensor { .. }), "{msg}");
    assert!(
        msg.contains("'functional_2_1/conv2d_2_1/convolution'"),
        "{msg}"
    );
    assert!(msg.contains("needs 2048 elements"), "{msg}");
}

#[test]
fn data_in_an_external_file_is_refused() {
    let mut t = TensorProto::from_i8("w", &[4], &[1, 2, 3, 4]);
    t.raw_data.clear();
    t.external_data = vec![StringStringEntryProto {
        key: "location".into(),
        value: "weights.bin".into(),
    }];
    t.data_location = Some(1);
    let bytes = model(
        vec![NodeProto::new("Identity", "id", &["x"], &["y"], vec![])],
        vec![t],
    );
    let e = error(&bytes);
    assert!(
        e.to_string().contains("'w'") && e.to_string().contains("external"),
        "{e}"
    );
}

#[test]
fn files_that_are_not_onnx_models() {
    // JSON, a .npy array and a TFLite flatbuffer handed to the ONNX importer.
    for (model, file) in [
        ("op_conv1x1", "io/io.json"),
        ("op_conv1x1", "io/input_0.npy"),
        ("op_conv1x1", "op_conv1x1.tflite"),
    ] {
        let bytes = std::fs::read(fixture(model, file)).expect("fixture file");
        let e = error(&bytes);
        assert!(matches!(e, Error::Malformed { .. }), "{file}: {e}");
        assert!(e.to_string().contains("ONNX"), "{file}: {e}");
    }
    // By path: a .npy is recognised as neither format.
    let e = import::load(&fixture("op_conv1x1", "io/input_0.npy")).unwrap_err();
    assert!(matches!(e, Error::NotAModel { .. }), "{e}");
    assert!(e.to_string().contains("input_0.npy"), "{e}");
}

/// Several unsupported operators: one error listing each with its node count and first node.
#[test]
fn every_unsupported_operator_is_listed_once() {
    let bytes = model(
        vec![
            NodeProto::new("Hardmax", "h1", &["x"], &["a"], vec![]),
            NodeProto::new("CumSum", "c1", &["a"], &["b"], vec![]),
            NodeProto::new("Hardmax", "h2", &["b"], &["y"], vec![]),
        ],
        vec![],
    );
    let e = error(&bytes);
    let Error::UnsupportedOps { ops, .. } = &e else {
        panic!("unexpected error {e}");
    };
    let got: Vec<(&str, usize, &str)> = ops
        .iter()
        .map(|u| (u.op.as_str(), u.count, u.first_node.as_str()))
        .collect();
    assert_eq!(got, [("Hardmax", 2, "h1"), ("CumSum", 1, "c1")]);
}

#[test]
fn unsupported_operator_is_named_with_the_supported_list() {
    let bytes = model(
        vec![NodeProto::new(
            "HardSwish",
            "my_activation",
            &["x"],
            &["y"],
            vec![],
        )],
        vec![],
    );
    match error(&bytes) {
        Error::UnsupportedOp {
            node,
            op,
            supported,
        } => {
            assert_eq!((node.as_str(), op.as_str()), ("my_activation", "HardSwish"));
            for known in ["Conv", "QuantizeLinear", "Resize", "Softmax", "Gemm"] {
                assert!(supported.contains(known), "{supported}");
            }
        }
        other => panic!("unexpected error {other}"),
    }
    // Operators of other domains (onnxruntime's contrib ops beyond the QOperator ones) are
    // named with the domain.
    let mut n = NodeProto::new("QAttention", "", &["x"], &["y"], vec![]);
    n.domain = "com.microsoft".into();
    let e = error(&model(vec![n], vec![]));
    let msg = e.to_string();
    assert!(
        msg.contains("node 'y'") && msg.contains("com.microsoft.QAttention"),
        "{msg}"
    );
}

#[test]
fn graph_cycle_is_reported_with_a_node_on_it() {
    let bytes = model(
        vec![
            NodeProto::new("Relu", "first", &["b"], &["a"], vec![]),
            NodeProto::new("Relu", "second", &["a"], &["b"], vec![]),
            NodeProto::new("Identity", "out", &["b"], &["y"], vec![]),
        ],
        vec![],
    );
    match error(&bytes) {
        Error::Cycle { node } => assert!(node == "first" || node == "second", "{node}"),
        other => panic!("unexpected error {other}"),
    }
}

#[test]
fn undefined_values_and_duplicate_producers() {
    let e = error(&model(
        vec![NodeProto::new("Relu", "r", &["ghost"], &["y"], vec![])],
        vec![],
    ));
    assert!(
        e.to_string().contains("node 'r'") && e.to_string().contains("'ghost'"),
        "{e}"
    );
    let e = error(&model(
        vec![
            NodeProto::new("Identity", "one", &["x"], &["y"], vec![]),
            NodeProto::new("Identity", "two", &["x"], &["y"], vec![]),
        ],
        vec![],
    ));
    assert!(
        e.to_string().contains("'one'") && e.to_string().contains("'two'"),
        "{e}"
    );
}

#[test]
fn tensor_sizes_that_overflow() {
    // An initializer claiming 2^62 x 4 elements (and holding none).
    let huge = TensorProto::raw("huge", data_type::INT8, &[1 << 62, 4], vec![]);
    let e = error(&model(
        vec![NodeProto::new("Identity", "id", &["x"], &["y"], vec![])],
        vec![huge],
    ));
    assert!(matches!(e, Error::InvalidTensor { .. }), "{e}");
    assert!(
        e.to_string().contains("'huge'") && e.to_string().contains("overflows"),
        "{e}"
    );
    // A graph input of 2^40 x 2^40 elements.
    let graph = GraphProto {
        node: vec![NodeProto::new("Identity", "id", &["x"], &["y"], vec![])],
        input: vec![ValueInfoProto::tensor(
            "x",
            data_type::INT8,
            &[1 << 40, 1 << 40],
        )],
        output: vec![ValueInfoProto::tensor(
            "y",
            data_type::INT8,
            &[1 << 40, 1 << 40],
        )],
        ..Default::default()
    };
    let e = error(&ModelProto::new(17, graph).encode_to_vec());
    assert!(e.to_string().contains("'x'"), "{e}");
    // Shape arithmetic asking for a 2^40-element constant.
    let shape = TensorProto::from_i64("shape", &[1], &[1 << 40]);
    let e = error(&model(
        vec![
            NodeProto::new("ConstantOfShape", "fill", &["shape"], &["c"], vec![]),
            NodeProto::new("Reshape", "r", &["x", "c"], &["y"], vec![]),
        ],
        vec![shape],
    ));
    assert!(e.to_string().contains("node 'fill'"), "{e}");
    // A negative dimension.
    let neg = TensorProto::raw("neg", data_type::INT8, &[-3], vec![]);
    let e = error(&model(
        vec![NodeProto::new("Identity", "id", &["x"], &["y"], vec![])],
        vec![neg],
    ));
    assert!(
        e.to_string().contains("'neg'") && e.to_string().contains("negative"),
        "{e}"
    );
}

#[test]
fn inconsistent_attributes_are_named() {
    // A Transpose whose perm is not a permutation.
    let e = error(&model(
        vec![NodeProto::new(
            "Transpose",
            "t",
            &["x"],
            &["y"],
            vec![AttributeProto::ints("perm", &[0, 0])],
        )],
        vec![],
    ));
    assert!(
        e.to_string().contains("node 't'") && e.to_string().contains("perm"),
        "{e}"
    );
    // A Reshape to an impossible shape.
    let e = error(&model(
        vec![NodeProto::new("Reshape", "r", &["x", "s"], &["y"], vec![])],
        vec![TensorProto::from_i64("s", &[2], &[3, 3])],
    ));
    assert!(e.to_string().contains("node 'r'"), "{e}");
}

/// `import::operator_list` lists a model that does not import, marking unknown operators
/// (what `npu inspect` prints for it).
#[test]
fn operator_list_marks_unsupported_operators() {
    let bytes = model(
        vec![
            NodeProto::new("Hardmax", "h1", &["x"], &["a"], vec![]),
            NodeProto::new("Relu", "r1", &["a"], &["y"], vec![]),
        ],
        vec![],
    );
    let path = std::env::temp_dir().join(format!("npu_oplist_{}.onnx", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let list = npu_build::import::operator_list(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert_eq!(
        list,
        [
            ("h1".to_string(), "Hardmax".to_string(), false),
            ("r1".to_string(), "Relu".to_string(), true)
        ]
    );
}
