//! The library API: load a DL program from a file or a string, check it (diagnostics as values),
//! and run its top-level statements. The CLI, the REPL and the tests use exactly this.

use crate::backend::Backend;
use crate::exec::Executor;
use crate::runtime::format::format_tensor;
use crate::runtime::tensor::Tensor;
use dlc_language::eval::{Host, Mode, ModelSummary, Session, Value};
use dlc_language::ir::Graph;
use dlc_language::{Diagnostic, SourceMap};
use std::path::{Path, PathBuf};

/// What one `print` call showed: its text and the tensors it printed.
#[derive(Clone, Debug)]
pub struct Printed {
    pub text: String,
    pub tensors: Vec<Tensor>,
    /// The graph nodes of the printed tensors (what `dlc explain` plans).
    pub nodes: Vec<dlc_language::ir::NodeId>,
}

#[derive(Default)]
pub struct RunOutput {
    pub printed: Vec<Printed>,
}

impl RunOutput {
    /// Every printed tensor's values as the bits of their f64 widening, one list per `print`:
    /// what tests compare when two ways of running a program must agree bit for bit.
    pub fn printed_bits(&self) -> Vec<Vec<u64>> {
        self.printed.iter().map(|x| x.tensors.iter().flat_map(|t| t.to_f64()).map(f64::to_bits).collect()).collect()
    }
}

/// The runtime side of the front end's [`Host`]: reads user modules next to the main file,
/// executes printed values, and records what was printed.
pub struct RuntimeHost {
    pub root: Option<PathBuf>,
    pub exec: Box<dyn Backend>,
    pub out: RunOutput,
    /// Print to stdout as well as recording (the CLI); tests only record.
    pub echo: bool,
}

impl RuntimeHost {
    pub fn new(root: Option<PathBuf>, echo: bool) -> RuntimeHost {
        RuntimeHost { root, exec: Box::new(Executor::new(0)), out: RunOutput::default(), echo }
    }

    /// A value as `print` shows it.
    pub fn show(&mut self, g: &Graph, v: &Value, tensors: &mut Vec<Tensor>) -> Result<String, String> {
        Ok(match v {
            Value::Tensor(n) => {
                let t = self.exec.eval(g, *n).map_err(|e| e.to_string())?;
                let s = format_tensor(&t);
                tensors.push(t);
                s
            }
            Value::Int(i) => i.to_string(),
            Value::Float(f) => python_float(*f),
            Value::Bool(b) => b.to_string(),
            Value::Str(s) => s.to_string(),
            Value::Auto => "auto".into(),
            Value::Dim(d) => d.to_string(),
            Value::DType(d) => d.to_string(),
            Value::Type(t) => t.to_string(),
            Value::Tuple(items) => {
                let parts: Result<Vec<String>, String> = items.iter().map(|x| self.show(g, x, tensors)).collect();
                let parts = parts?;
                if parts.len() == 1 {
                    format!("({},)", parts[0])
                } else {
                    format!("({})", parts.join(", "))
                }
            }
            Value::Record(items) => {
                let mut parts = vec![];
                for (k, x) in items.iter() {
                    parts.push(format!("{k}: {}", self.show(g, x, tensors)?));
                }
                format!("({})", parts.join(", "))
            }
            Value::Model(m) => model_repr(m, 0),
            Value::Func(f) => format!("<fn {}>", f.name()),
            Value::Init(i) => i.describe(),
            Value::Pipeline(p) => {
                let mut parts = vec![p.source.describe()];
                parts.extend(p.stages.iter().map(|s| s.describe()));
                format!("<data {}>", parts.join(" |> "))
            }
            Value::Grads(m, _) => format!("<gradients of {}>", m.decl.name.name),
        })
    }
}

