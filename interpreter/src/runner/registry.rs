//! The devices, as peers: each entry says what it is called, how to find it (probe) and how to
//! open a runner on it. The CPU is an ordinary entry. Adding a device is one module with a
//! `Runner` (or a `driver::Driver` under the device executor) plus one line in [`DEVICES`].

use super::device_executor::DeviceExecutor;
use super::{cuda, emulated, host, Runner};
use crate::exec::fused::KernelCache;
use crate::exec::Executor;
use dlc_jit::cuda::Gpu;
use dlc_language::passes::driver::ConvLayout;
use std::sync::Arc;

/// A device a runner can be opened on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// The interpreter on the host's cores.
    Cpu,
    /// GPU 0 through CUDA (cudarc, NVRTC, cuBLAS).
    Cuda,
    /// The device executor over the emulated GPU: the CUDA C built for the CPU
    /// (`DLC_EMULATE_GPU=1` stands it in for `cuda`; how the GPU path is tested without one).
    EmulatedCuda,
}

impl DeviceKind {
    /// The device's name as recipes, flags and reports say it (the emulated GPU is `cuda`).
    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Cuda | DeviceKind::EmulatedCuda => "cuda",
        }
    }

    pub fn is_gpu(self) -> bool {
        self != DeviceKind::Cpu
    }

    /// Whether this device's bf16 matrix products round f32 operands as they read them, so that
    /// autocast's casts before them need no pass of their own (`driver::Options::products_round`):
    /// the CPU's bf16 kernels convert every operand to their own layout anyway; a GPU's cuBLAS
    /// reads stored bf16.
    pub fn products_round(self) -> bool {
        self == DeviceKind::Cpu
    }

    /// Which convolutions run channels-last here: on a GPU the bf16 and f16 ones (cuDNN's
    /// tensor-core kernels are NHWC); on the CPU every float one where oneDNN runs them (its NHWC
    /// kernels read them as stored, with no reorders; batch norm, activations and pooling
    /// between them follow: the conv-BN step 16.1-19.1 ms against 18.5-19.4 NCHW on the Zen 5,
    /// stop 48), none where im2col does. `DLC_CONV_LAYOUT=nchw|channels_last` overrides, to
    /// compare the two.
    pub fn conv_layout(self) -> ConvLayout {
        match asked_layout() {
            Some(layout) => layout,
            None if self.is_gpu() => ConvLayout::ChannelsLastLowPrecision,
            None if crate::exec::onednn_convolutions() => ConvLayout::ChannelsLast,
            None => ConvLayout::Nchw,
        }
    }

    /// `conv_layout` for evaluations: on the CPU NCHW unless `DLC_CONV_LAYOUT` says otherwise.
    /// What channels-last saves there is the blocked reorders of backward's convolutions and the
    /// transposes between layers of a step; an evaluation (batch norm folded into its
    /// convolution) of one convolution pays two transposes for oneDNN's two reorders, and
    /// longer ones are unmeasured.
    pub fn eval_conv_layout(self) -> ConvLayout {
        match asked_layout() {
            Some(layout) => layout,
            None if self.is_gpu() => self.conv_layout(),
            None => ConvLayout::Nchw,
        }
    }
}

/// The layout `DLC_CONV_LAYOUT=nchw|channels_last` asks for, if it does.
fn asked_layout() -> Option<ConvLayout> {
    match std::env::var("DLC_CONV_LAYOUT").as_deref() {
        Ok("nchw") => Some(ConvLayout::Nchw),
        Ok("channels_last") => Some(ConvLayout::ChannelsLast),
        _ => None,
    }
}

/// What opening a runner needs: the host runner's interpreter settings and the run's kernel
/// cache (device runners compile their own kernels and ignore them).
pub struct RunnerOptions {
    pub seed: u64,
    pub fuse: bool,
    pub kernels: Arc<KernelCache>,
    pub profile: Option<crate::exec::KernelTimes>,
    /// `precision = tf32`: f32 products and convolutions may round their operands to TF32 on
    /// the GPU's tensor cores (the CPU has no TF32 arithmetic and computes in f32).
    pub tf32: bool,
}

impl RunnerOptions {
    /// With a kernel cache of its own (`jit`: native code for every fused region).
    pub fn new(seed: u64, fuse: bool, jit: bool) -> RunnerOptions {
        RunnerOptions { seed, fuse, kernels: Arc::new(KernelCache::new(jit)), profile: None, tf32: false }
    }
}

struct Entry {
    kind: DeviceKind,
    /// Whether the machine has it: the GPU found (`None` for the CPU, or a device not asked
    /// for), or why it cannot be used. Never a panic.
    probe: fn() -> Result<Option<Gpu>, String>,
    open: fn(&RunnerOptions) -> Result<Box<dyn Runner>, String>,
}

/// Every device this build can run on; among the GPUs the first found is the one `device =
/// auto | cuda` gets (the emulated GPU only when `DLC_EMULATE_GPU=1` asks for it).
const DEVICES: &[Entry] = &[
    Entry { kind: DeviceKind::Cpu, probe: || Ok(None), open: open_host },
    Entry {
        kind: DeviceKind::EmulatedCuda,
        probe: || {
            Ok(super::emulation_requested().then(|| Gpu {
                name: "emulated GPU (DLC_EMULATE_GPU=1)".into(),
                capability: (9, 0),
                memory_bytes: 0,
                driver: 0,
            }))
        },
        open: |o| Ok(Box::new(DeviceExecutor::new(emulated::Emulated::new().with_tf32(o.tf32)).with_profile(o.profile.clone()))),
    },
    Entry {
        kind: DeviceKind::Cuda,
        probe: || dlc_jit::cuda::probe().map(Some),
        open: |o| Ok(Box::new(DeviceExecutor::new(cuda::Cuda::open()?.with_tf32(o.tf32)).with_profile(o.profile.clone()))),
    },
];

/// The first GPU the registry finds, with the kind a runner on it opens as; or why there is none.
pub fn probe_gpu() -> Result<(DeviceKind, Gpu), String> {
    let mut why = "this build has no GPU device".to_string();
    for e in DEVICES.iter().filter(|e| e.kind.is_gpu()) {
        match (e.probe)() {
            Ok(Some(gpu)) => return Ok((e.kind, gpu)),
            Ok(None) => {}
            Err(w) => why = w,
        }
    }
    Err(why)
}

fn open_host(o: &RunnerOptions) -> Result<Box<dyn Runner>, String> {
    let mut ex = Executor::new(o.seed);
    ex.fuse = o.fuse;
    ex.kernels = o.kernels.clone();
    ex.profile = o.profile.clone();
    Ok(Box::new(host::HostRunner::new(ex)))
}

/// A runner on `kind`.
pub fn open(kind: DeviceKind, opts: &RunnerOptions) -> Result<Box<dyn Runner>, String> {
    let entry = DEVICES.iter().find(|e| e.kind == kind).ok_or_else(|| format!("this build has no `{}` device", kind.name()))?;
    (entry.open)(opts)
}

/// Every device kind in the registry (the conformance suite runs each that opens here).
pub fn kinds() -> Vec<DeviceKind> {
    DEVICES.iter().map(|e| e.kind).collect()
}
