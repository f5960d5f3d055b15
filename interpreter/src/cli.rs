//! The command line's arguments, and which command each runs. Parsing only: every command is
//! its own module under `commands/`, over the shared `session` and `reports`.

use crate::commands;
use clap::{Parser, Subcommand};
use dlc::device::DeviceRequest;
use std::path::PathBuf;

const EXAMPLES: &str = "\
Examples:
  dlc run examples/mnist_mlp.dl      train it (progress, metrics, checkpoints), then evaluate
  dlc run examples/iris.dl --set epochs=1 --set optimizer.lr=0.01
  dlc check examples/mnist_mlp.dl    type-check shapes and dtypes; summarise models
  dlc check --json bad.dl            diagnostics as JSON, for editors and tools
  dlc fmt examples stdlib            rewrite every .dl file there in DL's one layout
  dlc plot runs/mnist                draw the run's loss, learning rate and metrics into a PNG
  dlc run examples/gelu.dl --dump=ir print the graph IR the program lowers to
  dlc repl                           interactive session (:help inside)

Environment:
  DLC_EMULATE_GPU=1    run the GPU path on an emulated GPU built for the CPU with $CXX (tests)
  DLC_AUTOTUNE=0       do not time native code against the interpreter for large fused regions
  DLC_CONV_LAYOUT=nchw|channels_last
                       convolutions' layout (default: channels-last for bf16/f16 on a GPU)
  DLC_TUNE_CACHE=0     neither read nor write the tuning file (tune.json in the cache directory)
  DLC_NATIVE_ROWS=0    never run row kernels (softmax, layer norm) through native code
  DLC_NO_AVX512=1      use the AVX2/FMA elementwise kernels on a CPU with AVX-512
  DLC_GEMM=KERNEL      run every matrix product on one kernel (avx2, avx512 or onednn) instead of
                       the one measured fastest for its shape on this machine
  DLC_CONV=KERNEL      run every convolution on im2col + products or on oneDNN (im2col, onednn)
                       instead of the one measured fastest for its shape on this machine
  DLC_ONEDNN=0         do not load oneDNN (libdnnl.so.2) for products and convolutions
  DLC_STEP_ON_POOL=0   run a CPU step's kernels on the calling thread instead of on one of the
                       kernels' worker threads (each parallel kernel then wakes the caller)
  DLC_SPIN_US=N        how long the other kernel threads keep looking for work after their last
                       task of a step, in microseconds, before they sleep (default 1000; 0: at once),
                       and the thread waiting for a short step past its expected end
  DLC_ARENA=0          on a GPU, allocate each kernel output on its own instead of at its
                       planned offset in its plan's arena
  DLC_CUDA_GRAPHS=0    on a GPU, issue every step's calls one by one instead of replaying a
                       captured graph of the steps that repeat
  DLC_UPLOAD_AHEAD=0   on a GPU, upload each batch when its step starts instead of on the copy
                       stream while the step before runs
  DLC_DEVICE_COLLECTIVES=0  data parallel on GPUs: average the gradients through the host
                       (MPI) instead of on the device (NCCL)
  DLC_CACHE_DIR=DIR    where compiled GPU kernels and tune.json are kept
                       (default: $XDG_CACHE_HOME/dlc, else ~/.cache/dlc)
  DLC_HISTORY=FILE     the REPL's history file (default: ~/.dlc_history)
  RAYON_NUM_THREADS=N  threads for kernels and data (default: all cores; shared between the
                       ranks of an MPI job on one machine)
  CC, CXX, PTXAS       the compilers `dlc kernels --check` and the emulated GPU run
  NO_COLOR=1           diagnostics without colour";

/// `dlc --version`: the workspace's version and the commit it was built from (build.rs).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("DLC_COMMIT"), ")");

/// `--set`'s long help: the fields it can set, from the one list the overrides check against.
fn set_help() -> String {
    let rows: Vec<String> = dlc::train::SETTABLE.iter().map(|(n, what)| format!("  {n:<16} {what}")).collect();
    format!(
        "Override a recipe field of the `train` recipe, repeatable: `--set epochs=1 --set optimizer.lr=3e-4`. \
         The value must be of the field's kind. A schedule keeps the horizon the recipe writes.\n\nFIELD is one of:\n{}",
        rows.join("\n")
    )
}

