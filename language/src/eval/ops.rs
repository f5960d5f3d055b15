//! Tensor op builders: each checks its shape rule, inserts the casts and broadcasts that make the
//! primitive well-typed, and adds nodes to the graph.

use super::tracer::Tracer;
use super::value::Value;
use super::R;
use crate::diag::Diagnostic;
use crate::ir::{BinaryOp, Node, NodeId, Op, ReduceOp, UnaryOp};
use crate::span::Span;
use crate::syntax::ast::BinOp;
use crate::types::rules::{self, RuleError};
use crate::types::shape::{numel, shape_str};
use crate::types::{DType, Dim, Shape, TensorTy};

impl Tracer {
    pub fn ty(&self, n: NodeId) -> TensorTy {
        self.graph.ty(n)
    }

    pub fn node(&mut self, op: Op, dtype: DType, shape: Shape, src: Vec<NodeId>, span: Span) -> NodeId {
        self.graph.add(Node { op, dtype, shape, src }, span)
    }

    pub fn rule_error(&mut self, e: RuleError, span: Span) -> super::Reported {
        self.rule_error_labelled(e, span, "in this expression")
    }

    pub fn rule_error_labelled(&mut self, e: RuleError, span: Span, label: &str) -> super::Reported {
        let mut d = Diagnostic::error(e.code, e.message, span).with_label(label);
        if let Some(h) = e.help {
            d = d.with_help(h);
        }
        self.error(d)
    }

    pub fn constant(&mut self, v: f64, dtype: DType, span: Span) -> NodeId {
        self.node(Op::Const(v.to_bits()), dtype, vec![], vec![], span)
    }

    pub fn cast(&mut self, n: NodeId, dtype: DType, span: Span) -> NodeId {
        let ty = self.ty(n);
        if ty.dtype == dtype {
            return n;
        }
        // A literal cast to another dtype is that literal written in the dtype: `cast([0.1], f64)`
        // keeps 0.1 exactly, as torch.tensor([0.1], dtype=torch.float64) does, instead of
        // rounding through f32 first. (Constants too.)
        if let Op::Literal(_) | Op::Const(_) = self.graph.node(n).op {
            let op = self.graph.node(n).op.clone();
            return self.node(op, dtype, ty.shape, vec![], span);
        }
        self.node(Op::Cast, dtype, ty.shape, vec![n], span)
    }

    pub fn reshape(&mut self, n: NodeId, shape: Shape, span: Span) -> NodeId {
        let ty = self.ty(n);
        if ty.shape == shape {
            return n;
        }
        self.node(Op::Reshape, ty.dtype, shape, vec![n], span)
    }

    /// Broadcast `n` to `shape` (which it must broadcast to): prepend size-1 dims, then expand.
    pub fn expand_to(&mut self, n: NodeId, shape: &[Dim], span: Span) -> NodeId {
        let ty = self.ty(n);
        if ty.shape == shape {
            return n;
        }
        let mut cur = n;
        if ty.rank() < shape.len() {
            let mut s = vec![Dim::known(1); shape.len() - ty.rank()];
            s.extend(ty.shape.iter().cloned());
            cur = self.reshape(cur, s, span);
        }
        if self.ty(cur).shape == shape {
            return cur;
        }
        self.node(Op::Expand, ty.dtype, shape.to_vec(), vec![cur], span)
    }

    /// Turn a value into a tensor node. Scalars become constants of `dtype` (or their natural
    /// dtype: i64, f32, bool).
    pub fn to_tensor(&mut self, v: &Value, dtype: Option<DType>, span: Span) -> R<NodeId> {
        let (x, natural) = match v {
            Value::Tensor(n) => return Ok(*n),
            Value::Int(i) => (*i as f64, DType::I64),
            Value::Float(f) => (*f, DType::F32),
            Value::Bool(b) => (if *b { 1.0 } else { 0.0 }, DType::Bool),
            Value::Dim(d) if d.as_known().is_some() => (d.as_known().unwrap_or(0) as f64, DType::I64),
            Value::Dim(_) => (1.0, DType::I64),
            other => {
                let kind = other.kind();
                return self.err("E0310", format!("expected a tensor or a number, found {kind}"), span, format!("this is {kind}"));
            }
        };
        Ok(self.constant(x, dtype.unwrap_or(natural), span))
    }

