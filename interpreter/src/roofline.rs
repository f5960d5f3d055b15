//! On paper, for GPUs we cannot measure here: a plan's step time estimated from the bytes each
//! kernel moves and the flops each product and convolution does, against a GPU's published
//! memory bandwidth and peak arithmetic (`dlc explain FILE --gpu h100`), beside the same for
//! PyTorch eager's kernel sequence (one kernel per op).
//!
//! The model (docs/gpu.md, "Roofline estimates"): a kernel takes
//! `max(bytes / bandwidth, flops / peak) + LAUNCH_US`, kernels run one after another on one
//! stream, and the host keeps the GPU fed (launches are queued ahead). Bytes are every buffer a
//! kernel reads once and writes once (no cache reuse, no re-reads); a product's peak is the
//! GPU's f32 rate for f32 (dlc asks cuBLAS and cuDNN for f32 math, no TF32) and its tensor-core
//! rate for bf16/f16. So an estimate is a bound that a kernel sequence approaches, not a
//! prediction of any library's efficiency. Checked against the tuning guide's figure (the fused
//! GELU on a Quadro RTX 8000: 65 µs eager, 16 µs fused, about a million elements): the model
//! gives 76 µs and 14 µs (`interpreter/tests/it/cli.rs`).

use crate::runner::device_kernel;
use dlc_language::ir::{Graph, NodeId, Op};
use dlc_language::passes::fusion::{Kernel, Plan};
use dlc_language::types::DType;

/// A kernel's fixed cost on the GPU beyond its memory traffic: the launch and the drain between
/// dependent kernels on one stream (1-3 µs on recent GPUs).
pub const LAUNCH_US: f64 = 1.5;

/// A GPU's published figures (dense, no sparsity).
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct GpuSpec {
    pub name: &'static str,
    pub long_name: &'static str,
    /// Memory bandwidth, GB/s.
    pub bandwidth_gbs: f64,
    /// f32 on the CUDA cores, TFLOP/s.
    pub f32_tflops: f64,
    /// bf16/f16 on the tensor cores with f32 accumulation, TFLOP/s.
    pub bf16_tflops: f64,
}

/// The GPUs `--gpu` knows, from their vendor's data sheets.
pub const GPUS: &[GpuSpec] = &[
    GpuSpec { name: "h100", long_name: "NVIDIA H100 SXM5 80GB", bandwidth_gbs: 3350.0, f32_tflops: 67.0, bf16_tflops: 989.0 },
    GpuSpec { name: "h200", long_name: "NVIDIA H200 SXM 141GB", bandwidth_gbs: 4800.0, f32_tflops: 67.0, bf16_tflops: 989.0 },
    GpuSpec { name: "a100", long_name: "NVIDIA A100 SXM4 80GB", bandwidth_gbs: 2039.0, f32_tflops: 19.5, bf16_tflops: 312.0 },
    GpuSpec { name: "l4", long_name: "NVIDIA L4", bandwidth_gbs: 300.0, f32_tflops: 30.3, bf16_tflops: 121.0 },
    GpuSpec { name: "rtx8000", long_name: "NVIDIA Quadro RTX 8000", bandwidth_gbs: 672.0, f32_tflops: 16.3, bf16_tflops: 130.5 },
];

pub fn gpu(name: &str) -> Result<GpuSpec, String> {
    GPUS.iter()
        .copied()
        .find(|g| g.name.eq_ignore_ascii_case(name))
        .ok_or_else(|| format!("no GPU called `{name}` (known: {})", GPUS.iter().map(|g| g.name).collect::<Vec<_>>().join(", ")))
}

/// One kernel's traffic and arithmetic.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Work {
    pub what: String,
    pub bytes: u64,
    pub flops: u64,
    /// Whether its flops run on the tensor cores (bf16/f16 products).
    #[serde(skip)]
    pub tensor: bool,
}

