//! One fused elementwise region (see `dlc_language::passes::fusion`) run as one kernel: the output
//! index space is cut into chunks of `CHUNK` elements, spread over the cores, and each chunk runs
//! the region's ops on register buffers that stay in cache. Inputs are read once and only the
//! output is written: no intermediate tensor is allocated. Each op computes exactly what the eager
//! interpreter computes for it (the same f32 operations), so fused and eager results are equal
//! bit for bit.

use super::elementwise::{as_uninit, binary_slice, fill, unary_slice, write_all, Arg};
use crate::runtime::tensor::{Data, Tensor};
use crate::runtime::RuntimeError;
use dlc_language::ir::{Graph, NodeId};
use dlc_language::passes::fusion::Region;
use dlc_language::types::DType;
use rayon::prelude::*;
use std::mem::MaybeUninit;
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
    pub(super) round: Vec<Option<DType>>,
    /// Per region input: read elementwise (its chunk is passed to native code), rather than
    /// only through a broadcast load.
    direct: Vec<bool>,
    /// The same region as native code (Cranelift), when every op has a compiled form; it reads
    /// the region's inputs and then, in order, the broadcast loads' buffers.
    pub(super) native: Option<Arc<dlc_jit::Compiled>>,
    /// When the native code was compiled to be measured against the interpreter (not forced by
    /// `--jit`): the trials so far and the choice (see `Tune`).
    pub(super) tune: Option<Tune>,
    /// The key of its choice in the tuning file (a hash of the native kernel's text, and the
    /// element count), for regions that are measured.
    pub(super) tune_key: Option<String>,
    /// Per instruction: the one value it has at every element, when it is a constant or a
    /// broadcast scalar input. Readers take that value directly; nothing fills a buffer with it.
    scalar: Vec<Option<Scalar>>,
    /// Per instruction: the region output it is written straight into (the first, when a value
    /// is output twice), instead of into a register and then copied.
    output_of: Vec<Option<usize>>,
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
    /// The chunk interpreter's form of an elementwise kernel: loads at the output's index become
    /// operands that read the input's chunk, other loads broadcast loads, constants scalars, and
    /// a `Round` after an op the rounding of that op's result (`dtypes` are the outputs' graph
    /// dtypes).
    fn from_kir(e: &dlc_jit::kir::Elementwise, dtypes: &[DType]) -> Program {
        use dlc_jit::kir::{Buf, Index, Inst, Ty};
        let rank = e.shape.len();
        let mut instrs: Vec<Instr> = vec![];
        let mut round: Vec<Option<DType>> = vec![];
        // The operand each kernel register reads as.
        let mut operand: Vec<Operand> = vec![];
        let push = |instrs: &mut Vec<Instr>, round: &mut Vec<Option<DType>>, i: Instr| -> Operand {
            instrs.push(i);
            round.push(None);
            Operand::Reg(instrs.len() - 1)
        };
        // How many instructions and outputs read each register.
        let mut readers = vec![0usize; e.body.len()];
        for inst in &e.body {
            match inst {
                Inst::Unary(_, x) | Inst::ToBool(x) | Inst::Round(_, x) => readers[*x] += 1,
                Inst::Binary(_, a, b) => [*a, *b].iter().for_each(|r| readers[*r] += 1),
                Inst::Where(c, a, b) => [*c, *a, *b].iter().for_each(|r| readers[*r] += 1),
                Inst::Load { .. } | Inst::Const(_) => {}
            }
        }
        for (reg, _) in &e.outputs {
            readers[*reg] += 1;
        }
        for inst in &e.body {
            let o = match inst {
                Inst::Load { from: Buf::Param(k), index: Index::Linear } => Operand::Input(*k),
                Inst::Load { from: Buf::Param(k), index: Index::Splat } => {
                    push(&mut instrs, &mut round, Instr::Expand { src: Operand::Input(*k), strides: vec![0; rank] })
                }
                Inst::Load { from: Buf::Param(k), index: Index::Strided(s) } => {
                    push(&mut instrs, &mut round, Instr::Expand { src: Operand::Input(*k), strides: s.clone() })
                }
                Inst::Load { from: Buf::Slot(_), .. } => unreachable!("an elementwise kernel reads no row buffers"),
                Inst::Const(v) => push(&mut instrs, &mut round, Instr::Expand { src: Operand::Imm(*v), strides: vec![] }),
                Inst::Unary(op, x) => push(&mut instrs, &mut round, Instr::Unary(*op, operand[*x])),
                Inst::Binary(op, a, b) => push(&mut instrs, &mut round, Instr::Binary(*op, operand[*a], operand[*b])),
                Inst::Where(c, a, b) => push(&mut instrs, &mut round, Instr::Where(operand[*c], operand[*a], operand[*b])),
                Inst::ToBool(x) => push(&mut instrs, &mut round, Instr::Cast { to_bool: true, x: operand[*x] }),
                Inst::Round(ty, x) => {
                    let d = match ty {
                        Ty::BF16 => DType::BF16,
                        Ty::F16 => DType::F16,
                        _ => unreachable!("only bf16 and f16 round"),
                    };
                    // When nothing else reads the value (a bf16 op's own result, or an f32
                    // value only cast down): the op that computes it rounds its result. When
                    // something does (a value that is also an output, or read unrounded): a
                    // rounded copy.
                    let own = readers[*x] == 1 && matches!(e.body[*x], Inst::Unary(..) | Inst::Binary(..));
                    match (own, operand[*x]) {
                        (true, Operand::Reg(j)) => {
                            round[j] = Some(d);
                            Operand::Reg(j)
                        }
                        (_, src) => {
                            let o = push(&mut instrs, &mut round, Instr::Cast { to_bool: false, x: src });
                            let Operand::Reg(j) = o else { unreachable!() };
                            round[j] = Some(d);
                            o
                        }
                    }
                }
            };
            operand.push(o);
        }
        // Outputs are registers: an output that is an input read as is gets a copy.
        let mut outputs = vec![];
        for ((reg, _), dtype) in e.outputs.iter().zip(dtypes) {
            let j = match operand[*reg] {
                Operand::Reg(j) => j,
                src => {
                    let Operand::Reg(j) = push(&mut instrs, &mut round, Instr::Cast { to_bool: false, x: src }) else { unreachable!() };
                    j
                }
            };
            outputs.push((j, *dtype));
        }
        Program::assemble(instrs, e.shape.clone(), outputs, round, e.inputs.len())
    }
}

