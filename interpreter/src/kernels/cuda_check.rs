//! The emitted CUDA C checked with NVIDIA's own compilers, on a machine without a GPU: each
//! program's kernels, in one translation unit, compiled by NVRTC (through cudarc, the library
//! the GPU backend compiles with at run time) to PTX for each architecture, and the PTX
//! assembled by `ptxas -v`, whose report gives every kernel's registers and spills. A kernel
//! that fails either step, or spills registers to local memory, fails the check.
//!
//! NVRTC is loaded at run time (`libnvrtc.so.12` or `.13` on the library path) and ptxas is
//! found as `$PTXAS` or on `PATH`: `scripts/setup.sh` installs both from the Python package
//! registry into `.cuda/` and `scripts/cuda-env.sh` puts them on the paths.

use super::Generated;
use dlc_jit::render::{self, Dialect};
use std::path::{Path, PathBuf};

/// The GPU architectures every kernel is compiled for: A100 (sm_80) and H100/H200 (sm_90).
pub const ARCHS: [(&str, &str); 2] = [("compute_80", "sm_80"), ("compute_90", "sm_90")];

/// What ptxas reported for one kernel on one architecture.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Assembled {
    pub name: String,
    pub arch: &'static str,
    pub registers: usize,
    pub spill_stores: usize,
    pub spill_loads: usize,
    pub stack_bytes: usize,
}

/// Whether NVRTC can be loaded, and which version it is.
pub fn nvrtc_version() -> Result<(i32, i32), String> {
    // SAFETY: only tries to open the library by its usual names.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(
            "NVRTC (libnvrtc.so) was not found on the library path: run `bash scripts/setup.sh`, then `source scripts/cuda-env.sh`".into(),
        );
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is present; the call writes two ints.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }.result().map_err(|e| format!("NVRTC: {e:?}"))?;
    Ok((major, minor))
}

/// The ptxas to run.
pub fn ptxas() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("PTXAS") {
        return Ok(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|d| d.join("ptxas")).find(|p| p.is_file()).ok_or_else(|| {
        "ptxas was not found (set PTXAS or put it on PATH): run `bash scripts/setup.sh`, then `source scripts/cuda-env.sh`".into()
    })
}

/// The translation unit of `gens`: the CUDA prelude once, then every kernel.
pub fn translation_unit<'a>(gens: impl IntoIterator<Item = &'a Generated>) -> Result<String, String> {
    let named: Vec<(&str, &dlc_jit::kir::Kernel)> = gens.into_iter().map(|g| (g.name.as_str(), &g.kernel)).collect();
    render::translation_unit(&named, Dialect::Cuda).map(|(src, _)| src).map_err(|e| e.to_string())
}

/// Kernels whose CUDA C is the same but for the name (a training step's layers of one shape, the
/// same update for every parameter of a size) are compiled once: the distinct kernels, first of
/// each, and for every kernel the index of its distinct one. Half of a transformer's kernels
/// repeat another's, and ptxas's time grows with the translation unit.
fn distinct(gens: &[Generated]) -> Result<(Vec<&Generated>, Vec<usize>), String> {
    let mut seen = std::collections::HashMap::new();
    let (mut firsts, mut of) = (vec![], vec![]);
    for g in gens {
        let (text, _) = render::render_function(&g.kernel, "k", Dialect::Cuda).map_err(|e| format!("{}: {e}", g.name))?;
        of.push(*seen.entry(text).or_insert_with(|| {
            firsts.push(g);
            firsts.len() - 1
        }));
    }
    Ok((firsts, of))
}

