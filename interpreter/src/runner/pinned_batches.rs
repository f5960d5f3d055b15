//! Batches copied into page-locked memory on the data feed's workers, as DataLoader's
//! `pin_memory` thread copies them: the step's thread then starts each batch's upload from that
//! memory (a DMA the host does not wait for) with no copy of its own. A device runner hands its
//! pool to the feed (`Runner::page_lock`); on the CPU there is none.
//!
//! The pool keeps at most `MOST_BUFFERS` buffers. A worker takes a free one of the batch's size
//! (waiting, on its own thread, for that buffer's last upload to finish), copies the batch's
//! bytes in and keeps the batch's tensor beside it: the tensor's storage stays alive while it
//! is held, so its address names it, and the upload of the same bytes (`take`, same address and
//! length) finds it. A pinned batch that is never uploaded (an evaluation batch, a step that
//! stopped) is the first given up when a worker needs a buffer.

use crate::runner::storage;
use crate::runtime::tensor::Tensor;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What the data feed's workers see of a device's page-locked pool.
pub trait PageLock: Send + Sync {
    /// Copy `t`'s values into page-locked memory for its upload, when it is an upload large
    /// enough to be worth it (on a GPU, `PINNED_FROM`) and its bytes are the device's without
    /// conversion.
    fn pin(&self, t: &Tensor);
    /// Uploads made from memory a worker pinned, so far.
    fn taken(&self) -> usize;
}

/// On a GPU, uploads this large are copied through page-locked memory (smaller ones are not
/// worth a buffer, and are sent from where they are).
pub const PINNED_FROM: usize = 64 << 10;
/// Buffers the pool keeps in all: two steps' batches of two inputs each in flight and ahead,
/// and the feed's default depth of two more.
const MOST_BUFFERS: usize = 8;

/// Page-locked host memory of one driver.
pub trait HostBuffer: Send + 'static {
    /// Its size in bytes.
    fn size(&self) -> usize;
    /// The bytes, for writing, once the buffer's last upload has read them.
    fn bytes_mut(&mut self) -> Result<&mut [u8], String>;
}

type Alloc<B> = Box<dyn Fn(usize) -> Result<B, String> + Send + Sync>;

pub struct PinnedBatches<B> {
    /// The smallest upload pinned, in bytes.
    from: usize,
    alloc: Alloc<B>,
    state: Mutex<Pool<B>>,
    taken: AtomicUsize,
}

struct Pool<B> {
    free: Vec<B>,
    /// Pinned batches not yet uploaded, oldest first, with the tensor whose bytes they hold.
    held: VecDeque<(Tensor, B)>,
    /// Buffers given to workers and not yet back (being written).
    out: usize,
}

