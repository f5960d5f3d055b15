//! f32 convolutions on the GPU through cuDNN (cudarc's `cudnn`, loaded at run time like the rest
//! of CUDA): forward, data gradient and weight gradient in NCHW / OIHW, with FMA math (no TF32:
//! `precision = f32` means f32 products, as on the CPU), or tensor-op math under
//! `precision = tf32`.
//!
//! Each convolution shape is planned once: its descriptors made, and its algorithm chosen by
//! measurement — every deterministic algorithm cuDNN accepts for the shape, timed on the real
//! operands, the fastest kept (the tuning guide's `cudnn.benchmark`). The choice is stored in
//! the tuning file under this GPU, cuDNN version and build, so later runs take it without
//! measuring. A plan's convolutions use a workspace in the plan's arena from its second run
//! on (device_executor/arena.rs); before that, one workspace of this module's, the largest a
//! chosen algorithm needs.
//!
//! Deterministic only: cuDNN's data-gradient ALGO_0 and weight-gradient ALGO_0 / ALGO_3 add with
//! atomics, so two runs from one seed could differ; they are never candidates (PyTorch's
//! `use_deterministic_algorithms` leaves out the same ones).
//!
//! bf16 and f16 convolutions keep their data in that storage and sum in f32, with tensor-op
//! math. Channels-last convolutions (the layout pass chooses them for bf16 and f16, whose
//! tensor-core kernels cuDNN has in NHWC) are described NHWC, tensors and filters both.

use super::driver::{Conv, ConvDir};
use crate::exec::tune_store::{Pick, TuneStore};
use cudarc::cudnn::{sys, ConvBackwardData, ConvBackwardFilter, ConvDescriptor, ConvForward, Cudnn, FilterDescriptor, TensorDescriptor};
use cudarc::driver::{CudaSlice, CudaStream};
use dlc_jit::kir::Ty;
use std::collections::HashMap;
use std::sync::Arc;

use sys::cudnnConvolutionBwdDataAlgo_t as DataAlgo;
use sys::cudnnConvolutionBwdFilterAlgo_t as WeightAlgo;
use sys::cudnnConvolutionFwdAlgo_t as FwdAlgo;

/// The most workspace a candidate may ask for; one that needs more is not tried.
const MAX_WORKSPACE: usize = 1 << 30;
/// Timed launches per candidate (after one untimed); the fastest counts.
const TIMED: usize = 3;

/// One of cuDNN's algorithms for one of the three computations.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Algo {
    Forward(FwdAlgo),
    Data(DataAlgo),
    Weight(WeightAlgo),
}

impl Algo {
    /// The deterministic algorithms for `dir`, in cuDNN's order.
    fn candidates(dir: ConvDir) -> Vec<Algo> {
        match dir {
            ConvDir::Forward => [
                FwdAlgo::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                FwdAlgo::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                FwdAlgo::CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
                FwdAlgo::CUDNN_CONVOLUTION_FWD_ALGO_DIRECT,
                FwdAlgo::CUDNN_CONVOLUTION_FWD_ALGO_FFT,
                FwdAlgo::CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING,
                FwdAlgo::CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD,
                FwdAlgo::CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED,
            ]
            .map(Algo::Forward)
            .to_vec(),
            ConvDir::Data => [
                DataAlgo::CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
                DataAlgo::CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT,
                DataAlgo::CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING,
                DataAlgo::CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD,
                DataAlgo::CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED,
            ]
            .map(Algo::Data)
            .to_vec(),
            ConvDir::Weight => [
                WeightAlgo::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                WeightAlgo::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT,
                WeightAlgo::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED,
                WeightAlgo::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING,
            ]
            .map(Algo::Weight)
            .to_vec(),
        }
    }

    /// cuDNN's name for it (`CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM`), as the tuning file keeps it.
    fn name(self) -> String {
        match self {
            Algo::Forward(a) => format!("{a:?}"),
            Algo::Data(a) => format!("{a:?}"),
            Algo::Weight(a) => format!("{a:?}"),
        }
    }
}

/// A convolution shape's descriptors (data in storage `X`, sums in f32) and chosen algorithm.
struct Planned<X: Storage> {
    x: TensorDescriptor<X>,
    y: TensorDescriptor<X>,
    w: FilterDescriptor<X>,
    conv: ConvDescriptor<f32>,
    algo: Algo,
}

