//! `jsonl` and `parquet` sources end to end: Iris written as JSON Lines and as Parquet (by the
//! parquet crate's writer) trains exactly as its CSV does; a bad record stops a run naming the
//! file and the record, leaves the last checkpoint as it was, and with `on_error: "skip"` is
//! left out and counted.

use crate::common::{dlc_in, scratch, text};
use dlc::api::RuntimeHost;
use dlc::pipeline;
use dlc::train::{TrainOptions, Trainer};
use dlc::Program;
use dlc_language::eval::{Mode, Session, Value};
use parquet::data_type::{FloatType, Int64Type};
use parquet::file::metadata::ParquetMetaDataWriter;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::SerializedFileWriter;
use std::path::Path;
use std::sync::Arc;

/// Iris as its CSV has it: each row's four feature texts and its class.
fn iris() -> Vec<(Vec<String>, i64)> {
    let csv = std::fs::read_to_string(Path::new(crate::common::ROOT).join("examples/data/sklearn/iris.csv")).unwrap();
    csv.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            (cells[..4].iter().map(|c| c.to_string()).collect(), cells[4].parse().unwrap())
        })
        .collect()
}

/// The rows as JSON Lines, the feature texts as they are in the CSV (so they parse to the same
/// numbers).
fn jsonl_text(rows: &[(Vec<String>, i64)]) -> String {
    rows.iter().map(|(x, y)| format!("{{\"features\": [{}], \"label\": {y}, \"species\": \"?\"}}\n", x.join(", "))).collect()
}

/// The rows as a Parquet file of row groups of `per_group` rows (snappy): `features` a LIST of
/// float, `label` an int64.
fn write_parquet(path: &Path, rows: &[(Vec<String>, i64)], per_group: usize) {
    let schema =
        "message iris { required group features (LIST) { repeated group list { required float element; } } required int64 label; }";
    let schema = Arc::new(parquet::schema::parser::parse_message_type(schema).unwrap());
    let props = Arc::new(WriterProperties::builder().set_compression(parquet::basic::Compression::SNAPPY).build());
    let mut w = SerializedFileWriter::new(std::fs::File::create(path).unwrap(), schema, props).unwrap();
    for group in rows.chunks(per_group) {
        let mut rg = w.next_row_group().unwrap();
        let x: Vec<f32> = group.iter().flat_map(|(x, _)| x.iter().map(|c| c.parse::<f64>().unwrap() as f32)).collect();
        let rep: Vec<i16> = (0..x.len()).map(|k| (k % 4 != 0) as i16).collect();
        let mut c = rg.next_column().unwrap().unwrap();
        c.typed::<FloatType>().write_batch(&x, Some(&vec![1; x.len()]), Some(&rep)).unwrap();
        c.close().unwrap();
        let y: Vec<i64> = group.iter().map(|(_, y)| *y).collect();
        let mut c = rg.next_column().unwrap().unwrap();
        c.typed::<Int64Type>().write_batch(&y, None, None).unwrap();
        c.close().unwrap();
        rg.close().unwrap();
    }
    w.close().unwrap();
}

/// Rewrite `path`'s footer so that row group `group` says it has `rows` rows (more than it holds:
/// a group cut short).
fn cut_short(path: &Path, group: usize, rows: i64) {
    let bytes = std::fs::read(path).unwrap();
    let meta = SerializedFileReader::new(bytes::Bytes::from(bytes.clone())).unwrap().metadata().clone();
    let footer = u32::from_le_bytes(bytes[bytes.len() - 8..bytes.len() - 4].try_into().unwrap()) as usize;
    let mut b = meta.into_builder();
    for (k, rg) in b.take_row_groups().into_iter().enumerate() {
        b = b.add_row_group(if k == group { rg.into_builder().set_num_rows(rows).build().unwrap() } else { rg });
    }
    let mut out = bytes[..bytes.len() - 8 - footer].to_vec();
    ParquetMetaDataWriter::new(&mut out, &b.build()).finish().unwrap();
    std::fs::write(path, out).unwrap();
}

const FIELDS: &str = "fields: (features: f32[4], label: i64[])";

/// Iris's classifier trained for `EPOCHS` from `SOURCE`, shuffled, every step's loss logged.
const PROGRAM: &str = r#"
use std.nn
use std.data
use std.optim
model Classifier() {
  fc1 = Linear(4, 16)
  fc2 = Linear(16, 3)
  forward(x: f32[B, 4]) -> f32[B, 3] = x |> fc1 |> relu |> fc2
}
data flowers = SOURCE |> map(r => (r.features / 8.0, r.label)) |> shuffle(seed: 3) |> batch(16)
train {
  model = Classifier()
  data = flowers
  loss = cross_entropy(model(x), y)
  optimizer = adam(lr: 0.01)
  epochs = EPOCHS
  log every 1 steps
CHECKPOINT}
"#;

