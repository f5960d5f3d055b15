//! A folder of JPEG files in torchvision's `ImageFolder` layout (`DIR/train/CLASS/NNNNN.jpg`,
//! `DIR/test/CLASS/NNNNN.jpg`), made from the bundled CIFAR-10 subset's binary records: what
//! `examples/cifar_jpeg.dl` trains on, and what the data-loading peers read beside dlc.
//!
//! `cargo run --release -p dlc --example image_folder -- OUT [--train N] [--test N] [--size S]`
//! takes the first N train and test images of each class (all of them without), JPEG quality
//! 95, 4:4:4; `--size S` scales each image up to S x S first (nearest pixel), for a folder
//! where decoding dominates. The bundled `examples/data/cifar-10-jpeg/` is
//! `OUT=examples/data/cifar-10-jpeg --train 100 --test 20`.

use std::path::{Path, PathBuf};

const CIFAR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/data/cifar-10");
const RECORD: usize = 1 + 3 * 32 * 32;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(out) = args.first().map(PathBuf::from) else {
        eprintln!("usage: image_folder OUT [--train N] [--test N] [--size S]");
        std::process::exit(2);
    };
    let flag =
        |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map(|v| v.parse::<usize>().expect("a number"));
    let size = flag("--size").unwrap_or(32);
    let classes: Vec<String> = std::fs::read_to_string(Path::new(CIFAR).join("batches.meta.txt"))
        .expect("the class names")
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    let train: Vec<PathBuf> = (1..=5).map(|i| Path::new(CIFAR).join(format!("data_batch_{i}_first600.bin"))).collect();
    let test = vec![Path::new(CIFAR).join("test_batch_first800.bin")];
    for (part, files, per_class) in [("train", train, flag("--train")), ("test", test, flag("--test"))] {
        let written = write_part(&out.join(part), &files, &classes, per_class.unwrap_or(usize::MAX), size);
        println!("{part}: {written} images in {}", out.join(part).display());
    }
}

/// Each record of `files` as `dir/CLASS/NNNNN.jpg` (N: the record's index), at most `per_class`
/// a class. Returns how many were written.
fn write_part(dir: &Path, files: &[PathBuf], classes: &[String], per_class: usize, size: usize) -> usize {
    let mut counts = vec![0usize; classes.len()];
    let mut index = 0;
    for file in files {
        let bytes = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for record in bytes.chunks_exact(RECORD) {
            let label = record[0] as usize;
            index += 1;
            if counts[label] >= per_class {
                continue;
            }
            counts[label] += 1;
            let class = dir.join(&classes[label]);
            std::fs::create_dir_all(&class).expect("a class folder");
            let rgb = interleaved(&record[1..], size);
            let enc = jpeg_encoder::Encoder::new_file(class.join(format!("{:05}.jpg", index - 1)), 95).expect("a JPEG file");
            enc.encode(&rgb, size as u16, size as u16, jpeg_encoder::ColorType::Rgb).expect("encoded");
        }
    }
    counts.iter().sum()
}

/// CIFAR's planes (R, G, B, each 32 x 32) as interleaved RGB pixels, scaled to `size` x `size`
/// by nearest pixel.
fn interleaved(planes: &[u8], size: usize) -> Vec<u8> {
    let mut rgb = Vec::with_capacity(size * size * 3);
    for y in 0..size {
        for x in 0..size {
            let (sy, sx) = (y * 32 / size, x * 32 / size);
            for c in 0..3 {
                rgb.push(planes[c * 1024 + sy * 32 + sx]);
            }
        }
    }
    rgb
}
