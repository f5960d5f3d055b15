//! Which device a recipe runs on: the recipe's `device = auto | cpu | cuda` (absent means
//! `auto`), or `--device`, against what the machine has (`dlc_jit::cuda::probe`).
//!
//! On a GPU, training steps, evaluations and `infer` blocks run through the device executor
//! (`crate::runner`): the generated CUDA kernels launched on device-resident values, what has no
//! device kernel yet computed on the host. `DLC_EMULATE_GPU=1` stands an emulated GPU in for a missing one (tests and CI).

use dlc_jit::cuda::Gpu;
use dlc_language::eval::recipe::RecipeInfo;

pub use crate::runner::DeviceKind;

pub use dlc_language::eval::spec::DeviceRequest;

/// `--device`'s parser: one of `auto`, `cpu`, `cuda` (clap lists them when another is given).
pub fn device_flag() -> impl clap::builder::TypedValueParser<Value = DeviceRequest> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(DeviceRequest::NAMES).map(|s| DeviceRequest::parse(&s).expect("one of the possible values"))
}

/// The device chosen and why, in one line.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    pub device: DeviceKind,
    pub requested: DeviceRequest,
    pub reason: String,
    /// The GPU found, used or not.
    pub gpu: Option<Gpu>,
}

/// What `choose` probes: the registry's GPUs (`crate::runner::registry::probe_gpu`).
pub fn probe() -> Result<(DeviceKind, Gpu), String> {
    crate::runner::registry::probe_gpu()
}

/// The device for a recipe (`flag`, from `--device`, first), probing the machine at most once
/// per process. Also says whether the choice was asked for explicitly.
pub fn for_recipe(info: &RecipeInfo, flag: Option<DeviceRequest>) -> Result<(Choice, bool), String> {
    static PROBE: std::sync::OnceLock<Result<(DeviceKind, Gpu), String>> = std::sync::OnceLock::new();
    let (requested, explicit) = match flag {
        Some(f) => (f, true),
        None => DeviceRequest::of(info),
    };
    let choice = choose(requested, || PROBE.get_or_init(probe).clone())?;
    Ok((choice, explicit))
}

/// Choose for `requested`, probing the machine only when the answer depends on it.
pub fn choose(requested: DeviceRequest, probe: impl FnOnce() -> Result<(DeviceKind, Gpu), String>) -> Result<Choice, String> {
    if requested == DeviceRequest::Cpu {
        return Ok(Choice { device: DeviceKind::Cpu, requested, reason: "device = cpu".into(), gpu: None });
    }
    match (probe(), requested) {
        (Err(why), DeviceRequest::Auto) => Ok(Choice { device: DeviceKind::Cpu, requested, reason: format!("device = auto: no GPU ({why}); running on the CPU"), gpu: None }),
        (Err(why), _) => Err(format!("device = cuda, but there is no usable GPU: {why}. Use `device = auto` (or `--device auto`) to run on the CPU when there is none")),
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
        let c = choose(DeviceRequest::Cpu, || panic!("probed")).expect("cpu");
        assert_eq!(c.device, DeviceKind::Cpu);
    }

    #[test]
    fn auto_without_a_gpu_says_so_and_runs_on_the_cpu() {
        let c = choose(DeviceRequest::Auto, none).expect("auto");
        assert_eq!(c.device, DeviceKind::Cpu);
        assert!(c.reason.contains("libcuda.so.1") && c.reason.contains("running on the CPU"), "{}", c.reason);
    }

    #[test]
    fn cuda_without_a_gpu_is_an_error_naming_what_is_missing() {
        let e = choose(DeviceRequest::Cuda, none).expect_err("no GPU");
        assert!(e.contains("libcuda.so.1") && e.contains("device = auto"), "{e}");
    }

    #[test]
    fn a_gpu_found_is_chosen_and_named() {
        for r in [DeviceRequest::Auto, DeviceRequest::Cuda] {
            let c = choose(r, h100).expect("a GPU");
            assert_eq!(c.device, DeviceKind::Cuda);
            assert!(c.reason.contains("H100") && c.reason.contains("sm_90"), "{}", c.reason);
        }
    }
}
