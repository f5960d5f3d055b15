//! Printing tensors the way PyTorch does (torch/_tensor_str.py): 4 decimals or scientific
//! notation chosen from the value range, columns aligned, rows wrapped at 80 characters, and the
//! middle elided with `...` when there are more than 1000 elements.

use super::tensor::Tensor;
use dlc_language::types::DType;

const EDGE: usize = 3;
const THRESHOLD: usize = 1000;
const LINEWIDTH: usize = 80;

enum Style {
    Int,
    Bool,
    /// Float values that are all integral: `1.`, `-2.`
    IntegralFloat,
    Fixed,
    Sci,
}

struct Formatter {
    style: Style,
    width: usize,
}

fn sci(v: f64) -> String {
    // Python's `{:.4e}`: mantissa with 4 decimals, exponent with sign and at least 2 digits.
    let s = format!("{v:.4e}");
    match s.split_once('e') {
        Some((m, e)) => {
            let (sign, digits) = match e.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', e),
            };
            format!("{m}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

impl Formatter {
    fn new(t: &Tensor, vals: &[f64]) -> Formatter {
        let style = if t.dtype == DType::Bool {
            Style::Bool
        } else if !t.dtype.is_float() {
            Style::Int
        } else {
            let finite: Vec<f64> = vals.iter().copied().filter(|v| v.is_finite()).collect();
            let nonzero: Vec<f64> = finite.iter().map(|v| v.abs()).filter(|v| *v != 0.0).collect();
            let max = nonzero.iter().copied().fold(0.0f64, f64::max);
            let min = nonzero.iter().copied().fold(f64::INFINITY, f64::min);
            let integral = finite.iter().all(|v| v.fract() == 0.0);
            if nonzero.is_empty() {
                if integral {
                    Style::IntegralFloat
                } else {
                    Style::Fixed
                }
            } else if integral {
                if max / min > 1000.0 || max > 1e8 {
                    Style::Sci
                } else {
                    Style::IntegralFloat
                }
            } else if max / min > 1000.0 || max > 1e8 || min < 1e-4 {
                Style::Sci
            } else {
                Style::Fixed
            }
        };
        let mut f = Formatter { style, width: 0 };
        f.width = vals.iter().map(|v| f.raw(*v).chars().count()).max().unwrap_or(1);
        f
    }

    fn raw(&self, v: f64) -> String {
        if v.is_nan() {
            return "nan".into();
        }
        if v.is_infinite() {
            return if v > 0.0 { "inf".into() } else { "-inf".into() };
        }
        match self.style {
            Style::Int => format!("{}", v as i64),
            Style::Bool => (if v != 0.0 { "True" } else { "False" }).into(),
            Style::IntegralFloat => format!("{v:.0}."),
            Style::Fixed => format!("{v:.4}"),
            Style::Sci => sci(v),
        }
    }

    fn fmt(&self, v: f64) -> String {
        format!("{:>w$}", self.raw(v), w = self.width)
    }
}

/// Indices shown along a dim of size n (the first and last EDGE when summarising).
fn shown(n: usize, summarize: bool) -> Vec<Option<usize>> {
    if summarize && n > 2 * EDGE {
        (0..EDGE).map(Some).chain(std::iter::once(None)).chain((n - EDGE..n).map(Some)).collect()
    } else {
        (0..n).map(Some).collect()
    }
}

fn collect_shown(t: &[f64], shape: &[usize], summarize: bool, out: &mut Vec<f64>) {
    if shape.is_empty() {
        out.extend_from_slice(t);
        return;
    }
    let inner: usize = shape[1..].iter().product();
    for i in shown(shape[0], summarize).into_iter().flatten() {
        collect_shown(&t[i * inner..(i + 1) * inner], &shape[1..], summarize, out);
    }
}

fn render(t: &[f64], shape: &[usize], f: &Formatter, indent: usize, summarize: bool) -> String {
    if shape.len() == 1 {
        let items: Vec<String> = shown(shape[0], summarize)
            .into_iter()
            .map(|i| match i {
                Some(i) => f.fmt(t[i]),
                None => " ...".into(),
            })
            .collect();
        let per_line = ((LINEWIDTH.saturating_sub(indent)) / (f.width + 2)).max(1);
        let lines: Vec<String> = items.chunks(per_line).map(|c| c.join(", ")).collect();
        return format!("[{}]", lines.join(&format!(",\n{}", " ".repeat(indent + 1))));
    }
    let inner: usize = shape[1..].iter().product();
    let sep = format!(",{}{}", "\n".repeat(shape.len() - 1), " ".repeat(indent + 1));
    let parts: Vec<String> = shown(shape[0], summarize)
        .into_iter()
        .map(|i| match i {
            Some(i) => render(&t[i * inner..(i + 1) * inner], &shape[1..], f, indent + 1, summarize),
            None => "...".into(),
        })
        .collect();
    format!("[{}]", parts.join(&sep))
}

/// `tensor([...])` with a `dtype=` suffix for dtypes other than f32, i64 and bool.
pub fn format_tensor(t: &Tensor) -> String {
    let vals = t.to_f64();
    let summarize = t.numel() > THRESHOLD;
    let mut visible = vec![];
    collect_shown(&vals, &t.shape, summarize, &mut visible);
    let f = Formatter::new(t, &visible);
    let body = if t.shape.is_empty() {
        f.raw(vals.first().copied().unwrap_or(0.0))
    } else if t.numel() == 0 {
        "[]".to_string()
    } else {
        render(&vals, &t.shape, &f, "tensor(".len(), summarize)
    };
    let mut suffix = match t.dtype {
        DType::F32 | DType::I64 | DType::Bool => String::new(),
        d => format!(", dtype={d}"),
    };
    // PyTorch shows no shape; when the middle is elided the brackets no longer tell it, so say it.
    if summarize {
        let dims: Vec<String> = t.shape.iter().map(|d| d.to_string()).collect();
        suffix.push_str(&format!(", shape=[{}]", dims.join(", ")));
    }
    format!("tensor({body}{suffix})")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: Vec<usize>, v: Vec<f32>) -> Tensor {
        Tensor::f32(shape, v)
    }

    #[test]
    fn fixed_matrix() {
        let s = format_tensor(&t(vec![2, 2], vec![0.1, -0.2, 1.0, 2.0]));
        assert_eq!(s, "tensor([[ 0.1000, -0.2000],\n        [ 1.0000,  2.0000]])");
    }

    #[test]
    fn integral_and_scalar() {
        assert_eq!(format_tensor(&t(vec![3], vec![1.0, 2.0, 3.0])), "tensor([1., 2., 3.])");
        assert_eq!(format_tensor(&t(vec![], vec![0.5])), "tensor(0.5000)");
    }

    #[test]
    fn scientific() {
        assert_eq!(format_tensor(&t(vec![2], vec![1e-5, 1.0])), "tensor([1.0000e-05, 1.0000e+00])");
    }

    #[test]
    fn summarised() {
        // As torch.arange(2000.): the value range (> 1000x) switches to scientific notation.
        let s = format_tensor(&t(vec![2000], (0..2000).map(|i| i as f32).collect()));
        assert_eq!(s, "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n        1.9990e+03], shape=[2000])");
        let s = format_tensor(&t(vec![2000], (0..2000).map(|i| (i % 7 + 1) as f32).collect()));
        assert_eq!(s, "tensor([1., 2., 3.,  ..., 3., 4., 5.], shape=[2000])");
    }

    #[test]
    fn three_d_blank_lines_and_dtype() {
        let x = Tensor::from_f64(DType::I64, vec![2, 1, 2], vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(format_tensor(&x), "tensor([[[1, 2]],\n\n        [[3, 4]]])");
        let y = Tensor::from_f64(DType::F64, vec![1], vec![1.5]);
        assert_eq!(format_tensor(&y), "tensor([1.5000], dtype=f64)");
    }
}
