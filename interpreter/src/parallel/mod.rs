//! Data parallelism (DistributedDataParallel's behaviour) over MPI: one process per rank, launched
//! as HPC and ML users launch jobs (`mpirun -n 4 dlc run train.dl`, `srun --mpi=pmix`, a
//! hostfile). Without a launcher `dlc run` is one process and never touches MPI.
//!
//! What a rank does differently from one process (docs/parallel.md):
//! - parameters, buffers and optimiser state are broadcast from rank 0 before the first step
//!   (so a seeded init, a `--resume` and `load_weights` all start every replica equal);
//! - each epoch's examples, in the order one process would see them, are dealt to the ranks
//!   (rank r takes positions r, r + W, r + 2W, ..., after the epoch is cut to a multiple of W,
//!   DistributedSampler with `drop_last`), then batched;
//! - the step's gradients (after `accumulate`'s micro-batches) are averaged across ranks in
//!   buckets before the optimiser's update, which then runs identically everywhere;
//! - logged values are averaged across ranks, evaluations are summed over each rank's share of
//!   the data; rank 0 alone prints, writes metrics and checkpoints.

mod comm;
pub mod world;

pub use world::World;
