//! Indexing: `t[i]` of a tuple, and a tensor's integer, slice, `...` and integer-tensor
//! (gather) indices, checked against its shape and lowered to a slice, a reshape and a take.

use super::tracer::Tracer;
use super::{Value, R};
use crate::ir::Op;
use crate::span::Span;
use crate::syntax::ast::{Expr, IndexItem};
use crate::types::{rules, Dim};

impl Tracer {
    pub(super) fn index(&mut self, v: Value, items: &[IndexItem], span: Span) -> R<Value> {
        let x = match v {
            Value::Tuple(elems) => return self.index_tuple(&elems, items, span),
            Value::Tensor(x) => x,
            other => return self.err("E0310", format!("{} cannot be indexed", other.kind()), span, "not indexable"),
        };
        let ty = self.ty(x);
        let per_axis = self.index_axes(items, ty.rank(), &ty, span)?;
        let mut cut = Cut::default();
        for (axis, it) in per_axis.iter().enumerate() {
            let dim = ty.shape[axis].clone();
            match it {
                None | Some(IndexItem::Ellipsis(_)) => cut.keep(0, 1, dim),
                Some(IndexItem::Single(e)) => self.index_single(e, axis, dim, &mut cut)?,
                Some(IndexItem::Slice { start, end, step, span: s }) => self.index_slice([start, end, step], *s, dim, &mut cut)?,
            }
        }
        let Cut { starts, steps, shape, drop, gather } = cut;
        let mut out = x;
        let identity = starts.iter().all(|s| *s == 0) && steps.iter().all(|s| *s == 1) && shape == ty.shape;
        if !identity {
            out = self.node(Op::Slice { start: starts, step: steps }, ty.dtype, shape.clone(), vec![x], span);
        }
        if !drop.is_empty() {
            out = self.reshape(out, rules::drop_axes(&shape, &drop), span);
        }
        if let Some((axis, idx)) = gather {
            let new_axis = axis - drop.iter().filter(|d| **d < axis).count();
            out = self.take(out, idx, new_axis, span)?;
        }
        Ok(Value::Tensor(out))
    }

    /// `t[i]` of a tuple: one integer known at compile time, negative from the end.
    fn index_tuple(&mut self, elems: &[Value], items: &[IndexItem], span: Span) -> R<Value> {
        let [IndexItem::Single(e)] = items else {
            return self.err("E0310", "a tuple takes a single integer index", span, "tuple index");
        };
        let i = self.eval(e)?.as_int();
        let n = elems.len() as i64;
        match i {
            Some(i) if (-n..n).contains(&i) => Ok(elems[(if i < 0 { i + n } else { i }) as usize].clone()),
            Some(i) => self.err("E0311", format!("index {i} is out of range for a tuple of {n} elements"), e.span, "out of range"),
            None => self.err("E0310", "a tuple index must be an integer known at compile time", e.span, "not an int"),
        }
    }

    /// An index's item per axis of a tensor of this rank: `...` expanded, the rest padded with
    /// full slices (`None`).
    fn index_axes<'i>(
        &mut self,
        items: &'i [IndexItem],
        rank: usize,
        ty: &crate::types::TensorTy,
        span: Span,
    ) -> R<Vec<Option<&'i IndexItem>>> {
        let n_ellipsis = items.iter().filter(|i| matches!(i, IndexItem::Ellipsis(_))).count();
        if n_ellipsis > 1 {
            return self.err("E0310", "an index can contain at most one `...`", span, "two `...`");
        }
        let n_real = items.len() - n_ellipsis;
        if n_real > rank {
            return self.err(
                "E0311",
                format!("too many indices for a tensor of rank {rank}: {n_real} given"),
                span,
                format!("tensor is {ty}"),
            );
        }
        let mut per_axis: Vec<Option<&IndexItem>> = vec![];
        for it in items {
            if let IndexItem::Ellipsis(_) = it {
                per_axis.extend(std::iter::repeat_n(None, rank - n_real));
            } else {
                per_axis.push(Some(it));
            }
        }
        per_axis.resize(rank, None);
        Ok(per_axis)
    }

    /// One axis indexed by an integer (the axis is dropped) or an integer tensor (a gather).
    fn index_single(&mut self, e: &Expr, axis: usize, dim: Dim, cut: &mut Cut) -> R<()> {
        match self.eval(e)? {
            Value::Tensor(idx) => {
                if !self.ty(idx).dtype.is_int() || cut.gather.is_some() {
                    return self.err("E0310", "tensor indices must be a single integer tensor", e.span, "unsupported index");
                }
                cut.gather = Some((axis, idx));
                cut.keep(0, 1, dim);
            }
            iv => {
                let Some(i) = iv.as_int() else {
                    return self.err("E0310", format!("an index must be an integer, found {}", iv.kind()), e.span, "not an int");
                };
                let i = match dim.as_known() {
                    Some(n) if !(-n..n).contains(&i) => {
                        return self.err(
                            "E0311",
                            format!("index {i} is out of range for dimension {axis} of size {n}"),
                            e.span,
                            "out of range",
                        );
                    }
                    Some(n) if i < 0 => i + n,
                    _ => i,
                };
                cut.keep(i, 1, Dim::known(1));
                cut.drop.push(axis);
            }
        }
        Ok(())
    }

    /// One axis indexed by a slice `start:end:step`.
    fn index_slice(&mut self, [start, end, step]: [&Option<Expr>; 3], span: Span, dim: Dim, cut: &mut Cut) -> R<()> {
        let get = |t: &mut Tracer, e: &Option<Expr>| -> R<Option<i64>> {
            match e {
                None => Ok(None),
                Some(e) => match t.eval(e)?.as_int() {
                    Some(i) => Ok(Some(i)),
                    None => t.err("E0310", "slice bounds must be integers known at compile time", e.span, "not an int"),
                },
            }
        };
        // `x[:T]` with a symbolic `T`: the result has size T.
        if let (None, Some(e), None) = (start, end, step) {
            if let Value::Dim(d) = self.eval(e)? {
                if d.as_known().is_none() {
                    cut.keep(0, 1, d);
                    return Ok(());
                }
            }
        }
        let (a, b, c) = (get(self, start)?, get(self, end)?, get(self, step)?.unwrap_or(1));
        if c == 0 {
            return self.err("E0311", "slice step cannot be zero", span, "zero step");
        }
        match dim.as_known() {
            Some(n) => {
                let (st, len) = rules::slice_len(n, a, b, c);
                cut.keep(st, c, Dim::known(len));
            }
            None => {
                let whole = a.is_none() && b.is_none() && c == 1;
                cut.keep(a.unwrap_or(0), c, if whole { dim } else { Dim::Any });
            }
        }
        Ok(())
    }
}

/// What an index does to each axis of a tensor: where the slice starts, its step and size; the
/// axes an integer index drops; the axis an integer tensor gathers along.
#[derive(Default)]
struct Cut {
    starts: Vec<i64>,
    steps: Vec<i64>,
    shape: Vec<Dim>,
    drop: Vec<usize>,
    gather: Option<(usize, crate::ir::NodeId)>,
}

impl Cut {
    fn keep(&mut self, start: i64, step: i64, dim: Dim) {
        self.starts.push(start);
        self.steps.push(step);
        self.shape.push(dim);
    }
}
