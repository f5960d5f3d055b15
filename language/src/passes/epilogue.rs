//! GEMM epilogues: a matrix product whose only reader adds a bias broadcast along its rows
//! (`x @ w.T + b`, every `Linear`), and a `relu` after the add when nothing else reads the sum,
//! become one kernel (`Kernel::Gemm`): on a GPU cuBLASLt's `BIAS` / `RELU_BIAS` epilogues, on
//! the CPU one pass over the product's rows as they leave the product. The product's value is
//! never written and read back, and the fused region that added the bias loses the add (and
//! disappears when that was all it did, as in an evaluation's last layer).
//!
//! f32 products are taken, and under autocast, on a device whose products write their rounded
//! bf16 or f16 values as f32s (the CPU: `widened`), a low-precision product with the cast to
//! f32 that stands between it and the add (`GemmKernel::widens`): that cast is exact there and
//! does nothing. On a GPU it converts stored bf16, so there the product stays on its own.
//! Such a widened product also takes a relu's backward, `where(0 < y, x, 0)` with `y` the
//! relu's output computed before (`GemmKernel::mask`): dlc's bf16 tiles keep or zero each sum in
//! their registers, and the gradient is written once instead of twice.
//! A relu is taken in training as well: autodiff makes its backward mask from relu's output
//! (`0 < y`), which the kernel writes, so the sum before it is not needed. GELU is exact (erf)
//! in DL, and cuBLASLt's is the tanh form, so it is never taken.

use crate::ir::plan::{GemmKernel, Kernel, Region};
use crate::ir::{BinaryOp, Graph, NodeId, Op};
use crate::types::DType;
use std::collections::{HashMap, HashSet};

/// Every node the plan computes, with the members of the plan that read it.
fn readers_in(g: &Graph, kernels: &[Kernel]) -> HashMap<NodeId, HashSet<NodeId>> {
    let mut readers: HashMap<NodeId, HashSet<NodeId>> = HashMap::new();
    for k in kernels {
        for m in k.members() {
            for s in &g.node(m).src {
                readers.entry(*s).or_default().insert(m);
            }
        }
    }
    readers
}

/// Whether `n` is 0.0 (a constant, broadcast or not).
fn is_zero(g: &Graph, n: NodeId) -> bool {
    match g.node(n).op {
        Op::Const(bits) => f64::from_bits(bits) == 0.0,
        Op::Expand | Op::Reshape => is_zero(g, g.node(n).src[0]),
        _ => false,
    }
}

/// The bias of `add` when it is `product + expand(bias)` with `bias` shaped `[1, .., 1, n]`
/// (one value per column of the product, the same for every row and batch).
fn bias_of(g: &Graph, add: NodeId, product: NodeId) -> Option<NodeId> {
    let node = g.node(add);
    if node.op != Op::Binary(BinaryOp::Add) || node.shape != g.node(product).shape {
        return None;
    }
    let other = if node.src[0] == product { node.src[1] } else { node.src[0] };
    let e = g.node(other);
    if e.op != Op::Expand || e.dtype != DType::F32 || node.src[0] == node.src[1] {
        return None;
    }
    let bias = e.src[0];
    let shape = &g.node(bias).shape;
    let last = shape.len().checked_sub(1)?;
    let per_column = shape[..last].iter().all(|d| d.as_known() == Some(1)) && shape[last] == node.shape[last];
    per_column.then_some(bias)
}

/// `(cmp, where)` when the only readers of `x` make `relu(x) = where(0 < x, x, 0)` and nothing
/// else reads the comparison (training's backward does, so there it is not taken).
fn relu_after(g: &Graph, x: NodeId, readers: &HashMap<NodeId, HashSet<NodeId>>) -> Option<(NodeId, NodeId)> {
    let of_x = readers.get(&x)?;
    let cmp = *of_x.iter().find(|r| g.node(**r).op == Op::Binary(BinaryOp::CmpLt))?;
    let sel = *readers.get(&cmp)?.iter().next()?;
    let (c, s) = (g.node(cmp), g.node(sel));
    let is_relu = c.src[1] == x
        && is_zero(g, c.src[0])
        && s.op == Op::Where
        && s.src[0] == cmp
        && s.src[1] == x
        && is_zero(g, s.src[2])
        && readers[&cmp].len() == 1;
    let only = of_x.iter().all(|r| *r == cmp || *r == sel);
    (is_relu && only).then_some((cmp, sel))
}

