//! Type annotations: matching a value against `f32[B, T, D]`, `f32[..., D]`, `f32[*S]` or
//! `i64[*B] or f32[*B, C]`, binding symbolic sizes and named packs on first use, so that later
//! annotations of the same call (and the body) see them.

use super::tracer::Tracer;
use super::value::Value;
use super::R;
use crate::diag::Diagnostic;
use crate::span::Span;
use crate::syntax::ast::*;
use crate::types::{rules, Dim, TensorTy};
use std::collections::HashMap;

/// What the annotations of one call have bound: sizes by name (`B`) and packs (`*S`).
#[derive(Default, Clone)]
pub struct DimEnv {
    names: HashMap<String, Dim>,
    packs: HashMap<String, PackBinding>,
}

/// The dims a pack stands for, and the value that bound them (for the report).
#[derive(Clone)]
struct PackBinding {
    dims: Vec<Dim>,
    /// The annotated thing that bound the pack: "argument `pred` of `mse`".
    what: String,
    ty: TensorTy,
    at: Span,
}

impl DimEnv {
    pub fn get(&self, name: &str) -> Option<&Dim> {
        self.names.get(name)
    }
    /// A pattern's dims with what is bound filled in (a pack gives its dims, none when empty);
    /// a part that is not bound, or not a size, as its text (`*S`, `C`, `...`).
    fn filled(&self, pat: &[DimExpr]) -> Vec<Result<Dim, String>> {
        let mut out = vec![];
        for d in pat {
            match d {
                DimExpr::Pack(n, _) => match self.packs.get(n) {
                    Some(b) => out.extend(b.dims.iter().cloned().map(Ok)),
                    None => out.push(Err(format!("*{n}"))),
                },
                DimExpr::Name(n, _) => out.push(self.names.get(n).cloned().ok_or_else(|| n.clone())),
                DimExpr::Int(n, _) => out.push(Ok(Dim::known(*n))),
                other => out.push(Err(dim_text(other))),
            }
        }
        out
    }
    /// Sizes bound by name, sorted, for binding them in a body.
    pub fn sizes(&self) -> Vec<(String, Dim)> {
        let mut v: Vec<(String, Dim)> = self.names.iter().map(|(n, d)| (n.clone(), d.clone())).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
}

/// Why a tensor did not match a pattern.
enum Mismatch {
    /// A rank or one dimension: a note for the generic report.
    Detail(String),
    /// A pack bound earlier to other dims: the two values must have the same shape there.
    Pack(PackBinding, Vec<Dim>),
}

impl Tracer {
    /// Check a value against a type annotation, binding symbolic dims on first use.
    /// Numbers are converted where the annotation asks (an int for a `float`, a number for `f32`).
    pub fn check_annot(&mut self, v: Value, t: &TypeExpr, dims: &mut DimEnv, at: Span, what: &str, code: &'static str) -> R<Value> {
        let mismatch = |tr: &mut Tracer, found: String, note: Option<String>| -> R<Value> {
            let mut d = Diagnostic::error(code, format!("{what} should be {}, found {found}", type_text(t)), at)
                .with_label(format!("this is {found}"))
                .with_secondary(t.span, "expected because of this type");
            if let Some(n) = note {
                d = d.with_note(n);
            }
            Err(tr.error(d))
        };
        match &t.kind {
            TypeKind::Error => Ok(v),
            TypeKind::Scalar(k) => match (k, &v) {
                (ScalarKind::Int, Value::Int(_) | Value::Dim(_)) => Ok(v),
                (ScalarKind::Float, Value::Float(_)) => Ok(v),
                (ScalarKind::Float, Value::Int(i)) => Ok(Value::Float(*i as f64)),
                (ScalarKind::Bool, Value::Bool(_)) => Ok(v),
                (ScalarKind::Str, Value::Str(_)) => Ok(v),
                _ => mismatch(self, v.kind().to_string(), None),
            },
            TypeKind::Union(alts) => {
                // The first alternative that matches binds; a failed one binds nothing.
                for alt in alts {
                    let mut trial = dims.clone();
                    if let Some(v) = self.try_match(&v, alt, &mut trial, at, what) {
                        *dims = trial;
                        return Ok(v);
                    }
                }
                let found_ty = match &v {
                    Value::Tensor(n) => Some(self.ty(*n)),
                    _ => None,
                };
                // The alternative of the value's own dtype failed on a pack: that is the report.
                let near = found_ty.as_ref().and_then(|f| alts.iter().find_map(|a| self.near_miss(f, a, dims, subject(what))));
                if let (Some(f), None) = (&found_ty, &near) {
                    for alt in alts {
                        let TypeKind::Tensor { dtype, dims: Some(pat) } = &alt.kind else { continue };
                        let mut trial = dims.clone();
                        if *dtype == f.dtype {
                            if let Err(Mismatch::Pack(bound, covered)) = self.match_dims(f, pat, &mut trial, what, at) {
                                return Err(self.pack_mismatch(code, what, at, f, &covered, &bound));
                            }
                        }
                    }
                }
                let found = found_ty.as_ref().map(|t| t.to_string()).unwrap_or_else(|| v.kind().to_string());
                let expected: Vec<String> = alts.iter().map(|a| self.instantiated(a, dims)).collect();
                let note = format!("here that means {}", expected.join(" or "));
                let r = mismatch(self, found, Some(note));
                if let (Some(h), Some(d)) = (near, self.diags.last_mut()) {
                    d.help = Some(h);
                }
                r
            }
            TypeKind::Tensor { dtype, dims: pat } => {
                let node = match &v {
                    Value::Tensor(n) => *n,
                    Value::Int(_) | Value::Float(_) | Value::Bool(_) if pat.as_ref().map(|p| p.is_empty()).unwrap_or(true) => {
                        self.to_tensor(&v, Some(*dtype), at)?
                    }
                    // A plain number for a bound `*S` is that shape filled with it (a GAN's
                    // `bce_with_logits(d(x), 1.0)`): a constant cannot be misaligned.
                    Value::Int(_) | Value::Float(_) if matches!(pat.as_deref(), Some([DimExpr::Pack(n, _)]) if dims.packs.contains_key(n)) =>
                    {
                        return Ok(Value::Tensor(self.to_tensor(&v, Some(*dtype), at)?));
                    }
                    _ => return mismatch(self, v.kind().to_string(), None),
                };
                let ty = self.ty(node);
                if ty.dtype != *dtype {
                    return mismatch(self, ty.to_string(), None);
                }
                let pat: Vec<DimExpr> = pat.clone().unwrap_or_default();
                match self.match_dims(&ty, &pat, dims, what, at) {
                    Ok(()) => Ok(Value::Tensor(node)),
                    Err(Mismatch::Detail(detail)) => mismatch(self, ty.to_string(), Some(detail)),
                    Err(Mismatch::Pack(bound, found)) => Err(self.pack_mismatch(code, what, at, &ty, &found, &bound)),
                }
            }
        }
    }

