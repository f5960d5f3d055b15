//! Types: `f32[B, 784]`, `bool`, `int`, `float`, `str`; dimensions are numbers, names, `_`, `...`,
//! products such as `H * D` and named packs `*S`. In annotations, `T or U` accepts either type.

use super::error::{Expect, GrammarError};
use super::tokens::{kw, punct, Spans, P};
use crate::diag::Diagnostic;
use crate::syntax::ast::{DimExpr, ScalarKind, TypeExpr, TypeKind};
use crate::syntax::token::{Kw, Punct, Tok};
use crate::types::DType;
use chumsky::prelude::*;

/// A tensor type, led by its dtype (also an expression: `zeros(f32[2, 3])`).
pub(super) fn tensor_type<'a, E: GrammarError<'a>>(sp: Spans) -> P<'a, E, TypeExpr> {
    let dim_atom = select_ref! {
        Tok::Int(v) = e => DimExpr::Int(*v, sp.of(e.span())),
        Tok::Ident(n) = e if n == "_" => DimExpr::Wild(sp.of(e.span())),
        Tok::Ident(n) = e => DimExpr::Name(n.clone(), sp.of(e.span())),
        Tok::Punct(Punct::Ellipsis) = e => DimExpr::Ellipsis(sp.of(e.span())),
    }
    .labelled(Expect::Dimension);
    let dim = dim_atom.separated_by(punct(Punct::Star)).at_least(1).collect::<Vec<_>>().map_with(move |mut factors, e| {
        if factors.len() == 1 {
            factors.pop().unwrap_or(DimExpr::Wild(sp.of(e.span())))
        } else {
            DimExpr::Product(factors, sp.of(e.span()))
        }
    });
    // `*S`: a named pack of dims. A leading `*` cannot start a product, so there is no ambiguity.
    let pack = punct(Punct::Star)
        .ignore_then(select_ref! { Tok::Ident(n) => n.clone() }.labelled(Expect::Dimension))
        .map_with(move |n, e| DimExpr::Pack(n, sp.of(e.span())));
    let dim = choice((pack, dim));
    let dims = dim
        .separated_by(punct(Punct::Comma))
        .allow_trailing()
        .collect::<Vec<_>>()
        .delimited_by(punct(Punct::LBracket), punct(Punct::RBracket));
    select_ref! { Tok::DType(d) => *d }
        .then(dims.or_not())
        .map_with(move |(dtype, dims), e| {
            let kind = match dims {
                None if dtype == DType::Bool => TypeKind::Scalar(ScalarKind::Bool),
                dims => TypeKind::Tensor { dtype, dims },
            };
            TypeExpr { kind, span: sp.of(e.span()) }
        })
        .boxed()
}

/// Any type: a tensor type or a scalar type name, or several of them joined by `or`.
pub(super) fn type_expr<'a, E: GrammarError<'a>>(sp: Spans) -> P<'a, E, TypeExpr> {
    single_type(sp)
        .separated_by(kw(Kw::Or))
        .at_least(1)
        .collect::<Vec<_>>()
        .map_with(move |mut alts, e| {
            if alts.len() == 1 {
                alts.pop().unwrap_or(TypeExpr { kind: TypeKind::Error, span: sp.of(e.span()) })
            } else {
                TypeExpr { kind: TypeKind::Union(alts), span: sp.of(e.span()) }
            }
        })
        .boxed()
}

fn single_type<'a, E: GrammarError<'a>>(sp: Spans) -> P<'a, E, TypeExpr> {
    let scalar = select_ref! { Tok::Ident(n) = e => (n, sp.of(e.span())) }.try_map(|(n, span), _| {
        let kind = match n.as_str() {
            "int" => ScalarKind::Int,
            "float" => ScalarKind::Float,
            "str" => ScalarKind::Str,
            _ => {
                return Err(E::named(
                    Diagnostic::error("E0101", format!("expected a type, found `{n}`"), span)
                        .with_label("not a type")
                        .with_help("types are `int`, `float`, `bool`, `str`, or tensor types like `f32[B, 784]`"),
                ));
            }
        };
        Ok(TypeExpr { kind: TypeKind::Scalar(kind), span })
    });
    choice((tensor_type(sp), scalar.boxed())).labelled(Expect::Type).boxed()
}
