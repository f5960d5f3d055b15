//! Subcommands: check, run, repl.

use clap::{Parser, Subcommand, ValueEnum};
use dlc::render::{render, to_json};
use dlc::Program;
use std::io::IsTerminal;
use std::path::PathBuf;

const EXAMPLES: &str = "\
Examples:
  dlc run examples/tour.dl           run a program's top-level statements
  dlc check examples/mnist_mlp.dl    type-check shapes and dtypes; summarise models
  dlc check --json bad.dl            diagnostics as JSON, for editors and tools
  dlc run examples/gelu.dl --dump=ir print the graph IR the program lowers to
  dlc repl                           interactive session (:help inside)";

#[derive(Parser)]
#[command(name = "dlc", version, about = "Compiler and runtime for DL, a declarative language for deep-learning training scripts", after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Parse and type-check a file; print diagnostics, or a summary of its models.
    Check {
        file: PathBuf,
        /// Print diagnostics (or the summary) as JSON.
        #[arg(long)]
        json: bool,
        /// Check the file N times and report the median and minimum time (a benchmark).
        #[arg(long, value_name = "N")]
        repeat: Option<usize>,
    },
    /// Check a file, then run its top-level statements.
    Run {
        file: PathBuf,
        /// Print an intermediate form: the syntax tree or the graph IR.
        #[arg(long, value_enum)]
        dump: Option<Dump>,
        /// Seed for parameter initialisation (random tensors take their own `seed:`).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Override a recipe field: `--set epochs=1 --set optimizer.lr=3e-4`.
        #[arg(long = "set", value_name = "FIELD=VALUE")]
        set: Vec<String>,
        /// Continue training from a checkpoint directory written by `checkpoint "DIR" every ...`.
        #[arg(long, value_name = "DIR")]
        resume: Option<PathBuf>,
        /// Append training metrics as JSON lines to FILE (default: metrics.jsonl in the checkpoint directory).
        #[arg(long, value_name = "FILE")]
        metrics: Option<PathBuf>,
        /// Run one kernel per op (the eager interpreter) instead of fused kernels; results are equal.
        #[arg(long)]
        no_fuse: bool,
        /// Keep every value backward reads instead of recomputing cheap ones when that lowers
        /// the step's peak memory (faster, more memory); results are equal.
        #[arg(long)]
        no_remat: bool,
        /// Compile fused kernels to native code with Cranelift; results are equal.
        #[arg(long)]
        jit: bool,
        /// Run on this device, whatever the recipes say: `auto` (the GPU when there is one that
        /// this build can use, else the CPU), `cpu` or `cuda`.
        #[arg(long, value_enum)]
        device: Option<DeviceFlag>,
    },
    /// Show what the compiler did to each recipe and printed value, and why: fusion regions,
    /// kernel counts, source lines.
    Explain {
        file: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Instead of the report, print each training step's IR (and its evaluations') after
        /// this pass.
        #[arg(long, value_enum)]
        dump: Option<crate::explain::Pass>,
    },
    /// Time training steps (or an `infer` block) after a warm-up: samples/s, step times,
    /// compile time, peak memory.
    Bench {
        file: PathBuf,
        /// Timed steps (or inference runs).
        #[arg(long, default_value_t = 20)]
        steps: usize,
        /// Untimed steps first.
        #[arg(long, default_value_t = 3)]
        warmup: usize,
        /// Run one kernel per op (the eager interpreter) for comparison.
        #[arg(long)]
        no_fuse: bool,
        /// Keep every value backward reads (no automatic rematerialisation).
        #[arg(long)]
        no_remat: bool,
        /// Compile fused regions to native code with Cranelift.
        #[arg(long)]
        jit: bool,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// Also time every kernel by kind and print where the step's time goes.
        #[arg(long)]
        profile: bool,
        /// The `train` recipe (or `infer` block) to time, by name (default: the first).
        #[arg(long)]
        recipe: Option<String>,
        /// Run the timed training steps on this device (default: the recipe's `device`).
        #[arg(long, value_enum)]
        device: Option<DeviceFlag>,
    },
    /// List the generated kernels of every training step, evaluation, `infer` block and printed
    /// value in the kernel IR; write them as CUDA C or C; check them (NVRTC and ptxas for
    /// sm_80/sm_90, or as C against the interpreter).
    Kernels {
        file: PathBuf,
        /// Print every kernel's source in this dialect.
        #[arg(long, value_enum)]
        emit: Option<crate::kernels_cmd::Emit>,
        /// Check the kernels: `c` runs them as C against the interpreter; `cuda` compiles them
        /// with NVRTC and assembles them with ptxas for sm_80 and sm_90 (fails on errors and
        /// register spills); `gpu` runs them on GPU 0 against the interpreter. Repeatable.
        #[arg(long, value_enum)]
        check: Vec<crate::kernels_cmd::Check>,
        /// Where the checks write their sources, PTX and objects (default: a temporary directory).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Print the results as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Measure autotuning's choices for every `train` recipe ahead of time (native code
    /// against the interpreter for large fused regions) and save them in the tuning file that
    /// later runs read.
    Tune { file: PathBuf },
    /// Start an interactive session.
    Repl,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum DeviceFlag {
    Auto,
    Cpu,
    Cuda,
}

impl DeviceFlag {
    pub(crate) fn requested(self) -> dlc::device::Requested {
        match self {
            DeviceFlag::Auto => dlc::device::Requested::Auto,
            DeviceFlag::Cpu => dlc::device::Requested::Cpu,
            DeviceFlag::Cuda => dlc::device::Requested::Cuda,
        }
    }
}

/// `file:line:column` of a recipe's `device` field.
fn device_field_at(p: &Program, info: &dlc_language::eval::recipe::RecipeInfo) -> Option<String> {
    use dlc_language::syntax::ast::RecipeEntry;
    let span = info.recipe.entries.iter().find_map(|e| match e {
        RecipeEntry::Field(f) if f.name.name.as_str() == "device" => Some(f.span),
        _ => None,
    })?;
    let name = p.sources().files.get(span.file.0 as usize).map(|f| f.name.clone())?;
    let (line, col) = p.sources().line_col(span.file, span.start);
    Some(format!("{name}:{line}:{col}"))
}

/// One line on what the device executor did: kernels, what ran on the host, bytes copied.
pub(crate) fn runner_summary(r: &dlc::runner::Report) -> String {
    let host: Vec<String> = r.host_ops.iter().map(|(op, n)| format!("{op} x{n}")).collect();
    format!(
        "{} kernel launches from {} compiled plans ({:.1} s compiling) on {}; on the host: {}; copied {:.1} MB up, {:.1} MB down",
        r.launches,
        r.modules,
        r.compile_s,
        r.device,
        if host.is_empty() { "nothing".into() } else { host.join(", ") },
        r.bytes_up as f64 / 1e6,
        r.bytes_down as f64 / 1e6
    )
}

/// The device for a recipe (`--device` first), probing the machine at most once per process.
pub(crate) fn device_for(
    info: &dlc_language::eval::recipe::RecipeInfo,
    flag: Option<DeviceFlag>,
) -> Result<(dlc::device::Choice, bool), String> {
    static PROBE: std::sync::OnceLock<Result<dlc_jit::cuda::Gpu, String>> = std::sync::OnceLock::new();
    let (requested, explicit) = match flag {
        Some(f) => (f.requested(), true),
        None => dlc::device::requested(info),
    };
    let choice = dlc::device::choose(requested, || PROBE.get_or_init(dlc::device::probe).clone())?;
    Ok((choice, explicit))
}

#[derive(Clone, Copy, ValueEnum)]
enum Dump {
    Ast,
    Ir,
}

pub fn main() -> i32 {
    let cli = Cli::parse();
    dlc::parallel::world::share_cores_between_local_ranks();
    match cli.cmd {
        Cmd::Check { file, json, repeat: Some(n) } => time_check(&file, n.max(1), json),
        Cmd::Check { file, json, repeat: None } => check(&file, json),
        Cmd::Run { file, dump, seed, set, resume, metrics, no_fuse, no_remat, jit, device } => {
            run(&file, dump, seed, &set, RunFlags { resume, metrics, fuse: !no_fuse, remat: !no_remat, jit, device })
        }
        Cmd::Explain { file, json, dump } => crate::explain::main(&file, json, dump),
        Cmd::Bench { file, steps, warmup, no_fuse, no_remat, jit, json, profile, recipe, device } => crate::bench::main(
            &file,
            crate::bench::Options { steps, warmup, fuse: !no_fuse, remat: !no_remat, jit, json, profile, recipe, device },
        ),
        Cmd::Kernels { file, emit, check, out, json } => crate::kernels_cmd::main(&file, emit, &check, out, json),
        Cmd::Tune { file } => crate::bench::tune(&file),
        Cmd::Repl => crate::repl::run(),
    }
}

fn read_error(file: &std::path::Path, e: std::io::Error) -> i32 {
    eprintln!("error: cannot read `{}`: {e}", file.display());
    1
}

/// Read `file` and run its top-level statements quietly (fused), for `explain` and `bench`.
/// On an unreadable file or errors, reports them and returns the exit status; `what` says
/// what could not be done (`nothing to explain`).
pub(crate) fn load_quietly(file: &std::path::Path, what: &str) -> Result<(Program, std::path::PathBuf), i32> {
    let text = std::fs::read_to_string(file).map_err(|e| read_error(file, e))?;
    let root = file.parent().map(|d| d.to_path_buf()).unwrap_or_default();
    // `run_with` checks first and runs nothing when there are errors.
    let p = Program::run_with(&file.display().to_string(), &text, Some(&root), false, 0, dlc::ExecMode::Fused);
    if !p.ok {
        report(&p);
        eprintln!("error: `{}` has errors; {what}", file.display());
        return Err(1);
    }
    Ok((p, root))
}

/// The most diagnostics printed in full. A file that is not DL at all (a data file passed by
/// mistake) can have a hundred thousand; the rest are counted, and `--json` has them all.
const MAX_RENDERED: usize = 200;

pub(crate) fn report(p: &Program) -> usize {
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    for d in p.diagnostics().iter().take(MAX_RENDERED) {
        eprint!("{}", render(d, p.sources(), color));
    }
    let hidden = p.diagnostics().len().saturating_sub(MAX_RENDERED);
    if hidden > 0 {
        eprintln!("... and {hidden} more (`dlc check --json` lists them all)");
    }
    p.diagnostics().iter().filter(|d| d.is_error()).count()
}

fn check(file: &std::path::Path, json: bool) -> i32 {
    let start = std::time::Instant::now();
    let p = match Program::load_file(file, false) {
        Ok(p) => p,
        Err(e) => return read_error(file, e),
    };
    let elapsed = start.elapsed();
    if json {
        let diags: Vec<_> = p.diagnostics().iter().map(|d| to_json(d, p.sources())).collect();
        let out = serde_json::json!({
            "file": file.display().to_string(),
            "ok": p.ok,
            "diagnostics": diags,
            "models": p.models(),
            "check_ms": elapsed.as_secs_f64() * 1e3,
        });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return if p.ok { 0 } else { 1 };
    }
    let errors = report(&p);
    if errors > 0 {
        eprintln!("error: could not check `{}`: {errors} error{}", file.display(), if errors == 1 { "" } else { "s" });
        return 1;
    }
    println!("{}: ok ({:.1} ms)", file.display(), elapsed.as_secs_f64() * 1e3);
    for m in p.models() {
        println!("model {}: {} parameters", m.name, group_digits(m.total));
        for (path, ty) in &m.params {
            println!("  {path:<32} {ty}");
        }
    }
    for line in dlc::api::recipe_lines(&p.session) {
        println!("{line}");
    }
    // The memory each training step will need, planned before anything runs.
    let root = file.parent().map(|d| d.to_path_buf()).unwrap_or_default();
    let mut p = p;
    for (name, r) in crate::explain::step_memory(&mut p, &root) {
        match r {
            Ok((batch, m)) => println!("train `{name}` step for batch {batch}: {}", crate::explain::memory_line(&m)),
            Err(e) => println!("train `{name}`: no memory plan before the run: {e}"),
        }
    }
    0
}

/// `dlc check --repeat N`: parse + check from source text N times, as a user's `dlc check` does
/// (file reading excluded), and report the distribution.
fn time_check(file: &std::path::Path, n: usize, json: bool) -> i32 {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => return read_error(file, e),
    };
    let name = file.display().to_string();
    let mut ms = vec![];
    for _ in 0..n {
        let t0 = std::time::Instant::now();
        let p = Program::check(&name, &text, file.parent());
        ms.push(t0.elapsed().as_secs_f64() * 1e3);
        if !p.ok {
            report(&p);
            return 1;
        }
    }
    let (median, min, max) = crate::bench::stats(ms);
    // Parsing alone, of this file and of the whole standard library (which every check parses).
    let parse_file = median_ms(n, || {
        std::hint::black_box(dlc_language::syntax::parse(dlc_language::FileId(0), &text));
    });
    let parse_std = median_ms(n, || {
        for (_, src) in dlc_language::stdlib::MODULES {
            std::hint::black_box(dlc_language::syntax::parse(dlc_language::FileId(0), src));
        }
    });
    if json {
        println!(
            "{}",
            serde_json::json!({"bench": "check", "file": name, "runs": n, "min_ms": min, "median_ms": median, "max_ms": max,
                "parse_file_median_ms": parse_file, "parse_stdlib_median_ms": parse_std})
        );
    } else {
        println!("{name}: check {n} runs: median {median:.2} ms, min {min:.2} ms, max {max:.2} ms");
        println!("{name}: parse median {:.1} us; the whole stdlib: parse median {:.1} us", parse_file * 1e3, parse_std * 1e3);
    }
    0
}