fn program(source: &str, epochs: usize, checkpoint: &str) -> String {
    PROGRAM.replace("SOURCE", source).replace("EPOCHS", &epochs.to_string()).replace("CHECKPOINT", checkpoint)
}

/// A run as bits: every logged (step, loss), and each parameter by name.
type Run = (Vec<(usize, u64)>, Vec<(String, Vec<u64>)>);

/// Train the program on `source` (paths relative to `dir`): every logged loss and the final
/// parameters, as bits.
fn train(dir: &Path, source: &str) -> Run {
    let mut p = Program::run("records.dl", &program(source, 3, ""), Some(dir), false);
    assert!(p.ok, "{:?}", p.diagnostics());
    let info = p.session.t.recipes[0].clone();
    let mut t = Trainer::new(&mut p.session, info, TrainOptions::new(dir.to_path_buf(), 0)).expect("trainer");
    let r = t.run().expect("training runs");
    let losses = r.losses.iter().map(|(s, l)| (*s, l.to_bits())).collect();
    (losses, t.parameters().into_iter().map(|(n, v)| (n, v.to_f64().iter().map(|x| x.to_bits()).collect())).collect())
}

#[test]
fn iris_trains_from_jsonl_and_parquet_bit_for_bit_as_from_csv() {
    let dir = scratch("records-train");
    let rows = iris();
    std::fs::copy(Path::new(crate::common::ROOT).join("examples/data/sklearn/iris.csv"), dir.join("iris.csv")).unwrap();
    std::fs::write(dir.join("iris.jsonl"), jsonl_text(&rows)).unwrap();
    // Row groups of 32 rows: 150 rows in five groups, the last one short of the others.
    write_parquet(&dir.join("iris.parquet"), &rows, 32);
    let csv = train(&dir, "csv(\"iris.csv\", features: 4, label: 4, header: 1)");
    assert!(csv.0.len() >= 3 * 10, "150 rows in batches of 16, three epochs, each step logged: {}", csv.0.len());
    let jsonl = train(&dir, &format!("jsonl(\"iris.jsonl\", {FIELDS})"));
    assert_eq!(jsonl, csv, "JSON Lines against CSV");
    let parquet = train(&dir, &format!("parquet(\"iris.parquet\", {FIELDS})"));
    assert_eq!(parquet, csv, "Parquet against CSV");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A session checking `src` with paths relative to `dir`, and its pipeline `d`.
fn pipeline_of(dir: &Path, src: &str) -> (Session, std::rc::Rc<dlc_language::eval::value::Pipeline>) {
    let mut s = Session::new(Mode::Check);
    let mut host = RuntimeHost::new(Some(dir.to_path_buf()), false);
    assert!(s.run_source("records_test.dl", src, &mut host), "{:?}", s.diagnostics());
    let Some(Value::Pipeline(p)) = s.t.modules[s.main].items.get("d").cloned() else { panic!("no pipeline d") };
    (s, p)
}

fn bits(batches: impl IntoIterator<Item = pipeline::Element>) -> Vec<Vec<Vec<u64>>> {
    batches.into_iter().map(|b| b.iter().map(|t| t.to_f64().iter().map(|x| x.to_bits()).collect()).collect()).collect()
}

/// Read on the feed's workers (two of them sharing the Parquet file's decoded row groups), the
/// batches are the whole read's; and with `on_error: "skip"` the bad records are left out of
/// their batches and counted, streamed or not.
#[test]
fn records_stream_on_the_feeds_workers_and_skipped_ones_are_counted() {
    let dir = scratch("records-stream");
    let rows = iris();
    write_parquet(&dir.join("iris.parquet"), &rows, 20);
    let mut text = jsonl_text(&rows);
    text = text.replacen("\"label\": 1,", "\"label\": \"versicolor\",", 1);
    text.push_str("{\"features\": [1, 2, 3, 4], \"lab");
    std::fs::write(dir.join("bad.jsonl"), text).unwrap();
    let src = format!("use std.data\ndata d = parquet(\"iris.parquet\", {FIELDS}) |> shuffle(seed: 1) |> batch(8)\n");
    let (s, p) = pipeline_of(&dir, &src);
    let whole = pipeline::run(&p, &dir, &s.t.graph, 0).unwrap();
    let mut cache = None;
    let streamed = pipeline::run_cached(&p, &dir, &s.t.graph, 0, &mut cache).unwrap();
    assert!(matches!(streamed, pipeline::Batches::Stream(_)), "read on demand");
    assert_eq!(bits(pipeline::Feed::start(streamed, 0, 2, 2, Default::default(), None).map(|b| b.unwrap())), bits(whole));
    // Two bad records of 151: a string label (line 51, the first versicolor) and a last line cut short.
    let src = format!("use std.data\ndata d = jsonl(\"bad.jsonl\", {FIELDS}, on_error: \"skip\") |> batch(8)\n");
    let (s, p) = pipeline_of(&dir, &src);
    let whole = pipeline::run(&p, &dir, &s.t.graph, 0).unwrap();
    assert_eq!(whole.iter().map(|b| b[0].shape[0]).sum::<usize>(), 149);
    let mut cache = None;
    let streamed = pipeline::run_cached(&p, &dir, &s.t.graph, 0, &mut cache).unwrap();
    let sizes: Vec<usize> = streamed.into_iter().map(|b| b.unwrap()[0].shape[0]).collect();
    assert_eq!((sizes.iter().sum::<usize>(), sizes.len()), (149, 19), "{sizes:?}");
    let (skipped, first) = cache.as_ref().unwrap().skipped();
    let first = first.unwrap();
    assert_eq!(skipped, 2);
    assert!(first.contains("bad.jsonl: line 51: `label` holds a string, not a number"), "{first}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `dlc run` of the program on `source` in `dir` (with a checkpoint every epoch): its exit code
/// and its standard error.
fn run(dir: &Path, source: &str, epochs: usize, args: &[&str]) -> (Option<i32>, String) {
    std::fs::write(dir.join("p.dl"), program(source, epochs, "  checkpoint \"ck\" every epoch\n")).unwrap();
    let mut all = vec!["run", "p.dl"];
    all.extend(args);
    let o = dlc_in(dir, &all);
    (o.status.code(), text(&o.stderr))
}

/// A bad record stops the run with E0502 at the source, naming the file and the record; the
/// checkpoint the run resumed from is left as it was; with `on_error: "skip"` the run goes on
/// and each epoch's end says how many records were left out.
#[test]
fn bad_records_stop_the_run_naming_file_and_record_or_are_skipped_and_counted() {
    let dir = scratch("records-bad");
    let rows = iris();
    std::fs::write(dir.join("iris.jsonl"), jsonl_text(&rows)).unwrap();
    let jsonl = format!("jsonl(\"iris.jsonl\", {FIELDS})");
    let (code, err) = run(&dir, &jsonl, 1, &[]);
    assert_eq!(code, Some(0), "{err}");
    let manifest = std::fs::read(dir.join("ck/manifest.json")).unwrap();
    // The file goes bad under the checkpoint: a record with three features, a last line cut short.
    let mut text = jsonl_text(&rows).replacen("[5.1, 3.5, 1.4, 0.2]", "[5.1, 3.5, 1.4]", 1);
    text.push_str("{\"features\": [1, 2, 3, 4], \"lab");
    std::fs::write(dir.join("iris.jsonl"), &text).unwrap();
    let (code, err) = run(&dir, &jsonl, 2, &["--resume", "ck"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("E0502") && err.contains("p.dl:10:16"), "at the jsonl(...) source: {err}");
    assert!(
        err.contains("iris.jsonl: line 1: `features` is an array of shape [3], but the source declares `features: f32[4]`")
            || err.contains("iris.jsonl: line 151: column "),
        "{err}"
    );
    assert_eq!(std::fs::read(dir.join("ck/manifest.json")).unwrap(), manifest, "the checkpoint is as it was");
    // Skipped: the run finishes, and says so at each epoch's end.
    let skip = format!("jsonl(\"iris.jsonl\", {FIELDS}, on_error: \"skip\")");
    let (code, err) = run(&dir, &skip, 2, &["--overwrite"]);
    assert_eq!(code, Some(0), "{err}");
    for epoch in [1, 2] {
        assert!(err.contains(&format!("warning: epoch {epoch}: 2 elements could not be read and were left out")), "{err}");
    }
    // Parquet: a row group cut short stops at its first missing row, naming the file and the row.
    write_parquet(&dir.join("iris.parquet"), &rows, 50);
    cut_short(&dir.join("iris.parquet"), 1, 60);
    let parquet = format!("parquet(\"iris.parquet\", {FIELDS})");
    let (code, err) = run(&dir, &parquet, 1, &["--overwrite"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("E0502") && err.contains("iris.parquet: row ") && err.contains("(row group 1, row 5"), "{err}");
    assert!(err.contains("cut short?"), "{err}");
    let skip = format!("parquet(\"iris.parquet\", {FIELDS}, on_error: \"skip\")");
    let (code, err) = run(&dir, &skip, 1, &["--overwrite"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("warning: epoch 1: 10 elements could not be read and were left out"), "{err}");
    // A corrupt footer stops before the first step, naming the file.
    let bytes = std::fs::read(dir.join("iris.parquet")).unwrap();
    std::fs::write(dir.join("iris.parquet"), &bytes[..bytes.len() - 100]).unwrap();
    let (code, err) = run(&dir, &parquet, 1, &["--overwrite"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("E0502") && err.contains("iris.parquet: not a readable Parquet file (its footer)"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
