//! The parser's error type: what was expected where, kept as a bit set so that chumsky can merge
//! the expectations of every alternative tried at one position without allocating, plus the
//! grammar's named errors (chained comparisons, `if` without `else`, ...) as finished diagnostics.

use super::Input;
use crate::diag::Diagnostic;
use crate::span::{FileId, Span};
use crate::syntax::token::{Kw, Punct, Tok};
use chumsky::error::EmptyErr;
use chumsky::error::{Error, LabelError};
use chumsky::util::MaybeRef;
use chumsky::{span::SimpleSpan, DefaultExpected};

/// Something the parser could have accepted. Labels name a whole construct ("an expression");
/// the rest are single tokens. The order is the order of the phrases in a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Expect {
    Expression,
    Name,
    ModuleName,
    FunctionName,
    ModelName,
    PipelineName,
    RecipeName,
    ParamName,
    FieldName,
    MemberName,
    RecipeField,
    BodyStart,
    Type,
    Dimension,
    EveryUnit,
    Operator,
    EndOfLine,
    // Single tokens, listed after the labels.
    Every,
    By,
    Else,
    Colon,
    Eq,
    Comma,
    FatArrow,
    LParen,
    LBracket,
    LBrace,
    RParen,
    RBracket,
    RBrace,
    Dot,
    Ellipsis,
    EndOfFile,
    /// Any other token: named through [`Tok::describe`] of the token itself.
    OtherToken,
}

const COUNT: u8 = Expect::OtherToken as u8 + 1;

impl Expect {
    fn from_index(i: u8) -> Expect {
        // A table rather than a transmute from the bit's index.
        const ALL: [Expect; COUNT as usize] = [
            Expect::Expression,
            Expect::Name,
            Expect::ModuleName,
            Expect::FunctionName,
            Expect::ModelName,
            Expect::PipelineName,
            Expect::RecipeName,
            Expect::ParamName,
            Expect::FieldName,
            Expect::MemberName,
            Expect::RecipeField,
            Expect::BodyStart,
            Expect::Type,
            Expect::Dimension,
            Expect::EveryUnit,
            Expect::Operator,
            Expect::EndOfLine,
            Expect::Every,
            Expect::By,
            Expect::Else,
            Expect::Colon,
            Expect::Eq,
            Expect::Comma,
            Expect::FatArrow,
            Expect::LParen,
            Expect::LBracket,
            Expect::LBrace,
            Expect::RParen,
            Expect::RBracket,
            Expect::RBrace,
            Expect::Dot,
            Expect::Ellipsis,
            Expect::EndOfFile,
            Expect::OtherToken,
        ];
        ALL[i as usize]
    }

    fn phrase(self) -> &'static str {
        use Expect::*;
        match self {
            Expression => "an expression",
            Name => "a name",
            ModuleName => "a module name",
            FunctionName => "a function name",
            ModelName => "a model name",
            PipelineName => "a pipeline name",
            RecipeName => "a recipe name",
            ParamName => "a parameter name",
            FieldName => "a field name",
            MemberName => "a field or method name",
            RecipeField => "a recipe field such as `model = ...`",
            BodyStart => "`=` or `{` to start the body",
            Type => "a type such as `f32[B, 784]` or `int`",
            Dimension => "a dimension (a number, a name, `_` or `...`)",
            EveryUnit => "`epoch` or `steps`",
            Operator => "an operator",
            EndOfLine => "end of line",
            Every => "`every`",
            By => "`by`",
            Else => "`else`",
            Eq => "`=`",
            Colon => "`:`",
            Comma => "`,`",
            FatArrow => "`=>`",
            LParen => "`(`",
            LBracket => "`[`",
            LBrace => "`{`",
            RParen => "`)`",
            RBracket => "`]`",
            RBrace => "`}`",
            Dot => "`.`",
            Ellipsis => "`...`",
            EndOfFile => "end of file",
            OtherToken => "another token",
        }
    }

    fn of_token(t: &Tok) -> Expect {
        match t {
            Tok::Kw(Kw::Every) => Expect::Every,
            Tok::Kw(Kw::By) => Expect::By,
            Tok::Kw(Kw::Else) => Expect::Else,
            Tok::Punct(p) => match p {
                Punct::Eq => Expect::Eq,
                Punct::Colon => Expect::Colon,
                Punct::Comma => Expect::Comma,
                Punct::FatArrow => Expect::FatArrow,
                Punct::LParen => Expect::LParen,
                Punct::LBracket => Expect::LBracket,
                Punct::LBrace => Expect::LBrace,
                Punct::RParen => Expect::RParen,
                Punct::RBracket => Expect::RBracket,
                Punct::RBrace => Expect::RBrace,
                Punct::Dot => Expect::Dot,
                Punct::Ellipsis => Expect::Ellipsis,
                Punct::Semi => Expect::EndOfLine,
                // Operators are only ever tried as continuations of an expression.
                _ => Expect::Operator,
            },
            Tok::Kw(Kw::And | Kw::Or) => Expect::Operator,
            Tok::Newline => Expect::EndOfLine,
            _ => Expect::OtherToken,
        }
    }
}

