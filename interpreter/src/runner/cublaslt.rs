//! Products with an epilogue through cuBLASLt (`Epilogue::Bias` / `BiasRelu`: `BIAS` and
//! `RELU_BIAS`): the bias (and the relu) applied as the product writes its tile, so the sum is
//! never written and read back by a kernel of its own. Loaded at run time like the rest of
//! cudarc; on the same stream as everything else, so stream order is the only ordering needed.
//!
//! cudarc's safe `Matmul<f32>` always computes f32 products in TF32; here the compute type
//! follows the recipe (`CUBLAS_COMPUTE_32F` unless `precision = tf32`), as the cuBLAS path does.
//! Each product shape's algorithm is cuBLASLt's first heuristic choice, asked once and kept.

use super::driver::{Epilogue, Product};
use cudarc::cublaslt::{result, sys};
use std::collections::HashMap;
use std::ffi::c_void;

/// cuBLASLt's scratch space: NVIDIA's advice for Hopper (32 MiB; 4 MiB is enough before it).
pub const WORKSPACE: usize = 32 << 20;

/// A cuBLASLt handle with its workspace (device address) and the algorithm chosen per product.
pub struct Lt {
    handle: sys::cublasLtHandle_t,
    workspace: u64,
    tf32: bool,
    algos: HashMap<Product, sys::cublasLtMatmulAlgo_t>,
}

impl Drop for Lt {
    fn drop(&mut self) {
        // SAFETY: the handle was created by `open` and is destroyed once; a failure is ignored
        // (there is nothing to do about it while dropping).
        let _ = unsafe { result::destroy_handle(self.handle) };
    }
}

fn lt<T>(what: &str, r: Result<T, result::CublasError>) -> Result<T, String> {
    r.map_err(|e| format!("cuBLASLt refused {what}: {e:?}"))
}

/// Descriptors for one call, destroyed when dropped.
struct Descriptors {
    desc: sys::cublasLtMatmulDesc_t,
    layouts: [sys::cublasLtMatrixLayout_t; 3],
}

impl Drop for Descriptors {
    fn drop(&mut self) {
        // SAFETY: each was created once by `Descriptors::new` and is destroyed once.
        unsafe {
            let _ = result::destroy_matmul_desc(self.desc);
            for l in self.layouts {
                let _ = result::destroy_matrix_layout(l);
            }
        }
    }
}

/// Set a descriptor attribute from a value of its documented type.
unsafe fn set<T>(desc: sys::cublasLtMatmulDesc_t, attr: sys::cublasLtMatmulDescAttributes_t, v: &T) -> Result<(), String> {
    lt("a product's attribute", result::set_matmul_desc_attribute(desc, attr, v as *const T as *const c_void, std::mem::size_of::<T>()))
}

