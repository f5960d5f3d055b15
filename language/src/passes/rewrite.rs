//! The shared mechanism of the forward rewrites (autocast, conv-bias elimination): rebuild what a
//! root depends on, sources first, each node once (memoised across the roots of a step, so common
//! subgraphs are rewritten once), letting a rule replace a node. Untouched nodes are rebuilt on
//! their new sources; hash-consing returns the same ids where nothing below them changed.

use crate::ir::{Graph, Node, NodeId};
use crate::span::Span;
use std::collections::HashMap;

/// Old node to new node.
pub type Memo = HashMap<NodeId, NodeId>;

/// The node that replaces `root`. `rule(g, old_id, old_node, span, memo)` returns the replacement
/// of a node, or `None` to keep it (on its rewritten sources); `memo` already maps its sources.
pub fn rebuild(
    g: &mut Graph,
    root: NodeId,
    memo: &mut Memo,
    mut rule: impl FnMut(&mut Graph, NodeId, &Node, Span, &Memo) -> Option<NodeId>,
) -> NodeId {
    for old in g.topo(&[root]) {
        if memo.contains_key(&old) {
            continue;
        }
        let node = g.node(old).clone();
        let span = g.span(old);
        // What replaces a value of a `checkpoint` block (the casts autocast puts around a
        // product included) belongs to that block too.
        // So does its `precision` block.
        let (outer, outer_precision) = (g.active_checkpoint, g.active_precision);
        g.active_checkpoint = g.checkpoint_of(old).or(outer);
        g.active_precision = g.precision_of(old).or(outer_precision);
        let new = match rule(g, old, &node, span, memo) {
            Some(n) => n,
            None => {
                let src = node.src.iter().map(|s| memo[s]).collect();
                g.add(Node { src, ..node }, span)
            }
        };
        g.active_checkpoint = outer;
        g.active_precision = outer_precision;
        memo.insert(old, new);
    }
    memo[&root]
}