impl Program {
    /// A program from its instructions: what each input is read as, which instructions are
    /// scalars, where each output is written.
    fn assemble(instrs: Vec<Instr>, shape: Vec<usize>, outputs: Vec<(usize, DType)>, round: Vec<Option<DType>>, inputs: usize) -> Program {
        // Inputs read elementwise (not only through a broadcast), by region input.
        let direct = (0..inputs)
            .map(|k| {
                let o = Operand::Input(k);
                instrs.iter().any(|i| match i {
                    Instr::Unary(_, a) | Instr::Cast { x: a, .. } => *a == o,
                    Instr::Binary(_, a, b) => *a == o || *b == o,
                    Instr::Where(a, b, c) => *a == o || *b == o || *c == o,
                    Instr::Expand { .. } => false,
                })
            })
            .collect();
        let scalar = instrs
            .iter()
            .map(|i| match i {
                Instr::Expand { src: Operand::Imm(v), .. } => Some(Scalar::Imm(*v)),
                Instr::Expand { src: Operand::Input(k), strides } if strides.iter().all(|s| *s == 0) => Some(Scalar::Splat(*k)),
                _ => None,
            })
            .collect();
        let mut output_of = vec![None; instrs.len()];
        for (k, (reg, _)) in outputs.iter().enumerate() {
            output_of[*reg].get_or_insert(k);
        }
        Program { instrs, shape, outputs, round, direct, native: None, tune: None, tune_key: None, scalar, output_of }
    }

