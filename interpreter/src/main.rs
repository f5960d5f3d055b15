//! The `dlc` command line: a thin client of the library API.

mod cli;
mod repl;

fn main() {
    std::process::exit(cli::main());
}
