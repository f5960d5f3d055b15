//! The stdlib's optimiser update rules against an independent f64 implementation of PyTorch's
//! formulas (torch.optim.SGD, Adam, AdamW), over several steps with changing gradients.

use dlc::api::RuntimeHost;
use dlc_language::eval::{Mode, Session};

fn run(src: &str) -> Vec<Vec<f64>> {
    let mut s = Session::new(Mode::Run);
    let mut host = RuntimeHost::new(None, false);
    let ok = s.run_source("optim_test.dl", src, &mut host);
    assert!(ok, "{src}: {:?}", s.diagnostics());
    host.out.printed.iter().map(|p| p.tensors[0].to_f64()).collect()
}

const P0: [f64; 3] = [0.5, -1.0, 2.0];
const GRADS: [[f64; 3]; 3] = [[0.1, -0.2, 0.3], [0.05, 0.4, -0.1], [-0.3, 0.1, 0.2]];

fn lit(v: &[f64]) -> String {
    format!("cast([{}], f64)", v.iter().map(|x| format!("{x:?}")).collect::<Vec<_>>().join(", "))
}

fn program(update: &str, state: usize) -> String {
    let mut src = format!("use std.optim\nlet s0 = ({}{})\n", lit(&P0), ", zeros(f64[3])".repeat(state));
    for (t, g) in GRADS.iter().enumerate() {
        let st: Vec<String> = (1..=state).map(|i| format!("s{t}[{i}]")).collect();
        let args = ARGS.replace("OPT", update.trim_end_matches("_update"));
        src += &format!("let s{} = {update}(s{t}[0], {}, {}, {}, {args})\nprint(s{}[0])\n", t + 1, lit(g), st.join(", "), t + 1, t + 1);
    }
    src
}

/// The learning rate, and the rule's optimiser (`OPT`: `adam` for `adam_update`) with its
/// defaults but for weight decay.
const ARGS: &str = "lr: 0.1, opt: OPT(weight_decay: 0.05)";

fn close(a: &[f64], b: &[f64]) {
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() < 1e-12, "{a:?} vs {b:?}");
    }
}

#[test]
fn sgd_with_momentum_matches_torch() {
    let src = program("sgd_update", 1).replace("sgd(weight_decay: 0.05)", "sgd(momentum: 0.9, nesterov: true, weight_decay: 0.05)");
    let got = run(&src);
    let (mut p, mut buf) = (P0.to_vec(), vec![0.0; 3]);
    for (t, g) in GRADS.iter().enumerate() {
        for i in 0..3 {
            let d = g[i] + 0.05 * p[i];
            buf[i] = if t == 0 { d } else { 0.9 * buf[i] + d };
            p[i] -= 0.1 * (d + 0.9 * buf[i]);
        }
        close(&got[t], &p);
    }
}

#[test]
fn adam_and_adamw_match_torch() {
    for (rule, decoupled) in [("adam_update", false), ("adamw_update", true)] {
        let got = run(&program(rule, 2));
        let (mut p, mut m, mut v) = (P0.to_vec(), vec![0.0; 3], vec![0.0; 3]);
        for (t, g) in GRADS.iter().enumerate() {
            let t1 = (t + 1) as i32;
            for i in 0..3 {
                let d = if decoupled {
                    p[i] *= 1.0 - 0.1 * 0.05;
                    g[i]
                } else {
                    g[i] + 0.05 * p[i]
                };
                m[i] = 0.9 * m[i] + 0.1 * d;
                v[i] = 0.999 * v[i] + 0.001 * d * d;
                let mhat = m[i] / (1.0 - 0.9f64.powi(t1));
                let vhat = v[i] / (1.0 - 0.999f64.powi(t1));
                p[i] -= 0.1 * mhat / (vhat.sqrt() + 1e-8);
            }
            close(&got[t], &p);
        }
    }
}

fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

#[test]
fn lamb_matches_the_paper() {
    let got = run(&program("lamb_update", 2));
    let (mut p, mut m, mut v) = (P0.to_vec(), vec![0.0; 3], vec![0.0; 3]);
    for (t, g) in GRADS.iter().enumerate() {
        let t1 = (t + 1) as i32;
        let mut r = vec![0.0; 3];
        for i in 0..3 {
            m[i] = 0.9 * m[i] + 0.1 * g[i];
            v[i] = 0.999 * v[i] + 0.001 * g[i] * g[i];
            r[i] = m[i] / (1.0 - 0.9f64.powi(t1)) / ((v[i] / (1.0 - 0.999f64.powi(t1))).sqrt() + 1e-6) + 0.05 * p[i];
        }
        let ratio = norm(&p) / norm(&r);
        for i in 0..3 {
            p[i] -= 0.1 * ratio * r[i];
        }
        close(&got[t], &p);
    }
}

#[test]
fn lars_matches_the_paper() {
    let src = program("lars_update", 1).replace("lars(weight_decay: 0.05)", "lars(momentum: 0.9, weight_decay: 0.05, trust: 0.01)");
    let got = run(&src);
    let (mut p, mut buf) = (P0.to_vec(), vec![0.0; 3]);
    for (t, g) in GRADS.iter().enumerate() {
        let local = 0.01 * norm(&p) / (norm(g) + 0.05 * norm(&p));
        for i in 0..3 {
            buf[i] = 0.9 * buf[i] + local * (g[i] + 0.05 * p[i]);
            p[i] -= 0.1 * buf[i];
        }
        close(&got[t], &p);
    }
}
