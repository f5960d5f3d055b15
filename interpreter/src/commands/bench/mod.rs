//! `dlc bench FILE`: time the first `train` recipe's steps on its real data (or, with no `train`
//! recipe, the first `infer` block's computation on its input) after a warm-up. Reports step
//! times (median, min, max), samples/s, compile time, kernels per step and peak memory; `--json`
//! prints one object, for scripts that compare with the PyTorch peers.

pub mod data;
mod report;

use crate::reports::stats;
use dlc::runner::DeviceKind;
use dlc::train::{apply_overrides, infer, Control, TrainOptions, Trainer};
use dlc::Program;
use dlc_language::syntax::ast::RecipeKind;
use report::{Bench, Detail};
use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;
use std::time::Instant;

/// Warm-up lasts at least this long as well as 3 steps, unless `--warmup` names a number: in a
/// fresh process the first
/// 10-20 ms ran the guide's 1M gelu at half speed in about half the processes on the 2-core VM of
/// stop 39 (no gain from the second thread until the scheduler had spread the pool's threads:
/// medians of 0.48-0.53 ms against 0.24-0.28 in the others, 40 steps each), a start-up
/// transient that a peer timing its variants one after another in one process never sees.
pub const WARMUP_MIN_S: f64 = 0.2;

/// Minor page faults of this process so far: memory the OS handed over for the first time (or
/// again, after it was returned). A step that reuses its buffers takes none.
fn page_faults() -> u64 {
    // SAFETY: getrusage writes into the struct we pass.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut u) == 0 {
            u.ru_minflt as u64
        } else {
            0
        }
    }
}

/// What `dlc bench` was asked for.
pub struct Options {
    pub steps: usize,
    pub warmup: usize,
    /// Warm-up also lasts this long (seconds; 0 when `--warmup` was given).
    pub warmup_min_s: f64,
    pub fuse: bool,
    pub remat: bool,
    pub jit: bool,
    pub json: bool,
    pub profile: bool,
    /// Step on the first batch again and again (`TrainOptions::one_batch`).
    pub one_batch: bool,
    /// The `train` recipe (or `infer` block) to time, by name; the first one when `None`.
    pub recipe: Option<String>,
    /// `--device`: where to run the training steps (the recipe's `device` when `None`).
    pub device: Option<dlc::device::DeviceRequest>,
}

pub fn main(file: &Path, o: Options) -> i32 {
    let Options { fuse, jit, json: as_json, .. } = o;
    let recipe = o.recipe.clone();
    let started = Instant::now();
    let (mut p, root) = match crate::session::load_quietly(file, "nothing to benchmark") {
        Ok(loaded) => loaded,
        Err(status) => return status,
    };
    let recipes = p.session.t.recipes.clone();
    let named = |kind: RecipeKind| {
        recipes.iter().find(|r| r.kind == kind && recipe.as_ref().is_none_or(|want| r.name.as_ref() == Some(want))).cloned()
    };
    let result = if let Some(info) = named(RecipeKind::Train) {
        bench_train(&mut p, info, &root, &o)
    } else if let Some(info) = named(RecipeKind::Infer) {
        if info.field("generate").is_some() {
            bench_generate(&mut p, &info, &root, &o)
        } else {
            bench_infer(&mut p, &info, &root, &o)
        }
    } else if let Some(want) = &recipe {
        let names: Vec<String> = recipes
            .iter()
            .filter(|r| matches!(r.kind, RecipeKind::Train | RecipeKind::Infer))
            .filter_map(|r| r.name.as_ref().map(|n| format!("`{n}`")))
            .collect();
        Err(format!(
            "no `train` recipe or `infer` block named `{want}` in the file{}",
            if names.is_empty() { " (none of them has a name)".to_string() } else { format!("; named ones: {}", names.join(", ")) }
        ))
    } else {
        Err("the file has no `train` recipe and no `infer` block to time".to_string())
    };
    let mut report = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    report.file = file.display().to_string();
    (report.fuse, report.remat, report.jit) = (fuse, o.remat, jit);
    report.threads = rayon::current_num_threads();
    report.peak_rss_mb = (crate::reports::peak_rss_mb() * 10.0).round() / 10.0;
    report.total_s = (started.elapsed().as_secs_f64() * 100.0).round() / 100.0;
    if !report.reports() {
        // Rank 0 reports for the job.
        return 0;
    }
    if as_json {
        println!("{}", serde_json::to_string(&report).unwrap_or_default());
    } else {
        report.print_text();
    }
    0
}

