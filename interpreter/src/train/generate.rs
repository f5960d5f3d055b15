//! `infer { generate = N, input = "prompt", vocab = FILE, context = T }`: sample N tokens from a
//! language model (logits [1, T, V]), one at a time, the window being the last `context` tokens.
//! The tokens are characters (the sorted characters of the text file `vocab`), or those of a
//! Hugging Face tokenizer when `vocab` is a `tokenizer.json` (the prompt encoded by it, the
//! sample decoded by it).
//!
//! The sampling is part of the compiled plan, so a token costs one run and an eight-byte read:
//! the plan picks the last position's logits (a mask over positions, so the position is data,
//! not a shape), divides them by `temperature`, adds Gumbel noise drawn on the host from
//! (seed, token, class) and takes the argmax, which is a draw from the softmax of the scaled
//! logits (the Gumbel-max trick). Nothing else comes back per token.
//!
//! One plan serves every window length: while the window is shorter than `context`, it is
//! padded on the right and the mask picks its last real position. That gives the unpadded
//! window's logits when the model is causal (position t sees positions <= t, as a GPT's masked
//! attention does). Whether it is, is checked once, on the first short window: the unpadded
//! window's own plan runs beside the padded one and the last position's logits must agree to
//! 1e-4 (relative to the largest). A model that looks ahead fails the check and is then run
//! with one plan per window length, as written, and the summary says so.

use super::infer::{apply, driver_options, load};
use crate::runner::{Runner, Slot};
use crate::runtime::tensor::Tensor;
use crate::runtime::RuntimeError;
use dlc_language::eval::recipe::RecipeInfo;
use dlc_language::eval::{Session, Value};
use dlc_language::ir::{BinaryOp, NodeId, Op, ReduceOp};
use dlc_language::passes::driver;
use dlc_language::types::{DType, Dim, TensorTy};
use std::collections::hash_map::{Entry, HashMap};
use std::path::Path;

fn err(msg: impl Into<String>) -> RuntimeError {
    RuntimeError::Unsupported(msg.into())
}

/// The largest difference between the padded and the unpadded window's last-position logits,
/// relative to the largest of them, that still counts as the same (gemm sums over the padded
/// length in another order; a model that looks ahead differs in the first digits).
const CAUSAL_TOLERANCE: f64 = 1e-4;

/// What `generate` did, for the run's summary.
pub struct Sampled {
    /// The prompt followed by the sample.
    pub text: String,
    /// Plans compiled.
    pub plans: usize,
    /// How windows shorter than `context` ran.
    pub windows: Windows,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Windows {
    /// Every window was `context` long (the prompt was), or no token was sampled.
    Full,
    /// Short windows padded on the right: the largest relative difference the check measured.
    Padded { checked: f64 },
    /// The model is not causal (the check's difference): one plan per window length.
    PerLength { checked: f64 },
}

impl Sampled {
    /// One line for the run's summary.
    pub fn summary(&self) -> String {
        let plans = format!("{} compiled plan{}", self.plans, if self.plans == 1 { "" } else { "s" });
        match self.windows {
            Windows::Full => format!("sampled with {plans}, every window full"),
            Windows::Padded { checked } => format!(
                "sampled with {plans}: short windows padded on the right (the model is causal: the last position's logits agree with the unpadded window's {})",
                if checked == 0.0 { "bit for bit".to_string() } else { format!("to {checked:.1e}") }
            ),
            Windows::PerLength { checked } => format!(
                "sampled with {plans}, one per window length: the model's last position depends on later ones (padded and unpadded logits differ by {checked:.1e}), so short windows cannot be padded"
            ),
        }
    }
}

/// The model applied to a window of `len` tokens, followed by the sampler, compiled.
struct Sampler {
    len: usize,
    window: u32,
    pick: u32,
    noise: u32,
    token: NodeId,
    last: NodeId,
    planned: driver::Planned,
}

/// What the sampler needs to know about the block.
struct Setting<'a> {
    info: &'a RecipeInfo,
    model: Value,
    classes: usize,
    temperature: f64,
    seed: u64,
    fuse: bool,
}

