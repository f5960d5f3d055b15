//! JSON Lines: one JSON object a line, each declared field read from the key of its name
//! (fields.rs says how a value becomes a tensor). Opening scans the file once for where each
//! non-blank line starts (16 bytes a record: the memory the source keeps, whatever the file's
//! size); record `i` is then one positional read and one parse, on whichever worker of the data
//! feed asks for it. A gzip file cannot be read at an offset: it is decompressed into memory
//! whole when opened.

use super::fields::{to_tensor, AsCell, Cell};
use super::{err, DataError};
use crate::runtime::tensor::Tensor;
use dlc_language::types::TensorTy;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// Where a record is: its first byte, its length and its 1-based line number.
struct Line {
    at: u64,
    len: u32,
    number: u32,
}

enum Source {
    File(std::fs::File),
    /// A gzip file's contents.
    Memory(Vec<u8>),
}

pub struct JsonLines {
    path: PathBuf,
    bytes: Source,
    lines: Vec<Line>,
    fields: Vec<(String, TensorTy)>,
}

impl AsCell for serde_json::Value {
    fn cell(&self) -> Cell<'_, Self> {
        use serde_json::Value as J;
        match self {
            J::Number(n) => match n.as_i64().map(|i| i as f64).or_else(|| n.as_u64().map(|u| u as f64)) {
                Some(value) => Cell::Num { value, integral: true },
                None => Cell::Num { value: n.as_f64().unwrap_or(f64::NAN), integral: false },
            },
            J::Bool(b) => Cell::Bool(*b),
            J::Array(items) => Cell::List(items),
            J::Null => Cell::Null,
            J::String(_) => Cell::Other("a string"),
            J::Object(_) => Cell::Other("an object"),
        }
    }
}

/// The non-blank lines of `r`, in order.
fn index(path: &Path, mut r: impl BufRead) -> Result<Vec<Line>, DataError> {
    let (mut lines, mut at, mut start, mut number, mut blank) = (vec![], 0u64, 0u64, 1u64, true);
    let push = |start: u64, end: u64, number: u64, lines: &mut Vec<Line>| -> Result<(), DataError> {
        let len = u32::try_from(end - start).map_err(|_| err(path, format!("line {number}: longer than 4 GiB")))?;
        let number = u32::try_from(number).map_err(|_| err(path, "more than 4 billion lines"))?;
        lines.push(Line { at: start, len, number });
        Ok(())
    };
    loop {
        let buf = r.fill_buf().map_err(|e| err(path, format!("cannot read: {e}")))?;
        if buf.is_empty() {
            break;
        }
        let n = buf.len();
        for (k, b) in buf.iter().enumerate() {
            if *b == b'\n' {
                let end = at + k as u64;
                if !blank {
                    push(start, end, number, &mut lines)?;
                }
                (start, number, blank) = (end + 1, number + 1, true);
            } else if !b.is_ascii_whitespace() {
                blank = false;
            }
        }
        at += n as u64;
        r.consume(n);
    }
    if !blank {
        push(start, at, number, &mut lines)?;
    }
    Ok(lines)
}

/// A parse error in the words of one line: serde_json's message without its "at line 1".
fn json_error(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let what = text.rfind(" at line ").map_or(text.as_str(), |i| &text[..i]);
    let cut = if e.classify() == serde_json::error::Category::Eof { ": the line ends early (is the file cut short?)" } else { "" };
    format!("column {}: not valid JSON ({what}){cut}", e.column())
}

impl JsonLines {
    /// Index the records of `path`, to be read as `fields`.
    pub fn open(path: &Path, fields: &[(String, TensorTy)]) -> Result<JsonLines, DataError> {
        let mut file = std::fs::File::open(path).map_err(|e| err(path, format!("cannot read: {e}")))?;
        let mut magic = [0u8; 2];
        let got = file.read(&mut magic).map_err(|e| err(path, format!("cannot read: {e}")))?;
        let (bytes, lines) = if magic[..got] == [0x1f, 0x8b] {
            let data = super::read_maybe_gz(path)?;
            let lines = index(path, &data[..])?;
            (Source::Memory(data), lines)
        } else {
            let lines = index(path, BufReader::with_capacity(1 << 16, std::fs::File::open(path).map_err(|e| err(path, e.to_string()))?))?;
            (Source::File(file), lines)
        };
        if lines.is_empty() {
            return Err(err(path, "holds no records (JSON Lines: one JSON object a line)"));
        }
        Ok(JsonLines { path: path.to_path_buf(), bytes, lines, fields: fields.to_vec() })
    }

