//! `dlc bench --profile` on a device: each kernel waited for and its time added to the run's
//! profile, by kind and output shape.

use super::placement::kind_of;
use super::{fail, shape_of, DeviceExecutor};
use crate::runner::driver::Driver;
use crate::runtime::RuntimeError;
use dlc_language::ir::{Graph, NodeId};
use dlc_language::passes::fusion::Kernel;

impl<D: Driver> DeviceExecutor<D> {
    /// With profiling on, wait for kernel `k` and add the time since `started` to its entry.
    pub(super) fn profiled(
        &mut self,
        g: &Graph,
        k: &Kernel,
        outputs: &[NodeId],
        started: Option<std::time::Instant>,
    ) -> Result<(), RuntimeError> {
        let (Some(p), Some(t0), Some(first)) = (self.profile.clone(), started, outputs.first()) else { return Ok(()) };
        if matches!(k, Kernel::Free(_)) {
            return Ok(()); // inputs, parameters, views: nothing runs
        }
        self.driver.synchronize().map_err(fail)?;
        let what = match k {
            Kernel::Library(n) | Kernel::Free(n) => g.node(*n).op.kind_name(),
            other => format!("fused {}", kind_of(other)),
        };
        let key = format!("{what} {:?}", shape_of(g, *first));
        let mut p = p.lock().expect("profile lock");
        let e = p.entry(key).or_insert((0, 0.0));
        e.0 += 1;
        e.1 += t0.elapsed().as_secs_f64();
        Ok(())
    }
}
