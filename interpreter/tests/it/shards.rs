//! `shards(files, ...)`: WebDataset tar files written here from the bundled CIFAR-10 images.
//! Training from shards gives the losses the same images give as an `images` folder; a buffered
//! shuffle reads the shards in a seeded order each epoch, the same on every run and on a resumed
//! one; whole shards are dealt to ranks; every kind of bad data stops the run naming the shard
//! and the member, or with `on_error: "skip"` is left out and counted.

use crate::common;
use dlc::api::RuntimeHost;
use dlc::pipeline;
use dlc::runtime::RuntimeError;
use dlc_language::eval::{Mode, Session, Value};
use std::fs::File;
use std::path::{Path, PathBuf};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// A tar file of `members` (name, bytes), in order.
fn write_tar(path: &Path, members: &[Member]) {
    let mut b = tar::Builder::new(File::create(path).unwrap());
    for (name, bytes) in members {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, name, &bytes[..]).unwrap();
    }
    b.finish().unwrap();
}

/// An image file's name and bytes: PNG for even `i`, JPEG (quality 95) for odd.
fn image_file(i: usize, chw: &[u8]) -> (String, Vec<u8>) {
    let hwc: Vec<u8> = (0..1024).flat_map(|p| [chw[p], chw[1024 + p], chw[2048 + p]]).collect();
    let mut bytes = vec![];
    if i % 2 == 0 {
        let mut enc = png::Encoder::new(&mut bytes, 32, 32);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.write_header().unwrap().write_image_data(&hwc).unwrap();
        (format!("{i:03}.png"), bytes)
    } else {
        jpeg_encoder::Encoder::new(&mut bytes, 95).encode(&hwc, 32, 32, jpeg_encoder::ColorType::Rgb).unwrap();
        (format!("{i:03}.jpg"), bytes)
    }
}

/// The first `n` bundled CIFAR-10 test images twice: as an `images` folder (`DIR/folder/cL/`)
/// and as shards of `per` samples (`DIR/s-K.tar`) holding them in the folder's reading order
/// (classes in order, files in order within one), each label the folder's. Returns the shard
/// files.
fn write_dataset(dir: &Path, n: usize, per: usize) -> Vec<PathBuf> {
    let (x, y) = dlc::runtime::data::cifar::read(&[&examples().join("data/cifar-10/test_batch_first800.bin")]).unwrap();
    let (px, labels) = (x.to_f64(), y.to_f64());
    let mut files: Vec<(i64, String, Vec<u8>)> = vec![];
    for i in 0..n {
        let chw: Vec<u8> = px[i * 3072..(i + 1) * 3072].iter().map(|v| *v as u8).collect();
        let class = labels[i] as i64;
        let (name, bytes) = image_file(i, &chw);
        let folder = dir.join("folder").join(format!("c{class}"));
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join(&name), &bytes).unwrap();
        files.push((class, name, bytes));
    }
    // ImageFolder's order and labels: classes present, sorted; files by name within one.
    files.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let mut classes: Vec<i64> = files.iter().map(|f| f.0).collect();
    classes.dedup();
    let mut shards = vec![];
    for (k, chunk) in files.chunks(per).enumerate() {
        let mut members = vec![];
        for (class, name, bytes) in chunk {
            let key = name.split('.').next().unwrap();
            let label = classes.iter().position(|c| c == class).unwrap();
            members.push((format!("{key}.cls"), format!("{label}\n").into_bytes()));
            members.push((name.clone(), bytes.clone()));
        }
        let path = dir.join(format!("s-{k}.tar"));
        write_tar(&path, &members);
        shards.push(path);
    }
    shards
}

/// Each parameter's values, by name.
type Params = Vec<(String, Vec<f64>)>;

/// A tar member: its name and bytes.
type Member = (String, Vec<u8>);

