//! Data pipelines executed on the bundled data: sources, `map` through the traced lambda,
//! `shuffle` (seeded, reshuffled per epoch), `batch` (drop_last), take/skip/split.

use dlc::api::RuntimeHost;
use dlc::pipeline;
use dlc::runtime::data::idx;
use dlc_language::eval::{Mode, Session, Value};
use std::path::{Path, PathBuf};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// Check a program in `examples/` and return its session (pipelines are module items).
fn load(src: &str) -> Session {
    let mut s = Session::new(Mode::Check);
    let mut host = RuntimeHost::new(Some(examples()), false);
    assert!(s.run_source("pipeline_test.dl", src, &mut host), "{:?}", s.diagnostics());
    s
}

fn epoch(s: &Session, name: &str, e: u64) -> Vec<pipeline::Element> {
    let Some(Value::Pipeline(p)) = s.t.modules[s.main].items.get(name).cloned() else { panic!("no pipeline {name}") };
    pipeline::run(&p, &examples(), &s.t.graph, e).expect("pipeline runs")
}

#[test]
fn mnist_test_split_normalised_and_batched() {
    let s = load(
        "use std.data\ndata test_set = mnist(\"data/mnist\", split: \"test\") |> map(r => (flatten(to_unit(r.image)), r.label)) |> batch(1000)\n",
    );
    let batches = epoch(&s, "test_set", 0);
    assert_eq!(batches.len(), 10);
    assert_eq!(batches[0][0].shape, vec![1000, 784]);
    assert_eq!(batches[0][1].shape, vec![1000]);
    assert_eq!(batches[0][1].to_f64()[..4], [7.0, 2.0, 1.0, 0.0]);
    // The same pixels, read directly, divided by 255.
    let raw = idx::read(&examples().join("data/mnist/t10k-images-idx3-ubyte.gz")).unwrap().to_f64();
    let got = batches[3][0].to_f64();
    for i in (0..784 * 1000).step_by(997) {
        assert!((got[i] - raw[3 * 784 * 1000 + i] / 255.0).abs() < 1e-6);
    }
}

#[test]
fn shuffle_is_seeded_and_reshuffles_each_epoch() {
    let s = load(
        "use std.data\ndata d = csv(\"data/sklearn/iris.csv\", features: 4, label: 4, header: 1) |> shuffle(seed: 5) |> batch(32, drop_last: true)\n",
    );
    let a = epoch(&s, "d", 0);
    let b = epoch(&s, "d", 0);
    let c = epoch(&s, "d", 1);
    assert_eq!(a.len(), 4, "150 rows in batches of 32, the last 22 dropped");
    let labels = |e: &Vec<pipeline::Element>| e.iter().flat_map(|b| b[1].to_f64()).collect::<Vec<_>>();
    assert_eq!(labels(&a), labels(&b), "same seed, same epoch: same order");
    assert_ne!(labels(&a), labels(&c), "a new epoch reshuffles");
    let unshuffled = load("use std.data\ndata d = csv(\"data/sklearn/iris.csv\", features: 4, label: 4, header: 1)\n");
    let all = epoch(&unshuffled, "d", 0);
    assert_eq!(all.len(), 150);
    assert_eq!(all[0][0].to_f64(), vec![5.1f32 as f64, 3.5f32 as f64, 1.4f32 as f64, 0.2f32 as f64]);
}

#[test]
fn text_windows_take_skip_split() {
    let s = load(
        "use std.data\ndata t = text(\"data/tinyshakespeare/input.txt\", block: 8) |> skip(1) |> take(100) |> split(0.9)\ndata v = text(\"data/tinyshakespeare/input.txt\", block: 8) |> take(100) |> split(0.9, part: \"rest\")\n",
    );
    let t = epoch(&s, "t", 0);
    let v = epoch(&s, "v", 0);
    assert_eq!((t.len(), v.len()), (90, 10));
    // Targets are the inputs shifted by one character.
    let (x, y) = (t[0][0].to_f64(), t[0][1].to_f64());
    assert_eq!(x[1..], y[..7]);
}

