//! The `dlc` command line: a thin client of the library API.

mod bench;
mod cli;
mod explain;
mod repl;

// mimalloc keeps freed pages for reuse: a training step frees and reallocates the same tensor
// sizes every step, and glibc returns large blocks to the OS, so each step page-faulted them
// back in (measured: `clear_page_erms` in the kernel among the top entries of a step's profile).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(cli::main());
}
