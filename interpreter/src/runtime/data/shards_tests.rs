//! The shard reader on small tar files written here: samples grouped by key, other members and
//! folders ignored, PNG read exactly and JPEG within its compression, patterns expanded in sorted
//! order, and every kind of bad data an error naming the shard and the member.

use super::*;

/// A scratch folder of its own for each test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dlc-shards-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A w x h RGB image whose pixel values are a function of `seed`, interleaved.
fn pixels(w: usize, h: usize, seed: u8) -> Vec<u8> {
    (0..w * h * 3).map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed.wrapping_mul(31))).collect()
}

fn png(w: usize, h: usize, rgb: &[u8]) -> Vec<u8> {
    let mut out = vec![];
    let mut enc = png::Encoder::new(&mut out, w as u32, h as u32);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    enc.write_header().unwrap().write_image_data(rgb).unwrap();
    out
}

fn jpeg(w: usize, h: usize, rgb: &[u8]) -> Vec<u8> {
    let mut out = vec![];
    jpeg_encoder::Encoder::new(&mut out, 100).encode(rgb, w as u16, h as u16, jpeg_encoder::ColorType::Rgb).unwrap();
    out
}

/// A tar file of `members` (name, bytes) in order, and a folder entry first.
fn write_tar(path: &Path, members: &[(String, Vec<u8>)]) {
    let mut b = tar::Builder::new(File::create(path).unwrap());
    let mut dir = tar::Header::new_gnu();
    dir.set_entry_type(tar::EntryType::Directory);
    dir.set_size(0);
    dir.set_mode(0o755);
    b.append_data(&mut dir, "images/", std::io::empty()).unwrap();
    for (name, bytes) in members {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, name, &bytes[..]).unwrap();
    }
    b.finish().unwrap();
}

fn spec() -> ShardSpec {
    ShardSpec { image: vec!["jpg".into(), "png".into()], label: "cls".into(), size: None, channels: 3, skip: false }
}

/// CHW planes of interleaved RGB.
fn planes(rgb: &[u8]) -> Vec<f64> {
    (0..3).flat_map(|c| rgb.chunks_exact(3).map(move |p| p[c] as f64)).collect()
}

#[test]
fn member_names_split_at_the_first_dot_of_the_file_name() {
    assert_eq!(split_name("000123.jpg"), Some(("000123", "jpg")));
    assert_eq!(split_name("a.b/c/000123.seg.png"), Some(("a.b/c/000123", "seg.png")));
    assert_eq!(split_name("dir/noext"), None);
    assert_eq!(split_name("dir/.hidden"), None);
}