    /// `v` against one alternative of a union (`or` is flat: never a union itself), without
    /// reporting: the value, converted as the annotation asks, on a match.
    fn try_match(&mut self, v: &Value, t: &TypeExpr, dims: &mut DimEnv, at: Span, what: &str) -> Option<Value> {
        let before = self.diags.len();
        let r = self.check_annot(v.clone(), t, dims, at, what, "E0308");
        self.diags.truncate(before);
        r.ok()
    }

    /// Two values that a pack ties together have different shapes: name both, say what
    /// broadcasting them would have done, and the likely fix.
    fn pack_mismatch(
        &mut self,
        code: &'static str,
        what: &str,
        at: Span,
        ty: &TensorTy,
        found: &[Dim],
        bound: &PackBinding,
    ) -> super::Reported {
        let (this, other) = (subject(what), subject(&bound.what));
        let mut d = Diagnostic::error(code, format!("{what} should have the same shape as `{other}`, found {ty} and {}", bound.ty), at)
            .with_label(format!("`{this}` is {ty}"))
            .with_secondary(bound.at, format!("`{other}` is {}", bound.ty));
        match rules::broadcast(&ty.shape, &bound.ty.shape) {
            Ok(b) if b != ty.shape && b != bound.ty.shape => {
                let b = TensorTy::new(ty.dtype, b);
                d = d.with_note(format!(
                    "broadcasting them would give {b}, every element of one against every element of the other (PyTorch only warns)"
                ));
            }
            _ => d = d.with_note("the signature asks for equal shapes: they are not broadcast"),
        }
        if let Some((longer, axis)) =
            extra_unit_axis(found, &bound.dims).map(|a| (this, a)).or_else(|| extra_unit_axis(&bound.dims, found).map(|a| (other, a)))
        {
            d = d.with_help(format!("remove the extra size-1 axis: `squeeze({longer}, axis: {axis})`"));
        }
        self.error(d)
    }