/// A training program over `source` (a linear classifier of the flattened pixels).
fn program(source: &str, data_stages: &str, steps: usize, checkpoint: Option<(&Path, usize)>) -> String {
    let ck = checkpoint.map(|(d, n)| format!("  checkpoint \"{}\" every {n} steps\n", d.display())).unwrap_or_default();
    format!(
        "use std.nn\nuse std.data\nuse std.optim\n\
         model Net() {{\n  fc = Linear(3072, 10)\n  forward(x: f32[B, 3072]) -> f32[B, 10] = fc(x)\n}}\n\
         fn prepare(r) = (flatten(to_unit(r.image)), r.label)\n\
         data train_set = {source}{data_stages} |> map(prepare) |> batch(4)\n\
         train {{\n  model = Net()\n  data = train_set\n  loss = cross_entropy(model(x), y)\n  \
         optimizer = adam(lr: 0.01)\n  steps = {steps}\n  log every 1 steps\n{ck}}}\n"
    )
}

/// Train `src`, with overrides and an optional checkpoint to resume from: the loss of every step
/// (not the epochs' means) and the final parameters.
fn train(src: &str, set: &[(&str, &str)], resume: Option<&Path>) -> (Vec<(usize, f64)>, Params) {
    let mut p = dlc::Program::run("shards_test.dl", src, Some(&examples()), false);
    assert!(p.ok, "{:?}", p.diagnostics());
    let mut info = p.session.t.recipes[0].clone();
    let set: Vec<(String, String)> = set.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    dlc::train::apply_overrides(&mut info, &set).expect("overrides apply");
    let mut opts = dlc::train::TrainOptions::new(examples(), 0);
    opts.resume = resume.map(|p| p.to_path_buf());
    let mut t = dlc::train::Trainer::new(&mut p.session, info, opts).expect("trainer");
    let r = t.run().expect("training runs");
    // An epoch's mean follows its last step's loss under the same step number.
    let mut steps = r.losses.clone();
    steps.dedup_by_key(|(step, _)| *step);
    (steps, t.parameters().into_iter().map(|(n, v)| (n, v.to_f64())).collect())
}

fn quoted(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| format!("{:?}", p.to_str().unwrap())).collect::<Vec<_>>().join(", ")
}

/// The same images as shards (a pattern over five of them) and as a folder train to the same
/// losses, bit for bit: same order, same decoded pixels, same labels. Read in another order the
/// losses differ, so the comparison can fail.
#[test]
fn shards_train_as_the_same_images_in_a_folder_do() {
    let dir = common::scratch("shards-train");
    let shards = write_dataset(&dir, 40, 8);
    let pattern = format!("{:?}", dir.join("s-*.tar").to_str().unwrap());
    let folder = format!("images({:?}, size: (32, 32))", dir.join("folder").to_str().unwrap());
    let (from_folder, _) = train(&program(&folder, "", 10, None), &[], None);
    let (from_shards, _) = train(&program(&format!("shards({pattern}, image: \"jpg;png\", size: (32, 32))"), "", 10, None), &[], None);
    assert_eq!(from_folder.len(), 10);
    assert_eq!(from_shards, from_folder);
    let reversed: Vec<PathBuf> = shards.iter().rev().cloned().collect();
    let (other_order, _) =
        train(&program(&format!("shards(({}), image: \"png;jpg\", size: (32, 32))", quoted(&reversed)), "", 10, None), &[], None);
    assert_ne!(other_order, from_folder, "the shards read in another order");
    let _ = std::fs::remove_dir_all(&dir);
}

fn load(src: &str) -> (Session, std::rc::Rc<dlc_language::eval::value::Pipeline>) {
    let mut s = Session::new(Mode::Check);
    let mut host = RuntimeHost::new(Some(examples()), false);
    assert!(s.run_source("shards_test.dl", src, &mut host), "{:?}", s.diagnostics());
    let Some(Value::Pipeline(p)) = s.t.modules[s.main].items.get("d").cloned() else { panic!("no pipeline d") };
    (s, p)
}