/// A model as PyTorch prints a module: containers list their children, leaves their
/// hyper-parameters.
fn model_repr(m: &dlc_language::eval::value::ModelInst, indent: usize) -> String {
    let hp = |v: &Value| match v {
        Value::Int(i) => i.to_string(),
        Value::Float(f) => python_float(*f),
        Value::Bool(b) => b.to_string(),
        Value::Str(s) => format!("{s:?}"),
        other => other.kind().to_string(),
    };
    let head = format!("{}({})", m.decl.name.name, m.hparams.iter().map(|(k, v)| format!("{k}={}", hp(v))).collect::<Vec<_>>().join(", "));
    let children: Vec<String> = m
        .fields
        .iter()
        .filter_map(|(k, v)| match v {
            Value::Model(c) => Some(format!("{}({k}): {}", " ".repeat(indent + 2), model_repr(c, indent + 2))),
            _ => None,
        })
        .collect();
    if children.is_empty() {
        head
    } else {
        format!("{head}(\n{}\n{})", children.join("\n"), " ".repeat(indent))
    }
}

/// Python's repr of a float: shortest round-trip digits, always with a `.` or exponent.
pub fn python_float(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let a = f.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        let s = format!("{f:e}");
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let m = m.to_string();
        let (sign, digits) = match e.strip_prefix('-') {
            Some(d) => ('-', d),
            None => ('+', e),
        };
        return format!("{m}e{sign}{digits:0>2}");
    }
    let s = format!("{f}");
    if s.contains('.') {
        s
    } else {
        format!("{s}.0")
    }
}

impl Host for RuntimeHost {
    fn load_module(&mut self, path: &[String]) -> Option<(String, String)> {
        let mut p = self.root.clone().unwrap_or_else(|| PathBuf::from("."));
        for part in path {
            p.push(part);
        }
        p.set_extension("dl");
        let text = std::fs::read_to_string(&p).ok()?;
        Some((p.display().to_string(), text))
    }

    fn print(&mut self, g: &Graph, values: &[Value]) -> Result<(), String> {
        // Compute every printed tensor in one plan (fused), then format them from the cache.
        let mut nodes = vec![];
        for v in values {
            crate::pipeline::leaves(v, &mut nodes);
        }
        self.exec.eval_many(g, &nodes).map_err(|e| e.to_string())?;
        let mut tensors = vec![];
        let mut parts = vec![];
        for v in values {
            parts.push(self.show(g, v, &mut tensors)?);
        }
        let text = parts.join(" ");
        if self.echo {
            println!("{text}");
        }
        self.out.printed.push(Printed { text, tensors, nodes });
        Ok(())
    }
}

/// One line per checked recipe: what it trains on what, and the loss type.
pub fn recipe_lines(s: &Session) -> Vec<String> {
    s.t.recipes
        .iter()
        .map(|r| {
            let parts: Vec<String> = r.fields.iter().map(|(k, v)| format!("{k}: {}", short(s, v))).collect();
            let name = r.name.as_ref().map(|n| format!(" {n}")).unwrap_or_default();
            format!("{}{name}: {}", r.kind.keyword(), parts.join(", "))
        })
        .collect()
}

/// A recipe value in a few words: optimisers and schedules by kind, models by name, tensors by type.
fn short(s: &Session, v: &Value) -> String {
    match v {
        Value::Record(items) => match items.iter().find(|(n, _)| matches!(n.as_str(), "optimizer" | "schedule" | "parallel")) {
            Some((_, Value::Str(kind))) => kind.to_string(),
            _ => format!("({})", items.iter().map(|(k, x)| format!("{k}: {}", short(s, x))).collect::<Vec<_>>().join(", ")),
        },
        Value::Model(m) => m.decl.name.name.clone(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => python_float(*f),
        Value::Str(x) => x.to_string(),
        Value::DType(d) => d.to_string(),
        Value::Auto => "auto".into(),
        _ => s.describe(v),
    }
}

/// A checked (and possibly run) program.
pub struct Program {
    pub session: Session,
    pub host: RuntimeHost,
    pub ok: bool,
    /// Whether the program has `train`/`evaluate`/`infer` recipes (checked, not run yet).
    pub recipes: Vec<String>,
}

/// How a program's computations execute. All three give the same results, bit for bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ExecMode {
    /// One kernel per op: the eager interpreter (`--no-fuse`), the reference.
    Eager,
    /// Elementwise chains fused into one kernel each, run by the vectorised chunk interpreter.
    #[default]
    Fused,
    /// Fused, and each fused kernel compiled to native code, AVX-512 or Cranelift (`--jit`).
    FusedJit,
}