    /// The fix when `found` is one step from `t`: another dtype of the same shape (`cast`), or one
    /// extra size-1 axis (`squeeze`).
    fn near_miss(&self, found: &TensorTy, t: &TypeExpr, env: &DimEnv, name: &str) -> Option<String> {
        let TypeKind::Tensor { dtype, dims: Some(pat) } = &t.kind else { return None };
        let want = env.filled(pat).into_iter().collect::<Result<Vec<Dim>, String>>().ok()?;
        let same = want.len() == found.rank() && want.iter().zip(&found.shape).all(|(a, b)| a.compatible(b));
        if same && found.dtype != *dtype {
            return Some(format!("convert it: `cast({name}, {dtype})`"));
        }
        let axis = extra_unit_axis(&found.shape, &want).filter(|_| found.dtype == *dtype)?;
        Some(format!("remove the extra size-1 axis: `squeeze({name}, axis: {axis})`"))
    }

    /// An alternative of a union with the sizes and packs bound so far filled in: `i64[4]`.
    fn instantiated(&self, t: &TypeExpr, env: &DimEnv) -> String {
        let TypeKind::Tensor { dtype, dims: Some(pat) } = &t.kind else { return type_text(t) };
        let parts: Vec<String> = env.filled(pat).into_iter().map(|d| d.map(|d| d.to_string()).unwrap_or_else(|text| text)).collect();
        format!("{dtype}[{}]", parts.join(", "))
    }

    fn match_dims(&mut self, ty: &TensorTy, pat: &[DimExpr], dims: &mut DimEnv, what: &str, at: Span) -> Result<(), Mismatch> {
        let rest = pat.iter().position(|d| matches!(d, DimExpr::Ellipsis(_) | DimExpr::Pack(..)));
        let fixed = pat.len() - rest.map(|_| 1).unwrap_or(0);
        if (rest.is_none() && ty.rank() != fixed) || (rest.is_some() && ty.rank() < fixed) {
            let detail = format!("expected rank {}{}, found rank {}", if rest.is_some() { "at least " } else { "" }, fixed, ty.rank());
            // A pack already bound fixes the rank: report it as the shape mismatch it is.
            if let Some(DimExpr::Pack(n, _)) = rest.map(|e| &pat[e]) {
                if let Some(b) = dims.packs.get(n) {
                    let found = ty.shape[..ty.rank().saturating_sub(fixed).min(ty.rank())].to_vec();
                    return Err(Mismatch::Pack(b.clone(), found));
                }
            }
            return Err(Mismatch::Detail(detail));
        }
        let mut pairs: Vec<(&DimExpr, &Dim, usize)> = vec![];
        match rest {
            None => pairs.extend(pat.iter().zip(ty.shape.iter()).enumerate().map(|(i, (p, d))| (p, d, i))),
            Some(e) => {
                for (i, p) in pat[..e].iter().enumerate() {
                    pairs.push((p, &ty.shape[i], i));
                }
                let tail = pat.len() - e - 1;
                for (j, p) in pat[e + 1..].iter().enumerate() {
                    let i = ty.rank() - tail + j;
                    pairs.push((p, &ty.shape[i], i));
                }
                if let DimExpr::Pack(n, _) = &pat[e] {
                    let covered = ty.shape[e..ty.rank() - tail].to_vec();
                    match dims.packs.get(n) {
                        Some(b) if b.dims.len() != covered.len() || b.dims.iter().zip(&covered).any(|(x, y)| !x.compatible(y)) => {
                            return Err(Mismatch::Pack(b.clone(), covered));
                        }
                        Some(_) => {}
                        None => {
                            let binding = PackBinding { dims: covered, what: what.to_string(), ty: ty.clone(), at };
                            dims.packs.insert(n.clone(), binding);
                        }
                    }
                }
            }
        }
        for (p, d, i) in pairs {
            match p {
                DimExpr::Int(n, _) => {
                    if !d.compatible(&Dim::known(*n)) {
                        return Err(Mismatch::Detail(format!("dimension {i} is {d}, expected {n}")));
                    }
                }
                DimExpr::Name(n, _) => {
                    let expected = match self.lookup(n) {
                        Some(Value::Int(v)) => Some(Dim::known(v)),
                        Some(Value::Dim(x)) => Some(x),
                        _ => dims.names.get(n).cloned(),
                    };
                    match expected {
                        Some(e) => {
                            if !d.compatible(&e) {
                                return Err(Mismatch::Detail(format!("dimension {i} is {d}, but `{n}` is {e}")));
                            }
                        }
                        None => {
                            dims.names.insert(n.clone(), d.clone());
                        }
                    }
                }
                DimExpr::Product(factors, _) => {
                    // Checkable once every factor is known here; a product does not bind names.
                    if let Some(expected) = self.product_dim(factors, dims) {
                        if !d.compatible(&expected) {
                            return Err(Mismatch::Detail(format!("dimension {i} is {d}, expected {expected}")));
                        }
                    }
                }
                DimExpr::Wild(_) | DimExpr::Ellipsis(_) | DimExpr::Pack(..) => {}
            }
        }
        Ok(())
    }

