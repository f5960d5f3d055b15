//! The ranks of a job and the collectives the trainer uses, over MPI (the `mpi` crate on Open
//! MPI). A process not started by an MPI launcher is a world of one and calls no MPI function.

use std::cell::RefCell;

/// Environment variables an MPI launcher sets (Open MPI's mpirun, PMIx as under `srun
/// --mpi=pmix`, MPICH's Hydra).
const LAUNCHER_VARS: &[&str] = &["OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"];

/// Whether this process was started by an MPI launcher.
pub fn launched_by_mpi() -> bool {
    LAUNCHER_VARS.iter().any(|v| std::env::var_os(v).is_some())
}

/// Under a launcher that starts several ranks on this machine, give each rank its share of the
/// cores for the kernels' threads (unless `RAYON_NUM_THREADS` says otherwise): two ranks with all
/// cores each would fight over them. Must run before the thread pool is first used.
pub fn share_cores_between_local_ranks() {
    if std::env::var_os("RAYON_NUM_THREADS").is_some() {
        return;
    }
    let local = ["OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_LOCAL_SIZE", "MPI_LOCALNRANKS"]
        .iter()
        .find_map(|v| std::env::var(v).ok().and_then(|s| s.parse::<usize>().ok()));
    if let Some(ranks) = local.filter(|r| *r > 1) {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let _ = rayon::ThreadPoolBuilder::new().num_threads((cores / ranks).max(1)).build_global();
    }
}

/// What the collectives did, for `explain`, `bench` and the tests.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Traffic {
    /// Gradient all-reduces (one per bucket per optimiser step) and their bytes.
    pub gradient_allreduces: usize,
    pub gradient_bytes: u64,
    /// Seconds the steps waited for gradient all-reduces (after backward, what overlap did not
    /// hide).
    pub gradient_s: f64,
    /// Small all-reduces (logged values, the stop flag, evaluation sums) and broadcasts.
    pub small_allreduces: usize,
    pub broadcasts: usize,
}

pub struct World {
    rank: usize,
    size: usize,
    mpi: Option<super::comm::Comm>,
    traffic: RefCell<Traffic>,
}

impl World {
    /// One process, no MPI.
    pub fn single() -> World {
        World { rank: 0, size: 1, mpi: None, traffic: Default::default() }
    }

    /// The job this process belongs to: MPI's world when started by a launcher, else one
    /// process.
    pub fn from_environment() -> Result<World, String> {
        if !launched_by_mpi() {
            return Ok(World::single());
        }
        let (comm, rank, size) = super::comm::Comm::init()?;
        Ok(World { rank, size, mpi: Some(comm), traffic: Default::default() })
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn is_root(&self) -> bool {
        self.rank == 0
    }

    pub fn traffic(&self) -> Traffic {
        self.traffic.borrow().clone()
    }

    /// Sum `v` over the ranks, in place (every rank gets the sum).
    pub fn sum_f64(&self, v: &mut [f64]) {
        if let Some(m) = &self.mpi {
            m.sum_f64(v);
            self.traffic.borrow_mut().small_allreduces += 1;
        }
    }

    /// Sum a gradient bucket over the ranks, in place.
    pub fn sum_gradients(&self, v: &mut [f32]) {
        if let Some(m) = &self.mpi {
            let started = std::time::Instant::now();
            m.sum_f32(v);
            let mut t = self.traffic.borrow_mut();
            t.gradient_allreduces += 1;
            t.gradient_bytes += std::mem::size_of_val(v) as u64;
            t.gradient_s += started.elapsed().as_secs_f64();
        }
    }

    /// Sum buckets of gradients over the ranks while `run` goes on: `run` gets a function to call
    /// with each bucket's values (in bucket order) as soon as they are computed, which starts
    /// that bucket's non-blocking all-reduce; pending all-reduces are driven between calls, and
    /// all are waited for once `run` returns. Returns the sums, by bucket. `exposed` time (what
    /// the step waits after `run`) is what overlap did not hide.
    pub fn sum_buckets_during<E>(
        &self,
        sizes: &[usize],
        run: impl FnOnce(&mut dyn FnMut(Vec<f32>)) -> Result<(), E>,
    ) -> Result<Vec<Vec<f32>>, E> {
        let Some(m) = &self.mpi else {
            // One rank: the sums are the values.
            let mut out = vec![];
            run(&mut |v| out.push(v))?;
            return Ok(out);
        };
        let mut started_all = 0usize;
        let (recvs, exposed) = m.sum_buckets_during(sizes, |start| {
            run(&mut |values| {
                started_all += 1;
                start(values)
            })
        })?;
        debug_assert_eq!(started_all, sizes.len(), "every bucket's all-reduce was started");
        let mut t = self.traffic.borrow_mut();
        t.gradient_allreduces += sizes.len();
        t.gradient_bytes += sizes.iter().sum::<usize>() as u64 * 4;
        t.gradient_s += exposed;
        Ok(recvs)
    }

    /// Count an all-reduce of `bytes` of gradients made on the device by NCCL (queued: its time
    /// is what the step waits for it, `add_gradient_wait`).
    pub fn count_device_allreduce(&self, bytes: u64) {
        let mut t = self.traffic.borrow_mut();
        t.gradient_allreduces += 1;
        t.gradient_bytes += bytes;
    }

    /// Seconds a step waited for gradient all-reduces queued on the device.
    pub fn add_gradient_wait(&self, s: f64) {
        self.traffic.borrow_mut().gradient_s += s;
    }

    /// Rank 0's `v` on every rank (the lengths must agree).
    pub fn broadcast_f32(&self, v: &mut [f32]) {
        if let Some(m) = &self.mpi {
            m.broadcast_f32(v);
            self.traffic.borrow_mut().broadcasts += 1;
        }
    }

    pub fn broadcast_i64(&self, v: &mut [i64]) {
        if let Some(m) = &self.mpi {
            m.broadcast_i64(v);
            self.traffic.borrow_mut().broadcasts += 1;
        }
    }

    pub fn broadcast_f64(&self, v: &mut [f64]) {
        if let Some(m) = &self.mpi {
            m.broadcast_f64(v);
            self.traffic.borrow_mut().broadcasts += 1;
        }
    }

    /// End the whole job: every rank, whatever it is doing (a failed rank must not leave the
    /// others waiting in a collective).
    pub fn abort(&self, code: i32) -> ! {
        if let Some(m) = &self.mpi {
            m.abort(code)
        }
        std::process::exit(code)
    }

    /// Time one all-reduce of `n` f32 values, the median of `reps` (docs/parallel.md's cost model).
    pub fn time_allreduce(&self, n: usize, reps: usize) -> f64 {
        let mut v = vec![1.0f32; n.max(1)];
        let mut times = vec![];
        for _ in 0..reps.max(1) {
            if let Some(m) = &self.mpi {
                m.barrier();
            }
            let started = std::time::Instant::now();
            self.sum_gradients(&mut v);
            times.push(started.elapsed().as_secs_f64());
        }
        times.sort_by(|a, b| a.total_cmp(b));
        times[times.len() / 2]
    }
}
