//! Structural checks of a [`Graph`]: ids in range, single producers, topological order, sizes.

use super::{Graph, TensorId};
use crate::error::{Error, Result};

/// Largest tensor we accept, in bytes (a model that claims more is malformed, not big).
pub const MAX_TENSOR_BYTES: usize = 1 << 31;

impl Graph {
    /// Checks the graph's invariants (see the module docs of [`crate::ir`]).
    ///
    /// Errors name the offending node or tensor: a tensor id out of range, a tensor produced twice,
    /// an op reading a tensor nobody produces, a cycle, or a tensor whose size overflows.
    pub fn validate(&self) -> Result<()> {
        let n = self.tensors.len();
        for t in &self.tensors {
            let elems = t
                .shape
                .iter()
                .try_fold(1usize, |a, &d| a.checked_mul(d))
                .and_then(|e| e.checked_mul(t.dtype.size()));
            match elems {
                Some(bytes) if bytes <= MAX_TENSOR_BYTES => {}
                _ => {
                    return Err(Error::InvalidTensor {
                        tensor: t.name.clone(),
                        detail: format!(
                            "shape {:?} of {} is larger than {} bytes",
                            t.shape, t.dtype, MAX_TENSOR_BYTES
                        ),
                    });
                }
            }
            if let Some(d) = &t.data
                && d.len() != t.byte_size()
            {
                return Err(Error::InvalidTensor {
                    tensor: t.name.clone(),
                    detail: format!(
                        "constant has {} bytes but shape {:?} of {} needs {}",
                        d.len(),
                        t.shape,
                        t.dtype,
                        t.byte_size()
                    ),
                });
            }
        }
        for &id in self.inputs.iter().chain(&self.outputs) {
            if id.index() >= n {
                return Err(Error::Internal(format!(
                    "graph input/output refers to tensor {id}, but there are only {n} tensors"
                )));
            }
        }
        self.validate_variables()?;
        let mut produced = vec![false; n];
        for &i in self.inputs.iter().chain(&self.variables) {
            produced[i.index()] = true;
        }
        for (i, t) in self.tensors.iter().enumerate() {
            if t.is_const() {
                produced[i] = true;
            }
        }
        for op in &self.ops {
            for &id in op.inputs.iter().chain(&op.outputs) {
                if id.index() >= n {
                    return Err(Error::InvalidNode {
                        node: op.name.clone(),
                        op: op.kind.name().into(),
                        detail: format!("refers to tensor {id}, but there are only {n} tensors"),
                    });
                }
            }
        }
        // Producer of each tensor, to tell a cycle from a simply unordered list.
        let mut producer: Vec<Option<usize>> = vec![None; n];
        for (k, op) in self.ops.iter().enumerate() {
            for &o in &op.outputs {
                if produced[o.index()] && producer[o.index()].is_none() {
                    return Err(Error::InvalidNode {
                        node: op.name.clone(),
                        op: op.kind.name().into(),
                        detail: format!(
                            "writes '{}', which is a graph input or constant",
                            self.tensors[o].name
                        ),
                    });
                }
                if let Some(p) = producer[o.index()] {
                    return Err(Error::InvalidNode {
                        node: op.name.clone(),
                        op: op.kind.name().into(),
                        detail: format!(
                            "writes '{}', which node '{}' also writes",
                            self.tensors[o].name, self.ops[p].name
                        ),
                    });
                }
                producer[o.index()] = Some(k);
            }
        }
        for op in &self.ops {
            for &i in &op.inputs {
                if !produced[i.index()] {
                    return match producer[i.index()] {
                        Some(_) => Err(self.cycle_error()),
                        None => Err(Error::InvalidNode {
                            node: op.name.clone(),
                            op: op.kind.name().into(),
                            detail: format!(
                                "reads '{}', which no node produces and which is not an input or constant",
                                self.tensors[i].name
                            ),
                        }),
                    };
                }
            }
            for &o in &op.outputs {
                produced[o.index()] = true;
            }
        }
        for &o in &self.outputs {
            if !produced[o.index()] {
                return Err(Error::InvalidTensor {
                    tensor: self.tensors[o].name.clone(),
                    detail: "graph output is never produced".into(),
                });
            }
        }
        Ok(())
    }

    /// Variable tensors: in range, not constants, graph inputs or outputs, written by no
    /// operator, and read by exactly one, an LSTM taking it as its hidden or cell state.
    fn validate_variables(&self) -> Result<()> {
        use super::{LstmAttrs, OpKind};
        for &v in &self.variables {
            let Some(t) = self.tensors.get(v.index()) else {
                return Err(Error::Internal(format!(
                    "variable refers to tensor {v}, but there are only {} tensors",
                    self.tensors.len()
                )));
            };
            let bad = |detail: &str| {
                Err(Error::InvalidTensor {
                    tensor: t.name.clone(),
                    detail: detail.into(),
                })
            };
            if t.is_const() || self.inputs.contains(&v) || self.outputs.contains(&v) {
                return bad("a variable tensor cannot be a constant or a graph input or output");
            }
            let readers: Vec<_> = self
                .ops
                .iter()
                .filter(|op| op.inputs.contains(&v) || op.outputs.contains(&v))
                .collect();
            match readers.as_slice() {
                [op] if matches!(op.kind, OpKind::Lstm(_))
                    && (op.inputs.get(LstmAttrs::H) == Some(&v)
                        || op.inputs.get(LstmAttrs::C) == Some(&v))
                    && op.inputs.iter().filter(|&&i| i == v).count() == 1 => {}
                _ => {
                    return bad(
                        "a variable tensor must be the hidden or cell state of exactly one LSTM and used by nothing else",
                    );
                }
            }
        }
        Ok(())
    }

