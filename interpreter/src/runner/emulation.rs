//! The CUDA C the GPU runs, built for the CPU instead: a header that emulates what the kernels
//! use of CUDA (blocks run one after another; a block's threads as OS threads when the kernel
//! has barriers or shuffles, else in a loop; `__syncthreads` a barrier; shared memory one array
//! per block; `__shfl_down_sync` an exchange through memory between two barriers), and a host
//! entry per kernel. The emulated device (emulated.rs) runs on it, and the kernel-check harness's
//! emulation check builds on it too (kernels/emu_check.rs).

use super::host_lib::Compiler;
use dlc_jit::kir;
use dlc_jit::render::{self, ctype_of, Dialect, Launch};

pub const EMULATION: &str = r#"
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
// Blocks run one after another, and only a block's thread 0 takes part in the cross-block
// counters (sums split across blocks): plain memory serves.
static inline unsigned int atomicAdd(unsigned int* p, unsigned int v) { unsigned int old = *p; *p = old + v; return old; }
static inline void __threadfence() {}
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
// A kernel without barriers or shuffles runs its threads one after another on this thread;
// one with them gets a thread per CUDA thread, meeting at each barrier. Those threads are
// started once and run every block in turn (a split sum launches a thousand blocks): thread 0
// moves blockIdx on between two barriers.
static void dlc_launch(unsigned int grid, unsigned int block, bool cooperative, const std::function<void()>& kernel) {
  gridDim.x = grid; blockDim.x = block;
  if (!cooperative) {
    for (unsigned int b = 0; b < grid; b++) {
      blockIdx.x = b;
      for (unsigned int t = 0; t < block; t++) { threadIdx.x = t; kernel(); }
    }
    return;
  }
  std::barrier<> bar(block);
  dlc_block_barrier = &bar;
  std::vector<std::thread> threads;
  for (unsigned int t = 0; t < block; t++) {
    threads.emplace_back([t, grid, &bar, &kernel] {
      threadIdx.x = t;
      for (unsigned int b = 0; b < grid; b++) {
        if (t == 0) blockIdx.x = b;
        bar.arrive_and_wait();
        kernel();
        bar.arrive_and_wait();
      }
    });
  }
  for (auto& th : threads) th.join();
}
"#;

/// The host entry of one kernel: `void emu_NAME(void **params, unsigned grid, unsigned block)`.
fn wrapper(name: &str, kernel: &kir::Kernel, cooperative: bool) -> String {
    let args: Vec<String> = kernel
        .params()
        .iter()
        .enumerate()
        .map(|(i, (p, out))| format!("({}{}*)params[{i}]", if *out { "" } else { "const " }, ctype_of(p.ty)))
        .collect();
    format!(
        "extern \"C\" void emu_{name}(void **params, unsigned int grid, unsigned int block) {{ dlc_launch(grid, block, {cooperative}, [&] {{ {name}({}); }}); }}\n",
        args.join(", "),
    )
}

/// A translation unit of `kernels` (name, kernel IR) for the host, and each one's launch shape.
pub fn translation_unit(kernels: &[(&str, &kir::Kernel)]) -> Result<(String, Vec<Launch>), String> {
    let mut src = String::from(EMULATION);
    src += &render::math::prelude(Dialect::Cuda);
    let mut launches = vec![];
    for (name, kernel) in kernels {
        let (text, launch) = render::render_function(kernel, name, Dialect::Cuda).map_err(|e| format!("{name}: {e}"))?;
        let cooperative = text.contains("__syncthreads") || text.contains("__shfl");
        src += "\n";
        // A row kernel's dynamic shared memory is the emulation's storage.
        src += &text.replace("extern __shared__ float dlc_row[];", "float* dlc_row = dlc_row_storage;");
        src += &wrapper(name, kernel, cooperative);
        launches.push(launch);
    }
    Ok((src, launches))
}

/// The host entry `emu_NAME`, as `translation_unit` renders it.
pub type Entry = extern "C" fn(*mut *mut libc::c_void, u32, u32);

pub const CXX: Compiler = Compiler {
    env: "CXX",
    default: "c++",
    what: "C++",
    extension: "cpp",
    before: &["-O1", "-std=c++20", "-pthread", "-shared", "-fPIC", "-w"],
    after: &[],
};
