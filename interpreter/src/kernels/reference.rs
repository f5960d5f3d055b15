//! What every check of the generated kernels compares with: the interpreter's results for one
//! plan kernel alone, on deterministic inputs, and the kernel IR's parameters filled with the
//! same inputs in their storage types; and the comparison of a back end's outputs with them.

use super::Generated;
use crate::exec::Executor;
use crate::runtime::tensor::Tensor;
use dlc_jit::kir::{self, Ty};
use dlc_language::ir::{Graph, NodeId};
use dlc_language::passes::fusion::Plan;

/// What one kernel's check found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Checked {
    pub origin: String,
    pub name: String,
    pub kind: &'static str,
    pub elements: usize,
    /// Largest differences over every output element (NaN against NaN counts as equal).
    pub max_abs: f64,
    pub max_rel: f64,
    /// Elements that differ in any bit.
    pub differing: usize,
    pub ok: bool,
}

/// Deterministic test values for an input of `dtype`: integers small enough to be class labels,
/// bools as 0/1, floats in [-2, 2) (rounded to the dtype by the tensor).
fn values(g: &Graph, n: NodeId, salt: usize) -> Tensor {
    let node = g.node(n);
    let shape: Vec<usize> = node.shape.iter().map(|d| d.as_known().unwrap_or(0) as usize).collect();
    let len: usize = shape.iter().product();
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ (salt as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let vals: Vec<f64> = (0..len)
        .map(|_| {
            let r = next();
            match kir::lower_storage(node.dtype) {
                Some(Ty::I64) => (r % 3) as f64,
                Some(Ty::Bool) => (r % 2) as f64,
                _ => (r >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0,
            }
        })
        .collect();
    Tensor::from_f64(node.dtype, shape, vals)
}

fn from_storage(ty: Ty, bytes: &[u8]) -> Vec<f64> {
    bytes
        .chunks(ty.bytes())
        .map(|b| match ty {
            Ty::F32 => f32::from_le_bytes(b.try_into().expect("4 bytes")) as f64,
            Ty::BF16 => f32::from_bits((u16::from_le_bytes(b.try_into().expect("2 bytes")) as u32) << 16) as f64,
            Ty::F16 => kir::f16_to_f32(u16::from_le_bytes(b.try_into().expect("2 bytes"))) as f64,
            Ty::I64 => i64::from_le_bytes(b.try_into().expect("8 bytes")) as f64,
            Ty::Bool => b[0] as f64,
        })
        .collect()
}

/// A kernel's parameters filled with test inputs (outputs zeroed), in `Kernel::params` order,
/// and what the interpreter computes for each output from those inputs.
pub struct Reference {
    pub params: Vec<Vec<u8>>,
    pub want: Vec<Vec<f64>>,
}

/// The interpreter's results for `gen`'s plan kernel alone, on deterministic inputs (`salt`
/// varies them between kernels).
pub fn reference(gen: &Generated, salt: usize) -> Result<Reference, String> {
    let g: &Graph = &gen.graph;
    let groups = &gen.io;
    let mut ex = Executor::new(0);
    let mut inputs: Vec<(NodeId, Tensor)> = vec![];
    for (k, n) in groups.iter().flat_map(|(ins, _)| ins.iter()).enumerate() {
        if !inputs.iter().any(|(m, _)| m == n) {
            inputs.push((*n, values(g, *n, salt * 1000 + k)));
        }
    }
    for (n, t) in &inputs {
        ex.preset(*n, t.clone());
    }
    let roots: Vec<NodeId> = groups.iter().flat_map(|(_, outs)| outs.iter().copied()).collect();
    ex.run_plan(g, &Plan { kernels: vec![gen.plan_kernel.clone()], roots: roots.clone() })
        .map_err(|e| format!("{}: the interpreter failed: {e}", gen.origin))?;
    let want: Vec<Vec<f64>> =
        roots.iter().map(|o| ex.eval(g, *o).map(|t| t.to_f64())).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
    let mut params = vec![];
    let mut in_order = groups.iter().flat_map(|(ins, outs)| ins.iter().map(|n| Some(*n)).chain(outs.iter().map(|_| None)));
    for (p, is_out) in gen.kernel.params() {
        let node = in_order.next().flatten();
        params.push(match (is_out, node) {
            (false, Some(n)) => {
                let t = &inputs.iter().find(|(m, _)| *m == n).expect("an input has values").1;
                crate::runner::storage::to_bytes(t, p.ty)
            }
            _ => vec![0u8; p.len * p.ty.bytes()],
        });
    }
    Ok(Reference { params, want })
}

/// How far the outputs a back end computed (`params` after the launch) are from `want`: within
/// `tolerance(ty)` (relative or absolute), and with `exact`, bit for bit.
pub fn compare(gen: &Generated, want: &[Vec<f64>], params: &[Vec<u8>], exact: bool, tolerance: fn(Ty) -> f64) -> Checked {
    let kparams = gen.kernel.params();
    let got: Vec<(Ty, Vec<f64>)> =
        kparams.iter().zip(params).filter(|((_, out), _)| *out).map(|((p, _), b)| (p.ty, from_storage(p.ty, b))).collect();
    let (mut max_abs, mut max_rel, mut differing, mut elements, mut ok) = (0f64, 0f64, 0usize, 0usize, want.len() == got.len());
    for (w, (ty, gv)) in want.iter().zip(&got) {
        let tol = tolerance(*ty);
        ok &= w.len() == gv.len();
        for (a, b) in w.iter().zip(gv) {
            elements += 1;
            if (a.is_nan() && b.is_nan()) || a == b {
                continue;
            }
            differing += 1;
            let abs = (a - b).abs();
            let rel = abs / a.abs().max(1e-30);
            max_abs = max_abs.max(abs);
            max_rel = max_rel.max(rel);
            if exact || !(abs <= tol || rel <= tol) {
                ok = false;
            }
        }
    }
    Checked { origin: gen.origin.clone(), name: gen.name.clone(), kind: gen.kernel.kind(), elements, max_abs, max_rel, differing, ok }
}

/// How close a back end's output must be where its sums may run in another order than the CPU's
/// (or a multiply-add is fused): f32 to 1e-5, relative or absolute; a bf16 or f16 output may
/// round the other way once.
pub fn tolerance(ty: Ty) -> f64 {
    match ty {
        Ty::BF16 => 1.0 / 128.0,
        Ty::F16 => 1.0 / 1024.0,
        _ => 1e-5,
    }
}
