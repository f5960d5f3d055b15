//! The standard library as the language server shows it: each module's items with their
//! signatures and the comments above them (hover, completion, signature help), and the files
//! definitions jump to. The binary embeds the stdlib (`dlc_language::stdlib`); the files are
//! the source checkout's `stdlib/` when it holds exactly what was embedded, else a read-only copy
//! written once into the cache directory, so a definition never opens text that differs from
//! what the checker read.

use super::line_index::LineIndex;
use dlc_language::syntax::ast::{ExprKind, ItemKind, Param};
use dlc_language::FileId;
use lsp_types::{Location, Range};
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StdKind {
    Fn,
    Model,
    Let,
}

/// What a `fn` of `std.optim` builds, read from the record it returns (`(optimizer: "sgd",
/// ...)`), so that completion offers optimisers for `optimizer =` and schedules for `schedule =`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builds {
    Optimizer,
    Schedule,
    Parallel,
    Other,
}

#[derive(Clone, Debug)]
pub struct StdItem {
    pub module: &'static str,
    pub name: String,
    pub kind: StdKind,
    /// `model Linear(in_features: int, out_features: int, bias: bool = true)`.
    pub signature: String,
    /// Each parameter as written (`bias: bool = true`).
    pub params: Vec<String>,
    /// The comment lines above the definition, without their `#`.
    pub doc: String,
    pub range: Range,
    pub builds: Builds,
}

pub struct Stdlib {
    pub items: Vec<StdItem>,
    dir: Option<PathBuf>,
}

impl Stdlib {
    pub fn load() -> Stdlib {
        let mut items = vec![];
        for (module, src) in dlc_language::stdlib::MODULES {
            items_of(module, src, &mut items);
        }
        Stdlib { items, dir: files_dir() }
    }

    pub fn find(&self, module: &str, name: &str) -> Option<&StdItem> {
        self.items.iter().find(|i| i.module == module && i.name == name)
    }

    /// An item of any module (for names not imported yet).
    pub fn any(&self, name: &str) -> Option<&StdItem> {
        self.items.iter().find(|i| i.name == name)
    }

    /// The file of module `std.nn` (`.../nn.dl`).
    pub fn path(&self, module: &str) -> Option<PathBuf> {
        Some(self.dir.as_ref()?.join(format!("{}.dl", module.strip_prefix("std.")?)))
    }

    pub fn location(&self, item: &StdItem) -> Option<Location> {
        Some(Location { uri: super::uri::from_path(&self.path(item.module)?)?, range: item.range })
    }

    /// Whether `path` is one of the stdlib's files (which the server never reports on).
    pub fn owns(&self, path: &Path) -> bool {
        self.dir.as_deref().is_some_and(|d| path.parent() == Some(d))
    }
}

fn items_of(module: &'static str, src: &'static str, out: &mut Vec<StdItem>) {
    let (program, _) = dlc_language::syntax::parse(FileId(0), src);
    let lines = LineIndex::new(src);
    let text = |s: dlc_language::Span| src.get(s.range()).unwrap_or("").to_string();
    let params_of = |ps: &[Param]| ps.iter().map(|p| squash(&text(p.span))).collect::<Vec<_>>();
    for item in &program.items {
        let (name, kind, params, builds) = match &item.kind {
            ItemKind::Fn(f) => (f.name.clone(), StdKind::Fn, params_of(&f.params), builds(&f.body.kind)),
            ItemKind::Model(m) => (m.name.clone(), StdKind::Model, params_of(&m.params), Builds::Other),
            ItemKind::Let(n, _) => (n.clone(), StdKind::Let, vec![], Builds::Other),
            _ => continue,
        };
        let signature = match kind {
            StdKind::Fn => format!("fn {}({})", name.name, params.join(", ")),
            StdKind::Model => format!("model {}({})", name.name, params.join(", ")),
            StdKind::Let => format!("let {}", name.name),
        };
        out.push(StdItem {
            module,
            name: name.name.clone(),
            kind,
            signature,
            params,
            doc: doc_above(src, item.span.start as usize),
            range: lines.range(src, name.span.start as usize, name.span.end as usize),
            builds,
        });
    }
}

/// A parameter written over several lines, on one.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn builds(body: &ExprKind) -> Builds {
    let ExprKind::Record(fields) = body else { return Builds::Other };
    match fields.first().map(|(n, _)| n.name.as_str()) {
        Some("optimizer") => Builds::Optimizer,
        Some("schedule") => Builds::Schedule,
        Some("parallel") => Builds::Parallel,
        _ => Builds::Other,
    }
}

/// The `#` lines directly above the line at `start` (a blank line ends the comment).
pub fn doc_above(src: &str, start: usize) -> String {
    let before = &src[..src[..start.min(src.len())].rfind('\n').map_or(0, |i| i + 1)];
    let mut lines: Vec<&str> = vec![];
    for line in before.lines().rev() {
        match line.trim_start().strip_prefix('#') {
            Some(c) => lines.push(c.strip_prefix(' ').unwrap_or(c)),
            None => break,
        }
    }
    lines.reverse();
    lines.join("\n")
}

/// Where the stdlib's files are: the checkout's when they are what was embedded, else the copy.
fn files_dir() -> Option<PathBuf> {
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("../stdlib");
    if same_as_embedded(&checkout) {
        return checkout.canonicalize().ok();
    }
    let base = dlc_jit::cuda::ptx_cache::default_dir()?.parent()?.to_path_buf();
    let dir = base.join(format!("stdlib-{}", fingerprint()));
    if !same_as_embedded(&dir) {
        write_copy(&dir)?;
    }
    Some(dir)
}

fn same_as_embedded(dir: &Path) -> bool {
    dlc_language::stdlib::MODULES.iter().all(|(module, src)| {
        let file = dir.join(format!("{}.dl", module.trim_start_matches("std.")));
        std::fs::read_to_string(file).is_ok_and(|t| t == *src)
    })
}

/// The files, read-only: they are what this binary checks against, not something to edit.
fn write_copy(dir: &Path) -> Option<()> {
    std::fs::create_dir_all(dir).ok()?;
    for (module, src) in dlc_language::stdlib::MODULES {
        let file = dir.join(format!("{}.dl", module.trim_start_matches("std.")));
        let _ = std::fs::remove_file(&file);
        std::fs::write(&file, src).ok()?;
        if let Ok(meta) = std::fs::metadata(&file) {
            let mut perms = meta.permissions();
            perms.set_readonly(true);
            let _ = std::fs::set_permissions(&file, perms);
        }
    }
    Some(())
}

/// A short hash of the embedded sources: a new stdlib gets a new folder.
fn fingerprint() -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for (module, src) in dlc_language::stdlib::MODULES {
        h.update(module.as_bytes());
        h.update(src.as_bytes());
    }
    h.finalize().iter().take(6).map(|b| format!("{b:02x}")).collect()
}
