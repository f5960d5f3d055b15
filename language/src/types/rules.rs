//! Shape rules of the primitives. Each returns the result shape or a [`RuleError`] that names the op
//! and both shapes, so the checker can put it on the right span.

use super::shape::{numel, shape_str, Dim, Shape};

#[derive(Clone, Debug, PartialEq)]
pub struct RuleError {
    pub code: &'static str,
    pub message: String,
    pub help: Option<String>,
}

fn err(code: &'static str, message: String) -> RuleError {
    RuleError { code, message, help: None }
}

impl RuleError {
    pub fn help(mut self, h: impl Into<String>) -> Self {
        self.help = Some(h.into());
        self
    }
}

fn br(shape: &[Dim]) -> String {
    format!("[{}]", shape_str(shape))
}

/// NumPy/PyTorch broadcasting: align from the right; each pair equal or one of them 1.
pub fn broadcast(a: &[Dim], b: &[Dim]) -> Result<Shape, RuleError> {
    let n = a.len().max(b.len());
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let da = if i + a.len() >= n { a[i + a.len() - n].clone() } else { Dim::known(1) };
        let db = if i + b.len() >= n { b[i + b.len() - n].clone() } else { Dim::known(1) };
        let d = if da.is_one() {
            db
        } else if db.is_one() {
            da
        } else if da.compatible(&db) {
            da.unify(&db)
        } else {
            return Err(err(
                "E0301",
                format!(
                    "shapes {} and {} do not broadcast: dimension {} is {} on the left and {} on the right",
                    br(a),
                    br(b),
                    i as i64 - n as i64,
                    da,
                    db
                ),
            )
            .help("dimensions must be equal or 1 when aligned from the right; use `unsqueeze` or `reshape` to line them up"));
        };
        out.push(d);
    }
    Ok(out)
}

/// Matrix product with PyTorch's `matmul` semantics (1-D operands are promoted and the added dim
/// removed; leading dims broadcast).
pub fn matmul(a: &[Dim], b: &[Dim]) -> Result<Shape, RuleError> {
    if a.is_empty() || b.is_empty() {
        return Err(err("E0303", "matmul needs tensors with at least one dimension, found a 0-d tensor".into())
            .help("use `*` to multiply by a scalar"));
    }
    let a2: Shape = if a.len() == 1 { vec![Dim::known(1), a[0].clone()] } else { a.to_vec() };
    let b2: Shape = if b.len() == 1 { vec![b[0].clone(), Dim::known(1)] } else { b.to_vec() };
    let (m, k1) = (&a2[a2.len() - 2], &a2[a2.len() - 1]);
    let (k2, n) = (&b2[b2.len() - 2], &b2[b2.len() - 1]);
    if !k1.compatible(k2) {
        return Err(err("E0302", format!("matmul needs the inner dimensions to agree: {} @ {}, {} ≠ {}", br(a), br(b), k1, k2)).help(
            "the last dimension of the left operand must equal the second-to-last of the right; transpose one operand with `.T` if needed",
        ));
    }
    let batch = broadcast(&a2[..a2.len() - 2], &b2[..b2.len() - 2])?;
    let mut out = batch;
    if a.len() > 1 {
        out.push(m.clone());
    }
    if b.len() > 1 {
        out.push(n.clone());
    }
    Ok(out)
}

/// Normalise a possibly negative axis.
pub fn axis(axis: i64, rank: usize) -> Result<usize, RuleError> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r.max(1) || (rank == 0 && axis != 0 && axis != -1) {
        return Err(err("E0305", format!("axis {axis} is out of range for a tensor of rank {rank}")).help(format!(
            "valid axes are {} to {}",
            -r.max(1),
            r.max(1) - 1
        )));
    }
    Ok(a as usize)
}

/// The shape after reducing `axes` (already normalised), keeping them as size 1.
pub fn reduce_keepdim(shape: &[Dim], axes: &[usize]) -> Shape {
    shape.iter().enumerate().map(|(i, d)| if axes.contains(&i) { Dim::known(1) } else { d.clone() }).collect()
}

pub fn drop_axes(shape: &[Dim], axes: &[usize]) -> Shape {
    shape.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, d)| d.clone()).collect()
}