/// A set of [`Expect`]s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpectSet(u64);

impl ExpectSet {
    fn with(self, e: Expect) -> ExpectSet {
        ExpectSet(self.0 | 1 << e as u8)
    }
    fn has(self, e: Expect) -> bool {
        self.0 & (1 << e as u8) != 0
    }
    fn without(self, e: Expect) -> ExpectSet {
        ExpectSet(self.0 & !(1 << e as u8))
    }
    fn iter(self) -> impl Iterator<Item = Expect> {
        (0..COUNT).filter(move |i| self.0 & (1 << i) != 0).map(Expect::from_index)
    }
}

/// One syntax error: where, and what would have been accepted there; or a named error.
#[derive(Clone, Debug)]
pub enum SyntaxError {
    Expected { at: SimpleSpan, expected: ExpectSet },
    Named(Box<Diagnostic>),
}

impl SyntaxError {
    /// The finished diagnostic; `found` names the token at the error.
    pub fn into_diagnostic(self, file: FileId, tokens: &[(Tok, SimpleSpan)]) -> Diagnostic {
        let (at, expected) = match self {
            SyntaxError::Named(d) => return *d,
            SyntaxError::Expected { at, expected } => (at, expected),
        };
        let from = tokens.partition_point(|(_, s)| s.start < at.start);
        let found =
            tokens[from..].iter().take_while(|(_, s)| s.start == at.start).find(|(_, s)| s.end == at.end).map(|(t, _)| t.describe());
        if let Some(d) = keyword_typo(file, &tokens[..from]) {
            return d;
        }
        let found = found.unwrap_or_else(|| Tok::Eof.describe());
        let phrase = describe(tidy(expected));
        Diagnostic::error("E0101", format!("expected {phrase}, found {found}"), Span::new(file, at.start, at.end))
            .with_label(format!("expected {phrase}"))
    }
}

/// An error right after a line's first word, when that word is one edit from a keyword
/// (`modle Net()`, `lte y = 3`, `logg every 50 steps`): the mistake is the word, not what follows.
fn keyword_typo(file: FileId, before: &[(Tok, SimpleSpan)]) -> Option<Diagnostic> {
    let (first, rest) = before.split_last()?;
    let Tok::Ident(word) = &first.0 else { return None };
    if !matches!(rest.last(), None | Some((Tok::Newline, _))) {
        return None;
    }
    let keyword = crate::habits::keyword_typo(word)?;
    Some(
        Diagnostic::error("E0101", format!("unknown keyword `{word}`"), Span::new(file, first.1.start, first.1.end))
            .with_label("not a keyword")
            .with_help(format!("did you mean `{keyword}`?")),
    )
}