impl Setting<'_> {
    fn compile(&self, session: &mut Session, len: usize) -> Result<Sampler, RuntimeError> {
        let span = self.info.recipe.span;
        let t = &mut session.t;
        let input = |t: &mut dlc_language::eval::tracer::Tracer, name: &str, dtype: DType, shape: Vec<usize>| {
            let ty = TensorTy::new(dtype, shape.iter().map(|&d| Dim::known(d as i64)).collect());
            let id = t.graph.add_input(name, ty.clone());
            (id, t.node(Op::Input(id), ty.dtype, ty.shape, vec![], span))
        };
        let (window, window_node) = input(t, "generate window", DType::I64, vec![1, len]);
        let (pick, pick_node) = input(t, "generate pick", DType::Bool, vec![1, len, 1]);
        let (noise, noise_node) = input(t, "generate noise", DType::F32, vec![self.classes]);
        let logits = apply(session, self.info, &self.model, Value::Tensor(window_node))?;
        let t = &mut session.t;
        let ty = t.ty(logits);
        let want: Vec<Dim> = [1, len, self.classes].iter().map(|&d| Dim::known(d as i64)).collect();
        if ty.shape != want {
            return Err(err(format!(
                "`generate` needs logits [1, T, vocab] = [1, {len}, {}] for a window of {len}, the model returned {ty}",
                self.classes
            )));
        }
        let logits = t.cast(logits, DType::F32, span);
        let zero = t.constant(0.0, DType::F32, span);
        let traced = (|| {
            let at_pick = t.where_(pick_node, logits, zero, span)?;
            let last = t.reduce(ReduceOp::Sum, at_pick, Some(&[1]), false, span)?;
            let inv = t.constant(1.0 / self.temperature, DType::F32, span);
            let scaled = t.tensor_binary(BinaryOp::Mul, last, inv, span)?;
            let scores = t.tensor_binary(BinaryOp::Add, scaled, noise_node, span)?;
            let token = t.reduce(ReduceOp::ArgMax, scores, Some(&[1]), false, span)?;
            Ok((token, last))
        })();
        let (token, last) =
            traced.map_err(|_: dlc_language::eval::Reported| err("the sampler could not be built on the model's logits"))?;
        let data = [window_node, pick_node, noise_node];
        let opts = driver_options(self.info, self.fuse);
        let forward = driver::inference_forward(&mut session.t.graph, &[token, last], &data, &opts)?;
        let planned = driver::plan(&session.t.graph, &forward.roots, self.fuse)?;
        Ok(Sampler { len, window, pick, noise, token: forward.roots[0], last: forward.roots[1], planned })
    }

    /// Run the sampler on `window` (padded to the sampler's length) for token `i`.
    fn run(&self, session: &Session, s: &Sampler, window: &[usize], i: usize, runner: &mut dyn Runner) -> Result<(), RuntimeError> {
        let ids = (0..s.len).map(|p| window.get(p).copied().unwrap_or(0) as f64);
        let pick = (0..s.len).map(|p| if p + 1 == window.len() { 1.0 } else { 0.0 });
        let noise = (0..self.classes).map(|k| gumbel(self.seed, (i * self.classes + k) as u64));
        let inputs = [
            (s.window, Tensor::from_f64(DType::I64, vec![1, s.len], ids)),
            (s.pick, Tensor::from_f64(DType::Bool, vec![1, s.len, 1], pick)),
            (s.noise, Tensor::from_f64(DType::F32, vec![self.classes], noise)),
        ];
        for (id, t) in &inputs {
            runner.put(Slot::Input(*id), t)?;
            runner.read_input_from(*id, Slot::Input(*id));
        }
        runner.run(&session.t.graph, &s.planned.plan, &s.planned.memory)
    }

    fn token(&self, session: &Session, s: &Sampler, runner: &mut dyn Runner) -> Result<usize, RuntimeError> {
        let t = runner.fetch(&session.t.graph, s.token)?;
        Ok(t.to_f64().first().copied().unwrap_or(0.0).max(0.0) as usize)
    }
}

/// A standard Gumbel draw, -ln(-ln u), from the counter-based stream (u = 0 gives -inf: never
/// the argmax).
fn gumbel(seed: u64, i: u64) -> f64 {
    -(-crate::runtime::rng::uniform(seed, i).ln()).ln()
}

/// What turns the prompt into ids and ids back into text.
enum Vocab {
    /// The sorted characters of a text file (character level, as `text(..., level: "char")`).
    Chars(Vec<char>),
    /// A Hugging Face `tokenizer.json` (as `text(..., tokenizer: ...)`).
    Tokens(Box<tokenizers::Tokenizer>),
}

