//! Data parallel on the device: a step's gradient buckets averaged across the ranks without
//! leaving the device. The trainer names the buckets before it runs the backward half
//! (`Runner::average_on_device`); after the kernel that writes a bucket's last gradient, the
//! executor copies the bucket's gradients into one buffer of its own (kept from step to step)
//! and starts the driver's all-reduce of it, which runs beside the rest of backward (NCCL on a
//! communication stream on a GPU; MPI over the emulated GPU's host memory). At the end of the
//! run the compute stream waits for the all-reduces, and each gradient's average is bound, as a
//! part of its bucket's buffer, to the input the update half reads. Nothing is downloaded.
//!
//! The averages are the sums over the rank count, as the host path computes them (the sum in
//! f32, the division rounded once), so the two paths train alike; `DLC_DEVICE_COLLECTIVES=0`
//! takes the host path (to compare).

use super::{fail, DeviceExecutor, Place, Value};
use crate::runner::driver::Driver;
use crate::runner::{storage, DeviceBucket, Slot};
use crate::runtime::RuntimeError;
use dlc_jit::kir::Ty;
use dlc_language::ir::Graph;
use std::rc::Rc;

/// The buckets of the run in progress, and how many have started.
pub(super) struct Pending {
    buckets: Vec<DeviceBucket>,
    started: usize,
}

/// Whether the driver joined the ranks' collectives: not yet tried, or the outcome.
#[derive(Default)]
pub(super) enum Joined {
    #[default]
    NotYet,
    Yes,
    No,
}

impl<D: Driver> DeviceExecutor<D> {
    /// Average `buckets` on the device during the next run, if the driver can join the ranks.
    pub(super) fn average_buckets(&mut self, world: &Rc<crate::parallel::World>, buckets: Vec<DeviceBucket>) -> Result<bool, RuntimeError> {
        if world.size() <= 1 || crate::runner::switched_off("DLC_DEVICE_COLLECTIVES") {
            return Ok(false);
        }
        if let Joined::NotYet = self.joined {
            self.joined = match self.driver.join_ranks(world) {
                Ok(()) => Joined::Yes,
                Err(why) => {
                    // Said once; gradients are then averaged through the host.
                    self.report.not_lowered.push(format!("all-reduces on the device: {why}"));
                    Joined::No
                }
            };
        }
        if !matches!(self.joined, Joined::Yes) {
            return Ok(false);
        }
        self.world = Some(world.clone());
        self.pending = Some(Pending { buckets, started: 0 });
        Ok(true)
    }

    /// After kernel `i`: start the all-reduce of every bucket whose gradients are all written.
    pub(super) fn start_ready_buckets(&mut self, i: usize) -> Result<(), RuntimeError> {
        loop {
            let Some(p) = &self.pending else { return Ok(()) };
            match p.buckets.get(p.started) {
                Some(b) if b.ready_after <= i => self.start_bucket(p.started)?,
                _ => return Ok(()),
            }
        }
    }

    /// Pack bucket `k`'s gradients into its buffer and start its all-reduce.
    fn start_bucket(&mut self, k: usize) -> Result<(), RuntimeError> {
        // The calls so far are issued now: an all-reduce is not part of a graph.
        self.flush()?;
        let grads = self.pending.as_ref().map(|p| p.buckets[k].grads.clone()).unwrap_or_default();
        let mut parts: Vec<Value<D::Buf>> = vec![];
        for (node, _) in &grads {
            parts.push(self.values.get(node).cloned().ok_or_else(|| fail(format!("the gradient {node:?} is not computed yet")))?);
        }
        let values: usize = parts.iter().map(|v| v.shape.iter().product::<usize>()).sum();
        let bytes = values * 4;
        let buf = match self.bucket_bufs.get(k) {
            Some(b) if b.1 == bytes => b.0.clone(),
            _ => {
                let b = Rc::new(self.driver.alloc(bytes.max(1)).map_err(fail)?);
                self.bucket_bufs.resize_with(k + 1, || (b.clone(), 0));
                self.bucket_bufs[k] = (b.clone(), bytes);
                b
            }
        };
        let mut at = 0;
        for v in &parts {
            let n = v.shape.iter().product::<usize>() * 4;
            let dst = self.driver.part(&buf, at, n).map_err(fail)?;
            match &v.place {
                Place::Device(src, Ty::F32) => self.driver.copy(src, &dst, n).map_err(fail)?,
                _ => {
                    // A gradient kept on the host or stored otherwise: converted on the way.
                    let t = self.download(v)?;
                    let bytes = storage::to_bytes(&t, Ty::F32);
                    self.report.bytes_up += bytes.len() as u64;
                    self.driver.write(&dst, &bytes).map_err(fail)?;
                }
            }
            at += n;
        }
        // (The driver counts it in the world's traffic.)
        self.driver.all_reduce_mean(&buf, values).map_err(fail)?;
        self.report.device_allreduces += 1;
        if let Some(p) = self.pending.as_mut() {
            p.started = k + 1;
        }
        Ok(())
    }

    /// The run's end: start what has not started, order the compute stream after the
    /// all-reduces, and bind each gradient's average to the input the update reads.
    pub(super) fn finish_buckets(&mut self, g: &Graph) -> Result<(), RuntimeError> {
        let Some(count) = self.pending.as_ref().map(|p| p.buckets.len()) else { return Ok(()) };
        let first = self.pending.as_ref().map_or(0, |p| p.started);
        for k in first..count {
            self.start_bucket(k)?;
        }
        let started = std::time::Instant::now();
        self.driver.wait_collectives().map_err(fail)?;
        if let Some(w) = &self.world {
            w.add_gradient_wait(started.elapsed().as_secs_f64());
        }
        let pending = self.pending.take().expect("checked above");
        for (k, bucket) in pending.buckets.iter().enumerate() {
            let buf = self.bucket_bufs[k].0.clone();
            let mut at = 0;
            for (node, input) in &bucket.grads {
                let n = g.node(*node);
                let shape: Vec<usize> = n.shape.iter().map(|d| d.as_known().unwrap_or(0) as usize).collect();
                let bytes = shape.iter().product::<usize>() * 4;
                let part = self.driver.part(&buf, at, bytes).map_err(fail)?;
                at += bytes;
                let v = Value { dtype: n.dtype, shape, place: Place::Device(Rc::new(part), Ty::F32) };
                self.slots.insert(Slot::Input(*input), v);
                self.input_slots.insert(*input, Slot::Input(*input));
            }
        }
        Ok(())
    }
}
