//! Every primitive's gradient (and the stdlib functions built from them) checked against central
//! finite differences in f64, on odd shapes. The loss is `sum(f(inputs) * r)` with a fixed random
//! `r`, so every output element gets a different weight.

use dlc::api::RuntimeHost;
use dlc::exec::Executor;
use dlc::Tensor;
use dlc_language::eval::{Mode, Session, Value};
use dlc_language::ir::{NodeId, Op, ReduceOp};
use dlc_language::passes::autodiff;
use dlc_language::syntax::ast::BinOp;
use dlc_language::types::{DType, Dim, TensorTy};
use std::collections::HashMap;

struct Case {
    session: Session,
    inputs: Vec<(u32, NodeId, Vec<usize>)>,
    loss: NodeId,
}

fn lcg_values(n: usize, seed: u64, positive: bool) -> Vec<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            if positive {
                0.5 + u
            } else {
                2.0 * u - 1.0
            }
        })
        .collect()
}

/// Define `src` (which must define `f`), apply it to f64 inputs of the given shapes.
fn build(src: &str, shapes: &[&[usize]], int_inputs: &[(usize, Vec<i64>)]) -> Case {
    let mut session = Session::new(Mode::Run);
    let mut host = RuntimeHost::new(None, false);
    let r = session.eval_input(&format!("use std.nn\n{src}\n"), &mut host);
    assert!(r.diags.is_empty(), "{src}: {:?}", r.diags);
    let t = &mut session.t;
    t.ctx.module = session.main;
    let mut args = vec![];
    let mut inputs = vec![];
    for (i, s) in shapes.iter().enumerate() {
        let dims: Vec<Dim> = s.iter().map(|d| Dim::known(*d as i64)).collect();
        let ty = TensorTy::new(DType::F64, dims.clone());
        let id = t.graph.add_input(format!("x{i}"), ty);
        let n = t.node(Op::Input(id), DType::F64, dims, vec![], Default::default());
        inputs.push((id, n, s.to_vec()));
        args.push((None, Value::Tensor(n), Default::default()));
    }
    for (pos, vals) in int_inputs {
        let lit = t.graph.add_literal(vals.iter().map(|v| *v as f64).collect());
        let n = t.node(Op::Literal(lit), DType::I64, vec![Dim::known(vals.len() as i64)], vec![], Default::default());
        args.insert(*pos, (None, Value::Tensor(n), Default::default()));
    }
    let f = t.lookup("f").expect("f defined");
    let out = match t.call(&f, args, Default::default(), Default::default()) {
        Ok(Value::Tensor(n)) => n,
        other => panic!("{src}: f did not return a tensor: {other:?} {:?}", t.diags),
    };
    let oty = t.ty(out);
    let n: usize = oty.shape.iter().map(|d| d.as_known().unwrap() as usize).product();
    let lit = t.graph.add_literal(lcg_values(n, 99, false));
    let w = t.node(Op::Literal(lit), DType::F64, oty.shape.clone(), vec![], Default::default());
    let out = t.cast(out, DType::F64, Default::default());
    let prod = match t.binary_values(BinOp::Mul, &Value::Tensor(out), &Value::Tensor(w), Default::default()) {
        Ok(Value::Tensor(p)) => p,
        _ => panic!("mul"),
    };
    let loss = t.reduce(ReduceOp::Sum, prod, None, false, Default::default()).expect("sum");
    Case { session, inputs, loss }
}

fn eval(case: &Case, values: &HashMap<u32, Vec<f64>>, node: NodeId) -> Tensor {
    let mut ex = Executor::new(0);
    for (id, _, shape) in &case.inputs {
        ex.inputs.insert(*id, Tensor::from_f64(DType::F64, shape.clone(), values[id].clone()));
    }
    ex.eval(&case.session.t.graph, node).expect("eval")
}

