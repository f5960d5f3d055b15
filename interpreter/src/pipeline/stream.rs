//! One epoch of a pipeline as a plan that makes any batch on demand, on any thread: the stages
//! after the cached prefix (shuffle, augmentation, `map`, take/skip/split, the final `batch`)
//! become index arrays and per-element work, so batch `b` is its elements read from the
//! prepared prefix, each transformed where it stands, and stacked. Nothing of the epoch is made
//! before its first batch is asked for; the feed (feed.rs) asks on worker threads ahead of the
//! step.
//!
//! The values are those of applying the stages to the whole epoch in order (`apply`): a
//! permutation or slice moves indices, and an element's random draws at an augmentation stage
//! use its position at that stage, as the whole-epoch application does (a test checks the two
//! bit for bit).

use super::sequences::{bucket_groups, Group, Lengths, Padding};
use super::stages::{kept, MapStage};
use super::{int_arg, stack, varies_by_epoch, Augment, Element, Elements};
use crate::runtime::RuntimeError;
use dlc_language::eval::value::Stage;
use dlc_language::eval::Value;
use dlc_language::ir::Graph;
use std::sync::Arc;

/// Work done to each element where it stands.
#[derive(Clone)]
enum Each {
    /// A `map`, compiled once and shared by the workers.
    Map(MapStage),
    /// `random_crop`, `random_flip`, `random_resized_crop`, `color_jitter` (their draws depend
    /// on the element's position).
    Augment(Augment),
    /// `resize` / `center_crop`.
    Geometry(super::geometry::Geometry),
}

/// A per-element stage and, for each position of the epoch, the position the element had when
/// it reached the stage.
#[derive(Clone)]
struct AtStage {
    each: Each,
    position: Vec<u32>,
}

/// One epoch, ready to make batches (see the module's comment).
#[derive(Clone)]
pub struct EpochPlan {
    elems: Elements,
    graph: Arc<Graph>,
    /// For each position, the index of its element in `elems`.
    source: Vec<u32>,
    stages: Vec<AtStage>,
    /// The final `batch`: its size, and how many batches the epoch has.
    size: usize,
    count: usize,
    /// `pad_batch` and `bucket`: how elements are padded, and `pad_batch`'s length.
    padding: Option<(Padding, usize)>,
    /// `bucket`: each batch's positions and padded length (the batches are not runs of `size`).
    groups: Option<Vec<Group>>,
    /// For a `shards` source, each shard's place in the epoch's order (a buffered shuffle's
    /// seeded order, else the files'): whole shards are dealt to ranks by it (deal.rs).
    shard_places: Option<Vec<u32>>,
}

/// Whether the stages after the cached prefix can stream: per-element work and index moves,
/// ending in `batch`, `pad_batch` or `bucket` (then only `prefetch`).
pub fn streams(rest: &[Stage]) -> bool {
    let mut kinds: Vec<&str> = rest.iter().map(|s| s.kind).collect();
    while kinds.last() == Some(&"prefetch") {
        kinds.pop();
    }
    matches!(kinds.last(), Some(&("batch" | "pad_batch" | "bucket")))
        && kinds[..kinds.len() - 1].iter().all(|k| {
            matches!(
                *k,
                "map"
                    | "shuffle"
                    | "take"
                    | "skip"
                    | "split"
                    | "random_crop"
                    | "random_flip"
                    | "random_resized_crop"
                    | "color_jitter"
                    | "resize"
                    | "center_crop"
            )
        })
}

/// Keep the positions `keep` picks, in its order, in every index array.
fn select(source: &mut Vec<u32>, stages: &mut [AtStage], keep: &[usize]) {
    *source = keep.iter().map(|i| source[*i]).collect();
    for s in stages {
        s.position = keep.iter().map(|i| s.position[*i]).collect();
    }
}

impl EpochPlan {
    /// The plan of epoch `epoch` for `rest` (which `streams`), over the prepared `elems`.
    /// A `bucket` stage's lengths are read from `lengths` where an earlier epoch measured them.
    pub fn new(rest: &[Stage], elems: Elements, graph: Arc<Graph>, epoch: u64, lengths: &Lengths) -> Result<EpochPlan, RuntimeError> {
        let mut source: Vec<u32> = (0..elems.len() as u32).collect();
        let mut stages: Vec<AtStage> = vec![];
        let (mut size, mut drop_last) = (1, false);
        let (mut padding, mut bucket) = (None, None);
        let mut shard_places = (elems.shard_count() > 0).then(|| (0..elems.shard_count() as u32).collect::<Vec<_>>());
        for st in rest {
            let n = source.len();
            match st.kind {
                "map" => stages.push(AtStage { each: Each::Map(MapStage::new(st, &graph)?), position: (0..n as u32).collect() }),
                "resize" | "center_crop" => {
                    stages.push(AtStage { each: Each::Geometry(super::geometry::Geometry::of(st)), position: (0..n as u32).collect() });
                }
                "random_crop" | "random_flip" | "random_resized_crop" | "color_jitter" => {
                    stages.push(AtStage { each: Each::Augment(Augment::of(st, epoch)), position: (0..n as u32).collect() });
                }
                "shuffle" => {
                    let of = shards_of(&elems, &source);
                    let shuffled = super::shuffle_buffer::order(st, epoch, n, of.as_deref().map(|of| (of, elems.shard_count())));
                    shard_places = shuffled.places.or(shard_places);
                    select(&mut source, &mut stages, &shuffled.order)
                }
                "take" | "skip" | "split" => select(&mut source, &mut stages, &kept(st, n).collect::<Vec<_>>()),
                "batch" | "pad_batch" => {
                    size = int_arg(st, "size", 1).max(1) as usize;
                    drop_last = matches!(st.arg("drop_last"), Some(Value::Bool(true)));
                    if st.kind == "pad_batch" {
                        padding = Some((Padding::of(st, &graph), int_arg(st, "length", 1).max(1) as usize));
                    }
                }
                "bucket" => {
                    padding = Some((Padding::of(st, &graph), 0));
                    bucket = Some(st);
                }
                "prefetch" => {}
                other => return Err(RuntimeError::Unsupported(format!("the `{other}` stage does not stream"))),
            }
        }
        let count = if drop_last { source.len() / size } else { source.len().div_ceil(size) };
        let mut plan = EpochPlan { elems, graph, source, stages, size, count, padding, groups: None, shard_places };
        if let Some(st) = bucket {
            // The buckets need every element's length: in the first epoch each is made once to
            // measure it (read and transformed, on all cores), and again when its batch is.
            let padding = &plan.padding.as_ref().expect("set with the bucket").0;
            let lengths = lengths.of(&plan.source, |p| Ok(plan.element(p)?.map_or(0, |e| padding.length(&e))))?;
            let groups = bucket_groups(st, &lengths, epoch);
            plan.count = groups.len();
            plan.groups = Some(groups);
        }
        Ok(plan)
    }

