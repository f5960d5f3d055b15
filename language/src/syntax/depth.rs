//! A bound on how deeply expressions nest. Operators chain without delimiters (`1 + 1 + ...`,
//! `- - - x`, `a.b.c...`, `x => y => ...`), so a long enough line makes a tree deep enough to
//! exhaust the stack of every later stage that walks it (and of dropping it). Programs nest a few
//! dozen levels at most; a definition nested deeper than [`MAX_DEPTH`] is reported (E0106) and
//! keeps its name with an error value, and its tree is taken apart without recursion.

use super::ast::*;
use crate::diag::Diagnostic;
use crate::span::Span;
use std::rc::Rc;

/// The deepest expression the later stages are given: room for the deepest delimiter nesting
/// ([`super::layout::MAX_NESTING`]) and some operators inside it.
pub const MAX_DEPTH: usize = 320;

/// Replace every expression of `program` that nests deeper than [`MAX_DEPTH`] by an error node,
/// with a diagnostic for each.
pub fn limit_depth(program: &mut Program, diags: &mut Vec<Diagnostic>) {
    for item in &mut program.items {
        match &mut item.kind {
            ItemKind::Let(_, e) | ItemKind::Data(_, e) | ItemKind::Expr(e) => guard(e, diags),
            ItemKind::Fn(f) => guard_fn(f, diags),
            ItemKind::Model(m) => {
                if let Some(m) = Rc::get_mut(m) {
                    m.params.iter_mut().filter_map(|p| p.default.as_mut()).for_each(|e| guard(e, diags));
                    m.fields.iter_mut().for_each(|f| guard(&mut f.value, diags));
                    m.methods.iter_mut().for_each(|f| guard_fn(f, diags));
                }
            }
            ItemKind::Recipe(r) => {
                let Some(r) = Rc::get_mut(r) else { continue };
                for entry in &mut r.entries {
                    match entry {
                        RecipeEntry::Field(f) => guard(&mut f.value, diags),
                        RecipeEntry::Evaluate { data, body, .. } => {
                            guard(data, diags);
                            guard(body, diags);
                        }
                        RecipeEntry::Checkpoint { dir, .. } => guard(dir, diags),
                        RecipeEntry::Log { .. } => {}
                        RecipeEntry::Step { params, body, .. } => {
                            params.iter_mut().filter_map(|p| p.default.as_mut()).for_each(|e| guard(e, diags));
                            for s in body {
                                match s {
                                    Stmt::Let(_, e) | Stmt::Log(e, _) | Stmt::Expr(e) => guard(e, diags),
                                    Stmt::Update { target, grads, .. } => {
                                        guard(target, diags);
                                        guard(grads, diags);
                                    }
                                }
                            }
                        }
                    }
                }
            }
            ItemKind::Use(_) => {}
        }
    }
}

fn guard_fn(f: &mut Rc<FnDecl>, diags: &mut Vec<Diagnostic>) {
    // Just parsed, so the declaration has no other owner.
    if let Some(f) = Rc::get_mut(f) {
        f.params.iter_mut().filter_map(|p| p.default.as_mut()).for_each(|e| guard(e, diags));
        guard(&mut f.body, diags);
    }
}

fn guard(e: &mut Expr, diags: &mut Vec<Diagnostic>) {
    let Some(at) = too_deep(e) else { return };
    diags.push(
        Diagnostic::error("E0106", format!("expression nested more than {MAX_DEPTH} deep"), at)
            .with_label("this is one level too deep")
            .with_help("split the expression with `let`"),
    );
    e.kind = ExprKind::Error;
}

/// The span of the first node below [`MAX_DEPTH`], if there is one; without recursion.
fn too_deep(e: &Expr) -> Option<Span> {
    let mut stack = vec![(e, 1usize)];
    let mut kids = vec![];
    while let Some((e, depth)) = stack.pop() {
        if depth > MAX_DEPTH {
            return Some(e.span);
        }
        children(e, &mut kids);
        stack.extend(kids.drain(..).map(|k| (k, depth + 1)));
    }
    None
}

fn stmt_exprs(s: &Stmt) -> [Option<&Expr>; 2] {
    match s {
        Stmt::Let(_, e) | Stmt::Log(e, _) | Stmt::Expr(e) => [Some(e), None],
        Stmt::Update { target, grads, .. } => [Some(target), Some(grads)],
    }
}

fn children<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match &e.kind {
        ExprKind::List(xs) | ExprKind::Tuple(xs) => out.extend(xs),
        ExprKind::Record(fs) => out.extend(fs.iter().map(|(_, x)| x)),
        ExprKind::Unary(_, x) | ExprKind::Field(x, _) | ExprKind::Checkpoint(x) | ExprKind::Precision(_, x) => out.push(x),
        ExprKind::Binary(_, a, b) | ExprKind::Pipe(a, b) => out.extend([&**a, &**b]),
        ExprKind::Call(f, args) => {
            out.push(f);
            out.extend(args.iter().map(|a| &a.value));
        }
        ExprKind::Index(x, items) => {
            out.push(x);
            for it in items {
                match it {
                    IndexItem::Single(x) => out.push(x),
                    IndexItem::Slice { start, end, step, .. } => out.extend([start, end, step].into_iter().flatten()),
                    IndexItem::Ellipsis(_) => {}
                }
            }
        }
        ExprKind::Lambda(_, body) => out.push(body),
        ExprKind::Block(stmts, tail) => {
            out.extend(stmts.iter().flat_map(stmt_exprs).flatten());
            out.extend(tail.as_deref());
        }
        ExprKind::If(c, t, f) => out.extend([&**c, &**t, &**f]),
        ExprKind::Int(_)
        | ExprKind::Float(_)
        | ExprKind::Str(_)
        | ExprKind::Bool(_)
        | ExprKind::Auto
        | ExprKind::Name(_)
        | ExprKind::Type(_)
        | ExprKind::Error => {}
    }
}

