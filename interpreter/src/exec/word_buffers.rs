//! Word buffers the bf16 products convert their operands into (bf16_product.rs): pooled per
//! thread, so that a step allocates none, and handed out from a cache line's start.

thread_local! {
    /// Buffers kept between products (fresh ones cost page faults and zeroing: 8% of the MLP
    /// step). Words past an operand's rows or columns are never stored from, so none is cleared.
    static BUFFERS: std::cell::RefCell<Vec<Vec<u32>>> = Default::default();
}

/// Words of a pooled buffer from its first 64-byte boundary: every vector the conversions store
/// and the tiles load then lies in one cache line. From wherever the allocator put them (16
/// bytes past a line in the MLP step), converting 1024×784 into panels took 72-82 µs against
/// 51 aligned.
pub(super) struct Words {
    v: Vec<u32>,
    at: usize,
}

impl std::ops::Deref for Words {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        &self.v[self.at..]
    }
}

impl std::ops::DerefMut for Words {
    fn deref_mut(&mut self) -> &mut [u32] {
        &mut self.v[self.at..]
    }
}

/// A buffer of at least `len` words from this thread's pool, aligned to a cache line. Taken,
/// not borrowed: a product that waits for rayon may run another on this thread.
pub(super) fn buffer(len: usize) -> Words {
    const LINE_WORDS: usize = 16;
    let mut v = BUFFERS.with(|b| b.borrow_mut().pop()).unwrap_or_default();
    v.resize(v.len().max(len + LINE_WORDS - 1), 0);
    // Words to the next line: the address is a multiple of 4, so this is exact.
    let at = (v.as_ptr() as usize).wrapping_neg() % 64 / 4;
    Words { v, at }
}

/// Back to this thread's pool.
pub(super) fn recycle(w: Words) {
    BUFFERS.with(|b| b.borrow_mut().push(w.v));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every buffer starts on a line and holds the words asked for, fresh or taken back from
    /// the pool (a smaller one grown, whose line may then move).
    #[test]
    fn buffers_are_line_aligned_and_long_enough() {
        for len in [1, 15, 16, 1000, 37, 4096, 3] {
            let mut w = buffer(len);
            assert_eq!(w.as_ptr() as usize % 64, 0, "{len} words");
            assert!(w.len() >= len, "{len} words: {}", w.len());
            w[len - 1] = 7;
            recycle(w);
        }
    }
}