/// The region rebuilt without `gone` and the members only they read (the bias's broadcast,
/// relu's zeros): inputs recomputed from what its members read, outputs kept but for the removed
/// ones. `None` when nothing is left.
fn without(g: &Graph, r: &Region, gone: &HashSet<NodeId>) -> Option<Region> {
    let mut nodes: Vec<NodeId> = r.nodes.iter().copied().filter(|n| !gone.contains(n)).collect();
    loop {
        let read: HashSet<NodeId> = nodes.iter().flat_map(|n| g.node(*n).src.iter().copied()).collect();
        let before = nodes.len();
        nodes.retain(|n| r.outputs.contains(n) || read.contains(n));
        if nodes.len() == before {
            break;
        }
    }
    let members: HashSet<NodeId> = nodes.iter().copied().collect();
    let mut inputs = vec![];
    for n in &nodes {
        for s in &g.node(*n).src {
            if !members.contains(s) && !inputs.contains(s) {
                inputs.push(*s);
            }
        }
    }
    let outputs: Vec<NodeId> = r.outputs.iter().copied().filter(|o| members.contains(o)).collect();
    (!outputs.is_empty()).then_some(Region { nodes, inputs, outputs })
}

/// One epilogue: the product kernel at `at`, taken by the region kernel at `region`.
struct Found {
    at: usize,
    region: usize,
    gemm: GemmKernel,
    rest: Option<Region>,
}

/// The first product in `kernels` from `from` on that an epilogue can take.
/// With `widened`, a low-precision product's only reader may be its cast to f32 (see the
/// module's comment).
fn find(
    g: &Graph,
    kernels: &[Kernel],
    roots: &[NodeId],
    readers: &HashMap<NodeId, HashSet<NodeId>>,
    from: usize,
    widened: bool,
) -> Option<Found> {
    let one_reader = |n: NodeId| readers.get(&n).map_or(0, |r| r.len()) == 1 && !roots.contains(&n);
    for (at, k) in kernels.iter().enumerate().skip(from) {
        let Kernel::Library(product) = k else { continue };
        let p = g.node(*product);
        let low = matches!(p.dtype, DType::BF16 | DType::F16);
        if p.op != Op::MatMul || !(p.dtype == DType::F32 || widened && low) || !one_reader(*product) {
            continue;
        }
        let reader = *readers[product].iter().next().expect("one reader");
        // The value the bias is added to: the product, or its widening to f32.
        let (sum_of, widen) = if low {
            let cast = g.node(reader);
            if cast.op != Op::Cast || cast.dtype != DType::F32 || !one_reader(reader) {
                continue;
            }
            (reader, Some(reader))
        } else {
            (*product, None)
        };
        let Some(next) = readers.get(&sum_of).and_then(|r| (r.len() == 1).then(|| *r.iter().next().expect("one reader"))) else { continue };
        let Some(region) = kernels.iter().position(|k| matches!(k, Kernel::Fused(r) if r.nodes.contains(&next))) else { continue };
        let Kernel::Fused(r) = &kernels[region] else { unreachable!("found as a fused region") };
        if widen.is_some_and(|c| !r.nodes.contains(&c)) {
            continue;
        }
        let (bias, mask, taken) = if let Some(bias) = bias_of(g, next, sum_of) {
            let relu = relu_after(g, next, readers)
                .filter(|(c, s)| r.nodes.contains(c) && r.nodes.contains(s) && !roots.contains(c) && !roots.contains(&next));
            let mut taken = vec![next];
            taken.extend(relu.map(|(c, s)| [c, s]).into_iter().flatten());
            (Some(bias), None, taken)
        } else if let Some((cmp, y)) = widen.and_then(|_| mask_of(g, next, sum_of, readers)) {
            // The mask's source is read from before the kernel, not computed in the region.
            if !r.nodes.contains(&cmp) || r.nodes.contains(&y) || roots.contains(&cmp) {
                continue;
            }
            (None, Some(y), vec![cmp, next])
        } else {
            continue;
        };
        let epilogue: Vec<NodeId> = widen.into_iter().chain(taken).collect();
        let rest = without(g, r, &epilogue.iter().copied().collect());
        let gemm = GemmKernel { product: *product, bias, mask, epilogue, widens: widen.is_some() };
        return Some(Found { at, region, gemm, rest });
    }
    None
}

