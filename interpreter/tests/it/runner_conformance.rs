//! The `Runner` contract, checked on every device of the registry that opens on this machine
//! (the CPU and the emulated GPU here; CUDA on a machine with a GPU, where it is required once
//! `DLC_REQUIRE_GPU=1`): what `put` and `read_input_from` bind, what `run` computes (against
//! the eager interpreter), what `fetch`, `keep`, `take` and `pin` give back, and that a value
//! that is not a result of the last run is an error everywhere, never computed on demand.

use dlc::exec::Executor;
use dlc::runner::{registry, DeviceKind, Runner, RunnerOptions, Slot};
use dlc::runtime::tensor::Tensor;
use dlc_language::ir::{BinaryOp, Graph, Init, Node, NodeId, Op, ParamInfo, ReduceOp, UnaryOp};
use dlc_language::passes::driver;
use dlc_language::span::Span;
use dlc_language::types::{DType, Dim, TensorTy};

const ROWS: usize = 64;
const COLS: usize = 32;

/// `y = exp(x @ (w @ w)) + x`, `z = 2 sum(y, axis 1)`: an input, a parameter, products, a
/// fused region, a row reduction; `w @ w` depends on the parameter alone (what evaluation pins).
struct Net {
    g: Graph,
    input: u32,
    param: u32,
    x: NodeId,
    y: NodeId,
    z: NodeId,
}

fn net() -> Net {
    let mut g = Graph::default();
    let sp = Span::default();
    let shape = |r: usize, c: usize| vec![Dim::known(r as i64), Dim::known(c as i64)];
    let ty = TensorTy::new(DType::F32, shape(ROWS, COLS));
    let input = g.add_input("x", ty.clone());
    let wty = TensorTy::new(DType::F32, shape(COLS, COLS));
    let param = g.add_param(ParamInfo { path: "w".into(), ty: wty, init: Init::Constant(0.5f64.to_bits()), span: sp, trainable: true });
    let mut add = |op: Op, s: Vec<usize>, src: Vec<NodeId>| g.add(Node { op, dtype: DType::F32, shape: shape(s[0], s[1]), src }, sp);
    let x = add(Op::Input(input), vec![ROWS, COLS], vec![]);
    let w = add(Op::Param(param), vec![COLS, COLS], vec![]);
    let ww = add(Op::MatMul, vec![COLS, COLS], vec![w, w]);
    let m = add(Op::MatMul, vec![ROWS, COLS], vec![x, ww]);
    let e = add(Op::Unary(UnaryOp::Exp), vec![ROWS, COLS], vec![m]);
    let y = add(Op::Binary(BinaryOp::Add), vec![ROWS, COLS], vec![e, x]);
    let s = add(Op::Reduce(ReduceOp::Sum, vec![1]), vec![ROWS, 1], vec![y]);
    let z = add(Op::Binary(BinaryOp::Add), vec![ROWS, 1], vec![s, s]);
    Net { g, input, param, x, y, z }
}

/// Inputs (`ROWS x COLS`) in [-1, 1].
fn values(seed: f64) -> Tensor {
    Tensor::from_f64(DType::F32, vec![ROWS, COLS], (0..ROWS * COLS).map(|i| (i as f64 * 0.37 + seed).sin()))
}

/// Weights (`COLS x COLS`), small enough that `exp` stays moderate.
fn weights(seed: f64) -> Tensor {
    Tensor::from_f64(DType::F32, vec![COLS, COLS], (0..COLS * COLS).map(|i| 0.05 * (i as f64 * 0.61 + seed).cos()))
}

/// The eager interpreter's value of `node` with `x` and `w` bound.
fn reference(n: &Net, x: &Tensor, w: &Tensor, node: NodeId) -> Vec<f64> {
    let mut ex = Executor::new(0);
    ex.inputs.insert(n.input, x.clone());
    ex.set_param(n.param, w.clone());
    ex.eval(&n.g, node).expect("the interpreter computes it").to_f64()
}

fn close(a: &[f64], b: &[f64], what: &str, device: DeviceKind) {
    assert_eq!(a.len(), b.len(), "{what} on {device:?}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "{what} on {device:?}: element {i}: {x} against {y}");
    }
}