/// The median of `n` timed runs of `f`, in milliseconds.
fn median_ms(n: usize, mut f: impl FnMut()) -> f64 {
    let ms: Vec<f64> = (0..n)
        .map(|_| {
            let t0 = std::time::Instant::now();
            f();
            t0.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    crate::bench::stats(ms).0
}

/// How `dlc run` runs.
struct RunFlags {
    resume: Option<PathBuf>,
    metrics: Option<PathBuf>,
    fuse: bool,
    remat: bool,
    jit: bool,
    device: Option<DeviceFlag>,
}

fn run(file: &std::path::Path, dump: Option<Dump>, seed: u64, set: &[String], flags: RunFlags) -> i32 {
    let mut overrides = vec![];
    for s in set {
        match s.split_once('=') {
            Some((k, v)) if !k.is_empty() => overrides.push((k.trim().to_string(), v.trim().to_string())),
            _ => {
                eprintln!("error: `--set {s}`: expected FIELD=VALUE, like `--set epochs=1`");
                return 1;
            }
        }
    }
    if let Some(Dump::Ast) = dump {
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => return read_error(file, e),
        };
        let (prog, _) = dlc_language::syntax::parse(dlc_language::FileId(0), &text);
        println!("{prog:#?}");
        return 0;
    }
    let mode = match (flags.fuse, flags.jit) {
        (false, _) => dlc::ExecMode::Eager,
        (true, false) => dlc::ExecMode::Fused,
        (true, true) => dlc::ExecMode::FusedJit,
    };
    let p = match Program::load_file_with(file, true, seed, mode) {
        Ok(p) => p,
        Err(e) => return read_error(file, e),
    };
    let errors = report(&p);
    if errors > 0 {
        eprintln!("error: could not run `{}`: {errors} error{}", file.display(), if errors == 1 { "" } else { "s" });
        return 1;
    }
    if let Some(Dump::Ir) = dump {
        let g = p.session.graph();
        let roots: Vec<_> = (0..g.len() as u32).map(dlc_language::ir::NodeId).collect();
        print!("{}", dlc_language::ir::print::dump(g, &roots));
    }
    run_recipes(p, file, seed, &overrides, flags)
}

/// Execute the program's recipes in order: `train` recipes train; the rest are reported as not
/// executable yet (exit status 2), so nothing pretends to have run.
fn run_recipes(p: Program, file: &std::path::Path, seed: u64, overrides: &[(String, String)], flags: RunFlags) -> i32 {
    // A rank of an MPI job (`mpirun -n 4 dlc run ...`), or one process.
    let world = match dlc::parallel::World::from_environment() {
        Ok(w) => std::rc::Rc::new(w),
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    let code = run_recipes_as(p, file, seed, overrides, flags, &world);
    if code != 0 && code != 130 && world.size() > 1 {
        // The other ranks may be waiting for this one in a collective: end the whole job.
        eprintln!("error: rank {} of {} failed (exit status {code}); ending the job", world.rank(), world.size());
        world.abort(code);
    }
    code
}

fn run_recipes_as(
    mut p: Program,
    file: &std::path::Path,
    seed: u64,
    overrides: &[(String, String)],
    flags: RunFlags,
    world: &std::rc::Rc<dlc::parallel::World>,
) -> i32 {
    let RunFlags { resume, metrics, fuse, remat, jit, device } = flags;
    use dlc_language::syntax::ast::RecipeKind;
    let root = file.parent().map(|d| d.to_path_buf()).unwrap_or_default();
    let recipes = p.session.t.recipes.clone();
    let mut skipped = vec![];
    // Ctrl-C stops after the current step and saves a checkpoint; a second one ends at once.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let _ = ctrlc::set_handler(move || {
        if flag.swap(true, std::sync::atomic::Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("\ninterrupt: stopping after this step (Ctrl-C again to quit at once)");
    });
    if !overrides.is_empty() && !recipes.iter().any(|r| r.kind == RecipeKind::Train) {
        eprintln!("error: `--set` overrides recipe fields, but `{}` has no `train` recipe", file.display());
        return 1;
    }
    for mut info in recipes {
        if info.kind == RecipeKind::Train {
            if let Err(e) = dlc::train::apply_overrides(&mut info, overrides) {
                eprintln!("error: {e}");
                return 1;
            }
        }
        warn_ignored_fields(&info);
        let on_gpu = match device_for(&info, device) {
            Ok((choice, explicit)) => {
                // Said when asked for, or when a GPU was found.
                if (explicit || choice.gpu.is_some()) && world.is_root() {
                    eprintln!("device: {}", choice.reason);
                }
                let gpu = choice.device == "cuda";
                if gpu && info.kind == RecipeKind::Infer {
                    eprintln!("device: `infer` recipes run on the CPU in this build (training and evaluation run on the GPU)");
                }
                gpu
            }
            Err(e) => {
                // Point at the recipe's `device` field when it is what asked for the GPU.
                let at = if device.is_none() { device_field_at(&p, &info) } else { None };
                eprintln!("error: {e}{}", at.map(|a| format!("\n  --> {a}")).unwrap_or_default());
                return 1;
            }
        };
        if info.kind == RecipeKind::Infer && !world.is_root() {
            // Rank 0 alone runs `infer` blocks (their outputs are files and printed values).
            continue;
        }
        if info.kind == RecipeKind::Evaluate {
            let mut opts = dlc::train::TrainOptions::new(root.clone(), seed);
            opts.echo = true;
            opts.world = Some(world.clone());
            if on_gpu {
                opts.target = dlc::runner::gpu_target();
            }
            match dlc::train::Trainer::new(&mut p.session, info, opts).and_then(|mut t| t.evaluate_recipe()) {
                Ok(_) => continue,
                Err(e) => {
                    eprintln!("error: evaluation failed: {e}");
                    return 1;
                }
            }
        }
        if info.kind == RecipeKind::Infer && info.field("generate").is_some() {
            match dlc::train::infer::generate(&mut p.session, &info, &root) {
                Ok(text) => {
                    println!("infer: sample\n{text}");
                    continue;
                }
                Err(e) => {
                    eprintln!("error: inference failed: {e}");
                    return 1;
                }
            }
        }
        if info.kind == RecipeKind::Infer {
            match dlc::train::infer::run(&mut p.session, &info, &root) {
                Ok(y) => {
                    match info.field("output") {
                        Some(dlc_language::eval::Value::Str(path)) => println!("infer: wrote {} {:?} to {path}", y.dtype, y.shape),
                        _ => println!("{}", dlc::runtime::format::format_tensor(&y)),
                    }
                    continue;
                }
                Err(e) => {
                    eprintln!("error: inference failed: {e}");
                    return 1;
                }
            }
        }
        if info.kind != RecipeKind::Train {
            skipped.push(format!("`{}` (not executed yet)", info.kind.keyword()));
            continue;
        }
        let mut opts = dlc::train::TrainOptions::new(root.clone(), seed);
        opts.echo = true;
        opts.resume = resume.clone();
        opts.fuse = fuse;
        opts.remat = remat;
        opts.jit = jit;
        opts.tuning_file = true;
        opts.metrics = metrics.clone();
        opts.interrupt = Some(stop.clone());
        opts.progress = std::io::stderr().is_terminal();
        opts.world = Some(world.clone());
        if on_gpu {
            opts.target = dlc::runner::gpu_target();
        }
        let result = dlc::train::Trainer::new(&mut p.session, info, opts).and_then(|mut t| {
            let r = t.run();
            if on_gpu {
                eprintln!("device: {}", runner_summary(&t.runner_report()));
            }
            r
        });
        match result {
            Ok(r) if world.is_root() => {
                let ranks = if world.size() > 1 { format!(" on {} ranks", world.size()) } else { String::new() };
                println!("trained {} steps{ranks}", r.steps);
                if world.size() > 1 {
                    let t = world.traffic();
                    eprintln!(
                        "parallel: {} gradient all-reduces ({:.1} MB, {:.2} s) over {} ranks",
                        t.gradient_allreduces,
                        t.gradient_bytes as f64 / 1e6,
                        t.gradient_s,
                        world.size()
                    );
                }
            }
            Ok(_) => {}
            Err(e) => {
                let msg = e.to_string();
                if msg == dlc::train::INTERRUPTED {
                    if world.is_root() {
                        eprintln!("training interrupted; the last checkpoint (if the recipe names a directory) lets `--resume` continue");
                    }
                    return 130;
                }
                if msg.contains("not executed yet") {
                    skipped.push(format!("`train`: {msg}"));
                } else {
                    if let dlc::runtime::RuntimeError::Data { message, span } = &e {
                        // Point at the source expression that named the file, like a compile error.
                        let d = dlc_language::Diagnostic::error("E0502", format!("cannot load data: {message}"), *span)
                            .with_label("this data source")
                            .with_note("nothing was trained and no checkpoint was touched");
                        let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
                        eprint!("{}", render(&d, p.sources(), color));
                        return 1;
                    }
                    eprintln!("error: training failed: {msg}");
                    return 1;
                }
            }
        }
    }
    if !skipped.is_empty() {
        eprintln!("note: checked but not executed by this version of dlc: {}", skipped.join("; "));
        eprintln!("      nothing else was trained and no checkpoint was written");
        return 2;
    }
    0
}

pub fn group_digits(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Say which recipe fields this build accepts but does not act on, before the recipe runs.
fn warn_ignored_fields(info: &dlc_language::eval::recipe::RecipeInfo) {
    let ignored = dlc::train::ignored_fields(info);
    if !ignored.is_empty() {
        let shown: Vec<String> = ignored.iter().map(|f| format!("`{f}`")).collect();
        eprintln!(
            "warning: this `{}` does not act on {}: this version computes products in f32, bf16 or f16 (tf32 runs as f32)",
            info.kind.keyword(),
            shown.join(", ")
        );
    }
}
