//! What every command shares: loading a file (quietly, as `explain`, `bench`, `kernels` and
//! `tune` need it), rendering its diagnostics, and where a recipe's device was asked for.

use dlc::render::render;
use dlc::Program;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

pub fn read_error(file: &Path, e: std::io::Error) -> i32 {
    eprintln!("error: cannot read `{}`: {e}", file.display());
    1
}

/// The folder a program's relative paths are read from, absolute (`dlc::paths`).
pub fn root_of(file: &Path) -> PathBuf {
    dlc::paths::program_root(file)
}

/// Read `file` and run its top-level statements quietly (fused). On an unreadable file or
/// errors, reports them and returns the exit status; `what` says what could not be done
/// (`nothing to explain`).
pub fn load_quietly(file: &Path, what: &str) -> Result<(Program, PathBuf), i32> {
    let text = std::fs::read_to_string(file).map_err(|e| read_error(file, e))?;
    let root = root_of(file);
    // `run_with` checks first and runs nothing when there are errors.
    let p = Program::run_with(&file.display().to_string(), &text, Some(&root), false, 0, dlc::ExecMode::Fused);
    if !p.ok {
        report(&p);
        eprintln!("error: `{}` has errors; {what}", file.display());
        return Err(1);
    }
    Ok((p, root))
}

/// The most diagnostics printed in full. A file that is not DL at all (a data file passed by
/// mistake) can have a hundred thousand; the rest are counted, and `--json` has them all.
const MAX_RENDERED: usize = 200;

/// Render the program's diagnostics on stderr; returns the number of errors.
pub fn report(p: &Program) -> usize {
    let color = color();
    for d in p.diagnostics().iter().take(MAX_RENDERED) {
        eprint!("{}", render(d, p.sources(), color));
    }
    let hidden = p.diagnostics().len().saturating_sub(MAX_RENDERED);
    if hidden > 0 {
        eprintln!("... and {hidden} more (`dlc check --json` lists them all)");
    }
    p.diagnostics().iter().filter(|d| d.is_error()).count()
}

/// Whether stderr gets colours.
pub fn color() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// `file:line:column` of a recipe's `device` field.
pub fn device_field_at(p: &Program, info: &dlc_language::eval::recipe::RecipeInfo) -> Option<String> {
    use dlc_language::syntax::ast::RecipeEntry;
    let span = info.recipe.entries.iter().find_map(|e| match e {
        RecipeEntry::Field(f) if f.name.name.as_str() == "device" => Some(f.span),
        _ => None,
    })?;
    let name = p.sources().files.get(span.file.0 as usize).map(|f| f.name.clone())?;
    let (line, col) = p.sources().line_col(span.file, span.start);
    Some(format!("{name}:{line}:{col}"))
}