/// Every registry device that opens here; CUDA is skipped (said) without a GPU unless required.
fn runners() -> Vec<(DeviceKind, Box<dyn Runner>)> {
    let mut out = vec![];
    for kind in registry::kinds() {
        match registry::open(kind, &RunnerOptions::new(0, true, false)) {
            Ok(r) => out.push((kind, r)),
            Err(e) if kind == DeviceKind::Cuda && std::env::var("DLC_REQUIRE_GPU").is_err() => {
                eprintln!("SKIPPED: the conformance suite on {kind:?}: {e}");
            }
            Err(e) => panic!("{kind:?} does not open: {e}"),
        }
    }
    assert!(out.len() >= 2, "the CPU and the emulated GPU open everywhere");
    out
}

#[test]
fn every_runner_computes_what_the_interpreter_computes_and_returns_only_results() {
    let n = net();
    let (x, w) = (values(0.0), weights(1.0));
    let planned = driver::plan(&n.g, &[n.y, n.z], true).expect("planned");
    for (device, mut r) in runners() {
        r.put(Slot::Param(n.param), &w).expect("put a parameter");
        r.put(Slot::Input(n.input), &x).expect("put an input");
        r.read_input_from(n.input, Slot::Input(n.input));
        r.run(&n.g, &planned.plan, &planned.memory).expect("run");
        close(&r.fetch(&n.g, n.z).expect("a root").to_f64(), &reference(&n, &x, &w, n.z), "z", device);
        close(&r.fetch(&n.g, n.y).expect("a root").to_f64(), &reference(&n, &x, &w, n.y), "y", device);
        // keep + take: a root moved into a slot, read back unchanged.
        r.keep(&n.g, n.z, Slot::State(0, 0)).expect("keep a root");
        close(&r.take(Slot::State(0, 0)).expect("take").to_f64(), &reference(&n, &x, &w, n.z), "kept z", device);
        assert!(r.take(Slot::Sum(7)).is_err(), "{device:?}: an empty slot is an error");
    }
}

#[test]
fn a_node_no_plan_computed_is_an_error_on_every_runner() {
    let n = net();
    let (x, w) = (values(0.0), weights(1.0));
    // A plan of `x` alone: `z` is not computed by it.
    let only_x = driver::plan(&n.g, &[n.x], true).expect("planned");
    for (device, mut r) in runners() {
        r.put(Slot::Param(n.param), &w).expect("put");
        r.put(Slot::Input(n.input), &x).expect("put");
        r.read_input_from(n.input, Slot::Input(n.input));
        r.run(&n.g, &only_x.plan, &only_x.memory).expect("run");
        close(&r.fetch(&n.g, n.x).expect("the root").to_f64(), &x.to_f64(), "x", device);
        let e = r.fetch(&n.g, n.z).expect_err("z was not computed");
        assert!(e.to_string().contains("not a result of the last run"), "{device:?}: {e}");
        assert!(r.keep(&n.g, n.z, Slot::Sum(0)).is_err(), "{device:?}: keep of a non-result");
        assert!(r.pin(&n.g, n.z).is_err(), "{device:?}: pin of a non-result");
    }
}

#[test]
fn pinned_values_stand_for_their_nodes_as_in_an_evaluation() {
    let mut n = net();
    let w = weights(1.0);
    // As an evaluation compiles: what depends on the parameter alone (`w @ w`) is the
    // frontier, computed once by its own plan and pinned; the batch plan reads it.
    let opts = driver::Options { remat: false, ..Default::default() };
    let ev = driver::compile_evaluation(&mut n.g, &[n.z], &opts).expect("compiled");
    assert!(!ev.planned.frontier.is_empty(), "w @ w is split off");
    let z = ev.forward.roots[0];
    for (device, mut r) in runners() {
        r.put(Slot::Param(n.param), &w).expect("put");
        r.run(&n.g, &ev.frontier.plan, &ev.frontier.memory).expect("the frontier");
        for &f in &ev.planned.frontier {
            r.pin(&n.g, f).expect("pin");
        }
        // Another parameter value now: the batch plan still reads the pinned `w @ w`.
        r.put(Slot::Param(n.param), &weights(9.0)).expect("put");
        for seed in [0.0, 3.0] {
            r.put(Slot::Input(n.input), &values(seed)).expect("put");
            r.read_input_from(n.input, Slot::Input(n.input));
            r.run(&n.g, &ev.planned.plan, &ev.planned.memory).expect("a batch");
            close(&r.fetch(&n.g, z).expect("z").to_f64(), &reference(&n, &values(seed), &w, n.z), "z from the pinned w @ w", device);
        }
        r.unpin_all();
    }
}
