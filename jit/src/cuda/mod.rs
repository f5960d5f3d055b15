//! The GPU through cudarc, loaded at run time: the same binary builds with no CUDA toolkit and
//! runs on machines without a GPU, where `probe` says what is missing instead of panicking
//! (cudarc panics if a library it needs cannot be opened, so presence is checked first).

/// The GPU a run would use.
#[derive(Clone, Debug, PartialEq)]
pub struct Gpu {
    pub name: String,
    /// Compute capability (9, 0) for an H100.
    pub capability: (i32, i32),
    pub memory_bytes: usize,
    /// The driver's CUDA version, e.g. 13000 for CUDA 13.0.
    pub driver: i32,
}

impl Gpu {
    /// `sm_90` for compute capability 9.0: the architecture NVRTC compiles for.
    pub fn arch(&self) -> String {
        format!("sm_{}{}", self.capability.0, self.capability.1)
    }
}

impl std::fmt::Display for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}, {:.0} GiB, CUDA driver {}.{})",
            self.name,
            self.arch(),
            self.memory_bytes as f64 / (1u64 << 30) as f64,
            self.driver / 1000,
            self.driver % 1000 / 10
        )
    }
}

/// GPU 0, or why there is none: no driver library, no device, or a driver that fails to start.
pub fn probe() -> Result<Gpu, String> {
    // SAFETY: only tries to open libcuda by its usual names.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("the NVIDIA driver library (libcuda.so.1) was not found".into());
    }
    let count = cudarc::driver::CudaContext::device_count().map_err(|e| format!("the CUDA driver did not start: {e:?}"))?;
    if count == 0 {
        return Err("the CUDA driver reports no GPU".into());
    }
    let ctx = cudarc::driver::CudaContext::new(0).map_err(|e| format!("GPU 0 could not be opened: {e:?}"))?;
    let name = ctx.name().map_err(|e| format!("GPU 0: {e:?}"))?;
    let capability = ctx.compute_capability().map_err(|e| format!("GPU 0: {e:?}"))?;
    let memory_bytes = ctx.total_mem().map_err(|e| format!("GPU 0: {e:?}"))?;
    let mut driver = 0;
    // SAFETY: the library is loaded (the context exists); the call writes one int.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver) };
    Ok(Gpu { name, capability, memory_bytes, driver })
}

pub mod launch;
pub mod nvrtc_options;
pub mod ptx_cache;
