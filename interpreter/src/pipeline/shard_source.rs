//! The elements of a `shards(files, image: "jpg", label: "cls", ...)` source: WebDataset tar
//! files indexed when the source is opened, each sample read from its shard and decoded when the
//! feed's workers ask for it (runtime/data/shards.rs), as `(image: u8[C, H, W], label: i64[])`.
//! With `on_error: "skip"` a sample that cannot be read is left out of its batch and counted, and
//! each epoch's end warns how many and names the first, as an `images` folder's files are.

use super::source::image_args;
use super::{data_err, str_arg, Elements};
use crate::runtime::data::shards::{ShardSet, ShardSpec};
use crate::runtime::RuntimeError;
use dlc_language::eval::value::Stage;
use dlc_language::eval::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A `shards` source, opened: its patterns expanded and every shard indexed.
pub fn open(root: &Path, src: &Stage) -> Result<Elements, RuntimeError> {
    let files: Vec<PathBuf> = match src.arg("files") {
        Some(Value::Str(s)) => vec![crate::paths::in_program(root, s)],
        Some(Value::Tuple(items)) => {
            items.iter().filter_map(|v| if let Value::Str(s) = v { Some(crate::paths::in_program(root, s)) } else { None }).collect()
        }
        _ => vec![],
    };
    let (size, channels, skip) = image_args(src);
    let ext = |name: &str, default: &str| str_arg(src, name).unwrap_or_else(|| default.to_string()).to_ascii_lowercase();
    let image = ext("image", "jpg").split(';').map(|e| e.trim().trim_start_matches('.').to_string()).filter(|e| !e.is_empty()).collect();
    let label = ext("label", "cls").trim().trim_start_matches('.').to_string();
    let set = ShardSet::open(&files, ShardSpec { image, label, size, channels, skip }).map_err(|e| data_err(e, src.span))?;
    Ok(Elements::Shards { set: Arc::new(set), span: src.span })
}
