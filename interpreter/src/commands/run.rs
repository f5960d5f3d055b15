//! `dlc run FILE`: check, run the top-level statements, then each recipe in order on the device
//! chosen for it: `train` trains, `evaluate` and `infer` run from their checkpoints. Under
//! `mpirun` each process is a rank of one data-parallel job.

use crate::reports::runner_summary;
use crate::session::{color, device_field_at, read_error, report, root_of};
use dlc::device::DeviceRequest;
use dlc::runner::DeviceKind;
use dlc::runtime::RuntimeError;
use dlc::train::{TrainOptions, Trainer};
use dlc::Program;
use dlc_language::eval::recipe::RecipeInfo;
use dlc_language::syntax::ast::RecipeKind;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What `--dump` prints instead of running.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Dump {
    Ast,
    Ir,
}

/// How `dlc run` runs.
pub struct Flags {
    pub dump: Option<Dump>,
    pub seed: u64,
    pub set: Vec<String>,
    pub resume: Option<PathBuf>,
    pub metrics: Option<PathBuf>,
    /// Move an earlier run in the checkpoint directory (or metrics file) aside and start over.
    pub overwrite: bool,
    pub fuse: bool,
    pub remat: bool,
    pub jit: bool,
    pub device: Option<DeviceRequest>,
}

/// What a recipe run ended with, besides success.
enum Outcome {
    Done,
    /// Checked but not executed by this version (exit status 2 at the end).
    Skipped(String),
    /// The exit status to end with now.
    Exit(i32),
}

pub fn main(file: &Path, flags: Flags) -> i32 {
    let mut overrides = vec![];
    for s in &flags.set {
        match s.split_once('=') {
            Some((k, v)) if !k.is_empty() => overrides.push((k.trim().to_string(), v.trim().to_string())),
            _ => {
                eprintln!("error: `--set {s}`: expected FIELD=VALUE, like `--set epochs=1`");
                return 1;
            }
        }
    }
    if let Some(Dump::Ast) = flags.dump {
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
    let p = match Program::load_file_with(file, true, flags.seed, mode) {
        Ok(p) => p,
        Err(e) => return read_error(file, e),
    };
    let errors = report(&p);
    if errors > 0 {
        eprintln!("error: could not run `{}`: {errors} error{}", file.display(), if errors == 1 { "" } else { "s" });
        return 1;
    }
    if let Some(Dump::Ir) = flags.dump {
        let g = p.session.graph();
        let roots: Vec<_> = (0..g.len() as u32).map(dlc_language::ir::NodeId).collect();
        print!("{}", dlc_language::ir::print::dump(g, &roots));
    }
    // A rank of an MPI job (`mpirun -n 4 dlc run ...`), or one process.
    let world = match dlc::parallel::World::from_environment() {
        Ok(w) => Rc::new(w),
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    // Paths on the command line are the working directory's (dlc::paths); a resumed run applies
    // the `--set` overrides its checkpoint recorded.
    let resume = flags.resume.as_deref().map(dlc::paths::absolute);
    let sources = p.sources();
    let text = sources.find(&file.display().to_string()).map(|id| sources.get(id).text.as_str()).unwrap_or_default();
    let (overrides, record) = match crate::runs::overrides_and_record(file, text, &overrides, resume.as_deref(), flags.seed) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let code = Run { p, file, flags: &flags, overrides: &overrides, record, world: world.clone(), stop: ctrl_c() }.recipes();
    if code != 0 && code != 130 && world.size() > 1 {
        // The other ranks may be waiting for this one in a collective: end the whole job.
        eprintln!("error: rank {} of {} failed (exit status {code}); ending the job", world.rank(), world.size());
        world.abort(code);
    }
    code
}

/// Ctrl-C stops after the current step and saves a checkpoint; a second one ends at once.
fn ctrl_c() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let _ = ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("\ninterrupt: stopping after this step (Ctrl-C again to quit at once)");
    });
    stop
}

struct Run<'a> {
    p: Program,
    file: &'a Path,
    flags: &'a Flags,
    overrides: &'a [(String, String)],
    record: dlc::train::manifest::RunRecord,
    world: Rc<dlc::parallel::World>,
    stop: Arc<AtomicBool>,
}