/// Compile and assemble `gens` for every architecture, writing the source and PTX (of the
/// distinct kernels) to `dir`. Every kernel gets its report, a repeated one its first's.
pub fn check(gens: &[Generated], dir: &Path) -> Result<Vec<Assembled>, String> {
    nvrtc_version()?;
    let ptxas = ptxas()?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (firsts, of) = distinct(gens)?;
    let src = translation_unit(firsts.iter().copied())?;
    let cu = dir.join("kernels.cu");
    std::fs::write(&cu, &src).map_err(|e| format!("{}: {e}", cu.display()))?;
    let mut out = vec![];
    for (virt, arch) in ARCHS {
        let opts = dlc_jit::cuda::nvrtc_options::compile_options(virt, Some("kernels.cu".into()));
        let ptx = cudarc::nvrtc::compile_ptx_with_opts(&src, opts).map_err(|e| match e {
            cudarc::nvrtc::CompileError::CompileError { log, .. } => {
                format!("NVRTC rejected {} for {arch}:\n{}", cu.display(), log.to_string_lossy())
            }
            other => format!("NVRTC failed for {arch}: {other:?}"),
        })?;
        let file = dir.join(format!("kernels.{arch}.ptx"));
        std::fs::write(&file, ptx.to_src()).map_err(|e| format!("{}: {e}", file.display()))?;
        let run = std::process::Command::new(&ptxas)
            .arg(format!("-arch={arch}"))
            .arg("-v")
            .arg("-o")
            .arg(dir.join(format!("kernels.{arch}.cubin")))
            .arg(&file)
            .output()
            .map_err(|e| format!("running {}: {e}", ptxas.display()))?;
        let report = String::from_utf8_lossy(&run.stderr).to_string();
        if !run.status.success() {
            return Err(format!("ptxas rejected {} for {arch}:\n{report}", file.display()));
        }
        let assembled = parse_ptxas(&report, arch);
        for (g, first) in gens.iter().zip(&of) {
            let a =
                assembled.iter().find(|a| a.name == firsts[*first].name).ok_or_else(|| format!("ptxas reported nothing for {}", g.name))?;
            out.push(Assembled { name: g.name.clone(), ..a.clone() });
        }
    }
    Ok(out)
}

/// The numbers in a line after each of `keys` (`"Used 24 registers"` → 24 for "Used").
fn number_before(line: &str, word: &str) -> Option<usize> {
    let at = line.find(word)?;
    line[..at].split_whitespace().last()?.parse().ok()
}

/// ptxas's `-v` report: per function, "Compiling entry function 'NAME' for 'sm_90'", then
/// "N bytes stack frame, N bytes spill stores, N bytes spill loads" and "Used N registers".
pub fn parse_ptxas(report: &str, arch: &'static str) -> Vec<Assembled> {
    let mut out: Vec<Assembled> = vec![];
    for line in report.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_string();
            out.push(Assembled { name, arch, registers: 0, spill_stores: 0, spill_loads: 0, stack_bytes: 0 });
        } else if let Some(last) = out.last_mut() {
            if line.contains("spill stores") {
                last.stack_bytes = number_before(line, "bytes stack frame").unwrap_or(0);
                last.spill_stores = number_before(line, "bytes spill stores").unwrap_or(0);
                last.spill_loads = number_before(line, "bytes spill loads").unwrap_or(0);
            }
            if let Some(r) = number_before(line, "registers") {
                last.registers = r;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_the_ptxas_report() {
        let report = "ptxas info    : 0 bytes gmem\nptxas info    : Compiling entry function 'mlp_step_3_rows' for 'sm_90'\nptxas info    : Function properties for mlp_step_3_rows\n    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\nptxas info    : Used 40 registers, used 1 barriers, 384 bytes cmem[0]\nptxas info    : Compiling entry function 'k2' for 'sm_90'\nptxas info    : Function properties for k2\n    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\nptxas info    : Used 12 registers, 380 bytes cmem[0]\n";
        let got = super::parse_ptxas(report, "sm_90");
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].name.as_str(), got[0].registers, got[0].spill_stores, got[0].spill_loads, got[0].stack_bytes),
            ("mlp_step_3_rows", 40, 4, 12, 8)
        );
        assert_eq!((got[1].name.as_str(), got[1].registers, got[1].spill_stores), ("k2", 12, 0));
    }
}
