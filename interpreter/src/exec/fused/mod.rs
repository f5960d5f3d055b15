//! One fused elementwise region (see `dlc_language::passes::fusion`) run as one kernel: the output
//! index space is cut into chunks of `CHUNK` elements, spread over the cores, and each chunk runs
//! the region's ops on register buffers that stay in cache. Inputs are read once and only the
//! output is written: no intermediate tensor is allocated. Each op computes exactly what the eager
//! interpreter computes for it (the same f32 operations), so fused and eager results are equal
//! bit for bit.
//!
//! `build.rs` makes the chunk program from the kernel IR (and its row form), `chunk.rs` runs one
//! chunk (interpreted or through the native code), `launch.rs` spreads a launch's chunks over the
//! cores, `broadcast.rs` fills a chunk of a broadcast load.

mod broadcast;
mod build;
mod chunk;
mod launch;
mod run_splats;
mod tiles;

pub use launch::run_many;
pub(crate) use run_splats::{variant as run_splat_variant, RunSplats};
pub(crate) use tiles::Registers;

use crate::runtime::tensor::{Data, Tensor};
use crate::runtime::RuntimeError;
use dlc_language::ir::{Graph, NodeId};
use dlc_language::passes::fusion::Region;
use dlc_language::types::DType;
use std::sync::Arc;

/// Elements per chunk: 4 KiB of f32 per register, so a region of a few ops works in L1 (constants
/// and outputs take no register). Measured on gelu 1M: as fast as 4096 or faster, never slower.
pub const CHUNK: usize = 1024;

/// Where an operand comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Operand {
    /// The result of an earlier instruction.
    Reg(usize),
    /// A region input of the output's shape.
    Input(usize),
    /// A 0-d constant (only as the source of an `Expand`).
    Imm(f32),
}

#[derive(Clone, Debug)]
enum Instr {
    Unary(dlc_language::ir::UnaryOp, Operand),
    Binary(dlc_language::ir::BinaryOp, Operand, Operand),
    Where(Operand, Operand, Operand),
    /// f32 to bool (`x != 0`) or bool to f32 (unchanged 0/1).
    Cast {
        to_bool: bool,
        x: Operand,
    },
    /// A broadcast load: an input (or a constant) expanded to the output's shape; `strides` are
    /// the input's strides over the output's dimensions (0 where it is broadcast).
    Expand {
        src: Operand,
        strides: Vec<usize>,
    },
}

/// A region compiled for execution: instructions over registers.
pub struct Program {
    instrs: Vec<Instr>,
    shape: Vec<usize>,
    /// The registers written out (one per region output) and their dtypes.
    outputs: Vec<(usize, DType)>,
    /// Per instruction: the low precision (bf16, f16) its result is rounded to, as the eager
    /// interpreter rounds every op of that dtype.
    round: Vec<Option<DType>>,
    /// Per region input: read elementwise (its chunk is passed to native code), rather than
    /// only through a broadcast load.
    direct: Vec<bool>,
    /// Per region input: read only at each output element's own index (never through a
    /// broadcast load), so native code, which loads an element's inputs before it stores that
    /// element's outputs, may write an output over it.
    overwritable: Vec<bool>,
    /// The kernel IR it was made from, which its native code is compiled from.
    pub(super) kernel: dlc_jit::kir::Elementwise,
    /// The same region as native code (AVX-512 or Cranelift), when every op has a compiled form;
    /// it reads the region's inputs and then, in order, the broadcast loads' buffers (see
    /// `dlc_jit::native`).
    pub(super) native: Option<Arc<dlc_jit::native::Native>>,
    /// The native code with its broadcasts read as splats, for chunks inside one run along which
    /// they are constant (run_splats.rs).
    pub(super) run_splats: Option<run_splats::RunSplats>,
    /// When the native code was compiled to be measured against the interpreter (not forced by
    /// `--jit`): the trials so far and the choice (see `Tune`).
    pub(super) tune: Option<Tune>,
    /// The key of its choice in the tuning file (a hash of its native code's text,
    /// `native_text`, and the element count), for regions that are measured.
    pub(super) tune_key: Option<String>,
    /// Per instruction: the one value it has at every element, when it is a constant or a
    /// broadcast scalar input. Readers take that value directly; nothing fills a buffer with it.
    scalar: Vec<Option<Scalar>>,
    /// Per instruction: the region output it is written straight into (the first, when a value
    /// is output twice), instead of into a register and then copied.
    output_of: Vec<Option<usize>>,
    /// Per instruction: the period of a broadcast read from a tile (tiles.rs).
    tiles: Vec<Option<usize>>,
}

