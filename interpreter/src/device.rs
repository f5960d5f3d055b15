//! Which device a recipe runs on: the recipe's `device = auto | cpu | cuda` (absent means
//! `auto`), or `--device`, against what the machine has (`dlc_jit::cuda::probe`).
//!
//! On a GPU, training steps run through the device executor (`crate::runner`): the generated
//! CUDA kernels launched on device-resident values, what has no device kernel yet computed on
//! the host. `DLC_EMULATE_GPU=1` stands an emulated GPU in for a missing one (tests and CI).

use dlc_jit::cuda::Gpu;
use dlc_language::eval::recipe::RecipeInfo;
use dlc_language::eval::Value;

pub use crate::runner::DeviceKind;

/// What a recipe's `device` field or `--device` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Requested {
    /// The GPU when one is present and usable, else the CPU.
    Auto,
    Cpu,
    Cuda,
}

impl Requested {
    pub fn parse(s: &str) -> Option<Requested> {
        match s {
            "auto" => Some(Requested::Auto),
            "cpu" => Some(Requested::Cpu),
            "cuda" => Some(Requested::Cuda),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Requested::Auto => "auto",
            Requested::Cpu => "cpu",
            Requested::Cuda => "cuda",
        }
    }
}

/// What a recipe asks for, and whether it says so itself (an absent field is `auto`, quietly).
pub fn requested(info: &RecipeInfo) -> (Requested, bool) {
    match info.field("device") {
        Some(Value::Str(s)) => (Requested::parse(s).unwrap_or(Requested::Auto), true),
        Some(Value::Auto) => (Requested::Auto, true),
        _ => (Requested::Auto, false),
    }
}

/// The device chosen and why, in one line.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    pub device: DeviceKind,
    pub requested: Requested,
    pub reason: String,
    /// The GPU found, used or not.
    pub gpu: Option<Gpu>,
}

/// Whether this build can run training, evaluation and inference on a GPU.
pub const CUDA_EXECUTOR: bool = true;

/// What `choose` probes: GPU 0 (`dlc_jit::cuda::probe`), or the emulated GPU when
/// `DLC_EMULATE_GPU=1` asks for it; with the device kind a runner on it is opened as.
pub fn probe() -> Result<(DeviceKind, Gpu), String> {
    if crate::runner::emulation_requested() {
        let gpu = Gpu { name: "emulated GPU (DLC_EMULATE_GPU=1)".into(), capability: (9, 0), memory_bytes: 0, driver: 0 };
        return Ok((DeviceKind::EmulatedCuda, gpu));
    }
    dlc_jit::cuda::probe().map(|g| (DeviceKind::Cuda, g))
}

/// The device for a recipe (`flag`, from `--device`, first), probing the machine at most once
/// per process. Also says whether the choice was asked for explicitly.
pub fn for_recipe(info: &RecipeInfo, flag: Option<Requested>) -> Result<(Choice, bool), String> {
    static PROBE: std::sync::OnceLock<Result<(DeviceKind, Gpu), String>> = std::sync::OnceLock::new();
    let (requested, explicit) = match flag {
        Some(f) => (f, true),
        None => requested(info),
    };
    let choice = choose(requested, || PROBE.get_or_init(probe).clone())?;
    Ok((choice, explicit))
}

/// Choose for `requested`, probing the machine only when the answer depends on it.
pub fn choose(requested: Requested, probe: impl FnOnce() -> Result<(DeviceKind, Gpu), String>) -> Result<Choice, String> {
    if requested == Requested::Cpu {
        return Ok(Choice { device: DeviceKind::Cpu, requested, reason: "device = cpu".into(), gpu: None });
    }
    match (probe(), requested) {
        (Err(why), Requested::Auto) => Ok(Choice { device: DeviceKind::Cpu, requested, reason: format!("device = auto: no GPU ({why}); running on the CPU"), gpu: None }),
        (Err(why), _) => Err(format!("device = cuda, but there is no usable GPU: {why}. Use `device = auto` (or `--device auto`) to run on the CPU when there is none")),
        (Ok((_, gpu)), Requested::Auto) if !CUDA_EXECUTOR => Ok(Choice {
            device: DeviceKind::Cpu,
            reason: format!("device = auto: found {gpu}, but this build cannot run steps on a GPU yet (its CUDA kernels are generated and checked, `dlc kernels FILE --check cuda`; the device executor is not written); running on the CPU"),
            requested,
            gpu: Some(gpu),
        }),
        (Ok((_, gpu)), _) if !CUDA_EXECUTOR => Err(format!(
            "device = cuda: found {gpu}, but this build cannot run steps on a GPU yet (the device executor is not written); use `device = auto` or `cpu` to run on the CPU"
        )),
        (Ok((kind, gpu)), _) => Ok(Choice { device: kind, requested, reason: format!("device = {}: {gpu}", requested.name()), gpu: Some(gpu) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100() -> Result<(DeviceKind, Gpu), String> {
        Ok((DeviceKind::Cuda, Gpu { name: "NVIDIA H100 80GB HBM3".into(), capability: (9, 0), memory_bytes: 80 << 30, driver: 13000 }))
    }

    fn none() -> Result<(DeviceKind, Gpu), String> {
        Err("the NVIDIA driver library (libcuda.so.1) was not found".into())
    }

    #[test]
    fn cpu_never_probes() {
        let c = choose(Requested::Cpu, || panic!("probed")).expect("cpu");
        assert_eq!(c.device, DeviceKind::Cpu);
    }

    #[test]
    fn auto_without_a_gpu_says_so_and_runs_on_the_cpu() {
        let c = choose(Requested::Auto, none).expect("auto");
        assert_eq!(c.device, DeviceKind::Cpu);
        assert!(c.reason.contains("libcuda.so.1") && c.reason.contains("running on the CPU"), "{}", c.reason);
    }

    #[test]
    fn cuda_without_a_gpu_is_an_error_naming_what_is_missing() {
        let e = choose(Requested::Cuda, none).expect_err("no GPU");
        assert!(e.contains("libcuda.so.1") && e.contains("device = auto"), "{e}");
    }

    #[test]
    fn a_gpu_found_is_chosen_and_named() {
        for r in [Requested::Auto, Requested::Cuda] {
            let c = choose(r, h100).expect("a GPU");
            assert_eq!(c.device, DeviceKind::Cuda);
            assert!(c.reason.contains("H100") && c.reason.contains("sm_90"), "{}", c.reason);
        }
    }
}
