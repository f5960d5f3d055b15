//! The layout: statements one a line at two spaces a level, blocks of items always broken and
//! other blocks as written (`{ x }` stays on its line), line breaks inside `( )` and `[ ]` kept
//! (continuation lines aligned after the bracket, or two spaces in when the bracket ends its
//! line), and a statement's own continuation lines (after `=`, around `|>`, `and`, `or`)
//! joined when it fits in [`WIDTH`]; a longer pipeline goes one stage a line.

use super::facts::Facts;
use super::out::Out;
use super::space::space;
use super::tree::{Block, Entry, Group, Leaf, Node};
use crate::syntax::token::{Kw, Punct, Tok};

/// The widest line a statement is joined into.
pub const WIDTH: usize = 100;

/// How a statement's own line breaks (those outside its brackets) are laid out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// All joined: the statement on one line.
    Flat,
    /// Each `|>` starts a line, two spaces in.
    Piped,
    /// As written, two spaces in.
    Kept,
}

pub(super) struct Renderer<'f> {
    facts: &'f Facts,
    lbrace: Leaf<'static>,
    rbrace: Leaf<'static>,
}

impl<'f> Renderer<'f> {
    pub fn new(facts: &'f Facts) -> Renderer<'f> {
        let leaf = |p: Punct, text| Leaf { tok: Tok::Punct(p), text, prefix: false, statement: false, detached: false };
        Renderer { facts, lbrace: leaf(Punct::LBrace, "{"), rbrace: leaf(Punct::RBrace, "}") }
    }

    /// The whole file.
    pub fn file(&self, entries: &[Entry]) -> String {
        let mut out = Out::new();
        self.entries(&mut out, entries, 0, false, true);
        let mut s = out.finish();
        if !s.is_empty() {
            s.push('\n');
        }
        s
    }

    /// The statements of the file or of a broken block, each on a line at `indent`; a recipe's
    /// fields aligned at `=`.
    fn entries(&self, out: &mut Out, entries: &[Entry], indent: usize, recipe: bool, top: bool) {
        let pads = if recipe { alignment(entries) } else { vec![0; entries.len()] };
        let (mut first, mut blank) = (true, false);
        for (e, pad) in entries.iter().zip(pads) {
            if matches!(e, Entry::Blank) {
                blank = !first;
                continue;
            }
            if !(top && first) {
                out.newline(indent, indent, blank);
            }
            (first, blank) = (false, false);
            match e {
                Entry::Comment(c) => out.text(c),
                Entry::Stmt(nodes) => self.stmt(out, nodes, indent, pad),
                Entry::Verbatim(text) => out.raw(text),
                Entry::Blank => {}
            }
        }
    }

    fn stmt(&self, out: &mut Out, nodes: &[Node], indent: usize, pad: usize) {
        let (body, trailing) = match nodes {
            [rest @ .., before, Node::Comment(c)] if !matches!(before, Node::Break { .. }) => (&nodes[..rest.len() + 1], Some(*c)),
            _ => (nodes, None),
        };
        let pipes = body.iter().any(is_pipe);
        let breaks = body.iter().any(|n| matches!(n, Node::Break { .. }));
        let comments = body.iter().any(|n| matches!(n, Node::Comment(_)));
        // With no line breaks of its own the statement is one line already.
        let mode = if (!breaks && !pipes) || (!comments && self.fits(body, indent, pad, pipes)) {
            Mode::Flat
        } else if pipes {
            Mode::Piped
        } else {
            Mode::Kept
        };
        self.line(out, body, indent, pad, mode);
        if let Some(c) = trailing {
            out.text("  ");
            out.text(c);
        }
    }

    /// Whether the statement joined into one line fits in the width; a pipeline must also hold
    /// no line break (inside brackets or blocks) to stay on one line.
    fn fits(&self, body: &[Node], indent: usize, pad: usize, pipes: bool) -> bool {
        let mut probe = Out::probe(indent, WIDTH);
        self.line(&mut probe, body, indent, pad, Mode::Flat);
        let broke_a_pipeline = pipes && probe.broke();
        !(probe.too_wide() || broke_a_pipeline)
    }

    /// A statement's nodes; its continuation lines two spaces in from `indent`.
    fn line<'s>(&self, out: &mut Out, nodes: &'s [Node<'s>], indent: usize, pad: usize, mode: Mode) {
        let cont = indent + 2;
        let mut prev: Option<&Leaf> = None;
        for (k, node) in nodes.iter().enumerate() {
            if out.stopped() {
                return;
            }
            let before = k.checked_sub(1).and_then(|j| nodes.get(j));
            let after = nodes.get(k + 1);
            match node {
                Node::Break { .. } => {
                    let near = |f: fn(&Node) -> bool| before.is_some_and(f) || after.is_some_and(f);
                    let joined = match mode {
                        Mode::Flat => true,
                        Mode::Piped => near(is_pipe) || near(is_else) || before.is_some_and(is_eq),
                        Mode::Kept => near(is_else),
                    };
                    let comment = |n: Option<&Node>| matches!(n, Some(Node::Comment(_)));
                    if (!joined || comment(before) || comment(after)) && !out.fresh() {
                        out.newline(cont, cont, false);
                    }
                }
                Node::Comment(c) => self.comment(out, c, after, cont, cont),
                Node::Leaf(l) if mode == Mode::Piped && is_pipe(node) => {
                    if !out.fresh() {
                        out.newline(cont, cont, false);
                    }
                    out.text(l.text);
                    prev = Some(l);
                }
                _ => prev = self.item(out, prev, node, false),
            }
            if k == 0 && pad > 0 {
                out.text(&" ".repeat(pad));
            }
        }
    }

    /// A token, group or block after `prev`, with the space between them; returns the last
    /// token written.
    fn item<'a>(&'a self, out: &mut Out, prev: Option<&'a Leaf<'a>>, node: &'a Node<'a>, in_index: bool) -> Option<&'a Leaf<'a>> {
        let first = match node {
            Node::Leaf(l) => l,
            Node::Group(g) => &g.open,
            Node::Block(_) => &self.lbrace,
            Node::Break { .. } | Node::Comment(_) => return prev,
        };
        if !out.fresh() && prev.is_some_and(|p| space(p, first, in_index)) {
            out.text(" ");
        }
        match node {
            Node::Group(g) => {
                self.group(out, g);
                Some(g.close.as_ref().unwrap_or(&g.open))
            }
            Node::Block(b) => {
                self.block(out, b);
                Some(&self.rbrace)
            }
            _ => {
                out.text(first.text);
                Some(first)
            }
        }
    }

