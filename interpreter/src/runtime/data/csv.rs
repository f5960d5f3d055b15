//! Numeric CSV: comma-separated numbers, an optional header of `skip` lines, one label column.
//! Every row must parse and have the same width; a bad row is reported with its line and column.

use super::{read_maybe_gz, DataError};
use crate::runtime::tensor::Tensor;
use dlc_language::types::DType;
use std::path::Path;

#[derive(Clone, Debug)]
pub struct CsvSpec {
    /// Lines to skip at the top (a header).
    pub skip: usize,
    /// The label column (negative counts from the end); None for no labels.
    pub label: Option<i64>,
}

/// Features as f32 [rows, columns - 1] (or all columns without a label) and labels as i64 [rows].
pub fn read(path: &Path, spec: &CsvSpec) -> Result<(Tensor, Option<Tensor>), DataError> {
    let bytes = read_maybe_gz(path)?;
    let text = String::from_utf8(bytes).map_err(|_| super::err(path, "not UTF-8 text"))?;
    let row_err = |row: usize, detail: String| DataError { path: path.to_path_buf(), row: Some(row), detail };
    let mut width: Option<usize> = None;
    let mut features = Vec::new();
    let mut labels = Vec::new();
    let mut rows = 0;
    for (i, line) in text.lines().enumerate().skip(spec.skip) {
        let line_no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let cells: Vec<&str> = line.split(',').map(|c| c.trim()).collect();
        match width {
            None => width = Some(cells.len()),
            Some(w) if w != cells.len() => return Err(row_err(line_no, format!("{} columns, but earlier rows have {w}", cells.len()))),
            _ => {}
        }
        let label_col = match spec.label {
            Some(l) if l < 0 => Some((cells.len() as i64 + l) as usize),
            Some(l) => Some(l as usize),
            None => None,
        };
        if let Some(lc) = label_col {
            if lc >= cells.len() {
                return Err(row_err(line_no, format!("label column {lc} does not exist: the row has {} columns", cells.len())));
            }
        }
        for (c, cell) in cells.iter().enumerate() {
            let v: f64 = cell.parse().map_err(|_| row_err(line_no, format!("column {}: `{cell}` is not a number", c + 1)))?;
            if Some(c) == label_col {
                if v.fract() != 0.0 || v < 0.0 {
                    return Err(row_err(
                        line_no,
                        format!("column {}: label `{cell}` is not a class index (a non-negative integer)", c + 1),
                    ));
                }
                labels.push(v);
            } else {
                features.push(v);
            }
        }
        rows += 1;
    }
    if rows == 0 {
        return Err(super::err(path, "no data rows"));
    }
    let cols = features.len() / rows;
    let x = Tensor::from_f64(DType::F32, vec![rows, cols], features);
    let y = spec.label.map(|_| Tensor::from_f64(DType::I64, vec![rows], labels));
    Ok((x, y))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::data::test_data;

    #[test]
    fn reads_iris_and_digits() {
        let (x, y) = read(&test_data("sklearn/iris.csv"), &CsvSpec { skip: 1, label: Some(-1) }).unwrap();
        assert_eq!(x.shape, vec![150, 4]);
        let y = y.unwrap().to_f64();
        for class in 0..3 {
            assert_eq!(y.iter().filter(|v| **v == class as f64).count(), 50);
        }
        let (d, dy) = read(&test_data("sklearn/digits.csv.gz"), &CsvSpec { skip: 0, label: Some(64) }).unwrap();
        assert_eq!(d.shape, vec![1797, 64]);
        assert_eq!(dy.unwrap().to_f64().iter().filter(|v| **v == 0.0).count(), 178);
    }

    #[test]
    fn a_bad_row_names_its_line_and_column() {
        let dir = std::env::temp_dir().join(format!("dlc-csv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("bad.csv");
        std::fs::write(&f, "a,b,label\n1.0,2.0,0\n3.0,oops,1\n").unwrap();
        let e = read(&f, &CsvSpec { skip: 1, label: Some(-1) }).unwrap_err();
        assert_eq!(e.row, Some(3));
        assert!(e.to_string().contains("row 3: column 2: `oops` is not a number"), "{e}");
        std::fs::write(&f, "1,2,0\n3,4\n").unwrap();
        let e = read(&f, &CsvSpec { skip: 0, label: Some(-1) }).unwrap_err();
        assert!(e.detail.contains("2 columns, but earlier rows have 3"), "{e}");
    }
}
