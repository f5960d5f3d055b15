//! Passes over the graph IR. Each pass is a function of the graph; the graph stays append-only,
//! so a pass adds nodes and returns the ids that replace the ones it rewrote.

pub mod arena;
pub mod autocast;
pub mod autodiff;
pub mod bn_fold;
pub mod buckets;
pub mod conv_bias;
pub mod driver;
pub mod epilogue;
pub mod fusion;
pub mod inline_written;
pub mod invariant;
pub mod layout;
pub mod memory;
pub mod prologue;
pub mod remat;
pub mod rewrite;
pub mod rows;
pub mod sum_factors;