impl Run<'_> {
    /// Execute the program's recipes in order; what is checked but not executable yet is
    /// reported (exit status 2), so nothing pretends to have run.
    fn recipes(mut self) -> i32 {
        let recipes = self.p.session.t.recipes.clone();
        if !self.overrides.is_empty() && !recipes.iter().any(|r| r.kind == RecipeKind::Train) {
            eprintln!("error: `--set` overrides recipe fields, but `{}` has no `train` recipe", self.file.display());
            return 1;
        }
        let mut skipped = vec![];
        for mut info in recipes {
            if info.kind == RecipeKind::Train {
                if let Err(e) = dlc::train::apply_overrides(&mut info, self.overrides) {
                    eprintln!("error: {e}");
                    return 1;
                }
            }
            let device = match self.device(&info) {
                Ok(d) => d,
                Err(code) => return code,
            };
            warn_ignored_fields(&info, device.is_gpu());
            let outcome = match info.kind {
                // Rank 0 alone runs `infer` blocks (their outputs are files and printed values).
                RecipeKind::Infer if !self.world.is_root() => Outcome::Done,
                RecipeKind::Infer => self.infer(&info, device),
                RecipeKind::Evaluate => self.evaluate(info, device),
                RecipeKind::Train => self.train(info, device),
            };
            match outcome {
                Outcome::Done => {}
                Outcome::Skipped(s) => skipped.push(s),
                Outcome::Exit(code) => return code,
            }
        }
        if !skipped.is_empty() {
            eprintln!("note: checked but not executed by this version of dlc: {}", skipped.join("; "));
            eprintln!("      nothing else was trained and no checkpoint was written");
            return 2;
        }
        0
    }

    /// The device for a recipe, always said (on the CPU too: a user comparing timings must know).
    fn device(&self, info: &RecipeInfo) -> Result<DeviceKind, i32> {
        match dlc::device::for_recipe(info, self.flags.device) {
            Ok((choice, _)) => {
                if self.world.is_root() {
                    eprintln!("device: {}", choice.reason);
                }
                Ok(choice.device)
            }
            Err(e) => {
                // Point at the recipe's `device` field when it is what asked for the GPU.
                let at = if self.flags.device.is_none() { device_field_at(&self.p, info) } else { None };
                eprintln!("error: {e}{}", at.map(|a| format!("\n  --> {a}")).unwrap_or_default());
                Err(1)
            }
        }
    }

    fn options(&self, device: DeviceKind) -> TrainOptions {
        let mut opts = TrainOptions::new(root_of(self.file), self.flags.seed);
        opts.observer = Some(Box::new(crate::console::Console::new(false)));
        opts.fuse = self.flags.fuse;
        opts.remat = self.flags.remat;
        opts.jit = self.flags.jit;
        opts.world = Some(self.world.clone());
        opts.device = device;
        opts
    }

    fn evaluate(&mut self, info: RecipeInfo, device: DeviceKind) -> Outcome {
        say_paths(self.world.is_root(), &dlc::paths::recipe_paths(&root_of(self.file), &info));
        let opts = self.options(device);
        match Trainer::new(&mut self.p.session, info, opts).and_then(|mut t| t.evaluate_recipe()) {
            Ok(_) => Outcome::Done,
            Err(e) => self.failed("evaluation", "evaluate", e),
        }
    }

    fn infer(&mut self, info: &RecipeInfo, device: DeviceKind) -> Outcome {
        let root = root_of(self.file);
        say_paths(self.world.is_root(), &dlc::paths::recipe_paths(&root, info));
        let opts = self.options(device);
        let ropts = dlc::runner::RunnerOptions::new(opts.seed, opts.fuse, opts.jit);
        let mut runner = match dlc::runner::open(device, &ropts) {
            Ok(r) => r,
            Err(e) => return self.failed("inference", "infer", RuntimeError::Device(e)),
        };
        let session = &mut self.p.session;
        let result = if info.field("generate").is_some() {
            dlc::train::generate::generate(session, info, &root, opts.fuse, runner.as_mut()).map(|s| {
                println!("infer: sample\n{}", s.text);
                eprintln!("infer: {}", s.summary());
            })
        } else {
            dlc::train::infer::run(session, info, &root, opts.fuse, runner.as_mut()).map(|y| match info.field("output") {
                Some(dlc_language::eval::Value::Str(path)) => {
                    println!("infer: wrote {} {:?} to {}", y.dtype, y.shape, dlc::paths::in_program(&root, path).display())
                }
                _ => println!("{}", dlc::runtime::format::format_tensor(&y)),
            })
        };
        if device.is_gpu() {
            eprintln!("device: {}", runner_summary(&runner.report()));
        }
        match result {
            Ok(()) => Outcome::Done,
            Err(e) => self.failed("inference", "infer", e),
        }
    }

    fn train(&mut self, info: RecipeInfo, device: DeviceKind) -> Outcome {
        let mut opts = self.options(device);
        opts.resume = self.flags.resume.as_deref().map(dlc::paths::absolute);
        opts.overwrite = self.flags.overwrite;
        opts.record = self.record.clone();
        opts.tuning_file = true;
        opts.metrics = self.flags.metrics.as_deref().map(dlc::paths::absolute);
        opts.interrupt = Some(self.stop.clone());
        opts.observer = Some(Box::new(crate::console::Console::new(std::io::stderr().is_terminal())));
        let mut checkpoint_dir = None;
        let root_rank = self.world.is_root();
        let result = Trainer::new(&mut self.p.session, info, opts).and_then(|mut t| {
            checkpoint_dir = t.checkpoint_dir();
            let paths = t.paths();
            say_paths(root_rank, &paths);
            let r = t.run();
            // Each rank's runner did the same work; rank 0 says it once.
            if device.is_gpu() && root_rank {
                eprintln!("device: {}", runner_summary(&t.runner_report()));
                if let Some((d, n)) = t.steady_traffic() {
                    let batch = t.batch_shapes().map_or(0, |s| dlc::train::shapes_bytes(&s));
                    eprintln!("device: a steady step ({n} after the first 3): {}", crate::reports::traffic_line(&d, batch));
                }
            }
            r
        });
        let world = &self.world;
        match result {
            Ok(r) if r.already_finished && world.is_root() => {
                println!(
                    "already finished at step {}: the checkpoint has reached the recipe's `steps` or `epochs`; nothing was trained (`--set steps=N` or `--set epochs=N` with more goes on)",
                    r.steps
                );
                Outcome::Done
            }
            Ok(r) if world.is_root() => {
                let ranks = if world.size() > 1 { format!(" on {} ranks", world.size()) } else { String::new() };
                println!("trained {} steps{ranks}; peak memory {:.0} MiB", r.steps, crate::reports::peak_rss_mb());
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
                Outcome::Done
            }
            Ok(_) => Outcome::Done,
            Err(RuntimeError::Interrupted) => {
                if world.is_root() {
                    eprint!("{}", crate::runs::interrupted(checkpoint_dir.as_deref(), world.size()));
                }
                Outcome::Exit(130)
            }
            Err(RuntimeError::RunExists(path)) => {
                if world.is_root() {
                    eprint!("{}", crate::runs::run_exists(&path, world.size()));
                }
                Outcome::Exit(1)
            }
            Err(e) => self.failed("training", "train", e),
        }
    }

    /// A recipe that failed: said by the kind of error.
    fn failed(&self, what: &str, keyword: &str, e: RuntimeError) -> Outcome {
        match e {
            RuntimeError::NotExecutedYet(msg) => Outcome::Skipped(format!("`{keyword}`: {msg}")),
            RuntimeError::Data { message, span } => {
                // Point at the source expression that named the file, like a compile error.
                let d = dlc_language::Diagnostic::error("E0502", format!("cannot load data: {message}"), span)
                    .with_label("this data source")
                    // A streamed source (images, shards, jsonl, parquet, npy rows) fails mid-run,
                    // after steps and checkpoints: say what holds either way.
                    .with_note("the run stopped here: checkpoints written before it are as they were, and none was written after it");
                eprint!("{}", dlc::render::render(&d, self.p.sources(), color()));
                Outcome::Exit(1)
            }
            other => {
                eprintln!("error: {what} failed: {other}");
                Outcome::Exit(1)
            }
        }
    }
}

/// Say each path a recipe reads or writes, resolved (dlc::paths), before it runs (rank 0).
fn say_paths(root_rank: bool, paths: &[(&str, PathBuf)]) {
    if root_rank {
        for (role, path) in paths {
            eprintln!("{role}: {}", path.display());
        }
    }
}

/// Say which recipe fields this build accepts but does not act on, before the recipe runs.
fn warn_ignored_fields(info: &RecipeInfo, on_gpu: bool) {
    let ignored = dlc::train::ignored_fields(info, on_gpu);
    if !ignored.is_empty() {
        let shown: Vec<String> = ignored.iter().map(|f| format!("`{f}`")).collect();
        eprintln!(
            "warning: this `{}` does not act on {}: the CPU computes products in f32, bf16 or f16 (tf32 runs as f32; a GPU acts on it)",
            info.kind.keyword(),
            shown.join(", ")
        );
    }
}