/// Analytic gradients vs central differences; returns the worst relative error.
fn check(src: &str, shapes: &[&[usize]], int_inputs: &[(usize, Vec<i64>)], positive: bool) {
    let mut case = build(src, shapes, int_inputs);
    let wrt: Vec<NodeId> = case.inputs.iter().map(|x| x.1).collect();
    let grads = autodiff::grad(&mut case.session.t.graph, case.loss, &wrt).expect("grad");
    let mut values = HashMap::new();
    for (k, (id, _, shape)) in case.inputs.iter().enumerate() {
        values.insert(*id, lcg_values(shape.iter().product(), 7 + k as u64, positive));
    }
    let eps = 1e-6;
    for (k, (id, _, _)) in case.inputs.iter().enumerate() {
        let analytic = eval(&case, &values, grads[k]).to_f64();
        for (i, analytic) in analytic.iter().enumerate() {
            let mut plus = values.clone();
            plus.get_mut(id).unwrap()[i] += eps;
            let mut minus = values.clone();
            minus.get_mut(id).unwrap()[i] -= eps;
            let fp = eval(&case, &plus, case.loss).to_f64()[0];
            let fm = eval(&case, &minus, case.loss).to_f64()[0];
            let numeric = (fp - fm) / (2.0 * eps);
            let err = (analytic - numeric).abs() / (1.0 + numeric.abs());
            assert!(err < 1e-6, "{src}: d/dx{k}[{i}] analytic {analytic} vs numeric {numeric}");
        }
    }
}

#[test]
fn elementwise_binary_with_broadcasting() {
    check("fn f(a, b) = a + b * a - b / (a * a + 1.0)", &[&[3, 5], &[5]], &[], false);
    check("fn f(a, b) = a ** b", &[&[2, 3], &[2, 3]], &[], true);
    check("fn f(a, b) = maximum(a, b) + minimum(a, 0.1 * b)", &[&[7], &[7]], &[], false);
    check("fn f(a, b) = where(a > b, a * b, a - b)", &[&[4, 1], &[1, 3]], &[], false);
}

#[test]
fn elementwise_unary() {
    check("fn f(x) = exp(x) + sin(x) * cos(x) + tanh(x) + erf(x) + abs(x)", &[&[3, 7]], &[], false);
    check("fn f(x) = log(x) + sqrt(x) + rsqrt(x) + 1.0 / x", &[&[50]], &[], true);
}

#[test]
fn reductions_and_movement() {
    check("fn f(x) = sum(x, axis: 1) + mean(x, axis: 1)", &[&[3, 5]], &[], false);
    check("fn f(x) = max(x, axis: 0) - min(x, axis: (0, 2), keepdim: true)", &[&[3, 4, 2]], &[], false);
    check("fn f(x) = reshape(permute(x, (2, 0, 1)), (4, -1)).T", &[&[3, 5, 4]], &[], false);
    check("fn f(x) = x[1:, ::2] * 2.0 + x[0:1, ::2] * x[-1, 1:4] + x[:0:-1, 4:1:-1]", &[&[3, 5]], &[], false);
    check("fn f(a, b) = concat((a, b, a), axis: 1)", &[&[2, 3], &[2, 1]], &[], false);
    check("fn f(x) = var(x, axis: -1) + broadcast_to(x[:, 0:1], (3, 4))[:, 2]", &[&[3, 4]], &[], false);
}

#[test]
fn contractions() {
    check("fn f(a, b) = a @ b", &[&[3, 7], &[7, 5]], &[], false);
    check("fn f(a, b) = a @ b", &[&[2, 3, 4], &[4, 3]], &[], false);
    check("fn f(a, b) = a @ b", &[&[4], &[4, 3]], &[], false);
    check("fn f(x, w, b) = conv2d(x, w, b, stride: 2, padding: 1)", &[&[2, 3, 7, 6], &[4, 3, 3, 3], &[4]], &[], false);
    check("fn f(x, w) = conv2d(x, w, dilation: 2, groups: 2)", &[&[1, 4, 7, 7], &[6, 2, 3, 3]], &[], false);
    check(
        "fn f(x) = concat((flatten(max_pool2d(x, 2, stride: 2)), flatten(max_pool2d(x, 3, stride: 2, padding: 1)), flatten(avg_pool2d(x, 3, stride: 2, padding: 1))))",
        &[&[1, 2, 5, 5]],
        &[],
        false,
    );
    check("fn f(w, idx) = take(w, idx) * 3.0", &[&[5, 3]], &[(1, vec![4, 0, 4, 2])], false);
}