    /// `a op b` on values: folded at compile time for scalars, graph nodes otherwise.
    pub fn binary_values(&mut self, op: BinOp, a: &Value, b: &Value, span: Span) -> R<Value> {
        if let Some(v) = fold_scalar(op, a, b) {
            return v.map_err(|msg| self.error(Diagnostic::error("E0307", msg, span).with_label("here")));
        }
        let (ta, tb) = match (a, b) {
            (Value::Tensor(_), _) | (_, Value::Tensor(_)) => (a, b),
            _ => {
                return self.err(
                    "E0310",
                    format!("`{}` cannot combine {} and {}", op.symbol(), a.kind(), b.kind()),
                    span,
                    format!("{} {} {}", a.kind(), op.symbol(), b.kind()),
                )
            }
        };
        for v in [ta, tb] {
            if !matches!(v, Value::Tensor(_) | Value::Int(_) | Value::Float(_) | Value::Bool(_) | Value::Dim(_)) {
                let kind = v.kind();
                return self.err(
                    "E0310",
                    format!("`{}` expects tensors or numbers, found {kind}", op.symbol()),
                    span,
                    format!("this operand is {kind}"),
                );
            }
        }
        let (x, y) = self.promote_pair(ta, tb, span)?;
        let dtype = self.ty(x).dtype;
        // `x ** 2` is `x * x`, as PyTorch computes it (its pow kernel special-cases the exponent
        // 2): correctly rounded, and a multiply instead of a `powf` call per element.
        let squared = matches!(b, Value::Int(2)) || matches!(b, Value::Float(f) if *f == 2.0);
        if op == BinOp::Pow && squared && dtype != DType::Bool {
            // (In the dtype `x ** 2.0` has: an integer tensor squared by a float is a float.)
            let x = self.cast(x, DType::promote(dtype, self.ty(y).dtype), span);
            return Ok(Value::Tensor(self.tensor_binary(BinaryOp::Mul, x, x, span)?));
        }
        if op == BinOp::MatMul {
            return Ok(Value::Tensor(self.matmul(x, y, span)?));
        }
        if op == BinOp::FloorDiv {
            let (xf, yf) = if dtype.is_float() { (x, y) } else { (self.cast(x, DType::F32, span), self.cast(y, DType::F32, span)) };
            let q = self.tensor_binary(BinaryOp::Div, xf, yf, span)?;
            let f = self.unary(UnaryOp::Floor, q, span);
            return Ok(Value::Tensor(self.cast(f, dtype, span)));
        }
        let (prim, out) = match op {
            BinOp::Add => (BinaryOp::Add, None),
            BinOp::Sub => (BinaryOp::Sub, None),
            BinOp::Mul => (BinaryOp::Mul, None),
            BinOp::Div => (BinaryOp::Div, None),
            BinOp::Mod => (BinaryOp::Mod, None),
            BinOp::Pow => (BinaryOp::Pow, None),
            BinOp::Eq => (BinaryOp::CmpEq, Some(DType::Bool)),
            BinOp::Ne => (BinaryOp::CmpNe, Some(DType::Bool)),
            BinOp::Lt => (BinaryOp::CmpLt, Some(DType::Bool)),
            BinOp::Le => (BinaryOp::CmpLe, Some(DType::Bool)),
            // a > b is b < a: the op set keeps one direction.
            BinOp::Gt => return Ok(Value::Tensor(self.tensor_binary(BinaryOp::CmpLt, y, x, span)?)),
            BinOp::Ge => return Ok(Value::Tensor(self.tensor_binary(BinaryOp::CmpLe, y, x, span)?)),
            BinOp::And | BinOp::Or => {
                if dtype != DType::Bool {
                    return self.err("E0307", format!("`{}` needs bool tensors, found {}", op.symbol(), dtype), span, "not bool");
                }
                (if op == BinOp::And { BinaryOp::And } else { BinaryOp::Or }, None)
            }
            BinOp::MatMul | BinOp::FloorDiv => unreachable_matmul(),
        };
        let _ = out;
        // True division: integer operands divide as f32, like torch.
        let (x, y) = if prim == BinaryOp::Div && !dtype.is_float() {
            (self.cast(x, DType::F32, span), self.cast(y, DType::F32, span))
        } else {
            (x, y)
        };
        if matches!(prim, BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod | BinaryOp::Pow)
            && dtype == DType::Bool
        {
            return self.err("E0307", format!("`{}` is not defined on bool tensors", op.symbol()), span, "bool operands");
        }
        Ok(Value::Tensor(self.tensor_binary(prim, x, y, span)?))
    }