/// Keep the expectations that help. An expression could always go on with an operator or a
/// postfix `(`, `[` or `.`: name those only when nothing else was possible, since what was meant
/// is nearly always the other thing (the end of the line, a `)`, an `else`). Tokens without a
/// phrase of their own are named only when they are all there is.
fn tidy(mut set: ExpectSet) -> ExpectSet {
    use Expect::*;
    // (`=>` continues a name into a one-parameter lambda.)
    let continuations = [Operator, LParen, LBracket, Dot, FatArrow];
    let only_continuations = set.iter().all(|e| continuations.contains(&e) || e == OtherToken);
    if !only_continuations {
        for e in continuations {
            set = set.without(e);
        }
    }
    if set.iter().any(|e| e != OtherToken) {
        set = set.without(OtherToken);
    }
    // A statement could have ended here: that is the expectation to name (the file could have
    // ended too, and a block could have closed).
    if set.has(EndOfLine) {
        set = set.without(EndOfFile).without(RBrace);
    }
    // At the start of a line, "end of line" only means that blank lines may come first.
    if set.has(Expression) || set.has(RecipeField) || set.has(MemberName) {
        set = set.without(EndOfLine);
    }
    set
}

fn describe(set: ExpectSet) -> String {
    let phrases: Vec<&str> = set.iter().map(Expect::phrase).collect();
    match phrases.as_slice() {
        [] => "something else".into(),
        [one] => (*one).into(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

impl<'a> LabelError<'a, Input<'a>, DefaultExpected<'a, Tok>> for SyntaxError {
    fn expected_found<E: IntoIterator<Item = DefaultExpected<'a, Tok>>>(
        expected: E,
        _found: Option<MaybeRef<'a, Tok>>,
        at: SimpleSpan,
    ) -> Self {
        let mut set = ExpectSet::default();
        for e in expected {
            set = match e {
                DefaultExpected::Token(t) => set.with(Expect::of_token(&t)),
                DefaultExpected::EndOfInput => set.with(Expect::EndOfFile),
                _ => set,
            };
        }
        SyntaxError::Expected { at, expected: set }
    }
}

impl<'a> LabelError<'a, Input<'a>, Expect> for SyntaxError {
    fn expected_found<E: IntoIterator<Item = Expect>>(expected: E, _found: Option<MaybeRef<'a, Tok>>, at: SimpleSpan) -> Self {
        let set = expected.into_iter().fold(ExpectSet::default(), ExpectSet::with);
        SyntaxError::Expected { at, expected: set }
    }

    fn label_with(&mut self, label: Expect) {
        if let SyntaxError::Expected { expected, .. } = self {
            *expected = ExpectSet::default().with(label);
        }
    }
}

impl<'a> Error<'a, Input<'a>> for SyntaxError {
    fn merge(self, other: Self) -> Self {
        match (self, other) {
            (SyntaxError::Expected { at, expected: a }, SyntaxError::Expected { expected: b, .. }) => {
                SyntaxError::Expected { at, expected: ExpectSet(a.0 | b.0) }
            }
            // A named error explains more than a list of tokens.
            (named @ SyntaxError::Named(_), _) | (_, named @ SyntaxError::Named(_)) => named,
        }
    }
}

/// What the grammar needs of its error type. The grammar is built twice: with [`EmptyErr`], which
/// carries nothing and which chumsky handles on a fast path (a valid file, the common case,
/// parses about twice as fast), and, only when that pass finds an error, with [`SyntaxError`]
/// for the messages. Both passes take the same path through the input, so the trees are equal.
pub(crate) trait GrammarError<'a>: Error<'a, Input<'a>> + LabelError<'a, Input<'a>, Expect> + Clone + 'a {
    fn named(d: Diagnostic) -> Self;
    /// A failure with nothing to add to what the alternatives tried there expected.
    fn at(at: SimpleSpan) -> Self;
}

impl<'a> GrammarError<'a> for SyntaxError {
    fn named(d: Diagnostic) -> Self {
        SyntaxError::Named(Box::new(d))
    }
    fn at(at: SimpleSpan) -> Self {
        SyntaxError::Expected { at, expected: ExpectSet::default() }
    }
}

impl<'a> GrammarError<'a> for EmptyErr {
    fn named(_: Diagnostic) -> Self {
        EmptyErr::default()
    }
    fn at(_: SimpleSpan) -> Self {
        EmptyErr::default()
    }
}