impl Program {
    /// Type-check a program without running anything.
    pub fn check(name: &str, text: &str, root: Option<&Path>) -> Program {
        Program::checked_by(root, |session, host| session.run_source(name, text, host))
    }

    /// Type-check what parsed of a program that may have syntax errors (for editors; see
    /// [`Session::check_partial`]).
    pub fn check_partial(name: &str, text: &str, root: Option<&Path>) -> Program {
        Program::checked_by(root, |session, host| session.check_partial(name, text, host))
    }

    /// A check-mode session and host, loaded by `load` (which says whether there were no errors).
    fn checked_by(root: Option<&Path>, load: impl FnOnce(&mut Session, &mut RuntimeHost) -> bool) -> Program {
        let mut session = Session::new(Mode::Check);
        let mut host = RuntimeHost::new(root.map(|p| p.to_path_buf()), false);
        let ok = load(&mut session, &mut host);
        let recipes = recipe_names(&session);
        Program { session, host, ok, recipes }
    }

    /// Check, then run the top-level statements (printing when `echo`).
    pub fn run(name: &str, text: &str, root: Option<&Path>, echo: bool) -> Program {
        Program::run_seeded(name, text, root, echo, 0)
    }

    /// As [`Program::run`], with the seed that parameter initialisation draws from.
    pub fn run_seeded(name: &str, text: &str, root: Option<&Path>, echo: bool, seed: u64) -> Program {
        Program::run_with(name, text, root, echo, seed, ExecMode::Fused)
    }

    /// As [`Program::run_seeded`], executing as `mode` says.
    pub fn run_with(name: &str, text: &str, root: Option<&Path>, echo: bool, seed: u64, mode: ExecMode) -> Program {
        let checked = Program::check(name, text, root);
        if !checked.ok {
            return checked;
        }
        let mut session = Session::new(Mode::Run);
        let mut host = RuntimeHost::new(root.map(|p| p.to_path_buf()), echo);
        let mut ex = Executor::new(seed);
        ex.fuse = mode != ExecMode::Eager;
        ex.kernels = std::sync::Arc::new(crate::exec::fused::KernelCache::new(mode == ExecMode::FusedJit));
        host.exec = Box::new(ex);
        let ok = session.run_source(name, text, &mut host);
        let recipes = checked.recipes;
        Program { session, host, ok, recipes }
    }

    pub fn load_file(path: &Path, run: bool) -> std::io::Result<Program> {
        Program::load_file_seeded(path, run, 0)
    }

    pub fn load_file_seeded(path: &Path, run: bool, seed: u64) -> std::io::Result<Program> {
        Program::load_file_with(path, run, seed, ExecMode::Fused)
    }

    /// Read and check (and with `run`, run) a file; `fuse` as in [`Program::run_with`].
    pub fn load_file_with(path: &Path, run: bool, seed: u64, mode: ExecMode) -> std::io::Result<Program> {
        let text = std::fs::read_to_string(path)?;
        let root = path.parent().map(|p| p.to_path_buf());
        let name = path.display().to_string();
        Ok(if run {
            Program::run_with(&name, &text, root.as_deref(), true, seed, mode)
        } else {
            Program::check(&name, &text, root.as_deref())
        })
    }

    pub fn diagnostics(&self) -> &[Diagnostic] {
        self.session.diagnostics()
    }
    pub fn sources(&self) -> &SourceMap {
        &self.session.t.sources
    }
    pub fn models(&self) -> &[ModelSummary] {
        &self.session.summaries
    }
    pub fn output(&self) -> &RunOutput {
        &self.host.out
    }
}

/// The recipes of a checked program (all of them check cleanly when the program does).
fn recipe_names(s: &Session) -> Vec<String> {
    s.t.recipes.iter().map(|r| r.kind.keyword().to_string()).collect()
}