impl<B: HostBuffer> PinnedBatches<B> {
    /// A pool for uploads of `from` bytes and more, its buffers made by `alloc`.
    pub fn new(from: usize, alloc: impl Fn(usize) -> Result<B, String> + Send + Sync + 'static) -> Arc<PinnedBatches<B>> {
        Arc::new(PinnedBatches {
            from,
            alloc: Box::new(alloc),
            state: Mutex::new(Pool { free: vec![], held: VecDeque::new(), out: 0 }),
            taken: AtomicUsize::new(0),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pool<B>> {
        // A worker that panicked mid-copy leaves a consistent pool (its buffer is just gone).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The pinned copy of `bytes` (a batch's storage, at that address and length), for an
    /// upload from it; `give_back` it once the copy is queued.
    pub fn take(&self, bytes: &[u8]) -> Option<B> {
        if bytes.len() < self.from {
            return None;
        }
        let mut pool = self.lock();
        let i = pool.held.iter().position(|(t, _)| held_bytes(t).is_some_and(|h| std::ptr::eq(h, bytes)))?;
        let (_, buf) = pool.held.remove(i)?;
        self.taken.fetch_add(1, Ordering::Relaxed);
        Some(buf)
    }

    /// A buffer `take` handed out, free again (its next writer waits for the queued upload).
    pub fn give_back(&self, buf: B) {
        self.lock().free.push(buf);
    }

    /// A buffer of `len` bytes for a worker: a free one of that size, a new one while the pool
    /// has room, else one given up (the oldest pinned batch, or a free buffer of another size).
    fn buffer_for(&self, len: usize) -> Option<B> {
        let mut pool = self.lock();
        let reuse = match pool.free.iter().position(|b| b.size() == len) {
            Some(i) => Some(pool.free.swap_remove(i)),
            None if pool.free.len() + pool.held.len() + pool.out < MOST_BUFFERS => None,
            None => {
                // Make room: drop a free buffer of another size, else the oldest held batch.
                if !pool.free.is_empty() {
                    pool.free.swap_remove(0);
                    None
                } else {
                    match pool.held.iter().position(|(_, b)| b.size() == len) {
                        Some(i) => pool.held.remove(i).map(|(_, b)| b),
                        None => {
                            pool.held.pop_front()?;
                            None
                        }
                    }
                }
            }
        };
        pool.out += 1;
        drop(pool);
        match reuse {
            Some(b) => Some(b),
            // Allocated outside the lock: page-locking memory takes the driver a while.
            None => (self.alloc)(len).ok().or_else(|| {
                self.lock().out -= 1;
                None
            }),
        }
    }
}

/// The bytes of `t` the device is sent as they are, if any.
fn held_bytes(t: &Tensor) -> Option<&[u8]> {
    storage::as_bytes(t, storage::device_type(t.dtype)?)
}

impl<B: HostBuffer> PageLock for PinnedBatches<B> {
    fn pin(&self, t: &Tensor) {
        let Some(bytes) = held_bytes(t).filter(|b| b.len() >= self.from) else { return };
        let Some(mut buf) = self.buffer_for(bytes.len()) else { return };
        // Waits (this worker only) for the buffer's last upload to have read it.
        let copied = buf.bytes_mut().map(|dst| dst.copy_from_slice(bytes));
        let mut pool = self.lock();
        pool.out -= 1;
        match copied {
            Ok(()) => pool.held.push_back((t.clone(), buf)),
            // The upload then stages the batch on the step's thread, as without a pool.
            Err(_) => pool.free.push(buf),
        }
    }

    fn taken(&self) -> usize {
        self.taken.load(Ordering::Relaxed)
    }
}

/// Host memory standing for page-locked memory on the emulated GPU (so that the path is tested
/// without one).
impl HostBuffer for Vec<u8> {
    fn size(&self) -> usize {
        Vec::len(self)
    }
    fn bytes_mut(&mut self) -> Result<&mut [u8], String> {
        Ok(self.as_mut_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlc_language::types::DType;
    use std::sync::Arc as StdArc;

    fn batch(n: usize, v: f32) -> Tensor {
        Tensor { dtype: DType::F32, shape: vec![n], data: crate::runtime::tensor::Data::F32(StdArc::new(vec![v; n])) }
    }

    #[test]
    fn an_upload_of_a_pinned_batch_finds_its_copy_and_no_other() {
        let pool = PinnedBatches::new(PINNED_FROM, |n| Ok(vec![0u8; n]));
        let (a, b) = (batch(1 << 15, 1.0), batch(1 << 15, 2.0));
        pool.pin(&a);
        // Equal bytes elsewhere are not the pinned batch: only its own storage is.
        let a_copy = batch(1 << 15, 1.0);
        assert!(pool.take(held_bytes(&a_copy).unwrap()).is_none());
        assert!(pool.take(held_bytes(&b).unwrap()).is_none());
        let got = pool.take(held_bytes(&a).unwrap()).expect("a's pinned copy");
        assert_eq!(&got[..], held_bytes(&a).unwrap());
        assert!(pool.take(held_bytes(&a).unwrap()).is_none(), "taken once");
        pool.give_back(got);
        assert_eq!(pool.taken(), 1);
        // A small batch is not pinned.
        let small = batch(16, 1.0);
        pool.pin(&small);
        assert!(pool.lock().held.is_empty());
    }

    #[test]
    fn batches_never_uploaded_are_given_up_and_the_pool_stays_bounded() {
        let made = StdArc::new(AtomicUsize::new(0));
        let counter = made.clone();
        let pool = PinnedBatches::new(PINNED_FROM, move |n| {
            counter.fetch_add(1, Ordering::Relaxed);
            Ok(vec![0u8; n])
        });
        let batches: Vec<Tensor> = (0..20).map(|i| batch(1 << 15, i as f32)).collect();
        batches.iter().for_each(|t| pool.pin(t));
        assert_eq!(made.load(Ordering::Relaxed), MOST_BUFFERS);
        // The last ones are there; the first were given up.
        assert!(pool.take(held_bytes(&batches[19]).unwrap()).is_some());
        assert!(pool.take(held_bytes(&batches[0]).unwrap()).is_none());
    }
}
