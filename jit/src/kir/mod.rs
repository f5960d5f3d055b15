//! The kernel IR: every kernel a fusion plan runs, described once, independently of the device,
//! for every back end to consume. The graph IR says *what* is computed; a kernel here says what
//! one launch computes: which buffers it reads and writes in which storage types, how each
//! element's index is formed (broadcasts as strides), and the straight-line body that computes
//! each output element in f32. Renderers (render/) turn a kernel into CUDA C or into plain C that
//! runs the same grid as loops (checked against the interpreter on the CPU); the chunk
//! interpreter and the Cranelift emitter consume elementwise bodies.
//!
//! Kinds (from `dlc_language::passes::fusion::Kernel`):
//! - [`Elementwise`]: one fused region over an output shape.
//! - [`Kernel::Group`]: independent elementwise regions in one launch (the multi-tensor
//!   optimiser update over every parameter).
//! - [`Rows`]: last-axis reductions with their elementwise prologue and epilogue, one row at a
//!   time (softmax, log-softmax, cross-entropy, layer norm, and their gradients).
//! - [`SumAxes`]: a sum over any axes of values a prologue body computes as it sums them
//!   (batch-norm statistics, bias gradients).
//! - From library ops no fused region took (library.rs, for the device): [`Copy`] (a broadcast,
//!   permutation or slice in any storage type), [`Unslice`], [`Concat`], [`IntBinary`] (i64
//!   comparisons and arithmetic, exactly), [`Rand`] (the CPU's random stream), [`ArgMax`] over
//!   rows, [`Pool`] and its gradient, [`Take`] (with [`IndexCheck`]) and [`TakeGrad`] for small tables, and one-op `Elementwise`
//!   and `SumAxes` kernels.

mod library;
mod lower;

pub use library::lower_library;
pub(crate) use lower::contiguous;
pub use lower::{f16_to_f32, f32_to_f16, lower_kernel, lower_region, lower_rows, lower_storage, round_to, storage, LowerError};

use dlc_language::ir::{BinaryOp, UnaryOp};

/// How a buffer is stored. Every body computes in f32; loads widen and stores narrow (bf16 and
/// f16 round to nearest even, as `half` does on the CPU).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    F32,
    BF16,
    F16,
    I64,
    Bool,
}

impl Ty {
    pub fn bytes(self) -> usize {
        match self {
            Ty::F32 => 4,
            Ty::BF16 | Ty::F16 => 2,
            Ty::I64 => 8,
            Ty::Bool => 1,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Ty::F32 => "f32",
            Ty::BF16 => "bf16",
            Ty::F16 => "f16",
            Ty::I64 => "i64",
            Ty::Bool => "bool",
        }
    }
}

/// How an element's index into a buffer is formed from the output element's coordinates.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Index {
    /// The same linear index as the output element (the buffer has the output's shape).
    Linear,
    /// Element 0, for every output element (a scalar broadcast).
    Splat,
    /// The sum over output dims of coordinate × stride (0 where the buffer is broadcast).
    Strided(Vec<usize>),
}

/// Where a load reads: a kernel parameter, or (in a row kernel) a row buffer of the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Buf {
    Param(usize),
    Slot(usize),
}

/// One instruction of a body; its result is register `i` (its position), an f32.
#[derive(Clone, Debug, PartialEq)]
pub enum Inst {
    Load {
        from: Buf,
        index: Index,
    },
    Const(f32),
    Unary(UnaryOp, usize),
    /// Comparisons give 1.0 or 0.0; `and`/`or` take 0/non-0 operands.
    Binary(BinaryOp, usize, usize),
    /// `c != 0 ? a : b`.
    Where(usize, usize, usize),
    /// `x != 0 ? 1 : 0` (a cast to bool).
    ToBool(usize),
    /// Round to a low precision and widen back: every op whose graph dtype is bf16 or f16
    /// rounds its result, as the CPU interpreter does.
    Round(Ty, usize),
}

/// A kernel parameter: a buffer read (an input) or written (an output), its storage and length.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub ty: Ty,
    pub len: usize,
}

/// One fused elementwise region: for every element of `shape`, run `body` and store the
/// `outputs` registers into the output parameters, which follow the inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Elementwise {
    pub shape: Vec<usize>,
    pub inputs: Vec<Param>,
    pub body: Vec<Inst>,
    /// (register, storage) per output, each written at the linear index.
    pub outputs: Vec<(usize, Ty)>,
}

