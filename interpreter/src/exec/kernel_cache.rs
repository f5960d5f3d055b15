//! The kernels compiled during a run, shared by every executor of it (a trainer makes a new
//! executor per step): fused programs by their region, their row forms, native code by the key of
//! its kernel, and the autotuning measurements between native code and the chunk interpreter.

use super::fused::{compile, Program, RowProgram, Tune, AUTOTUNE_MIN};
use crate::runtime::RuntimeError;
use dlc_jit::kir::Elementwise;
use dlc_jit::native::{self, Native};
use dlc_language::ir::{Graph, NodeId};
use dlc_language::passes::fusion::Region;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A region's identity: its members, inputs and outputs. (Two plans can cut different regions
/// ending at the same node, so the output alone does not name a program.)
pub(crate) type RegionKey = (Vec<NodeId>, Vec<NodeId>, Vec<NodeId>);

/// Compiled kernels shared by every executor of a run (a trainer makes a new executor per
/// step): fused programs by their region, native code by the key of its kernel.
pub struct KernelCache {
    programs: Mutex<HashMap<RegionKey, Arc<Program>>>,
    /// Regions of row kernels in their row form (`Program::for_rows`, or `for_blocks` of the
    /// given rows), by region, rows a call and whether native code was wanted.
    rows: Mutex<HashMap<(RegionKey, usize, bool), Arc<RowProgram>>>,
    /// Row kernels measured with their regions' native code against the interpreter, by group
    /// (its members, inputs and outputs): the measurement and its key in the tuning file.
    pub(crate) row_tunes: Mutex<HashMap<RegionKey, Arc<(Tune, String)>>>,
    /// Native code by `dlc_jit::native::key` of its kernel.
    native: Mutex<HashMap<String, Option<Arc<Native>>>>,
    /// Compile fused regions to native code (`--jit`; results are equal either way).
    pub jit: bool,
    /// Without `--jit`: compile regions of `AUTOTUNE_MIN` elements or more to native code as
    /// well and keep whichever of the two runs faster (`DLC_AUTOTUNE=0` turns it off).
    pub autotune: bool,
    /// Seconds spent compiling native code so far.
    pub jit_seconds: Mutex<f64>,
    /// Choices measured by earlier runs on this machine and build, and where this run's go
    /// (with autotuning on; `DLC_TUNE_CACHE=0` leaves the file alone).
    pub store: Option<Arc<super::tune_store::TuneStore>>,
    /// The product kernel of each product shape (measured on first use, or from the file).
    pub gemm: super::gemm_select::GemmSelect,
}

impl KernelCache {
    pub fn new(jit: bool) -> KernelCache {
        KernelCache {
            programs: Default::default(),
            rows: Default::default(),
            row_tunes: Default::default(),
            native: Default::default(),
            jit,
            autotune: !jit && std::env::var("DLC_AUTOTUNE").map(|v| v != "0").unwrap_or(true),
            jit_seconds: Mutex::new(0.0),
            store: None,
            gemm: super::gemm_select::GemmSelect::new(None),
        }
    }

    /// The cache with autotuning's choices read from, and saved to, the tuning file. Products'
    /// kernel choices use the file even with `DLC_AUTOTUNE=0` (which is about native code for
    /// fused kernels); `DLC_TUNE_CACHE=0` leaves the file alone.
    pub fn with_tuning_file(mut self) -> KernelCache {
        static MACHINE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let file_on = std::env::var("DLC_TUNE_CACHE").map(|v| v != "0").unwrap_or(true);
        let store = match (file_on, super::tune_store::default_path()) {
            (true, Some(path)) => {
                let machine = MACHINE.get_or_init(super::tune_store::machine_key).clone();
                Some(Arc::new(super::tune_store::TuneStore::open(path, machine)))
            }
            _ => None,
        };
        if self.autotune {
            self.store = store.clone();
        }
        self.gemm = super::gemm_select::GemmSelect::new(store);
        self
    }

    /// Add the choices this run measured to the tuning file; how many were added.
    pub fn save_tuning(&self) -> Result<usize, String> {
        if let Some(store) = &self.gemm.store {
            for (key, pick) in self.gemm.take_measured() {
                store.put_pick(key, pick);
            }
        }
        if let Some(store) = &self.store {
            for p in self.programs.lock().expect("kernel cache").values() {
                if let (Some(key), Some(c)) = (&p.tune_key, p.tune.as_ref().and_then(Tune::measured)) {
                    store.put(key.clone(), c);
                }
            }
            for rt in self.row_tunes.lock().expect("kernel cache").values() {
                if let Some(c) = rt.0.measured() {
                    store.put(rt.1.clone(), c);
                }
            }
        }
        match self.gemm.store.as_ref().or(self.store.as_ref()) {
            Some(store) => store.save(),
            None => Ok(0),
        }
    }