#[derive(Parser)]
#[command(name = "dlc", version = VERSION, about = "Compiler and runtime for DL, a declarative language for deep-learning training scripts", after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Parse and type-check a file; print diagnostics, or a summary of its models.
    Check {
        /// The `.dl` program to check.
        file: PathBuf,
        /// Print diagnostics (or the summary) as JSON.
        #[arg(long)]
        json: bool,
        /// Check the file N times and report the median and minimum time (a benchmark).
        #[arg(long, value_name = "N")]
        repeat: Option<usize>,
    },
    /// Check a file, then run it: its top-level statements, then each recipe in order (`train`
    /// trains with a progress bar, metrics and checkpoints; `evaluate` and `infer` run a trained
    /// model).
    Run {
        /// The `.dl` program to run.
        file: PathBuf,
        /// Print an intermediate form: the syntax tree or the graph IR.
        #[arg(long, value_enum)]
        dump: Option<commands::run::Dump>,
        /// Seed for parameter initialisation (random tensors take their own `seed:`).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Override a `train` recipe field (repeatable): epochs, steps, accumulate,
        /// clip_grad_norm, precision, optimizer.FIELD, schedule.FIELD, parallel.FIELD.
        #[arg(long = "set", value_name = "FIELD=VALUE", long_help = set_help())]
        set: Vec<String>,
        /// Continue training from a checkpoint directory written by `checkpoint "DIR" every ...`.
        #[arg(long, value_name = "DIR")]
        resume: Option<PathBuf>,
        /// Append training metrics as JSON lines to FILE, with TensorBoard events beside it
        /// (default: metrics.jsonl in the checkpoint directory).
        #[arg(long, value_name = "FILE")]
        metrics: Option<PathBuf>,
        /// Start over when the checkpoint directory (or metrics file) holds an earlier run: it is
        /// moved aside to NAME.old-N, not deleted. Without it such a run is refused.
        #[arg(long)]
        overwrite: bool,
        /// Run one kernel per op (the eager interpreter) instead of fused kernels; results are equal.
        #[arg(long)]
        no_fuse: bool,
        /// Keep every value backward reads instead of recomputing cheap ones when that lowers
        /// the step's peak memory (faster, more memory); results are equal.
        #[arg(long)]
        no_remat: bool,
        /// Compile fused kernels to native code (AVX-512 where the CPU has it, else Cranelift); results are equal.
        #[arg(long)]
        jit: bool,
        /// Run on this device, whatever the recipes say: `auto` (the GPU when there is one that
        /// this build can use, else the CPU), `cpu` or `cuda`.
        #[arg(long, value_parser = dlc::device::device_flag())]
        device: Option<DeviceRequest>,
    },
    /// Show what the compiler did to each recipe and printed value, and why: fusion regions,
    /// kernel counts, source lines.
    Explain {
        /// The `.dl` program to explain.
        file: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Instead of the report, print each training step's IR (and its evaluations') after
        /// this pass.
        #[arg(long, value_enum)]
        dump: Option<commands::explain::DumpPass>,
        /// Also estimate each step on this GPU from its published bandwidth and peak
        /// arithmetic, beside PyTorch eager's kernel sequence (no GPU needed): h100, h200, a100,
        /// l4, rtx8000.
        #[arg(long)]
        gpu: Option<String>,
    },
    /// Time training steps (or an `infer` block) after a warm-up: samples/s, step times,
    /// compile time, peak memory.
    Bench {
        /// The `.dl` program whose training (or `infer` block) to time.
        file: PathBuf,
        /// Timed steps (or inference runs).
        #[arg(long, default_value_t = 20)]
        steps: usize,
        /// Untimed steps first (by default 3 and at least 0.2 s of them; a number given here is
        /// taken exactly).
        #[arg(long)]
        warmup: Option<usize>,
        /// Run one kernel per op (the eager interpreter) for comparison.
        #[arg(long)]
        no_fuse: bool,
        /// Keep every value backward reads (no automatic rematerialisation).
        #[arg(long)]
        no_remat: bool,
        /// Compile fused regions to native code (AVX-512 where the CPU has it, else Cranelift).
        #[arg(long)]
        jit: bool,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// Also time every kernel by kind and print where the step's time goes.
        #[arg(long)]
        profile: bool,
        /// Step on the data's first batch again and again, as a peer script stepping on one
        /// fixed batch does: the step alone, without the feed's work or a fresh batch's cache
        /// misses (`bench/compare.py` times the step rows so on both sides). Training only: an
        /// `infer` block's input is computed once already
        #[arg(long)]
        one_batch: bool,
        /// Time the `train` recipe's data alone: preparation, then two epochs of batches from
        /// the feed's workers with no step (as a DataLoader loop is timed).
        #[arg(long)]
        data: bool,
        /// The `train` recipe (or `infer` block) to time, by name (default: the first).
        #[arg(long)]
        recipe: Option<String>,
        /// Run the timed training steps on this device (default: the recipe's `device`).
        #[arg(long, value_parser = dlc::device::device_flag())]
        device: Option<DeviceRequest>,
    },
    /// List the generated kernels of every training step, evaluation, `infer` block and printed
    /// value in the kernel IR; write them as CUDA C or C; check them (NVRTC and ptxas for
    /// sm_80/sm_90, or as C against the interpreter).
    Kernels {
        /// The `.dl` program whose kernels to list.
        file: PathBuf,
        /// Print every kernel's source in this dialect.
        #[arg(long, value_enum)]
        emit: Option<commands::kernels::Emit>,
        /// Check the kernels: `c` runs them as C against the interpreter; `cuda` compiles them
        /// with NVRTC and assembles them with ptxas for sm_80 and sm_90 (fails on errors and
        /// register spills); `gpu` runs them on GPU 0 against the interpreter. Repeatable.
        #[arg(long, value_enum)]
        check: Vec<commands::kernels::Check>,
        /// Where the checks write their sources, PTX and objects (default: a temporary directory).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Print the results as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Measure autotuning's choices for every `train` recipe ahead of time (native code
    /// against the interpreter for large fused regions; the product and convolution kernel of
    /// each shape) and save them in the tuning file that
    /// later runs read.
    Tune {
        /// The `.dl` program whose `train` recipes to tune.
        file: PathBuf,
    },
    /// Rewrite `.dl` files in DL's one layout (stable, comments and blank lines kept, long
    /// pipelines one stage a line).
    Fmt {
        /// Files, folders (every `.dl` file under them) or `-` (standard input to standard output).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Change nothing: list the files that are not formatted, with their first difference,
        /// and exit with 1 if there are any.
        #[arg(long)]
        check: bool,
    },
    /// Draw a run's training loss, learning rate and every evaluation metric against the step
    /// into a PNG.
    Plot {
        /// A run's checkpoint directory (holding metrics.jsonl) or a metrics file.
        run: PathBuf,
        /// The PNG to write (default: plot.png beside the metrics file).
        #[arg(long, short, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Start an interactive session.
    Repl,
    /// Serve the Language Server Protocol on stdin and stdout (for editors: diagnostics, types
    /// on hover, inlay hints, completion, formatting; docs/editors.md).
    Lsp {
        /// Accepted and ignored: stdio is the only transport (VS Code's client and others add
        /// `--stdio` to the command they are given).
        #[arg(long, hide = true)]
        stdio: bool,
    },
}

/// Parse the arguments and run the command; returns the exit status.
pub fn main() -> i32 {
    let cli = Cli::parse();
    dlc::parallel::world::share_cores_between_local_ranks();
    match cli.cmd {
        Cmd::Check { file, json, repeat: Some(n) } => commands::check::timed(&file, n.max(1), json),
        Cmd::Check { file, json, repeat: None } => commands::check::main(&file, json),
        Cmd::Run { file, dump, seed, set, resume, metrics, overwrite, no_fuse, no_remat, jit, device } => commands::run::main(
            &file,
            commands::run::Flags { dump, seed, set, resume, metrics, overwrite, fuse: !no_fuse, remat: !no_remat, jit, device },
        ),
        Cmd::Explain { file, json, dump, gpu } => commands::explain::main(&file, json, dump, gpu.as_deref()),
        Cmd::Bench { file, data: true, json, recipe, .. } => commands::bench::data::main(&file, recipe.as_deref(), json),
        Cmd::Bench { file, steps, warmup, no_fuse, no_remat, jit, json, profile, one_batch, recipe, device, .. } => commands::bench::main(
            &file,
            commands::bench::Options {
                steps,
                warmup: warmup.unwrap_or(3),
                warmup_min_s: if warmup.is_some() { 0.0 } else { commands::bench::WARMUP_MIN_S },
                fuse: !no_fuse,
                remat: !no_remat,
                jit,
                json,
                profile,
                one_batch,
                recipe,
                device,
            },
        ),
        Cmd::Kernels { file, emit, check, out, json } => commands::kernels::main(&file, emit, &check, out, json),
        Cmd::Tune { file } => commands::tune::main(&file),
        Cmd::Fmt { paths, check } => commands::fmt::main(&paths, check),
        Cmd::Plot { run, out } => commands::plot::main(&run, out.as_deref()),
        Cmd::Repl => commands::repl::run(),
        Cmd::Lsp { .. } => commands::lsp::main(),
    }
}
