//! NCCL for the CUDA driver's all-reduces (data parallel on GPUs, one process per GPU under
//! `mpirun`): the unique id made on rank 0 and broadcast over MPI, one communicator per process
//! on a communication stream of its own, so that a bucket's all-reduce runs beside the rest of
//! backward on the compute stream. Each all-reduce waits for an event recorded on the compute
//! stream after the bucket was packed; `wait` makes the compute stream wait for the last one.
//!
//! Built and type-checked here; never run on GPUs (docs/gpu.md, "Not done yet").

use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream};
use cudarc::nccl::safe::{Comm, Id, ReduceOp};
use std::sync::Arc;

pub struct Ranks {
    comm: Comm,
    stream: Arc<CudaStream>,
    world: std::rc::Rc<crate::parallel::World>,
    /// The event after the last all-reduce queued, until the compute stream waits for it.
    last: Option<CudaEvent>,
}

impl Ranks {
    /// Join the ranks of `world` on GPU context `ctx`. Every rank must call this at the same
    /// point (the id's broadcast and NCCL's initialisation are collective).
    pub fn join(ctx: &Arc<CudaContext>, world: &std::rc::Rc<crate::parallel::World>) -> Result<Ranks, String> {
        // Every rank must take the same branch, or one would wait in a collective the others
        // never join: the ranks first agree on whether each has NCCL.
        // SAFETY: only tries to open libnccl by its usual names.
        let present = unsafe { cudarc::nccl::sys::is_culib_present() };
        let mut missing = [(!present) as u8 as f64];
        world.sum_f64(&mut missing);
        if missing[0] > 0.0 {
            return Err(format!("NCCL (libnccl.so.2) was not found on the library path of {} of {} ranks", missing[0], world.size()));
        }
        // Rank 0's id, or a marker that it could not make one, on every rank.
        let made = if world.is_root() { Some(Id::new().map_err(|e| format!("an NCCL id: {e:?}"))) } else { None };
        let mut wide: Vec<i64> = match &made {
            Some(Ok(id)) => id.internal().iter().map(|c| *c as i64).collect(),
            Some(Err(_)) => vec![i64::MIN; 128],
            None => vec![0; 128],
        };
        world.broadcast_i64(&mut wide);
        if let Some(Err(why)) = made {
            return Err(why);
        }
        if wide[0] == i64::MIN {
            return Err("rank 0 could not make an NCCL id".into());
        }
        let mut internal = [0 as std::ffi::c_char; 128];
        for (c, w) in internal.iter_mut().zip(&wide) {
            *c = *w as std::ffi::c_char;
        }
        let stream = ctx.new_stream().map_err(|e| format!("a communication stream: {e:?}"))?;
        let comm = Comm::from_rank(stream.clone(), world.rank(), world.size(), Id::uninit(internal))
            .map_err(|e| format!("NCCL's communicator for rank {} of {}: {e:?}", world.rank(), world.size()));
        // All ranks on the device path or none (a rank averaging through the host while the
        // others wait in NCCL would hang the job).
        let mut failed = [comm.is_err() as u8 as f64];
        world.sum_f64(&mut failed);
        match comm {
            Ok(comm) if failed[0] == 0.0 => Ok(Ranks { comm, stream, world: world.clone(), last: None }),
            Ok(_) => Err(format!("NCCL's communicator failed on {} of {} ranks", failed[0], world.size())),
            Err(why) => Err(why),
        }
    }

    /// Queue the mean of the first `n` f32 values of `buf` over the ranks (NCCL's `ncclAvg`),
    /// in place, after the work queued on `compute` so far.
    pub fn all_reduce_mean(&mut self, compute: &CudaStream, buf: &mut CudaSlice<u8>, n: usize) -> Result<(), String> {
        let packed = compute.record_event(None).map_err(|e| format!("an event on the GPU: {e:?}"))?;
        self.stream.wait(&packed).map_err(|e| format!("ordering the communication stream: {e:?}"))?;
        // SAFETY: the bucket's buffer holds at least `n` f32 values (the executor sized it).
        let mut values = unsafe { buf.transmute_mut::<f32>(n) }.ok_or("an all-reduce past its buffer")?;
        self.comm.all_reduce_in_place(&mut values, &ReduceOp::Avg).map_err(|e| format!("an NCCL all-reduce: {e:?}"))?;
        self.last = Some(self.stream.record_event(None).map_err(|e| format!("an event on the communication stream: {e:?}"))?);
        self.world.count_device_allreduce(n as u64 * 4);
        Ok(())
    }

    /// Make the work queued next on `compute` wait for the all-reduces queued so far.
    pub fn wait(&mut self, compute: &CudaStream) -> Result<(), String> {
        match self.last.take() {
            Some(ev) => compute.wait(&ev).map_err(|e| format!("waiting for the all-reduces: {e:?}")),
            None => Ok(()),
        }
    }
}
