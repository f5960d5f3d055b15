//! Decoded row groups kept for the data feed's workers, shared: a Parquet row group is decoded
//! whole (its pages compress many rows together), so each is decoded once and kept while the
//! groups held fit a budget of bytes, the least recently used let go first (always keeping the
//! one just decoded). A worker that asks for a group another is decoding waits for it rather
//! than decoding it twice; groups decode side by side on different workers.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

pub struct RowGroups<T> {
    /// Each group, when held.
    slots: Vec<Mutex<Option<Arc<T>>>>,
    /// The groups held and their sizes in bytes, least recently used first.
    held: Mutex<VecDeque<(usize, usize)>>,
    budget: usize,
}

/// A lock, taken even if a thread panicked while holding it (what it guards stays consistent:
/// a slot is either filled or not).
fn lock<X>(m: &Mutex<X>) -> MutexGuard<'_, X> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<T> RowGroups<T> {
    /// A cache of `groups` row groups keeping at most `budget` bytes of them (and at least one).
    pub fn new(groups: usize, budget: usize) -> RowGroups<T> {
        RowGroups { slots: (0..groups).map(|_| Mutex::new(None)).collect(), held: Mutex::new(VecDeque::new()), budget }
    }

    /// Group `g`: held, or made by `decode` now (whose result takes `size` bytes).
    pub fn get(&self, g: usize, decode: impl FnOnce() -> T, size: impl Fn(&T) -> usize) -> Arc<T> {
        let mut slot = lock(&self.slots[g]);
        if let Some(t) = slot.as_ref() {
            let t = Arc::clone(t);
            drop(slot);
            let mut held = lock(&self.held);
            if let Some(at) = held.iter().position(|(h, _)| *h == g) {
                let entry = held.remove(at).expect("found");
                held.push_back(entry);
            }
            return t;
        }
        let t = Arc::new(decode());
        *slot = Some(Arc::clone(&t));
        drop(slot);
        let evicted = {
            let mut held = lock(&self.held);
            held.retain(|(h, _)| *h != g);
            held.push_back((g, size(&t)));
            let mut total: usize = held.iter().map(|(_, b)| b).sum();
            let mut out = vec![];
            while total > self.budget && held.len() > 1 {
                let (h, b) = held.pop_front().expect("more than one");
                total -= b;
                out.push(h);
            }
            out
        };
        // Let go of the evicted groups outside the list's lock (a slot's lock may be held by a
        // worker decoding into it).
        for h in evicted {
            *lock(&self.slots[h]) = None;
        }
        t
    }

    /// How many groups are held now.
    pub fn held(&self) -> usize {
        lock(&self.held).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn groups_are_decoded_once_while_they_fit_and_the_least_recent_goes_first() {
        let decoded = AtomicUsize::new(0);
        let cache = RowGroups::<Vec<u8>>::new(4, 250);
        let get = |g: usize| {
            cache.get(
                g,
                || {
                    decoded.fetch_add(1, Ordering::Relaxed);
                    vec![g as u8; 100]
                },
                |v| v.len(),
            )
        };
        assert_eq!(get(0)[0], 0);
        assert_eq!(get(1)[0], 1);
        assert_eq!(get(0)[0], 0);
        assert_eq!((decoded.load(Ordering::Relaxed), cache.held()), (2, 2));
        // A third group goes over the budget: group 1, used least recently, is let go.
        assert_eq!(get(2)[0], 2);
        assert_eq!(cache.held(), 2);
        get(0);
        assert_eq!(decoded.load(Ordering::Relaxed), 3);
        get(1);
        assert_eq!(decoded.load(Ordering::Relaxed), 4);
        // One group larger than the budget is still kept while it is the only one.
        let small = RowGroups::<Vec<u8>>::new(2, 10);
        small.get(0, || vec![0; 100], |v| v.len());
        assert_eq!(small.held(), 1);
    }

    #[test]
    fn workers_asking_for_one_group_at_once_decode_it_once() {
        let decoded = AtomicUsize::new(0);
        let cache = RowGroups::<usize>::new(1, 1 << 20);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    cache.get(
                        0,
                        || {
                            std::thread::sleep(std::time::Duration::from_millis(20));
                            decoded.fetch_add(1, Ordering::Relaxed)
                        },
                        |_| 8,
                    )
                });
            }
        });
        assert_eq!(decoded.load(Ordering::Relaxed), 1);
    }
}