    /// This program run one row at a time (exec/rows.rs, through `KernelCache::row_program`): the same instructions over the last
    /// dim alone, each broadcast load cut down to its stride along the row. Also gives, for each
    /// input of the row program, the region input it reads and that input's strides over the
    /// leading dims (from which the caller finds where row r starts in it). An input loaded with
    /// two different broadcasts becomes two inputs.
    pub(super) fn for_rows(&self) -> (Program, Vec<(usize, Vec<usize>)>) {
        let rank = self.shape.len().max(1);
        let row_len = self.shape.last().copied().unwrap_or(1);
        let lead = rank - 1;
        let contiguous: Vec<usize> = (0..lead).map(|d| self.shape[d + 1..].iter().product()).collect();
        let mut views: Vec<(usize, Vec<usize>)> = vec![];
        let mut view = |k: usize, outer: Vec<usize>| -> usize {
            match views.iter().position(|v| v.0 == k && v.1 == outer) {
                Some(i) => i,
                None => {
                    views.push((k, outer));
                    views.len() - 1
                }
            }
        };
        let mut instrs = vec![];
        for i in &self.instrs {
            let mut direct = |o: Operand| match o {
                Operand::Input(k) => Operand::Input(view(k, contiguous.clone())),
                other => other,
            };
            instrs.push(match i {
                Instr::Unary(op, a) => Instr::Unary(*op, direct(*a)),
                Instr::Binary(op, a, b) => {
                    let a = direct(*a);
                    Instr::Binary(*op, a, direct(*b))
                }
                Instr::Where(c, a, b) => {
                    let (c, a) = (direct(*c), direct(*a));
                    Instr::Where(c, a, direct(*b))
                }
                Instr::Cast { to_bool, x } => Instr::Cast { to_bool: *to_bool, x: direct(*x) },
                Instr::Expand { src, strides } => {
                    let along = strides.last().copied().unwrap_or(0);
                    let src = match src {
                        Operand::Input(k) => Operand::Input(view(*k, strides[..strides.len().saturating_sub(1)].to_vec())),
                        other => *other,
                    };
                    Instr::Expand { src, strides: vec![along] }
                }
            });
        }
        let n = views.len();
        (Program::assemble(instrs, vec![row_len], self.outputs.clone(), self.round.clone(), n), views)
    }

    /// This program, when it has native code.
    pub(crate) fn native_ref(&self) -> Option<&Program> {
        self.native.as_ref().map(|_| self)
    }

    /// The text of its native kernel (what names it in the tuning file).
    pub(crate) fn native_text(&self) -> String {
        format!("{:?}", self.jit_kernel())
    }

    /// The dtype of each output, in `Region::outputs` order.
    pub(crate) fn output_dtypes(&self) -> Vec<DType> {
        self.outputs.iter().map(|o| o.1).collect()
    }

    /// Registers for running this program on `len` elements at a time.
    pub(crate) fn registers(&self, len: usize) -> Vec<Vec<f32>> {
        vec![vec![0f32; len]; self.instrs.len()]
    }
}

/// A short list on the stack (spilling to the heap past 32): the pointers of one call, which a
/// row kernel makes once per row and region, where a `Vec` each time cost an allocation each.
struct Small<T: Copy> {
    buf: [T; 32],
    len: usize,
    spill: Vec<T>,
}

impl<T: Copy> Small<T> {
    fn new(fill: T) -> Small<T> {
        Small { buf: [fill; 32], len: 0, spill: vec![] }
    }

    fn push(&mut self, v: T) {
        if self.len < 32 && self.spill.is_empty() {
            self.buf[self.len] = v;
            self.len += 1;
        } else {
            if self.spill.is_empty() {
                self.spill.extend_from_slice(&self.buf[..self.len]);
            }
            self.spill.push(v);
        }
    }