/// `reshape(x, target)`: at most one `-1` (None here), and element counts must agree.
pub fn reshape(shape: &[Dim], target: &[Option<Dim>]) -> Result<Shape, RuleError> {
    let total = numel(shape);
    let holes = target.iter().filter(|d| d.is_none()).count();
    if holes > 1 {
        return Err(err("E0304", "reshape can infer only one dimension (`-1`)".into()));
    }
    let known = target.iter().flatten().fold(Dim::known(1), |acc, d| acc.mul(d));
    let fmt_target = || target.iter().map(|d| d.as_ref().map(|d| d.to_string()).unwrap_or("-1".into())).collect::<Vec<_>>().join(", ");
    if holes == 1 {
        let Some(hole) = total.div(&known) else {
            return Err(err(
                "E0304",
                format!(
                    "cannot reshape {} ({} elements) into ({}): {} is not a multiple of {}",
                    br(shape),
                    total,
                    fmt_target(),
                    total,
                    known
                ),
            ));
        };
        return Ok(target.iter().map(|d| d.clone().unwrap_or_else(|| hole.clone())).collect());
    }
    if !total.compatible(&known) {
        return Err(err("E0304", format!("cannot reshape {} into ({}): element count {} ≠ {}", br(shape), fmt_target(), total, known))
            .help("the product of the new dimensions must equal the number of elements"));
    }
    Ok(target.iter().flatten().cloned().collect())
}

