//! WebDataset shards from a folder of class folders (`DIR/CLASS/IMAGE.jpg`, torchvision's
//! `ImageFolder` layout, read as `images(dir)` reads it): tar files `OUT/PREFIX-000000.tar`, ...
//! of N samples each, a sample being the image file's bytes as they are (`KEY.jpg`, a `.jpeg`
//! file's too, or `KEY.png`) and its class index as text (`KEY.cls`), KEY the sample's number;
//! and `OUT/classes.txt`, the class names in label order. What `shards("OUT/PREFIX-*.tar",
//! image: "jpg;png")` reads, and what WebDataset reads beside dlc.
//!
//! `cargo run --release -p dlc --example shards -- DIR OUT [--per-shard N] [--prefix P]
//! [--seed S | --in-order]` writes N samples a shard (1000 without), named P (`train`), in an
//! order shuffled by seed S (0), as WebDataset's writers shuffle: a shard is read in order, and a
//! shuffle buffer only mixes neighbours, so shards in class order would give batches of one
//! class; `--in-order` keeps the folder's order. For example
//! `-- examples/data/cifar-10-jpeg/train /tmp/cifar-shards --per-shard 250`.

use dlc::runtime::data::images::ImageFolder;
use std::path::{Path, PathBuf};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(dir), Some(out)) = (args.first().map(PathBuf::from), args.get(1).map(PathBuf::from)) else {
        eprintln!("usage: shards DIR OUT [--per-shard N] [--prefix P] [--seed S | --in-order]");
        std::process::exit(2);
    };
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let number = |name: &str, default: u64| flag(name).map_or(default, |v| v.parse().expect("a number"));
    let per_shard = number("--per-shard", 1000).max(1) as usize;
    let prefix = flag("--prefix").unwrap_or_else(|| "train".into());
    let folder = ImageFolder::open(&dir, None, 3, false).unwrap_or_else(|e| panic!("{e}"));
    let mut files = folder.files.clone();
    if !args.iter().any(|a| a == "--in-order") {
        shuffle(&mut files, number("--seed", 0));
    }
    std::fs::create_dir_all(&out).expect("the output folder");
    std::fs::write(out.join("classes.txt"), folder.classes.join("\n") + "\n").expect("classes.txt");
    let width = files.len().to_string().len().max(6);
    for (k, chunk) in files.chunks(per_shard).enumerate() {
        let path = out.join(format!("{prefix}-{k:06}.tar"));
        write_shard(&path, chunk, k * per_shard, width);
    }
    let shards = files.len().div_ceil(per_shard);
    println!(
        "{} samples of {} classes in {shards} shards: {}",
        files.len(),
        folder.classes.len(),
        out.join(format!("{prefix}-*.tar")).display()
    );
}

/// Fisher–Yates with dlc's counter-based generator, so a seed gives the same shards anywhere.
fn shuffle<T>(v: &mut [T], seed: u64) {
    for i in (1..v.len()).rev() {
        let j = (dlc::runtime::rng::uniform(seed, i as u64) * (i + 1) as f64) as usize;
        v.swap(i, j.min(i));
    }
}

/// One shard: each image's bytes under its number (from `first`), then its label.
fn write_shard(path: &Path, samples: &[(PathBuf, i64)], first: usize, width: usize) {
    let file = std::fs::File::create(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut tar = tar::Builder::new(std::io::BufWriter::new(file));
    let mut add = |name: String, bytes: &[u8]| {
        let mut h = tar::Header::new_ustar();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        tar.append_data(&mut h, name, bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    };
    for (n, (image, label)) in samples.iter().enumerate() {
        let key = format!("{:0width$}", first + n);
        let ext = image.extension().and_then(|e| e.to_str()).unwrap_or("jpg").to_ascii_lowercase().replace("jpeg", "jpg");
        let bytes = std::fs::read(image).unwrap_or_else(|e| panic!("{}: {e}", image.display()));
        add(format!("{key}.{ext}"), &bytes);
        add(format!("{key}.cls"), label.to_string().as_bytes());
    }
    let mut written = tar.into_inner().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    std::io::Write::flush(&mut written).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}