/// A report of these timings, the rest filled in by `main`.
fn timed(
    what: &'static str,
    times: &[f64],
    warmup: usize,
    batch: usize,
    compile_s: f64,
    plan: &dlc_language::passes::fusion::Plan,
    detail: Detail,
) -> Bench {
    let (median, min, max) = stats(times.to_vec());
    Bench {
        what,
        steps: times.len(),
        warmup,
        median_ms: median,
        min_ms: min,
        max_ms: max,
        samples_per_s: batch as f64 / (median / 1e3).max(1e-12),
        compile_ms: compile_s * 1e3,
        kernels: plan.kernel_count(),
        eager_kernels: plan.eager_count(),
        device: DeviceKind::Cpu.name(),
        device_report: None,
        detail,
        file: String::new(),
        fuse: true,
        remat: true,
        jit: false,
        threads: 0,
        peak_rss_mb: 0.0,
        total_s: 0.0,
    }
}

/// A timing run's training options: the command line's compile flags, the tuning file, no
/// checkpoints or metrics (a timing run never touches a run's files).
fn timing_options(root: &Path, o: &Options) -> TrainOptions {
    let mut opts = TrainOptions::new(root.to_path_buf(), 0);
    (opts.fuse, opts.remat, opts.jit, opts.one_batch) = (o.fuse, o.remat, o.jit, o.one_batch);
    opts.tuning_file = true;
    opts.checkpoints = false;
    opts
}

