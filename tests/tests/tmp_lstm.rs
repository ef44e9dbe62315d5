use npu_build::value::Value;
#[test]
fn dump() {
    let dir = npu_tests::fixtures_dir().join("op_lstm");
    let g = npu_build::import::load(&dir.join("op_lstm.tflite")).unwrap();
    let it = npu_build::reference::Interpreter::new(&g).unwrap();
    let x = Value::read_npy(&dir.join("io/input_0.npy")).unwrap();
    let all = it.run_all(&[x]).unwrap();
    for (i, t) in g.tensors.iter().enumerate() {
        if t.name.contains("pseudo") || t.name.contains("lstm") {
            println!("{} {:?}", t.name, all[i].as_ref().map(|v| v.data.clone()));
        }
    }
}
