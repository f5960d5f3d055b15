//! `shuffle(seed: s, buffer: n)`: a stream shuffled through a buffer of n elements, as WebDataset
//! and tf.data shuffle data too large to permute. The buffer takes the first n elements; each next
//! element out is drawn uniformly from it and its slot taken by the next element in; once the
//! stream is through, the buffer empties in random order. So an element leaves at most n - 1
//! places before where it came in, and a reader of the stream reads near where it last read. For
//! a `shards` source the stream is first its shards in a seeded order, a new one each epoch (each
//! shard's elements in their order), and the buffer mixes neighbouring shards.
//!
//! Every draw is the counter-based generator's at (seed, epoch, count): the order is a pure
//! function of (seed, epoch), computed as indices when the epoch starts, so a resumed run starts
//! at its batch in the same order. Without `buffer` the whole epoch is permuted
//! (`stages::shuffle_order`).

use super::int_arg;
use super::stages::{epoch_stream, seeded_permutation, shuffle_order};
use crate::runtime::rng;
use dlc_language::eval::value::Stage;

/// Salts that make the shards' order and the buffer's draws two streams of one (seed, epoch).
const SHARD_ORDER: u64 = 0x5348_4152_4453_0001;
const BUFFER_DRAWS: u64 = 0x4255_4646_4552_0002;

/// The order a `shuffle` gives `n` positions (position k takes element `order[k]`), and, when a
/// buffered shuffle ordered shards, each shard's place in the epoch's order.
pub struct Shuffled {
    pub order: Vec<usize>,
    pub places: Option<Vec<u32>>,
}

/// The order of `stage` (a `shuffle`) in `epoch` over `n` positions; `shards` is the shard of
/// each position and how many shards the source has, for a `shards` source.
pub fn order(stage: &Stage, epoch: u64, n: usize, shards: Option<(&[u32], usize)>) -> Shuffled {
    match stage.arg("buffer").and_then(|v| v.as_int()) {
        None => Shuffled { order: shuffle_order(stage, epoch, n), places: None },
        Some(buffer) => buffered(int_arg(stage, "seed", 0), epoch, buffer.max(1) as usize, n, shards),
    }
}

/// The buffered order: the shards' seeded order (when there are shards), then the buffer.
pub fn buffered(seed: i64, epoch: u64, buffer: usize, n: usize, shards: Option<(&[u32], usize)>) -> Shuffled {
    let stream = epoch_stream(seed, epoch);
    let mut positions: Vec<usize> = (0..n).collect();
    let places = shards.map(|(of, count)| {
        let places = shard_places(stream ^ SHARD_ORDER, count);
        // Stable: each shard's positions keep their order.
        positions.sort_by_key(|&p| places[of[p] as usize]);
        places
    });
    Shuffled { order: through_buffer(&positions, buffer, stream ^ BUFFER_DRAWS), places }
}

/// Each of `count` shards' place in a seeded order.
fn shard_places(stream: u64, count: usize) -> Vec<u32> {
    let mut places = vec![0u32; count];
    for (k, s) in seeded_permutation(stream, count).into_iter().enumerate() {
        places[s] = k as u32;
    }
    places
}

/// `stream` through a shuffle buffer of `size` elements.
fn through_buffer(stream: &[usize], size: usize, seed: u64) -> Vec<usize> {
    let mut buf: Vec<usize> = stream.iter().take(size).copied().collect();
    let mut next = buf.len();
    let mut out = Vec::with_capacity(stream.len());
    let mut draw = 0u64;
    while !buf.is_empty() {
        let j = ((rng::uniform(seed, draw) * buf.len() as f64) as usize).min(buf.len() - 1);
        draw += 1;
        out.push(buf[j]);
        if next < stream.len() {
            buf[j] = stream[next];
            next += 1;
        } else {
            buf.swap_remove(j);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_permutation(order: &[usize], n: usize) -> bool {
        let mut seen = vec![false; n];
        order.len() == n && order.iter().all(|&i| i < n && !std::mem::replace(&mut seen[i], true))
    }

    #[test]
    fn a_buffer_shuffles_locally_and_by_seed_and_epoch_only() {
        let a = buffered(3, 0, 16, 1000, None).order;
        assert!(is_permutation(&a, 1000));
        assert_eq!(a, buffered(3, 0, 16, 1000, None).order, "a pure function of (seed, epoch)");
        assert_ne!(a, buffered(3, 1, 16, 1000, None).order, "a new order each epoch");
        assert_ne!(a, buffered(4, 0, 16, 1000, None).order, "and each seed");
        assert_ne!(a, (0..1000).collect::<Vec<_>>());
        // Element e comes out no earlier than `buffer` places before where it went in.
        assert!(a.iter().enumerate().all(|(k, &e)| e < k + 16), "out of a buffer of 16");
        assert!(a.iter().enumerate().any(|(k, &e)| e + 16 < k), "some wait long in the buffer");
        // A buffer of one is the stream; one as large as the epoch a full shuffle.
        assert_eq!(buffered(3, 0, 1, 50, None).order, (0..50).collect::<Vec<_>>());
        assert!(is_permutation(&buffered(3, 0, 5000, 1000, None).order, 1000));
        assert!(buffered(3, 0, 4, 0, None).order.is_empty());
    }

    #[test]
    fn shards_are_read_in_a_seeded_order_each_epoch() {
        // Eight shards of 10 positions, the shard of each position.
        let of: Vec<u32> = (0..80).map(|p| p / 10).collect();
        let shard_runs = |epoch: u64| {
            let s = buffered(9, epoch, 1, 80, Some((&of, 8)));
            let places = s.places.expect("places");
            // With a buffer of one, the stream itself: whole shards in place order, each in order.
            let mut want: Vec<usize> = (0..80).collect();
            want.sort_by_key(|&p| places[of[p] as usize]);
            assert_eq!(s.order, want);
            s.order.chunks(10).map(|c| c[0] / 10).collect::<Vec<_>>()
        };
        let (first, second) = (shard_runs(0), shard_runs(1));
        assert_ne!(first, second, "another shard order next epoch");
        assert_ne!(first, (0..8).collect::<Vec<_>>());
        assert_eq!(first, shard_runs(0));
        // Through a buffer of 4: local, whole-epoch permutation.
        let s = buffered(9, 0, 4, 80, Some((&of, 8)));
        assert!(is_permutation(&s.order, 80));
    }
}