/// `(cmp, y)` when `sel` is `where(0 < y, x, 0)` (a relu's backward: `y` the relu's output, `x`
/// the gradient), `y` shaped as `x` and in f32, and nothing but `sel` reads the comparison.
fn mask_of(g: &Graph, sel: NodeId, x: NodeId, readers: &HashMap<NodeId, HashSet<NodeId>>) -> Option<(NodeId, NodeId)> {
    let s = g.node(sel);
    if s.op != Op::Where || s.src[1] != x || s.src[0] == x || !is_zero(g, s.src[2]) {
        return None;
    }
    let cmp = s.src[0];
    let c = g.node(cmp);
    if c.op != Op::Binary(BinaryOp::CmpLt) || !is_zero(g, c.src[0]) || readers.get(&cmp).map_or(0, |r| r.len()) != 1 {
        return None;
    }
    let y = c.src[1];
    (g.node(y).shape == g.node(x).shape && g.node(y).dtype == DType::F32).then_some((cmp, y))
}

/// Give every product an epilogue that can take one (see the module's comment). The kernel
/// runs where its region ran, just before what is left of the region: the product's only
/// reader is there, and the bias is written before it since the region read it.
///
/// Who reads what is found once: a rewrite moves nodes between kernels but changes no node's
/// readers that a later match looks at (products, sums, comparisons). Products before a match
/// were taken or refused already, and a rewrite changes neither, so the search goes on from it.
pub fn fuse_epilogues(g: &Graph, mut kernels: Vec<Kernel>, roots: &[NodeId], widened: bool) -> Vec<Kernel> {
    let readers = readers_in(g, &kernels);
    let mut from = 0;
    while let Some(Found { at, region, gemm, rest }) = find(g, &kernels, roots, &readers, from, widened) {
        let mut placed = vec![Kernel::Gemm(gemm)];
        placed.extend(rest.map(Kernel::Fused));
        kernels.splice(region..=region, placed);
        kernels.remove(at);
        from = at;
    }
    kernels
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::test_node as node;

    /// `where(0 < y, x, 0)` for `x` and `y` f32 [4, 5]: a relu (`y` = `x`) or its backward.
    fn where_positive(g: &mut Graph, y: NodeId, x: NodeId) -> NodeId {
        let f = DType::F32;
        let zero = node(g, Op::Const(0f64.to_bits()), f, &[], vec![]);
        let z1 = node(g, Op::Reshape, f, &[1, 1], vec![zero]);
        let z = node(g, Op::Expand, f, &[4, 5], vec![z1]);
        let c = node(g, Op::Binary(BinaryOp::CmpLt), DType::Bool, &[4, 5], vec![z, y]);
        node(g, Op::Where, f, &[4, 5], vec![c, x, z])
    }

    /// `x @ w` for x [4, 3] and w [3, 5] in `dtype`, and what the bias is added to: the product,
    /// or its widening to f32 (as autocast leaves a low-precision product).
    fn product_in(g: &mut Graph, dtype: DType) -> (NodeId, NodeId) {
        let x = node(g, Op::Input(0), dtype, &[4, 3], vec![]);
        let w = node(g, Op::Input(1), dtype, &[3, 5], vec![]);
        let p = node(g, Op::MatMul, dtype, &[4, 5], vec![x, w]);
        let wide = if dtype == DType::F32 { p } else { node(g, Op::Cast, DType::F32, &[4, 5], vec![p]) };
        (p, wide)
    }

    /// `relu(x @ w + b)`, the product in `dtype` (widened to f32 before the add), b [5]:
    /// (graph, product, add, where).
    fn linear_relu_in(dtype: DType) -> (Graph, NodeId, NodeId, NodeId) {
        let mut g = Graph::default();
        let f = DType::F32;
        let (p, wide) = product_in(&mut g, dtype);
        let b = node(&mut g, Op::Input(2), f, &[5], vec![]);
        let b2 = node(&mut g, Op::Reshape, f, &[1, 5], vec![b]);
        let e = node(&mut g, Op::Expand, f, &[4, 5], vec![b2]);
        let add = node(&mut g, Op::Binary(BinaryOp::Add), f, &[4, 5], vec![wide, e]);
        let s = where_positive(&mut g, add, add);
        (g, p, add, s)
    }

    fn linear_relu() -> (Graph, NodeId, NodeId, NodeId) {
        linear_relu_in(DType::F32)
    }

    /// The products with epilogues when the plan is fusion and this pass alone (`widened` as
    /// the device says), verified.
    fn widened_gemms(g: &Graph, roots: &[NodeId], widened: bool) -> (Vec<GemmKernel>, crate::ir::plan::Plan) {
        let kernels = fuse_epilogues(g, crate::passes::fusion::plan(g, roots, true, widened), roots, widened);
        let plan = crate::ir::plan::Plan { kernels, roots: roots.to_vec() };
        crate::ir::verify::plan(g, &plan, &[], "epilogue").expect("verified");
        (plan.kernels.iter().filter_map(|k| if let Kernel::Gemm(gk) = k { Some(gk.clone()) } else { None }).collect(), plan)
    }

    fn gemms(g: &Graph, roots: &[NodeId]) -> Vec<GemmKernel> {
        let plan = crate::passes::driver::plan(g, roots, true).expect("verified").plan;
        plan.kernels.iter().filter_map(|k| if let Kernel::Gemm(gk) = k { Some(gk.clone()) } else { None }).collect()
    }

    #[test]
    fn a_linear_layer_and_its_relu_become_the_products_epilogue() {
        let (g, p, add, s) = linear_relu();
        let found = gemms(&g, &[s]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].product, found[0].epilogue.first(), found[0].output()), (p, Some(&add), s));
        assert!(found[0].relu());
        // The region that did the add and the relu had nothing else: it is gone.
        let plan = crate::passes::driver::plan(&g, &[s], true).unwrap().plan;
        assert_eq!(plan.kernel_count(), 1, "{:?}", plan.kernels);
    }

    #[test]
    fn a_sum_read_elsewhere_keeps_its_relu_and_a_product_read_elsewhere_keeps_its_add() {
        let (mut g, p, add, s) = linear_relu();
        let doubled = node(&mut g, Op::Binary(BinaryOp::Add), DType::F32, &[4, 5], vec![add, add]);
        let found = gemms(&g, &[s, doubled]);
        assert_eq!(found.len(), 1);
        assert!(!found[0].relu(), "the sum is written, so the relu stays in its region");
        assert_eq!(found[0].output(), add);
        let also_product = node(&mut g, Op::Unary(crate::ir::UnaryOp::Exp), DType::F32, &[4, 5], vec![p]);
        assert!(gemms(&g, &[s, also_product]).is_empty(), "the product itself is read: no epilogue");
        // Without fusion (the eager reference) there is none either.
        let eager = crate::passes::driver::plan(&g, &[s], false).unwrap().plan;
        assert!(!eager.kernels.iter().any(|k| matches!(k, Kernel::Gemm(_))));
    }

    /// `relu(f32(x @ w) + b)` with a bf16 product, as autocast leaves a `Linear` under bf16.
    #[test]
    fn a_bf16_product_takes_its_widening_only_where_products_write_f32() {
        let (g, p, add, s) = linear_relu_in(DType::BF16);
        let wide = g.node(add).src[0];
        let (found, cpu) = widened_gemms(&g, &[s], true);
        assert_eq!(found.len(), 1, "{:?}", cpu.kernels);
        assert_eq!((found[0].product, found[0].epilogue.first(), found[0].output()), (p, Some(&wide), s));
        assert!(found[0].widens && found[0].relu());
        assert_eq!(cpu.kernel_count(), 1, "{:?}", cpu.kernels);
        // Where products write stored bf16 (cuBLAS), the cast converts: the product stays alone.
        assert!(widened_gemms(&g, &[s], false).0.is_empty());
    }

    /// `where(0 < y, f32(g @ w), 0)`, a relu's backward through a bf16 product, `y` the relu's
    /// output computed before: the product takes the widening and the mask where products write
    /// f32s, and neither an f32 product nor a product on a device with stored bf16 does.
    #[test]
    fn a_relus_backward_mask_is_taken_by_a_widened_bf16_product_only() {
        let masked = |dtype: DType| {
            let mut g = Graph::default();
            let (p, x) = product_in(&mut g, dtype);
            let y = node(&mut g, Op::Input(2), DType::F32, &[4, 5], vec![]);
            let s = where_positive(&mut g, y, x);
            (g, p, y, s)
        };
        let gemms = |g: &Graph, s: NodeId, widened: bool| widened_gemms(g, &[s], widened).0;
        let (g, p, y, s) = masked(DType::BF16);
        let found = gemms(&g, s, true);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].product, found[0].mask, found[0].bias, found[0].output()), (p, Some(y), None, s));
        assert!(found[0].widens && !found[0].relu());
        assert!(gemms(&g, s, false).is_empty(), "stored bf16: the cast converts");
        let (g, _, _, s) = masked(DType::F32);
        assert!(gemms(&g, s, true).is_empty(), "an f32 product keeps its mask in the region");
    }
}
