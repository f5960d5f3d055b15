//! The chunk program of an elementwise kernel of the kernel IR (`Program::from_kir`), and its
//! row form (`Program::for_rows`).

use super::{Instr, Operand, Program, Scalar};
use dlc_jit::kir::{Buf, Elementwise, Index, Inst, Ty};
use dlc_language::types::DType;

impl Program {
    /// The chunk interpreter's form of an elementwise kernel: loads at the output's index become
    /// operands that read the input's chunk, other loads broadcast loads, constants scalars, and
    /// a `Round` after an op the rounding of that op's result (`dtypes` are the outputs' graph
    /// dtypes).
    pub(super) fn from_kir(e: &Elementwise, dtypes: &[DType]) -> Program {
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
        Program::assemble(e, instrs, outputs, round)
    }

    /// A program from its instructions: what each input is read as, which instructions are
    /// scalars, where each output is written.
    fn assemble(e: &Elementwise, instrs: Vec<Instr>, outputs: Vec<(usize, DType)>, round: Vec<Option<DType>>) -> Program {
        let inputs = e.inputs.len();
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
            .collect::<Vec<bool>>();
        // Inputs read only at the output's own index: an output may take such an input's
        // buffer and be written over it (see `launch.rs`).
        let overwritable = (0..inputs)
            .map(|k| direct[k] && !instrs.iter().any(|i| matches!(i, Instr::Expand { src: Operand::Input(j), .. } if *j == k)))
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
        let tiles = super::tiles::tiled(&instrs, &e.shape, &output_of, &round);
        Program {
            instrs,
            shape: e.shape.clone(),
            outputs,
            round,
            direct,
            overwritable,
            kernel: e.clone(),
            native: None,
            run_splats: None,
            tune: None,
            tune_key: None,
            scalar,
            output_of,
            tiles,
        }
    }

    /// This program run one row at a time (exec/rows.rs, through `KernelCache::row_program`):
    /// its kernel over the last dim alone, each broadcast load cut down to its stride along the
    /// row, made into a program as the region's was. Also gives, for each input of the row
    /// program, the region input it reads and that input's strides over the leading dims (from
    /// which the caller finds where row r starts in it). An input loaded with two different
    /// broadcasts becomes two inputs.
    pub(in crate::exec) fn for_rows(&self) -> (Program, Vec<(usize, Vec<usize>)>) {
        self.over_rows(1)
    }

    /// This program run `block` rows at a time, for a region of rank 2 (one leading dim): its
    /// kernel over `[block, L]` with every load kept as it is, so that given each input from
    /// where the block's first row starts in it (the views, as `for_rows` gives them), element
    /// i of the block is element i of the region from that row on. Rows too short for a call
    /// each (cross-entropy's ten classes) run this way.
    pub(in crate::exec) fn for_blocks(&self, block: usize) -> (Program, Vec<(usize, Vec<usize>)>) {
        assert!(self.kernel.shape.len() == 2 && block > 1, "blocks of rows are for rank-2 regions");
        self.over_rows(block)
    }

    /// `for_rows` (`block` 1) or `for_blocks`.
    fn over_rows(&self, block: usize) -> (Program, Vec<(usize, Vec<usize>)>) {
        let e = &self.kernel;
        let rank = e.shape.len().max(1);
        let row_len = e.shape.last().copied().unwrap_or(1);
        let lead = rank - 1;
        let contiguous: Vec<usize> = (0..lead).map(|d| e.shape[d + 1..].iter().product()).collect();
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
        let body = e
            .body
            .iter()
            .map(|inst| match inst {
                Inst::Load { from: Buf::Param(k), index } => {
                    let (outer, row_index) = match index {
                        Index::Linear => (contiguous.clone(), Index::Linear),
                        Index::Splat => (vec![0; lead], Index::Splat),
                        Index::Strided(s) => {
                            let along = s.last().copied().unwrap_or(0);
                            let outer = s[..s.len().saturating_sub(1)].to_vec();
                            (outer, if along == 0 { Index::Splat } else { Index::Strided(vec![along]) })
                        }
                    };
                    // A block reads as the region does, from the block's first row on.
                    let index = if block > 1 { index.clone() } else { row_index };
                    Inst::Load { from: Buf::Param(view(*k, outer)), index }
                }
                other => other.clone(),
            })
            .collect();
        // Each view's parameter is the region input it reads.
        let inputs = views.iter().map(|(k, _)| e.inputs[*k].clone()).collect();
        let shape = if block > 1 { vec![block, row_len] } else { vec![row_len] };
        let row = Elementwise { shape, inputs, body, outputs: e.outputs.clone() };
        let mut program = Program::from_kir(&row, &self.output_dtypes());
        // A row program's inputs move between calls, and a row buffer is refilled at the same
        // address: a tile, kept for the source it was filled from, could be stale.
        program.tiles.iter_mut().for_each(|t| *t = None);
        (program, views)
    }
}
