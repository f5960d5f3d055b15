//! What runs through the host on a device: an op with no device kernel (its inputs
//! downloaded, the interpreter computing it, its outputs uploaded, counted as a round trip in
//! `Report::host_ops`), and an op with no operands computed once and kept on the device
//! (`Report::once_ops`).

use super::placement::kind_of;
use super::{DeviceExecutor, Value};
use crate::exec::Executor;
use crate::runner::driver::Driver;
use crate::runtime::RuntimeError;
use dlc_language::ir::{Graph, NodeId};
use dlc_language::passes::fusion::{is_transpose, Kernel, Plan};

impl<D: Driver> DeviceExecutor<D> {
    /// The value of `n`, which plan kernel `k` computes the same in every run (a constant, an
    /// iota): computed on the host the first time, then kept on the device.
    pub(super) fn once(&mut self, g: &Graph, k: &Kernel, n: NodeId) -> Result<Value<D::Buf>, RuntimeError> {
        if let Some(v) = self.constants.get(&n) {
            return Ok(v.clone());
        }
        let v = self.on_host(g, k, &[n], true)?.remove(0);
        self.constants.insert(n, v.clone());
        Ok(v)
    }

    /// Put a value the host computation reads into `ex`: a computed value downloaded; a
    /// transpose that was left as a view, through its source (matrix products read it so).
    fn host_input(&mut self, g: &Graph, s: NodeId, ex: &mut Executor) -> Result<(), RuntimeError> {
        if let Some(v) = self.values.get(&s).cloned() {
            let t = self.download(&v)?;
            ex.preset(s, t);
            return Ok(());
        }
        if is_transpose(&g.node(s).op) {
            return self.host_input(g, g.node(s).src[0], ex);
        }
        let v = self.free(g, s)?;
        let t = self.download(&v)?;
        ex.preset(s, t);
        Ok(())
    }

    /// Run plan kernel `k` on the host: download what it reads, let the interpreter compute it,
    /// upload `outputs`.
    pub(super) fn host(&mut self, g: &Graph, k: &Kernel, outputs: &[NodeId]) -> Result<Vec<Value<D::Buf>>, RuntimeError> {
        self.on_host(g, k, outputs, false)
    }

    /// `host`, counted as computed once per plan (`once`) or as a round trip of the run.
    fn on_host(&mut self, g: &Graph, k: &Kernel, outputs: &[NodeId], once: bool) -> Result<Vec<Value<D::Buf>>, RuntimeError> {
        let mut ex = Executor::new(0);
        let reads: Vec<NodeId> = match k {
            Kernel::Library(n) | Kernel::Free(n) | Kernel::View(n) => g.node(*n).src.clone(),
            Kernel::Gemm(_) => k.reads(g),
            _ => k.io().into_iter().flat_map(|(ins, _)| ins).collect(),
        };
        for s in reads {
            self.host_input(g, s, &mut ex)?;
        }
        let name = match k {
            Kernel::Library(n) | Kernel::Free(n) | Kernel::View(n) => g.node(*n).op.kind_name(),
            other => format!("fused {}", kind_of(other)),
        };
        let counts = if once { &mut self.report.once_ops } else { &mut self.report.host_ops };
        *counts.entry(name).or_insert(0) += 1;
        ex.run_plan(g, &Plan { kernels: vec![k.clone()], roots: outputs.to_vec() })?;
        let mut out = vec![];
        for o in outputs {
            let t = ex.eval(g, *o)?;
            out.push(self.upload(&t)?);
        }
        Ok(out)
    }
}