    /// Two operands as tensors of their common dtype: tensor-tensor by promote_types; a scalar
    /// only lifts the category (as in PyTorch); two scalars give f32 or i64.
    pub fn promote_pair(&mut self, a: &Value, b: &Value, span: Span) -> R<(NodeId, NodeId)> {
        let dtype = match (a, b) {
            (Value::Tensor(x), Value::Tensor(y)) => DType::promote(self.ty(*x).dtype, self.ty(*y).dtype),
            (Value::Tensor(x), s) | (s, Value::Tensor(x)) => {
                DType::promote_scalar(self.ty(*x).dtype, matches!(s, Value::Float(_)), matches!(s, Value::Bool(_)))
            }
            (Value::Float(_), _) | (_, Value::Float(_)) => DType::F32,
            _ => DType::I64,
        };
        Ok((self.to_tensor(a, Some(dtype), span)?, self.to_tensor(b, Some(dtype), span)?))
    }

    /// A binary primitive on two tensors of one dtype, broadcasting them to a common shape.
    pub fn tensor_binary(&mut self, op: BinaryOp, a: NodeId, b: NodeId, span: Span) -> R<NodeId> {
        let (ta, tb) = (self.ty(a), self.ty(b));
        let dtype = DType::promote(ta.dtype, tb.dtype);
        let a = self.cast(a, dtype, span);
        let b = self.cast(b, dtype, span);
        let shape = rules::broadcast(&ta.shape, &tb.shape)
            .map_err(|e| self.rule_error_labelled(e, span, &format!("{ta} and {tb} combined here")))?;
        let a = self.expand_to(a, &shape, span);
        let b = self.expand_to(b, &shape, span);
        let out = match op {
            BinaryOp::CmpLt | BinaryOp::CmpLe | BinaryOp::CmpEq | BinaryOp::CmpNe => DType::Bool,
            _ => dtype,
        };
        Ok(self.node(Op::Binary(op), out, shape, vec![a, b], span))
    }

    /// A float unary op; integer inputs are computed in f32 as torch does.
    pub fn unary(&mut self, op: UnaryOp, a: NodeId, span: Span) -> NodeId {
        let ty = self.ty(a);
        let a = match op {
            UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Not => a,
            _ if !ty.dtype.is_float() => self.cast(a, DType::F32, span),
            _ => a,
        };
        let ty = self.ty(a);
        self.node(Op::Unary(op), ty.dtype, ty.shape, vec![a], span)
    }

    pub fn normalize_axes(&mut self, axes: &[i64], rank: usize, span: Span) -> R<Vec<usize>> {
        let mut out = vec![];
        if rank == 0 {
            // A 0-d tensor accepts axis 0 or -1 (as PyTorch does) and has nothing to reduce.
            for &a in axes {
                rules::axis(a, 0).map_err(|e| self.rule_error(e, span))?;
            }
            return Ok(out);
        }
        for &a in axes {
            let ax = rules::axis(a, rank).map_err(|e| self.rule_error(e, span))?;
            if !out.contains(&ax) {
                out.push(ax);
            }
        }
        out.sort();
        Ok(out)
    }

