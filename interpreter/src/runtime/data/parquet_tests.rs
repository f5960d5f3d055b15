//! The Parquet reader against files the parquet crate's own writer makes: values by row across
//! row groups and codecs, and every kind of bad file named with its row.

use super::*;
use ::parquet::basic::Compression;
use ::parquet::data_type::{ByteArray, ByteArrayType, FloatType, Int64Type};
use ::parquet::file::metadata::ParquetMetaDataWriter;
use ::parquet::file::properties::WriterProperties;
use ::parquet::file::writer::SerializedFileWriter;
use ::parquet::schema::parser::parse_message_type;
use dlc_language::types::{DType, Dim};

/// One column of a row group, as the writer takes it.
enum Col {
    /// A LIST of floats, `per` a row.
    Floats(Vec<f32>, usize),
    /// Int64s; with definition levels for an optional column (0: null).
    Ints(Vec<i64>, Option<Vec<i16>>),
    Strings(Vec<&'static str>),
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dlc-parquet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn write(path: &Path, schema: &str, compression: Compression, groups: &[Vec<Col>]) {
    let schema = Arc::new(parse_message_type(schema).unwrap());
    let props = Arc::new(WriterProperties::builder().set_compression(compression).build());
    let mut w = SerializedFileWriter::new(File::create(path).unwrap(), schema, props).unwrap();
    for cols in groups {
        let mut rg = w.next_row_group().unwrap();
        for col in cols {
            let mut c = rg.next_column().unwrap().unwrap();
            match col {
                Col::Floats(v, per) => {
                    let rep: Vec<i16> = (0..v.len()).map(|k| (k % per != 0) as i16).collect();
                    c.typed::<FloatType>().write_batch(v, Some(&vec![1; v.len()]), Some(&rep)).unwrap();
                }
                Col::Ints(v, def) => {
                    c.typed::<Int64Type>().write_batch(v, def.as_deref(), None).unwrap();
                }
                Col::Strings(v) => {
                    let v: Vec<ByteArray> = v.iter().map(|s| ByteArray::from(*s)).collect();
                    c.typed::<ByteArrayType>().write_batch(&v, None, None).unwrap();
                }
            }
            c.close().unwrap();
        }
        rg.close().unwrap();
    }
    w.close().unwrap();
}

const IRIS: &str = "message iris { required group features (LIST) { repeated group list { required float element; } } \
                    required int64 label; required binary name (STRING); }";

fn fields(n: i64) -> Vec<(String, TensorTy)> {
    vec![("features".into(), TensorTy::new(DType::F32, vec![Dim::known(n)])), ("label".into(), TensorTy::new(DType::I64, vec![]))]
}

/// Row groups of 4, 3 and 5 rows: row i's features are (i, i + 0.5, -i, 0.25 i), its label i % 3.
fn groups() -> Vec<Vec<Col>> {
    let mut out = vec![];
    let mut i = 0;
    for n in [4, 3, 5] {
        let rows: Vec<usize> = (i..i + n).collect();
        i += n;
        let x = rows.iter().flat_map(|&i| [i as f32, i as f32 + 0.5, -(i as f32), 0.25 * i as f32]).collect();
        let y = rows.iter().map(|&i| (i % 3) as i64).collect();
        out.push(vec![Col::Floats(x, 4), Col::Ints(y, None), Col::Strings(vec!["x"; n])]);
    }
    out
}

#[test]
fn rows_are_read_by_index_across_row_groups_and_codecs() {
    for (name, codec) in
        [("snappy", Compression::SNAPPY), ("zstd", Compression::ZSTD(Default::default())), ("gzip", Compression::GZIP(Default::default()))]
    {
        let p = scratch(&format!("iris-{name}.parquet"));
        write(&p, IRIS, codec, &groups());
        let r = ParquetRows::open(&p, &fields(4)).unwrap();
        assert_eq!((r.len(), r.row_groups()), (12, 3));
        for i in [11, 0, 5, 3, 4, 7, 6] {
            let e = r.read(i).unwrap();
            let f = i as f64;
            assert_eq!(e[0].to_f64(), vec![f, f + 0.5, -f, 0.25 * f], "{name}: row {i}");
            assert_eq!(e[0].shape, vec![4]);
            assert_eq!((e[1].shape.clone(), e[1].to_f64()), (vec![], vec![(i % 3) as f64]));
        }
        assert_eq!(r.groups.held(), 3, "each group decoded once and kept");
    }
}

#[test]
fn wrong_columns_stop_at_open_and_wrong_values_name_their_row() {
    let p = scratch("iris.parquet");
    write(&p, IRIS, Compression::SNAPPY, &groups());
    let e = ParquetRows::open(&p, &[("target".into(), TensorTy::new(DType::I64, vec![]))]).err().unwrap().to_string();
    assert!(e.contains("iris.parquet: has no column `target` (its columns: features, label, name)"), "{e}");
    let e = ParquetRows::open(&p, &[("name".into(), TensorTy::new(DType::I64, vec![]))]).err().unwrap().to_string();
    assert!(e.contains("column `name` holds BYTE_ARRAY values, not numbers"), "{e}");
    let e = ParquetRows::open(&p, &[("features".into(), TensorTy::new(DType::F32, vec![]))]).err().unwrap().to_string();
    assert!(e.contains("column `features` is a list"), "{e}");
    let e = ParquetRows::open(&p, &[("label".into(), TensorTy::new(DType::I64, vec![Dim::known(2)]))]).err().unwrap().to_string();
    assert!(e.contains("column `label` holds one number a row"), "{e}");
    // Lists of 4 read as `f32[3]`: each row's error names it, in the file and in its group.
    let r = ParquetRows::open(&p, &fields(3)).unwrap();
    let e = r.read(5).unwrap_err().to_string();
    assert!(e.ends_with("iris.parquet: row 5 (row group 1, row 1 of it): `features` is an array of shape [4], but the source declares `features: f32[3]`"), "{e}");
    // A null in an optional column.
    let p = scratch("nulls.parquet");
    let schema = "message m { required group features (LIST) { repeated group list { required float element; } } optional int64 label; }";
    write(&p, schema, Compression::SNAPPY, &[vec![Col::Floats(vec![1.0; 8], 4), Col::Ints(vec![1], Some(vec![0, 1]))]]);
    let r = ParquetRows::open(&p, &fields(4)).unwrap();
    assert!(r.read(0).unwrap_err().to_string().contains("row 0 (row group 0, row 0 of it): `label` is null"));
    assert_eq!(r.read(1).unwrap()[1].to_f64(), vec![1.0]);
}

#[test]
fn a_corrupt_footer_stops_at_open_naming_the_file() {
    let p = scratch("cut.parquet");
    write(&p, IRIS, Compression::SNAPPY, &groups());
    let bytes = std::fs::read(&p).unwrap();
    // Cut off the end (the footer and its magic), as a copy that stopped early leaves it.
    std::fs::write(&p, &bytes[..bytes.len() - 30]).unwrap();
    let e = ParquetRows::open(&p, &fields(4)).err().unwrap().to_string();
    assert!(e.contains("cut.parquet: not a readable Parquet file (its footer)"), "{e}");
    // The footer's bytes overwritten: its length and magic intact, its metadata garbage.
    let mut bad = bytes.clone();
    let footer = u32::from_le_bytes(bad[bad.len() - 8..bad.len() - 4].try_into().unwrap()) as usize;
    let start = bad.len() - 8 - footer;
    bad[start..start + footer].iter_mut().enumerate().for_each(|(k, b)| *b = (k * 37 % 251) as u8);
    std::fs::write(&p, &bad).unwrap();
    let e = ParquetRows::open(&p, &fields(4)).err().unwrap().to_string();
    assert!(e.contains("cut.parquet: not a readable Parquet file (its footer)"), "{e}");
}

/// Rewrite `path`'s footer so that row group `group` claims `rows` rows (more than it holds).
fn cut_short(path: &Path, group: usize, rows: i64) {
    let bytes = std::fs::read(path).unwrap();
    let meta = SerializedFileReader::new(::bytes::Bytes::from(bytes.clone())).unwrap().metadata().clone();
    let footer = u32::from_le_bytes(bytes[bytes.len() - 8..bytes.len() - 4].try_into().unwrap()) as usize;
    let mut b = meta.into_builder();
    for (k, rg) in b.take_row_groups().into_iter().enumerate() {
        b = b.add_row_group(if k == group { rg.into_builder().set_num_rows(rows).build().unwrap() } else { rg });
    }
    let mut out = bytes[..bytes.len() - 8 - footer].to_vec();
    ParquetMetaDataWriter::new(&mut out, &b.build()).finish().unwrap();
    std::fs::write(path, out).unwrap();
}

#[test]
fn a_row_group_cut_short_fails_on_its_missing_rows_only() {
    let p = scratch("short.parquet");
    write(&p, IRIS, Compression::SNAPPY, &groups());
    cut_short(&p, 1, 5);
    let r = ParquetRows::open(&p, &fields(4)).unwrap();
    assert_eq!(r.len(), 14, "4 + 5 (claimed) + 5");
    for i in [0, 4, 5, 6, 9, 13] {
        assert!(r.read(i).is_ok(), "row {i}");
    }
    let f = 6.0;
    assert_eq!(r.read(6).unwrap()[0].to_f64(), vec![f, f + 0.5, -f, 0.25 * f]);
    for (i, k) in [(7, 3), (8, 4)] {
        let e = r.read(i).unwrap_err().to_string();
        assert!(
            e.contains(&format!("short.parquet: row {i} (row group 1, row {k} of it): the row group cannot be read from its row 3 on")),
            "{e}"
        );
        assert!(e.contains("cut short?"), "{e}");
    }
}
