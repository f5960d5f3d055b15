//! The MPI calls a `World` makes, in one place: over the `mpi` crate (the default feature), or,
//! in a build without MPI, a type with no values (such a build is always a world of one).

#[cfg(feature = "mpi")]
pub(super) use with_mpi::Comm;
#[cfg(not(feature = "mpi"))]
pub(super) use without_mpi::Comm;

#[cfg(feature = "mpi")]
mod with_mpi {
    use mpi::collective::SystemOperation;
    use mpi::traits::{Communicator, CommunicatorCollectives, Root};

    pub struct Comm {
        comm: mpi::topology::SimpleCommunicator,
        /// Finalises MPI when dropped; declared last so the communicator goes first.
        _universe: mpi::environment::Universe,
    }

    impl Comm {
        /// MPI's world: (communicator, rank, size).
        pub fn init() -> Result<(Comm, usize, usize), String> {
            // MPI is called from the main thread only (the kernels' threads never call it).
            let (universe, _) =
                mpi::initialize_with_threading(mpi::Threading::Funneled).ok_or("MPI was initialised already in this process")?;
            let comm = universe.world();
            let (rank, size) = (comm.rank() as usize, comm.size() as usize);
            Ok((Comm { comm, _universe: universe }, rank, size))
        }

        pub fn sum_f64(&self, v: &mut [f64]) {
            let send = v.to_vec();
            self.comm.all_reduce_into(&send[..], v, SystemOperation::sum());
        }

        pub fn sum_f32(&self, v: &mut [f32]) {
            let send = v.to_vec();
            self.comm.all_reduce_into(&send[..], v, SystemOperation::sum());
        }

        pub fn broadcast_f32(&self, v: &mut [f32]) {
            self.comm.process_at_rank(0).broadcast_into(v);
        }

        pub fn broadcast_f64(&self, v: &mut [f64]) {
            self.comm.process_at_rank(0).broadcast_into(v);
        }

        pub fn broadcast_i64(&self, v: &mut [i64]) {
            self.comm.process_at_rank(0).broadcast_into(v);
        }

        pub fn barrier(&self) {
            self.comm.barrier();
        }

        pub fn abort(&self, code: i32) -> ! {
            self.comm.abort(code)
        }

        /// Non-blocking sums of buckets started while `run` goes on (see
        /// `World::sum_buckets_during`); returns the sums and the seconds waited after `run`.
        pub fn sum_buckets_during<E>(
            &self,
            sizes: &[usize],
            run: impl FnOnce(&mut dyn FnMut(Vec<f32>)) -> Result<(), E>,
        ) -> Result<(Vec<Vec<f32>>, f64), E> {
            let mut sends: Vec<Vec<f32>> = sizes.iter().map(|n| vec![0f32; *n]).collect();
            let mut recvs: Vec<Vec<f32>> = sizes.iter().map(|n| vec![0f32; *n]).collect();
            let mut result = Ok(());
            let mut exposed = 0.0;
            mpi::request::scope(|scope| {
                let mut free = sends.iter_mut().zip(recvs.iter_mut());
                let mut pending = vec![];
                result = run(&mut |values: Vec<f32>| {
                    let Some((send, recv)) = free.next() else { return };
                    send.copy_from_slice(&values);
                    let send: &[f32] = send;
                    pending.push(self.comm.immediate_all_reduce_into(scope, send, &mut recv[..], SystemOperation::sum()));
                    // Drive the ones under way (MPI progresses inside its calls).
                    pending = std::mem::take(&mut pending).into_iter().filter_map(|r| r.test().err()).collect();
                });
                let waited = std::time::Instant::now();
                for r in pending {
                    r.wait();
                }
                exposed = waited.elapsed().as_secs_f64();
            });
            result?;
            Ok((recvs, exposed))
        }
    }
}

#[cfg(not(feature = "mpi"))]
mod without_mpi {
    /// No communicator exists in a build without MPI.
    pub enum Comm {}

    impl Comm {
        pub fn init() -> Result<(Comm, usize, usize), String> {
            Err("this dlc was built without MPI (`--no-default-features`), so it cannot run as a rank under mpirun; build it with the default features".into())
        }
        pub fn sum_f64(&self, _: &mut [f64]) {
            match *self {}
        }
        pub fn sum_f32(&self, _: &mut [f32]) {
            match *self {}
        }
        pub fn broadcast_f32(&self, _: &mut [f32]) {
            match *self {}
        }
        pub fn broadcast_f64(&self, _: &mut [f64]) {
            match *self {}
        }
        pub fn broadcast_i64(&self, _: &mut [i64]) {
            match *self {}
        }
        pub fn barrier(&self) {
            match *self {}
        }
        pub fn abort(&self, _: i32) -> ! {
            match *self {}
        }
        pub fn sum_buckets_during<E>(
            &self,
            _: &[usize],
            _: impl FnOnce(&mut dyn FnMut(Vec<f32>)) -> Result<(), E>,
        ) -> Result<(Vec<Vec<f32>>, f64), E> {
            match *self {}
        }
    }
}
