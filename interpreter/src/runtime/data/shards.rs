//! WebDataset shards: tar files whose members are grouped into samples, a sample being a run of
//! consecutive members that share a key (the member's path up to the first dot of its file name:
//! `000123.jpg` and `000123.cls` are sample `000123`'s image and label). Each shard is opened once
//! and indexed from its headers alone (the `tar` crate seeking past each member's data), in
//! parallel; a sample is then read by seeking to its two members, on the data feed's workers, so
//! memory is the index's. The image member is decoded as an `images` file is
//! (`images::image_tensor`), the label member holds a class index as decimal text.
//!
//! Bad data never panics: a shard cut off inside a member (or a header) keeps its intact samples
//! and the cut-off one becomes an error; a sample without its image or label member, a label that
//! is not a class index and an image that does not decode are errors when the sample is read. Each
//! error names the shard file and the member; with `on_error: "skip"` the sample is left out and
//! counted instead, as an `images` folder's unreadable files are.

use super::{err, glob, images, DataError};
use crate::runtime::tensor::Tensor;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// What a sample is read from and how its image is made.
#[derive(Clone, Debug)]
pub struct ShardSpec {
    /// Extensions of the image member, lower case (`jpg`; `image: "jpg;png"` gives two).
    pub image: Vec<String>,
    /// Extension of the label member, lower case (`cls`).
    pub label: String,
    pub size: Option<(usize, usize)>,
    pub channels: usize,
    /// `on_error: "skip"`: a sample that cannot be read is left out and counted.
    pub skip: bool,
}

/// Where a member's data lies in its shard.
#[derive(Clone, Copy, Debug)]
struct Member {
    offset: u64,
    size: u64,
}

/// One sample of the index. Its key and its members' extensions (as spelled in the shard) are
/// stored one after the other in the set's `names`, from `name`.
#[derive(Debug)]
struct Sample {
    shard: u32,
    name: usize,
    lens: [u32; 3],
    image: Option<Member>,
    label: Option<Member>,
    /// Why it cannot be read, found while indexing (a cut-off member, a member twice): an index
    /// into the set's `problems`.
    problem: Option<u32>,
}

/// A sample being gathered while a shard is indexed.
#[derive(Default)]
struct Pending {
    key: String,
    image: Option<(Member, String)>,
    label: Option<(Member, String)>,
    problem: Option<String>,
}

/// One shard's samples, its names and its problems, before the shards are put together.
#[derive(Default)]
struct ShardIndex {
    samples: Vec<Sample>,
    names: String,
    problems: Vec<String>,
}

impl ShardIndex {
    fn finish(&mut self, p: Pending, shard: u32) {
        let name = self.names.len();
        let image_ext = p.image.as_ref().map_or("", |(_, e)| e.as_str());
        let label_ext = p.label.as_ref().map_or("", |(_, e)| e.as_str());
        for s in [p.key.as_str(), image_ext, label_ext] {
            self.names.push_str(s);
        }
        let lens = [p.key.len() as u32, image_ext.len() as u32, label_ext.len() as u32];
        let problem = p.problem.map(|d| {
            self.problems.push(d);
            (self.problems.len() - 1) as u32
        });
        let (image, label) = (p.image.map(|(m, _)| m), p.label.map(|(m, _)| m));
        self.samples.push(Sample { shard, name, lens, image, label, problem });
    }
}

/// The key and the extension of a member's path: up to and after the first dot of its file name
/// (WebDataset's rule); `None` for a name without one (such members belong to no sample).
fn split_name(path: &str) -> Option<(&str, &str)> {
    let base = path.rfind('/').map_or(0, |i| i + 1);
    let dot = base + path[base..].find('.')?;
    (dot > base).then(|| (&path[..dot], &path[dot + 1..]))
}

/// Index one shard's samples from its headers.
fn index_shard(path: &Path, shard: u32, spec: &ShardSpec) -> Result<ShardIndex, DataError> {
    let file = File::open(path).map_err(|e| err(path, format!("cannot read: {e}")))?;
    let len = file.metadata().map_err(|e| err(path, format!("cannot read: {e}")))?.len();
    let mut archive = tar::Archive::new(file);
    let entries = archive.entries_with_seek().map_err(|e| err(path, format!("cannot read as a tar file: {e}")))?;
    let mut index = ShardIndex::default();
    let mut pending: Option<Pending> = None;
    let mut last: Option<String> = None;
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                // The samples before stay; what follows cannot be found. A sample of its own says so.
                let after = last.as_ref().map_or_else(|| "at the start".to_string(), |m| format!("after member {m}"));
                if let Some(p) = pending.take() {
                    index.finish(p, shard);
                }
                let problem = format!("the tar header {after} cannot be read ({e}): the shard is cut off or corrupt");
                index.finish(Pending { key: String::new(), problem: Some(problem), ..Default::default() }, shard);
                return Ok(index);
            }
        };
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let Some((key, ext)) = split_name(&name) else { continue };
        if pending.as_ref().is_some_and(|p| p.key != key) {
            index.finish(pending.take().expect("checked"), shard);
        }
        let p = pending.get_or_insert_with(|| Pending { key: key.to_string(), ..Default::default() });
        let member = Member { offset: entry.raw_file_position(), size: entry.size() };
        if member.offset.saturating_add(member.size) > len {
            let problem = format!(
                "member {name} is cut off: its {} bytes start at byte {} and the file ends at byte {len} (a truncated shard)",
                member.size, member.offset
            );
            p.problem.get_or_insert(problem);
            break;
        }
        let lower = ext.to_ascii_lowercase();
        let slot = if spec.image.contains(&lower) {
            &mut p.image
        } else if lower == spec.label {
            &mut p.label
        } else {
            last = Some(name);
            continue;
        };
        if slot.is_some() {
            p.problem.get_or_insert(format!("member {name} is the second `{lower}` member of sample {key}"));
        } else {
            *slot = Some((member, ext.to_string()));
        }
        last = Some(name);
    }
    if let Some(p) = pending {
        index.finish(p, shard);
    }
    Ok(index)
}

