//! Float functions of one quantized tensor, recognised as one IR [`ActFn`] operator.
//!
//! QDQ exporters write activations either as one ONNX operator (`Sigmoid`, `HardSwish`,
//! `Gelu`, ...) or as a float subgraph between a `DequantizeLinear` and a `QuantizeLinear`:
//! GELU as `0.5 * x * (1 + Erf(x / sqrt 2))`, hard-swish as `x * HardSigmoid(x)`, ... The
//! entry point, [`Builder::float_function`], takes the largest run of float nodes that starts at
//! a node reading one dequantized tensor `x` and only reads `x`, scalar constants and each
//! other, with a single value leaving it. It then evaluates that subgraph in double precision at
//! every value `x` can take and compares the results with each candidate function; a match
//! becomes one pending [`OpKind::ActFn`] operator (quantized by the `QuantizeLinear` that
//! follows, like any other operator). What matches is decided by the values, not by how the
//! exporter spelled the expression, so `x * 0.5 * ...` and `Div(x, 1.414...)` forms are the
//! same GELU.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use super::builder::{Builder, Val};
use super::model::Node;
use crate::error::Result;
use crate::ir::{ActFn, DType, OpKind};
use crate::reference::act_fn::erf;

/// Float operators a recognised subgraph may contain.
const FLOAT_OPS: &[&str] = &[
    "Add",
    "Clip",
    "Div",
    "Elu",
    "Erf",
    "Exp",
    "Gelu",
    "HardSigmoid",
    "HardSwish",
    "LeakyRelu",
    "Log",
    "Max",
    "Min",
    "Mul",
    "Neg",
    "Pow",
    "Reciprocal",
    "Relu",
    "Sigmoid",
    "Sqrt",
    "Sub",
    "Tanh",
];

/// Operators a recognised subgraph may start with (the others, e.g. `Relu` or `Mul` by a
/// constant, keep their own mapping when they stand alone).
const START_OPS: &[&str] = &[
    "Elu",
    "Erf",
    "Exp",
    "Gelu",
    "HardSigmoid",
    "HardSwish",
    "LeakyRelu",
    "Log",
    "Mul",
    "Div",
    "Reciprocal",
    "Sigmoid",
    "Sqrt",
    "Tanh",
];

/// Float operators with neither an integer mapping nor an f32 island kernel: an island holding
/// one that is no named function is tabulated as [`ActFn::Real`].
const NO_OTHER_PATH: &[&str] = &["Div", "Erf", "Pow", "Reciprocal", "Sqrt"];

/// A recognised subgraph: the nodes it covers, its input and its output.
struct Island {
    nodes: Vec<usize>,
    x: String,
    out: String,
}

