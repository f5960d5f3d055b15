//! Mixed precision in training: which precision the recipe asks for, and f16's dynamic loss
//! scaling (PyTorch's `GradScaler`, with its defaults).
//!
//! The scaling is compiled into the step: the loss is multiplied by the scale before autodiff,
//! the gradients divided by it after, and one flag says whether every gradient is finite. Each
//! parameter's and optimiser state's new value is `where(finite, new, old)`, so a step that
//! overflowed changes nothing; the trainer then halves the scale. After `GROWTH_INTERVAL`
//! finite steps in a row it doubles it.

use super::err;
use crate::runtime::RuntimeError;
use dlc_language::eval::tracer::Tracer;
use dlc_language::ir::{BinaryOp, NodeId, ReduceOp};
use dlc_language::types::DType;

/// GradScaler's `init_scale`, `growth_factor`, `backoff_factor` and `growth_interval`.
pub const INIT_SCALE: f64 = 65536.0;
const GROWTH: f64 = 2.0;
const BACKOFF: f64 = 0.5;
const GROWTH_INTERVAL: usize = 2000;
/// Skipped steps in a row after which the run stops: the scale has then fallen by 2^40 and what
/// overflows is not the scaled gradient.
pub const MAX_IN_A_ROW: usize = 40;

/// The scaler's state between steps.
#[derive(Clone, Debug)]
pub struct LossScaler {
    pub scale: f64,
    /// Finite steps since the scale last changed.
    good: usize,
    /// Steps skipped because a gradient overflowed (the optimiser's step count does not advance).
    pub skipped: usize,
    /// Skipped steps in a row: a run whose gradients are never finite is broken, not unlucky.
    pub in_a_row: usize,
}

impl Default for LossScaler {
    fn default() -> Self {
        LossScaler { scale: INIT_SCALE, good: 0, skipped: 0, in_a_row: 0 }
    }
}

impl LossScaler {
    /// After a step: `finite` false means it was skipped.
    pub fn update(&mut self, finite: bool) {
        if finite {
            self.in_a_row = 0;
            self.good += 1;
            if self.good == GROWTH_INTERVAL {
                self.scale *= GROWTH;
                self.good = 0;
            }
        } else {
            self.scale *= BACKOFF;
            self.good = 0;
            self.skipped += 1;
            self.in_a_row += 1;
        }
    }
}

/// `loss × scale`, the value autodiff differentiates.
pub fn scale_loss(t: &mut Tracer, loss: NodeId, scale: NodeId) -> Result<NodeId, RuntimeError> {
    let sp = Default::default();
    let s = t.cast(scale, t.ty(loss).dtype, sp);
    t.tensor_binary(BinaryOp::Mul, loss, s, sp).map_err(|_| err("could not build the loss scaling"))
}

/// The gradients divided by the scale, and a bool scalar: every gradient is finite.
pub fn unscale(t: &mut Tracer, grads: &[NodeId], scale: NodeId) -> Result<(Vec<NodeId>, NodeId), RuntimeError> {
    let sp = Default::default();
    let fail = |_| err("could not build the loss scaling");
    let mut out = vec![];
    // Σ g·0 is 0 when every element is finite and NaN otherwise (inf·0 and NaN·0 are NaN).
    let mut probe: Option<NodeId> = None;
    for &g in grads {
        let dt = t.ty(g).dtype;
        let inv = t.cast(scale, dt, sp);
        let u = t.tensor_binary(BinaryOp::Div, g, inv, sp).map_err(fail)?;
        let zero = t.constant(0.0, dt, sp);
        let z = t.tensor_binary(BinaryOp::Mul, g, zero, sp).map_err(fail)?;
        let z = t.reduce(ReduceOp::Sum, z, None, false, sp).map_err(fail)?;
        let z = t.cast(z, DType::F32, sp);
        probe = Some(match probe {
            Some(p) => t.tensor_binary(BinaryOp::Add, p, z, sp).map_err(fail)?,
            None => z,
        });
        out.push(u);
    }
    let probe = match probe {
        Some(p) => p,
        None => t.constant(0.0, DType::F32, sp),
    };
    let zero = t.constant(0.0, DType::F32, sp);
    let finite = t.tensor_binary(BinaryOp::CmpEq, probe, zero, sp).map_err(fail)?;
    Ok((out, finite))
}

/// `new` where the step's gradients were finite, else `old` (the step is skipped).
pub fn gate(t: &mut Tracer, finite: NodeId, new: NodeId, old: NodeId) -> Result<NodeId, RuntimeError> {
    t.where_(finite, new, old, Default::default()).map_err(|_| err("could not build the skipped-step guard"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scale_backs_off_on_overflow_and_grows_after_the_interval() {
        let mut s = LossScaler::default();
        s.update(false);
        assert_eq!((s.scale, s.skipped), (INIT_SCALE / 2.0, 1));
        for _ in 0..GROWTH_INTERVAL - 1 {
            s.update(true);
        }
        assert_eq!(s.scale, INIT_SCALE / 2.0);
        s.update(true);
        assert_eq!(s.scale, INIT_SCALE);
        s.update(false);
        assert_eq!((s.scale, s.skipped), (INIT_SCALE / 2.0, 2));
    }
}
