//! All-reduce time against message size on this machine, for docs/parallel.md's cost model:
//! `mpirun -n 2 target/release/examples/allreduce` prints one JSON line per size (f32 values
//! summed across the ranks, median of repeated runs) from rank 0.

fn main() {
    let world = match dlc::parallel::World::from_environment() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    for exp in [2usize, 6, 10, 12, 14, 16, 18, 20, 22, 24] {
        let n = 1usize << exp;
        let reps = if n >= 1 << 22 { 5 } else { 21 };
        let s = world.time_allreduce(n, reps);
        if world.is_root() {
            println!(
                "{{\"ranks\": {}, \"bytes\": {}, \"seconds\": {:.9}, \"gb_per_s\": {:.3}}}",
                world.size(),
                n * 4,
                s,
                n as f64 * 4.0 / s / 1e9
            );
        }
    }
}