/// A storage type cuDNN convolves in here: f32, bf16, f16 (always with f32 sums).
trait Storage: cudarc::cudnn::CudnnDataType + Copy + 'static {
    const ONE: Self;
    const ZERO: Self;
    /// Whether it is f32 (FMA math, or TF32 under `tf32`); bf16 and f16 use tensor-op math.
    const F32: bool;
}

impl Storage for f32 {
    const ONE: f32 = 1.0;
    const ZERO: f32 = 0.0;
    const F32: bool = true;
}

impl Storage for half::bf16 {
    const ONE: half::bf16 = half::bf16::ONE;
    const ZERO: half::bf16 = half::bf16::ZERO;
    const F32: bool = false;
}

impl Storage for half::f16 {
    const ONE: half::f16 = half::f16::ONE;
    const ZERO: half::f16 = half::f16::ZERO;
    const F32: bool = false;
}

/// cuDNN on the driver's stream, with every convolution shape planned so far.
pub struct Convolutions {
    cudnn: Arc<Cudnn>,
    stream: Arc<CudaStream>,
    /// `Planned<X>` by key (the key names the storage type).
    plans: HashMap<String, std::rc::Rc<dyn std::any::Any>>,
    /// The largest workspace a chosen algorithm needs, shared by every call on the stream, and
    /// the smaller ones it replaced: kept, because a captured graph's convolutions still use
    /// the address they were captured with (device_executor/graphs.rs).
    workspace: Option<CudaSlice<u8>>,
    retired: Vec<CudaSlice<u8>>,
    store: Option<TuneStore>,
    /// `precision = tf32`: tensor-op math (TF32 operands) instead of FMA math.
    tf32: bool,
    /// Algorithms measured in this run, and taken from the tuning file.
    pub measured: usize,
    pub from_file: usize,
}

fn e(what: &'static str) -> impl Fn(cudarc::cudnn::CudnnError) -> String {
    move |err| format!("cuDNN {what}: {err:?}")
}

fn dims(d: [usize; 4]) -> Result<[i32; 4], String> {
    let mut out = [0i32; 4];
    for (o, v) in out.iter_mut().zip(d) {
        *o = i32::try_from(v).map_err(|_| format!("a convolution dimension of {v} is beyond cuDNN's 32-bit sizes"))?;
    }
    Ok(out)
}

impl Convolutions {
    /// cuDNN on `stream`, or why it cannot start (no libcudnn on the library path). `gpu` names
    /// the device in the tuning file's machine key.
    pub fn open(stream: &Arc<CudaStream>, gpu: &str, tf32: bool) -> Result<Convolutions, String> {
        // SAFETY: only tries to open libcudnn by its usual names.
        if !unsafe { sys::is_culib_present() } {
            return Err("cuDNN (libcudnn.so) was not found on the library path".into());
        }
        let cudnn = Cudnn::new(stream.clone()).map_err(|e| format!("cuDNN could not start: {e:?}"))?;
        // SAFETY: cuDNN is loaded (above); the call takes no arguments.
        let version = unsafe { sys::cudnnGetVersion() };
        let machine = format!("{gpu} cuDNN {version} build={}", crate::exec::tune_store::build_id());
        let store = crate::exec::tune_store::default_path().map(|p| TuneStore::open(p, machine));
        Ok(Convolutions {
            cudnn,
            stream: stream.clone(),
            plans: HashMap::new(),
            workspace: None,
            retired: vec![],
            store,
            tf32,
            measured: 0,
            from_file: 0,
        })
    }

    /// Queue `c` on cuDNN's stream: `a` and `b` as `Driver::conv` says, into `out`, with `ws`
    /// as its workspace (the plan's), or the shared one.
    pub fn run(
        &mut self,
        c: &Conv,
        a: &CudaSlice<u8>,
        b: &CudaSlice<u8>,
        out: &mut CudaSlice<u8>,
        ws: Option<&mut CudaSlice<u8>>,
    ) -> Result<(), String> {
        match c.ty {
            Ty::F32 => self.run_as::<f32>(c, a, b, out, ws),
            Ty::BF16 => self.run_as::<half::bf16>(c, a, b, out, ws),
            Ty::F16 => self.run_as::<half::f16>(c, a, b, out, ws),
            other => Err(format!("no cuDNN convolution in {other:?}")),
        }
    }