    pub fn len(&self) -> usize {
        self.lines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Record `i`: its fields' tensors, in the declared order.
    pub fn read(&self, i: usize) -> Result<Vec<Tensor>, DataError> {
        let line = &self.lines[i];
        let at_line = |detail: String| err(&self.path, format!("line {}: {detail}", line.number));
        let mut own = vec![];
        let text: &[u8] = match &self.bytes {
            Source::Memory(data) => &data[line.at as usize..line.at as usize + line.len as usize],
            Source::File(file) => {
                use std::os::unix::fs::FileExt;
                own.resize(line.len as usize, 0);
                file.read_exact_at(&mut own, line.at).map_err(|e| at_line(format!("cannot read: {e}")))?;
                &own
            }
        };
        let record: serde_json::Value = serde_json::from_slice(text).map_err(|e| at_line(json_error(&e)))?;
        let serde_json::Value::Object(map) = &record else {
            return Err(at_line(format!("{} where a JSON object is expected", kind(&record))));
        };
        self.fields
            .iter()
            .map(|(name, ty)| match map.get(name) {
                Some(v) => to_tensor(name, ty, v).map_err(at_line),
                None => Err(at_line(format!("no key `{name}` (the source declares `{name}: {ty}`)"))),
            })
            .collect()
    }
}

/// What a JSON value is, in words.
fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Null => "null",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlc_language::types::{DType, Dim};

    fn write(name: &str, bytes: &[u8]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("dlc-jsonl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    fn iris_fields() -> Vec<(String, TensorTy)> {
        vec![("features".into(), TensorTy::new(DType::F32, vec![Dim::known(4)])), ("label".into(), TensorTy::new(DType::I64, vec![]))]
    }

    #[test]
    fn records_are_read_by_index_skipping_blank_lines_and_other_keys() {
        let text = "{\"features\": [5.1, 3.5, 1.4, 0.2], \"label\": 0, \"name\": \"setosa\"}\n\n  \r\n\
                    {\"label\": 2, \"features\": [6.3, 3.3, 6, 2.5]}\r\n{\"features\": [1, 2, 3, 4], \"label\": 1}";
        let p = write("iris.jsonl", text.as_bytes());
        let r = JsonLines::open(&p, &iris_fields()).unwrap();
        assert_eq!(r.len(), 3);
        for i in [2, 0, 1] {
            let e = r.read(i).unwrap();
            assert_eq!(e[0].shape, vec![4]);
            assert_eq!(e[1].shape, Vec::<usize>::new());
            let want: &[f64] =
                [&[5.1f32 as f64, 3.5, 1.4f32 as f64, 0.2f32 as f64][..], &[6.3f32 as f64, 3.3f32 as f64, 6.0, 2.5], &[1.0, 2.0, 3.0, 4.0]]
                    [i];
            assert_eq!(e[0].to_f64(), want, "record {i}");
            assert_eq!(e[1].to_f64(), vec![[0.0, 2.0, 1.0][i]]);
        }
        // Gzip: read whole, the same records.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut gz, text.as_bytes()).unwrap();
        let p = write("iris.jsonl.gz", &gz.finish().unwrap());
        let z = JsonLines::open(&p, &iris_fields()).unwrap();
        assert_eq!(z.len(), 3);
        assert_eq!(z.read(1).unwrap()[0].to_f64(), r.read(1).unwrap()[0].to_f64());
    }

    #[test]
    fn a_bad_record_names_its_line_and_what_is_wrong() {
        let text = "{\"features\": [1, 2, 3, 4], \"label\": 0}\n\n{\"features\": [1, 2, 3], \"label\": 0}\n\
                    {\"features\": [1, 2, 3, 4]}\n{\"features\": [1, 2, 3, 4], \"label\": 1.5}\n[1, 2]\n\
                    {\"features\": [1, \"x\", 3, 4], \"label\": 0}\n{\"features\": [1, 2, 3, 4], \"lab";
        let p = write("bad.jsonl", text.as_bytes());
        let r = JsonLines::open(&p, &iris_fields()).unwrap();
        assert_eq!(r.len(), 7);
        assert!(r.read(0).is_ok());
        let e = |i: usize| r.read(i).unwrap_err().to_string();
        assert!(
            e(1).ends_with("bad.jsonl: line 3: `features` is an array of shape [3], but the source declares `features: f32[4]`"),
            "{}",
            e(1)
        );
        assert!(e(2).contains("line 4: no key `label` (the source declares `label: i64[]`)"), "{}", e(2));
        assert!(e(3).contains("line 5: `label` holds 1.5, not an integer"), "{}", e(3));
        assert!(e(4).contains("line 6: an array where a JSON object is expected"), "{}", e(4));
        assert!(e(5).contains("line 7: `features` holds a string, not a number"), "{}", e(5));
        assert!(e(6).contains("line 8: column ") && e(6).contains("not valid JSON") && e(6).contains("cut short"), "{}", e(6));
        let p = write("empty.jsonl", b"\n  \n");
        assert!(JsonLines::open(&p, &iris_fields()).err().unwrap().to_string().contains("holds no records"));
    }
}