fn labels(batches: impl IntoIterator<Item = pipeline::Element>) -> Vec<i64> {
    batches.into_iter().flat_map(|b| b[1].to_f64()).map(|l| l as i64).collect()
}

/// `shuffle(seed:, buffer:)` over shards: an order fixed by (seed, epoch), new each epoch,
/// streamed on the feed's workers from a middle batch as the whole epoch applied gives it; two
/// runs train alike, and a run stopped mid-epoch and resumed ends as an uninterrupted one.
#[test]
fn a_shuffle_buffer_over_shards_is_fixed_by_seed_and_epoch_and_resumes() {
    let dir = common::scratch("shards-shuffle");
    write_dataset(&dir, 40, 8);
    let source = format!("shards({:?}, image: \"jpg;png\", size: (32, 32))", dir.join("s-*.tar").to_str().unwrap());
    let (s, p) = load(&format!("use std.data\ndata d = {source} |> shuffle(seed: 3, buffer: 6) |> batch(4)\n"));
    let epoch = |e: u64| {
        let mut cache = None;
        let streamed = pipeline::run_cached(&p, &examples(), &s.t.graph, e, &mut cache).unwrap();
        assert!(matches!(streamed, pipeline::Batches::Stream(_)), "read on demand");
        labels(streamed.into_iter().map(|b| b.unwrap()))
    };
    let (first, second) = (epoch(0), epoch(1));
    assert_eq!(first.len(), 40);
    assert_eq!(first, epoch(0));
    assert_ne!(first, second, "a new order each epoch");
    let mut sorted = first.clone();
    sorted.sort();
    assert_ne!(first, sorted);
    // The whole epoch applied (the shards carried along) equals the stream, from batch 3 on
    // three workers too.
    let whole = pipeline::run(&p, &examples(), &s.t.graph, 1).unwrap();
    assert_eq!(labels(whole.clone()), second);
    let mut cache = None;
    let again = pipeline::run_cached(&p, &examples(), &s.t.graph, 1, &mut cache).unwrap();
    let fed: Vec<_> = pipeline::Feed::start(again, 3, 3, 2, Default::default(), None).map(|b| b.unwrap()).collect();
    let pixels = |b: &[pipeline::Element]| b.iter().map(|e| e[0].to_f64()).collect::<Vec<_>>();
    assert_eq!(pixels(&fed), pixels(&whole[3..]));

    // Training: 2 epochs of 10 steps twice, and stopped at step 13 (mid-epoch), then resumed.
    let ck = dir.join("ck");
    let src = program(&source, " |> shuffle(seed: 3, buffer: 6)", 20, Some((&ck, 5)));
    let (full, full_params) = train(&src, &[], None);
    assert_eq!(full.len(), 20);
    let _ = std::fs::remove_dir_all(&ck);
    assert_eq!(train(&src, &[], None).0, full, "deterministic");
    let _ = std::fs::remove_dir_all(&ck);
    let (half, _) = train(&src, &[("steps", "13")], None);
    assert_eq!(half[..], full[..13]);
    assert!(ck.join("manifest.json").exists());
    let (rest, rest_params) = train(&src, &[], Some(&ck));
    assert_eq!(rest[..], full[13..], "the resumed steps' losses");
    assert_eq!(rest_params, full_params);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Under data parallelism whole shards are dealt: rank r reads the shards at places r, r + W,
/// ... of the epoch's order (the buffered shuffle's seeded one), cut to the rank with fewest;
/// with fewer shards than ranks, elements are dealt.
#[test]
fn whole_shards_are_dealt_to_ranks() {
    let dir = common::scratch("shards-deal");
    // Four shards of 5, 5, 5 and 3 samples; each label says its shard.
    for (k, count) in [5, 5, 5, 3].into_iter().enumerate() {
        let members: Vec<(String, Vec<u8>)> = (0..count)
            .flat_map(|i| {
                let (name, bytes) = image_file(0, &[k as u8 * 40; 3072]);
                [(format!("{k}-{i}.cls"), format!("{k}").into_bytes()), (name.replace("000", &format!("{k}-{i}")), bytes)]
            })
            .collect();
        write_tar(&dir.join(format!("d-{k}.tar")), &members);
    }
    let pattern = format!("{:?}", dir.join("d-*.tar").to_str().unwrap());
    for (stages, shards_of_rank) in [("", [[0, 2], [1, 3]]), (" |> shuffle(seed: 5, buffer: 4)", [[9, 9], [9, 9]])] {
        let (s, p) = load(&format!("use std.data\ndata d = shards({pattern}, image: \"png\"){stages} |> batch(2)\n"));
        let mut seen = vec![];
        for rank in 0..2 {
            let mut cache = None;
            let pipeline::Batches::Stream(plan) = pipeline::run_cached(&p, &examples(), &s.t.graph, 0, &mut cache).unwrap() else {
                panic!("streams")
            };
            let dealt = std::sync::Arc::unwrap_or_clone(plan).shard(rank, 2);
            let mine = labels((0..dealt.len()).map(|b| dealt.batch(b).unwrap()));
            let mut shards: Vec<i64> = mine.clone();
            shards.dedup();
            shards.sort();
            shards.dedup();
            assert_eq!(shards.len(), 2, "rank {rank} reads two whole shards: {mine:?}");
            if shards_of_rank[0][0] != 9 {
                assert_eq!(shards, shards_of_rank[rank], "in the files' order without a shuffle");
            }
            // Cut to the fewest: the rank with shards of 5 and 3.
            assert_eq!(mine.len(), 8, "{mine:?}");
            seen.extend(shards);
        }
        seen.sort();
        assert_eq!(seen, [0, 1, 2, 3], "every shard read, each by one rank");
        // Five ranks for four shards: elements dealt, three a rank.
        let mut cache = None;
        let pipeline::Batches::Stream(plan) = pipeline::run_cached(&p, &examples(), &s.t.graph, 0, &mut cache).unwrap() else { panic!() };
        let dealt = std::sync::Arc::unwrap_or_clone(plan).shard(1, 5);
        assert_eq!(labels((0..dealt.len()).map(|b| dealt.batch(b).unwrap())).len(), 3);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Bad data in a shard: cut off inside a member, a sample without its label or its image, a
/// label that is not a class index, an image that does not decode. Each stops the run at the
/// source with the shard and the member named; with `on_error: "skip"` each is left out and
/// counted, and the run warns at each epoch's end; a run stopped by one keeps its checkpoint.
#[test]
fn bad_data_stops_naming_the_shard_and_the_member_or_is_skipped_and_counted() {
    let dir = common::scratch("shards-bad");
    let good = |i: usize| image_file(2 * i, &[(i * 30) as u8; 3072]).1;
    let sample = |key: &str, i: usize| vec![(format!("{key}.cls"), format!("{}", i % 10).into_bytes()), (format!("{key}.png"), good(i))];
    write_tar(&dir.join("good.tar"), &(0..6).flat_map(|i| sample(&format!("g{i}"), i)).collect::<Vec<_>>());
    let cut = dir.join("cut.tar");
    write_tar(&cut, &(0..3).flat_map(|i| sample(&format!("c{i}"), i)).collect::<Vec<_>>());
    let bytes = std::fs::read(&cut).unwrap();
    // Cut inside the last member, a PNG file.
    let last = bytes.windows(4).rposition(|w| w == b"\x89PNG").unwrap();
    std::fs::write(&cut, &bytes[..last + 20]).unwrap();
    let cases: [(&str, Vec<Member>, &str); 5] = [
        ("cut", vec![], "member c2.png is cut off"),
        ("nolabel", vec![("n.png".into(), good(1))], "sample n has no cls member"),
        ("noimage", vec![("m.cls".into(), b"1".to_vec())], "sample m has no jpg or png member"),
        (
            "badlabel",
            vec![("b.cls".into(), b"dog".to_vec()), ("b.png".into(), good(1))],
            "member b.cls: the label \"dog\" is not a class index",
        ),
        (
            "badjpeg",
            vec![("j.cls".into(), b"1".to_vec()), ("j.jpg".into(), b"\xFF\xD8 not a jpeg".to_vec())],
            "member j.jpg: cannot decode the image",
        ),
    ];
    let mut bad = vec![];
    for (name, members, said) in &cases {
        let file = dir.join(format!("{name}.tar"));
        if !members.is_empty() {
            write_tar(&file, members);
        }
        let src =
            format!("use std.data\ndata d = shards(({}), image: \"jpg;png\") |> batch(4)\n", quoted(&[dir.join("good.tar"), file.clone()]));
        let (s, p) = load(&src);
        match pipeline::run(&p, &examples(), &s.t.graph, 0) {
            Err(RuntimeError::Data { message, span }) => {
                assert!(message.contains(&format!("{name}.tar: ")) && message.contains(said), "{name}: {message}");
                assert!(src[span.start as usize..span.end as usize].starts_with("shards("), "at the source");
            }
            other => panic!("{name}: {:?}", other.map(|b| b.len())),
        }
        bad.push(file);
    }
    // Skipped: streamed and whole, each bad sample left out and counted (the good shard last, so
    // that no batch of 4 is all bad: such a batch stops the run).
    let mut all = bad;
    all.push(dir.join("good.tar"));
    let skip = format!("shards(({}), image: \"jpg;png\", size: (32, 32), on_error: \"skip\")", quoted(&all));
    let (s, p) = load(&format!("use std.data\ndata d = {skip} |> batch(4)\n"));
    let mut cache = None;
    let streamed = pipeline::run_cached(&p, &examples(), &s.t.graph, 0, &mut cache).unwrap();
    assert_eq!(labels(streamed.into_iter().map(|b| b.unwrap())).len(), 8, "six good samples and the two before the cut");
    let (skipped, first) = cache.as_ref().unwrap().skipped();
    assert_eq!(skipped, 5);
    assert!(first.unwrap().contains("member c2.png is cut off"));
    assert_eq!(labels(pipeline::run(&p, &examples(), &s.t.graph, 0).unwrap()).len(), 8);

    // `dlc run`: the warning at each epoch's end (13 samples: 4 steps an epoch; the run's last
    // epoch, ended by `steps`, is not summed up).
    let f = dir.join("skip.dl");
    std::fs::write(&f, program(&skip, "", 12, None)).unwrap();
    let out = common::dlc_in(&dir, &["run", f.to_str().unwrap()]);
    let said = format!("{}{}", common::text(&out.stdout), common::text(&out.stderr));
    assert!(out.status.success(), "{said}");
    for epoch in [1, 2] {
        assert!(said.contains(&format!("epoch {epoch}: 5 elements could not be read and were left out")), "{said}");
    }
    // Stopped at step 4's batch: the error names the shard and the member; step 2's checkpoint
    // is there and loads.
    let ck = dir.join("ck");
    let stop = format!(
        "shards(({}), image: \"jpg;png\", size: (32, 32))",
        quoted(&[dir.join("good.tar"), dir.join("good.tar"), dir.join("badjpeg.tar")])
    );
    std::fs::write(&f, program(&stop, "", 8, Some((&ck, 2)))).unwrap();
    let out = common::dlc_in(&dir, &["run", f.to_str().unwrap()]);
    let said = format!("{}{}", common::text(&out.stdout), common::text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "an error, not a panic: {said}");
    assert!(said.contains("badjpeg.tar: member j.jpg: cannot decode the image"), "{said}");
    let saved = dlc::train::checkpoint::load(&ck).expect("the checkpoint before the bad batch");
    assert_eq!(saved.step, 2);
    let _ = std::fs::remove_dir_all(&dir);
}
