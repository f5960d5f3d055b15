//! Translation of an elementwise kernel of the kernel IR to Cranelift IR and native code: one
//! function `fn(inputs: *const *const f32, outputs: *const *mut f32, len: u64)` that computes
//! elements `0..len` (the caller offsets the pointers to its chunk, see the module above): a loop
//! over `f32x4` lanes, then a scalar loop for the remainder, both emitted from the same body.

use super::math::Emit;
use super::{input_count, read, supports, Read};
use crate::kir::{Buf, Elementwise, Inst};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, AbiParam, Block, BlockArg, InstBuilder, MemFlagsData, Type, Value};
use cranelift_codegen::settings::Configurable;
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module};
use std::collections::HashMap;

type KernelFn = unsafe extern "C" fn(*const *const f32, *const *mut f32, u64);

/// A compiled kernel. The code lives as long as this value.
pub struct Compiled {
    // Keeps the executable memory mapped.
    _module: JITModule,
    func: KernelFn,
    inputs: usize,
    outputs: usize,
    /// Seconds spent in Cranelift.
    pub compile_s: f64,
}

// SAFETY: after `finalize_definitions` the module's code is immutable, and the function only
// reads and writes the memory its caller passes.
unsafe impl Send for Compiled {}
unsafe impl Sync for Compiled {}

impl Compiled {
    /// Compute elements `0..len`: `inputs[k]` and `outputs[j]` each point at `len` f32 values
    /// (at least one for a parameter only read as a splat; a parameter only read through
    /// buffers is not read), in the order `dlc_jit::cranelift`'s doc gives.
    ///
    /// # Safety
    /// The pointers must be valid for those elements, as many as [`super::input_count`] and
    /// the kernel's outputs, and the outputs must not overlap anything else the kernel reads.
    pub unsafe fn call(&self, inputs: &[*const f32], outputs: &[*mut f32], len: usize) {
        debug_assert_eq!(inputs.len(), self.inputs);
        debug_assert_eq!(outputs.len(), self.outputs);
        (self.func)(inputs.as_ptr(), outputs.as_ptr(), len as u64)
    }
}

/// Compile `e` for this CPU.
pub fn compile(e: &Elementwise) -> Result<Compiled, String> {
    if !supports(e) {
        return Err("the kernel uses an op the JIT does not compile".into());
    }
    let started = std::time::Instant::now();
    let mut flags = cranelift_codegen::settings::builder();
    flags.set("opt_level", "speed").map_err(|e| e.to_string())?;
    flags.set("use_colocated_libcalls", "false").map_err(|e| e.to_string())?;
    flags.set("is_pic", "false").map_err(|e| e.to_string())?;
    let isa = cranelift_native::builder()
        .map_err(|e| format!("this CPU is not supported by Cranelift: {e}"))?
        .finish(cranelift_codegen::settings::Flags::new(flags))
        .map_err(|e| e.to_string())?;
    let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    let ptr = module.target_config().pointer_type();
    let mut sig = module.make_signature();
    sig.params.extend([AbiParam::new(ptr), AbiParam::new(ptr), AbiParam::new(types::I64)]);
    let id = module.declare_function("kernel", Linkage::Local, &sig).map_err(|e| e.to_string())?;
    let mut ctx = Context::new();
    ctx.func.signature = sig;
    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        build(&mut b, e, ptr);
        b.seal_all_blocks();
        b.finalize(module.target_config());
    }
    module.define_function(id, &mut ctx).map_err(|e| format!("cranelift: {e:?}"))?;
    module.finalize_definitions().map_err(|e| e.to_string())?;
    let code = module.get_finalized_function(id);
    // SAFETY: the function was built with exactly this signature.
    let func = unsafe { std::mem::transmute::<*const u8, KernelFn>(code) };
    Ok(Compiled { _module: module, func, inputs: input_count(e), outputs: e.outputs.len(), compile_s: started.elapsed().as_secs_f64() })
}

