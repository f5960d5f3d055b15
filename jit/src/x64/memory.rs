//! Executable memory for one kernel: written while mapped read-write, then made read-execute
//! (never both), unmapped when dropped.

pub struct Code {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is immutable (read-execute) once made, and freed only on drop.
unsafe impl Send for Code {}
unsafe impl Sync for Code {}

impl Code {
    /// Map `bytes` as code.
    pub fn new(bytes: &[u8]) -> Result<Code, String> {
        let len = bytes.len().max(1);
        // SAFETY: a fresh anonymous private mapping; `bytes` is copied into it before it is made
        // executable, and nothing else holds its address.
        unsafe {
            let ptr =
                libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0);
            if ptr == libc::MAP_FAILED {
                return Err(format!("mmap of {len} bytes for a kernel failed: {}", std::io::Error::last_os_error()));
            }
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr as *mut u8, bytes.len());
            if libc::mprotect(ptr, len, libc::PROT_READ | libc::PROT_EXEC) != 0 {
                let e = std::io::Error::last_os_error();
                libc::munmap(ptr, len);
                return Err(format!("making a kernel executable failed: {e}"));
            }
            Ok(Code { ptr, len })
        }
    }

    pub fn entry(&self) -> *const u8 {
        self.ptr as *const u8
    }
}

impl Drop for Code {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once; no function pointer into it outlives
        // its owner (`Compiled`).
        unsafe {
            libc::munmap(self.ptr, self.len);
        }
    }
}