impl Work {
    /// Its time on `gpu`, µs.
    pub fn us(&self, gpu: &GpuSpec) -> f64 {
        let peak = if self.tensor { gpu.bf16_tflops } else { gpu.f32_tflops };
        let memory = self.bytes as f64 / (gpu.bandwidth_gbs * 1e3);
        let compute = self.flops as f64 / (peak * 1e6);
        memory.max(compute) + LAUNCH_US
    }
}

/// A plan's estimate on one GPU, and PyTorch eager's for the same ops.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Estimate {
    pub gpu: GpuSpec,
    pub launches: usize,
    pub megabytes: f64,
    pub gflops: f64,
    pub predicted_ms: f64,
    pub eager_launches: usize,
    pub eager_megabytes: f64,
    pub eager_predicted_ms: f64,
    /// The kernels that take most of the estimate, longest first (at most five).
    pub largest: Vec<(String, f64)>,
}

fn numel(g: &Graph, n: NodeId) -> u64 {
    g.node(n).shape.iter().map(|d| d.as_known().unwrap_or(0).max(0) as u64).product()
}

fn bytes_of(g: &Graph, n: NodeId) -> u64 {
    let per = match g.node(n).dtype {
        DType::F64 | DType::I64 => 8,
        DType::BF16 | DType::F16 => 2,
        DType::Bool | DType::U8 => 1,
        _ => 4,
    };
    numel(g, n) * per
}

/// A view (PyTorch moves no data for it): a reshape, a broadcast, a permutation.
fn is_view(op: &Op) -> bool {
    matches!(op, Op::Reshape | Op::Expand | Op::Permute(_) | Op::Detach | Op::Recompute)
}

/// What `n` reads when PyTorch runs it alone: each operand's own storage, through views.
fn eager_read(g: &Graph, mut s: NodeId) -> u64 {
    while is_view(&g.node(s).op) && !g.node(s).src.is_empty() {
        s = g.node(s).src[0];
    }
    if matches!(g.node(s).op, Op::Const(_)) {
        return 0;
    }
    bytes_of(g, s)
}

/// A library op's work: products and convolutions with their flops, anything else its operands
/// and its output once.
fn library(g: &Graph, n: NodeId) -> Work {
    let node = g.node(n);
    let io: u64 = node.src.iter().map(|s| eager_read(g, *s)).sum::<u64>() + bytes_of(g, n);
    let tensor = matches!(node.dtype, DType::BF16 | DType::F16);
    let flops = match &node.op {
        Op::MatMul => {
            let a = &g.node(node.src[0]).shape;
            let k = a.last().and_then(|d| d.as_known()).unwrap_or(0).max(0) as u64;
            2 * numel(g, n) * k
        }
        // Each output element of a convolution (or of either gradient, by symmetry) is a dot
        // product of C/groups x KH x KW terms, and the three computations do equal work.
        Op::Conv2d(_) | Op::Conv2dGradInput(_) | Op::Conv2dGradWeight(_) => {
            let w = if matches!(node.op, Op::Conv2dGradWeight(_)) { n } else { node.src[1] };
            let y = match node.op {
                Op::Conv2d(_) => n,
                Op::Conv2dGradInput(_) => node.src[0],
                _ => node.src[1],
            };
            let w_shape: Vec<u64> = g.node(w).shape.iter().map(|d| d.as_known().unwrap_or(0).max(0) as u64).collect();
            let per_output: u64 = w_shape.iter().skip(1).product();
            2 * numel(g, y) * per_output
        }
        _ => 0,
    };
    Work { what: node.op.kind_name(), bytes: io, flops, tensor: tensor && flops > 0 }
}