fn bench_train(p: &mut Program, mut info: dlc_language::eval::recipe::RecipeInfo, root: &Path, o: &Options) -> Result<Bench, String> {
    let Options { steps, warmup, warmup_min_s, profile, .. } = *o;
    // Steps enough for any warm-up: the run is stopped once `steps` steps after warm-up are timed.
    let total = warmup + steps + 100_000;
    apply_overrides(&mut info, &[("steps".into(), total.to_string())]).map_err(|e| e.to_string())?;
    // How many steps warm-up took (0 while it lasts): `warmup` and `warmup_min_s`, whichever is longer.
    let warmed: Rc<std::cell::Cell<usize>> = Rc::default();
    let warmed_seen = warmed.clone();
    // Warm-up counts from the first step's end (it reads the data); steps are timed end to end.
    let first_done: std::cell::Cell<Option<Instant>> = Default::default();
    let times: Rc<RefCell<Vec<f64>>> = Rc::default();
    let seen = times.clone();
    // Page faults at the end of each step.
    let faults: Rc<RefCell<Vec<u64>>> = Rc::default();
    let faults_seen = faults.clone();
    // The runner's totals at the end of each step (a GPU's copies, calls and waits).
    let counters: Rc<RefCell<Vec<dlc::runner::Counters>>> = Rc::default();
    let counters_seen = counters.clone();
    // The run's time blocked on the data feed at the end of each step.
    let waits: Rc<RefCell<Vec<f64>>> = Rc::default();
    let waits_seen = waits.clone();
    let mut last = Instant::now();
    let mut opts = timing_options(root, o);
    let choice = dlc::device::for_recipe(&info, o.device).map(|c| c.0)?;
    // Under mpirun, each rank times its steps of the data-parallel job.
    let world = std::rc::Rc::new(dlc::parallel::World::from_environment()?);
    opts.world = Some(world.clone());
    opts.device = choice.device;
    let prof: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, (usize, f64)>>> = Default::default();
    if profile {
        opts.profile = Some(prof.clone());
    }
    // The profile covers the timed steps only: warm-up's first launches carry one-off costs
    // (cuBLAS and cuDNN starting, kernels loaded), which would swamp a step's own.
    let prof_warm = prof.clone();
    opts.on_step = Some(Box::new(move |ev| {
        seen.borrow_mut().push(last.elapsed().as_secs_f64() * 1e3);
        let n = seen.borrow().len();
        let first = first_done.get().unwrap_or_else(Instant::now);
        first_done.set(Some(first));
        let since_first = first.elapsed().as_secs_f64();
        if warmed_seen.get() == 0 && n >= warmup.max(1) && since_first >= warmup_min_s {
            warmed_seen.set(n);
            prof_warm.lock().expect("profile lock").clear();
        }
        faults_seen.borrow_mut().push(page_faults());
        counters_seen.borrow_mut().push(ev.device);
        waits_seen.borrow_mut().push(ev.data_wait_s);
        last = Instant::now();
        if warmed_seen.get() > 0 && n >= warmed_seen.get() + steps {
            Control::Stop
        } else {
            Control::Continue
        }
    }));
    let mut trainer = Trainer::new(&mut p.session, info, opts).map_err(|e| e.to_string())?;
    let shapes = trainer.batch_shapes().ok_or("the batch shapes are only known at run time")?;
    let batch = shapes.first().and_then(|s| s.1.first().copied()).unwrap_or(1);
    let (plan, compile_s) = trainer.compile_step(&shapes).map_err(|e| e.to_string())?;
    trainer.run().map_err(|e| e.to_string())?;
    // The first entry includes reading the data; steps of another batch shape (a last, smaller
    // batch) are not expected inside warm-up + steps.
    let all = times.borrow().clone();
    let warmup = if warmed.get() > 0 { warmed.get() } else { warmup.max(1) };
    let timed_steps: Vec<f64> = all.iter().skip(warmup).copied().collect();
    // Faults per timed step: after warm-up, a step whose buffers are reused takes no new pages.
    let f = faults.borrow().clone();
    let faults_per_step = match (f.get(warmup.max(1) - 1), f.last()) {
        (Some(a), Some(b)) if f.len() > warmup.max(1) => (b - a) as f64 / (f.len() - warmup.max(1)) as f64,
        _ => 0.0,
    };
    let c = counters.borrow().clone();
    let device_per_step = match (c.get(warmup.max(1) - 1), c.last()) {
        (Some(a), Some(b)) if choice.device.is_gpu() && c.len() > warmup.max(1) => Some(b.per_step_since(a, c.len() - warmup.max(1))),
        _ => None,
    };
    let batch_bytes = dlc::train::shapes_bytes(&shapes);
    // The timed steps' wait for data (the workers' batches not ready), per step and as a share.
    let w = waits.borrow().clone();
    let data_wait_s = match (w.get(warmup.max(1) - 1), w.last()) {
        (Some(a), Some(b)) if w.len() > warmup.max(1) => b - a,
        _ => 0.0,
    };
    let mut by_kind: Vec<(String, (usize, f64))> = prof.lock().map(|p| p.clone().into_iter().collect()).unwrap_or_default();
    by_kind.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
    let steps_run = timed_steps.len().max(1) as f64;
    if profile {
        eprintln!("time per step by kernel kind ({} timed steps, each kernel waited for):", timed_steps.len());
        for (k, (n, s)) in &by_kind {
            eprintln!("  {k:<20} {:>8.3} ms  ({:.0} kernels a step)", s * 1e3 / steps_run, *n as f64 / steps_run);
        }
    }
    let detail = Detail::Train(report::Train {
        profile: by_kind
            .iter()
            .map(|(k, (n, s))| report::Profile { kind: k.clone(), ms_per_step: s * 1e3 / steps_run, count_per_step: *n as f64 / steps_run })
            .collect(),
        batch,
        page_faults_per_step: faults_per_step,
        planned_peak_mib: trainer.step_passes(&shapes).map(|(_, m)| crate::reports::Memory::of(m).peak_mib),
        tuning: crate::reports::tuning(trainer.kernels()),
        ranks: world.size(),
        rank: world.rank(),
        allreduce_ms_per_step: world.traffic().gradient_s * 1e3 / all.len().max(1) as f64,
        allreduce_share: world.traffic().gradient_s / (all.iter().sum::<f64>() / 1e3).max(1e-12),
        device_per_step,
        batch_bytes,
        one_batch: o.one_batch,
        data_wait_ms_per_step: data_wait_s * 1e3 / timed_steps.len().max(1) as f64,
        data_wait_share: data_wait_s / (timed_steps.iter().sum::<f64>() / 1e3).max(1e-12),
    });
    let mut report = timed("train", &timed_steps, warmup, batch, compile_s, &plan, detail);
    report.device = choice.device.name();
    report.device_report = choice.device.is_gpu().then(|| trainer.runner_report());
    Ok(report)
}

