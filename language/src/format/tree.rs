//! The file as the formatter sees it: tokens nested in their brackets, a `{ }` (and the file)
//! split into statements at the line breaks that end one, and the comments and line breaks that
//! end nothing kept where they are. Which line breaks end a statement is the layout pass's
//! decision ([`crate::syntax::layout`]), taken over unchanged.

use super::facts::Facts;
use crate::span::FileId;
use crate::syntax::layout::layout;
use crate::syntax::lexer::lex_with_trivia;
use crate::syntax::token::{Punct, Tok};
use crate::syntax::trivia::TriviaKind;
use std::collections::HashSet;

/// A token with its source text.
#[derive(Clone, Debug)]
pub(super) struct Leaf<'s> {
    pub tok: Tok,
    pub text: &'s str,
    /// A prefix operator: a negation, or the `*` of a named pack of dims (`f32[*S]`).
    pub prefix: bool,
    /// A keyword that starts a statement where it could be a name (`log` in a `step` block).
    pub statement: bool,
    /// A `.` between two integers (`t.0 .1`, `1 .5`): joined, they would read as one number.
    pub detached: bool,
}

#[derive(Debug)]
pub(super) enum Node<'s> {
    Leaf(Leaf<'s>),
    /// `( )` or `[ ]`.
    Group(Group<'s>),
    Block(Block<'s>),
    /// A line break that ends nothing: inside `( )` and `[ ]`, or before a continuation line.
    /// `blank`: one or more empty lines follow it.
    Break {
        blank: bool,
    },
    Comment(&'s str),
}

#[derive(Debug)]
pub(super) struct Group<'s> {
    pub open: Leaf<'s>,
    pub items: Vec<Node<'s>>,
    pub close: Option<Leaf<'s>>,
}

#[derive(Debug)]
pub(super) struct Block<'s> {
    /// The offset of the closing `}` (what [`Facts`] knows braces by).
    pub close_at: u32,
    /// A comment on the line of the `{`.
    pub open_comment: Option<&'s str>,
    pub entries: Vec<Entry<'s>>,
    /// Its statements were written on lines of their own (or separated by `;` or `,`).
    pub written_broken: bool,
}

#[derive(Debug)]
pub(super) enum Entry<'s> {
    /// One or more empty lines.
    Blank,
    /// A comment on a line of its own.
    Comment(&'s str),
    /// A statement, member or recipe entry; a comment after it on its last line is its last node.
    Stmt(Vec<Node<'s>>),
    /// A `# fmt: off` region (up to its `# fmt: on`), copied as written.
    Verbatim(&'s str),
}

enum El<'s> {
    Leaf(Leaf<'s>, u32),
    Comment(&'s str, u32),
    /// A line break; `ends`: it ends a statement (when the file or a `{ }` holds it).
    Newline {
        ends: bool,
    },
}

/// The file's statements.
pub(super) fn build<'s>(src: &'s str, facts: &Facts) -> Vec<Entry<'s>> {
    let els = elements(src, facts);
    let mut b = Builder { els: &els, i: 0, src };
    b.entries(false).0
}

/// Tokens, comments and line breaks in source order.
fn elements<'s>(src: &'s str, facts: &Facts) -> Vec<El<'s>> {
    let lexed = lex_with_trivia(FileId(0), src);
    let ends: HashSet<u32> =
        layout(lexed.tokens.clone()).tokens.iter().filter(|(t, _)| *t == Tok::Newline).map(|(_, s)| s.start as u32).collect();
    let mut els = vec![];
    let mut comments = lexed.trivia.iter().filter(|t| t.kind == TriviaKind::Comment).peekable();
    let tokens = &lexed.tokens;
    let mut prev: Option<&Tok> = None;
    for (k, t) in tokens.iter().enumerate() {
        while let Some(c) = comments.next_if(|c| c.span.start < t.span.start) {
            els.push(El::Comment(src[c.span.range()].trim_end(), c.span.start));
        }
        match &t.tok {
            Tok::Eof => break,
            Tok::Newline => {
                // A run of line breaks is decided at its last one; the breaks at the end of the
                // file end its last statement (the layout drops them).
                let run = tokens[k..].iter().take_while(|t| t.tok == Tok::Newline).count();
                let at_end = matches!(tokens.get(k + run).map(|t| &t.tok), Some(Tok::Eof) | None);
                els.push(El::Newline { ends: at_end || ends.contains(&tokens[k + run - 1].span.start) });
            }
            tok => {
                let prefix = match tok {
                    Tok::Punct(Punct::Minus) => facts.negations.contains(&t.span.start),
                    Tok::Punct(Punct::Star) => matches!(prev, Some(Tok::Punct(Punct::LBracket | Punct::Comma))),
                    _ => false,
                };
                let statement = facts.log_statements.contains(&t.span.start);
                let number = |t: Option<&Tok>| matches!(t, Some(Tok::Int(_) | Tok::Float(_)));
                let detached = *tok == Tok::Punct(Punct::Dot) && number(prev) && number(tokens.get(k + 1).map(|t| &t.tok));
                let leaf = Leaf { tok: tok.clone(), text: &src[t.span.range()], prefix, statement, detached };
                els.push(El::Leaf(leaf, t.span.start));
                prev = Some(tok);
            }
        }
    }
    els.extend(comments.map(|c| El::Comment(src[c.span.range()].trim_end(), c.span.start)));
    els
}

struct Builder<'a, 's> {
    els: &'a [El<'s>],
    i: usize,
    src: &'s str,
}

fn punct(el: &El) -> Option<Punct> {
    match el {
        El::Leaf(Leaf { tok: Tok::Punct(p), .. }, _) => Some(*p),
        _ => None,
    }
}