#[test]
fn stdlib_composites() {
    check("fn f(x) = softmax(x) + log_softmax(x, axis: 0)", &[&[3, 5]], &[], false);
    check("fn f(x, w, b) = layer_norm(x, w, b)", &[&[3, 7], &[7], &[7]], &[], false);
    check("fn f(x) = gelu(x) + gelu_tanh(x) + silu(x) + softplus(x) + leaky_relu(x)", &[&[2, 9]], &[], false);
    check("fn f(logits, y) = cross_entropy(logits, y, label_smoothing: 0.1)", &[&[4, 5]], &[(1, vec![0, 4, 2, 2])], false);
    check("fn f(a, b) = bce_with_logits(a, sigmoid(b)) + mse(a, b) + l1(a, 0.5 * b)", &[&[6], &[6]], &[], false);
}

#[test]
fn stop_grad_blocks_gradient() {
    let mut case = build("fn f(a) = a * stop_grad(a)", &[&[3]], &[]);
    let wrt = vec![case.inputs[0].1];
    let g = autodiff::grad(&mut case.session.t.graph, case.loss, &wrt).expect("grad");
    let mut values = HashMap::new();
    values.insert(case.inputs[0].0, vec![1.0, 2.0, 3.0]);
    let got = eval(&case, &values, g[0]).to_f64();
    let w = lcg_values(3, 99, false);
    // d/da (a * c) with c = a held constant is c * w, not 2 a w.
    for i in 0..3 {
        assert!((got[i] - (i as f64 + 1.0) * w[i]).abs() < 1e-12, "{got:?}");
    }
}

#[test]
fn non_scalar_loss_is_rejected() {
    let mut case = build("fn f(a) = a * 2.0", &[&[3]], &[]);
    let x = case.inputs[0].1;
    let e = autodiff::grad(&mut case.session.t.graph, x, &[x]).unwrap_err();
    assert!(matches!(e, autodiff::GradError::NotScalar(_)));
}

/// relu's and leaky relu's backward take their mask from the output (`0 < y`, PyTorch's
/// `threshold_backward`), so backward does not read the input: no backward node reads a forward
/// mask `0 < x`. The gradient is the same at every point, 0, -0, NaN and infinities included.
#[test]
fn relu_masks_come_from_the_output() {
    let mut case = build("fn f(x) = relu(x) * 2.0 + leaky_relu(x, slope: 0.1)", &[&[7]], &[]);
    let x = case.inputs[0].1;
    let forward = case.session.t.graph.len() as u32;
    let g = autodiff::grad(&mut case.session.t.graph, case.loss, &[x]).expect("grad");
    let graph = &case.session.t.graph;
    let masks_of_x: Vec<NodeId> = (0..forward)
        .map(NodeId)
        .filter(|n| matches!(graph.node(*n).op, Op::Binary(dlc_language::ir::BinaryOp::CmpLt)) && graph.node(*n).src[1] == x)
        .collect();
    assert_eq!(masks_of_x.len(), 1, "relu's and leaky relu's forward mask (one node: hash-consed)");
    for n in graph.topo(&g).into_iter().filter(|n| n.0 >= forward) {
        assert!(!graph.node(n).src.iter().any(|s| masks_of_x.contains(s)), "backward node {n:?} reads a forward mask");
    }
    let mut values = HashMap::new();
    values.insert(case.inputs[0].0, vec![0.0, -0.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e-300, -2.5]);
    let got = eval(&case, &values, g[0]).to_f64();
    let w = lcg_values(7, 99, false);
    let slope = |i: usize| if i == 3 || i == 5 { 3.0 } else { 0.1 };
    for (i, gi) in got.iter().enumerate() {
        // d/dx = (2 + 1) * w where x > 0, 0.1 * w elsewhere (at 0, -0 and NaN too).
        let want = slope(i) * w[i];
        assert!((gi - want).abs() < 1e-12, "x[{i}]: {gi} vs {want}");
    }
}