    /// The workspace `c`'s chosen algorithm needs, once `c` is planned.
    pub fn workspace_of(&self, c: &Conv) -> Option<usize> {
        fn of<X: Storage>(me: &Convolutions, c: &Conv) -> Option<usize> {
            let p = me.plans.get(&me.key(c, X::F32))?.clone().downcast::<Planned<X>>().ok()?;
            workspace_size(&p, p.algo).ok()
        }
        match c.ty {
            Ty::F32 => of::<f32>(self, c),
            Ty::BF16 => of::<half::bf16>(self, c),
            Ty::F16 => of::<half::f16>(self, c),
            _ => None,
        }
    }

    /// A convolution's plan and tuning key (`f32`: whether its storage is f32, which `tf32`
    /// computes with tensor-op math).
    fn key(&self, c: &Conv, f32: bool) -> String {
        let math = if self.tf32 && f32 { " tf32" } else { "" };
        format!("conv {:?} x={:?} w={:?} y={:?} {:?} {:?}{math}", c.dir, c.x, c.w, c.y, c.attrs, c.ty)
    }

    fn run_as<X: Storage>(
        &mut self,
        c: &Conv,
        a: &CudaSlice<u8>,
        b: &CudaSlice<u8>,
        out: &mut CudaSlice<u8>,
        ws: Option<&mut CudaSlice<u8>>,
    ) -> Result<(), String> {
        let key = self.key(c, X::F32);
        let planned = match self.plans.get(&key).cloned().map(|p| p.downcast::<Planned<X>>()) {
            Some(Ok(p)) => p,
            _ => {
                let p = std::rc::Rc::new(self.plan::<X>(&key, c, a, b, out)?);
                self.plans.insert(key, p.clone());
                p
            }
        };
        launch(&planned, planned.algo, ws.or(self.workspace.as_mut()), c, a, b, out)
    }

    /// Descriptors for `c`, and its algorithm: from the tuning file, else measured on these
    /// operands (and stored).
    fn plan<X: Storage>(
        &mut self,
        key: &str,
        c: &Conv,
        a: &CudaSlice<u8>,
        b: &CudaSlice<u8>,
        out: &mut CudaSlice<u8>,
    ) -> Result<Planned<X>, String> {
        // cuDNN takes NCHW sizes whatever the format; a channels-last convolution's operands
        // (`[N, H, W, C]`, filters `[O, kH, kW, I]`) are described by their NCHW sizes and NHWC.
        let cl = c.attrs.channels_last;
        let format = if cl { sys::cudnnTensorFormat_t::CUDNN_TENSOR_NHWC } else { sys::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW };
        let logical = |d: [usize; 4]| dims(if cl { [d[0], d[3], d[1], d[2]] } else { d });
        let a32 = |v: (i64, i64)| [v.0 as i32, v.1 as i32];
        let mut conv = self
            .cudnn
            .create_conv2d::<f32>(
                a32(c.attrs.padding),
                a32(c.attrs.stride),
                a32(c.attrs.dilation),
                sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
            )
            .map_err(e("convolution descriptor"))?;
        let math = if self.tf32 || !X::F32 { sys::cudnnMathType_t::CUDNN_TENSOR_OP_MATH } else { sys::cudnnMathType_t::CUDNN_FMA_MATH };
        conv.set_math_type(math).map_err(e("math type"))?;
        conv.set_group_count(c.attrs.groups as i32).map_err(e("groups"))?;
        let mut p = Planned {
            x: self.cudnn.create_4d_tensor::<X>(format, logical(c.x)?).map_err(e("x descriptor"))?,
            y: self.cudnn.create_4d_tensor::<X>(format, logical(c.y)?).map_err(e("y descriptor"))?,
            w: self.cudnn.create_4d_filter::<X>(format, logical(c.w)?).map_err(e("filter descriptor"))?,
            conv,
            algo: Algo::candidates(c.dir)[0],
        };
        let stored = self.store.as_ref().and_then(|s| s.pick(key));
        if let Some(algo) = stored.and_then(|pick| Algo::candidates(c.dir).into_iter().find(|a| a.name() == pick.name)) {
            if let Ok(bytes) = workspace_size(&p, algo) {
                self.grow_workspace(bytes)?;
                p.algo = algo;
                self.from_file += 1;
                return Ok(p);
            }
        }
        let mut timed: Vec<(Algo, u64)> = vec![];
        for algo in Algo::candidates(c.dir) {
            let Ok(bytes) = workspace_size(&p, algo) else { continue };
            if bytes > MAX_WORKSPACE || self.grow_workspace(bytes).is_err() {
                continue;
            }
            // The untimed launch also tells whether cuDNN takes this algorithm for the shape.
            if launch(&p, algo, self.workspace.as_mut(), c, a, b, out).is_err() || self.wait().is_err() {
                continue;
            }
            let mut best = u64::MAX;
            for _ in 0..TIMED {
                let t0 = std::time::Instant::now();
                launch(&p, algo, self.workspace.as_mut(), c, a, b, out)?;
                self.wait()?;
                best = best.min(t0.elapsed().as_nanos() as u64);
            }
            timed.push((algo, best));
        }
        let &(algo, _) = timed.iter().min_by_key(|(_, ns)| *ns).ok_or_else(|| format!("cuDNN has no algorithm for {key}"))?;
        p.algo = algo;
        self.measured += 1;
        if let Some(store) = &self.store {
            store.put_pick(key.to_string(), Pick { name: algo.name(), ns: timed.iter().map(|(a, ns)| (a.name(), *ns)).collect() });
            // A tuning file that cannot be written costs a measurement next run, nothing more.
            let _ = store.save();
        }
        Ok(p)
    }