    fn product_dim(&self, factors: &[DimExpr], dims: &DimEnv) -> Option<Dim> {
        let mut acc = Dim::known(1);
        for f in factors {
            let d = match f {
                DimExpr::Int(n, _) => Dim::known(*n),
                DimExpr::Name(n, _) => match self.lookup(n) {
                    Some(Value::Int(v)) => Dim::known(v),
                    Some(Value::Dim(x)) => x,
                    _ => dims.names.get(n)?.clone(),
                },
                _ => return None,
            };
            acc = acc.mul(&d);
        }
        Some(acc)
    }

    /// A tensor of the annotated type with symbolic dims, for checking a definition on its own.
    /// `None` where the annotation does not fix a rank (`...`, `*S`, `or`).
    pub fn symbolic_arg(&mut self, name: &str, t: &TypeExpr) -> Option<Value> {
        let TypeKind::Tensor { dtype, dims } = &t.kind else { return None };
        let mut shape = vec![];
        for d in dims.clone().unwrap_or_default() {
            shape.push(match d {
                DimExpr::Int(n, _) => Dim::known(n),
                DimExpr::Wild(_) => Dim::Any,
                DimExpr::Name(n, _) => self.symbolic_size(&n),
                DimExpr::Ellipsis(_) | DimExpr::Pack(..) => return None,
                DimExpr::Product(factors, _) => {
                    let mut acc = Dim::known(1);
                    for f in &factors {
                        acc = acc.mul(&match f {
                            DimExpr::Int(n, _) => Dim::known(*n),
                            DimExpr::Name(n, _) => self.symbolic_size(n),
                            _ => return None,
                        });
                    }
                    acc
                }
            });
        }
        let ty = TensorTy::new(*dtype, shape);
        let id = self.graph.add_input(name, ty.clone());
        Some(Value::Tensor(self.node(crate::ir::Op::Input(id), ty.dtype, ty.shape, vec![], t.span)))
    }

    fn symbolic_size(&self, n: &str) -> Dim {
        match self.lookup(n) {
            Some(Value::Int(v)) => Dim::known(v),
            _ => Dim::sym(n),
        }
    }
}

/// The name inside the first backticks of "argument `pred` of `mse`": the thing a report names.
fn subject(what: &str) -> &str {
    what.split('`').nth(1).unwrap_or(what)
}

/// Where `longer` is `shorter` with one size-1 axis added, that axis (negative when it is the last).
fn extra_unit_axis(longer: &[Dim], shorter: &[Dim]) -> Option<i64> {
    if longer.len() != shorter.len() + 1 {
        return None;
    }
    (0..longer.len()).rev().find_map(|k| {
        let without: Vec<&Dim> = longer.iter().enumerate().filter(|(i, _)| *i != k).map(|(_, d)| d).collect();
        let fits = longer[k].as_known() == Some(1) && without.iter().zip(shorter).all(|(a, b)| a.compatible(b));
        fits.then_some(if k + 1 == longer.len() { -1 } else { k as i64 })
    })
}

fn dim_text(d: &DimExpr) -> String {
    match d {
        DimExpr::Int(n, _) => n.to_string(),
        DimExpr::Name(n, _) => n.clone(),
        DimExpr::Wild(_) => "_".into(),
        DimExpr::Ellipsis(_) => "...".into(),
        DimExpr::Pack(n, _) => format!("*{n}"),
        DimExpr::Product(f, _) => f.iter().map(dim_text).collect::<Vec<_>>().join(" * "),
    }
}

pub fn type_text(t: &TypeExpr) -> String {
    match &t.kind {
        TypeKind::Scalar(k) => match k {
            ScalarKind::Int => "an int",
            ScalarKind::Float => "a float",
            ScalarKind::Bool => "a bool",
            ScalarKind::Str => "a string",
        }
        .to_string(),
        TypeKind::Tensor { dtype, dims: None } => format!("{dtype}[]"),
        TypeKind::Tensor { dtype, dims: Some(d) } => format!("{dtype}[{}]", d.iter().map(dim_text).collect::<Vec<_>>().join(", ")),
        TypeKind::Union(alts) => alts.iter().map(type_text).collect::<Vec<_>>().join(" or "),
        TypeKind::Error => "?".into(),
    }
}
