//! Numeric CSV: comma-separated numbers, an optional header of `skip` lines, label columns
//! (class indices, or numbers for regression targets).
//! Every row must parse and have the same width; a bad row is reported with its line and column.

use super::{read_maybe_gz, DataError};
use crate::runtime::tensor::Tensor;
use dlc_language::types::DType;
use std::path::Path;

#[derive(Clone, Debug)]
pub struct CsvSpec {
    /// Lines to skip at the top (a header).
    pub skip: usize,
    /// The label columns (negative counts from the end); empty for no labels.
    pub label: Vec<i64>,
    /// One row's label: an integer dtype holds class indices (non-negative integers), a float
    /// dtype any number (regression targets); `[]` for one column, `[k]` for k.
    pub label_dtype: DType,
}

/// Features as f32 [rows, columns - labels] (or all columns without labels) and labels as
/// [rows] (one column) or [rows, k] (k columns) of the spec's dtype.
pub fn read(path: &Path, spec: &CsvSpec) -> Result<(Tensor, Option<Tensor>), DataError> {
    let bytes = read_maybe_gz(path)?;
    let text = String::from_utf8(bytes).map_err(|_| super::err(path, "not UTF-8 text"))?;
    let row_err = |row: usize, detail: String| DataError { path: path.to_path_buf(), row: Some(row), detail };
    let class_index = !spec.label_dtype.is_float();
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
        let mut label_cols = Vec::with_capacity(spec.label.len());
        for &l in &spec.label {
            let c = if l < 0 { cells.len() as i64 + l } else { l };
            if c < 0 || c >= cells.len() as i64 {
                return Err(row_err(line_no, format!("label column {l} does not exist: the row has {} columns", cells.len())));
            }
            label_cols.push(c as usize);
        }
        let mut row_labels = vec![0.0; label_cols.len()];
        for (c, cell) in cells.iter().enumerate() {
            let v: f64 = cell.parse().map_err(|_| row_err(line_no, format!("column {}: `{cell}` is not a number", c + 1)))?;
            match label_cols.iter().position(|&lc| lc == c) {
                Some(k) => {
                    if class_index && (v.fract() != 0.0 || v < 0.0) {
                        return Err(row_err(
                            line_no,
                            format!(
                                "column {}: label `{cell}` is not a class index (a non-negative integer); \
                                 for a regression target declare `label_row: f32[]`",
                                c + 1
                            ),
                        ));
                    }
                    row_labels[k] = v;
                }
                None => features.push(v),
            }
        }
        labels.extend(row_labels);
        rows += 1;
    }
    if rows == 0 {
        return Err(super::err(path, "no data rows"));
    }
    let cols = features.len() / rows;
    let x = Tensor::from_f64(DType::F32, vec![rows, cols], features);
    let shape = if spec.label.len() == 1 { vec![rows] } else { vec![rows, spec.label.len()] };
    let y = (!spec.label.is_empty()).then(|| Tensor::from_f64(spec.label_dtype, shape, labels));
    Ok((x, y))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::data::test_data;

    #[test]
    fn reads_iris_and_digits() {
        let (x, y) = read(&test_data("sklearn/iris.csv"), &CsvSpec { skip: 1, label: vec![-1], label_dtype: DType::I64 }).unwrap();
        assert_eq!(x.shape, vec![150, 4]);
        let y = y.unwrap().to_f64();
        for class in 0..3 {
            assert_eq!(y.iter().filter(|v| **v == class as f64).count(), 50);
        }
        let (d, dy) = read(&test_data("sklearn/digits.csv.gz"), &CsvSpec { skip: 0, label: vec![64], label_dtype: DType::I64 }).unwrap();
        assert_eq!(d.shape, vec![1797, 64]);
        assert_eq!(dy.unwrap().to_f64().iter().filter(|v| **v == 0.0).count(), 178);
    }

    #[test]
    fn a_bad_row_names_its_line_and_column() {
        let dir = std::env::temp_dir().join(format!("dlc-csv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("bad.csv");
        std::fs::write(&f, "a,b,label\n1.0,2.0,0\n3.0,oops,1\n").unwrap();
        let e = read(&f, &CsvSpec { skip: 1, label: vec![-1], label_dtype: DType::I64 }).unwrap_err();
        assert_eq!(e.row, Some(3));
        assert!(e.to_string().contains("row 3: column 2: `oops` is not a number"), "{e}");
        std::fs::write(&f, "1,2,0\n3,4\n").unwrap();
        let e = read(&f, &CsvSpec { skip: 0, label: vec![-1], label_dtype: DType::I64 }).unwrap_err();
        assert!(e.detail.contains("2 columns, but earlier rows have 3"), "{e}");
    }

    #[test]
    fn float_targets_and_several_label_columns() {
        let dir = std::env::temp_dir().join(format!("dlc-csv-reg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("reg.csv");
        std::fs::write(&f, "x1,x2,y1,y2\n1.0,2.0,-3.41,0.5\n3.0,4.0,2.25,-1\n").unwrap();
        let e = read(&f, &CsvSpec { skip: 1, label: vec![-1], label_dtype: DType::I64 }).unwrap_err();
        assert!(e.to_string().contains("label_row: f32[]"), "{e}");
        let (x, y) = read(&f, &CsvSpec { skip: 1, label: vec![2], label_dtype: DType::F32 }).unwrap();
        assert_eq!(x.shape, vec![2, 3]);
        assert_eq!(y.unwrap().to_f64(), vec![-3.41f32 as f64, 2.25]);
        let (x, y) = read(&f, &CsvSpec { skip: 1, label: vec![2, 3], label_dtype: DType::F32 }).unwrap();
        assert_eq!(x.to_f64(), vec![1.0, 2.0, 3.0, 4.0]);
        let y = y.unwrap();
        assert_eq!(y.shape, vec![2, 2]);
        assert_eq!(y.to_f64(), vec![-3.41f32 as f64, 0.5, 2.25, -1.0]);
    }
}