    fn grow_workspace(&mut self, bytes: usize) -> Result<(), String> {
        if bytes > 0 && self.workspace.as_ref().is_none_or(|w| w.len() < bytes) {
            // SAFETY: cuDNN's scratch space; nothing reads it before cuDNN writes it.
            let grown = unsafe { self.stream.alloc::<u8>(bytes) }.map_err(|e| format!("a cuDNN workspace of {bytes} bytes: {e:?}"))?;
            if let Some(old) = self.workspace.replace(grown) {
                self.retired.push(old);
            }
        }
        Ok(())
    }

    fn wait(&self) -> Result<(), String> {
        self.stream.synchronize().map_err(|e| format!("waiting for cuDNN: {e:?}"))
    }
}

fn workspace_size<X: Storage>(p: &Planned<X>, algo: Algo) -> Result<usize, String> {
    match algo {
        Algo::Forward(a) => ConvForward { conv: &p.conv, x: &p.x, w: &p.w, y: &p.y }.get_workspace_size(a),
        Algo::Data(a) => ConvBackwardData { conv: &p.conv, dx: &p.x, w: &p.w, dy: &p.y }.get_workspace_size(a),
        Algo::Weight(a) => ConvBackwardFilter { conv: &p.conv, x: &p.x, dw: &p.w, dy: &p.y }.get_workspace_size(a),
    }
    .map_err(e("workspace size"))
}

/// Queue `algo` for `c` on `p`'s descriptors.
fn launch<X: Storage>(
    p: &Planned<X>,
    algo: Algo,
    ws: Option<&mut CudaSlice<u8>>,
    c: &Conv,
    a: &CudaSlice<u8>,
    b: &CudaSlice<u8>,
    out: &mut CudaSlice<u8>,
) -> Result<(), String> {
    let too_small = || "a convolution's buffer is smaller than its shape".to_string();
    let [sa, sb, so] = c.operands().map(|d| d.iter().product::<usize>());
    // SAFETY: the views hold the descriptors' element counts of `X` (checked by `transmute`'s
    // lengths), in the NCHW / OIHW layouts the descriptors state; each launch below reads and
    // writes them as `Conv::operands` orders them; the workspace is at least the size cuDNN
    // asked for this algorithm (`grow_workspace`).
    unsafe {
        let (av, bv) = (a.transmute::<X>(sa).ok_or_else(too_small)?, b.transmute::<X>(sb).ok_or_else(too_small)?);
        let mut ov = out.transmute_mut::<X>(so).ok_or_else(too_small)?;
        match algo {
            Algo::Forward(al) => ConvForward { conv: &p.conv, x: &p.x, w: &p.w, y: &p.y }
                .launch(al, ws, (X::ONE, X::ZERO), &av, &bv, &mut ov)
                .map_err(e("forward")),
            Algo::Data(al) => ConvBackwardData { conv: &p.conv, dx: &p.x, w: &p.w, dy: &p.y }
                .launch(al, ws, (X::ONE, X::ZERO), &mut ov, &bv, &av)
                .map_err(e("data gradient")),
            Algo::Weight(al) => ConvBackwardFilter { conv: &p.conv, x: &p.x, dw: &p.w, dy: &p.y }
                .launch(al, ws, (X::ONE, X::ZERO), &av, &mut ov, &bv)
                .map_err(e("weight gradient")),
        }
    }
}
