//! BatchMatMul of two int8 activations (TFLite's `reference_ops::BatchMatMul`, int8 path).
//!
//! TFLite's Prepare takes the rescale factor from `GetQuantizedConvolutionMultipler`: the two
//! input scales multiplied in **float**, widened to double, divided by the output scale in
//! double, then `QuantizeMultiplier`. The kernel sums `(a - a_zp) * (b - b_zp)` in 32 bits,
//! applies `MultiplyByQuantizedMultiplier`, adds the output zero point and clamps to int8 (the
//! operator has no fused activation). Batch axes broadcast (each either equal or 1).

use super::util::{
    Rescale, bad_data, broadcast_shape, broadcast_strides, for_each_broadcast, node_err,
    per_tensor, zeroed,
};
use super::{Kernel, Prepared};
use crate::error::Result;
use crate::ir::{DType, Graph, Op};
use crate::value::Data;

/// A prepared BatchMatMul: shapes, zero points and the rescale factor.
pub struct BatchMatMul {
    /// Output batch shape (the broadcast of both inputs' leading axes).
    pub(crate) batch: Vec<usize>,
    /// Strides, in whole matrices, to read `a` and `b` per output batch index (0 on broadcast
    /// axes).
    pub(crate) a_strides: Vec<usize>,
    pub(crate) b_strides: Vec<usize>,
    pub(crate) m: usize,
    pub(crate) k: usize,
    pub(crate) n: usize,
    pub(crate) adj_a: bool,
    pub(crate) adj_b: bool,
    pub(crate) za: i32,
    pub(crate) zb: i32,
    pub(crate) zo: i32,
    pub(crate) rescale: Rescale,
    /// f32 operands and result (a float island's MatMul; the quantization fields unused).
    pub(crate) float: bool,
}

impl BatchMatMul {
    pub(super) fn prepare(g: &Graph, op: &Op, adj_a: bool, adj_b: bool) -> Result<Prepared> {
        let mm = BatchMatMul::new(g, op, adj_a, adj_b)?;
        Ok(Prepared::new(mm, op.inputs.clone()))
    }

    /// Checks shapes, types and quantization and computes the rescale factor.
    pub(crate) fn new(g: &Graph, op: &Op, adj_a: bool, adj_b: bool) -> Result<BatchMatMul> {
        let (&[a, b], &[y]) = (op.inputs.as_slice(), op.outputs.as_slice()) else {
            return Err(node_err(op, "expects inputs [a, b] and one output"));
        };
        let (at, bt, yt) = (&g.tensors[a], &g.tensors[b], &g.tensors[y]);
        let float = [at, bt, yt].iter().all(|t| t.dtype == DType::F32);
        for t in [at, bt, yt] {
            if t.dtype != DType::I8 && !float {
                return Err(node_err(
                    op,
                    format!(
                        "tensor '{}' is {}; BatchMatMul is implemented for int8",
                        t.name, t.dtype
                    ),
                ));
            }
        }
        let ((sa, za), (sb, zb), (so, zo)) = if float {
            ((1.0, 0), (1.0, 0), (1.0, 0))
        } else {
            (
                per_tensor(g, op, a)?,
                per_tensor(g, op, b)?,
                per_tensor(g, op, y)?,
            )
        };
        for (t, z) in [(at, za), (bt, zb), (yt, zo)] {
            if !(-128..=127).contains(&z) {
                return Err(node_err(
                    op,
                    format!("zero point {z} of '{}' is outside int8", t.name),
                ));
            }
        }
        let (asz, bsz, ysz) = (&at.shape, &bt.shape, &yt.shape);
        if asz.len() < 2 || bsz.len() < 2 {
            return Err(node_err(
                op,
                format!("inputs {asz:?} and {bsz:?} must have rank 2 or more"),
            ));
        }
        let (ar, br) = (asz.len() - 2, bsz.len() - 2);
        let (m, ka) = if adj_a {
            (asz[ar + 1], asz[ar])
        } else {
            (asz[ar], asz[ar + 1])
        };
        let (kb, n) = if adj_b {
            (bsz[br + 1], bsz[br])
        } else {
            (bsz[br], bsz[br + 1])
        };
        let batch = broadcast_shape(&asz[..ar], &bsz[..br]);
        let want = batch.as_ref().map(|bs| {
            let mut v = bs.clone();
            v.extend([m, n]);
            v
        });
        if ka != kb || want.as_ref() != Some(ysz) {
            return Err(node_err(
                op,
                format!(
                    "inputs {asz:?} (adj {adj_a}) and {bsz:?} (adj {adj_b}) do not multiply into \
                     the output {ysz:?}"
                ),
            ));
        }
        let batch = batch.unwrap_or_default();
        let real = f64::from(sa * sb) / f64::from(so);
        let rescale = Rescale::new(op, real, "output")?.with_requant(g.requant);
        Ok(BatchMatMul {
            a_strides: broadcast_strides(&asz[..ar], &batch),
            b_strides: broadcast_strides(&bsz[..br], &batch),
            batch,
            m,
            k: ka,
            n,
            adj_a,
            adj_b,
            za,
            zb,
            zo,
            rescale,
            float,
        })
    }

