//! Blocked copies of an output's gradient that a convolution's data gradient made and its
//! weight gradient reads next.
//!
//! oneDNN's direct convolutions read their activations in a blocked layout (`nChw16c` on
//! AVX-512), so each call reorders its batch-major inputs from dlc's NCHW. A convolution's data
//! gradient and weight gradient both read dy in that layout, one after the other, so reordering
//! it twice repeats work: on the conv-BN bench step, one of the five input reorders of each band
//! (0.8 ms each on the 2-core EPYC, bound by memory: a hand-written AVX-512 transpose took as
//! long). (x is read by the forward convolution and the weight gradient too, but between them
//! the plan usually recomputes it (rematerialisation), so a copy kept from the forward pass
//! would be of another tensor, held in memory across the step for nothing.)
//!
//! A copy is kept with the tensor it was made from (its buffer held, so it can be neither freed
//! nor written in place while kept: the executor writes over an input's buffer only when it holds
//! the only reference) and the band's offset and layout, and is handed to the first weight
//! gradient that asks for exactly that, which uses it instead of reordering. Only a few are kept
//! (`MAX_COPIES`, `MAX_BYTES`), oldest dropped first: a copy no weight gradient takes (a data
//! gradient alone) costs at most that much memory until it is pushed out.

use super::onednn_api::{Api, Md};
use std::sync::{Arc, Mutex};

/// dy's copy for each of up to four bands.
const MAX_COPIES: usize = 4;
const MAX_BYTES: usize = 64 << 20;

/// Which operand a copy was made from: the tensor's buffer and the band's first element.
pub(super) struct Source<'a> {
    pub tensor: &'a Arc<Vec<f32>>,
    pub offset: usize,
}

struct Copy {
    tensor: Arc<Vec<f32>>,
    offset: usize,
    layout: Md,
    data: Vec<f32>,
}

#[derive(Default)]
pub(super) struct Kept {
    copies: Mutex<Vec<Copy>>,
    /// Copies handed out so far (for the tests).
    taken: std::sync::atomic::AtomicUsize,
}

impl Kept {
    /// The copy of `source` in `layout`, removed from the kept ones; `None` when there is none.
    pub fn take(&self, a: &Api, source: &Source, layout: &Md) -> Option<Vec<f32>> {
        let mut copies = self.copies.lock().expect("kept copies");
        let i = copies.iter().position(|c| {
            // SAFETY: both are initialised descriptors.
            Arc::ptr_eq(&c.tensor, source.tensor) && c.offset == source.offset && unsafe { (a.md_equal)(&c.layout, layout) } != 0
        })?;
        self.taken.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(copies.remove(i).data)
    }

    /// Keep `data`, `source` reordered into `layout`, for a weight gradient to take.
    pub fn keep(&self, source: &Source, layout: Md, data: Vec<f32>) {
        let mut copies = self.copies.lock().expect("kept copies");
        copies.retain(|c| !(Arc::ptr_eq(&c.tensor, source.tensor) && c.offset == source.offset));
        copies.push(Copy { tensor: source.tensor.clone(), offset: source.offset, layout, data });
        while copies.len() > MAX_COPIES || copies.iter().map(|c| c.data.len() * 4).sum::<usize>() > MAX_BYTES {
            copies.remove(0);
        }
    }

    #[cfg(test)]
    pub fn taken(&self) -> usize {
        self.taken.load(std::sync::atomic::Ordering::Relaxed)
    }

    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.copies.lock().expect("kept copies").len()
    }
}