/// Output size of a sliding window: floor((n + 2p - d(k-1) - 1)/s) + 1.
fn window_out(n: &Dim, k: i64, s: i64, p: i64, d: i64) -> Result<Dim, i64> {
    match n.as_known() {
        Some(n) => {
            let eff = d * (k - 1) + 1;
            let padded = n + 2 * p;
            if padded < eff || s <= 0 {
                return Err(padded);
            }
            Ok(Dim::known((padded - eff) / s + 1))
        }
        None => Ok(if k == 1 && s == 1 && p == 0 { n.clone() } else { Dim::Any }),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Conv2dAttrs {
    pub stride: (i64, i64),
    pub padding: (i64, i64),
    pub dilation: (i64, i64),
    pub groups: i64,
    /// Channels-last (the layout pass's choice, never the source's): x and y `[N, H, W, C]`,
    /// w `[O, kH, kW, C / groups]`, as cuDNN's NHWC tensors and filters.
    pub channels_last: bool,
}

impl Conv2dAttrs {
    /// The attributes as written in the source: NCHW.
    pub fn nchw(stride: (i64, i64), padding: (i64, i64), dilation: (i64, i64), groups: i64) -> Conv2dAttrs {
        Conv2dAttrs { stride, padding, dilation, groups, channels_last: false }
    }
}

/// The axes of a channels-last array (`[N, H, W, C]`, `[O, kH, kW, I]`) in NCHW order.
pub const TO_NCHW: [usize; 4] = [0, 3, 1, 2];
/// The axes of an NCHW array in channels-last order.
pub const TO_CHANNELS_LAST: [usize; 4] = [0, 2, 3, 1];

/// `dims` permuted: `out[i] = dims[perm[i]]`.
pub fn permuted<T: Clone>(dims: &[T], perm: &[usize]) -> Vec<T> {
    perm.iter().map(|i| dims[*i].clone()).collect()
}

/// conv2d: x NCHW, w OIHW (I = C / groups); channels-last when the attributes say so.
pub fn conv2d(x: &[Dim], w: &[Dim], a: &Conv2dAttrs) -> Result<Shape, RuleError> {
    if a.channels_last && x.len() == 4 && w.len() == 4 {
        let nchw = Conv2dAttrs { channels_last: false, ..*a };
        return conv2d(&permuted(x, &TO_NCHW), &permuted(w, &TO_NCHW), &nchw).map(|y| permuted(&y, &TO_CHANNELS_LAST));
    }
    if x.len() != 4 {
        return Err(err("E0303", format!("conv2d expects a 4-d input [N, C, H, W], found {}", br(x)))
            .help("add a batch dimension with `unsqueeze(x, 0)`"));
    }
    if w.len() != 4 {
        return Err(err("E0303", format!("conv2d expects a 4-d weight [O, C/groups, kH, kW], found {}", br(w))));
    }
    if a.groups < 1 {
        return Err(err("E0306", format!("groups must be at least 1, found {}", a.groups)));
    }
    let g = Dim::known(a.groups);
    let Some(c_per_group) = x[1].div(&g) else {
        return Err(err("E0306", format!("input channels {} are not divisible by groups = {}", x[1], a.groups)));
    };
    if !c_per_group.compatible(&w[1]) {
        return Err(err(
            "E0306",
            format!(
                "conv2d channel mismatch: input {} has {} channels, weight {} expects {} × groups {} = {}",
                br(x),
                x[1],
                br(w),
                w[1],
                a.groups,
                w[1].mul(&g)
            ),
        ));
    }
    if w[0].div(&g).is_none() {
        return Err(err("E0306", format!("output channels {} are not divisible by groups = {}", w[0], a.groups)));
    }
    let (Some(kh), Some(kw)) = (w[2].as_known(), w[3].as_known()) else {
        return Ok(vec![x[0].clone(), w[0].clone(), Dim::Any, Dim::Any]);
    };
    let h = window_out(&x[2], kh, a.stride.0, a.padding.0, a.dilation.0);
    let wd = window_out(&x[3], kw, a.stride.1, a.padding.1, a.dilation.1);
    match (h, wd) {
        (Ok(h), Ok(wd)) => Ok(vec![x[0].clone(), w[0].clone(), h, wd]),
        _ => Err(err(
            "E0313",
            format!("conv2d kernel {kh}x{kw} (dilation {:?}) is larger than the padded input {}x{}", a.dilation, x[2], x[3]),
        )
        .help("add padding or use a smaller kernel")),
    }
}

/// max/avg pooling over the last two dims of a 3-d or 4-d input.
pub fn pool2d(x: &[Dim], k: (i64, i64), s: (i64, i64), p: (i64, i64)) -> Result<Shape, RuleError> {
    if x.len() != 4 && x.len() != 3 {
        return Err(err("E0303", format!("pooling expects a 4-d [N, C, H, W] or 3-d [C, H, W] input, found {}", br(x))));
    }
    if p.0 * 2 > k.0 || p.1 * 2 > k.1 {
        return Err(err("E0313", format!("pool padding {:?} must be at most half the kernel {:?}", p, k)));
    }
    let n = x.len();
    let h = window_out(&x[n - 2], k.0, s.0, p.0, 1);
    let w = window_out(&x[n - 1], k.1, s.1, p.1, 1);
    match (h, w) {
        (Ok(h), Ok(w)) => {
            let mut out = x[..n - 2].to_vec();
            out.push(h);
            out.push(w);
            Ok(out)
        }
        _ => Err(err("E0313", format!("pool window {}x{} is larger than the input {}x{}", k.0, k.1, x[n - 2], x[n - 1]))),
    }
}

/// concat along `axis`: every other dim must agree.
pub fn concat(shapes: &[Shape], axis: usize) -> Result<Shape, RuleError> {
    let first = &shapes[0];
    let mut total = Dim::known(0);
    for s in shapes {
        if s.len() != first.len() {
            return Err(err("E0312", format!("concat needs tensors of the same rank, found {} and {}", br(first), br(s))));
        }
        for (i, (a, b)) in first.iter().zip(s).enumerate() {
            if i != axis && !a.compatible(b) {
                return Err(err(
                    "E0312",
                    format!("concat along axis {axis} needs the other dimensions to agree: {} and {} differ at axis {i}", br(first), br(s)),
                ));
            }
        }
        total = match (total.as_known(), s[axis].as_known()) {
            (Some(a), Some(b)) => Dim::known(a + b),
            _ => Dim::Any,
        };
    }
    let mut out = first.clone();
    out[axis] = total;
    Ok(out)
}

/// Number of elements of `start:end:step` on a dim of size `n` (Python slice semantics).
pub fn slice_len(n: i64, start: Option<i64>, end: Option<i64>, step: i64) -> (i64, i64) {
    let clampi = |v: i64, lo: i64, hi: i64| v.max(lo).min(hi);
    if step > 0 {
        let s = start.map(|s| if s < 0 { s + n } else { s }).map(|s| clampi(s, 0, n)).unwrap_or(0);
        let e = end.map(|e| if e < 0 { e + n } else { e }).map(|e| clampi(e, 0, n)).unwrap_or(n);
        let len = if e > s { (e - s + step - 1) / step } else { 0 };
        (s, len)
    } else {
        let s = start.map(|s| if s < 0 { s + n } else { s }).map(|s| clampi(s, -1, n - 1)).unwrap_or(n - 1);
        let e = end.map(|e| if e < 0 { e + n } else { e }).map(|e| clampi(e, -1, n - 1)).unwrap_or(-1);
        let len = if s > e { (s - e + (-step) - 1) / (-step) } else { 0 };
        (s, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Dim;

    fn k(v: &[i64]) -> Vec<Dim> {
        v.iter().map(|x| Dim::known(*x)).collect()
    }

    #[test]
    fn broadcasting() {
        assert_eq!(broadcast(&k(&[3, 1]), &k(&[4])).unwrap(), k(&[3, 4]));
        assert_eq!(broadcast(&[Dim::sym("B"), Dim::known(1)], &k(&[5])).unwrap(), vec![Dim::sym("B"), Dim::known(5)]);
        assert_eq!(broadcast(&k(&[3]), &k(&[4])).unwrap_err().code, "E0301");
    }

    #[test]
    fn matmul_shapes() {
        assert_eq!(matmul(&k(&[2, 3, 4]), &k(&[4, 5])).unwrap(), k(&[2, 3, 5]));
        assert_eq!(matmul(&k(&[4]), &k(&[4, 5])).unwrap(), k(&[5]));
        assert_eq!(matmul(&k(&[3, 4]), &k(&[4])).unwrap(), k(&[3]));
        let e = matmul(&[Dim::sym("B"), Dim::known(784)], &k(&[512, 10])).unwrap_err();
        assert_eq!(e.code, "E0302");
        assert!(e.message.contains("784 ≠ 512"), "{}", e.message);
    }

    #[test]
    fn reshape_counts_elements_symbolically() {
        let x = vec![Dim::sym("B"), Dim::known(28), Dim::known(28)];
        assert_eq!(reshape(&x, &[Some(Dim::sym("B")), None]).unwrap(), vec![Dim::sym("B"), Dim::known(784)]);
        assert_eq!(reshape(&k(&[6]), &[Some(Dim::known(4)), None]).unwrap_err().code, "E0304");
        assert_eq!(reshape(&k(&[2, 3]), &[Some(Dim::known(5))]).unwrap_err().code, "E0304");
    }

    #[test]
    fn conv_and_pool_sizes() {
        let a = Conv2dAttrs::nchw((2, 2), (1, 1), (1, 1), 1);
        assert_eq!(conv2d(&k(&[8, 3, 32, 32]), &k(&[16, 3, 3, 3]), &a).unwrap(), k(&[8, 16, 16, 16]));
        let cl = Conv2dAttrs { channels_last: true, ..a };
        assert_eq!(conv2d(&k(&[8, 32, 32, 3]), &k(&[16, 3, 3, 3]), &cl).unwrap(), k(&[8, 16, 16, 16]));
        assert_eq!(conv2d(&k(&[8, 30, 20, 3]), &k(&[16, 5, 3, 3]), &cl).unwrap(), k(&[8, 14, 10, 16]));
        let g = Conv2dAttrs::nchw((1, 1), (0, 0), (2, 2), 2);
        assert_eq!(conv2d(&k(&[1, 4, 9, 9]), &k(&[6, 2, 3, 3]), &g).unwrap(), k(&[1, 6, 5, 5]));
        assert_eq!(conv2d(&k(&[1, 4, 9, 9]), &k(&[6, 3, 3, 3]), &g).unwrap_err().code, "E0306");
        assert_eq!(pool2d(&k(&[1, 1, 5, 5]), (2, 2), (2, 2), (0, 0)).unwrap(), k(&[1, 1, 2, 2]));
        assert_eq!(pool2d(&k(&[1, 1, 1, 1]), (2, 2), (2, 2), (0, 0)).unwrap_err().code, "E0313");
    }

    #[test]
    fn slices_follow_python() {
        assert_eq!(slice_len(10, Some(2), Some(8), 3), (2, 2));
        assert_eq!(slice_len(5, None, None, -1), (4, 5));
        assert_eq!(slice_len(5, Some(-2), None, 1), (3, 2));
        assert_eq!(slice_len(5, Some(7), None, 1).1, 0);
    }
}
