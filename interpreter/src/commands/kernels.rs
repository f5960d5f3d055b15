//! `dlc kernels FILE`: the program's generated kernels in the kernel IR, their CUDA C or C, and
//! the checks that need no GPU (see dlc::kernels).

use clap::ValueEnum;
use dlc::kernels::reference::Checked;
use dlc::kernels::{c_check, collect, cuda_check, Generated};
use dlc_jit::render::{self, Dialect};
use serde::Serialize;
use serde_json::json;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Emit {
    Cuda,
    C,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Check {
    /// As C, compiled by the system C compiler, against the interpreter (no GPU needed).
    C,
    /// Through NVRTC and ptxas for sm_80 and sm_90, failing on errors and spills (no GPU needed).
    Cuda,
    /// Launched on GPU 0, against the interpreter.
    Gpu,
    /// The CUDA C compiled for the CPU with an emulation of blocks, threads, barriers and warp
    /// shuffles, against the interpreter (no GPU needed; for small programs).
    Emu,
}

fn dialect(e: Emit) -> Dialect {
    match e {
        Emit::Cuda => Dialect::Cuda,
        Emit::C => Dialect::C,
    }
}

pub fn main(file: &Path, emit: Option<Emit>, checks: &[Check], out: Option<PathBuf>, as_json: bool) -> i32 {
    let (mut p, root) = match crate::session::load_quietly(file, "no kernels to generate") {
        Ok(loaded) => loaded,
        Err(status) => return status,
    };
    let (gens, skipped) = collect(&mut p, &root);
    for s in &skipped {
        eprintln!("note: not lowered to the kernel IR: {s}");
    }
    if let Some(e) = emit {
        return print_sources(&gens, dialect(e));
    }
    // Without `--out` the sources and objects go to a temporary directory, removed at the end.
    let temporary = out.is_none();
    let dir = out.unwrap_or_else(|| std::env::temp_dir().join(format!("dlc-kernels-{}", std::process::id())));
    let mut report = Report {
        file: file.display().to_string(),
        kernels: gens
            .iter()
            .map(|g| Entry { name: g.name.clone(), origin: g.origin.clone(), kind: g.kernel.kind(), params: g.kernel.params().len() })
            .collect(),
        not_lowered: skipped,
        ..Default::default()
    };
    let mut failed = false;
    // The checks that run here, on the CPU: each against the interpreter's results.
    type LocalCheck = fn(&[Generated], &Path) -> Result<Vec<dlc::kernels::reference::Checked>, String>;
    let local: [(Check, &str, &str, LocalCheck); 2] =
        [(Check::C, "c", "the C check", c_check::check), (Check::Emu, "emu", "the emulated CUDA check", dlc::kernels::emu_check::check)];
    for (check, tag, what, run) in local {
        if !checks.contains(&check) {
            continue;
        }
        match run(&gens, &dir.join(tag)) {
            Ok(results) => {
                failed |= results.iter().any(|r| !r.ok);
                match check {
                    Check::C => report.c_check = Some(results),
                    _ => report.emu_check = Some(results),
                }
            }
            Err(e) => {
                eprintln!("error: {what} could not run: {e}");
                return 1;
            }
        }
    }
    if checks.contains(&Check::Gpu) {
        match dlc::kernels::gpu_check::check(&gens) {
            Ok((results, how, gpu)) => {
                failed |= results.iter().any(|r| !r.ok);
                let module = if how == dlc_jit::cuda::launch::Compiled::Cache { "from the kernel cache" } else { "compiled by NVRTC" };
                report.gpu_check = Some(GpuCheck { gpu, module, kernels: results });
            }
            Err(e) => {
                eprintln!("error: the GPU check could not run: {e}");
                return 1;
            }
        }
    }
    if checks.contains(&Check::Cuda) {
        match cuda_check::check(&gens, &dir.join("cuda")) {
            Ok(results) => {
                failed |= results.iter().any(|a| a.spill_stores + a.spill_loads > 0);
                let version = cuda_check::nvrtc_version().map(|(a, b)| format!("{a}.{b}")).unwrap_or_default();
                report.cuda_check = Some(CudaCheck { nvrtc: version, kernels: results });
            }
            Err(e) => {
                eprintln!("error: the CUDA check could not run: {e}");
                return 1;
            }
        }
    }
    if as_json {
        println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
    } else {
        print_text(&gens, &report);
    }
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
    i32::from(failed)
}

fn print_sources(gens: &[Generated], d: Dialect) -> i32 {
    print!("{}", render::math::prelude(d));
    for g in gens {
        match render::render_function(&g.kernel, &g.name, d) {
            Ok((text, launch)) => {
                let shape = if d == Dialect::Cuda {
                    format!(", launch <<<{}, {}, {}>>>", launch.grid, launch.block, launch.shared_bytes)
                } else {
                    String::new()
                };
                println!("\n// {}: {} kernel{shape}\n{text}", g.origin, g.kernel.kind());
            }
            Err(e) => {
                eprintln!("error: {}: {e}", g.origin);
                return 1;
            }
        }
    }
    0
}

/// One kernel whose outputs differ from the interpreter's: by how much, and whether that fails.
fn print_difference(r: &Checked) {
    println!(
        "  {} {}: {} of {} elements differ, max abs {:.2e}, max rel {:.2e}{}",
        r.name,
        r.kind,
        r.differing,
        r.elements,
        r.max_abs,
        r.max_rel,
        if r.ok { "" } else { "  FAILED" }
    );
}

fn print_text(gens: &[Generated], report: &Report) {
    println!("{} generated kernels", gens.len());
    for g in gens {
        println!("  {:<40} {:<12} {}", g.name, g.kernel.kind(), g.origin);
    }
    let worst = |rs: &[Checked]| rs.iter().map(|r| r.max_rel).fold(0.0, f64::max);
    if let Some(rs) = &report.emu_check {
        let bad: Vec<_> = rs.iter().filter(|r| !r.ok).collect();
        println!(
            "CUDA C emulated on the CPU: {} of {} kernels agree with the interpreter, largest relative difference {:.2e}",
            rs.len() - bad.len(),
            rs.len(),
            worst(rs)
        );
        bad.into_iter().for_each(print_difference);
    }
    if let Some(rs) = &report.c_check {
        let bad = rs.iter().filter(|r| !r.ok).count();
        let exact = rs.iter().filter(|r| r.differing == 0).count();
        println!("C check against the interpreter: {} of {} kernels agree ({exact} bit for bit)", rs.len() - bad, rs.len());
        rs.iter().filter(|r| r.differing != 0).for_each(print_difference);
    }
    if let Some(g) = &report.gpu_check {
        let rs = &g.kernels;
        let bad = rs.iter().filter(|r| !r.ok).count();
        println!(
            "GPU check on {} ({}): {} of {} kernels agree with the interpreter, largest relative difference {:.2e}",
            g.gpu,
            g.module,
            rs.len() - bad,
            rs.len(),
            worst(rs)
        );
        rs.iter().filter(|r| !r.ok).for_each(print_difference);
    }
    if let Some(c) = &report.cuda_check {
        let spilled: Vec<_> = c.kernels.iter().filter(|k| k.spill_stores + k.spill_loads > 0).collect();
        let max_regs = c.kernels.iter().map(|k| k.registers).max().unwrap_or(0);
        println!(
            "CUDA check (NVRTC {}, ptxas for {}): {} kernel builds, at most {max_regs} registers, {} with spills",
            c.nvrtc,
            cuda_check::ARCHS.map(|a| a.1).join(" and "),
            c.kernels.len(),
            spilled.len()
        );
        for k in spilled {
            println!(
                "  {} on {}: {} bytes spill stores, {} bytes spill loads  FAILED",
                json!(k.name),
                json!(k.arch),
                k.spill_stores,
                k.spill_loads
            );
        }
    }
}

/// What `dlc kernels` reports (`--json` prints it).
#[derive(Serialize, Default)]
struct Report {
    file: String,
    kernels: Vec<Entry>,
    not_lowered: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    c_check: Option<Vec<Checked>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    emu_check: Option<Vec<Checked>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu_check: Option<GpuCheck>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cuda_check: Option<CudaCheck>,
}

#[derive(Serialize)]
struct Entry {
    name: String,
    origin: String,
    kind: &'static str,
    params: usize,
}

#[derive(Serialize)]
struct GpuCheck {
    gpu: String,
    module: &'static str,
    kernels: Vec<Checked>,
}

#[derive(Serialize)]
struct CudaCheck {
    nvrtc: String,
    kernels: Vec<cuda_check::Assembled>,
}