impl Builder {
    /// Tries to map the float subgraph starting at `nodes[k]` onto one [`ActFn`] operator;
    /// marks the nodes it covers in `done` and returns true on success. `graph_outputs` are the
    /// names the model outputs (an island value that is one cannot be hidden inside it).
    pub(crate) fn float_function(
        &mut self,
        nodes: &[Node],
        k: usize,
        done: &mut [bool],
        graph_outputs: &HashSet<String>,
    ) -> Result<bool> {
        let Some(island) = self.island(nodes, k, done, graph_outputs) else {
            return Ok(false);
        };
        // A table needs the output quantization: an island read by float operators (a Div
        // before a float Softmax, say) computes in float instead (`float_ops`).
        let quantized_after = nodes
            .iter()
            .filter(|n| n.inputs.contains(&island.out))
            .all(|n| n.op_type == "QuantizeLinear");
        if !quantized_after {
            return Ok(false);
        }
        let Some(Val::Deq(x)) = self.vals.get(&island.x).cloned() else {
            return Ok(false);
        };
        let dtype = self.tensor(x.id).dtype;
        let Some(q) = self.quant_of(x.id).filter(|q| !q.is_per_channel()) else {
            return Ok(false);
        };
        let (lo, hi) = match dtype {
            DType::I8 => (-128i32, 127i32),
            DType::U8 => (0, 255),
            // int16: a lone Sigmoid or Tanh is TFLite's int16 LOGISTIC/TANH (tf2onnx's 16x8
            // twins; within one output step of the float function it stands for).
            DType::I16 => {
                let f = match (island.nodes.as_slice(), nodes[k].op_type.as_str()) {
                    ([_], "Sigmoid") => ActFn::Logistic,
                    ([_], "Tanh") => ActFn::Tanh,
                    _ => return Ok(false),
                };
                // TFLite's kernels produce scale 1/32768, zero point 0 only; other output
                // quantizations (and onnxruntime's models, which compute the function in
                // float) stay a float island.
                if self.g.requant == crate::ir::Requant::Single
                    || !self.quantized_as(nodes, &island.out, 1.0 / 32768.0, 0)
                {
                    return Ok(false);
                }
                return Ok(self.bind_function(nodes, k, &island, x, f, done));
            }
            _ => return Ok(false),
        };
        let (scale, zp) = (f64::from(q.scale()), q.zero_point());
        let xs: Vec<f64> = (lo..=hi).map(|v| scale * f64::from(v - zp)).collect();
        let Some(ys) = xs
            .iter()
            .map(|&v| self.eval(nodes, &island, v))
            .collect::<Option<Vec<f64>>>()
        else {
            return Ok(false);
        };
        // None of the named functions: the island's own values, quantized by the
        // QuantizeLinear after it (a table either way on the NPU and the CPU).
        // onnxruntime-quantized models: onnxruntime tabulates such functions from their float
        // values (QLinearSigmoid, ...), so the island's own values, not TFLite's integer kernel.
        let named = if self.g.requant == crate::ir::Requant::Single {
            None
        } else {
            identify(&xs, &ys)
        };
        let f = match named {
            Some(f) => f,
            None if self.g.requant == crate::ir::Requant::Single && ys.len() <= 256 => {
                let mut v = [0f32; 256];
                for (d, &y) in v.iter_mut().zip(&ys) {
                    *d = y as f32;
                }
                ActFn::Real(v)
            }
            // Only where nothing else can run it (an operator with neither an integer mapping
            // nor an f32 kernel): the other paths keep the IR of tf2onnx twins equal to
            // TFLite's (a float Mul by a constant is an integer Mul, say).
            None if ys.len() <= 256
                && island
                    .nodes
                    .iter()
                    .any(|&i| NO_OTHER_PATH.contains(&nodes[i].op_type.as_str())) =>
            {
                let mut v = [0f32; 256];
                for (d, &y) in v.iter_mut().zip(&ys) {
                    *d = y as f32;
                }
                ActFn::Real(v)
            }
            None => return Ok(false),
        };
        Ok(self.bind_function(nodes, k, &island, x, f, done))
    }

    /// Whether every reader of `value` is a QuantizeLinear with constant `scale` and zero point
    /// `zero_point`.
    fn quantized_as(&self, nodes: &[Node], value: &str, scale: f64, zero_point: i64) -> bool {
        let constant = |name: Option<&String>| match name.and_then(|n| self.vals.get(n)) {
            Some(Val::Const(c)) => c.scalar_f64(),
            _ => None,
        };
        nodes
            .iter()
            .filter(|n| n.inputs.contains(&value.to_string()))
            .all(|n| {
                n.op_type == "QuantizeLinear"
                    && constant(n.inputs.get(1)) == Some(scale)
                    && constant(n.inputs.get(2)).unwrap_or(0.0) == zero_point as f64
            })
    }

    /// Binds the island's output to one pending [`OpKind::ActFn`] operator `f` of `x`.
    fn bind_function(
        &mut self,
        nodes: &[Node],
        k: usize,
        island: &Island,
        x: super::builder::Act,
        f: ActFn,
        done: &mut [bool],
    ) -> bool {
        let last = &nodes[*island.nodes.last().unwrap_or(&k)];
        let shape = self.tensor(x.id).shape.clone();
        let p = self.pending(last, OpKind::ActFn(f), vec![x.id], shape, x.perm);
        for &i in &island.nodes {
            done[i] = true;
        }
        self.bind(&island.out, Val::Pending(Rc::new(p)));
        true
    }

