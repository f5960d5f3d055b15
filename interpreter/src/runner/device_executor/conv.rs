//! Convolutions on the device: a `conv2d` and its two gradients, in f32, bf16 or f16 storage, through the driver's
//! convolution (cuDNN on a GPU), when their operands are on the device; otherwise, or once the
//! driver has said it cannot (no cuDNN), through the host like any op without a device kernel.

use super::{shape_of, DeviceExecutor, Place, Value};
use crate::runner::driver::{Call, Conv, ConvDir, Driver};
use crate::runtime::RuntimeError;
use dlc_jit::kir::Ty;
use dlc_language::ir::{Graph, NodeId, Op};
use dlc_language::types::DType;
use std::rc::Rc;

/// Which convolution computation a node is, and its attributes.
pub(super) fn conv_of(op: &Op) -> Option<(ConvDir, dlc_language::types::rules::Conv2dAttrs)> {
    match op {
        Op::Conv2d(a) => Some((ConvDir::Forward, *a)),
        Op::Conv2dGradInput(a) => Some((ConvDir::Data, *a)),
        Op::Conv2dGradWeight(a) => Some((ConvDir::Weight, *a)),
        _ => None,
    }
}

/// The storage a node's convolution runs in on the device: one of f32, bf16 and f16 throughout,
/// 4-d; `None` when it is not such a convolution.
pub(super) fn device_type(g: &Graph, n: NodeId) -> Option<Ty> {
    let node = g.node(n);
    let same = node.src.iter().all(|s| g.node(*s).dtype == node.dtype && g.node(*s).shape.len() == 4);
    let ty = match node.dtype {
        DType::F32 => Ty::F32,
        DType::BF16 => Ty::BF16,
        DType::F16 => Ty::F16,
        _ => return None,
    };
    (conv_of(&node.op).is_some() && same && node.shape.len() == 4).then_some(ty)
}

/// Whether a node is a convolution the device runs.
pub(super) fn on_device(g: &Graph, n: NodeId) -> bool {
    device_type(g, n).is_some()
}

impl<D: Driver> DeviceExecutor<D> {
    /// Convolution node `n` on the device; `None` leaves it to the host.
    pub(super) fn conv(&mut self, g: &Graph, n: NodeId) -> Result<Option<Value<D::Buf>>, RuntimeError> {
        let Some(ty) = device_type(g, n).filter(|ty| !self.conv_unavailable.contains(ty)) else { return Ok(None) };
        let node = g.node(n);
        let Some((dir, attrs)) = conv_of(&node.op) else { return Ok(None) };
        let mut operands = vec![];
        for s in &node.src {
            let v = self.value(g, *s)?;
            match &v.place {
                Place::Device(b, t) if *t == ty => operands.push(b.clone()),
                _ => return Ok(None),
            }
        }
        let four = |v: Vec<usize>| -> [usize; 4] { [v[0], v[1], v[2], v[3]] };
        let out = four(shape_of(g, n));
        let c = Conv::from_operands(dir, [four(shape_of(g, node.src[0])), four(shape_of(g, node.src[1])), out], attrs, ty);
        let buf = Rc::new(self.output(g, n, out.iter().product::<usize>() * ty.bytes())?);
        let ws = self.conv_workspace(&c)?.map(Rc::new);
        let call = Call::Conv { c, a: operands[0].clone(), b: operands[1].clone(), out: buf.clone(), ws };
        if let Err(e) = self.issue(call) {
            // Said once; every convolution in this storage after it goes through the host.
            self.report.not_lowered.push(format!("{ty:?} convolutions on the device: {e}"));
            self.conv_unavailable.insert(ty);
            return Ok(None);
        }
        self.report.launches += 1;
        *self.report.launches_by_kind.entry("conv".into()).or_insert(0) += 1;
        Ok(Some(Value { dtype: node.dtype, shape: out.to_vec(), place: Place::Device(buf, ty) }))
    }
}