    fn as_slice(&self) -> &[T] {
        if self.spill.is_empty() {
            &self.buf[..self.len]
        } else {
            &self.spill
        }
    }
}

/// An input as f32 values (bools as 0/1).
pub(crate) fn as_f32(t: &Tensor) -> Arc<Vec<f32>> {
    match &t.data {
        Data::F32(v) => v.clone(),
        other => Arc::new(match other {
            Data::I64(v) => v.iter().map(|x| *x as f32).collect(),
            Data::F64(v) => v.iter().map(|x| *x as f32).collect(),
            Data::U8(v) => v.iter().map(|x| *x as f32).collect(),
            Data::F32(_) => unreachable!(),
        }),
    }
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
        run_many(&[(self, inputs)]).pop().expect("one program")
    }

    /// The program as a JIT kernel: broadcast loads become extra inputs (filled per chunk by
    /// the caller), constants immediates.
    pub(super) fn jit_kernel(&self) -> dlc_jit::Kernel {
        use dlc_jit::{Inst, Src};
        let n_in = self
            .instrs
            .iter()
            .flat_map(|i| match i {
                Instr::Unary(_, a) | Instr::Cast { x: a, .. } => vec![*a],
                Instr::Binary(_, a, b) => vec![*a, *b],
                Instr::Where(a, b, c) => vec![*a, *b, *c],
                Instr::Expand { src, .. } => vec![*src],
            })
            .filter_map(|o| if let Operand::Input(k) = o { Some(k + 1) } else { None })
            .max()
            .unwrap_or(0);
        let src = |o: Operand| match o {
            Operand::Reg(j) => Src::Reg(j),
            Operand::Input(k) => Src::Input(k),
            Operand::Imm(_) => unreachable!("constants are loaded by Expand instructions"),
        };
        let mut extra = 0;
        let insts = self
            .instrs
            .iter()
            .map(|i| match i {
                Instr::Unary(op, x) => Inst::Unary(*op, src(*x)),
                Instr::Binary(op, a, b) => Inst::Binary(*op, src(*a), src(*b)),
                Instr::Where(c, a, b) => Inst::Where(src(*c), src(*a), src(*b)),
                Instr::Cast { to_bool: true, x } => Inst::ToBool(src(*x)),
                Instr::Cast { to_bool: false, x } => Inst::Load(src(*x)),
                Instr::Expand { src: Operand::Imm(v), .. } => Inst::Const(*v),
                Instr::Expand { src: Operand::Input(k), strides } if strides.iter().all(|s| *s == 0) => Inst::Splat(*k),
                Instr::Expand { .. } => {
                    extra += 1;
                    Inst::Load(Src::Input(n_in + extra - 1))
                }
            })
            .collect();
        dlc_jit::Kernel { insts, inputs: n_in + extra, outputs: self.outputs.iter().map(|o| o.0).collect() }
    }

    /// Elements `start .. start + len` of every output (`dsts`, one slice each).
    /// The outputs may be uninitialised: every element is written before anything reads it.
    /// With `native`, through the native code (when the program has it).
    pub(crate) fn chunk(&self, ins: &[&[f32]], start: usize, dsts: &mut [&mut [MaybeUninit<f32>]], regs: &mut [Vec<f32>], native: bool) {
        let len = dsts.first().map(|d| d.len()).unwrap_or(0);
        let end = start + len;
        if let (Some(native), true) = (&self.native, native) {
            // Broadcast loads into their registers, then one native pass over the chunk.
            // Inputs read elementwise point at this chunk; those only read through a broadcast
            // (smaller, and never read by the kernel) at their start.
            let mut ptrs: Small<*const f32> = Small::new(std::ptr::null());
            for (k, x) in ins.iter().enumerate() {
                ptrs.push(if self.direct[k] { x[start..end].as_ptr() } else { x.as_ptr() });
            }
            // (A scalar broadcast is a splat in the kernel, not a buffer.)
            let buffered = |strides: &[usize]| !strides.iter().all(|s| *s == 0);
            for (i, inst) in self.instrs.iter().enumerate() {
                if let Instr::Expand { src: Operand::Input(k), strides } = inst {
                    if buffered(strides) {
                        broadcast_load(ins[*k], &self.shape, strides, start, as_uninit(&mut regs[i][..len]));
                    }
                }
            }
            for (i, inst) in self.instrs.iter().enumerate() {
                if let Instr::Expand { src: Operand::Input(_), strides } = inst {
                    if buffered(strides) {
                        ptrs.push(regs[i].as_ptr());
                    }
                }
            }
            let mut outs: Small<*mut f32> = Small::new(std::ptr::null_mut());
            for d in dsts.iter_mut() {
                outs.push(d.as_mut_ptr() as *mut f32);
            }
            // SAFETY: every pointer covers `len` f32 values; outputs are fresh buffers.
            unsafe { native.call(ptrs.as_slice(), outs.as_slice(), len) };
            return;
        }
        // Where each register lives for this chunk: an output it is written straight into, or
        // its own buffer. (Scalars, unless output, live nowhere: readers take the value.)
        let mut loc: Small<*mut f32> = Small::new(std::ptr::null_mut());
        for i in 0..self.instrs.len() {
            loc.push(match self.output_of[i] {
                Some(k) => dsts[k].as_mut_ptr() as *mut f32,
                None => regs[i].as_mut_ptr(),
            });
        }
        let loc = loc.as_slice();
        // SAFETY (for the slices made from `loc` below): every location holds at least `len`
        // values (registers are CHUNK long, outputs `len`); an instruction writes only its own
        // location (as `MaybeUninit`, all of it) and reads only earlier ones, already written, and
        // no two instructions share a location, so no slice written overlaps one read. `dsts` is
        // not touched again until the copies at the end.
        let arg = |o: Operand| -> Arg {
            match o {
                Operand::Reg(j) => match self.scalar[j] {
                    Some(Scalar::Imm(v)) => Arg::Scalar(v),
                    Some(Scalar::Splat(k)) => Arg::Scalar(ins[k][0]),
                    None => Arg::Slice(unsafe { std::slice::from_raw_parts(loc[j], len) }),
                },
                Operand::Input(k) => Arg::Slice(&ins[k][start..end]),
                Operand::Imm(v) => Arg::Scalar(v),
            }
        };
        for (i, ins_i) in self.instrs.iter().enumerate() {
            if self.scalar[i].is_some() && self.output_of[i].is_none() {
                continue;
            }
            let out = unsafe { std::slice::from_raw_parts_mut(loc[i] as *mut MaybeUninit<f32>, len) };
            match ins_i {
                Instr::Unary(op, x) => unary_slice(*op, arg(*x), out),
                Instr::Binary(op, a, b) => binary_slice(*op, arg(*a), arg(*b), out),
                Instr::Where(c, a, b) => select(arg(*c), arg(*a), arg(*b), out),
                Instr::Cast { to_bool, x } => match (arg(*x), *to_bool) {
                    (Arg::Slice(x), true) => {
                        for (o, a) in out.iter_mut().zip(x) {
                            o.write((*a != 0.0) as i32 as f32);
                        }
                    }
                    (Arg::Slice(x), false) => write_all(out, x),
                    (Arg::Scalar(a), to_bool) => fill(out, if to_bool { (a != 0.0) as i32 as f32 } else { a }),
                },
                Instr::Expand { src, strides } => match src {
                    Operand::Imm(v) => fill(out, *v),
                    Operand::Input(k) => broadcast_load(ins[*k], &self.shape, strides, start, out),
                    Operand::Reg(_) => unreachable!("the fusion pass never puts an expand's source in its region"),
                },
            }
            if let Some(d) = self.round[i] {
                // SAFETY: just written in full.
                crate::runtime::tensor::round_slice(d, unsafe { std::slice::from_raw_parts_mut(loc[i], len) });
            }
        }
        // A value output twice was written into the first of its outputs.
        for (k, (reg, _)) in self.outputs.iter().enumerate() {
            let first = self.output_of[*reg].expect("every output is placed");
            if first != k {
                // SAFETY: the first output was written in full above.
                let src = unsafe { std::slice::from_raw_parts(loc[*reg], len) };
                write_all(dsts[k], src);
            }
        }
    }
}

