//! Fused reductions on the CPU (`ReduceKernel`: a sum over some axes of values its prologue
//! region computes, never written out; passes::prologue), and sibling reductions in one pass.
//!
//! Siblings: a plan often has several sums over the same axes of values of the same shape that
//! read the same activations and none of which reads another's result. Batch norm's backward
//! pass is the case: autodiff of `(x - mu) / sqrt(v + eps) * w + b` gives sums for the bias, the
//! weight and the paths through the mean and the variance, three of them independent, each
//! reading the 8 MiB activations of the conv-BN step again. Run together, each activation is read
//! once for all of them. The executor finds them at run time: the reductions among the next
//! `LOOKAHEAD` kernels over the same axes and shape whose inputs are all computed already (so
//! none depends on another, or on a kernel between them) run with the first, as one region
//! computing every one's prologue, each summed exactly as alone (sum_axes.rs), so results are
//! bit for bit the same. A plain sum of an f32 tensor already computed (the bias gradient's
//! `sum(dy)`, a library kernel) joins such a pass too, its tensor read as the pass reads its
//! chunks. The device executor runs the plan's kernels as they are.

use super::{fused, sum_axes, Executor};
use crate::runtime::tensor::{Data, Tensor};
use crate::runtime::RuntimeError;
use dlc_language::ir::{Graph, NodeId, Op, ReduceOp};
use dlc_language::passes::fusion::{Kernel, Region};
use dlc_language::passes::prologue::ReduceKernel;
use std::collections::HashSet;

/// How far ahead in the plan a sibling is looked for.
const LOOKAHEAD: usize = 8;

/// The axes a reduction node reduces.
fn axes(g: &Graph, node: NodeId) -> &[usize] {
    let Op::Reduce(_, axes) = &g.node(node).op else { unreachable!("a reduction kernel's node is a reduction") };
    axes
}

/// Reductions run in one pass: fused ones (their prologues merged into one region) and plain
/// sums of computed tensors.
#[derive(Default)]
pub(super) struct Pass<'p> {
    pub reduces: Vec<&'p ReduceKernel>,
    pub plain: Vec<NodeId>,
}

/// One region computing every kernel's prologue: their members (each once, in kernel order),
/// the values they read from outside, and their outputs.
fn merged(kernels: &[&ReduceKernel]) -> Region {
    let mut nodes = vec![];
    let mut seen = HashSet::new();
    for rk in kernels {
        nodes.extend(rk.prologue.nodes.iter().filter(|n| seen.insert(**n)));
    }
    let mut inputs = vec![];
    let mut outputs = vec![];
    for rk in kernels {
        // (`seen` holds the members: an input is added once, and never one a region computes.)
        inputs.extend(rk.prologue.inputs.iter().filter(|n| seen.insert(**n)));
    }
    let mut out_seen = HashSet::new();
    for rk in kernels {
        outputs.extend(rk.prologue.outputs.iter().filter(|n| out_seen.insert(**n)));
    }
    Region { nodes, inputs, outputs }
}

impl Executor {
    /// A plain sum kernel (`Op::Reduce(Sum)`) of an f32 tensor computed already: its shape.
    fn plain_sum(&self, g: &Graph, n: NodeId) -> Option<Vec<usize>> {
        let node = g.node(n);
        let Op::Reduce(ReduceOp::Sum, _) = &node.op else { return None };
        let x = self.cache.get(node.src.first()?)?;
        matches!(x.data, Data::F32(_)).then(|| x.shape.clone())
    }

