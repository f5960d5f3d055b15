//! The interpreter's integration tests, linked as one binary: the test-profile build is mostly
//! linking, and two dozen binaries each linking the whole runtime cost CI minutes. Each module is
//! what was a test binary of its own; `common` is what the ones driving `dlc` share.

mod common;

mod bn_fold;
mod checkpoint;
mod cli;
mod cli_metrics;
mod custom_step;
mod device;
mod device_arena;
mod explain_dump;
mod explain_gpu;
mod fmt;
mod fusion_props;
mod gradcheck;
mod infer_device;
mod jit;
mod kernels;
mod lsp;
mod optim;
mod parallel;
mod parity;
mod pipeline;
mod precision;
mod records;
mod reporting;
mod runner_conformance;
mod runs;
mod sequences;
mod shards;
mod state_dict;
mod train;
