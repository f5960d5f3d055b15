//! Dimensions are either known sizes, or monomials over named symbols (`B`, `2*T`, `B*S`) so that
//! flattening a `[B, 28, 28]` tensor gives `[B, 784]` and reshape can check element counts
//! symbolically; `Any` is a wildcard that unifies with everything.

use super::DType;
use serde::Serialize;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Dim {
    /// `coef * product(syms)`; with no symbols it is a known size.
    Mono {
        coef: i64,
        syms: Vec<String>,
    },
    Any,
}

impl Dim {
    pub fn known(n: i64) -> Dim {
        Dim::Mono { coef: n, syms: vec![] }
    }
    pub fn sym(name: &str) -> Dim {
        Dim::Mono { coef: 1, syms: vec![name.to_string()] }
    }
    pub fn as_known(&self) -> Option<i64> {
        match self {
            Dim::Mono { coef, syms } if syms.is_empty() => Some(*coef),
            _ => None,
        }
    }
    pub fn is_one(&self) -> bool {
        self.as_known() == Some(1)
    }
    pub fn mul(&self, other: &Dim) -> Dim {
        match (self, other) {
            (Dim::Mono { coef: a, syms: sa }, Dim::Mono { coef: b, syms: sb }) => {
                let mut syms: Vec<String> = sa.iter().chain(sb.iter()).cloned().collect();
                syms.sort();
                Dim::Mono { coef: a.saturating_mul(*b), syms }
            }
            _ => Dim::Any,
        }
    }
    /// `self / other` when it divides exactly.
    pub fn div(&self, other: &Dim) -> Option<Dim> {
        match (self, other) {
            (Dim::Mono { coef: a, syms: sa }, Dim::Mono { coef: b, syms: sb }) => {
                if *b == 0 || a % b != 0 {
                    return None;
                }
                let mut rest = sa.clone();
                for s in sb {
                    let i = rest.iter().position(|x| x == s)?;
                    rest.remove(i);
                }
                Some(Dim::Mono { coef: a / b, syms: rest })
            }
            _ => Some(Dim::Any),
        }
    }
    /// Whether two dims may be equal; `false` only when they are provably different.
    pub fn compatible(&self, other: &Dim) -> bool {
        match (self.as_known(), other.as_known()) {
            (Some(a), Some(b)) => a == b,
            _ => match (self, other) {
                (Dim::Any, _) | (_, Dim::Any) => true,
                // Symbols are generic sizes, as type parameters are in Rust: `B` and `B*784` (or
                // `B` and `C`) are different unless written the same way.
                (Dim::Mono { syms: a, .. }, Dim::Mono { syms: b, .. }) if !a.is_empty() && !b.is_empty() => self == other,
                // A symbol against a known size may match at run time; the call site decides.
                _ => true,
            },
        }
    }
    /// The more informative of two compatible dims (a known size over a symbol over `Any`).
    pub fn unify(&self, other: &Dim) -> Dim {
        if self.as_known().is_some() {
            self.clone()
        } else if other.as_known().is_some() || *self == Dim::Any {
            other.clone()
        } else {
            self.clone()
        }
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Any => f.write_str("_"),
            Dim::Mono { coef, syms } => {
                if syms.is_empty() {
                    return write!(f, "{coef}");
                }
                if *coef != 1 {
                    write!(f, "{coef}*")?;
                }
                f.write_str(&syms.join("*"))
            }
        }
    }
}

pub type Shape = Vec<Dim>;

pub fn shape_str(shape: &[Dim]) -> String {
    shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
}

/// The product of the dims: the element count.
pub fn numel(shape: &[Dim]) -> Dim {
    shape.iter().fold(Dim::known(1), |acc, d| acc.mul(d))
}

/// Concrete sizes, when every dim is known.
pub fn concrete(shape: &[Dim]) -> Option<Vec<usize>> {
    shape.iter().map(|d| d.as_known().filter(|v| *v >= 0).map(|v| v as usize)).collect()
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct TensorTy {
    pub dtype: DType,
    pub shape: Shape,
}

impl TensorTy {
    pub fn new(dtype: DType, shape: Shape) -> TensorTy {
        TensorTy { dtype, shape }
    }
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
}

impl fmt::Display for TensorTy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}]", self.dtype, shape_str(&self.shape))
    }
}
