//! The emitted kernel bodies checked against the interpreter without a GPU: every kernel is
//! rendered in the C dialect (the same bodies as the CUDA C, with the grid run as loops),
//! compiled by the system C compiler without floating-point contraction, loaded, and run on the
//! same inputs as the interpreter's kernel for the same plan kernel. Elementwise kernels and
//! groups must agree bit for bit (the bodies do the interpreter's f32 operations in its order);
//! row kernels and sums within a tolerance (their sums run in another order).

use super::reference::{compare, reference, tolerance, Checked, Reference};
use super::Generated;
use dlc_jit::kir;
use dlc_jit::render::{self, Dialect};
use std::path::Path;

/// The shared object with every kernel, built by `cc` in `dir`.
fn build(gens: &[Generated], dir: &Path) -> Result<std::path::PathBuf, String> {
    let mut src = render::math::prelude(Dialect::C);
    for g in gens {
        let (text, _) = render::render_function(&g.kernel, &g.name, Dialect::C).map_err(|e| format!("{}: {e}", g.origin))?;
        src += "\n";
        src += &text;
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // Named by their contents, so that each program's kernels load as their own library.
    let tag = format!("{:016x}", dlc_jit::cuda::ptx_cache::fnv1a(src.as_bytes()));
    let c = dir.join(format!("kernels_{tag}.c"));
    let so = dir.join(format!("kernels_{tag}.so"));
    std::fs::write(&c, src).map_err(|e| format!("{}: {e}", c.display()))?;
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    // No contraction into fused multiply-adds: the bodies call `fmaf` exactly where the CPU
    // kernels fuse, and nowhere else.
    let out = std::process::Command::new(&cc)
        .args(["-O2", "-std=c11", "-ffp-contract=off", "-fno-fast-math", "-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(&c)
        .arg("-lm")
        .output()
        .map_err(|e| format!("running the C compiler `{cc}`: {e}"))?;
    if !out.status.success() {
        return Err(format!("the C compiler rejected {}:\n{}", c.display(), String::from_utf8_lossy(&out.stderr)));
    }
    Ok(so)
}

/// Check every kernel against the interpreter, building in `dir`.
pub fn check(gens: &[Generated], dir: &Path) -> Result<Vec<Checked>, String> {
    let so = build(gens, dir)?;
    let path = std::ffi::CString::new(so.to_string_lossy().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: loading a library we just compiled; it has no initialisers.
    let lib = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if lib.is_null() {
        return Err(format!("cannot load {}", so.display()));
    }
    let mut results = vec![];
    for (n, g) in gens.iter().enumerate() {
        results.push(check_one(lib, g, n)?);
    }
    // SAFETY: no function of the library is used after this.
    unsafe { libc::dlclose(lib) };
    Ok(results)
}

fn check_one(lib: *mut libc::c_void, gen: &Generated, salt: usize) -> Result<Checked, String> {
    let Reference { mut params, want } = reference(gen, salt)?;
    let mut ptrs: Vec<*mut libc::c_void> = params.iter_mut().map(|b| b.as_mut_ptr() as *mut libc::c_void).collect();
    let sym = std::ffi::CString::new(gen.name.as_str()).map_err(|e| e.to_string())?;
    // SAFETY: the symbol is `void NAME(void **)`, as the C dialect renders every kernel, and each
    // pointer covers its parameter's length in its storage type.
    unsafe {
        let f = libc::dlsym(lib, sym.as_ptr());
        if f.is_null() {
            return Err(format!("{}: no symbol {}", gen.origin, gen.name));
        }
        let f: extern "C" fn(*mut *mut libc::c_void) = std::mem::transmute(f);
        f(ptrs.as_mut_ptr());
    }
    // Elementwise bodies do the interpreter's operations in its order: equal bits.
    let exact = matches!(gen.kernel, kir::Kernel::Elementwise(_) | kir::Kernel::Group(_));
    Ok(compare(gen, &want, &params, exact, tolerance))
}