/// Time an `infer` block as `dlc run` executes it: compiled by `train::infer::compile`, its
/// parameters and input put on a runner on the block's device, then the model's plan run and
/// its output fetched, `warmup + steps` times.
fn bench_infer(p: &mut Program, info: &dlc_language::eval::recipe::RecipeInfo, root: &Path, o: &Options) -> Result<Bench, String> {
    let Options { steps, warmup, warmup_min_s, fuse, jit, .. } = *o;
    let choice = dlc::device::for_recipe(info, o.device).map(|c| c.0)?;
    let compile_started = Instant::now();
    let c = infer::compile(&mut p.session, info, fuse).map_err(|e| e.to_string())?;
    let compile_s = compile_started.elapsed().as_secs_f64();
    let mut runner = dlc::runner::open(choice.device, &dlc::runner::RunnerOptions::new(0, fuse, jit))?;
    let fail = |e: dlc::runtime::RuntimeError| e.to_string();
    infer::load(&p.session, info, root, runner.as_mut()).map_err(fail)?;
    // The input is computed once; each timed run computes the model's output from it.
    infer::bind_input(&p.session, &c, runner.as_mut()).map_err(fail)?;
    let mut times = vec![];
    let mut n = 0;
    // Warm-up: `warmup` runs and `warmup_min_s`, whichever is longer; then `steps` timed.
    let (started, mut runs, mut warmed) = (Instant::now(), 0, None);
    while times.len() < steps {
        if warmed.is_none() && runs >= warmup && started.elapsed().as_secs_f64() >= warmup_min_s {
            warmed = Some(runs);
        }
        let t0 = Instant::now();
        let y = infer::execute(&p.session, &c, runner.as_mut()).map_err(fail)?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        n = y.numel();
        std::hint::black_box(&y);
        if warmed.is_some() {
            times.push(ms);
        } else {
            runs += 1;
        }
    }
    let warmup = warmed.unwrap_or(warmup);
    let input_ty = &p.session.t.graph.inputs[c.input_id as usize].ty;
    let batch = input_ty.shape.first().and_then(|d| d.as_known()).unwrap_or(1) as usize;
    let median = stats(times.clone()).0;
    let detail = Detail::Infer(report::Infer {
        elements: n,
        gb_per_s: 8.0 * n as f64 / (median / 1e3).max(1e-12) / 1e9,
        folded_batch_norms: c.folds.len(),
    });
    let mut report = timed("infer", &times, warmup, batch, compile_s, &c.planned.plan, detail);
    report.device = choice.device.name();
    report.device_report = choice.device.is_gpu().then(|| runner.report());
    Ok(report)
}

/// Time a `generate` block a token at a time (batch 1: samples/s is tokens/s): the full
/// window's sampler, as `dlc run` runs it once the window is full.
fn bench_generate(p: &mut Program, info: &dlc_language::eval::recipe::RecipeInfo, root: &Path, o: &Options) -> Result<Bench, String> {
    let Options { steps, warmup, fuse, jit, .. } = *o;
    let choice = dlc::device::for_recipe(info, o.device).map(|c| c.0)?;
    let mut runner = dlc::runner::open(choice.device, &dlc::runner::RunnerOptions::new(0, fuse, jit))?;
    let (times, compile_s, plan) =
        dlc::train::generate::time_tokens(&mut p.session, info, root, fuse, runner.as_mut(), (warmup, steps)).map_err(|e| e.to_string())?;
    let detail = Detail::Infer(report::Infer { elements: 1, gb_per_s: 0.0, folded_batch_norms: 0 });
    let mut report = timed("generate", &times, warmup, 1, compile_s, &plan, detail);
    report.device = choice.device.name();
    report.device_report = choice.device.is_gpu().then(|| runner.report());
    Ok(report)
}
