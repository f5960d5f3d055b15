//! Kernel IR to source code, in two dialects that share every body: CUDA C (compiled by NVRTC
//! for the GPU) and plain C whose "grid" is a loop (compiled by the system C compiler to check,
//! on a machine without a GPU, that the emitted bodies compute what the interpreter computes).
//! The dialects differ only in the prelude (math helpers as `__device__` functions or `static
//! inline` ones; f16 conversions in PTX or in software) and in how a kernel walks its index
//! space; what an element computes is rendered once, by `body`.

mod kinds;
mod library;
pub mod math;
mod pool;
mod rows;
mod sums;

use crate::kir::{Buf, Index, Inst, Kernel, Ty};
use dlc_language::ir::{BinaryOp, UnaryOp};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    Cuda,
    C,
}

/// How the CUDA backend launches a rendered kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Launch {
    /// Blocks and threads per block (one dimension).
    pub grid: usize,
    pub block: usize,
    /// Dynamic shared memory in bytes (a row kernel's row buffers).
    pub shared_bytes: usize,
}

/// A kernel as source: the entry point's name, the whole translation unit (prelude included),
/// and its launch shape. In the C dialect the entry point is `void NAME(void **params)`, the
/// parameters in `Kernel::params` order; in CUDA it takes them as typed pointers.
#[derive(Clone, Debug)]
pub struct Source {
    pub name: String,
    pub code: String,
    pub launch: Launch,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RenderError(pub String);

impl std::fmt::Display for RenderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RenderError {}

/// Threads per block of every kernel kind.
pub const BLOCK: usize = 256;

/// Dynamic shared memory a row kernel may use (the default limit without opting in).
pub const SHARED_LIMIT: usize = 48 * 1024;

/// Render `k` as the kernel `name` in dialect `d`.
pub fn render(k: &Kernel, name: &str, d: Dialect) -> Result<Source, RenderError> {
    let (text, launch) = kinds::kernel(k, name, d)?;
    Ok(Source { name: name.to_string(), code: format!("{}\n{}", math::prelude(d), text), launch })
}

/// Only the kernel's function (no prelude), to put many kernels in one translation unit after
/// one `math::prelude`.
pub fn render_function(k: &Kernel, name: &str, d: Dialect) -> Result<(String, Launch), RenderError> {
    kinds::kernel(k, name, d)
}

/// Many kernels (name, kernel) in one translation unit after one prelude, and each one's launch
/// shape: what NVRTC compiles for a whole plan.
pub fn translation_unit(kernels: &[(&str, &Kernel)], d: Dialect) -> Result<(String, Vec<Launch>), RenderError> {
    let mut src = math::prelude(d);
    let mut launches = vec![];
    for (name, k) in kernels {
        let (text, launch) = kinds::kernel(k, name, d).map_err(|e| RenderError(format!("{name}: {e}")))?;
        src += "\n";
        src += &text;
        launches.push(launch);
    }
    Ok((src, launches))
}

/// The C type a buffer is stored as (for callers that write launch wrappers).
pub fn ctype_of(t: Ty) -> &'static str {
    ctype(t)
}

/// The C type a buffer is stored as.
pub(crate) fn ctype(t: Ty) -> &'static str {
    match t {
        Ty::F32 => "float",
        Ty::BF16 => "dlc_bf16",
        Ty::F16 => "dlc_f16",
        Ty::I64 => "long long",
        Ty::Bool => "unsigned char",
    }
}

/// An element of storage `t` read from `expr` as f32.
pub(crate) fn widen(t: Ty, expr: &str) -> String {
    match t {
        Ty::F32 => expr.to_string(),
        Ty::BF16 => format!("dlc_from_bf16({expr})"),
        Ty::F16 => format!("dlc_from_f16({expr})"),
        Ty::I64 | Ty::Bool => format!("(float)({expr})"),
    }
}

/// The f32 value `v` as storage `t`.
pub(crate) fn narrow(t: Ty, v: &str) -> String {
    match t {
        Ty::F32 => v.to_string(),
        Ty::BF16 => format!("dlc_to_bf16({v})"),
        Ty::F16 => format!("dlc_to_f16({v})"),
        Ty::I64 => format!("(long long)({v})"),
        Ty::Bool => format!("(unsigned char)({v} != 0.0f)"),
    }
}

