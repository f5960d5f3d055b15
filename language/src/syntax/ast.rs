//! The abstract syntax tree. Every node has a span. Errors the parser recovered from leave
//! `ExprKind::Error` / `TypeKind::Error` nodes, which later stages skip silently.

use crate::span::Span;
use crate::types::DType;
use std::rc::Rc;

#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

#[derive(Clone, Debug, Default)]
pub struct Program {
    pub items: Vec<Item>,
    /// Comments and blank lines in source order (see [`super::trivia`]).
    pub trivia: Vec<super::trivia::Trivia>,
}

#[derive(Clone, Debug)]
pub struct Item {
    pub kind: ItemKind,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum ItemKind {
    /// `use std.nn` — the dotted path.
    Use(Vec<Ident>),
    Fn(Rc<FnDecl>),
    Model(Rc<ModelDecl>),
    /// `data name = pipeline`
    Data(Ident, Expr),
    Let(Ident, Expr),
    Expr(Expr),
    Recipe(Rc<Recipe>),
}

#[derive(Clone, Debug)]
pub struct Param {
    pub name: Ident,
    pub ty: Option<TypeExpr>,
    pub default: Option<Expr>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct FnDecl {
    pub name: Ident,
    pub params: Vec<Param>,
    pub ret: Option<TypeExpr>,
    pub body: Expr,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Field {
    pub name: Ident,
    pub value: Expr,
    pub span: Span,
    /// `...name = expr` in a model: the tuple or record it holds names its parameters directly
    /// under the model (`0.weight`), as `torch.nn.Sequential` names its children.
    pub spread: bool,
}

#[derive(Clone, Debug)]
pub struct ModelDecl {
    pub name: Ident,
    pub params: Vec<Param>,
    pub fields: Vec<Field>,
    pub methods: Vec<Rc<FnDecl>>,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecipeKind {
    Train,
    Evaluate,
    Infer,
}

impl RecipeKind {
    pub fn keyword(self) -> &'static str {
        match self {
            RecipeKind::Train => "train",
            RecipeKind::Evaluate => "evaluate",
            RecipeKind::Infer => "infer",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Recipe {
    pub kind: RecipeKind,
    pub name: Option<Ident>,
    pub entries: Vec<RecipeEntry>,
    pub span: Span,
}

/// `every epoch`, `every 50 steps`, `every 2 epochs`.
#[derive(Clone, Debug)]
pub struct Every {
    pub count: Option<Expr>,
    pub unit: Ident,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum RecipeEntry {
    Field(Field),
    /// `evaluate test_set every epoch { metric, ... }`
    Evaluate {
        data: Expr,
        every: Every,
        body: Expr,
        span: Span,
    },
    /// `checkpoint "runs/x" every epoch`
    Checkpoint {
        dir: Expr,
        every: Every,
        span: Span,
    },
    /// `log every 50 steps`
    Log {
        every: Every,
        span: Span,
    },
    /// `step(x) { ... }`
    Step {
        params: Vec<Param>,
        body: Vec<Stmt>,
        span: Span,
    },
}

#[derive(Clone, Debug)]
pub enum Stmt {
    Let(Ident, Expr),
    /// `update model by grads`
    Update {
        target: Expr,
        grads: Expr,
        span: Span,
    },
    /// `log value` inside a step block.
    Log(Expr, Span),
    Expr(Expr),
}

#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    Neg,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Mod,
    Pow,
    MatMul,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        use BinOp::*;
        match self {
            Add => "+",
            Sub => "-",
            Mul => "*",
            Div => "/",
            FloorDiv => "//",
            Mod => "%",
            Pow => "**",
            MatMul => "@",
            Eq => "==",
            Ne => "!=",
            Lt => "<",
            Le => "<=",
            Gt => ">",
            Ge => ">=",
            And => "and",
            Or => "or",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Arg {
    pub name: Option<Ident>,
    pub value: Expr,
}

#[derive(Clone, Debug)]
pub enum IndexItem {
    Single(Expr),
    Slice { start: Option<Expr>, end: Option<Expr>, step: Option<Expr>, span: Span },
    Ellipsis(Span),
}

#[derive(Clone, Debug)]
pub enum ExprKind {
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
    Auto,
    Name(String),
    /// `[a, b, ...]`: a tensor literal; nested lists give higher ranks.
    List(Vec<Expr>),
    Tuple(Vec<Expr>),
    Record(Vec<(Ident, Expr)>),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `lhs |> rhs`: kept apart from calls so messages can speak of pipes.
    Pipe(Box<Expr>, Box<Expr>),
    Call(Box<Expr>, Vec<Arg>),
    Index(Box<Expr>, Vec<IndexItem>),
    Field(Box<Expr>, Ident),
    Lambda(Vec<Ident>, Rc<Expr>),
    Block(Vec<Stmt>, Option<Box<Expr>>),
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `checkpoint { ... }`: a block whose values backward recomputes instead of keeping them
    /// (activation checkpointing, forced).
    Checkpoint(Box<Expr>),
    /// `precision bf16 { ... }`: the block's matrix products and convolutions in a training step
    /// compute in this precision instead of the recipe's (PyTorch's nested `torch.autocast`).
    Precision(Ident, Box<Expr>),
    Type(TypeExpr),
    Error,
}

#[derive(Clone, Debug)]
pub struct TypeExpr {
    pub kind: TypeKind,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalarKind {
    Int,
    Float,
    Bool,
    Str,
}

#[derive(Clone, Debug)]
pub enum TypeKind {
    /// `f32[B, 784]`; `dims: None` for a bare `f32` (a 0-d tensor).
    Tensor {
        dtype: DType,
        dims: Option<Vec<DimExpr>>,
    },
    Scalar(ScalarKind),
    /// `i64[*B] or f32[*B, C]` (annotations only): the value must match one of the types; the
    /// first that matches binds the sizes.
    Union(Vec<TypeExpr>),
    Error,
}

#[derive(Clone, Debug)]
pub enum DimExpr {
    Int(i64, Span),
    Name(String, Span),
    Wild(Span),
    Ellipsis(Span),
    /// `H * D`: a product of sizes.
    Product(Vec<DimExpr>, Span),
    /// `*S` (annotations only): any number of dims, like `...`, but named: every annotation of
    /// the same call that names `*S` must have exactly the same dims there (no broadcasting).
    Pack(String, Span),
}