impl Elementwise {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// A step of a row kernel, run for each row in order.
#[derive(Clone, Debug, PartialEq)]
pub enum RowStep {
    /// A body over the row's `len` elements (the row length, or 1 for a per-row value): its
    /// loads from parameters index by the coordinates `[row coordinates.., j]` of the full
    /// `[lead.., len]` shape; from slots, by `j` (or 0 where the index is a splat or has stride 0
    /// along the row). Writes each listed register into a slot.
    Map { len: usize, body: Vec<Inst>, writes: Vec<(usize, usize)> },
    /// The sum or maximum of a row-long slot (or a parameter's row) into a one-value slot.
    Reduce { max: bool, from: Buf, to: usize },
}

/// Last-axis reductions with their neighbours, one row at a time: `rows` rows of `len`
/// (`lead` are the leading dims). Slots hold one row's values (`len` or 1 long); the outputs
/// copy slots out to parameters that follow the inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Rows {
    pub lead: Vec<usize>,
    pub len: usize,
    pub inputs: Vec<Param>,
    pub slots: Vec<usize>,
    pub steps: Vec<RowStep>,
    /// (slot, storage) per output; a slot of length `len` is written as `[lead.., len]`, of
    /// length 1 as `[lead.., 1]`.
    pub outputs: Vec<(usize, Ty)>,
}

impl Rows {
    pub fn rows(&self) -> usize {
        self.lead.iter().product()
    }
}

/// A sum over `axes` of register `summed` of a prologue body over `shape`; output 0 is the sum
/// (f32, `shape` with the axes kept as 1), then the prologue's other outputs, written in full.
#[derive(Clone, Debug, PartialEq)]
pub struct SumAxes {
    pub prologue: Elementwise,
    pub summed: usize,
    pub axes: Vec<usize>,
}

impl SumAxes {
    /// The sum's shape: the prologue's with the summed axes as 1.
    pub fn out_shape(&self) -> Vec<usize> {
        self.prologue.shape.iter().enumerate().map(|(d, n)| if self.axes.contains(&d) { 1 } else { *n }).collect()
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Kernel {
    Elementwise(Elementwise),
    Group(Vec<Elementwise>),
    Rows(Rows),
    Sum(SumAxes),
    Copy(Copy),
    Unslice(Unslice),
    Concat(Concat),
    IntBinary(IntBinary),
    Rand(Rand),
    ArgMax(ArgMax),
    Pool(Pool),
    Take(Take),
    IndexCheck(IndexCheck),
    TakeGrad(TakeGrad),
}

/// The embedding lookup (`take`): rows of a table (`rows` rows of `row` elements of `ty`)
/// gathered at the i64 indices (`n` of them, negative ones from the end), a thread an output
/// element. An index out of range reads row 0; the `IndexCheck` launched beside it says so.
#[derive(Clone, Debug, PartialEq)]
pub struct Take {
    pub rows: usize,
    pub row: usize,
    pub n: usize,
    pub ty: Ty,
}

/// Whether `n` i64 indices are all within `rows` rows (negative ones from the end): an index
/// out of range, after the wrap, is written to the one-element output, which stays as it was
/// (zero) otherwise. Not a plan kernel: the device executor launches one after each `Take`
/// into a flag it keeps, and reads the flag when the host next waits for the device.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexCheck {
    pub rows: usize,
    pub n: usize,
}

/// The embedding's gradient: rows of `dy` (f32, `n` rows of `row`) added into zeros of `rows`
/// rows at the rows the i64 indices name (negative ones from the end), each output row gathering
/// the rows of its index in index order, summing in f64 as the interpreter scatters (so bit for
/// bit, with no atomics). On the GPU a block per output row (and tile of 256 columns) scans the
/// indices a chunk at a time and adds only the rows that match: rows x n index reads, not
/// rows x n x row.
#[derive(Clone, Debug, PartialEq)]
pub struct TakeGrad {
    pub rows: usize,
    pub row: usize,
    pub n: usize,
}

/// 2-d max or average pooling over `planes` planes of `h` x `w` (windows `k`, strides `s`,
/// zero padding `p`; average counting the padding), f32: the forward (a thread an output), or
/// with `grad` the gradient into the input, gathered a thread an input element from the outputs
/// whose windows hold it, in the order the interpreter scatters them (so bit for bit).
#[derive(Clone, Debug, PartialEq)]
pub struct Pool {
    pub max: bool,
    pub grad: bool,
    /// Images times channels.
    pub planes: usize,
    /// `Some(C)`: channels-last, `[N, H, W, C]` (planes = N·C); `None`: each plane contiguous.
    pub channels_last: Option<usize>,
    pub h: usize,
    pub w: usize,
    pub oh: usize,
    pub ow: usize,
    pub k: (usize, usize),
    pub s: (usize, usize),
    pub p: (usize, usize),
}

/// The index of each row's maximum (the first; a NaN wins over numbers, the first NaN), into
/// i64: `rows` rows of `len`, a thread a row (a classifier's predictions: short rows).
#[derive(Clone, Debug, PartialEq)]
pub struct ArgMax {
    pub rows: usize,
    pub len: usize,
    pub input: Param,
}

/// A copy in the storage type, never widened (so exact for i64): element `c` (coordinates) of
/// `shape` read from the input at `offset + sum(c[d] * strides[d])`. A broadcast, permutation or
/// slice (strides may be negative) that no fused region took (library.rs).
#[derive(Clone, Debug, PartialEq)]
pub struct Copy {
    pub shape: Vec<usize>,
    pub input: Param,
    pub offset: i64,
    pub strides: Vec<i64>,
}

/// The transpose of a slice: zeros of `shape`, with input element `k` (coordinates, of
/// `input_shape`) at `start + k * step` (steps positive), f32 or i64.
#[derive(Clone, Debug, PartialEq)]
pub struct Unslice {
    pub shape: Vec<usize>,
    pub input: Param,
    pub input_shape: Vec<usize>,
    pub start: Vec<i64>,
    pub step: Vec<i64>,
}

/// Inputs of one storage type joined along `axis` into `shape`, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Concat {
    pub shape: Vec<usize>,
    pub axis: usize,
    /// Each input, and its size along `axis`.
    pub inputs: Vec<(Param, usize)>,
}