#[test]
fn a_missing_data_file_is_a_clear_error() {
    let s = load("use std.data\ndata d = mnist(\"data/nowhere\")\n");
    let Some(Value::Pipeline(p)) = s.t.modules[s.main].items.get("d").cloned() else { panic!() };
    let e = pipeline::run(&p, &examples(), &s.t.graph, 0).unwrap_err().to_string();
    assert!(e.contains("data/nowhere/train-images-idx3-ubyte") && e.contains("cannot read"), "{e}");
}

/// Every element of `batches` as bits, batch by batch (f32 values as f32 bits, the rest as f64).
fn bits(batches: impl IntoIterator<Item = pipeline::Element>) -> Vec<Vec<Vec<u64>>> {
    batches.into_iter().map(|b| b.iter().map(|t| t.to_f64().into_iter().map(f64::to_bits).collect()).collect()).collect()
}

/// A streaming epoch (each batch made on demand from the prepared elements, as the feed's
/// workers make them) equals the whole-epoch application of the stages, bit for bit: the
/// shuffle's order, each augmentation's draws by position, `map`s after them, take/skip, the
/// final batch without `drop_last`; for two epochs, from a middle batch on (a resumed run), with
/// the feed's worker threads, and dealt to two ranks.
#[test]
fn a_streamed_epoch_equals_the_whole_epoch_applied() {
    let s = load(
        "use std.data\nfn prepare(r) = (normalize(to_unit(r.image), mean: 0.5, std: 0.25), r.label)\n\
         data d = cifar(\"data/cifar-10/test_batch_first800.bin\") |> take(300) |> random_crop(padding: 4, seed: 3) \
         |> shuffle(seed: 9) |> random_flip(seed: 4) |> map(prepare) |> skip(7) |> batch(50) |> prefetch(3)\n",
    );
    let Some(Value::Pipeline(p)) = s.t.modules[s.main].items.get("d").cloned() else { panic!("no pipeline d") };
    for e in 0..2 {
        let whole = bits(pipeline::run(&p, &examples(), &s.t.graph, e).expect("pipeline runs"));
        assert_eq!(whole.len(), 6, "293 elements in batches of 50, the last one short");
        let mut cache = None;
        let streamed = pipeline::run_cached(&p, &examples(), &s.t.graph, e, &mut cache).expect("streams");
        assert!(matches!(streamed, pipeline::Batches::Stream(_)), "the epoch streams");
        assert_eq!(bits(streamed.into_iter().map(|b| b.expect("batch"))), whole, "epoch {e}");
        for workers in [1, 3] {
            let again = pipeline::run_cached(&p, &examples(), &s.t.graph, e, &mut cache).expect("streams");
            let fed = pipeline::Feed::start(again, 2, workers, 3, Default::default(), None);
            assert_eq!(bits(fed.map(|b| b.expect("batch"))), whole[2..], "epoch {e}, {workers} workers, from batch 2");
        }
    }
    assert_ne!(
        bits(pipeline::run(&p, &examples(), &s.t.graph, 0).unwrap()),
        bits(pipeline::run(&p, &examples(), &s.t.graph, 1).unwrap()),
        "each epoch draws anew"
    );
}

