//! The generated kernels run on a GPU, each against the interpreter on the same inputs, as the
//! C check does on the CPU (c_check.rs): the CUDA C of every kernel of a program compiled by
//! NVRTC for the device (through the on-disk cache), launched with its renderer's launch shape,
//! and its outputs compared within per-dtype tolerances. NVRTC contracts multiply-adds into
//! fused ones and row and axis sums add in another order, so results are close, not equal.
//! Run by `dlc kernels FILE --check gpu` (scripts/gpu-check.sh runs it on every program).

use super::reference::{compare, reference, tolerance, Checked, Reference};
use super::Generated;
use dlc_jit::cuda::launch::{Compiled, Device};

/// Every kernel of `gens` on GPU 0; also whether the module came from the cache.
pub fn check(gens: &[Generated]) -> Result<(Vec<Checked>, Compiled, String), String> {
    let dev = Device::open()?;
    let source = super::cuda_check::translation_unit(gens)?;
    let (module, how) = dev.module(&source)?;
    let mut out = vec![];
    for (n, g) in gens.iter().enumerate() {
        let Reference { params, want } = reference(g, n)?;
        let (_, launch) =
            dlc_jit::render::render_function(&g.kernel, &g.name, dlc_jit::render::Dialect::Cuda).map_err(|e| e.to_string())?;
        let f = dev.function(&module, &g.name)?;
        let bufs = params.iter().map(|p| dev.upload(p)).collect::<Result<Vec<_>, _>>()?;
        dev.launch(&f, &launch, &bufs).map_err(|e| format!("{}: {e}", g.origin))?;
        let got = bufs
            .iter()
            .zip(&params)
            .map(|(b, p)| {
                dev.download(b).map(|mut v| {
                    v.truncate(p.len());
                    v
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        out.push(compare(g, &want, &got, false, tolerance));
    }
    Ok((out, how, dev.gpu.to_string()))
}