/// Dropping a tree of any depth without overflowing the stack. The first [`DROP_RECURSION`]
/// levels drop the ordinary way (recursively, no allocation: nearly every tree ends there);
/// below that an expression moves its children onto a stack and empties each before it goes,
/// so no drop recurses further. (Chumsky drops the trees of alternatives it backtracks over, so
/// this cannot wait until after the parse, and the recursive part must fit in the 64 KiB that
/// chumsky keeps free when it recurses.)
impl Drop for Expr {
    fn drop(&mut self) {
        let kind = std::mem::replace(&mut self.kind, ExprKind::Error);
        let depth = DROP_DEPTH.get();
        if depth < DROP_RECURSION {
            DROP_DEPTH.set(depth + 1);
            drop(kind);
            DROP_DEPTH.set(depth);
            return;
        }
        let mut stack = vec![];
        move_children(kind, &mut stack);
        while let Some(mut e) = stack.pop() {
            move_children(std::mem::replace(&mut e.kind, ExprKind::Error), &mut stack);
        }
    }
}

/// How many levels of a tree drop recursively; each level is a few small frames.
const DROP_RECURSION: u32 = 24;

thread_local! {
    /// How many recursive `Expr` drops enclose the current one on this thread.
    static DROP_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

fn move_children(kind: ExprKind, stack: &mut Vec<Expr>) {
    match kind {
        ExprKind::List(xs) | ExprKind::Tuple(xs) => stack.extend(xs),
        ExprKind::Record(fs) => stack.extend(fs.into_iter().map(|(_, x)| x)),
        ExprKind::Unary(_, x) | ExprKind::Field(x, _) | ExprKind::Checkpoint(x) | ExprKind::Precision(_, x) => stack.push(*x),
        ExprKind::Binary(_, a, b) | ExprKind::Pipe(a, b) => stack.extend([*a, *b]),
        ExprKind::Call(f, args) => {
            stack.push(*f);
            stack.extend(args.into_iter().map(|a| a.value));
        }
        ExprKind::Index(x, items) => {
            stack.push(*x);
            for it in items {
                match it {
                    IndexItem::Single(x) => stack.push(x),
                    IndexItem::Slice { start, end, step, .. } => stack.extend([start, end, step].into_iter().flatten()),
                    IndexItem::Ellipsis(_) => {}
                }
            }
        }
        // A lambda's body may be shared (closures hold it); the last owner takes it apart.
        ExprKind::Lambda(_, body) => stack.extend(Rc::try_unwrap(body).ok()),
        ExprKind::Block(stmts, tail) => {
            for s in stmts {
                match s {
                    Stmt::Let(_, e) | Stmt::Log(e, _) | Stmt::Expr(e) => stack.push(e),
                    Stmt::Update { target, grads, .. } => stack.extend([target, grads]),
                }
            }
            stack.extend(tail.map(|t| *t));
        }
        ExprKind::If(c, t, f) => stack.extend([*c, *t, *f]),
        ExprKind::Int(_)
        | ExprKind::Float(_)
        | ExprKind::Str(_)
        | ExprKind::Bool(_)
        | ExprKind::Auto
        | ExprKind::Name(_)
        | ExprKind::Type(_)
        | ExprKind::Error => {}
    }
}

#[cfg(test)]
mod tests {
    use crate::span::FileId;
    use crate::syntax::ast::*;
    use crate::syntax::parse;

    fn codes(src: &str) -> Vec<&'static str> {
        parse(FileId(0), src).1.iter().map(|d| d.code).collect()
    }

    #[test]
    fn long_chains_are_reported_not_crashed_on() {
        let terms = |n: usize, op: &str| vec!["1"; n].join(op);
        // Deep enough to overflow the checker's (and drop's) stack if they were given it.
        for src in [
            format!("let x = {}\nlet y = 2", terms(200_000, " + ")),
            format!("let x = 2{}\nlet y = 2", "**2".repeat(100_000)),
            format!("let x = {}1\nlet y = 2", "-".repeat(100_000)),
            format!("let x = f{}\nlet y = 2", "(1)".repeat(100_000)),
            format!("fn f(x) = {}x\nlet y = 2", "x => ".repeat(50_000)),
        ] {
            let (p, d) = parse(FileId(0), &src);
            assert_eq!(d.iter().map(|d| d.code).collect::<Vec<_>>(), ["E0106"], "{}", &src[..40]);
            assert_eq!(p.items.len(), 2);
            match &p.items[0].kind {
                ItemKind::Let(_, e) => assert!(matches!(e.kind, ExprKind::Error)),
                ItemKind::Fn(f) => assert!(matches!(f.body.kind, ExprKind::Error)),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn ordinary_nesting_is_untouched() {
        assert!(codes(&format!("let x = {}", vec!["1"; 300].join(" + "))).is_empty());
        assert!(codes("let y = [1, -2, -3, 4] |> sum |> (s => s * 2)").is_empty());
    }
}
