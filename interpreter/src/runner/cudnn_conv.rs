//! f32 convolutions on the GPU through cuDNN (cudarc's `cudnn`, loaded at run time like the rest
//! of CUDA): forward, data gradient and weight gradient in NCHW / OIHW, with FMA math only (no
//! TF32: `precision = f32` means f32 products, as on the CPU), the algorithm from cuDNN's
//! heuristics and a workspace allocated for the call.
//!
//! Not yet: algorithms chosen by measurement and kept with the tuning choices, the workspace from
//! the memory plan, bf16/f16, channels-last, TF32 under `precision = tf32` (docs/gpu.md).

use super::driver::{Conv, ConvDir};
use cudarc::cudnn::{sys, ConvBackwardData, ConvBackwardFilter, ConvForward, Cudnn};
use cudarc::driver::{CudaSlice, CudaStream};
use std::sync::Arc;

/// cuDNN on `stream`, or why it cannot start (no libcudnn on the library path).
pub fn open(stream: &Arc<CudaStream>) -> Result<Arc<Cudnn>, String> {
    // SAFETY: only tries to open libcudnn by its usual names.
    if !unsafe { sys::is_culib_present() } {
        return Err("cuDNN (libcudnn.so) was not found on the library path".into());
    }
    Cudnn::new(stream.clone()).map_err(|e| format!("cuDNN could not start: {e:?}"))
}

fn dims(d: [usize; 4]) -> Result<[i32; 4], String> {
    let mut out = [0i32; 4];
    for (o, v) in out.iter_mut().zip(d) {
        *o = i32::try_from(v).map_err(|_| format!("a convolution dimension of {v} is beyond cuDNN's 32-bit sizes"))?;
    }
    Ok(out)
}

/// Queue `c` on cuDNN's stream: `a` and `b` as `Driver::conv` says, into `out`.
pub fn run(
    cudnn: &Arc<Cudnn>,
    stream: &Arc<CudaStream>,
    c: &Conv,
    a: &CudaSlice<u8>,
    b: &CudaSlice<u8>,
    out: &mut CudaSlice<u8>,
) -> Result<(), String> {
    fn e(what: &'static str) -> impl Fn(cudarc::cudnn::CudnnError) -> String {
        move |err| format!("cuDNN {what}: {err:?}")
    }
    let nchw = sys::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW;
    let x = cudnn.create_4d_tensor::<f32>(nchw, dims(c.x)?).map_err(e("x descriptor"))?;
    let y = cudnn.create_4d_tensor::<f32>(nchw, dims(c.y)?).map_err(e("y descriptor"))?;
    let w = cudnn.create_4d_filter::<f32>(nchw, dims(c.w)?).map_err(e("filter descriptor"))?;
    let a32 = |v: (i64, i64)| [v.0 as i32, v.1 as i32];
    let mut conv = cudnn
        .create_conv2d::<f32>(
            a32(c.attrs.padding),
            a32(c.attrs.stride),
            a32(c.attrs.dilation),
            sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
        )
        .map_err(e("convolution descriptor"))?;
    conv.set_math_type(sys::cudnnMathType_t::CUDNN_FMA_MATH).map_err(e("math type"))?;
    conv.set_group_count(c.attrs.groups as i32).map_err(e("groups"))?;
    let too_small = || "a convolution's buffer is smaller than its shape".to_string();
    let workspace = |bytes: usize| -> Result<Option<CudaSlice<u8>>, String> {
        // SAFETY: cuDNN's scratch space; nothing reads it before cuDNN writes it.
        (bytes > 0)
            .then(|| unsafe { stream.alloc::<u8>(bytes) }.map_err(|e| format!("a cuDNN workspace of {bytes} bytes: {e:?}")))
            .transpose()
    };
    let [sa, sb, so] = c.operands().map(|d| d.iter().product::<usize>());
    // SAFETY: the views hold the descriptors' element counts of f32 (checked by `transmute`'s
    // lengths), in the NCHW / OIHW layouts the descriptors state; each launch below reads and
    // writes them as `Conv::operands` orders them.
    let (av, bv) = unsafe { (a.transmute::<f32>(sa).ok_or_else(too_small)?, b.transmute::<f32>(sb).ok_or_else(too_small)?) };
    let mut ov = unsafe { out.transmute_mut::<f32>(so).ok_or_else(too_small)? };
    match c.dir {
        ConvDir::Forward => {
            let op = ConvForward { conv: &conv, x: &x, w: &w, y: &y };
            let algo = op.pick_algorithm().map_err(e("forward algorithm"))?;
            let mut ws = workspace(op.get_workspace_size(algo).map_err(e("forward workspace"))?)?;
            // SAFETY: as above.
            unsafe { op.launch(algo, ws.as_mut(), (1.0, 0.0), &av, &bv, &mut ov) }.map_err(e("forward"))
        }
        ConvDir::Data => {
            let op = ConvBackwardData { conv: &conv, dx: &x, w: &w, dy: &y };
            let algo = op.pick_algorithm().map_err(e("data-gradient algorithm"))?;
            let mut ws = workspace(op.get_workspace_size(algo).map_err(e("data-gradient workspace"))?)?;
            // SAFETY: as above.
            unsafe { op.launch(algo, ws.as_mut(), (1.0, 0.0), &mut ov, &bv, &av) }.map_err(e("data gradient"))
        }
        ConvDir::Weight => {
            let op = ConvBackwardFilter { conv: &conv, x: &x, dw: &w, dy: &y };
            let algo = op.pick_algorithm().map_err(e("weight-gradient algorithm"))?;
            let mut ws = workspace(op.get_workspace_size(algo).map_err(e("weight-gradient workspace"))?)?;
            // SAFETY: as above.
            unsafe { op.launch(algo, ws.as_mut(), (1.0, 0.0), &av, &mut ov, &bv) }.map_err(e("weight gradient"))
        }
    }
}