    /// Reduce over `axes` (all when None).
    pub fn reduce(&mut self, op: ReduceOp, x: NodeId, axes: Option<&[i64]>, keepdim: bool, span: Span) -> R<NodeId> {
        let ty = self.ty(x);
        let axes: Vec<usize> = match axes {
            Some(a) => self.normalize_axes(a, ty.rank(), span)?,
            None => (0..ty.rank()).collect(),
        };
        let x = if op == ReduceOp::Sum && ty.dtype == DType::Bool { self.cast(x, DType::I64, span) } else { x };
        let dtype = if op == ReduceOp::ArgMax { DType::I64 } else { self.ty(x).dtype };
        let kept = rules::reduce_keepdim(&ty.shape, &axes);
        let r = if axes.is_empty() { x } else { self.node(Op::Reduce(op, axes.clone()), dtype, kept, vec![x], span) };
        Ok(if keepdim { r } else { self.reshape(r, rules::drop_axes(&ty.shape, &axes), span) })
    }

    /// mean = sum / count, in a float dtype.
    pub fn mean(&mut self, x: NodeId, axes: Option<&[i64]>, keepdim: bool, span: Span) -> R<NodeId> {
        let ty = self.ty(x);
        let x = if ty.dtype.is_float() { x } else { self.cast(x, DType::F32, span) };
        let s = self.reduce(ReduceOp::Sum, x, axes, keepdim, span)?;
        let count = self.reduced_count(&ty.shape, axes, span)?;
        let dtype = self.ty(s).dtype;
        let c = self.constant(count.as_known().unwrap_or(1) as f64, dtype, span);
        self.tensor_binary(BinaryOp::Div, s, c, span)
    }

    pub fn reduced_count(&mut self, shape: &[Dim], axes: Option<&[i64]>, span: Span) -> R<Dim> {
        Ok(match axes {
            None => numel(shape),
            Some(a) => {
                let axes = self.normalize_axes(a, shape.len(), span)?;
                axes.iter().fold(Dim::known(1), |acc, &i| acc.mul(&shape[i]))
            }
        })
    }

    /// PyTorch `matmul`: 1-d operands promoted, batch dims broadcast, lowered to a batched
    /// [.., M, K] @ [.., K, N] primitive with identical batch dims.
    pub fn matmul(&mut self, a: NodeId, b: NodeId, span: Span) -> R<NodeId> {
        let (ta, tb) = (self.ty(a), self.ty(b));
        let out_shape = rules::matmul(&ta.shape, &tb.shape).map_err(|mut e| {
            // Name the operands with their dtypes, as the user wrote the types.
            let (sa, sb) = (format!("[{}]", shape_str(&ta.shape)), format!("[{}]", shape_str(&tb.shape)));
            e.message = e.message.replacen(&format!("{sa} @ {sb}"), &format!("{ta} @ {tb}"), 1);
            match ta.shape.last().and_then(|d| d.as_known()) {
                Some(k) if e.code == "E0302" => self.matmul_error(e, span, k, b, tb.rank()),
                _ => self.rule_error(e, span),
            }
        })?;
        let dtype = DType::promote(ta.dtype, tb.dtype);
        if dtype == DType::Bool {
            return self.err("E0307", "matmul is not defined on bool tensors", span, "bool operands");
        }
        let a = self.cast(a, dtype, span);
        let b = self.cast(b, dtype, span);
        let a2: Shape = if ta.rank() == 1 { vec![Dim::known(1), ta.shape[0].clone()] } else { ta.shape.clone() };
        let b2: Shape = if tb.rank() == 1 { vec![tb.shape[0].clone(), Dim::known(1)] } else { tb.shape.clone() };
        let a = self.reshape(a, a2.clone(), span);
        let b = self.reshape(b, b2.clone(), span);
        let batch = rules::broadcast(&a2[..a2.len() - 2], &b2[..b2.len() - 2]).map_err(|e| self.rule_error(e, span))?;
        let mut sa = batch.clone();
        sa.extend_from_slice(&a2[a2.len() - 2..]);
        let mut sb = batch.clone();
        sb.extend_from_slice(&b2[b2.len() - 2..]);
        let a = self.expand_to(a, &sa, span);
        let b = self.expand_to(b, &sb, span);
        let mut mm_shape = batch;
        mm_shape.push(a2[a2.len() - 2].clone());
        mm_shape.push(b2[b2.len() - 1].clone());
        let mm = self.node(Op::MatMul, dtype, mm_shape, vec![a, b], span);
        Ok(self.reshape(mm, out_shape, span))
    }