impl<'s> Builder<'_, 's> {
    /// Statements up to the `}` that closes `in_block` (or the end of the file); returns them,
    /// the offset of that `}`, whether they were written on lines of their own, and a comment on
    /// the line of the `{`.
    fn entries(&mut self, in_block: bool) -> (Vec<Entry<'s>>, u32, bool, Option<&'s str>) {
        let (mut out, mut stmt, mut broken, mut open_comment) = (vec![], vec![], false, None);
        // Line breaks in a row since the last token or comment (two or more: a blank line).
        let mut newlines = 0;
        while let Some(el) = self.els.get(self.i) {
            self.i += 1;
            let separator = matches!(punct(el), Some(Punct::Semi)) || (in_block && matches!(punct(el), Some(Punct::Comma)));
            match el {
                El::Leaf(l, at) if in_block && l.tok == Tok::Punct(Punct::RBrace) => {
                    finish(&mut out, &mut stmt);
                    return (out, *at, broken, open_comment);
                }
                _ if separator => {
                    broken |= finish(&mut out, &mut stmt);
                }
                El::Newline { ends: true } => {
                    broken |= finish(&mut out, &mut stmt) || in_block;
                    newlines += 1;
                    continue;
                }
                El::Newline { ends: false } => {
                    if newlines == 0 && !stmt.is_empty() {
                        stmt.push(Node::Break { blank: false });
                    }
                    newlines += 1;
                    continue;
                }
                El::Comment(text, at) if stmt.is_empty() => {
                    if in_block && out.is_empty() && newlines == 0 && !broken {
                        open_comment = Some(*text);
                    } else if !in_block && *text == "# fmt: off" && self.starts_line(*at) {
                        blank_before(&mut out, newlines);
                        out.push(Entry::Verbatim(self.verbatim(*at)));
                    } else {
                        blank_before(&mut out, newlines);
                        out.push(Entry::Comment(text));
                    }
                    broken = true;
                }
                El::Comment(text, _) => stmt.push(Node::Comment(text)),
                El::Leaf(..) => {
                    if stmt.is_empty() {
                        blank_before(&mut out, newlines);
                    }
                    self.i -= 1;
                    let node = self.node();
                    stmt.push(node);
                }
            }
            newlines = 0;
        }
        finish(&mut out, &mut stmt);
        (out, self.src.len() as u32, broken, open_comment)
    }

    /// The token at the cursor, with the group or block it opens.
    fn node(&mut self) -> Node<'s> {
        let El::Leaf(leaf, _) = &self.els[self.i] else { return Node::Break { blank: false } };
        self.i += 1;
        match leaf.tok {
            Tok::Punct(Punct::LBrace) => {
                let (entries, close_at, written_broken, open_comment) = self.entries(true);
                Node::Block(Block { close_at, open_comment, entries, written_broken })
            }
            Tok::Punct(Punct::LParen | Punct::LBracket) => Node::Group(self.group(leaf.clone())),
            _ => Node::Leaf(leaf.clone()),
        }
    }

    /// The inside of `( )` or `[ ]`, where no line break ends anything.
    fn group(&mut self, open: Leaf<'s>) -> Group<'s> {
        let mut items = vec![];
        let mut newlines = 0;
        while let Some(el) = self.els.get(self.i) {
            match el {
                El::Leaf(l, _) if matches!(l.tok, Tok::Punct(Punct::RParen | Punct::RBracket | Punct::RBrace)) => {
                    // A `}` here would be a syntax error; it is left for the block that holds it.
                    if l.tok != Tok::Punct(Punct::RBrace) {
                        self.i += 1;
                    }
                    return Group { open, items, close: Some(l.clone()) };
                }
                El::Newline { .. } => {
                    self.i += 1;
                    newlines += 1;
                    if newlines == 1 {
                        items.push(Node::Break { blank: false });
                    } else if let Some(Node::Break { blank }) = items.last_mut() {
                        *blank = true;
                    }
                    continue;
                }
                El::Comment(text, _) => {
                    self.i += 1;
                    items.push(Node::Comment(text));
                }
                El::Leaf(..) => {
                    let node = self.node();
                    items.push(node);
                }
            }
            newlines = 0;
        }
        Group { open, items, close: None }
    }

    fn starts_line(&self, at: u32) -> bool {
        self.src[..at as usize].rsplit('\n').next().is_some_and(|before| before.trim().is_empty())
    }

    /// The text from the line of the `# fmt: off` comment at `at` to the end of the line of the
    /// next `# fmt: on` comment (or the end of the file); the cursor moves past it.
    fn verbatim(&mut self, at: u32) -> &'s str {
        let start = self.src[..at as usize].rfind('\n').map_or(0, |k| k + 1);
        let mut end = self.src.len();
        while let Some(el) = self.els.get(self.i) {
            self.i += 1;
            if let El::Comment(text, c) = el {
                if *text == "# fmt: on" {
                    end = *c as usize + text.len();
                    break;
                }
            }
        }
        self.src[start..end].trim_end()
    }
}

/// End the statement being built, if any; returns whether there was one.
fn finish<'s>(out: &mut Vec<Entry<'s>>, stmt: &mut Vec<Node<'s>>) -> bool {
    while matches!(stmt.last(), Some(Node::Break { .. })) {
        stmt.pop();
    }
    if stmt.is_empty() {
        return false;
    }
    out.push(Entry::Stmt(std::mem::take(stmt)));
    true
}

/// A blank line before the next entry, when the source has one there and something precedes it.
fn blank_before(out: &mut Vec<Entry>, newlines: usize) {
    if newlines >= 2 && !out.is_empty() && !matches!(out.last(), Some(Entry::Blank)) {
        out.push(Entry::Blank);
    }
}
