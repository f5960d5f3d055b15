//! The `dlc` command line: a thin client of the library API.

mod bench;
mod cli;
mod explain;
mod repl;

fn main() {
    std::process::exit(cli::main());
}