    /// The reductions to run now with kernel `kernels[i]`, itself first (see the module's
    /// comment): for a fused reduction at least itself; for a plain sum, itself with the fused
    /// reductions that can join it, or nothing when none can (it then runs as a library call).
    pub(super) fn pass_at<'p>(&self, g: &Graph, kernels: &'p [Kernel], i: usize) -> Pass<'p> {
        let mut pass = Pass::default();
        let (first_axes, shape) = match &kernels[i] {
            Kernel::Reduce(rk) => {
                pass.reduces.push(rk);
                (axes(g, rk.node), fused::concrete(g, rk.prologue.output()))
            }
            Kernel::Library(n) if self.fuse => match self.plain_sum(g, *n) {
                Some(shape) => {
                    pass.plain.push(*n);
                    (axes(g, *n), shape)
                }
                None => return pass,
            },
            _ => return pass,
        };
        if !self.fuse {
            return pass;
        }
        // Members of the kernels taken so far: a sibling whose last member is one of them would
        // leave the merged region without an output at its end.
        let mut members: HashSet<NodeId> = pass.reduces.iter().flat_map(|rk| rk.prologue.nodes.iter().copied()).collect();
        let mut summed: HashSet<NodeId> = pass.reduces.iter().map(|rk| rk.input).collect();
        let mut joined = 0;
        for k in kernels.iter().skip(i + 1).take(LOOKAHEAD) {
            match k {
                Kernel::Reduce(rk)
                    if rk.prologue.inputs.iter().all(|n| self.cache.contains_key(n))
                        && !rk.outputs().iter().all(|o| self.cache.contains_key(o))
                        && axes(g, rk.node) == first_axes
                        && fused::concrete(g, rk.prologue.output()) == shape
                        && !members.contains(&rk.prologue.output())
                        && summed.insert(rk.input) =>
                {
                    members.extend(rk.prologue.nodes.iter().copied());
                    pass.reduces.push(rk);
                    joined += 1;
                }
                Kernel::Library(n)
                    if !self.cache.contains_key(n) && self.plain_sum(g, *n).as_ref() == Some(&shape) && axes(g, *n) == first_axes =>
                {
                    pass.plain.push(*n);
                    joined += 1;
                }
                _ => {}
            }
        }
        if pass.reduces.is_empty() {
            // Plain sums alone: each runs as its library call.
            pass.plain.clear();
        } else {
            JOINED.fetch_add(joined, std::sync::atomic::Ordering::Relaxed);
        }
        pass
    }

    /// Run a pass, caching what it computes: each fused reduction's sum of the values its
    /// prologue computes, never written out, and the prologue's other outputs, written in full;
    /// each plain sum's sums; all in one pass over the values.
    pub(super) fn run_pass(&mut self, g: &Graph, pass: &Pass) -> Result<(), RuntimeError> {
        let kernels = &pass.reduces;
        let region = if kernels.len() == 1 { kernels[0].prologue.clone() } else { merged(kernels) };
        let program = self.kernels.program(g, &region)?;
        let inputs: Vec<std::sync::Arc<Vec<f32>>> = region.inputs.iter().map(|i| fused::as_f32(&self.cache[i])).collect();
        let shape = fused::concrete(g, region.output());
        let numel: usize = shape.iter().product();
        let position = |n: NodeId| region.outputs.iter().position(|o| *o == n).expect("a kernel's values are the region's outputs");
        let summed: Vec<usize> = kernels.iter().map(|rk| position(rk.input)).collect();
        let others: Vec<usize> = (0..region.outputs.len()).filter(|o| !summed.contains(o)).collect();
        let mut written: Vec<Vec<f32>> = others.iter().map(|_| Vec::with_capacity(numel)).collect();
        let unwritten = written.iter_mut().map(|b| sum_axes::Unwritten(b.spare_capacity_mut().as_mut_ptr())).collect();
        let plain: Vec<Tensor> = pass.plain.iter().map(|n| self.cache[&g.node(*n).src[0]].clone()).collect();
        let also = plain
            .iter()
            .map(|t| if let Data::F32(v) = &t.data { v.as_slice() } else { unreachable!("a plain sum of f32 values") })
            .collect();
        let values = sum_axes::RegionValues {
            program: &program,
            inputs: inputs.iter().map(|v| v.as_slice()).collect(),
            summed,
            written: unwritten,
            also,
        };
        // A measured prologue (see `fused::Tune`) counts this launch: native or not for all of
        // it, as `native_now` says until the launch is recorded.
        let native = program.native_now();
        let started = std::time::Instant::now();
        let mut sums = sum_axes::sum_axes_many(&sum_axes::Values::Region(values), &shape, axes(g, kernels[0].node)).into_iter();
        program.record(native, started.elapsed().as_nanos() as u64);
        let dtypes = program.output_dtypes();
        let written: Vec<Tensor> = others
            .iter()
            .zip(written)
            .map(|(o, mut v)| {
                // SAFETY: the sum visited every position of the region once and wrote each output there.
                unsafe { v.set_len(numel) };
                fused::output_tensor(dtypes[*o], shape.clone(), v)
            })
            .collect();
        for rk in kernels {
            let sum = sums.next().expect("a fused reduction's sums");
            self.cache.insert(rk.node, Tensor::from_f64(g.node(rk.node).dtype, fused::concrete(g, rk.node), sum));
            for o in rk.prologue.outputs.iter().filter(|o| **o != rk.input) {
                let w = others.iter().position(|x| *x == position(*o)).expect("another output is written");
                // (Two kernels may both give a value their regions share.)
                self.cache.insert(*o, written[w].clone());
            }
        }
        // As `reduce::reduce` gives a sum of an f32 tensor: in the tensor's dtype.
        for (n, x) in pass.plain.iter().zip(&plain) {
            self.cache.insert(*n, Tensor::from_f64(x.dtype, fused::concrete(g, *n), sums.next().expect("a plain sum's sums")));
        }
        Ok(())
    }
}