#[test]
fn samples_are_runs_of_members_sharing_a_key_read_by_seeking() {
    let dir = scratch("read");
    let long = format!("{}/{}", "deep".repeat(40), "000002");
    let (a, b, c) = (pixels(4, 3, 1), pixels(5, 2, 2), pixels(3, 3, 3));
    write_tar(
        &dir.join("train-1.tar"),
        &[
            ("000001.cls".into(), b"7\n".to_vec()),
            ("000001.png".into(), png(4, 3, &a)),
            ("000001.json".into(), b"{}".to_vec()),
            (format!("{long}.PNG"), png(5, 2, &b)),
            (format!("{long}.cls"), b" 0 ".to_vec()),
            ("notes".into(), b"no extension: no sample".to_vec()),
        ],
    );
    write_tar(&dir.join("train-0.tar"), &[("x.jpg".into(), jpeg(3, 3, &c)), ("x.cls".into(), b"3".to_vec())]);
    let set = ShardSet::open(&[dir.join("train-?.tar")], spec()).unwrap();
    assert_eq!(set.files.iter().map(|f| f.file_name().unwrap().to_str().unwrap()).collect::<Vec<_>>(), ["train-0.tar", "train-1.tar"]);
    assert_eq!(set.len(), 3);
    assert_eq!((set.shard_of(0), set.shard_of(1), set.shard_of(2)), (0, 1, 1));
    let (x, label) = set.get(0).unwrap();
    assert_eq!((x.shape.clone(), label), (vec![3, 3, 3], 3));
    let diff: f64 = x.to_f64().iter().zip(planes(&c)).map(|(p, q)| (p - q).abs()).sum::<f64>() / 27.0;
    assert!(diff < 3.0, "JPEG at quality 100: mean difference {diff}");
    let (x, label) = set.get(1).unwrap();
    assert_eq!((x.shape.clone(), label, x.to_f64()), (vec![3, 3, 4], 7, planes(&a)), "PNG exactly, label first in the shard");
    let (x, label) = set.get(2).unwrap();
    assert_eq!((x.shape.clone(), label, x.to_f64()), (vec![3, 2, 5], 0, planes(&b)), "a GNU long name, an upper-case extension");
    // Resized and gray as an `images` folder's files are.
    let gray = ShardSet::open(&[dir.join("train-1.tar")], ShardSpec { size: Some((6, 6)), channels: 1, ..spec() }).unwrap();
    assert_eq!(gray.get(0).unwrap().0.shape, vec![1, 6, 6]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_cut_off_shard_keeps_its_intact_samples_and_names_the_cut_member() {
    let dir = scratch("cut");
    let members: Vec<(String, Vec<u8>)> = (0..3)
        .flat_map(|i| [(format!("{i:03}.cls"), format!("{i}").into_bytes()), (format!("{i:03}.png"), png(8, 8, &pixels(8, 8, i)))])
        .collect();
    let whole = dir.join("whole.tar");
    write_tar(&whole, &members);
    let bytes = std::fs::read(&whole).unwrap();
    let set = ShardSet::open(std::slice::from_ref(&whole), spec()).unwrap();
    let last = set.samples[2].image.unwrap();
    // Cut inside the last image's data.
    let cut = dir.join("cut.tar");
    std::fs::write(&cut, &bytes[..last.offset as usize + 10]).unwrap();
    let set = ShardSet::open(std::slice::from_ref(&cut), spec()).unwrap();
    assert_eq!(set.len(), 3);
    assert_eq!(set.get(1).unwrap().1, 1, "the samples before the cut read");
    let e = set.get(2).unwrap_err().to_string();
    assert!(e.contains("cut.tar") && e.contains("member 002.png is cut off"), "{e}");
    // Cut inside the last image's header: the samples before it, and one that says where.
    let header_cut = dir.join("header.tar");
    std::fs::write(&header_cut, &bytes[..last.offset as usize - 200]).unwrap();
    let set = ShardSet::open(&[header_cut], spec()).unwrap();
    assert_eq!(set.get(1).unwrap().1, 1);
    let errors: Vec<String> = (2..set.len()).map(|i| set.get(i).unwrap_err().to_string()).collect();
    assert!(errors.iter().any(|e| e.contains("header.tar") && e.contains("after member 002.cls")), "{errors:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_samples_are_errors_naming_the_shard_and_the_member() {
    let dir = scratch("bad");
    let good = png(2, 2, &pixels(2, 2, 0));
    write_tar(
        &dir.join("bad.tar"),
        &[
            ("a.png".into(), good.clone()),
            ("b.png".into(), good.clone()),
            ("b.cls".into(), b"cat".to_vec()),
            ("c.cls".into(), b"1".to_vec()),
            ("d.jpg".into(), b"\xFF\xD8 not really a jpeg".to_vec()),
            ("d.cls".into(), b"2".to_vec()),
            ("e.png".into(), good.clone()),
            ("e.png".into(), good.clone()),
            ("e.cls".into(), b"2".to_vec()),
            ("f.cls".into(), b"-4".to_vec()),
            ("f.png".into(), good),
        ],
    );
    let set = ShardSet::open(&[dir.join("bad.tar")], spec()).unwrap();
    let said: Vec<String> = (0..set.len()).map(|i| set.get(i).unwrap_err().to_string()).collect();
    let want = [
        "sample a has no cls member",
        "member b.cls: the label \"cat\" is not a class index",
        "sample c has no jpg or png member",
        "member d.jpg: cannot decode the image",
        "member e.png is the second `png` member of sample e",
        "member f.cls: the label \"-4\" is not a class index",
    ];
    assert_eq!(said.len(), want.len(), "{said:?}");
    for (got, want) in said.iter().zip(want) {
        assert!(got.contains("bad.tar: ") && got.contains(want), "{got} (wanted {want})");
    }
    // Counted when skipped; the first error kept.
    let e = set.get(0).unwrap_err();
    set.skipped.note(&e);
    set.skipped.note(&set.get(1).unwrap_err());
    assert_eq!(set.skipped.so_far(), (2, Some(e.to_string())));
    // Not a tar file at all, and a pattern that matches nothing.
    std::fs::write(dir.join("junk.tar"), vec![b'x'; 1024]).unwrap();
    let junk = ShardSet::open(&[dir.join("junk.tar")], spec()).unwrap();
    assert!(junk.get(0).unwrap_err().to_string().contains("the tar header at the start cannot be read"));
    assert!(ShardSet::open(&[dir.join("none-*.tar")], spec()).is_err());
    std::fs::write(dir.join("empty.tar"), b"").unwrap();
    let e = ShardSet::open(&[dir.join("empty.tar")], spec()).err().unwrap().to_string();
    assert!(e.contains("empty.tar") && e.contains("holds no samples"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