/// The kernels `plan` runs on a GPU, as dlc runs them.
pub fn fused_work(g: &Graph, plan: &Plan) -> Vec<Work> {
    let mut out = vec![];
    for k in &plan.kernels {
        match k {
            Kernel::View(_) | Kernel::Free(_) => {}
            Kernel::Library(n) if g.node(*n).src.is_empty() => {} // computed once, kept
            // (Products and convolutions have no generated kernel: they are library calls.)
            other => match device_kernel(g, other) {
                Ok(Some((kernel, _))) => {
                    let bytes = kernel.params().iter().map(|(p, _)| (p.len * p.ty.bytes()) as u64).sum();
                    out.push(Work { what: kernel.kind().to_string(), bytes, flops: 0, tensor: false });
                }
                _ => match other {
                    Kernel::Library(n) => out.push(library(g, *n)),
                    // The product, reading the bias (or the mask) as it writes its rows.
                    Kernel::Gemm(gk) => {
                        let mut w = library(g, gk.product);
                        w.bytes += gk.bias.into_iter().chain(gk.mask).map(|n| bytes_of(g, n)).sum::<u64>();
                        out.push(w);
                    }
                    _ => {}
                },
            },
        }
    }
    out
}

/// The kernels PyTorch eager runs for the same ops: every op of every fused region its own
/// kernel (views free), a row group's reductions their own, library ops as dlc runs them.
pub fn eager_work(g: &Graph, plan: &Plan) -> Vec<Work> {
    let mut out = vec![];
    // Eager runs an epilogue's add and relu as elementwise kernels of their own, as it did
    // when they were members of a region.
    let epilogues = plan.kernels.iter().filter_map(|k| if let Kernel::Gemm(gk) = k { Some(&gk.epilogue[..]) } else { None });
    for nodes in plan.regions().map(|r| &r.nodes[..]).chain(epilogues) {
        for n in nodes {
            let node = g.node(*n);
            if is_view(&node.op) || matches!(node.op, Op::Const(_)) {
                continue;
            }
            let bytes = node.src.iter().map(|s| eager_read(g, *s)).sum::<u64>() + bytes_of(g, *n);
            out.push(Work { what: node.op.kind_name(), bytes, flops: 0, tensor: false });
        }
    }
    for k in &plan.kernels {
        match k {
            Kernel::Rows(rg) => {
                for n in rg.reductions() {
                    out.push(Work {
                        what: g.node(n).op.kind_name(),
                        bytes: eager_read(g, g.node(n).src[0]) + bytes_of(g, n),
                        flops: 0,
                        tensor: false,
                    });
                }
            }
            Kernel::Reduce(rk) => out.push(Work {
                what: "reduce".into(),
                bytes: eager_read(g, g.node(rk.node).src[0]) + bytes_of(g, rk.node),
                flops: 0,
                tensor: false,
            }),
            Kernel::Library(n) if !g.node(*n).src.is_empty() => out.push(library(g, *n)),
            Kernel::Gemm(gk) => out.push(library(g, gk.product)),
            _ => {}
        }
    }
    out
}

/// `plan` on `gpu`, dlc's kernels and eager's.
pub fn estimate(g: &Graph, plan: &Plan, gpu: GpuSpec) -> Estimate {
    let ours = fused_work(g, plan);
    let eager = eager_work(g, plan);
    let total = |w: &[Work]| w.iter().map(|k| k.us(&gpu)).sum::<f64>() / 1e3;
    let mut largest: Vec<(String, f64)> = ours.iter().map(|k| (k.what.clone(), k.us(&gpu))).collect();
    largest.sort_by(|a, b| b.1.total_cmp(&a.1));
    largest.truncate(5);
    Estimate {
        gpu,
        launches: ours.len(),
        megabytes: ours.iter().map(|k| k.bytes).sum::<u64>() as f64 / 1e6,
        gflops: ours.iter().map(|k| k.flops).sum::<u64>() as f64 / 1e9,
        predicted_ms: total(&ours),
        eager_launches: eager.len(),
        eager_megabytes: eager.iter().map(|k| k.bytes).sum::<u64>() as f64 / 1e6,
        eager_predicted_ms: total(&eager),
        largest,
    }
}
