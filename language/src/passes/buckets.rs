//! Gradient buckets, as DistributedDataParallel forms them: gradients in the order backward
//! produces them, packed into buckets of at most `cap` bytes (`data_parallel(bucket_mb:)`, PyTorch's default 25 MB; a
//! gradient larger than the cap gets a bucket of its own). Each bucket is one all-reduce; the
//! position in the plan of the kernel that writes a bucket's last gradient is where its
//! all-reduce can start, and the kernels after it are what it can overlap with.

use super::fusion::Plan;
use crate::ir::NodeId;

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Bucket {
    /// Indices into the step's gradient list, in the order they are produced.
    pub grads: Vec<usize>,
    pub bytes: usize,
    /// The plan kernel that writes the bucket's last gradient.
    pub ready_after: usize,
}

/// The kernel of `plan` that writes `n` (its position), if any.
fn writer(plan: &Plan, n: NodeId) -> Option<usize> {
    plan.kernels.iter().position(|k| k.writes().contains(&n))
}

/// Buckets for `grads` (node, bytes), in the order `plan` writes them.
pub fn plan_buckets(plan: &Plan, grads: &[(NodeId, usize)], cap: usize) -> Vec<Bucket> {
    let mut order: Vec<(usize, usize)> = grads.iter().enumerate().map(|(i, (n, _))| (writer(plan, *n).unwrap_or(usize::MAX), i)).collect();
    order.sort();
    let mut out: Vec<Bucket> = vec![];
    for (pos, i) in order {
        let bytes = grads[i].1;
        match out.last_mut() {
            Some(b) if b.bytes + bytes <= cap => {
                b.grads.push(i);
                b.bytes += bytes;
                b.ready_after = b.ready_after.max(pos);
            }
            _ => out.push(Bucket { grads: vec![i], bytes, ready_after: pos }),
        }
    }
    out
}
