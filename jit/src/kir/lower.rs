//! From the fusion plan to the kernel IR: each region's graph nodes become one body, with the
//! choices the CPU interpreter makes (constants rounded to their dtype, broadcasts as strides
//! over the output's dims, every bf16/f16 op's result rounded) made once, here.

use super::{Buf, Elementwise, Index, Inst, Kernel, Param, RowStep, Rows, SumAxes, Ty};
use dlc_language::ir::plan::RowRead;
use dlc_language::ir::{Graph, NodeId, Op, ReduceOp};
use dlc_language::passes::fusion::{Kernel as PlanKernel, Region};
use dlc_language::passes::rows::{RowGroup, RowItem};
use dlc_language::types::DType;
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq)]
pub struct LowerError(pub String);

impl std::fmt::Display for LowerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LowerError {}

fn err<T>(msg: impl Into<String>) -> Result<T, LowerError> {
    Err(LowerError(msg.into()))
}

/// A node's shape as sizes (every dim is known by the time a plan runs).
pub fn concrete(g: &Graph, n: NodeId) -> Vec<usize> {
    g.node(n).shape.iter().map(|d| d.as_known().unwrap_or(0) as usize).collect()
}

/// The storage of a graph dtype in a kernel.
pub fn storage(d: DType) -> Result<Ty, LowerError> {
    Ok(match d {
        DType::F32 => Ty::F32,
        DType::BF16 => Ty::BF16,
        DType::F16 => Ty::F16,
        DType::Bool => Ty::Bool,
        DType::I64 | DType::I32 | DType::U8 => Ty::I64,
        DType::F64 => return err("f64 values have no kernel form (they run on the CPU interpreter)"),
    })
}

/// The storage of a graph dtype, when it has one in a kernel.
pub fn lower_storage(d: DType) -> Option<Ty> {
    storage(d).ok()
}

/// f32 rounded to a low precision and back (round to nearest, ties to even).
pub fn round_to(ty: Ty, v: f32) -> f32 {
    match ty {
        Ty::BF16 => {
            if v.is_nan() {
                return v;
            }
            let b = v.to_bits();
            f32::from_bits((b.wrapping_add(0x7fff + ((b >> 16) & 1))) & 0xffff_0000)
        }
        Ty::F16 => f16_to_f32(f32_to_f16(v)),
        _ => v,
    }
}

/// IEEE binary16 from f32, round to nearest even (subnormals, overflow to infinity, NaN kept).
pub fn f32_to_f16(v: f32) -> u16 {
    let b = v.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rem = m & ((1u32 << shift) - 1);
        let mut h = m >> shift;
        if rem > half || (rem == half && (h & 1) == 1) {
            h += 1;
        }
        return sign | h as u16;
    }
    let mut h = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    if rem > 0x1000 || (rem == 0x1000 && (h & 1) == 1) {
        h += 1;
    }
    sign | h as u16
}

pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: normalise.
            let mut e = 127 - 15 + 1;
            let mut m = man;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | (e << 23) | ((m & 0x3ff) << 13)
        }
        (0x1f, _) => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

fn low(d: DType) -> Option<Ty> {
    match d {
        DType::BF16 => Some(Ty::BF16),
        DType::F16 => Some(Ty::F16),
        _ => None,
    }
}

/// The strides of a broadcast from `from` to `to` (same rank): the source's contiguous strides,
/// 0 where it is broadcast.
pub(super) fn expand_strides(from: &[usize], to: &[usize]) -> Vec<usize> {
    let contiguous = contiguous(from);
    (0..to.len()).map(|d| if from[d] == 1 && to[d] != 1 { 0 } else { contiguous[d] }).collect()
}