impl Vocab {
    fn read(path: &Path) -> Result<Vocab, crate::runtime::data::DataError> {
        use crate::runtime::data::text;
        if path.extension().is_some_and(|e| e == "json") {
            return Ok(Vocab::Tokens(Box::new(text::tokenizer(path)?)));
        }
        Ok(Vocab::Chars(text::read(path, false)?.vocab))
    }

    fn len(&self) -> usize {
        match self {
            Vocab::Chars(v) => v.len(),
            Vocab::Tokens(t) => t.get_vocab_size(true),
        }
    }

    /// The block's prompt as vocabulary indices.
    fn encode(&self, prompt: &str, vocab_file: &str) -> Result<Vec<usize>, RuntimeError> {
        let ids = match self {
            Vocab::Chars(vocab) => prompt
                .chars()
                .map(|c| {
                    vocab
                        .iter()
                        .position(|v| *v == c)
                        .ok_or_else(|| err(format!("the prompt's character {c:?} is not in the vocabulary of {vocab_file}")))
                })
                .collect::<Result<Vec<_>, _>>()?,
            Vocab::Tokens(t) => t
                .encode_fast(prompt, false)
                .map_err(|e| err(format!("{vocab_file} cannot tokenize the prompt: {e}")))?
                .get_ids()
                .iter()
                .map(|i| *i as usize)
                .collect(),
        };
        if ids.is_empty() {
            return Err(err("the prompt is empty: give at least one character"));
        }
        Ok(ids)
    }

    fn decode(&self, ids: &[usize]) -> String {
        match self {
            Vocab::Chars(vocab) => ids.iter().map(|&i| vocab[i]).collect(),
            Vocab::Tokens(t) => {
                let ids: Vec<u32> = ids.iter().map(|i| *i as u32).collect();
                t.decode(&ids, false).unwrap_or_else(|e| format!("(the tokenizer cannot decode the sample: {e})"))
            }
        }
    }
}

/// The largest difference between two logit vectors, relative to the largest magnitude.
fn relative_difference(a: &Tensor, b: &Tensor) -> f64 {
    let (a, b) = (a.to_f64(), b.to_f64());
    let scale = b.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    let d = a.iter().zip(&b).fold(0.0f64, |m, (x, y)| if (x - y).is_nan() { f64::INFINITY } else { m.max((x - y).abs()) });
    d / scale
}

/// The block read: its sampler's setting, the vocabulary, the prompt's ids, `context` and the
/// number of characters to sample.
struct Block<'a> {
    setting: Setting<'a>,
    vocab: Vocab,
    ids: Vec<usize>,
    context: usize,
    n: usize,
}

fn read_block<'a>(info: &'a RecipeInfo, root: &Path, fuse: bool) -> Result<Block<'a>, RuntimeError> {
    let model = info.field("model").cloned().ok_or_else(|| err("the infer block has no model"))?;
    let Some(Value::Str(prompt)) = info.field("input").cloned() else { return Err(err("with `generate`, `input` is a text prompt")) };
    let Some(Value::Str(vocab_file)) = info.field("vocab").cloned() else { return Err(err("`generate` needs `vocab`")) };
    let vocab = Vocab::read(&crate::paths::in_program(root, &vocab_file))
        .map_err(|e| RuntimeError::Data { message: e.to_string(), span: info.recipe.span })?;
    let ids = vocab.encode(&prompt, &vocab_file)?;
    let setting = Setting {
        info,
        model,
        classes: vocab.len(),
        temperature: info.field("temperature").and_then(|v| v.as_float()).unwrap_or(1.0).max(1e-6),
        seed: info.field("seed").and_then(|v| v.as_int()).unwrap_or(0) as u64,
        fuse,
    };
    Ok(Block {
        setting,
        vocab,
        ids,
        context: info.field("context").and_then(|v| v.as_int()).unwrap_or(1).max(1) as usize,
        n: info.field("generate").and_then(|v| v.as_int()).unwrap_or(0).max(0) as usize,
    })
}