/// The samples of a list of shards, indexed, read one at a time.
pub struct ShardSet {
    /// The shard files, in reading order (each pattern's matches sorted).
    pub files: Vec<PathBuf>,
    samples: Vec<Sample>,
    names: String,
    problems: Vec<String>,
    spec: ShardSpec,
    /// Samples left out so far (`on_error: "skip"`), and the first one's error.
    pub skipped: super::Skipped,
}

impl ShardSet {
    /// Expand `patterns` (paths or `*`/`?` patterns) and index every shard.
    pub fn open(patterns: &[PathBuf], spec: ShardSpec) -> Result<ShardSet, DataError> {
        let mut files = vec![];
        for p in patterns {
            files.extend(glob::expand(p)?);
        }
        let Some(first) = files.first().cloned() else {
            return Err(err(Path::new(""), "`shards` was given no files"));
        };
        use rayon::prelude::*;
        let indexes: Vec<ShardIndex> =
            files.par_iter().enumerate().map(|(k, f)| index_shard(f, k as u32, &spec)).collect::<Result<_, _>>()?;
        let (mut samples, mut names, mut problems) = (vec![], String::new(), vec![]);
        for index in indexes {
            let (name_base, problem_base) = (names.len(), problems.len() as u32);
            samples.extend(index.samples.into_iter().map(|s| Sample {
                name: s.name + name_base,
                problem: s.problem.map(|p| p + problem_base),
                ..s
            }));
            names.push_str(&index.names);
            problems.extend(index.problems);
        }
        if samples.is_empty() {
            let others = if files.len() > 1 { format!(", nor do the other {} shards", files.len() - 1) } else { String::new() };
            let detail = format!("holds no samples{others} (tar members named KEY.{} and KEY.{})", spec.image[0], spec.label);
            return Err(err(&first, detail));
        }
        Ok(ShardSet { files, samples, names, problems, spec, skipped: Default::default() })
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Whether unreadable samples are left out (`on_error: "skip"`).
    pub fn skips(&self) -> bool {
        self.spec.skip
    }

    /// The shard sample `i` is in (an index into `files`).
    pub fn shard_of(&self, i: usize) -> u32 {
        self.samples[i].shard
    }

    /// Sample `i`'s key and its image and label members' extensions.
    fn names(&self, s: &Sample) -> [&str; 3] {
        let [k, i, l] = s.lens.map(|n| n as usize);
        let at = s.name;
        [&self.names[at..at + k], &self.names[at + k..at + k + i], &self.names[at + k + i..at + k + i + l]]
    }

    /// Sample `i`: its image as `u8[channels, h, w]` and its label.
    pub fn get(&self, i: usize) -> Result<(Tensor, i64), DataError> {
        let s = &self.samples[i];
        let path = &self.files[s.shard as usize];
        if let Some(p) = s.problem {
            return Err(err(path, self.problems[p as usize].clone()));
        }
        let [key, image_ext, label_ext] = self.names(s);
        let Some(image) = s.image else {
            return Err(err(path, format!("sample {key} has no {} member", self.spec.image.join(" or "))));
        };
        let Some(label) = s.label else {
            return Err(err(path, format!("sample {key} has no {} member", self.spec.label)));
        };
        let (image_name, label_name) = (format!("{key}.{image_ext}"), format!("{key}.{label_ext}"));
        let mut file = File::open(path).map_err(|e| err(path, format!("cannot read: {e}")))?;
        let text = read_member(&mut file, path, label, &label_name)?;
        let label = parse_label(&text).map_err(|d| err(path, format!("member {label_name}: {d}")))?;
        let bytes = read_member(&mut file, path, image, &image_name)?;
        let tensor = images::image_tensor(path, &bytes, self.spec.size, self.spec.channels)
            .map_err(|e| err(path, format!("member {image_name}: {}", e.detail)))?;
        Ok((tensor, label))
    }
}

/// A member's bytes.
fn read_member(file: &mut File, path: &Path, m: Member, name: &str) -> Result<Vec<u8>, DataError> {
    let size = usize::try_from(m.size).map_err(|_| err(path, format!("member {name} is too large to read ({} bytes)", m.size)))?;
    let mut bytes = vec![0u8; size];
    file.seek(SeekFrom::Start(m.offset))
        .and_then(|_| file.read_exact(&mut bytes))
        .map_err(|e| err(path, format!("member {name} cannot be read ({e}): was the shard cut off since it was indexed?")))?;
    Ok(bytes)
}

/// A label member's class index: decimal text, surrounding white space ignored.
fn parse_label(bytes: &[u8]) -> Result<i64, String> {
    let text = String::from_utf8_lossy(bytes);
    let t = text.trim();
    match t.parse::<i64>() {
        Ok(v) if v >= 0 => Ok(v),
        _ => {
            let shown: String = t.chars().take(40).collect();
            let more = if t.chars().count() > 40 { "..." } else { "" };
            Err(format!("the label {:?} is not a class index (a non-negative integer as text)", shown + more))
        }
    }
}

#[cfg(test)]
#[path = "shards_tests.rs"]
mod tests;
