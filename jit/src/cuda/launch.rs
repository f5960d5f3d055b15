//! Generated kernels run on the GPU: a translation unit compiled by NVRTC for the device's
//! architecture (through the on-disk cache), loaded as a module, and each kernel launched on
//! device buffers with the launch shape its renderer chose. This is the part of the CUDA backend
//! that `dlc kernels FILE --check gpu` drives today, kernel by kernel against the interpreter;
//! the executor that runs whole steps on the device builds on it.

use super::ptx_cache;
use crate::render::Launch;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use std::sync::Arc;

/// A device, its stream, and the modules loaded on it.
pub struct Device {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub gpu: super::Gpu,
    /// `sm_90` for an H100.
    pub arch: String,
}

/// How a module's PTX was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compiled {
    /// NVRTC compiled it now (and it was stored in the cache).
    Nvrtc,
    /// Read from the on-disk cache.
    Cache,
}

impl Device {
    /// GPU 0, or why there is none (see `super::probe`).
    pub fn open() -> Result<Device, String> {
        let gpu = super::probe()?;
        let ctx = CudaContext::new(0).map_err(|e| format!("GPU 0 could not be opened: {e:?}"))?;
        // A stream of our own, not the legacy default stream: CUDA cannot capture the default
        // stream into a graph (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, seen on an H200), and
        // the default stream would also serialise with every other blocking stream.
        let stream = ctx.new_stream().map_err(|e| format!("a stream on GPU 0: {e:?}"))?;
        // SAFETY: cudarc's per-buffer events order buffers used on several streams; everything
        // here is queued on this one stream, and the copy and communication streams are ordered
        // by the executor's own events (runner/cuda.rs, runner/nccl.rs). Left on, every
        // buffer use would record an event (and wait for it during a graph capture).
        unsafe { ctx.disable_event_tracking() };
        let arch = gpu.arch();
        Ok(Device { ctx, stream, gpu, arch })
    }

    /// Compile (or find in the cache) and load a translation unit.
    pub fn module(&self, source: &str) -> Result<(Arc<CudaModule>, Compiled), String> {
        // SAFETY: only opens NVRTC by its usual names.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err("NVRTC (libnvrtc.so) was not found on the library path".into());
        }
        let (mut major, mut minor) = (0, 0);
        // SAFETY: NVRTC is loaded; the call writes two ints.
        unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }.result().map_err(|e| format!("NVRTC: {e:?}"))?;
        let key = ptx_cache::key(source, &self.arch, (major, minor), self.gpu.driver);
        let dir = ptx_cache::default_dir();
        let cached = dir.as_ref().and_then(|d| ptx_cache::load(d, &key));
        let (ptx, how) = match cached {
            Some(ptx) => (ptx, Compiled::Cache),
            None => {
                let virt: &'static str = Box::leak(format!("compute_{}", &self.arch[3..]).into_boxed_str());
                let opts = super::nvrtc_options::compile_options(virt, None);
                let ptx = cudarc::nvrtc::compile_ptx_with_opts(source, opts).map_err(|e| match e {
                    cudarc::nvrtc::CompileError::CompileError { log, .. } => {
                        format!("NVRTC rejected the kernels:\n{}", log.to_string_lossy())
                    }
                    other => format!("NVRTC failed: {other:?}"),
                })?;
                let text = ptx.to_src();
                if let Some(d) = &dir {
                    // A cache that cannot be written costs a compile next time, nothing more.
                    let _ = ptx_cache::store(d, &key, &text);
                }
                (text, Compiled::Nvrtc)
            }
        };
        let module =
            self.ctx.load_module(cudarc::nvrtc::Ptx::from_src(ptx)).map_err(|e| format!("loading the kernels on the GPU: {e:?}"))?;
        Ok((module, how))
    }

    pub fn function(&self, module: &Arc<CudaModule>, name: &str) -> Result<CudaFunction, String> {
        module.load_function(name).map_err(|e| format!("kernel {name}: {e:?}"))
    }

    pub fn upload(&self, bytes: &[u8]) -> Result<CudaSlice<u8>, String> {
        // (A zero-length allocation is refused: every buffer holds at least one byte.)
        if bytes.is_empty() {
            return self.stream.alloc_zeros::<u8>(1).map_err(|e| format!("allocating on the GPU: {e:?}"));
        }
        self.stream.clone_htod(bytes).map_err(|e| format!("copying to the GPU: {e:?}"))
    }

    pub fn download(&self, buf: &CudaSlice<u8>) -> Result<Vec<u8>, String> {
        self.stream.clone_dtoh(buf).map_err(|e| format!("copying from the GPU: {e:?}"))
    }

    /// Launch `f` with `launch`'s shape on `params` (in `Kernel::params` order), and wait.
    pub fn launch(&self, f: &CudaFunction, launch: &Launch, params: &[CudaSlice<u8>]) -> Result<(), String> {
        let cfg = LaunchConfig {
            grid_dim: (launch.grid as u32, 1, 1),
            block_dim: (launch.block as u32, 1, 1),
            shared_mem_bytes: launch.shared_bytes as u32,
        };
        let mut b = self.stream.launch_builder(f);
        for p in params {
            b.arg(p);
        }
        // SAFETY: the kernel's parameters are pointers to buffers of the kernel IR's parameter
        // types and lengths, in its order, which the caller allocated.
        unsafe { b.launch(cfg) }.map_err(|e| format!("launching: {e:?}"))?;
        self.stream.synchronize().map_err(|e| format!("running the kernel: {e:?}"))
    }
}