/// `dlc bench` on a `generate` block: the sampler of a full window compiled once, then
/// `warmup + steps` tokens, each a run and its token's read. Returns the timed tokens'
/// milliseconds, the seconds compiling took and the plan.
pub fn time_tokens(
    session: &mut Session,
    info: &RecipeInfo,
    root: &Path,
    fuse: bool,
    runner: &mut dyn Runner,
    (warmup, steps): (usize, usize),
) -> Result<(Vec<f64>, f64, dlc_language::passes::fusion::Plan), RuntimeError> {
    let b = read_block(info, root, fuse)?;
    let started = std::time::Instant::now();
    let s = b.setting.compile(session, b.context)?;
    let compile_s = started.elapsed().as_secs_f64();
    load(session, info, root, runner)?;
    let window: Vec<usize> = b.ids[b.ids.len().saturating_sub(b.context)..].to_vec();
    let mut times = vec![];
    for i in 0..warmup + steps {
        let t0 = std::time::Instant::now();
        b.setting.run(session, &s, &window, i, runner)?;
        std::hint::black_box(b.setting.token(session, &s, runner)?);
        if i >= warmup {
            times.push(t0.elapsed().as_secs_f64() * 1e3);
        }
    }
    Ok((times, compile_s, s.planned.plan))
}

/// Run a `generate` block on `runner`: the prompt followed by `generate` sampled characters,
/// with the plans it took and how short windows ran (see the module's doc).
pub fn generate(
    session: &mut Session,
    info: &RecipeInfo,
    root: &Path,
    fuse: bool,
    runner: &mut dyn Runner,
) -> Result<Sampled, RuntimeError> {
    let Block { setting, vocab, mut ids, context, n } = read_block(info, root, fuse)?;
    load(session, info, root, runner)?;
    let mut plans: HashMap<usize, Sampler> = HashMap::new();
    let mut windows = Windows::Full;
    for i in 0..n {
        let window: Vec<usize> = ids[ids.len().saturating_sub(context)..].to_vec();
        let short = window.len() < context;
        // The context's plan always (the check compares with it), a short window's own plan
        // only once the model is known to look ahead.
        let len = if short && matches!(windows, Windows::PerLength { .. }) { window.len() } else { context };
        for l in [context, len] {
            if let Entry::Vacant(e) = plans.entry(l) {
                e.insert(setting.compile(session, l)?);
            }
        }
        setting.run(session, &plans[&len], &window, i, runner)?;
        let mut from = len;
        if short && windows == Windows::Full {
            // The first short window: is the padded plan the unpadded model?
            let padded = runner.fetch(&session.t.graph, plans[&context].last)?;
            let own = setting.compile(session, window.len())?;
            setting.run(session, &own, &window, i, runner)?;
            let checked = relative_difference(&padded, &runner.fetch(&session.t.graph, own.last)?);
            windows = if checked <= CAUSAL_TOLERANCE { Windows::Padded { checked } } else { Windows::PerLength { checked } };
            // This token from the unpadded window, as the model was written.
            from = window.len();
            plans.insert(from, own);
        }
        let pick = setting.token(session, &plans[&from], runner)?;
        ids.push(pick.min(vocab.len() - 1));
    }
    Ok(Sampled { text: vocab.decode(&ids), plans: plans.len(), windows })
}

#[cfg(test)]
mod tests {
    use super::gumbel;

    /// argmax(logits + Gumbel noise) draws class k with probability softmax(logits)_k: 40,000
    /// draws over four classes land within 1.5% (absolute) of the softmax, and a noise of the
    /// wrong sign (ln(-ln u)) does not.
    #[test]
    fn gumbel_max_draws_from_the_softmax() {
        let logits = [1.0f64, 0.0, -1.0, 2.0];
        let z: f64 = logits.iter().map(|l| l.exp()).sum();
        let softmax: Vec<f64> = logits.iter().map(|l| l.exp() / z).collect();
        let draws = 40_000u64;
        let frequencies = |noise: &dyn Fn(u64) -> f64| {
            let mut counts = [0u64; 4];
            for i in 0..draws {
                let best =
                    (0..4)
                        .map(|k| (k, logits[k] + noise(i * 4 + k as u64)))
                        .fold((0, f64::NEG_INFINITY), |b, c| if c.1 > b.1 { c } else { b });
                counts[best.0] += 1;
            }
            counts.map(|c| c as f64 / draws as f64)
        };
        let right = frequencies(&|i| gumbel(7, i));
        for (f, p) in right.iter().zip(&softmax) {
            assert!((f - p).abs() < 0.015, "{right:?} against {softmax:?}");
        }
        let wrong = frequencies(&|i| -gumbel(7, i));
        assert!(wrong.iter().zip(&softmax).any(|(f, p)| (f - p).abs() > 0.05), "{wrong:?}");
    }
}