pub use super::tune::{Tune, AUTOTUNE_MIN, TUNE_LAUNCHES};

/// A region run one row at a time: the program over one row, and per input of it, the region
/// input it reads with that input's strides over the leading dims (see `Program::for_rows`).
pub(crate) struct RowProgram {
    pub program: Program,
    pub views: Vec<(usize, Vec<usize>)>,
}

/// A value that is the same at every element.
#[derive(Clone, Copy, Debug)]
enum Scalar {
    Imm(f32),
    /// Element 0 of region input `k` (a 0-d or all-ones input broadcast to the output).
    Splat(usize),
}

pub use super::kernel_cache::KernelCache;

/// A node's shape as sizes (every dim is known by the time a plan runs).
pub(crate) fn concrete(g: &Graph, n: NodeId) -> Vec<usize> {
    g.node(n).shape.iter().map(|d| d.as_known().unwrap_or(0) as usize).collect()
}

/// A region as a program: lowered to the kernel IR (`dlc_jit::kir`, where every back end's
/// kernels come from), then translated into the chunk interpreter's instructions.
pub fn compile(g: &Graph, r: &Region) -> Result<Program, RuntimeError> {
    let e = dlc_jit::kir::lower_region(g, r).map_err(|e| RuntimeError::Unsupported(e.to_string()))?;
    let dtypes = r.outputs.iter().map(|o| g.node(*o).dtype).collect::<Vec<_>>();
    Ok(Program::from_kir(&e, &dtypes))
}

impl Program {
    pub(super) fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the next launch runs the native code: always under `--jit`, never without it,
    /// and while measuring, every other launch after the warm-up.
    pub(crate) fn native_now(&self) -> bool {
        match (&self.native, &self.tune) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(_), Some(t)) => t.native_now(),
        }
    }

    /// Count a launch that took `ns` (its tasks' times summed) with `native` or not; after
    /// the trials, choose.
    pub(crate) fn record(&self, native: bool, ns: u64) {
        if let Some(t) = &self.tune {
            t.record(native, ns);
        }
    }

    /// What the measurement chose: `Some(true)` native, `Some(false)` the interpreter, `None`
    /// when nothing was measured or it is still measuring.
    pub fn tuned_native(&self) -> Option<bool> {
        self.tune.as_ref()?.chosen()
    }

    /// Run on the region's inputs (in `Region::inputs` order); one tensor per region output.
    pub fn run(&self, inputs: &[Tensor]) -> Vec<Tensor> {
        run_many(vec![(self, inputs.to_vec())]).pop().expect("one program")
    }

    /// This program, when it has native code.
    pub(crate) fn native_ref(&self) -> Option<&Program> {
        self.native.as_ref().map(|_| self)
    }

    /// The text of its native kernel (what names it in the tuning file): the back end this
    /// machine compiles with and the kernel's key, so a choice measured against Cranelift's code
    /// is not taken for the AVX-512 code's.
    pub(crate) fn native_text(&self) -> String {
        format!("{}: {}", dlc_jit::native::Backend::preferred().name(), dlc_jit::native::key(&self.kernel))
    }

    /// The dtype of each output, in `Region::outputs` order.
    pub(crate) fn output_dtypes(&self) -> Vec<DType> {
        self.outputs.iter().map(|o| o.1).collect()
    }
}

/// An input as f32 values (bools as 0/1).
pub(crate) fn as_f32(t: &Tensor) -> Arc<Vec<f32>> {
    match &t.data {
        Data::F32(v) => v.clone(),
        other => Arc::new(widened(other)),
    }
}

/// As `as_f32`, taking the tensor: f32 data moves (its buffer keeps its owners, no more).
pub(crate) fn into_f32(t: Tensor) -> Arc<Vec<f32>> {
    match t.data {
        Data::F32(v) => v,
        other => Arc::new(widened(&other)),
    }
}

/// Integer or f64 data as f32 values.
fn widened(d: &Data) -> Vec<f32> {
    match d {
        Data::I64(v) => v.iter().map(|x| *x as f32).collect(),
        Data::F64(v) => v.iter().map(|x| *x as f32).collect(),
        Data::U8(v) => v.iter().map(|x| *x as f32).collect(),
        Data::F32(v) => v.to_vec(),
    }
}

/// A region output computed as f32 values, as a tensor of its dtype (bools stored as i64).
pub(crate) fn output_tensor(dtype: DType, shape: Vec<usize>, v: Vec<f32>) -> Tensor {
    let data =
        if dtype == DType::Bool { Data::I64(Arc::new(v.iter().map(|x| (*x != 0.0) as i64).collect())) } else { Data::F32(Arc::new(v)) };
    Tensor { dtype, shape, data }
}
