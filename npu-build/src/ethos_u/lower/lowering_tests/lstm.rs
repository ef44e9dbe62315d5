//! The LSTM on synthetic graphs: batches above 1, time-major inputs, a cell scale other than
//! the converter's 2^-15, a cell clip, and gates driven into saturation. The lowered program,
//! every compiled target (NPU) and the CPU kernel each equal the reference interpreter (one run
//! from the initial state; `tests/tests/backend_fixtures.rs` carries state across runs).

use super::*;
use crate::ir::LstmAttrs;

/// Adds an LSTM over `x` (`[B, T, I]`, or `[T, B, I]` when time major) to `b`, returning its
/// output (`h` quantized `(0.0078, 5)`, a graph output when `output`).
#[allow(clippy::too_many_arguments)]
fn add_lstm(
    b: &mut Builder,
    rng: &mut Rng,
    x: TensorId,
    (batch, time, input, cell): (usize, usize, usize, usize),
    time_major: bool,
    cell_shift: i32,
    cell_clip: f32,
    output: bool,
) -> TensorId {
    let x_scale = b.g.tensors[x].quant.as_ref().map_or(1.0, |q| q.scale());
    let k = b.g.variables.len() / 2;
    let mut inputs = vec![x];
    for path in 0..8 {
        let cols = if path < 4 { input } else { cell };
        let data = (0..cell * cols)
            .map(|_| rng.range(-127, 127) as i8 as u8)
            .collect();
        let scale = 0.004 + 0.001 * path as f32;
        let w = b.konst(
            &format!("l{k}w{path}"),
            &[cell, cols],
            DType::I8,
            Quantization::per_tensor(scale, 0),
            data,
        );
        inputs.push(w);
    }
    for gate in 0..4 {
        let t = b.bias(rng, cell, x_scale * 0.004);
        b.g.tensors[t].name = format!("l{k}b{gate}");
        inputs.push(t);
    }
    let (h_scale, h_zp) = (0.0078, 5);
    let h = b.tensor(
        &format!("l{k}h"),
        &[batch, cell],
        DType::I8,
        Some((h_scale, h_zp)),
    );
    let c = b.tensor(
        &format!("l{k}c"),
        &[batch, cell],
        DType::I16,
        Some((2f32.powi(cell_shift), 0)),
    );
    b.g.variables.extend([h, c]);
    inputs.extend([h, c]);
    let ys = if time_major {
        [time, batch, cell]
    } else {
        [batch, time, cell]
    };
    let y = if output {
        b.output(&format!("l{k}y"), &ys, DType::I8, h_scale, h_zp)
    } else {
        b.tensor(&format!("l{k}y"), &ys, DType::I8, Some((h_scale, h_zp)))
    };
    b.op(
        OpKind::Lstm(LstmAttrs {
            time_major,
            cell_clip,
            hidden_scale: h_scale,
            hidden_zero_point: h_zp,
        }),
        inputs,
        vec![y],
    );
    y
}

fn lstm_graph(
    rng: &mut Rng,
    (batch, time, input, cell): (usize, usize, usize, usize),
    time_major: bool,
    cell_shift: i32,
    cell_clip: f32,
    x_scale: f32,
) -> Graph {
    let mut b = Builder::default();
    let xs = if time_major {
        [time, batch, input]
    } else {
        [batch, time, input]
    };
    let x = b.input("x", &xs, DType::I8, x_scale, -3);
    add_lstm(
        &mut b,
        rng,
        x,
        (batch, time, input, cell),
        time_major,
        cell_shift,
        cell_clip,
        true,
    );
    b.g
}

#[test]
fn lstm_batches_time_major_cell_scales_and_clips() {
    let mut rng = Rng(0x157D_0001);
    // (dims, time major, cell shift, cell clip, input scale, on the NPU)
    let cases = [
        ((2, 3, 5, 4), false, -15, 0.0, 0.02, true),
        ((3, 4, 6, 8), true, -15, 0.0, 0.02, true),
        // Cell state in Q4.11 clipped at 3.0, inputs that saturate the gates.
        ((2, 5, 7, 16), false, -11, 3.0, 0.02, true),
        ((1, 6, 3, 20), true, -12, 0.5, 0.02, true),
        // An input path scaled by more than 1 (a left shift): the CPU.
        ((2, 3, 7, 8), false, -15, 0.0, 0.2, false),
    ];
    for (k, (dims, tm, shift, clip, xs, npu)) in cases.into_iter().enumerate() {
        let g = lstm_graph(&mut rng, dims, tm, shift, clip, xs);
        let lowered = super::super::lower(&g, &ETHOS_U55_128);
        assert_eq!(lowered.is_ok(), npu, "lstm{k}: {:?}", lowered.err());
        // The test-only execution model does not model the LSTM's operations (int16
        // fully-connected outputs, the built-in functions after an ADD); the simulator does.
        check_graph_with(g, &format!("lstm{k}"), false);
    }
}

/// Two LSTMs stacked (the first returning its whole sequence, as Keras'
/// `return_sequences=True`): two pairs of state tensors, the second reading the first's output.
#[test]
fn stacked_lstms() {
    let mut rng = Rng(0x157D_0002);
    let mut b = Builder::default();
    let x = b.input("x", &[2, 5, 6], DType::I8, 0.02, 1);
    let y1 = add_lstm(&mut b, &mut rng, x, (2, 5, 6, 8), false, -15, 0.0, false);
    add_lstm(&mut b, &mut rng, y1, (2, 5, 8, 4), false, -13, 2.0, true);
    let g = b.g;
    assert_eq!(g.variables.len(), 4);
    let lowered = super::super::lower(&g, &ETHOS_U55_128);
    assert!(lowered.is_ok(), "{:?}", lowered.err());
    check_graph_with(g, "stacked_lstms", false);
}
