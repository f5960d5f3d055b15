//! The `dlc` command line: a thin client of the library API.

mod cli;
mod commands;
mod console;
mod reports;
mod runs;
mod session;

// mimalloc keeps freed pages for reuse: a training step frees and reallocates the same tensor
// sizes every step, and glibc returns large blocks to the OS, so each step page-faulted them
// back in (measured: `clear_page_erms` in the kernel among the top entries of a step's profile).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// mimalloc still hands freed memory back to the OS after a delay ("purging"), so a step that
// takes longer than the delay page-faults its activations in again: on the MNIST CNN step
// `clear_page_erms` was 22% of the time, and turning purging off took the step from 314 ms to
// 234 ms. dlc reuses the same sizes every step, so it keeps the memory (the memory plan bounds
// it). The option is mimalloc v3's `mi_option_purge_delay` (index 15 in its `mi_option_t`;
// the version is pinned by Cargo.lock through libmimalloc-sys 0.1.49).
extern "C" {
    fn mi_option_set(option: i32, value: std::ffi::c_long);
    fn mi_option_get(option: i32) -> std::ffi::c_long;
}
const MI_OPTION_PURGE_DELAY: i32 = 15;

fn keep_freed_memory() {
    // SAFETY: plain setters of the allocator's options, called before any thread starts.
    unsafe {
        mi_option_set(MI_OPTION_PURGE_DELAY, -1);
        debug_assert_eq!(mi_option_get(MI_OPTION_PURGE_DELAY), -1);
    }
}

fn main() {
    dlc::runtime::PROCESS_STARTED.get_or_init(std::time::Instant::now);
    // Rust ignores SIGPIPE, so printing into a closed pipe (`dlc explain x.dl | head`) would
    // panic; a command-line tool should just stop, as `cat` does.
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to its default before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    keep_freed_memory();
    std::process::exit(cli::main());
}
