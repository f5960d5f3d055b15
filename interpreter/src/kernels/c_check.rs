//! The emitted kernel bodies checked against the interpreter without a GPU: every kernel is
//! rendered in the C dialect (the same bodies as the CUDA C, with the grid run as loops),
//! compiled by the system C compiler without floating-point contraction, loaded, and run on the
//! same inputs as the interpreter's kernel for the same plan kernel. Elementwise kernels and
//! groups must agree bit for bit (the bodies do the interpreter's f32 operations in its order);
//! row kernels and sums within a tolerance (their sums run in another order).

use super::reference::{compare, reference, tolerance, Checked, Reference};
use super::Generated;
use crate::runner::host_lib::{pointers, Compiler, HostLib};
use dlc_jit::kir;
use dlc_jit::render::{self, Dialect};
use std::path::Path;

/// No contraction into fused multiply-adds: the bodies call `fmaf` exactly where the CPU
/// kernels fuse, and nowhere else.
const C: Compiler = Compiler {
    env: "CC",
    default: "cc",
    what: "C",
    extension: "c",
    before: &["-O2", "-std=c11", "-ffp-contract=off", "-fno-fast-math", "-shared", "-fPIC"],
    after: &["-lm"],
};

/// Check every kernel against the interpreter, building in `dir`.
pub fn check(gens: &[Generated], dir: &Path) -> Result<Vec<Checked>, String> {
    let mut src = render::math::prelude(Dialect::C);
    for g in gens {
        let (text, _) = render::render_function(&g.kernel, &g.name, Dialect::C).map_err(|e| format!("{}: {e}", g.origin))?;
        src += "\n";
        src += &text;
    }
    let lib = HostLib::build(&src, dir, "kernels", &C)?;
    gens.iter().enumerate().map(|(n, g)| check_one(&lib, g, n)).collect()
}

fn check_one(lib: &HostLib, gen: &Generated, salt: usize) -> Result<Checked, String> {
    let Reference { mut params, want } = reference(gen, salt)?;
    let mut ptrs = pointers(&mut params);
    let f = lib.symbol(&gen.name).map_err(|e| format!("{}: {e}", gen.origin))?;
    // SAFETY: the symbol is `void NAME(void **)`, as the C dialect renders every kernel, and each
    // pointer covers its parameter's length in its storage type.
    unsafe {
        let f: extern "C" fn(*mut *mut libc::c_void) = std::mem::transmute(f);
        f(ptrs.as_mut_ptr());
    }
    // Elementwise bodies do the interpreter's operations in its order: equal bits.
    let exact = matches!(gen.kernel, kir::Kernel::Elementwise(_) | kir::Kernel::Group(_));
    Ok(compare(gen, &want, &params, exact, tolerance))
}