/// `out[t] = c[t] != 0 ? a[t] : b[t]`. Each mix of slices and scalars is its own loop over
/// zipped slices (no indexing, so no bounds checks), which vectorises to a compare and a blend.
fn select(c: Arg, a: Arg, b: Arg, out: &mut [MaybeUninit<f32>]) {
    let pick = |c: f32, a: f32, b: f32| if c != 0.0 { a } else { b };
    match (c, a, b) {
        (Arg::Slice(c), Arg::Slice(a), Arg::Slice(b)) => {
            for (((o, c), a), b) in out.iter_mut().zip(c).zip(a).zip(b) {
                o.write(pick(*c, *a, *b));
            }
        }
        (Arg::Slice(c), Arg::Slice(a), Arg::Scalar(b)) => {
            for ((o, c), a) in out.iter_mut().zip(c).zip(a) {
                o.write(pick(*c, *a, b));
            }
        }
        (Arg::Slice(c), Arg::Scalar(a), Arg::Slice(b)) => {
            for ((o, c), b) in out.iter_mut().zip(c).zip(b) {
                o.write(pick(*c, a, *b));
            }
        }
        (Arg::Slice(c), Arg::Scalar(a), Arg::Scalar(b)) => {
            for (o, c) in out.iter_mut().zip(c) {
                o.write(pick(*c, a, b));
            }
        }
        (Arg::Scalar(c), a, b) => match if c != 0.0 { a } else { b } {
            Arg::Slice(x) => write_all(out, x),
            Arg::Scalar(v) => fill(out, v),
        },
    }
}

