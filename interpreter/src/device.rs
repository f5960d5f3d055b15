//! Which device a recipe runs on: the recipe's `device = auto | cpu | cuda` (absent means
//! `auto`), or `--device`, against what the machine has (`dlc_jit::cuda::probe`).
//!
//! On a GPU, training steps run through the device executor (`crate::runner`): the generated
//! CUDA kernels launched on device-resident values, what has no device kernel yet computed on
//! the host. `DLC_EMULATE_GPU=1` stands an emulated GPU in for a missing one (tests and CI).

use dlc_jit::cuda::Gpu;
use dlc_language::eval::recipe::RecipeInfo;
use dlc_language::eval::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    pub device: &'static str,
    pub requested: Requested,
    pub reason: String,
    /// The GPU found, used or not.
    pub gpu: Option<Gpu>,
}

/// Whether this build can run training, evaluation and inference on a GPU.
pub const CUDA_EXECUTOR: bool = true;

/// What `choose` probes: GPU 0 (`dlc_jit::cuda::probe`), or the emulated GPU when
/// `DLC_EMULATE_GPU=1` asks for it.
pub fn probe() -> Result<Gpu, String> {
    if crate::runner::emulation_requested() {
        return Ok(Gpu { name: "emulated GPU (DLC_EMULATE_GPU=1)".into(), capability: (9, 0), memory_bytes: 0, driver: 0 });
    }
    dlc_jit::cuda::probe()
}

/// Choose for `requested`, probing the machine only when the answer depends on it.
pub fn choose(requested: Requested, probe: impl FnOnce() -> Result<Gpu, String>) -> Result<Choice, String> {
    if requested == Requested::Cpu {
        return Ok(Choice { device: "cpu", requested, reason: "device = cpu".into(), gpu: None });
    }
    match (probe(), requested) {
        (Err(why), Requested::Auto) => Ok(Choice { device: "cpu", requested, reason: format!("device = auto: no GPU ({why}); running on the CPU"), gpu: None }),
        (Err(why), _) => Err(format!("device = cuda, but there is no usable GPU: {why}. Use `device = auto` (or `--device auto`) to run on the CPU when there is none")),
        (Ok(gpu), Requested::Auto) if !CUDA_EXECUTOR => Ok(Choice {
            device: "cpu",
            reason: format!("device = auto: found {gpu}, but this build cannot run steps on a GPU yet (its CUDA kernels are generated and checked, `dlc kernels FILE --check cuda`; the device executor is not written); running on the CPU"),
            requested,
            gpu: Some(gpu),
        }),
        (Ok(gpu), _) if !CUDA_EXECUTOR => Err(format!(
            "device = cuda: found {gpu}, but this build cannot run steps on a GPU yet (the device executor is not written); use `device = auto` or `cpu` to run on the CPU"
        )),
        (Ok(gpu), _) => Ok(Choice { device: "cuda", requested, reason: format!("device = {}: {gpu}", requested.name()), gpu: Some(gpu) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100() -> Result<Gpu, String> {
        Ok(Gpu { name: "NVIDIA H100 80GB HBM3".into(), capability: (9, 0), memory_bytes: 80 << 30, driver: 13000 })
    }

    fn none() -> Result<Gpu, String> {
        Err("the NVIDIA driver library (libcuda.so.1) was not found".into())
    }

    #[test]
    fn cpu_never_probes() {
        let c = choose(Requested::Cpu, || panic!("probed")).expect("cpu");
        assert_eq!(c.device, "cpu");
    }

    #[test]
    fn auto_without_a_gpu_says_so_and_runs_on_the_cpu() {
        let c = choose(Requested::Auto, none).expect("auto");
        assert_eq!(c.device, "cpu");
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
            assert_eq!(c.device, "cuda");
            assert!(c.reason.contains("H100") && c.reason.contains("sm_90"), "{}", c.reason);
        }
    }
}