/// The statements of a body: register `i` is the local `r{i}`; `load` renders a load's value.
pub(crate) fn body(insts: &[Inst], indent: &str, load: &dyn Fn(Buf, &Index) -> String) -> String {
    let mut s = String::new();
    for (i, inst) in insts.iter().enumerate() {
        let r = |j: &usize| format!("r{j}");
        let v = match inst {
            Inst::Load { from, index } => load(*from, index),
            Inst::Const(c) => math::lit(*c),
            Inst::Unary(op, x) => unary(*op, &r(x)),
            Inst::Binary(op, a, b) => binary(*op, &r(a), &r(b)),
            Inst::Where(c, a, b) => format!("({} != 0.0f) ? {} : {}", r(c), r(a), r(b)),
            Inst::ToBool(x) => format!("({} != 0.0f) ? 1.0f : 0.0f", r(x)),
            Inst::Round(Ty::BF16, x) => format!("dlc_from_bf16(dlc_to_bf16({}))", r(x)),
            Inst::Round(Ty::F16, x) => format!("dlc_from_f16(dlc_to_f16({}))", r(x)),
            Inst::Round(_, x) => r(x),
        };
        s += &format!("{indent}const float r{i} = {v};\n");
    }
    s
}

fn unary(op: UnaryOp, x: &str) -> String {
    match op {
        UnaryOp::Neg => format!("-{x}"),
        UnaryOp::Exp => format!("dlc_exp({x})"),
        UnaryOp::Log => format!("dlc_log({x})"),
        UnaryOp::Sqrt => format!("sqrtf({x})"),
        UnaryOp::Recip => format!("1.0f / {x}"),
        UnaryOp::Sin => format!("sinf({x})"),
        UnaryOp::Cos => format!("cosf({x})"),
        UnaryOp::Tanh => format!("dlc_tanh({x})"),
        UnaryOp::Erf => format!("dlc_erf({x})"),
        UnaryOp::Abs => format!("fabsf({x})"),
        UnaryOp::Floor => format!("floorf({x})"),
        UnaryOp::Not => format!("({x} == 0.0f) ? 1.0f : 0.0f"),
    }
}

fn binary(op: BinaryOp, a: &str, b: &str) -> String {
    let cmp = |o: &str| format!("({a} {o} {b}) ? 1.0f : 0.0f");
    match op {
        BinaryOp::Add => format!("{a} + {b}"),
        BinaryOp::Sub => format!("{a} - {b}"),
        BinaryOp::Mul => format!("{a} * {b}"),
        BinaryOp::Div => format!("{a} / {b}"),
        BinaryOp::Mod => format!("dlc_mod({a}, {b})"),
        BinaryOp::Pow => format!("powf({a}, {b})"),
        BinaryOp::Max => format!("dlc_max({a}, {b})"),
        BinaryOp::Min => format!("dlc_min({a}, {b})"),
        BinaryOp::CmpLt => cmp("<"),
        BinaryOp::CmpLe => cmp("<="),
        BinaryOp::CmpEq => cmp("=="),
        BinaryOp::CmpNe => cmp("!="),
        BinaryOp::And => format!("({a} != 0.0f && {b} != 0.0f) ? 1.0f : 0.0f"),
        BinaryOp::Or => format!("({a} != 0.0f || {b} != 0.0f) ? 1.0f : 0.0f"),
    }
}

/// The index expression of a strided read at output element `i` (a `long long`) of `shape`:
/// each dim's coordinate times its stride, dims with stride 0 left out.
pub(crate) fn strided(i: &str, shape: &[usize], strides: &[usize]) -> String {
    // Neighbouring dims that the buffer walks as one (its stride on the outer one is the inner
    // one's span, or both are broadcast) are one dim: one division and remainder fewer, which
    // a GPU pays for in instructions.
    let (mut shape_m, mut strides_m): (Vec<usize>, Vec<usize>) = (vec![], vec![]);
    for (n, st) in shape.iter().zip(strides) {
        if *n == 1 {
            continue;
        }
        match (shape_m.last_mut(), strides_m.last_mut()) {
            (Some(pn), Some(ps)) if *ps == st * n => {
                *pn *= n;
                *ps = *st;
            }
            _ => {
                shape_m.push(*n);
                strides_m.push(*st);
            }
        }
    }
    let (shape, strides) = (&shape_m[..], &strides_m[..]);
    let mut terms = vec![];
    let mut inner = 1usize;
    for d in (0..shape.len()).rev() {
        if strides[d] != 0 && shape[d] != 1 {
            let coord = match (inner, d == 0) {
                (1, true) => i.to_string(),
                (1, false) => format!("({i} % {}LL)", shape[d]),
                (_, true) => format!("({i} / {inner}LL)"),
                _ => format!("(({i} / {inner}LL) % {}LL)", shape[d]),
            };
            terms.push(if strides[d] == 1 { coord } else { format!("{coord} * {}LL", strides[d]) });
        }
        inner *= shape[d];
    }
    if terms.is_empty() {
        "0".into()
    } else {
        terms.reverse();
        terms.join(" + ")
    }
}