    /// A comment inside a statement or a group; the line ends after it.
    fn comment(&self, out: &mut Out, text: &str, after: Option<&Node>, col: usize, base: usize) {
        if !out.fresh() {
            out.text("  ");
        }
        out.text(text);
        if !matches!(after, Some(Node::Break { .. })) {
            out.newline(col, base, false);
        }
    }

    /// `( )` or `[ ]`: its line breaks kept; continuation lines aligned after the opening
    /// bracket, or two spaces in from its line when the bracket ends that line.
    fn group(&self, out: &mut Out, g: &Group) {
        let in_index = g.open.tok == Tok::Punct(Punct::LBracket);
        out.text(g.open.text);
        let (base, open_col) = (out.base(), out.col());
        let block_style = matches!(g.items.first(), Some(Node::Break { .. }));
        let (col, cont_base) = if block_style { (base + 2, base + 2) } else { (open_col, base) };
        let mut prev = Some(&g.open);
        for (k, node) in g.items.iter().enumerate() {
            if out.stopped() {
                return;
            }
            match node {
                Node::Break { .. } if k + 1 == g.items.len() => {
                    let close_col = if block_style { base } else { open_col.saturating_sub(1) };
                    out.newline(close_col, base, false);
                }
                Node::Break { blank } => {
                    if !out.fresh() {
                        out.newline(col, cont_base, *blank && k > 0);
                    }
                }
                Node::Comment(c) => self.comment(out, c, g.items.get(k + 1), col, cont_base),
                _ => prev = self.item(out, prev, node, in_index),
            }
        }
        if let Some(close) = &g.close {
            out.text(close.text);
        }
    }

    /// `{ }`: the body of an item always a statement a line; another block on one line when it
    /// was written so and holds one statement and no comment.
    fn block(&self, out: &mut Out, b: &Block) {
        let stmts: Vec<&[Node]> = b.entries.iter().filter_map(|e| if let Entry::Stmt(n) = e { Some(n.as_slice()) } else { None }).collect();
        let commented = b.open_comment.is_some()
            || b.entries.iter().any(|e| !matches!(e, Entry::Stmt(_)))
            || stmts.iter().any(|s| s.iter().any(|n| matches!(n, Node::Comment(_))));
        let broken = self.facts.bodies.contains(&b.close_at) || b.written_broken || stmts.len() > 1 || commented;
        if b.entries.is_empty() && b.open_comment.is_none() {
            out.text("{}");
            return;
        }
        if !broken {
            out.text("{ ");
            self.line(out, stmts[0], out.base(), 0, Mode::Flat);
            out.text(" }");
            return;
        }
        let base = out.base();
        out.text("{");
        if let Some(c) = b.open_comment {
            out.text("  ");
            out.text(c);
        }
        self.entries(out, &b.entries, base + 2, self.facts.recipes.contains(&b.close_at), false);
        out.newline(base, base, false);
        out.text("}");
    }
}

fn is_pipe(n: &Node) -> bool {
    matches!(n, Node::Leaf(Leaf { tok: Tok::Punct(Punct::Pipe), .. }))
}

fn is_else(n: &Node) -> bool {
    matches!(n, Node::Leaf(Leaf { tok: Tok::Kw(Kw::Else), .. }))
}

fn is_eq(n: &Node) -> bool {
    matches!(n, Node::Leaf(Leaf { tok: Tok::Punct(Punct::Eq), .. }))
}

/// The spaces after each recipe field's name that line up the `=` of consecutive fields (a run
/// ends at a blank line or another kind of entry; comments between fields do not end it).
fn alignment(entries: &[Entry]) -> Vec<usize> {
    let name_width = |e: &Entry| match e {
        Entry::Stmt(nodes) => match nodes.as_slice() {
            [Node::Leaf(name), n, ..] if is_eq(n) && matches!(name.tok, Tok::Ident(_) | Tok::Kw(_)) => Some(name.text.chars().count()),
            _ => None,
        },
        _ => None,
    };
    let mut pads = vec![0; entries.len()];
    let mut run: Vec<(usize, usize)> = vec![];
    let flush = |run: &mut Vec<(usize, usize)>, pads: &mut Vec<usize>| {
        let widest = run.iter().map(|(_, w)| *w).max().unwrap_or(0);
        for (k, w) in run.drain(..) {
            pads[k] = widest - w;
        }
    };
    for (k, e) in entries.iter().enumerate() {
        match (e, name_width(e)) {
            (_, Some(w)) => run.push((k, w)),
            (Entry::Comment(_), None) => {}
            _ => flush(&mut run, &mut pads),
        }
    }
    flush(&mut run, &mut pads);
    pads
}