/// A binary op on two i64 buffers of the output's shape, computed in i64 (exact, where the f32
/// bodies are not): a comparison into bools, or a wrapping add, subtract or multiply, a maximum
/// or a minimum into i64.
#[derive(Clone, Debug, PartialEq)]
pub struct IntBinary {
    pub shape: Vec<usize>,
    pub op: BinaryOp,
    pub a: Param,
    pub b: Param,
    /// `Bool` for a comparison, `I64` otherwise.
    pub out: Ty,
}

/// `len` uniform draws in [0, 1) into f32 from the CPU's counter-based generator
/// (interpreter/src/runtime/rng.rs), element for element: element `i` of the stream
/// `seed ^ step * 0x9E3779B97F4A7C15`, where `step` is element 0 of the parameter when there is
/// one (a training step's counter, so each step draws anew). With `normal`, standard normal
/// draws instead, by the CPU's Box-Muller on uniforms `2i` and `2i + 1`, in f64.
#[derive(Clone, Debug, PartialEq)]
pub struct Rand {
    pub len: usize,
    pub seed: u64,
    pub step: Option<Param>,
    pub normal: bool,
}

impl Kernel {
    /// A short name for the kind ("elementwise", "group", "rows", "sum", "copy", "int_binary", ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Kernel::Elementwise(_) => "elementwise",
            Kernel::Group(_) => "group",
            Kernel::Rows(_) => "rows",
            Kernel::Sum(_) => "sum",
            Kernel::Copy(_) => "copy",
            Kernel::Unslice(_) => "unslice",
            Kernel::Concat(_) => "concat",
            Kernel::IntBinary(_) => "int_binary",
            Kernel::Rand(_) => "rand",
            Kernel::ArgMax(_) => "argmax",
            Kernel::Pool(p) if p.grad => "pool_grad",
            Kernel::Pool(_) => "pool",
            Kernel::Take(_) => "take",
            Kernel::IndexCheck(_) => "index_check",
            Kernel::TakeGrad(_) => "take_grad",
        }
    }

    /// Every body of the kernel.
    pub fn bodies(&self) -> Vec<&[Inst]> {
        match self {
            Kernel::Elementwise(e) => vec![&e.body],
            Kernel::Group(es) => es.iter().map(|e| e.body.as_slice()).collect(),
            Kernel::Rows(r) => {
                r.steps.iter().filter_map(|s| if let RowStep::Map { body, .. } = s { Some(body.as_slice()) } else { None }).collect()
            }
            Kernel::Sum(s) => vec![&s.prologue.body],
            Kernel::Copy(_)
            | Kernel::Unslice(_)
            | Kernel::Concat(_)
            | Kernel::IntBinary(_)
            | Kernel::Rand(_)
            | Kernel::ArgMax(_)
            | Kernel::Pool(_)
            | Kernel::Take(_)
            | Kernel::IndexCheck(_)
            | Kernel::TakeGrad(_) => vec![],
        }
    }

    /// The parameters in launch order, each with whether the kernel writes it: inputs, then
    /// outputs (for a group, each member's inputs then its outputs, member after member).
    pub fn params(&self) -> Vec<(Param, bool)> {
        let ins = |ps: &[Param]| ps.iter().map(|p| (p.clone(), false)).collect::<Vec<_>>();
        let outs = |e: &Elementwise| e.outputs.iter().map(|(_, ty)| (Param { ty: *ty, len: e.numel() }, true)).collect::<Vec<_>>();
        match self {
            Kernel::Elementwise(e) => [ins(&e.inputs), outs(e)].concat(),
            Kernel::Group(es) => es.iter().flat_map(|e| [ins(&e.inputs), outs(e)].concat()).collect(),
            Kernel::Rows(r) => {
                let outs = r.outputs.iter().map(|(s, ty)| (Param { ty: *ty, len: r.rows() * r.slots[*s] }, true));
                ins(&r.inputs).into_iter().chain(outs).collect()
            }
            Kernel::Sum(s) => {
                let p = &s.prologue;
                let sum = (Param { ty: Ty::F32, len: s.out_shape().iter().product() }, true);
                let rest = p.outputs.iter().filter(|(r, _)| *r != s.summed).map(|(_, ty)| (Param { ty: *ty, len: p.numel() }, true));
                ins(&p.inputs).into_iter().chain(std::iter::once(sum)).chain(rest).collect()
            }
            Kernel::Copy(c) => {
                vec![(c.input.clone(), false), (Param { ty: c.input.ty, len: c.shape.iter().product() }, true)]
            }
            Kernel::Unslice(u) => {
                vec![(u.input.clone(), false), (Param { ty: u.input.ty, len: u.shape.iter().product() }, true)]
            }
            Kernel::Concat(c) => {
                let ty = c.inputs.first().map(|(p, _)| p.ty).unwrap_or(Ty::F32);
                let out = (Param { ty, len: c.shape.iter().product() }, true);
                c.inputs.iter().map(|(p, _)| (p.clone(), false)).chain([out]).collect()
            }
            Kernel::IntBinary(c) => {
                vec![(c.a.clone(), false), (c.b.clone(), false), (Param { ty: c.out, len: c.shape.iter().product() }, true)]
            }
            Kernel::Rand(r) => r.step.iter().map(|p| (p.clone(), false)).chain([(Param { ty: Ty::F32, len: r.len }, true)]).collect(),
            Kernel::ArgMax(a) => vec![(a.input.clone(), false), (Param { ty: Ty::I64, len: a.rows }, true)],
            Kernel::Take(t) => vec![
                (Param { ty: t.ty, len: t.rows * t.row }, false),
                (Param { ty: Ty::I64, len: t.n }, false),
                (Param { ty: t.ty, len: t.n * t.row }, true),
            ],
            Kernel::IndexCheck(c) => vec![(Param { ty: Ty::I64, len: c.n }, false), (Param { ty: Ty::I64, len: 1 }, true)],
            Kernel::TakeGrad(t) => vec![
                (Param { ty: Ty::I64, len: t.n }, false),
                (Param { ty: Ty::F32, len: t.n * t.row }, false),
                (Param { ty: Ty::F32, len: t.rows * t.row }, true),
            ],
            Kernel::Pool(p) => {
                let (x, y) = (Param { ty: Ty::F32, len: p.planes * p.h * p.w }, Param { ty: Ty::F32, len: p.planes * p.oh * p.ow });
                if p.grad {
                    vec![(x.clone(), false), (y, false), (x, true)]
                } else {
                    vec![(x, false), (y, true)]
                }
            }
        }
    }
}
