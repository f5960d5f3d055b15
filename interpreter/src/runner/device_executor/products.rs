//! Matrix products on the device: the driver's gemm (cuBLAS), or cuBLASLt with the product's
//! epilogue (its bias, and a relu) when the plan made it a `Kernel::Gemm`; a transposed
//! operand left as a view is passed as the call's transpose flag.

use super::{is_transpose, shape_of, DeviceExecutor, Place, Value};
use crate::runner::driver::{Call, Driver, Epilogue, Product};
use crate::runner::storage;
use crate::runtime::RuntimeError;
use dlc_jit::kir::Ty;
use dlc_language::ir::plan::GemmKernel;
use dlc_language::ir::{Graph, NodeId, Op};
use std::rc::Rc;

/// A product's operand: its value and whether it is a transpose left as a view.
type Operand<B> = Option<(Value<B>, bool)>;

/// The storage a matrix product runs in on the device's gemm, if it can: f32, bf16 or f16, of
/// rank 2 or more.
pub(super) fn gemm_type(g: &Graph, n: NodeId) -> Option<Ty> {
    let node = g.node(n);
    let ty = storage::device_type(node.dtype).filter(|t| matches!(t, Ty::F32 | Ty::BF16 | Ty::F16))?;
    (matches!(node.op, Op::MatMul) && node.shape.len() >= 2).then_some(ty)
}

impl<D: Driver> DeviceExecutor<D> {
    /// A matrix product's operand: its value and whether it is a transpose left as a view.
    fn operand(&mut self, g: &Graph, s: NodeId) -> Result<Operand<D::Buf>, RuntimeError> {
        if let Some(v) = self.values.get(&s) {
            return Ok(Some((v.clone(), false)));
        }
        if is_transpose(&g.node(s).op) {
            // (A transpose swaps the last two axes.)
            return Ok(self.values.get(&g.node(s).src[0]).map(|v| (v.clone(), true)));
        }
        Ok(None)
    }

    /// Matrix product `n` on the device, when both operands are there in the product's storage
    /// (f32, bf16, f16) with the output's batch dims, and with its epilogue (cuBLASLt's bias
    /// and relu) when the plan gave it one and the bias is there too; `None` leaves it to the host.
    pub(super) fn matmul(&mut self, g: &Graph, n: NodeId, epilogue: Option<&GemmKernel>) -> Result<Option<Value<D::Buf>>, RuntimeError> {
        let node = g.node(n);
        let shape = shape_of(g, n);
        let r = shape.len();
        let Some(ty) = gemm_type(g, n) else { return Ok(None) };
        let (Some((a, a_t)), Some((b, b_t))) = (self.operand(g, node.src[0])?, self.operand(g, node.src[1])?) else { return Ok(None) };
        let (m, n_cols) = (shape[r - 2], shape[r - 1]);
        if a.shape.len() != r || b.shape.len() != r {
            return Ok(None);
        }
        let k = if a_t { a.shape[r - 2] } else { a.shape[r - 1] };
        let batch: usize = shape[..r - 2].iter().product();
        let (Place::Device(ab, aty), Place::Device(bb, bty)) = (&a.place, &b.place) else { return Ok(None) };
        if *aty != ty || *bty != ty || a.numel() != batch * m * k || b.numel() != batch * k * n_cols {
            return Ok(None);
        }
        let out = epilogue.map_or(n, |gk| gk.output());
        let (bias, epilogue) = match epilogue {
            None => (None, Epilogue::None),
            // A low-precision product's widening in the epilogue: planned only where products
            // write f32s (the CPU); on a device the cast converts stored values.
            Some(gk) if gk.widens => return Ok(None),
            Some(GemmKernel { bias: None, .. }) => return Ok(None),
            Some(gk @ GemmKernel { bias: Some(bias), .. }) => match &self.value(g, *bias)?.place {
                Place::Device(bias, t) if *t == ty && ty == Ty::F32 => {
                    (Some(bias.clone()), if gk.relu() { Epilogue::BiasRelu } else { Epilogue::Bias })
                }
                _ => return Ok(None),
            },
        };
        let p = Product { batch, m, n: n_cols, k, a_t, b_t, ty, epilogue };
        let c = Rc::new(self.output(g, out, batch * m * n_cols * ty.bytes())?);
        let (a, b) = (ab.clone(), bb.clone());
        let kind = match epilogue {
            Epilogue::None => "matmul",
            Epilogue::Bias => "matmul+bias",
            Epilogue::BiasRelu => "matmul+bias+relu",
        };
        self.issue(Call::Gemm { p, a, b, c: c.clone(), bias })?;
        self.report.launches += 1;
        *self.report.launches_by_kind.entry(kind.into()).or_insert(0) += 1;
        Ok(Some(Value { dtype: node.dtype, shape, place: Place::Device(c, ty) }))
    }
}