    /// How many batches the epoch has.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Under data parallelism, rank `rank` of `ranks` keeps the positions dealt to it (position
    /// i to rank i mod ranks, the last incomplete round dropped; a `shards` source's whole
    /// shards where there are enough, deal.rs) and batches them alone.
    pub fn shard(mut self, rank: usize, ranks: usize) -> EpochPlan {
        if ranks <= 1 {
            return self;
        }
        if let Some(groups) = self.groups.take() {
            // `bucket`'s batches are dealt whole: batch i to rank i mod ranks, the last
            // incomplete round dropped, so every rank takes as many steps.
            let keep: Vec<Group> = groups
                .into_iter()
                .enumerate()
                .take(self.count / ranks * ranks)
                .filter(|(i, _)| i % ranks == rank)
                .map(|(_, g)| g)
                .collect();
            self.count = keep.len();
            self.groups = Some(keep);
            return self;
        }
        let n = self.source.len();
        let drop_last = self.count < n.div_ceil(self.size);
        let whole = match (&self.shard_places, shards_of(&self.elems, &self.source)) {
            (Some(places), Some(of)) => super::deal::whole_shards(&of, places, rank, ranks),
            _ => None,
        };
        let keep: Vec<usize> = whole.unwrap_or_else(|| (0..n / ranks * ranks).filter(|i| i % ranks == rank).collect());
        select(&mut self.source, &mut self.stages, &keep);
        let kept = self.source.len();
        self.count = if drop_last { kept / self.size } else { kept.div_ceil(self.size) };
        self
    }

    /// The element at `position`: read from the prefix, then each stage's work where it stood;
    /// `None` when the source skipped it (it could not be read).
    fn element(&self, position: usize) -> Result<Option<Element>, RuntimeError> {
        let Some(mut e) = self.elems.get_or_skip(self.source[position] as usize)? else { return Ok(None) };
        for s in &self.stages {
            let at = s.position[position] as usize;
            e = match &s.each {
                Each::Augment(aug) => aug.apply(at, e),
                Each::Geometry(g) => g.apply(e)?,
                Each::Map(f) => f.run(&self.graph, e)?,
            };
        }
        Ok(Some(e))
    }

    /// Batch `b` of the epoch (0-based), stacked; smaller by the elements the source skipped.
    pub fn batch(&self, b: usize) -> Result<Element, RuntimeError> {
        let (positions, length): (Vec<usize>, usize) = match (&self.groups, &self.padding) {
            (Some(groups), _) => (groups[b].positions.iter().map(|&p| p as usize).collect(), groups[b].length),
            (None, padding) => {
                ((b * self.size..((b + 1) * self.size).min(self.source.len())).collect(), padding.as_ref().map_or(0, |p| p.1))
            }
        };
        if self.stages.is_empty() && self.padding.is_none() {
            // Elements the source holds, with no stage to apply: stacked from where they are
            // (a copy of each element's values and no more; cloning every element first took
            // 1.7-2.4% of the cycles of the MNIST MLP bench step at batch 1024, on a core the
            // step wants).
            let held: Option<Vec<&Element>> = positions.iter().map(|&p| self.elems.held(self.source[p] as usize)).collect();
            if let Some(held) = held.filter(|h| !h.is_empty()) {
                return Ok(stack(&held));
            }
        }
        let mut elems: Vec<Element> =
            positions.into_iter().map(|p| self.element(p)).collect::<Result<Vec<_>, _>>()?.into_iter().flatten().collect();
        if let Some((padding, _)) = &self.padding {
            elems = elems.into_iter().map(|e| padding.pad(e, length)).collect();
        }
        if elems.is_empty() {
            // A step needs at least one element: say so, with what the source could not read.
            let first = self.elems.skipped().1.map(|e| format!("; the first element left out so far: {e}")).unwrap_or_default();
            return Err(RuntimeError::Unsupported(format!(
                "every element of batch {} was left out by `on_error: \"skip\"` (a batch needs one readable element: fix or remove those records, or make the batches larger){first}",
                b + 1
            )));
        }
        Ok(stack(&elems))
    }
}

/// The shard of the element at each position, for a `shards` source.
fn shards_of(elems: &Elements, source: &[u32]) -> Option<Vec<u32>> {
    (elems.shard_count() > 0).then(|| source.iter().map(|&i| elems.shard_of(i as usize).expect("a sharded source")).collect())
}

/// Where the epoch-dependent stages start: the prefix before is the same every epoch.
pub fn prefix_len(stages: &[Stage]) -> usize {
    stages.iter().take_while(|st| !varies_by_epoch(st.kind)).count()
}