    pub fn permute(&mut self, x: NodeId, perm: &[usize], span: Span) -> NodeId {
        let ty = self.ty(x);
        if perm.iter().enumerate().all(|(i, p)| i == *p) {
            return x;
        }
        // Compose with a permutation underneath (`transpose(transpose(x))` is `x`).
        if let Op::Permute(inner) = &self.graph.node(x).op {
            let composed: Vec<usize> = perm.iter().map(|p| inner[*p]).collect();
            let src = self.graph.node(x).src[0];
            return self.permute(src, &composed, span);
        }
        let shape = perm.iter().map(|&p| ty.shape[p].clone()).collect();
        self.node(Op::Permute(perm.to_vec()), ty.dtype, shape, vec![x], span)
    }

    pub fn where_(&mut self, c: NodeId, a: NodeId, b: NodeId, span: Span) -> R<NodeId> {
        let (tc, ta, tb) = (self.ty(c), self.ty(a), self.ty(b));
        let c = if tc.dtype == DType::Bool { c } else { self.cast(c, DType::Bool, span) };
        let dtype = DType::promote(ta.dtype, tb.dtype);
        let a = self.cast(a, dtype, span);
        let b = self.cast(b, dtype, span);
        let s1 = rules::broadcast(&tc.shape, &ta.shape).map_err(|e| self.rule_error(e, span))?;
        let shape = rules::broadcast(&s1, &tb.shape).map_err(|e| self.rule_error(e, span))?;
        let c = self.expand_to(c, &shape, span);
        let a = self.expand_to(a, &shape, span);
        let b = self.expand_to(b, &shape, span);
        Ok(self.node(Op::Where, dtype, shape, vec![c, a, b], span))
    }
}

fn unreachable_matmul() -> (BinaryOp, Option<DType>) {
    // MatMul returns early above; keep the match exhaustive without a panic.
    (BinaryOp::Mul, None)
}