/// A folder of class folders made from the bundled CIFAR-10 images: PNG files for even indices,
/// JPEG (quality 100) for odd ones, a text file and an empty folder beside them.
fn image_folder(n: usize) -> (PathBuf, Vec<Vec<u8>>, Vec<i64>) {
    let (x, y) = dlc::runtime::data::cifar::read(&[&examples().join("data/cifar-10/test_batch_first800.bin")]).unwrap();
    let (px, labels): (Vec<f64>, Vec<f64>) = (x.to_f64(), y.to_f64());
    let dir = std::env::temp_dir().join(format!("dlc-images-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("zz_empty")).unwrap();
    let mut chw = vec![];
    for i in 0..n {
        let class = dir.join(format!("c{}", labels[i]));
        std::fs::create_dir_all(&class).unwrap();
        let image: Vec<u8> = px[i * 3072..(i + 1) * 3072].iter().map(|v| *v as u8).collect();
        let hwc: Vec<u8> = (0..1024).flat_map(|p| [image[p], image[1024 + p], image[2048 + p]]).collect();
        if i % 2 == 0 {
            let file = std::fs::File::create(class.join(format!("{i:03}.png"))).unwrap();
            let mut enc = png::Encoder::new(std::io::BufWriter::new(file), 32, 32);
            enc.set_color(png::ColorType::Rgb);
            enc.set_depth(png::BitDepth::Eight);
            enc.write_header().unwrap().write_image_data(&hwc).unwrap();
        } else {
            let enc = jpeg_encoder::Encoder::new_file(class.join(format!("{i:03}.JPG")), 100).unwrap();
            enc.encode(&hwc, 32, 32, jpeg_encoder::ColorType::Rgb).unwrap();
        }
        chw.push(image);
    }
    std::fs::write(dir.join("c3").join("notes.txt"), "not an image").unwrap();
    (dir, chw, labels[..n].iter().map(|l| *l as i64).collect())
}

/// `images(dir)` reads a folder as torchvision's `ImageFolder` does: classes in sorted folder
/// order, each class's files in sorted order, other files ignored; PNG exactly, JPEG within its
/// compression; resized and made gray when asked; streamed (decoded on the feed's workers) equal
/// to the whole read; a corrupt file an error that names it.
#[test]
fn an_image_folder_reads_as_torchvisions_image_folder() {
    let n = 40;
    let (dir, images, labels) = image_folder(n);
    let s = load(&format!("use std.data\ndata d = images({:?}, size: (32, 32)) |> batch({n})\n", dir.to_str().unwrap()));
    let batches = epoch(&s, "d", 0);
    assert_eq!(batches.len(), 1);
    assert_eq!(batches[0][0].shape, vec![n, 3, 32, 32]);
    // Folders c0..c9 sort as their labels do; within one, files by index.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|i| (labels[*i], *i));
    let (got, got_labels) = (batches[0][0].to_f64(), batches[0][1].to_f64());
    for (k, i) in order.iter().enumerate() {
        assert_eq!(got_labels[k], labels[*i] as f64, "label of image {i}");
        let mine = &got[k * 3072..(k + 1) * 3072];
        let diff: f64 = mine.iter().zip(&images[*i]).map(|(a, b)| (a - *b as f64).abs()).sum::<f64>() / 3072.0;
        if i % 2 == 0 {
            assert_eq!(diff, 0.0, "PNG {i} is lossless");
        } else {
            assert!(diff < 3.0, "JPEG {i} at quality 100: mean difference {diff}");
        }
    }
    let Some(Value::Pipeline(p)) = s.t.modules[s.main].items.get("d").cloned() else { panic!("no pipeline d") };
    let mut cache = None;
    let streamed = pipeline::run_cached(&p, &examples(), &s.t.graph, 0, &mut cache).unwrap();
    assert!(matches!(streamed, pipeline::Batches::Stream(_)), "decoded on demand");
    assert_eq!(bits(pipeline::Feed::start(streamed, 0, 2, 2, Default::default(), None).map(|b| b.unwrap())), bits(batches));
    // Resized and gray.
    let s = load(&format!("use std.data\ndata d = images({:?}, size: (16, 20), channels: 1) |> batch(8)\n", dir.to_str().unwrap()));
    assert_eq!(epoch(&s, "d", 0)[0][0].shape, vec![8, 1, 16, 20]);
    // A file that is not the image its name says: the error names it.
    std::fs::write(dir.join("c0").join("999.jpg"), b"\xFF\xD8 not really a jpeg").unwrap();
    let s = load(&format!("use std.data\ndata d = images({:?}, size: (32, 32)) |> batch(8)\n", dir.to_str().unwrap()));
    let Some(Value::Pipeline(p)) = s.t.modules[s.main].items.get("d").cloned() else { panic!("no pipeline d") };
    let e = pipeline::run(&p, &examples(), &s.t.graph, 0).expect_err("a corrupt image");
    assert!(e.to_string().contains("999.jpg") && e.to_string().contains("cannot decode"), "{e}");
    // With `on_error: "skip"` it is left out of its batch and counted, streamed or not.
    let s = load(&format!("use std.data\ndata d = images({:?}, size: (32, 32), on_error: \"skip\") |> batch(8)\n", dir.to_str().unwrap()));
    let Some(Value::Pipeline(p)) = s.t.modules[s.main].items.get("d").cloned() else { panic!("no pipeline d") };
    let whole = pipeline::run(&p, &examples(), &s.t.graph, 0).expect("skips");
    assert_eq!(whole.iter().map(|b| b[0].shape[0]).sum::<usize>(), n, "the 41st file left out");
    // Read whole (as evaluation data are), the count and the first error come back too.
    let (_, (left_out, first)) = pipeline::run_counting(&p, &examples(), &s.t.graph, 0).expect("skips");
    assert!(left_out == 1 && first.is_some_and(|f| f.contains("999.jpg")), "{left_out}");
    let mut cache = None;
    let streamed = pipeline::run_cached(&p, &examples(), &s.t.graph, 0, &mut cache).unwrap();
    let sizes: Vec<usize> = streamed.into_iter().map(|b| b.unwrap()[0].shape[0]).collect();
    // 41 files in batches of 8: six batches, one of them one short.
    assert_eq!((sizes.iter().sum::<usize>(), sizes.len()), (n, 6), "{sizes:?}");
    let (skipped, first) = cache.as_ref().unwrap().skipped();
    assert!(skipped == 1 && first.unwrap().contains("999.jpg"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `center_crop` and `resize` of u8 images (torchvision's `CenterCrop`, `Resize`): a crop is the
/// image's centre exactly, a resize to the image's own size changes nothing, and both streamed
/// after a shuffle equal the whole epoch applied; on an image folder without `size`, they give
/// the batch its shape.
#[test]
fn center_crop_and_resize_shape_u8_images() {
    let s = load(
        "use std.data\ndata c = cifar(\"data/cifar-10/test_batch_first800.bin\") |> take(20) |> center_crop(size: (24, 28)) |> batch(20)\n\
         data r = cifar(\"data/cifar-10/test_batch_first800.bin\") |> take(20) |> resize(size: (32, 32)) |> batch(20)\n\
         data all = cifar(\"data/cifar-10/test_batch_first800.bin\") |> take(20) |> batch(20)\n\
         data s = cifar(\"data/cifar-10/test_batch_first800.bin\") |> take(50) |> shuffle(seed: 2) |> center_crop(size: (30, 30)) \
         |> resize(size: (16, 20)) |> batch(16)\n",
    );
    let (c, r, all) = (epoch(&s, "c", 0), epoch(&s, "r", 0), epoch(&s, "all", 0));
    assert_eq!(c[0][0].shape, vec![20, 3, 24, 28]);
    let (cropped, original) = (c[0][0].to_f64(), all[0][0].to_f64());
    // Rows from round(8 / 2) = 4, columns from round(4 / 2) = 2.
    for (i, v) in cropped.iter().enumerate() {
        let (img, ch, y, x) = (i / (3 * 24 * 28), i / (24 * 28) % 3, i / 28 % 24, i % 28);
        assert_eq!(*v, original[((img * 3 + ch) * 32 + y + 4) * 32 + x + 2]);
    }
    assert_eq!(r[0][0].to_f64(), original, "a resize to the same size changes nothing");
    let Some(Value::Pipeline(p)) = s.t.modules[s.main].items.get("s").cloned() else { panic!("no pipeline s") };
    let mut cache = None;
    let streamed = pipeline::run_cached(&p, &examples(), &s.t.graph, 1, &mut cache).unwrap();
    assert!(matches!(streamed, pipeline::Batches::Stream(_)));
    let whole = pipeline::run(&p, &examples(), &s.t.graph, 1).unwrap();
    assert_eq!(whole[0][0].shape, vec![16, 3, 16, 20]);
    assert_eq!(bits(streamed.into_iter().map(|b| b.unwrap())), bits(whole));
    // A float image is refused by the checker, before anything runs.
    let mut bad = Session::new(Mode::Check);
    let mut host = RuntimeHost::new(Some(examples()), false);
    let src = "use std.data\ndata d = cifar(\"x.bin\") |> map(r => (to_unit(r.image), r.label)) |> resize(size: (8, 8))\n";
    assert!(!bad.run_source("bad.dl", src, &mut host));
    assert!(bad.diagnostics().iter().any(|d| d.code == "E0403" && d.message.contains("u8 images")), "{:?}", bad.diagnostics());
}

/// torchvision's augmentations of u8 images on the bundled JPEG folder: a random resized crop
/// to the asked size, colour jitter, each element's draws fixed by (seed, epoch, position): the
/// same epoch twice is the same, streamed on workers or whole, and the next epoch differs.
#[test]
fn random_resized_crops_and_colour_jitter_are_fixed_by_seed_epoch_and_position() {
    let src = "use std.data\ndata d = images(\"data/cifar-10-jpeg/test\", size: (32, 32)) |> take(48)\n  \
        |> random_resized_crop(size: (24, 20), scale: (0.3, 1.0), seed: 5)\n  \
        |> color_jitter(brightness: 0.4, contrast: 0.4, saturation: 0.4, hue: 0.1, seed: 6)\n  |> batch(16)\n";
    let s = load(src);
    let first = epoch(&s, "d", 0);
    assert_eq!(first.len(), 3);
    assert_eq!(first[0][0].shape, vec![16, 3, 24, 20]);
    assert_eq!(bits(epoch(&s, "d", 0)), bits(first.clone()));
    assert_ne!(bits(epoch(&s, "d", 1)), bits(first.clone()));
    let Some(Value::Pipeline(p)) = s.t.modules[s.main].items.get("d").cloned() else { panic!("no pipeline d") };
    let mut cache = None;
    let streamed = pipeline::run_cached(&p, &examples(), &s.t.graph, 0, &mut cache).unwrap();
    assert_eq!(bits(pipeline::Feed::start(streamed, 0, 2, 2, Default::default(), None).map(|b| b.unwrap())), bits(first.clone()));
    // Not the crop of one corner every time: the images differ from a centre-cropped resize.
    let plain = load(
        &src.replace("random_resized_crop(size: (24, 20), scale: (0.3, 1.0), seed: 5)", "resize(size: (24, 20))")
            .replace("\n  |> color_jitter(brightness: 0.4, contrast: 0.4, saturation: 0.4, hue: 0.1, seed: 6)", ""),
    );
    assert_ne!(bits(epoch(&plain, "d", 0)), bits(first));
}

/// The checker types the augmentations: u8 images only, ranges as torchvision checks them.
#[test]
fn augmentations_out_of_range_or_on_floats_are_errors_at_their_arguments() {
    let cases = [
        ("random_resized_crop(size: 8, scale: (0.9, 0.1))", "`scale` must be (lo, hi) with 0 < lo <= hi"),
        ("random_resized_crop(size: 8, ratio: 2.0)", "`ratio` must be a pair of numbers"),
        ("color_jitter(hue: 0.7)", "`hue` must be between 0 and 0.5, found 0.7"),
        ("color_jitter(brightness: -1)", "`brightness` must be at least 0"),
        ("map(r => (to_unit(r.image), r.label)) |> color_jitter(contrast: 0.2)", "works on u8 images"),
    ];
    for (stage, want) in cases {
        let src = format!("use std.data\ndata d = images(\"data/cifar-10-jpeg/test\", size: (32, 32)) |> {stage}\n");
        let mut s = Session::new(Mode::Check);
        let mut host = RuntimeHost::new(Some(examples()), false);
        assert!(!s.run_source("pipeline_test.dl", &src, &mut host), "{stage} was accepted");
        let said: Vec<String> = s.diagnostics().iter().map(|d| d.message.clone()).collect();
        assert!(said.iter().any(|m| m.contains(want)), "{stage}: {said:?}");
    }
}

/// `text(path, tokenizer: FILE)`: windows of a Hugging Face tokenizer's ids, targets shifted by
/// one; a level as well is an error at `level`.
#[test]
fn text_tokenised_by_a_tokenizer_json_gives_windows_of_its_ids() {
    let s = load(
        "use std.data\ndata d = text(\"data/tinyshakespeare/input.txt\", block: 16, tokenizer: \"data/tinyshakespeare/tokenizer.json\") |> take(4) |> batch(4)\n",
    );
    let b = &epoch(&s, "d", 0)[0];
    assert_eq!(b[0].shape, vec![4, 16]);
    let (x, y) = (b[0].to_f64(), b[1].to_f64());
    assert!(x.iter().all(|i| (0.0..512.0).contains(i)));
    assert_eq!(x[1..16], y[..15], "targets are the inputs shifted by one");
    let tok = dlc::runtime::data::text::tokenizer(&examples().join("data/tinyshakespeare/tokenizer.json")).unwrap();
    let ids: Vec<u32> = x[..16].iter().map(|i| *i as u32).collect();
    assert!(tok.decode(&ids, false).unwrap().starts_with("First Citizen:"));
    let mut bad = Session::new(Mode::Check);
    let mut host = RuntimeHost::new(Some(examples()), false);
    let src = "use std.data\ndata d = text(\"data/tinyshakespeare/input.txt\", level: \"char\", tokenizer: \"data/tinyshakespeare/tokenizer.json\")\n";
    assert!(!bad.run_source("pipeline_test.dl", src, &mut host));
    assert!(bad.diagnostics().iter().any(|d| d.message.contains("`level` and `tokenizer` both say")), "{:?}", bad.diagnostics());
}

/// A `safetensors` source reads the rows of two named tensors of one file, as `npy` reads two
/// files: the same values in every batch, read whole and streamed (read on demand on the
/// feed's workers), shuffled and batched alike; a missing tensor names those the file has.
#[test]
fn safetensors_rows_batch_as_npy_rows_do() {
    use safetensors::tensor::{Dtype, TensorView};
    let dir = crate::common::scratch("st-source");
    let (rows, width) = (40usize, 6usize);
    let x: Vec<u8> = (0..rows * width).flat_map(|i| ((i * 37 % 101) as f32 / 7.0).to_le_bytes()).collect();
    let y: Vec<u8> = (0..rows).flat_map(|i| ((i % 3) as i64).to_le_bytes()).collect();
    std::fs::write(dir.join("x.npy"), dlc::runtime::data::npy::encode("<f4", &[rows, width], &x)).unwrap();
    std::fs::write(dir.join("y.npy"), dlc::runtime::data::npy::encode("<i8", &[rows], &y)).unwrap();
    let views = [
        ("images", TensorView::new(Dtype::F32, vec![rows, width], &x).unwrap()),
        ("labels", TensorView::new(Dtype::I64, vec![rows], &y).unwrap()),
    ];
    std::fs::write(dir.join("d.safetensors"), safetensors::serialize(views, None).unwrap()).unwrap();
    let d = dir.to_str().unwrap();
    let s = load(&format!(
        "use std.data\n\
         data a = npy(\"{d}/x.npy\", row: f32[6], labels: \"{d}/y.npy\") |> shuffle(seed: 5) |> batch(16)\n\
         data b = safetensors(\"{d}/d.safetensors\", tensor: \"images\", row: f32[6], labels: \"labels\") |> shuffle(seed: 5) |> batch(16)\n\
         data c = safetensors(\"{d}/d.safetensors\", tensor: \"pixels\", row: f32[6]) |> batch(16)\n"
    ));
    let (from_npy, from_st) = (epoch(&s, "a", 1), epoch(&s, "b", 1));
    assert_eq!(from_st.len(), 3);
    assert_eq!(bits(from_st.clone()), bits(from_npy));
    let Some(Value::Pipeline(p)) = s.t.modules[s.main].items.get("b").cloned() else { panic!("no pipeline b") };
    let mut cache = None;
    let streamed = pipeline::run_cached(&p, &examples(), &s.t.graph, 1, &mut cache).unwrap();
    assert!(matches!(streamed, pipeline::Batches::Stream(_)), "read on demand");
    assert_eq!(bits(pipeline::Feed::start(streamed, 0, 2, 2, Default::default(), None).map(|b| b.unwrap())), bits(from_st));
    let Some(Value::Pipeline(p)) = s.t.modules[s.main].items.get("c").cloned() else { panic!("no pipeline c") };
    let e = pipeline::run(&p, &examples(), &s.t.graph, 0).expect_err("no tensor pixels");
    assert!(e.to_string().contains("no tensor `pixels`") && e.to_string().contains("images, labels"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
