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
    // Rust ignores SIGPIPE, so printing into a closed pipe (`dlc explain x.dl | head`) would
    // panic; a command-line tool should just stop, as `cat` does.
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to its default before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::exit(cli::main());
}
