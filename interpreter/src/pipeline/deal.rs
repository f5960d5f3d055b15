//! Under data parallelism, an epoch of a `shards` source dealt to the ranks by whole shards, as
//! WebDataset's `split_by_node` deals them: the shard at place k of the epoch's order (a buffered
//! shuffle's seeded order, else the files' order) goes to rank k mod W, so a rank reads only its
//! own shards' files. Each rank keeps the positions of its shards, in the epoch's order, cut to
//! the count of the rank with fewest, so that every rank runs the same number of steps (shards of
//! equal size, a multiple of W of them, lose nothing). With fewer shards than ranks, or a rank
//! left with nothing, elements are dealt instead (`EpochPlan::shard`).

/// The positions rank `rank` of `ranks` keeps; `of` is the shard of each position, `places` each
/// shard's place in the epoch's order. `None` when whole shards cannot be dealt.
pub fn whole_shards(of: &[u32], places: &[u32], rank: usize, ranks: usize) -> Option<Vec<usize>> {
    if ranks <= 1 || places.len() < ranks {
        return None;
    }
    let owner = |p: usize| places[of[p] as usize] as usize % ranks;
    let mut counts = vec![0usize; ranks];
    for p in 0..of.len() {
        counts[owner(p)] += 1;
    }
    let fewest = counts.iter().copied().min().unwrap_or(0);
    if fewest == 0 {
        return None;
    }
    Some((0..of.len()).filter(|&p| owner(p) == rank).take(fewest).collect())
}

#[cfg(test)]
mod tests {
    use super::whole_shards;

    #[test]
    fn ranks_get_whole_shards_in_the_epochs_order_cut_to_the_fewest() {
        // Four shards of 3, 3, 3 and 2 positions, read in the order 2, 0, 3, 1.
        let of = [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3];
        let places = [1, 3, 0, 2];
        // Rank 0 has places 0 and 2 (shards 2 and 3: five positions), rank 1 places 1 and 3
        // (shards 0 and 1: six), cut to five.
        assert_eq!(whole_shards(&of, &places, 0, 2), Some(vec![6, 7, 8, 9, 10]));
        assert_eq!(whole_shards(&of, &places, 1, 2), Some(vec![0, 1, 2, 3, 4]));
        // Fewer shards than ranks: elements are dealt.
        assert_eq!(whole_shards(&of, &places, 0, 5), None);
        assert_eq!(whole_shards(&of, &places, 0, 1), None);
        // A rank whose shards hold none of the epoch's positions (after a `take`): elements.
        assert_eq!(whole_shards(&[0, 0, 2], &[0, 1, 2, 3], 1, 2), None);
    }
}
