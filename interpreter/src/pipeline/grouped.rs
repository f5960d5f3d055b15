//! A whole epoch's elements with the shard each came from, when a `shards` source is read whole
//! (a pipeline that does not stream; `pipeline::run`): the shards are carried through the stages
//! that move elements, so that a buffered `shuffle` reads the shards in its seeded order here as
//! it does when the epoch streams (stream.rs), and both give the same values. Elements of other
//! sources carry no shards, and their stages are `apply`'s.

use super::stages::kept;
use super::{apply, read_source, shuffle_buffer, Element, Elements};
use crate::exec::Executor;
use crate::runtime::RuntimeError;
use dlc_language::eval::value::Stage;
use dlc_language::ir::Graph;
use std::path::Path;
use std::sync::Arc;

pub struct Grouped {
    pub elems: Vec<Element>,
    /// The shard of each element, and how many shards the source has.
    pub shards: Option<(Vec<u32>, usize)>,
}

/// A source's elements, read whole, with their shards when it has them.
/// Also what was left out because it could not be read (`on_error: "skip"`): how many, and the
/// first one's error.
pub fn read(root: &Path, src: &Stage, graph: &Graph, exec: &mut Executor) -> Result<(Grouped, Skips), RuntimeError> {
    match super::source::opened(root, src)? {
        Some(elems) => Ok((of(&elems)?, elems.skipped())),
        None => Ok((Grouped { elems: read_source(root, src, graph, exec)?, shards: None }, (0, None))),
    }
}

/// Elements left out because they could not be read, and the first one's error.
pub type Skips = (usize, Option<String>);

/// Every element of `elems` but those skipped, with their shards when they have them.
pub fn of(elems: &Elements) -> Result<Grouped, RuntimeError> {
    let count = elems.shard_count();
    if count == 0 {
        return Ok(Grouped { elems: elems.all()?, shards: None });
    }
    let (mut kept, mut of) = (vec![], vec![]);
    for i in 0..elems.len() {
        if let Some(e) = elems.get_or_skip(i)? {
            kept.push(e);
            of.push(elems.shard_of(i).expect("a sharded source"));
        }
    }
    Ok(Grouped { elems: kept, shards: Some((of, count)) })
}

/// `v` in `order` (a permutation of its indices).
pub(super) fn permute<T>(v: Vec<T>, order: &[usize]) -> Vec<T> {
    let mut slots: Vec<Option<T>> = v.into_iter().map(Some).collect();
    order.iter().map(|&i| slots[i].take().expect("a permutation takes each element once")).collect()
}

impl Grouped {
    /// Apply one stage (as `apply`), moving the shards with the elements.
    pub fn apply(self, stage: &Stage, graph: &Graph, epoch: u64) -> Result<Grouped, RuntimeError> {
        let Grouped { elems, shards } = self;
        let Some((of, count)) = shards else {
            return Ok(Grouped { elems: apply(stage, elems, graph, epoch)?, shards: None });
        };
        let n = elems.len();
        Ok(match stage.kind {
            "shuffle" => {
                let order = shuffle_buffer::order(stage, epoch, n, Some((&of, count))).order;
                Grouped { shards: Some((order.iter().map(|&i| of[i]).collect(), count)), elems: permute(elems, &order) }
            }
            "take" | "skip" | "split" => {
                let range = kept(stage, n);
                Grouped { elems: apply(stage, elems, graph, epoch)?, shards: Some((of[range].to_vec(), count)) }
            }
            // Element by element, in place: the shards stay where they are.
            "map" | "prefetch" | "resize" | "center_crop" | "random_crop" | "random_flip" | "random_resized_crop" | "color_jitter" => {
                Grouped { elems: apply(stage, elems, graph, epoch)?, shards: Some((of, count)) }
            }
            // `batch`: an element is no longer one sample.
            _ => Grouped { elems: apply(stage, elems, graph, epoch)?, shards: None },
        })
    }

    /// The elements as a prepared prefix (run once, kept for the next epochs).
    pub fn into_elements(self) -> Elements {
        match self.shards {
            Some((of, count)) => Elements::Sharded { elems: Arc::new(self.elems), shards: Arc::new(of), count },
            None => Elements::Memory(Arc::new(self.elems)),
        }
    }
}