/// Run several independent programs as one launch: their chunks are spread over the cores
/// together. Returns each program's outputs.
pub fn run_many(items: &[(&Program, &[Tensor])]) -> Vec<Vec<Tensor>> {
    let inputs: Vec<Vec<Arc<Vec<f32>>>> = items.iter().map(|(_, ins)| ins.iter().map(as_f32).collect()).collect();
    let views: Vec<Vec<&[f32]>> = inputs.iter().map(|v| v.iter().map(|a| a.as_slice()).collect()).collect();
    // Output buffers are written chunk by chunk on the worker threads, never zeroed first.
    let mut bufs: Vec<Vec<Vec<f32>>> =
        items.iter().map(|(p, _)| p.outputs.iter().map(|_| Vec::with_capacity(p.numel())).collect()).collect();
    let total: usize = items.iter().map(|(p, _)| p.numel()).sum();
    // A task is a run of chunks of one program sharing one set of registers: a few tasks per
    // thread over the whole launch.
    let per_task = total.div_ceil(CHUNK).div_ceil(4 * rayon::current_num_threads()).max(1) * CHUNK;
    type Part<'a> = &'a mut [MaybeUninit<f32>];
    let mut tasks: Vec<(usize, usize, Vec<Part>)> = vec![];
    for (pi, outs) in bufs.iter_mut().enumerate() {
        let n = items[pi].0.numel();
        let mut parts: Vec<std::slice::ChunksMut<MaybeUninit<f32>>> =
            outs.iter_mut().map(|b| b.spare_capacity_mut()[..n].chunks_mut(per_task)).collect();
        for start in (0..n).step_by(per_task) {
            let slices: Vec<Part> = parts.iter_mut().map(|c| c.next().expect("as many chunks as tasks")).collect();
            tasks.push((pi, start, slices));
        }
    }
    // Each program runs natively or interpreted for the whole launch (see `Tune`); the tasks'
    // times are summed per program for the measurement.
    let native: Vec<bool> = items.iter().map(|(p, _)| p.native_now()).collect();
    let spent: Vec<std::sync::atomic::AtomicU64> = items.iter().map(|_| Default::default()).collect();
    let work = |(pi, start, mut dsts): (usize, usize, Vec<Part>)| {
        let started = std::time::Instant::now();
        let p = items[pi].0;
        let native = native[pi];
        let len = dsts.first().map(|d| d.len()).unwrap_or(0);
        // Registers for the values that need a buffer: not a scalar, not written straight to
        // an output (the native kernel keeps outputs itself but needs its broadcast buffers).
        let regs_len = CHUNK.min(len.max(1));
        let mut regs: Vec<Vec<f32>> = (0..p.instrs.len())
            .map(|i| {
                let needed = p.scalar[i].is_none() && (p.output_of[i].is_none() || p.native.is_some());
                vec![0f32; if needed { regs_len } else { 0 }]
            })
            .collect();
        // Outputs larger than the caches: each chunk is computed into buffers of its own
        // (L1-resident) and streamed to memory (see stream.rs); smaller ones are written in place.
        let streamed = p.numel() >= super::stream::STREAM_MIN;
        let mut staging: Vec<Vec<MaybeUninit<f32>>> =
            if streamed { dsts.iter().map(|_| vec![MaybeUninit::uninit(); regs_len]).collect() } else { vec![] };
        let mut off = 0;
        while off < len {
            let step = CHUNK.min(len - off);
            // (The chunk writes every element of its outputs.)
            if streamed {
                let mut parts: Vec<&mut [MaybeUninit<f32>]> = staging.iter_mut().map(|s| &mut s[..step]).collect();
                p.chunk(&views[pi], start + off, &mut parts, &mut regs, native);
                for (s, d) in staging.iter().zip(dsts.iter_mut()) {
                    // SAFETY: the chunk initialised the first `step` values of every staging buffer.
                    let s = unsafe { std::slice::from_raw_parts(s.as_ptr() as *const f32, step) };
                    super::stream::stream_copy(s, &mut d[off..off + step]);
                }
            } else {
                let mut parts: Vec<&mut [MaybeUninit<f32>]> = dsts.iter_mut().map(|d| &mut d[off..off + step]).collect();
                p.chunk(&views[pi], start + off, &mut parts, &mut regs, native);
            }
            off += step;
        }
        if streamed {
            super::stream::fence();
        }
        spent[pi].fetch_add(started.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
    };
    if total > CHUNK {
        tasks.into_par_iter().for_each(work);
    } else {
        tasks.into_iter().for_each(work);
    }
    for (((p, _), native), ns) in items.iter().zip(&native).zip(&spent) {
        p.record(*native, ns.load(std::sync::atomic::Ordering::Relaxed));
    }
    for (outs, (p, _)) in bufs.iter_mut().zip(items) {
        for b in outs {
            // SAFETY: the tasks covered every element of every output and initialised it.
            unsafe { b.set_len(p.numel()) };
        }
    }
    items
        .iter()
        .zip(bufs)
        .map(|((p, _), outs)| p.outputs.iter().zip(outs).map(|((_, dtype), v)| output_tensor(*dtype, p.shape.clone(), v)).collect())
        .collect()
}

/// A region output computed as f32 values, as a tensor of its dtype (bools stored as i64).
pub(crate) fn output_tensor(dtype: DType, shape: Vec<usize>, v: Vec<f32>) -> Tensor {
    let data =
        if dtype == DType::Bool { Data::I64(Arc::new(v.iter().map(|x| (*x != 0.0) as i64).collect())) } else { Data::F32(Arc::new(v)) };
    Tensor { dtype, shape, data }
}

/// out[t] = src[offset(start + t)], with the offset of an output index given by `strides`.
fn broadcast_load(src: &[f32], shape: &[usize], strides: &[usize], start: usize, out: &mut [MaybeUninit<f32>]) {
    if shape.is_empty() || strides.iter().all(|s| *s == 0) {
        fill(out, src[0]);
        return;
    }
    // General case: dims merged where they are one run of memory (or both broadcast), then an
    // odometer that moves a whole innermost run at a time (a fill when it is broadcast).
    let mut dims: Vec<(usize, usize)> = vec![];
    for (&n, &st) in shape.iter().zip(strides) {
        if n == 1 {
            continue;
        }
        match dims.last_mut() {
            Some((pn, ps)) if *ps == st * n => {
                *pn *= n;
                *ps = st;
            }
            _ => dims.push((n, st)),
        }
    }
    if dims.is_empty() {
        fill(out, src[0]);
        return;
    }
    let rank = dims.len();
    let mut idx = vec![0usize; rank];
    let mut rem = start;
    for d in (0..rank).rev() {
        idx[d] = rem % dims[d].0;
        rem /= dims[d].0;
    }
    let (n_in, s_in) = dims[rank - 1];
    let mut outer: usize = (0..rank - 1).map(|d| idx[d] * dims[d].1).sum();
    let mut t = 0;
    let mut first = idx[rank - 1];
    while t < out.len() {
        let run = (n_in - first).min(out.len() - t);
        let dst = &mut out[t..t + run];
        if s_in == 0 {
            fill(dst, src[outer]);
        } else if s_in == 1 {
            write_all(dst, &src[outer + first..outer + first + run]);
        } else {
            for (j, o) in dst.iter_mut().enumerate() {
                o.write(src[outer + (first + j) * s_in]);
            }
        }
        t += run;
        first = 0;
        // Carry into the outer dims.
        let mut d = rank - 1;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            outer += dims[d].1;
            if idx[d] < dims[d].0 {
                break;
            }
            outer -= dims[d].1 * dims[d].0;
            idx[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::broadcast_load;

    /// The run-at-a-time broadcast against the definition, on the shapes a bias, a statistic and
    /// odd mixtures give, from every start.
    #[test]
    fn broadcast_load_matches_the_definition() {
        let cases: Vec<(Vec<usize>, Vec<bool>)> = vec![
            (vec![4, 3, 5, 6], vec![true, false, true, true]),
            (vec![4, 3, 5, 6], vec![false, true, false, false]),
            (vec![7, 5], vec![true, false]),
            (vec![7, 5], vec![false, true]),
            (vec![2, 1, 3, 1, 4], vec![false, true, true, true, false]),
            (vec![3, 4, 5], vec![true, false, true]),
            (vec![6], vec![false]),
        ];
        for (shape, bcast) in cases {
            // The input's shape: 1 where broadcast; its contiguous strides over the output's dims.
            let from: Vec<usize> = shape.iter().zip(&bcast).map(|(n, b)| if *b { 1 } else { *n }).collect();
            let mut contiguous = vec![1usize; from.len()];
            for d in (0..from.len().saturating_sub(1)).rev() {
                contiguous[d] = contiguous[d + 1] * from[d + 1];
            }
            let strides: Vec<usize> = (0..shape.len()).map(|d| if from[d] == 1 && shape[d] != 1 { 0 } else { contiguous[d] }).collect();
            let src: Vec<f32> = (0..from.iter().product::<usize>()).map(|i| i as f32 + 0.5).collect();
            let n: usize = shape.iter().product();
            let want: Vec<f32> = (0..n)
                .map(|mut i| {
                    let mut off = 0;
                    for d in (0..shape.len()).rev() {
                        off += (i % shape[d]) * strides[d];
                        i /= shape[d];
                    }
                    src[off]
                })
                .collect();
            for start in 0..n {
                for len in [1, 2, 7, n - start] {
                    let len = len.min(n - start);
                    let mut out = vec![f32::NAN; len];
                    broadcast_load(&src, &shape, &strides, start, super::as_uninit(&mut out));
                    assert_eq!(out, want[start..start + len], "shape {shape:?} strides {strides:?} start {start} len {len}");
                }
            }
        }
    }
}