    /// Reorders `ops` topologically (stable: keeps the given order where it is valid).
    ///
    /// Fails with [`Error::Cycle`] naming a node on a cycle.
    pub fn toposort(&mut self) -> Result<()> {
        let n = self.tensors.len();
        let mut available = vec![false; n];
        for &i in self.inputs.iter().chain(&self.variables) {
            if i.index() < n {
                available[i.index()] = true;
            }
        }
        for (i, t) in self.tensors.iter().enumerate() {
            if t.is_const() {
                available[i] = true;
            }
        }
        let mut remaining: Vec<usize> = (0..self.ops.len()).collect();
        let mut order = Vec::with_capacity(self.ops.len());
        while !remaining.is_empty() {
            let before = remaining.len();
            remaining.retain(|&k| {
                let op = &self.ops[k];
                let ready = op
                    .inputs
                    .iter()
                    .all(|&i| i.index() < n && available[i.index()]);
                if ready {
                    for &o in &op.outputs {
                        if o.index() < n {
                            available[o.index()] = true;
                        }
                    }
                    order.push(k);
                }
                !ready
            });
            if remaining.len() == before {
                // Either a cycle or a read of a tensor nobody produces.
                let produced_somewhere =
                    |i: TensorId| self.ops.iter().any(|op| op.outputs.contains(&i));
                let stuck = &self.ops[remaining[0]];
                if stuck
                    .inputs
                    .iter()
                    .any(|&i| i.index() < n && !available[i.index()] && !produced_somewhere(i))
                {
                    let missing = stuck
                        .inputs
                        .iter()
                        .find(|&&i| {
                            i.index() < n && !available[i.index()] && !produced_somewhere(i)
                        })
                        .copied()
                        .unwrap_or(TensorId(0));
                    return Err(Error::InvalidNode {
                        node: stuck.name.clone(),
                        op: stuck.kind.name().into(),
                        detail: format!(
                            "reads '{}', which no node produces and which is not an input or constant",
                            self.tensors[missing].name
                        ),
                    });
                }
                return Err(self.cycle_error_among(&remaining));
            }
        }
        let mut ops = std::mem::take(&mut self.ops);
        let mut slots: Vec<Option<_>> = ops.drain(..).map(Some).collect();
        self.ops = order.into_iter().filter_map(|k| slots[k].take()).collect();
        Ok(())
    }

    fn cycle_error(&self) -> Error {
        let all: Vec<usize> = (0..self.ops.len()).collect();
        let mut g = self.clone();
        match g.toposort() {
            Err(e) => e,
            Ok(()) => self.cycle_error_among(&all),
        }
    }

    fn cycle_error_among(&self, remaining: &[usize]) -> Error {
        // Walk back from a stuck node through stuck producers until a node repeats: it is on a cycle.
        let n = self.tensors.len();
        let stuck: std::collections::HashSet<usize> = remaining.iter().copied().collect();
        let mut seen = std::collections::HashSet::new();
        let mut k = remaining[0];
        loop {
            if !seen.insert(k) {
                return Error::Cycle {
                    node: self.ops[k].name.clone(),
                };
            }
            let next = self.ops[k].inputs.iter().find_map(|&i| {
                if i.index() >= n {
                    return None;
                }
                self.ops
                    .iter()
                    .enumerate()
                    .find(|(j, op)| stuck.contains(j) && op.outputs.contains(&i))
                    .map(|(j, _)| j)
            });
            match next {
                Some(j) => k = j,
                None => {
                    return Error::Cycle {
                        node: self.ops[k].name.clone(),
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::ir::*;

    fn t(name: &str) -> Tensor {
        Tensor {
            name: name.into(),
            shape: vec![1, 4],
            dtype: DType::I8,
            quant: Some(Quantization::per_tensor(1.0, 0)),
            data: None,
        }
    }

    fn relu(name: &str, i: usize, o: usize) -> Op {
        Op {
            name: name.into(),
            kind: OpKind::Activation(Activation::Relu),
            inputs: vec![TensorId(i)],
            outputs: vec![TensorId(o)],
        }
    }

    #[test]
    fn cycle_is_named() {
        let mut g = Graph {
            tensors: vec![t("in"), t("a"), t("b"), t("out")],
            inputs: vec![TensorId(0)],
            outputs: vec![TensorId(3)],
            ..Default::default()
        };
        g.ops = vec![relu("n1", 2, 1), relu("n2", 1, 2), relu("n3", 0, 3)];
        let e = g.validate().unwrap_err();
        assert!(matches!(e, Error::Cycle { .. }), "{e}");
        let e = g.toposort().unwrap_err();
        assert!(matches!(e, Error::Cycle { .. }), "{e}");
    }

    #[test]
    fn toposort_reorders() {
        let mut g = Graph {
            tensors: vec![t("in"), t("a"), t("out")],
            inputs: vec![TensorId(0)],
            outputs: vec![TensorId(2)],
            ..Default::default()
        };
        g.ops = vec![relu("second", 1, 2), relu("first", 0, 1)];
        assert!(g.validate().is_err());
        g.toposort().unwrap();
        assert_eq!(g.ops[0].name, "first");
        g.validate().unwrap();
    }

    #[test]
    fn overflowing_tensor_is_rejected() {
        let mut g = Graph {
            tensors: vec![t("in")],
            inputs: vec![TensorId(0)],
            outputs: vec![TensorId(0)],
            ..Default::default()
        };
        g.tensors[0].shape = vec![usize::MAX, 2];
        let e = g.validate().unwrap_err();
        assert!(e.to_string().contains("'in'"), "{e}");
    }

    use crate::error::Error;
}
