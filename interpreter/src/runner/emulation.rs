//! The CUDA C the GPU runs, built for the CPU instead: a header that emulates what the kernels
//! use of CUDA (blocks run one after another; a block's threads as fibers on one OS thread when
//! the kernel has barriers or shuffles, else in a loop; `__syncthreads` a barrier; shared memory one array
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
#include <memory>
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
static double dlc_exchange[1024];
// The dynamic shared memory of the running block (48 KiB, the default limit).
float dlc_row_storage[12288];
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline unsigned int __float_as_uint(float f) { unsigned int i; std::memcpy(&i, &f, 4); return i; }
// Blocks run one after another, and only a block's thread 0 takes part in the cross-block
// counters (sums split across blocks): plain memory serves.
static inline unsigned int atomicAdd(unsigned int* p, unsigned int v) { unsigned int old = *p; *p = old + v; return old; }
static inline void __threadfence() {}
static inline void __syncthreads();
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
// A kernel without barriers or shuffles runs its threads one after another on this thread.
// One with them runs each CUDA thread as a fiber on this thread, started once per launch and run
// through every block in turn (a split sum launches a thousand blocks): a barrier switches back
// to the launcher, which resumes the fibers in thread order, so every thread reaches a barrier
// before any passes it. The switch saves the six callee-saved registers and swaps stacks, with
// no system call; OS threads meeting at a `std::barrier` spent two thirds of the emulated tests'
// time in the scheduler on a 2-core machine. Other architectures keep the OS threads.
static const std::function<void()>* dlc_kernel = nullptr;
static unsigned int dlc_grid = 0;
static void dlc_run_blocks(std::function<void()> const& barrier) {
  for (unsigned int b = 0; b < dlc_grid; b++) {
    blockIdx.x = b;
    (*dlc_kernel)();
    barrier();
  }
}
// Sets the launch's shape; runs a kernel without barriers thread after thread on this thread
// (and says so), else leaves the launch to the cooperative runner below.
static bool dlc_launch_serial(unsigned int grid, unsigned int block, bool cooperative, const std::function<void()>& kernel) {
  gridDim.x = grid; blockDim.x = block; dlc_grid = grid; dlc_kernel = &kernel;
  if (cooperative) return false;
  for (unsigned int b = 0; b < grid; b++) {
    blockIdx.x = b;
    for (unsigned int t = 0; t < block; t++) { threadIdx.x = t; kernel(); }
  }
  return true;
}
#if defined(__x86_64__)
extern "C" void dlc_switch_stack(void** save, void* to);
asm(R"(
  .text
  .p2align 4
  .hidden dlc_switch_stack
  .type dlc_switch_stack, @function
dlc_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size dlc_switch_stack, .-dlc_switch_stack
)");
static void* dlc_launcher_sp = nullptr;
static std::vector<void*> dlc_fiber_sp;
static std::vector<bool> dlc_fiber_done;
static unsigned int dlc_current = 0;
static void dlc_yield() { dlc_switch_stack(&dlc_fiber_sp[dlc_current], dlc_launcher_sp); }
static inline void __syncthreads() { dlc_yield(); }
[[noreturn]] static void dlc_fiber_main() {
  dlc_run_blocks(dlc_yield);
  dlc_fiber_done[dlc_current] = true;
  dlc_yield();
  __builtin_unreachable();
}
static void dlc_launch(unsigned int grid, unsigned int block, bool cooperative, const std::function<void()>& kernel) {
  if (dlc_launch_serial(grid, block, cooperative, kernel)) return;
  // 64 KiB of stack a fiber (the kernels' frames are small), committed as touched.
  const size_t stack = 64 * 1024;
  std::unique_ptr<char[]> stacks(new char[stack * block]);
  dlc_fiber_sp.assign(block, nullptr);
  dlc_fiber_done.assign(block, false);
  for (unsigned int t = 0; t < block; t++) {
    // The first switch pops six zero registers, then `ret`s into dlc_fiber_main with the stack
    // as a call would leave it (16-byte aligned before the return address).
    void** top = (void**)(stacks.get() + stack * (t + 1));
    top[-1] = nullptr;
    top[-2] = (void*)&dlc_fiber_main;
    for (int r = 3; r <= 8; r++) top[-r] = nullptr;
    dlc_fiber_sp[t] = (void*)&top[-8];
  }
  for (bool running = true; running;) {
    running = false;
    for (unsigned int t = 0; t < block; t++) {
      if (dlc_fiber_done[t]) continue;
      dlc_current = t;
      threadIdx.x = t;
      dlc_switch_stack(&dlc_launcher_sp, dlc_fiber_sp[t]);
      running = running || !dlc_fiber_done[t];
    }
  }
}
#else
static std::barrier<>* dlc_block_barrier = nullptr;
static inline void __syncthreads() { dlc_block_barrier->arrive_and_wait(); }
static void dlc_launch(unsigned int grid, unsigned int block, bool cooperative, const std::function<void()>& kernel) {
  if (dlc_launch_serial(grid, block, cooperative, kernel)) return;
  std::barrier<> bar(block);
  dlc_block_barrier = &bar;
  std::vector<std::thread> threads;
  for (unsigned int t = 0; t < block; t++) {
    threads.emplace_back([t, &bar] {
      threadIdx.x = t;
      dlc_run_blocks([&bar] { bar.arrive_and_wait(); });
    });
  }
  for (auto& th : threads) th.join();
}
#endif
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
