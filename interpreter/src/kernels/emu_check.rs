//! The CUDA C itself, run on the CPU: the translation unit NVRTC compiles, compiled instead by
//! the system C++ compiler after a header that emulates what the kernels use of CUDA (blocks run
//! one after another, each block's threads as OS threads; `__syncthreads` a barrier; shared
//! memory one array per block; `__shfl_down_sync` an exchange through memory between two
//! barriers), then launched on the same inputs as the interpreter's kernel. The C check
//! (c_check.rs) checks the bodies; this checks what only the CUDA dialect has: grid-stride
//! loops, the group's member ranges, a row kernel's shared-memory slots, barriers and warp-shuffle
//! reductions, and the launch shapes. It runs each kernel with a grid of at most two blocks
//! (every kind walks its index space in grid-stride loops, so any grid computes the same), and is
//! meant for small programs: every barrier is a rendezvous of OS threads.

use super::host_lib::{pointers, Compiler, HostLib};
use super::reference::{compare, reference, tolerance, Checked, Reference};
use super::Generated;
use dlc_jit::render::{self, ctype_of, Dialect};
use std::path::Path;

/// What the kernels use of CUDA, for the host.
const EMULATION: &str = r#"
#include <cmath>
#include <cstring>
#include <cstddef>
#include <thread>
#include <barrier>
#include <vector>
#include <functional>
#include <math.h>
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static
struct dlc_dim3 { unsigned int x = 0, y = 0, z = 0; };
struct alignas(16) float4 { float x, y, z, w; };
static dlc_dim3 blockIdx, blockDim, gridDim;
static thread_local dlc_dim3 threadIdx;
static std::barrier<>* dlc_block_barrier = nullptr;
static double dlc_exchange[1024];
// The dynamic shared memory of the running block (48 KiB, the default limit).
float dlc_row_storage[12288];
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline unsigned int __float_as_uint(float f) { unsigned int i; std::memcpy(&i, &f, 4); return i; }
static inline void __syncthreads() { dlc_block_barrier->arrive_and_wait(); }
// Every thread of the block reaches each shuffle (the kernels shuffle in uniform loops): each
// writes its value, all wait, each reads its partner's (its own past the warp's end), all wait.
template <typename T> static inline T __shfl_down_sync(unsigned int, T v, int delta) {
  unsigned int t = threadIdx.x;
  dlc_exchange[t] = (double)v;
  __syncthreads();
  unsigned int lane = t & 31u;
  T r = (lane + delta < 32u && t + delta < blockDim.x) ? (T)dlc_exchange[t + delta] : v;
  __syncthreads();
  return r;
}
static void dlc_launch(unsigned int grid, unsigned int block, const std::function<void()>& kernel) {
  gridDim.x = grid; blockDim.x = block;
  for (unsigned int b = 0; b < grid; b++) {
    blockIdx.x = b;
    std::barrier<> bar(block);
    dlc_block_barrier = &bar;
    std::vector<std::thread> threads;
    for (unsigned int t = 0; t < block; t++) threads.emplace_back([t, &kernel] { threadIdx.x = t; kernel(); });
    for (auto& th : threads) th.join();
  }
}
"#;

/// The host entry of one kernel: `void emu_NAME(void **params, unsigned grid, unsigned block)`.
fn wrapper(g: &Generated) -> String {
    let args: Vec<String> = g
        .kernel
        .params()
        .iter()
        .enumerate()
        .map(|(i, (p, out))| format!("({}{}*)params[{i}]", if *out { "" } else { "const " }, ctype_of(p.ty)))
        .collect();
    format!(
        "extern \"C\" void emu_{n}(void **params, unsigned int grid, unsigned int block) {{ dlc_launch(grid, block, [&] {{ {n}({}); }}); }}\n",
        args.join(", "),
        n = g.name
    )
}

const CXX: Compiler = Compiler {
    env: "CXX",
    default: "c++",
    what: "C++",
    extension: "cpp",
    before: &["-O1", "-std=c++20", "-pthread", "-shared", "-fPIC", "-w"],
    after: &[],
};

/// Run every kernel's CUDA C on the CPU against the interpreter, building in `dir`.
pub fn check(gens: &[Generated], dir: &Path) -> Result<Vec<Checked>, String> {
    let mut src = String::from(EMULATION);
    src += &render::math::prelude(Dialect::Cuda);
    let mut launches = vec![];
    for g in gens {
        let (text, launch) = render::render_function(&g.kernel, &g.name, Dialect::Cuda).map_err(|e| format!("{}: {e}", g.origin))?;
        src += "\n";
        // A row kernel's dynamic shared memory is the emulation's storage.
        src += &text.replace("extern __shared__ float dlc_row[];", "float* dlc_row = dlc_row_storage;");
        src += &wrapper(g);
        launches.push(launch);
    }
    let lib = HostLib::build(&src, dir, "kernels_emulated", &CXX)?;
    let mut out = vec![];
    for (n, (g, launch)) in gens.iter().zip(&launches).enumerate() {
        let Reference { mut params, want } = reference(g, n)?;
        let mut ptrs = pointers(&mut params);
        let f = lib.symbol(&format!("emu_{}", g.name)).map_err(|e| format!("{}: {e}", g.origin))?;
        // SAFETY: `emu_NAME(void **, unsigned, unsigned)` as `wrapper` renders it; each pointer
        // covers its parameter in its storage type.
        unsafe {
            let f: extern "C" fn(*mut *mut libc::c_void, u32, u32) = std::mem::transmute(f);
            f(ptrs.as_mut_ptr(), launch.grid.min(2) as u32, launch.block as u32);
        }
        out.push(compare(g, &want, &params, false, tolerance));
    }
    Ok(out)
}