/// Row-major strides of `shape`.
pub(crate) fn contiguous(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// The body of a region: `read(n)` says which buffer a value from outside the region is.
fn body(
    g: &Graph,
    r: &Region,
    read: &dyn Fn(NodeId) -> Result<Buf, LowerError>,
) -> Result<(Vec<Inst>, HashMap<NodeId, usize>), LowerError> {
    let mut insts: Vec<Inst> = vec![];
    let mut reg_of: HashMap<NodeId, usize> = HashMap::new();
    // A buffer read at the output's index is loaded once however often it is used.
    let mut linear: HashMap<Buf, usize> = HashMap::new();
    let push = |insts: &mut Vec<Inst>, i: Inst| -> usize {
        insts.push(i);
        insts.len() - 1
    };
    for &m in &r.nodes {
        let node = g.node(m);
        let mut src = vec![];
        for &s in &node.src {
            let reg = if let Some(reg) = reg_of.get(&s) {
                *reg
            } else if let Op::Const(bits) = g.node(s).op {
                let v = f64::from_bits(bits) as f32;
                push(&mut insts, Inst::Const(low(g.node(s).dtype).map(|t| round_to(t, v)).unwrap_or(v)))
            } else if matches!(node.op, Op::Expand) {
                // The expand itself is the load (below).
                usize::MAX
            } else {
                let from = read(s)?;
                match linear.get(&from) {
                    Some(reg) => *reg,
                    None => {
                        let reg = push(&mut insts, Inst::Load { from, index: Index::Linear });
                        linear.insert(from, reg);
                        reg
                    }
                }
            };
            src.push(reg);
        }
        let reg = match &node.op {
            Op::Unary(u) => push(&mut insts, Inst::Unary(*u, src[0])),
            Op::Binary(b) => push(&mut insts, Inst::Binary(*b, src[0], src[1])),
            Op::Where => push(&mut insts, Inst::Where(src[0], src[1], src[2])),
            Op::Cast if node.dtype == DType::Bool => push(&mut insts, Inst::ToBool(src[0])),
            // Other casts keep the f32 value (and round below when they narrow).
            Op::Cast => src[0],
            Op::Expand if src[0] != usize::MAX => src[0],
            Op::Expand => {
                let s = node.src[0];
                let strides = expand_strides(&concrete(g, s), &concrete(g, m));
                let index = if strides.iter().all(|s| *s == 0) { Index::Splat } else { Index::Strided(strides) };
                push(&mut insts, Inst::Load { from: read(s)?, index })
            }
            other => return err(format!("{other:?} cannot run in a fused region")),
        };
        let reg = match (&node.op, low(node.dtype)) {
            (Op::Unary(_) | Op::Binary(_) | Op::Cast, Some(t)) => push(&mut insts, Inst::Round(t, reg)),
            _ => reg,
        };
        reg_of.insert(m, reg);
    }
    Ok((insts, reg_of))
}

/// One fused region as an elementwise kernel.
pub fn lower_region(g: &Graph, r: &Region) -> Result<Elementwise, LowerError> {
    let read = |n: NodeId| -> Result<Buf, LowerError> {
        r.inputs
            .iter()
            .position(|i| *i == n)
            .map(Buf::Param)
            .ok_or_else(|| LowerError(format!("fused region: {n:?} is neither a member nor an input")))
    };
    let (insts, reg_of) = body(g, r, &read)?;
    let inputs = r
        .inputs
        .iter()
        .map(|i| Ok(Param { ty: storage(g.node(*i).dtype)?, len: concrete(g, *i).iter().product() }))
        .collect::<Result<Vec<_>, LowerError>>()?;
    let outputs = r.outputs.iter().map(|o| Ok((reg_of[o], storage(g.node(*o).dtype)?))).collect::<Result<Vec<_>, LowerError>>()?;
    Ok(Elementwise { shape: concrete(g, r.output()), inputs, body: insts, outputs })
}

/// A row group as a row kernel.
pub fn lower_rows(g: &Graph, rg: &RowGroup) -> Result<Rows, LowerError> {
    let rank = rg.lead.len() + 1;
    let row_len = |n: NodeId| -> usize { g.node(n).shape.get(rank - 1).and_then(|d| d.as_known()).unwrap_or(1) as usize };
    let mut slots: Vec<usize> = vec![];
    let mut slot_of: HashMap<NodeId, usize> = HashMap::new();
    let mut steps = vec![];
    let source = |n: NodeId, slot_of: &HashMap<NodeId, usize>| -> Result<Buf, LowerError> {
        match rg.read(n, slot_of) {
            Some(RowRead::Slot(s)) => Ok(Buf::Slot(s)),
            Some(RowRead::Input(k)) => Ok(Buf::Param(k)),
            None => Err(LowerError(format!("row group: {n:?} is neither computed nor read"))),
        }
    };
    for item in &rg.items {
        match item {
            RowItem::Region(r) => {
                let (body, reg_of) = body(g, r, &|n| source(n, &slot_of))?;
                let mut writes = vec![];
                for o in &r.outputs {
                    slot_of.insert(*o, slots.len());
                    writes.push((reg_of[o], slots.len()));
                    slots.push(row_len(*o));
                }
                steps.push(RowStep::Map { len: row_len(r.output()), body, writes });
            }
            RowItem::Reduce(n) => {
                let max = matches!(g.node(*n).op, Op::Reduce(ReduceOp::Max, _));
                let from = source(g.node(*n).src[0], &slot_of)?;
                slot_of.insert(*n, slots.len());
                steps.push(RowStep::Reduce { max, from, to: slots.len() });
                slots.push(1);
            }
        }
    }
    let inputs = rg
        .inputs
        .iter()
        .map(|i| Ok(Param { ty: storage(g.node(*i).dtype)?, len: concrete(g, *i).iter().product() }))
        .collect::<Result<Vec<_>, LowerError>>()?;
    let outputs = rg.outputs.iter().map(|o| Ok((slot_of[o], storage(g.node(*o).dtype)?))).collect::<Result<Vec<_>, LowerError>>()?;
    Ok(Rows { lead: rg.lead.clone(), len: rg.len, inputs, slots, steps, outputs })
}

/// A plan's kernel in the kernel IR; `None` for kernels that are not generated code (library
/// calls such as matrix products and convolutions, copies, views, free values).
pub fn lower_kernel(g: &Graph, k: &PlanKernel) -> Result<Option<Kernel>, LowerError> {
    Ok(Some(match k {
        PlanKernel::Fused(r) => Kernel::Elementwise(lower_region(g, r)?),
        PlanKernel::Group(rs) => Kernel::Group(rs.iter().map(|r| lower_region(g, r)).collect::<Result<_, _>>()?),
        PlanKernel::Rows(rg) => Kernel::Rows(lower_rows(g, rg)?),
        PlanKernel::Reduce(rk) => {
            let prologue = lower_region(g, &rk.prologue)?;
            let at = rk
                .prologue
                .outputs
                .iter()
                .position(|o| *o == rk.input)
                .ok_or_else(|| LowerError("a prologue sums one of its outputs".into()))?;
            let Op::Reduce(ReduceOp::Sum, axes) = &g.node(rk.node).op else { return err("a prologue kernel ends in a sum") };
            Kernel::Sum(SumAxes { summed: prologue.outputs[at].0, prologue, axes: axes.clone() })
        }
        PlanKernel::Library(_) | PlanKernel::Free(_) | PlanKernel::View(_) | PlanKernel::Gemm(_) => return Ok(None),
    }))
}
