use super::*;
use crate::ir::{PoolKind, ReduceOp, UnaryOp};
use crate::types::{Dim, Shape};

fn shape(d: &[i64]) -> Shape {
    d.iter().map(|k| Dim::known(*k)).collect()
}

fn add(g: &mut Graph, op: Op, dtype: DType, d: &[i64], src: Vec<NodeId>) -> NodeId {
    g.add(Node { op, dtype, shape: shape(d), src }, Span::default())
}

/// What `root` depends on, by op.
fn ops(g: &Graph, root: NodeId) -> Vec<Op> {
    g.topo(&[root]).into_iter().map(|n| g.node(n).op.clone()).collect()
}

fn count(g: &Graph, root: NodeId, f: impl Fn(&Op) -> bool) -> usize {
    ops(g, root).iter().filter(|o| f(o)).count()
}

/// conv → +bias → relu → conv → max pool, in `dtype`: the graph of a small CNN's forward.
fn cnn(g: &mut Graph, dtype: DType) -> NodeId {
    let a = Conv2dAttrs::nchw((1, 1), (1, 1), (1, 1), 1);
    let x = add(g, Op::Input(0), dtype, &[8, 3, 16, 16], vec![]);
    let w1 = add(g, Op::Param(0), dtype, &[4, 3, 3, 3], vec![]);
    let b1 = add(g, Op::Param(1), dtype, &[4], vec![]);
    let w2 = add(g, Op::Param(2), dtype, &[6, 4, 3, 3], vec![]);
    let y1 = add(g, Op::Conv2d(a), dtype, &[8, 4, 16, 16], vec![x, w1]);
    let b = add(g, Op::Reshape, dtype, &[1, 4, 1, 1], vec![b1]);
    let be = add(g, Op::Expand, dtype, &[8, 4, 16, 16], vec![b]);
    let s = add(g, Op::Binary(crate::ir::BinaryOp::Add), dtype, &[8, 4, 16, 16], vec![y1, be]);
    let r = add(g, Op::Unary(UnaryOp::Abs), dtype, &[8, 4, 16, 16], vec![s]);
    let y2 = add(g, Op::Conv2d(a), dtype, &[8, 6, 16, 16], vec![r, w2]);
    let pool = Op::Pool2d { kind: PoolKind::Max, kernel: (2, 2), stride: (2, 2), padding: (0, 0), channels_last: false };
    add(g, pool, dtype, &[8, 6, 8, 8], vec![y2])
}

#[test]
fn a_low_precision_region_is_channels_last_with_transposes_only_at_its_edges() {
    let mut g = Graph::default();
    let out = cnn(&mut g, DType::BF16);
    let mut l = Layout::new(ConvLayout::ChannelsLastLowPrecision);
    let new = l.map(&mut g, out);
    assert_ne!(new, out);
    assert_eq!(l.converted.len(), 2);
    let convs: Vec<Conv2dAttrs> = ops(&g, new)
        .into_iter()
        .filter_map(|o| match o {
            Op::Conv2d(a) => Some(a),
            _ => None,
        })
        .collect();
    assert!(convs.len() == 2 && convs.iter().all(|a| a.channels_last), "{convs:?}");
    // The input and the two weights in, the pool's output back out: nothing between the two
    // convolutions or between the second and the pool is transposed.
    let permutes = count(&g, new, |o| matches!(o, Op::Permute(_)));
    assert_eq!(permutes, 4, "{:?}", ops(&g, new));
    // The bias `[1, 4, 1, 1]` becomes `[1, 1, 1, 4]` by a reshape.
    let reshapes: Vec<Shape> =
        g.topo(&[new]).into_iter().filter(|n| g.node(*n).op == Op::Reshape).map(|n| g.node(n).shape.clone()).collect();
    assert!(reshapes.contains(&shape(&[1, 1, 1, 4])), "{reshapes:?}");
    // The pool pools the channels-last value as stored; the root is as written.
    let pools: Vec<Op> = ops(&g, new).into_iter().filter(|o| matches!(o, Op::Pool2d { .. })).collect();
    assert!(matches!(pools[..], [Op::Pool2d { channels_last: true, .. }]), "{pools:?}");
    assert_eq!(g.node(new).shape, shape(&[8, 6, 8, 8]));
    crate::ir::verify::graph(&g, &[new], "layout").expect("a well-typed graph");
    // Mapping again reuses the rewrite.
    assert_eq!(l.map(&mut g, out), new);
}

#[test]
fn f32_convolutions_stay_nchw_on_a_gpu_and_everything_stays_on_the_cpu() {
    let mut g = Graph::default();
    let out = cnn(&mut g, DType::F32);
    assert_eq!(Layout::new(ConvLayout::ChannelsLastLowPrecision).map(&mut g, out), out);
    let bf = cnn(&mut g, DType::BF16);
    assert_eq!(Layout::new(ConvLayout::Nchw).map(&mut g, bf), bf);
    let mut all = Layout::new(ConvLayout::ChannelsLast);
    assert_ne!(all.map(&mut g, out), out);
    assert_eq!(all.converted.len(), 2);
}

#[test]
fn reductions_keep_their_axes_renumbered_and_a_value_leaving_is_transposed_back() {
    let mut g = Graph::default();
    let a = Conv2dAttrs::nchw((1, 1), (0, 0), (1, 1), 1);
    let x = add(&mut g, Op::Input(0), DType::F16, &[2, 3, 5, 7], vec![]);
    let w = add(&mut g, Op::Param(0), DType::F16, &[4, 3, 1, 1], vec![]);
    let y = add(&mut g, Op::Conv2d(a), DType::F16, &[2, 4, 5, 7], vec![x, w]);
    // Batch norm's mean: a sum over N, H and W, kept `[1, 4, 1, 1]`.
    let m = add(&mut g, Op::Reduce(ReduceOp::Sum, vec![0, 2, 3]), DType::F16, &[1, 4, 1, 1], vec![y]);
    let flat = add(&mut g, Op::Reshape, DType::F16, &[4], vec![m]);
    let new = Layout::new(ConvLayout::ChannelsLastLowPrecision).map(&mut g, flat);
    let reduce = g.topo(&[new]).into_iter().find(|n| matches!(g.node(*n).op, Op::Reduce(..))).unwrap();
    assert_eq!(g.node(reduce).op, Op::Reduce(ReduceOp::Sum, vec![0, 1, 2]));
    assert_eq!(g.node(reduce).shape, shape(&[1, 1, 1, 4]));
    // A 1x1 filter `[4, 3, 1, 1]` is `[4, 1, 1, 3]` by a reshape: no transpose but the input's.
    assert_eq!(count(&g, new, |o| matches!(o, Op::Permute(_))), 1, "{:?}", ops(&g, new));
    assert_eq!(g.node(new).shape, shape(&[4]));
    crate::ir::verify::graph(&g, &[new], "layout").expect("a well-typed graph");
}
