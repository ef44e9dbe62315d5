//! Quantization parameters of the importer: those of one `QuantizeLinear` /
//! `DequantizeLinear` node ([`QParams`]) and the classes of tensors that share one quantization
//! ([`QuantClasses`]). Their own module, so that the builder, which holds them, and the QDQ
//! folding (`qdq`), which extends the builder, do not import each other.

use super::model::Node;
use crate::error::Result;
use crate::ir::{DType, Quantization, TensorId};

/// Parameters of one `QuantizeLinear` / `DequantizeLinear`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct QParams {
    pub scale: Vec<f32>,
    pub zero_point: Vec<i32>,
    /// Integer type of the quantized side (I8, U8 or I32).
    pub dtype: DType,
    /// Channel axis (ONNX dimensions) when per-channel.
    pub axis: Option<usize>,
}

impl QParams {
    /// Per-tensor IR quantization (fails for per-channel parameters).
    pub fn per_tensor(&self, n: &Node) -> Result<Quantization> {
        if self.scale.len() != 1 || self.zero_point.len() != 1 {
            return Err(n.err(
                "per-channel quantization of an activation is not supported (only of constant weights)",
            ));
        }
        Ok(Quantization::per_tensor(self.scale[0], self.zero_point[0]))
    }

    /// IR quantization with the channel axis renamed to `axis` (per-tensor stays per-tensor).
    pub fn to_ir(&self, axis: Option<usize>) -> Quantization {
        Quantization {
            scale: self.scale.clone(),
            zero_point: self.zero_point.clone(),
            axis: if self.scale.len() > 1 { axis } else { None },
        }
    }

    /// Number of channels (1 when per-tensor).
    pub fn channels(&self) -> usize {
        self.scale.len()
    }

    pub fn scale_at(&self, c: usize) -> f32 {
        *self.scale.get(c).or(self.scale.first()).unwrap_or(&1.0)
    }

    pub fn zero_point_at(&self, c: usize) -> i32 {
        *self
            .zero_point
            .get(c)
            .or(self.zero_point.first())
            .unwrap_or(&0)
    }
}

/// Union-find over IR tensor ids, each class with at most one quantization.
#[derive(Default)]
pub(crate) struct QuantClasses {
    parent: Vec<usize>,
    quant: Vec<Option<Quantization>>,
}

impl QuantClasses {
    fn ensure(&mut self, id: TensorId) {
        while self.parent.len() <= id.index() {
            self.parent.push(self.parent.len());
            self.quant.push(None);
        }
    }

    fn find(&mut self, id: TensorId) -> usize {
        self.ensure(id);
        let mut x = id.index();
        while self.parent[x] != x {
            self.parent[x] = self.parent[self.parent[x]];
            x = self.parent[x];
        }
        x
    }

    /// The class's quantization.
    pub fn get(&mut self, id: TensorId) -> Option<Quantization> {
        let r = self.find(id);
        self.quant[r].clone()
    }

    /// Sets the class's quantization; on a conflict returns the one already there.
    pub fn set(&mut self, id: TensorId, q: &Quantization) -> Result<(), Quantization> {
        let r = self.find(id);
        match &self.quant[r] {
            Some(old) if old != q => Err(old.clone()),
            _ => {
                self.quant[r] = Some(q.clone());
                Ok(())
            }
        }
    }

    /// Merges two classes; on a conflict returns both quantizations.
    pub fn union(
        &mut self,
        a: TensorId,
        b: TensorId,
    ) -> Result<(), Box<(Quantization, Quantization)>> {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return Ok(());
        }
        let q = match (self.quant[ra].take(), self.quant[rb].take()) {
            (Some(x), Some(y)) if x != y => {
                self.quant[ra] = Some(x.clone());
                self.quant[rb] = Some(y.clone());
                return Err(Box::new((x, y)));
            }
            (x, y) => x.or(y),
        };
        self.parent[rb] = ra;
        self.quant[ra] = q;
        Ok(())
    }
}
