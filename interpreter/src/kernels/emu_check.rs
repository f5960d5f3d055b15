//! The CUDA C itself, run on the CPU: the translation unit NVRTC compiles, compiled instead by
//! the system C++ compiler after a header that emulates what the kernels use of CUDA
//! (emulation.rs), then launched on the same inputs as the interpreter's kernel. The C check
//! (c_check.rs) checks the bodies; this checks what only the CUDA dialect has: grid-stride
//! loops, the group's member ranges, a row kernel's shared-memory slots, barriers and warp-shuffle
//! reductions, and the launch shapes. It runs each kernel with a grid of at most two blocks
//! (every kind walks its index space in grid-stride loops, so any grid computes the same), and is
//! meant for small programs: every barrier switches through all of a block's threads.

use super::reference::{compare, reference, tolerance, Checked, Reference};
use super::Generated;
use crate::runner::emulation::{self, CXX};
use crate::runner::host_lib::{pointers, HostLib};
use std::path::Path;

/// Run every kernel's CUDA C on the CPU against the interpreter, building in `dir`.
pub fn check(gens: &[Generated], dir: &Path) -> Result<Vec<Checked>, String> {
    let named: Vec<(&str, &dlc_jit::kir::Kernel)> = gens.iter().map(|g| (g.name.as_str(), &g.kernel)).collect();
    let (src, launches) = emulation::translation_unit(&named)?;
    let lib = HostLib::build(&src, dir, "kernels_emulated", &CXX)?;
    let mut out = vec![];
    for (n, (g, launch)) in gens.iter().zip(&launches).enumerate() {
        let Reference { mut params, want } = reference(g, n)?;
        let mut ptrs = pointers(&mut params);
        let f = lib.symbol(&format!("emu_{}", g.name)).map_err(|e| format!("{}: {e}", g.origin))?;
        // SAFETY: `emu_NAME` as `emulation::translation_unit` renders it; each pointer covers its
        // parameter in its storage type.
        unsafe {
            let f: emulation::Entry = std::mem::transmute(f);
            f(ptrs.as_mut_ptr(), launch.grid.min(2) as u32, launch.block as u32);
        }
        out.push(compare(g, &want, &params, false, tolerance));
    }
    Ok(out)
}