impl Descriptors {
    /// `p` as the column-major call (see `Product::column_major`): the first operand is our `b`.
    fn new(p: &Product, tf32: bool, bias: u64) -> Result<Descriptors, String> {
        use sys::cublasLtMatmulDescAttributes_t as A;
        use sys::cublasLtMatrixLayoutAttribute_t as L;
        let cm = p.column_major();
        let ty = sys::cudaDataType_t::CUDA_R_32F;
        let compute =
            if tf32 { sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32 } else { sys::cublasComputeType_t::CUBLAS_COMPUTE_32F };
        let desc = lt("a product", result::create_matmul_desc(compute, ty))?;
        let shape = |t: bool, rows: usize, cols: usize| if t { (cols, rows) } else { (rows, cols) };
        let (fr, fc) = shape(cm.trans_first, cm.m, cm.k);
        let (sr, sc) = shape(cm.trans_second, cm.k, cm.n);
        let mut made = vec![];
        for (rows, cols, ld) in [(fr, fc, cm.ld_first), (sr, sc, cm.ld_second), (cm.m, cm.n, cm.ldc)] {
            made.push(lt("a matrix layout", result::create_matrix_layout(ty, rows as u64, cols as u64, ld as i64))?);
        }
        let d = Descriptors { desc, layouts: [made[0], made[1], made[2]] };
        let epilogue = match p.epilogue {
            Epilogue::BiasRelu => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_RELU_BIAS,
            Epilogue::Bias => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_BIAS,
            Epilogue::None => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_DEFAULT,
        };
        // SAFETY: live descriptors, each attribute given a value of the type cuBLASLt documents.
        unsafe {
            set(desc, A::CUBLASLT_MATMUL_DESC_TRANSA, &(cm.trans_first as i32))?;
            set(desc, A::CUBLASLT_MATMUL_DESC_TRANSB, &(cm.trans_second as i32))?;
            set(desc, A::CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue)?;
            if p.epilogue != Epilogue::None {
                set(desc, A::CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias)?;
                // The same bias for every product of a batch.
                set(desc, A::CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &0i64)?;
            }
            if p.batch > 1 {
                let count = i32::try_from(p.batch).map_err(|_| format!("a batch of {} products", p.batch))?;
                for (l, stride) in d.layouts.iter().zip([cm.stride_first, cm.stride_second, cm.stride_c]) {
                    let set_layout =
                        |attr, v: *const c_void, size| lt("a batch layout", result::set_matrix_layout_attribute(*l, attr, v, size));
                    set_layout(L::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count as *const i32 as *const c_void, 4)?;
                    set_layout(L::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &(stride as i64) as *const i64 as *const c_void, 8)?;
                }
            }
        }
        Ok(d)
    }
}

impl Lt {
    /// A handle, with `workspace` (a device buffer of `WORKSPACE` bytes the caller keeps).
    pub fn open(workspace: u64, tf32: bool) -> Result<Lt, String> {
        let handle = lt("to start", result::create_handle())?;
        Ok(Lt { handle, workspace, tf32, algos: HashMap::new() })
    }

    /// cuBLASLt's first choice for `p`, asked once per product shape and epilogue.
    fn algo(&mut self, p: &Product, d: &Descriptors) -> Result<sys::cublasLtMatmulAlgo_t, String> {
        if let Some(a) = self.algos.get(p) {
            return Ok(*a);
        }
        let pref = lt("a preference", result::create_matmul_pref())?;
        // SAFETY: live handles; the preference is destroyed after the query.
        let found = unsafe {
            let size = WORKSPACE;
            let set = result::set_matmul_pref_attribute(
                pref,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &size as *const usize as *const c_void,
                std::mem::size_of::<usize>(),
            );
            let [a, b, c] = d.layouts;
            let found = set.and_then(|_| result::get_matmul_algo_heuristic(self.handle, d.desc, a, b, c, c, pref));
            let _ = result::destroy_matmul_pref(pref);
            lt("every algorithm for this product", found)?
        };
        self.algos.insert(*p, found.algo);
        Ok(found.algo)
    }

    /// `c = epilogue(op(a) @ op(b))` for f32 row-major buffers at these device addresses, on `stream`.
    pub fn run(&mut self, stream: sys::cudaStream_t, p: &Product, [a, b, c, bias]: [u64; 4]) -> Result<(), String> {
        let d = Descriptors::new(p, self.tf32, bias)?;
        let algo = self.algo(p, &d)?;
        let (one, zero) = (1f32, 0f32);
        let [first, second, out] = d.layouts;
        // SAFETY: the addresses hold the product's operands, output and bias in f32 (checked by
        // the executor against the shapes), and the workspace is `WORKSPACE` bytes.
        lt("the product", unsafe {
            result::matmul(
                self.handle,
                d.desc,
                &one as *const f32 as *const c_void,
                &zero as *const f32 as *const c_void,
                b as *const c_void,
                first,
                a as *const c_void,
                second,
                c as *const c_void,
                out,
                c as *mut c_void,
                out,
                &algo,
                self.workspace as *mut c_void,
                WORKSPACE,
                stream,
            )
        })
    }
}
