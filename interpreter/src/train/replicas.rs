//! What a trainer does as one rank of a data-parallel job (`crate::parallel`): replicas made
//! equal from rank 0, epochs dealt to the ranks, the step's gradients averaged in buckets,
//! logged values averaged, and a check at the end that every replica holds the same parameters.

use super::{err, Trainer};
use crate::pipeline::{Batches, Element};
use crate::runner::Slot;
use crate::runtime::tensor::{Data, Tensor};
use crate::runtime::RuntimeError;
use std::sync::Arc;

/// Rank 0's values of `t` on every rank.
fn broadcast(world: &crate::parallel::World, t: &mut Tensor) {
    match &mut t.data {
        Data::F32(v) => world.broadcast_f32(Arc::make_mut(v).as_mut_slice()),
        Data::F64(v) => world.broadcast_f64(Arc::make_mut(v).as_mut_slice()),
        Data::I64(v) => world.broadcast_i64(Arc::make_mut(v).as_mut_slice()),
        Data::U8(v) => {
            let mut wide: Vec<i64> = v.iter().map(|b| *b as i64).collect();
            world.broadcast_i64(&mut wide);
            *Arc::make_mut(v) = wide.into_iter().map(|b| b as u8).collect();
        }
    }
}

/// Rank `rank` of `size`'s share of an epoch: positions rank, rank + size, ... of the epoch's
/// examples (cut to a multiple of `size`), batched as the pipeline batches; a pipeline that
/// made its batches itself is dealt whole batches the same way.
pub(super) fn shard(batches: Batches, rank: usize, size: usize) -> Batches {
    if size <= 1 {
        return batches;
    }
    let deal = |n: usize| (0..n / size * size).filter(move |i| i % size == rank);
    match batches {
        Batches::Lazy { elems, size: batch, count } => {
            // `batch(n, drop_last: true)` made floor(len / n) batches, otherwise ceil.
            let drop_last = count < elems.len().div_ceil(batch);
            let keep: Vec<Element> = deal(elems.len()).map(|i| elems[i].clone()).collect();
            let count = if drop_last { keep.len() / batch } else { keep.len().div_ceil(batch) };
            Batches::Lazy { elems: keep, size: batch, count }
        }
        Batches::Ready(b) => Batches::Ready(deal(b.len()).map(|i| b[i].clone()).collect()),
        Batches::Stream(plan) => Batches::Stream(std::sync::Arc::new(std::sync::Arc::unwrap_or_clone(plan).shard(rank, size))),
    }
}

/// Run the backward half of a data-parallel step with its gradients averaged across ranks: on
/// the device where the runner can (NCCL; `None`, the averages bound already), otherwise
/// through the host (the buckets' sums, for `bind_averages`).
pub(super) fn run_and_average(
    world: &std::rc::Rc<crate::parallel::World>,
    runner: &mut dyn crate::runner::Runner,
    graph: &dlc_language::ir::Graph,
    st: &super::step::Step,
) -> Result<Option<Vec<Vec<f32>>>, RuntimeError> {
    if runner.average_on_device(world, device_buckets(st))? {
        runner.run(graph, &st.plan, &st.memory)?;
        return Ok(None);
    }
    run_and_sum(world, runner, graph, st).map(Some)
}

/// Run the backward half of a data-parallel step, starting each bucket's all-reduce as soon as
/// the kernel that writes its last gradient has run (`Bucket::ready_after`); returns the
/// buckets' sums once every all-reduce is done.
fn run_and_sum(
    world: &crate::parallel::World,
    runner: &mut dyn crate::runner::Runner,
    graph: &dlc_language::ir::Graph,
    st: &super::step::Step,
) -> Result<Vec<Vec<f32>>, RuntimeError> {
    let sizes: Vec<usize> = st.buckets.iter().map(|b| b.bytes / 4).collect();
    let flat = |b: &dlc_language::passes::buckets::Bucket,
                fetch: &mut dyn FnMut(dlc_language::ir::NodeId) -> Result<Tensor, RuntimeError>| {
        let mut v: Vec<f32> = Vec::with_capacity(b.bytes / 4);
        for &i in &b.grads {
            let g = fetch(st.reduce[i].0)?;
            match &g.data {
                Data::F32(x) => v.extend_from_slice(x),
                _ => v.extend(g.to_f64().into_iter().map(|x| x as f32)),
            }
        }
        Ok::<_, RuntimeError>(v)
    };
    world.sum_buckets_during(&sizes, |start| {
        let mut next = 0;
        runner.run_observed(graph, &st.plan, &st.memory, &mut |i, fetch| {
            while next < st.buckets.len() && st.buckets[next].ready_after <= i {
                start(flat(&st.buckets[next], fetch)?);
                next += 1;
            }
            Ok(())
        })?;
        // (A bucket whose writer was skipped, its outputs known already, starts now.)
        while next < st.buckets.len() {
            start(flat(&st.buckets[next], &mut |n| runner.fetch(graph, n))?);
            next += 1;
        }
        Ok(())
    })
}