fn build(b: &mut FunctionBuilder, e: &Elementwise, ptr: Type) {
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let (ins, outs, len) = {
        let p = b.block_params(entry);
        (p[0], p[1], p[2])
    };
    let flags = MemFlagsData::trusted();
    let in_ptrs: Vec<Value> = (0..input_count(e)).map(|i| b.ins().load(ptr, flags, ins, (8 * i) as i32)).collect();
    let out_ptrs: Vec<Value> = (0..e.outputs.len()).map(|i| b.ins().load(ptr, flags, outs, (8 * i) as i32)).collect();
    let vec_end = b.ins().band_imm_s(len, !7i64);
    let mut consts: HashMap<(u32, u8), Value> = HashMap::new();
    let zero = b.ins().iconst(types::I64, 0);

    let vloop = b.create_block();
    let vbody = b.create_block();
    let tloop = b.create_block();
    let tbody = b.create_block();
    let exit = b.create_block();
    for blk in [vloop, vbody, tloop, tbody] {
        b.append_block_param(blk, types::I64);
    }
    b.ins().jump(vloop, &[BlockArg::Value(zero)]);

    // Two f32x4 vectors a step (unrolled, for throughput) while eight elements remain.
    b.switch_to_block(vloop);
    let i = b.block_params(vloop)[0];
    let done = b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, i, vec_end);
    b.ins().brif(done, tloop, &[BlockArg::Value(i)], vbody, &[BlockArg::Value(i)]);
    b.switch_to_block(vbody);
    let i = b.block_params(vbody)[0];
    body(b, e, &in_ptrs, &out_ptrs, i, types::F32X4, &mut consts, entry);
    let i4 = b.ins().iadd_imm_s(i, 4);
    body(b, e, &in_ptrs, &out_ptrs, i4, types::F32X4, &mut consts, entry);
    let next = b.ins().iadd_imm_s(i, 8);
    b.ins().jump(vloop, &[BlockArg::Value(next)]);

    // The remainder one at a time.
    b.switch_to_block(tloop);
    let i = b.block_params(tloop)[0];
    let done = b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, i, len);
    b.ins().brif(done, exit, &[], tbody, &[BlockArg::Value(i)]);
    b.switch_to_block(tbody);
    let i = b.block_params(tbody)[0];
    body(b, e, &in_ptrs, &out_ptrs, i, types::F32, &mut consts, entry);
    let next = b.ins().iadd_imm_s(i, 1);
    b.ins().jump(tloop, &[BlockArg::Value(next)]);

    b.switch_to_block(exit);
    b.ins().return_(&[]);
}

/// The body at element `i` (lanes `i..i+4` for `f32x4`), outputs stored.
#[allow(clippy::too_many_arguments)]
fn body(
    b: &mut FunctionBuilder,
    e: &Elementwise,
    in_ptrs: &[Value],
    out_ptrs: &[Value],
    i: Value,
    ty: Type,
    consts: &mut HashMap<(u32, u8), Value>,
    entry: Block,
) {
    // Loads are not known to be aligned (chunks start anywhere) but never trap.
    let flags = MemFlagsData::new().with_notrap();
    let byte = b.ins().ishl_imm_s(i, 2);
    let at_i = |b: &mut FunctionBuilder, base: Value| {
        let a = b.ins().iadd(base, byte);
        b.ins().load(ty, flags, a, 0)
    };
    // The buffers of broadcast loads follow the parameters, in body order.
    let mut next_buffer = e.inputs.len();
    let mut regs: Vec<Value> = Vec::with_capacity(e.body.len());
    for inst in &e.body {
        let v = match inst {
            Inst::Load { from: Buf::Param(k), index } => match read(index) {
                Read::Chunk => at_i(b, in_ptrs[*k]),
                Read::Buffer => {
                    next_buffer += 1;
                    at_i(b, in_ptrs[next_buffer - 1])
                }
                Read::Splat => {
                    let s = b.ins().load(types::F32, flags, in_ptrs[*k], 0);
                    if ty.is_vector() {
                        b.ins().splat(ty, s)
                    } else {
                        s
                    }
                }
            },
            Inst::Load { from: Buf::Slot(_), .. } => unreachable!("`supports` keeps row buffers out of compiled kernels"),
            Inst::Const(c) => Emit { b, ty, consts: &mut *consts, entry }.c(*c),
            Inst::Unary(op, x) => Emit { b, ty, consts: &mut *consts, entry }.unary(*op, regs[*x]),
            Inst::Binary(op, x, y) => Emit { b, ty, consts: &mut *consts, entry }.binary(*op, regs[*x], regs[*y]),
            Inst::Where(c, x, y) => {
                let mut em = Emit { b, ty, consts: &mut *consts, entry };
                let zero = em.c(0.0);
                let m = em.cmp(FloatCC::NotEqual, regs[*c], zero);
                em.select(m, regs[*x], regs[*y])
            }
            Inst::ToBool(x) => {
                let mut em = Emit { b, ty, consts: &mut *consts, entry };
                let zero = em.c(0.0);
                let m = em.cmp(FloatCC::NotEqual, regs[*x], zero);
                em.bool01(m)
            }
            Inst::Round(..) => unreachable!("`supports` keeps rounding out of compiled kernels"),
        };
        regs.push(v);
    }
    for (j, (r, _)) in e.outputs.iter().enumerate() {
        let a = b.ins().iadd(out_ptrs[j], byte);
        b.ins().store(flags, regs[*r], a, 0);
    }
}