    /// Element `(i, j)` offsets of `op(a)` `[M, K]` and `op(b)` `[K, N]` inside one matrix.
    #[inline(always)]
    pub(crate) fn a_at(&self, i: usize, kk: usize) -> usize {
        if self.adj_a {
            kk * self.m + i
        } else {
            i * self.k + kk
        }
    }

    #[inline(always)]
    pub(crate) fn b_at(&self, kk: usize, j: usize) -> usize {
        if self.adj_b {
            j * self.k + kk
        } else {
            kk * self.n + j
        }
    }
}

impl BatchMatMul {
    /// Every output element: `finish` of its `k` products folded by `step` from `zero` in
    /// order (the CPU kernel's order).
    fn product<T: Copy, A: Copy, O: Default + Clone>(
        &self,
        a: &[T],
        b: &[T],
        zero: A,
        step: impl Fn(A, T, T) -> A,
        finish: impl Fn(A) -> O,
    ) -> Result<Vec<O>> {
        let (m, k, n) = (self.m, self.k, self.n);
        let total: usize = self.batch.iter().product();
        let mut out = zeroed::<O>(total * m * n, "batch matmul output")?;
        let mut ok = true;
        for_each_broadcast(
            &self.batch,
            &self.a_strides,
            &self.b_strides,
            |bi, ai, bj| {
                let (ab, bb, ob) = (ai * m * k, bj * k * n, bi * m * n);
                for i in 0..m {
                    for j in 0..n {
                        let mut acc = zero;
                        for kk in 0..k {
                            match (a.get(ab + self.a_at(i, kk)), b.get(bb + self.b_at(kk, j))) {
                                (Some(&x), Some(&w)) => acc = step(acc, x, w),
                                _ => ok = false,
                            }
                        }
                        out[ob + i * n + j] = finish(acc);
                    }
                }
            },
        );
        if !ok {
            return Err(bad_data());
        }
        Ok(out)
    }
}

impl Kernel for BatchMatMul {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        match (inputs.first(), inputs.get(1)) {
            // f32: summed in order in single precision.
            (Some(Data::F32(a)), Some(Data::F32(b))) => self
                .product(a, b, 0f32, |acc, x, w| acc + x * w, |acc| acc)
                .map(Data::F32),
            (Some(Data::I8(a)), Some(Data::I8(b))) => self
                .product(
                    a,
                    b,
                    0i32,
                    |acc, x, w| {
                        acc.wrapping_add((i32::from(x) - self.za) * (i32::from(w) - self.zb))
                    },
                    |acc| {
                        let v = self.rescale.apply(acc).wrapping_add(self.zo);
                        v.clamp(-128, 127) as i8
                    },
                )
                .map(Data::I8),
            _ => Err(bad_data()),
        }
    }
}