/// The step's buckets as the device executor averages them: each gradient of the backward
/// plan with the update plan's input for its average.
fn device_buckets(st: &super::step::Step) -> Vec<crate::runner::DeviceBucket> {
    st.buckets
        .iter()
        .map(|b| crate::runner::DeviceBucket { ready_after: b.ready_after, grads: b.grads.iter().map(|&i| st.reduce[i]).collect() })
        .collect()
}

/// An evaluation's share: every batch goes to one rank (none dropped), round robin.
pub(super) fn eval_share(batches: Vec<Element>, rank: usize, size: usize) -> Vec<Element> {
    batches.into_iter().enumerate().filter(|(i, _)| i % size == rank).map(|(_, b)| b).collect()
}

/// A fingerprint of parameter values: equal replicas give equal fingerprints.
fn fingerprint(ts: &[&Tensor]) -> f64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for t in ts {
        for v in t.to_f64() {
            h ^= v.to_bits();
            h = h.wrapping_mul(0x1000_0000_01b3);
        }
    }
    // 52 bits survive the trip through an f64 sum exactly.
    (h >> 12) as f64
}

impl<'s> Trainer<'s> {
    pub(super) fn parallel(&self) -> bool {
        self.world.size() > 1
    }

    /// Whether steps are compiled in two halves with gradients averaged between them.
    pub(super) fn split_step(&self) -> bool {
        self.parallel() || self.opts.plan_parallel
    }

    /// Make every replica rank 0's: parameters, buffers, optimiser state, gradient sums.
    pub(super) fn broadcast_replicas(&mut self) -> Result<(), RuntimeError> {
        if !self.parallel() {
            return Ok(());
        }
        self.sync_host()?;
        let world = self.world.clone();
        let ids: Vec<u32> = self.params.iter().chain(&self.buffers).map(|p| p.id).collect();
        for id in ids {
            let t = self.store.get_mut(&id).expect("every parameter has a value");
            broadcast(&world, t);
        }
        for st in self.states.iter_mut().flatten().chain(self.grad_sums.iter_mut()) {
            broadcast(&world, st);
        }
        self.resident = false;
        Ok(())
    }

    /// Bind each gradient's average across ranks (the buckets' sums, over the rank count) to
    /// the input the update reads.
    pub(super) fn bind_averages(&mut self, key: &[(crate::DType, Vec<usize>)], sums: Vec<Vec<f32>>) -> Result<(), RuntimeError> {
        let st = &self.steps[key];
        let graph = &self.session.t.graph;
        let w = self.world.size() as f64;
        for (bucket, sum) in st.buckets.iter().zip(sums) {
            let mut at = 0;
            for &i in &bucket.grads {
                let node = graph.node(st.reduce[i].0);
                let shape: Vec<usize> = node.shape.iter().map(|d| d.as_known().unwrap_or(0) as usize).collect();
                let n: usize = shape.iter().product();
                let t = Tensor::from_f64(node.dtype, shape, sum[at..at + n].iter().map(|x| *x as f64 / w));
                at += n;
                self.runner.put(Slot::Input(st.reduce[i].1), &t)?;
            }
        }
        Ok(())
    }

    /// Rank 0's running statistics (batch norm's buffers) on every rank, after each step.
    pub(super) fn broadcast_buffers(&mut self) -> Result<(), RuntimeError> {
        let ids: Vec<u32> = self.buffers.iter().map(|b| b.id).collect();
        for id in ids {
            let mut t = self.runner.take(Slot::Param(id))?;
            broadcast(&self.world, &mut t);
            self.runner.put(Slot::Param(id), &t)?;
        }
        Ok(())
    }

    /// The ranks' mean of each logged value, and whether any rank was asked to stop.
    pub(super) fn agree(&self, logged: &mut [(String, f64)], stop: bool) -> bool {
        if !self.parallel() {
            return stop;
        }
        let mut v: Vec<f64> = logged.iter().map(|l| l.1).collect();
        v.push(stop as u8 as f64);
        self.world.sum_f64(&mut v);
        let w = self.world.size() as f64;
        for (l, s) in logged.iter_mut().zip(&v) {
            l.1 = s / w;
        }
        v.last().copied().unwrap_or(0.0) > 0.0
    }

    /// Every rank must hold the same parameters after the same updates; a difference is a bug
    /// (or a rank fed other data), reported rather than trained on.
    pub(super) fn check_replicas(&mut self) -> Result<(), RuntimeError> {
        if !self.parallel() {
            return Ok(());
        }
        self.sync_host()?;
        let ts: Vec<&Tensor> = self.params.iter().map(|p| &self.store[&p.id]).collect();
        let mine = fingerprint(&ts);
        let mut root = [mine];
        self.world.broadcast_f64(&mut root);
        let mut differing = [(root[0] != mine) as u8 as f64];
        self.world.sum_f64(&mut differing);
        if differing[0] > 0.0 {
            return Err(err(format!(
                "{} of {} ranks hold parameters that differ from rank 0's after training; data-parallel replicas must stay identical",
                differing[0],
                self.world.size()
            )));
        }
        Ok(())
    }
}