    /// The largest float subgraph starting at `nodes[k]` (see the module documentation).
    fn island(
        &self,
        nodes: &[Node],
        k: usize,
        done: &[bool],
        graph_outputs: &HashSet<String>,
    ) -> Option<Island> {
        let start = &nodes[k];
        if !START_OPS.contains(&start.op_type.as_str()) || !start.domain.is_empty() {
            return None;
        }
        // The one dequantized input.
        let mut x = None;
        for name in start.inputs.iter().filter(|s| !s.is_empty()) {
            match self.vals.get(name)? {
                Val::Deq(_) if x.is_none() || x.as_ref() == Some(name) => x = Some(name.clone()),
                v if self.scalar(v).is_some() => {}
                _ => return None,
            }
        }
        let x = x?;
        let mut inside: HashSet<String> = HashSet::new();
        inside.insert(x.clone());
        let mut covered = Vec::new();
        for (j, n) in nodes.iter().enumerate().skip(k) {
            if done[j] || !n.domain.is_empty() || !FLOAT_OPS.contains(&n.op_type.as_str()) {
                continue;
            }
            let ins: Vec<&String> = n.inputs.iter().filter(|s| !s.is_empty()).collect();
            let reads_inside = ins.iter().any(|i| inside.contains(*i));
            let only_inside_or_scalar = ins.iter().all(|i| {
                inside.contains(*i) || self.vals.get(*i).is_some_and(|v| self.scalar(v).is_some())
            });
            if j == k || (reads_inside && only_inside_or_scalar) {
                covered.push(j);
                inside.extend(n.outputs.iter().filter(|s| !s.is_empty()).cloned());
            }
        }
        // Values produced inside and read outside (or output by the graph): exactly one.
        let produced: HashSet<&String> = covered
            .iter()
            .flat_map(|&j| nodes[j].outputs.iter())
            .filter(|s| !s.is_empty())
            .collect();
        let covered_set: HashSet<usize> = covered.iter().copied().collect();
        let mut leaving: Vec<&String> = produced
            .iter()
            .copied()
            .filter(|v| {
                graph_outputs.contains(*v)
                    || nodes
                        .iter()
                        .enumerate()
                        .any(|(j, n)| !covered_set.contains(&j) && n.inputs.contains(v))
            })
            .collect();
        leaving.dedup();
        match leaving.as_slice() {
            [out] => Some(Island {
                nodes: covered,
                x,
                out: (*out).clone(),
            }),
            _ => None,
        }
    }

    /// A scalar constant's value (a plain or dequantized one-element constant).
    fn scalar(&self, v: &Val) -> Option<f64> {
        match v {
            Val::Const(c) => c.scalar_f64(),
            Val::DeqConst(qc) => match super::qdq::dequantize_values(qc).as_slice() {
                [x] => Some(*x),
                _ => None,
            },
            _ => None,
        }
    }

    /// The island's output for input value `x` in double precision (`None` for an operator
    /// form it cannot evaluate, which then keeps its ordinary mapping).
    fn eval(&self, nodes: &[Node], island: &Island, x: f64) -> Option<f64> {
        let mut env: HashMap<&str, f64> = HashMap::new();
        env.insert(island.x.as_str(), x);
        for &j in &island.nodes {
            let n = &nodes[j];
            let arg = |i: usize| -> Option<f64> {
                let name = n.input(i)?;
                match env.get(name) {
                    Some(v) => Some(*v),
                    None => self.scalar(self.vals.get(name)?),
                }
            };
            let a = arg(0)?;
            let attr = |name: &str, default: f64| -> Option<f64> {
                n.attr_f(name).ok().map(|v| v.map_or(default, f64::from))
            };
            let sigmoid = |v: f64| 1.0 / (1.0 + (-v).exp());
            let y = match n.op_type.as_str() {
                "Add" => a + arg(1)?,
                "Sub" => a - arg(1)?,
                "Mul" => a * arg(1)?,
                "Div" => a / arg(1)?,
                "Pow" => a.powf(arg(1)?),
                "Max" => a.max(arg(1)?),
                "Min" => a.min(arg(1)?),
                "Neg" => -a,
                "Erf" => erf(a),
                "Exp" => a.exp(),
                "Log" => a.ln(),
                "Sqrt" => a.sqrt(),
                "Reciprocal" => 1.0 / a,
                "Tanh" => a.tanh(),
                "Sigmoid" => sigmoid(a),
                "Relu" => a.max(0.0),
                "Clip" => {
                    let lo = if n.input(1).is_some() {
                        arg(1)?
                    } else {
                        f64::NEG_INFINITY
                    };
                    let hi = if n.input(2).is_some() {
                        arg(2)?
                    } else {
                        f64::INFINITY
                    };
                    a.max(lo).min(hi)
                }
                "HardSigmoid" => (attr("alpha", 0.2)? * a + attr("beta", 0.5)?).clamp(0.0, 1.0),
                "HardSwish" => a * (a / 6.0 + 0.5).clamp(0.0, 1.0),
                "LeakyRelu" => {
                    if a < 0.0 {
                        attr("alpha", 0.01)? * a
                    } else {
                        a
                    }
                }
                "Elu" => {
                    if a < 0.0 {
                        attr("alpha", 1.0)? * a.exp_m1()
                    } else {
                        a
                    }
                }
                "Gelu" => match n.attr_s("approximate").ok()?.as_deref() {
                    None | Some("none") => {
                        0.5 * a * (1.0 + erf(a * std::f64::consts::FRAC_1_SQRT_2))
                    }
                    Some("tanh") => {
                        0.5 * a * (1.0 + (GELU_TANH_K * (a + 0.044715 * a * a * a)).tanh())
                    }
                    Some(_) => return None,
                },
                _ => return None,
            };
            for o in n.outputs.iter().filter(|s| !s.is_empty()) {
                env.insert(o.as_str(), y);
            }
        }
        env.get(island.out.as_str()).copied()
    }
}

