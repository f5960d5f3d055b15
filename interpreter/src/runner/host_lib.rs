//! Kernels compiled for the host and loaded into this process: what the C check and the CUDA
//! emulation share. The source goes to a file named by its contents (a library with
//! thread-locals is never unloaded, so another program's kernels under the same name would load
//! the first one again), is compiled into a shared object, and is opened; the library is closed
//! when dropped.

use std::path::Path;

/// How to compile: the compiler (`env` overrides `default`), what to call it in messages, the
/// source's extension, and the arguments before `-o OUT SOURCE` and after it.
pub struct Compiler {
    pub env: &'static str,
    pub default: &'static str,
    pub what: &'static str,
    pub extension: &'static str,
    pub before: &'static [&'static str],
    pub after: &'static [&'static str],
}

pub struct HostLib {
    handle: *mut libc::c_void,
}

impl HostLib {
    /// Write `src` into `dir`, compile it with `c` and load it.
    pub fn build(src: &str, dir: &Path, stem: &str, c: &Compiler) -> Result<HostLib, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let tag = format!("{:016x}", dlc_jit::cuda::ptx_cache::fnv1a(src.as_bytes()));
        let source = dir.join(format!("{stem}_{tag}.{}", c.extension));
        let so = dir.join(format!("{stem}_{tag}.so"));
        std::fs::write(&source, src).map_err(|e| format!("{}: {e}", source.display()))?;
        let compiler = std::env::var(c.env).unwrap_or_else(|_| c.default.into());
        let out = std::process::Command::new(&compiler)
            .args(c.before)
            .arg("-o")
            .arg(&so)
            .arg(&source)
            .args(c.after)
            .output()
            .map_err(|e| format!("running the {} compiler `{compiler}`: {e}", c.what))?;
        if !out.status.success() {
            return Err(format!("the {} compiler rejected {}:\n{}", c.what, source.display(), String::from_utf8_lossy(&out.stderr)));
        }
        let path = std::ffi::CString::new(so.to_string_lossy().as_bytes()).map_err(|e| e.to_string())?;
        // SAFETY: loading a library just compiled from our own source.
        let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(format!("cannot load {}", so.display()));
        }
        Ok(HostLib { handle })
    }

    /// The address of a function of the library.
    pub fn symbol(&self, name: &str) -> Result<*mut libc::c_void, String> {
        let sym = std::ffi::CString::new(name).map_err(|e| e.to_string())?;
        // SAFETY: a lookup in a library that is open while `self` lives.
        let f = unsafe { libc::dlsym(self.handle, sym.as_ptr()) };
        if f.is_null() {
            return Err(format!("no symbol {name}"));
        }
        Ok(f)
    }
}

impl Drop for HostLib {
    fn drop(&mut self) {
        // SAFETY: the functions looked up are not used past the library's owner.
        unsafe { libc::dlclose(self.handle) };
    }
}

/// Pointers to each parameter's bytes, as the kernels' `void **params` takes them.
pub fn pointers(params: &mut [Vec<u8>]) -> Vec<*mut libc::c_void> {
    params.iter_mut().map(|b| b.as_mut_ptr() as *mut libc::c_void).collect()
}