    /// The row form of a region in a row kernel, `block` rows a call (one: `for_rows`, more:
    /// `for_blocks`), made on first use; with `native`, with its native code too when every op
    /// has one.
    pub(crate) fn row_program(&self, g: &Graph, r: &Region, block: usize, native: bool) -> Result<Arc<RowProgram>, RuntimeError> {
        let key = ((r.nodes.clone(), r.inputs.clone(), r.outputs.clone()), block, native);
        if let Some(p) = self.rows.lock().expect("kernel cache").get(&key) {
            return Ok(p.clone());
        }
        let region = compile(g, r)?;
        let (mut program, views) = if block > 1 { region.for_blocks(block) } else { region.for_rows() };
        if native {
            program.native = self.native_code(&program.kernel);
        }
        let p = Arc::new(RowProgram { program, views });
        self.rows.lock().expect("kernel cache").insert(key, p.clone());
        Ok(p)
    }

    /// Native code for a kernel, compiled once per key (`dlc_jit::native::key`: what the
    /// code depends on) (`None` when an op has no compiled form or compiling fails).
    fn native_code(&self, k: &Elementwise) -> Option<Arc<Native>> {
        if !native::compilable(k) {
            return None;
        }
        let mut native = self.native.lock().expect("kernel cache");
        native
            .entry(native::key(k))
            .or_insert_with(|| {
                let c = native::compile(k).ok().map(Arc::new);
                if let Some(c) = &c {
                    *self.jit_seconds.lock().expect("kernel cache") += c.compile_s;
                }
                c
            })
            .clone()
    }

    /// The measurement of a row kernel (`group`: its members, inputs and outputs; `text`: its
    /// row programs' native kernels; `elements`: rows times row length), taken from the tuning
    /// file when an earlier run made it.
    pub(crate) fn row_tune(&self, group: RegionKey, text: &str, elements: usize) -> Arc<(Tune, String)> {
        let mut tunes = self.row_tunes.lock().expect("kernel cache");
        tunes
            .entry(group)
            .or_insert_with(|| {
                let key = format!("rows:{:016x}:{elements}", dlc_jit::cuda::ptx_cache::fnv1a(text.as_bytes()));
                let tune = match self.store.as_ref().and_then(|s| s.get(&key)) {
                    Some(c) => Tune::decided(c.native),
                    None => Tune::default(),
                };
                Arc::new((tune, key))
            })
            .clone()
    }

    /// The program of a region, compiled on first use.
    pub fn program(&self, g: &Graph, r: &Region) -> Result<Arc<Program>, RuntimeError> {
        let region: RegionKey = (r.nodes.clone(), r.inputs.clone(), r.outputs.clone());
        if let Some(p) = self.programs.lock().expect("kernel cache").get(&region) {
            return Ok(p.clone());
        }
        let mut p = compile(g, r)?;
        let measured = !self.jit && self.autotune && p.numel() >= AUTOTUNE_MIN;
        if (self.jit || measured) && native::compilable(&p.kernel) {
            // A choice an earlier run measured: taken as is, and a loser never compiled.
            let key = p.native_text();
            let tune_key = format!("{:016x}:{}", dlc_jit::cuda::ptx_cache::fnv1a(key.as_bytes()), p.numel());
            let stored = if measured { self.store.as_ref().and_then(|s| s.get(&tune_key)) } else { None };
            if measured {
                p.tune_key = Some(tune_key);
            }
            if let Some(c) = stored {
                p.tune = Some(Tune::decided(c.native));
                if !c.native {
                    let p = Arc::new(p);
                    self.programs.lock().expect("kernel cache").insert(region, p.clone());
                    return Ok(p);
                }
            }
            p.native = self.native_code(&p.kernel);
            if p.native.is_some() {
                p.run_splats = super::fused::run_splat_variant(&p.kernel)
                    .and_then(|(e, run, strides)| Some(super::fused::RunSplats { code: self.native_code(&e)?, run, strides }));
            }
            if measured && p.native.is_some() && p.tune.is_none() {
                p.tune = Some(Tune::default());
            }
        }
        let p = Arc::new(p);
        self.programs.lock().expect("kernel cache").insert(region, p.clone());
        Ok(p)
    }
}

impl KernelCache {
    /// Per program measured against its native code: what was chosen (`Some(true)`: native),
    /// or `None` while it is still measuring.
    pub fn tuned(&self) -> Vec<Option<bool>> {
        let mut out: Vec<Option<bool>> =
            self.programs.lock().expect("kernel cache").values().filter(|p| p.tune.is_some()).map(|p| p.tuned_native()).collect();
        out.extend(self.row_tunes.lock().expect("kernel cache").values().map(|t| t.0.chosen()));
        out
    }
}

impl Default for KernelCache {
    fn default() -> Self {
        KernelCache::new(false)
    }
}