/// `sqrt(2 / pi)`.
const GELU_TANH_K: f64 = 0.797_884_560_802_865_4;

/// The candidate function `ys = f(xs)` is, if any.
fn identify(xs: &[f64], ys: &[f64]) -> Option<ActFn> {
    let same = |f: &dyn Fn(f64) -> f64| {
        xs.iter().zip(ys).all(|(&x, &y)| {
            let want = f(x);
            if !want.is_finite() || !y.is_finite() {
                // log(0) and below: both sides must be non-finite.
                return !want.is_finite() && !y.is_finite();
            }
            (want - y).abs() <= 1e-6 * want.abs().max(1.0)
        })
    };
    let sigmoid = |v: f64| 1.0 / (1.0 + (-v).exp());
    // Fitted parameters: the slope below zero for leaky ReLU, the scale of exp(x) - 1 for ELU.
    let neg = xs.iter().zip(ys).find(|(x, _)| **x < -1e-3);
    let leaky_alpha = neg.map_or(0.01, |(x, y)| y / x);
    let elu_alpha = neg.map_or(1.0, |(x, y)| y / x.exp_m1());
    let candidates: [(ActFn, &dyn Fn(f64) -> f64); 11] = [
        (ActFn::Logistic, &sigmoid),
        (ActFn::Tanh, &f64::tanh),
        (ActFn::Exp, &f64::exp),
        (ActFn::Log, &|v: f64| {
            if v < 0.0 { f64::NAN } else { v.ln() }
        }),
        (ActFn::HardSwish, &|v: f64| {
            v * (v / 6.0 + 0.5).clamp(0.0, 1.0)
        }),
        (ActFn::Gelu { approximate: false }, &|v: f64| {
            0.5 * v * (1.0 + erf(v * std::f64::consts::FRAC_1_SQRT_2))
        }),
        (ActFn::Gelu { approximate: true }, &|v: f64| {
            0.5 * v * (1.0 + (GELU_TANH_K * (v + 0.044715 * v * v * v)).tanh())
        }),
        (
            ActFn::LeakyRelu {
                alpha: leaky_alpha as f32,
            },
            &|v: f64| if v < 0.0 { leaky_alpha * v } else { v },
        ),
        (
            ActFn::Elu {
                alpha: elu_alpha as f32,
            },
            &|v: f64| if v < 0.0 { elu_alpha * v.exp_m1() } else { v },
        ),
        (ActFn::Rsqrt, &|v: f64| 1.0 / v.sqrt()),
        (ActFn::Sqrt, &f64::sqrt),
    ];
    candidates
        .into_iter()
        .find(|(_, f)| same(*f))
        .map(|(kind, _)| kind)
}
