//! Non-temporal stores for outputs larger than the caches. A kernel writing a fresh 64 MB
//! output with ordinary stores makes the CPU read each line before overwriting it (a
//! read-for-ownership), so memory carries 12 bytes for every 8 the kernel moves; streaming the
//! chunk from its L1-resident buffer to memory skips that read and keeps the caches for the
//! inputs. Used only above `STREAM_MIN` elements: smaller outputs are read again soon, from cache.

use std::mem::MaybeUninit;

/// Outputs at least this long (16 MiB of f32, about the last-level cache a VM of this kind
/// sees) are streamed.
pub const STREAM_MIN: usize = 1 << 22;

/// `dst = src`, with non-temporal stores where `dst` is 16-byte aligned (ordinary ones for the
/// unaligned head and the tail). Call `fence` before another thread reads `dst`.
pub fn stream_copy(src: &[f32], dst: &mut [MaybeUninit<f32>]) {
    assert_eq!(src.len(), dst.len());
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_loadu_ps, _mm_stream_ps};
        let misaligned = (dst.as_ptr() as usize / 4) % 4;
        let head = ((4 - misaligned) % 4).min(dst.len());
        for (o, v) in dst[..head].iter_mut().zip(&src[..head]) {
            o.write(*v);
        }
        let body = (dst.len() - head) / 4 * 4;
        let (s, d) = (&src[head..head + body], &mut dst[head..head + body]);
        for i in (0..body).step_by(4) {
            // SAFETY: SSE is part of x86-64; `d[i..i + 4]` is in bounds and 16-byte aligned
            // (the head took `dst` to a 16-byte boundary), `s[i..i + 4]` in bounds.
            unsafe { _mm_stream_ps(d.as_mut_ptr().add(i) as *mut f32, _mm_loadu_ps(s.as_ptr().add(i))) };
        }
        for (o, v) in dst[head + body..].iter_mut().zip(&src[head + body..]) {
            o.write(*v);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    for (o, v) in dst.iter_mut().zip(src) {
        o.write(*v);
    }
}

/// Order the streamed stores before anything after it (the end of a task whose outputs another
/// thread reads next).
pub fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of x86-64.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_every_value_at_any_alignment_and_length() {
        let src: Vec<f32> = (0..100).map(|i| i as f32 * 0.5 - 7.0).collect();
        for start in 0..5 {
            for len in [0, 1, 3, 4, 5, 17, 64, 95] {
                let mut buf = vec![MaybeUninit::<f32>::uninit(); 110];
                stream_copy(&src[..len], &mut buf[start..start + len]);
                fence();
                // SAFETY: just written in full.
                let got: Vec<f32> = buf[start..start + len].iter().map(|v| unsafe { v.assume_init() }).collect();
                assert_eq!(got, &src[..len], "start {start}, len {len}");
            }
        }
    }
}