/// Compile-time arithmetic on scalars (Python semantics: `/` is true division, `%` floors).
fn fold_scalar(op: BinOp, a: &Value, b: &Value) -> Option<Result<Value, String>> {
    use Value::*;
    let a = match a {
        Dim(d) => d.as_known().map(Int).unwrap_or_else(|| a.clone()),
        _ => a.clone(),
    };
    let b = match b {
        Dim(d) => d.as_known().map(Int).unwrap_or_else(|| b.clone()),
        _ => b.clone(),
    };
    // Arithmetic on symbolic sizes (e.g. `B * T` in a reshape of a generic function).
    let as_dim = |v: &Value| match v {
        Dim(d) => Some(d.clone()),
        Int(i) => Some(crate::types::Dim::known(*i)),
        _ => None,
    };
    if matches!(a, Dim(_)) || matches!(b, Dim(_)) {
        if let (Some(x), Some(y)) = (as_dim(&a), as_dim(&b)) {
            return Some(Ok(Dim(match op {
                BinOp::Mul => x.mul(&y),
                BinOp::FloorDiv | BinOp::Div => x.div(&y).unwrap_or(crate::types::Dim::Any),
                BinOp::Add | BinOp::Sub => crate::types::Dim::Any,
                _ => return Some(Err(format!("`{}` on a symbolic size is not known at compile time", op.symbol()))),
            })));
        }
    }
    let r = match (&a, &b) {
        (Int(x), Int(y)) => {
            let (x, y) = (*x, *y);
            match op {
                BinOp::Add => Int(x.wrapping_add(y)),
                BinOp::Sub => Int(x.wrapping_sub(y)),
                BinOp::Mul => Int(x.wrapping_mul(y)),
                BinOp::Div => {
                    if y == 0 {
                        return Some(Err("division by zero".into()));
                    }
                    Float(x as f64 / y as f64)
                }
                BinOp::FloorDiv => {
                    if y == 0 {
                        return Some(Err("division by zero".into()));
                    }
                    Int(x.div_euclid(y) - if (x.rem_euclid(y) != 0) && y < 0 { 1 } else { 0 })
                }
                BinOp::Mod => {
                    if y == 0 {
                        return Some(Err("modulo by zero".into()));
                    }
                    let r = x % y;
                    Int(if r != 0 && (r < 0) != (y < 0) { r + y } else { r })
                }
                BinOp::Pow if y >= 0 => Int(x.wrapping_pow(y.min(u32::MAX as i64) as u32)),
                BinOp::Pow => Float((x as f64).powf(y as f64)),
                BinOp::Eq => Bool(x == y),
                BinOp::Ne => Bool(x != y),
                BinOp::Lt => Bool(x < y),
                BinOp::Le => Bool(x <= y),
                BinOp::Gt => Bool(x > y),
                BinOp::Ge => Bool(x >= y),
                BinOp::And | BinOp::Or => return Some(Err(format!("`{}` needs bools, found ints", op.symbol()))),
                BinOp::MatMul => return Some(Err("`@` needs tensors, found ints".into())),
            }
        }
        (Int(_) | Float(_), Int(_) | Float(_)) => {
            let (x, y) = (a.as_float()?, b.as_float()?);
            match op {
                BinOp::Add => Float(x + y),
                BinOp::Sub => Float(x - y),
                BinOp::Mul => Float(x * y),
                BinOp::Div => Float(x / y),
                BinOp::FloorDiv => Float((x / y).floor()),
                BinOp::Mod => Float(x - y * (x / y).floor()),
                BinOp::Pow => Float(x.powf(y)),
                BinOp::Eq => Bool(x == y),
                BinOp::Ne => Bool(x != y),
                BinOp::Lt => Bool(x < y),
                BinOp::Le => Bool(x <= y),
                BinOp::Gt => Bool(x > y),
                BinOp::Ge => Bool(x >= y),
                BinOp::And | BinOp::Or => return Some(Err(format!("`{}` needs bools, found numbers", op.symbol()))),
                BinOp::MatMul => return Some(Err("`@` needs tensors, found numbers".into())),
            }
        }
        (Bool(x), Bool(y)) => match op {
            BinOp::And => Bool(*x && *y),
            BinOp::Or => Bool(*x || *y),
            BinOp::Eq => Bool(x == y),
            BinOp::Ne => Bool(x != y),
            _ => return Some(Err(format!("`{}` is not defined on bools", op.symbol()))),
        },
        (Str(x), Str(y)) => match op {
            BinOp::Add => Str(format!("{x}{y}").into()),
            BinOp::Eq => Bool(x == y),
            BinOp::Ne => Bool(x != y),
            _ => return Some(Err(format!("`{}` is not defined on strings", op.symbol()))),
        },
        (DType(x), DType(y)) => match op {
            BinOp::Eq => Bool(x == y),
            BinOp::Ne => Bool(x != y),
            _ => return None,
        },
        _ => return None,
    };
    Some(Ok(r))
}