/// Siblings run with an earlier reduction so far in this process (for the tests).
static JOINED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[cfg(test)]
mod tests {
    use crate::{ExecMode, Program};

    fn printed_bits(src: &str, mode: ExecMode) -> Vec<Vec<u64>> {
        let p = Program::run_with("siblings.dl", src, None, false, 0, mode);
        assert!(p.ok, "{src}\n{:?}", p.diagnostics());
        p.output().printed_bits()
    }

    /// A plain sum and three fused sums over the same axes of values computed from the same
    /// activations, none reading another's result (batch norm's backward pass has them), and a
    /// fifth that reads one of them: the first four run in one pass, the fifth after, and every
    /// value is bit for bit what one kernel per op gives. (Checked to fail when a sibling's values
    /// are summed into another's sums.)
    #[test]
    fn independent_sums_over_the_same_axes_run_in_one_pass() {
        let src = "let x = randn(f32[8, 16, 12, 12], seed: 3)\n\
                   let d = randn(f32[8, 16, 12, 12], seed: 4)\n\
                   let a = sum(d * x, axis: (0, 2, 3), keepdim: true)\n\
                   let b = sum(tanh(d), axis: (0, 2, 3), keepdim: true)\n\
                   let c = sum(exp(x * 0.1) * d, axis: (0, 2, 3), keepdim: true)\n\
                   let p = sum(d, axis: (0, 2, 3), keepdim: true)\n\
                   print(p, a, b, c, sum(d * a + x, axis: (0, 2, 3)))\n";
        let before = super::JOINED.load(std::sync::atomic::Ordering::Relaxed);
        let fused = printed_bits(src, ExecMode::Fused);
        let joined = super::JOINED.load(std::sync::atomic::Ordering::Relaxed) - before;
        assert_eq!(fused, printed_bits(src, ExecMode::Eager));
        assert!(joined >= 3, "three sums ran with the first ({joined} joined)");
    }

    /// Values a fused reduction used to write and later regions now compute themselves
    /// (passes::inline_written: `d * w` and batch norm's `x - mean` here), and the sums and outputs over them, are bit for bit what one kernel
    /// per op gives. (Batch norm's backward too: tests/it/jit.rs trains a conv-BN model fused and
    /// eager to the same bits.)
    #[test]
    fn values_recomputed_by_their_readers_equal_eager() {
        let src = "let x = randn(f32[4, 3, 5, 5], seed: 0)\n\
                   let d = randn(f32[4, 3, 5, 5], seed: 1)\n\
                   let w = randn(f32[1, 3, 1, 1], seed: 2)\n\
                   let g = d * w\n\
                   let s = sum(g * x, axis: (0, 2, 3), keepdim: true)\n\
                   let mu = mean(x, axis: (0, 2, 3), keepdim: true)\n\
                   let v = mean((x - mu) ** 2, axis: (0, 2, 3), keepdim: true)\n\
                   print(g + s, (x - mu) / sqrt(v + 1e-5))\n";
        assert_eq!(printed_bits(src, ExecMode::Fused), printed_bits(src, ExecMode::Eager));
    }
}
