//! What PyTorch and NumPy users write out of habit, and DL's spelling of it. The checker answers
//! these with the DL form instead of a "did you mean" to some unrelated name of similar spelling
//! (`x.reshape(3, 4)` is not a misspelt `x.shape`).

use crate::diag::{did_you_mean, edit_distance};

/// A PyTorch tensor method and the DL function that does the same. In `form`, `{x}` is the
/// receiver's source text and `{args}` the call's arguments as written.
pub struct MethodHabit {
    pub method: &'static str,
    pub form: &'static str,
}

const fn m(method: &'static str, form: &'static str) -> MethodHabit {
    MethodHabit { method, form }
}

/// Common `torch.Tensor` methods. DL tensors have fields (`shape`, `dtype`, `ndim`, `T`) but no
/// methods: every operation is a function taking the tensor first.
pub const TENSOR_METHODS: &[MethodHabit] = &[
    m("reshape", "reshape({x}, ({args}))"),
    m("view", "reshape({x}, ({args}))"),
    m("flatten", "flatten({x}, {args})"),
    m("sum", "sum({x}, axis: {args})"),
    m("mean", "mean({x}, axis: {args})"),
    m("max", "max({x}, axis: {args})"),
    m("min", "min({x}, axis: {args})"),
    m("amax", "max({x}, axis: {args})"),
    m("amin", "min({x}, axis: {args})"),
    m("argmax", "argmax({x}, axis: {args})"),
    m("var", "var({x}, axis: {args})"),
    m("transpose", "transpose({x}, {args})"),
    m("t", "{x}.T"),
    m("permute", "permute({x}, ({args}))"),
    m("unsqueeze", "unsqueeze({x}, {args})"),
    m("squeeze", "squeeze({x}, {args})"),
    m("expand", "broadcast_to({x}, ({args}))"),
    m("broadcast_to", "broadcast_to({x}, ({args}))"),
    m("exp", "exp({x})"),
    m("log", "log({x})"),
    m("sqrt", "sqrt({x})"),
    m("rsqrt", "rsqrt({x})"),
    m("abs", "abs({x})"),
    m("tanh", "tanh({x})"),
    m("sin", "sin({x})"),
    m("cos", "cos({x})"),
    m("floor", "floor({x})"),
    m("clamp", "clamp({x}, {args})"),
    m("clip", "clamp({x}, {args})"),
    m("relu", "relu({x})"),
    m("sigmoid", "sigmoid({x})"),
    m("softmax", "softmax({x}, axis: {args})"),
    m("log_softmax", "log_softmax({x}, axis: {args})"),
    m("matmul", "{x} @ {args}"),
    m("mm", "{x} @ {args}"),
    m("pow", "{x} ** {args}"),
    m("float", "cast({x}, f32)"),
    m("double", "cast({x}, f64)"),
    m("long", "cast({x}, i64)"),
    m("int", "cast({x}, i32)"),
    m("bool", "cast({x}, bool)"),
    m("to", "cast({x}, {args})"),
    m("type", "cast({x}, {args})"),
    m("detach", "stop_grad({x})"),
    m("numel", "numel({x})"),
    m("size", "{x}.shape"),
    m("dim", "{x}.ndim"),
    m("item", "float({x})"),
    m("contiguous", "{x}"),
    m("clone", "{x}"),
];

/// The DL spelling of `x.method(args)`, when `method` is a PyTorch habit.
pub fn tensor_method(method: &str, receiver: &str, args: &str) -> Option<String> {
    let h = TENSOR_METHODS.iter().find(|h| h.method == method)?;
    let args = args.trim();
    let form = if args.is_empty() {
        // No arguments: drop the argument slot and whatever introduces it.
        h.form.replace(", axis: {args}", "").replace(", ({args})", "").replace(", {args}", "").replace(" @ {args}", " @ y")
    } else if args.contains(':') {
        // Named arguments (`dim: 1`) are passed on, with PyTorch's names in DL's.
        h.form.replace("axis: {args}", "{args}")
    } else if h.form.contains("({args})") && (args.starts_with('(') || !args.contains(',')) {
        // A shape: already a tuple, or one size that needs the tuple's trailing comma.
        let tuple = if args.starts_with('(') { "{args}" } else { "({args},)" };
        h.form.replace("({args})", tuple)
    } else {
        h.form.to_string()
    };
    let args = args.replace("dim:", "axis:").replace("keepdims:", "keepdim:");
    Some(form.replace("{x}", receiver).replace("{args}", &args))
}

/// Keyword arguments of PyTorch and NumPy and DL's names for them, by meaning rather than
/// spelling (`dim` is one edit from `min`, but means `axis`).
const PARAM_HABITS: &[(&str, &str)] = &[
    ("dim", "axis"),
    ("dims", "axis"),
    ("axes", "axis"),
    ("keepdims", "keepdim"),
    ("keep_dim", "keepdim"),
    ("keep_dims", "keepdim"),
    ("kernel_size", "kernel"),
    ("num_classes", "classes"),
    ("unbiased", "correction"),
    ("input", "x"),
    ("dtype", "type"),
    ("shape", "type"),
    ("size", "type"),
    ("generator", "seed"),
    ("other", "b"),
    ("min_val", "min"),
    ("max_val", "max"),
    ("stride_size", "stride"),
];

/// The parameter an unknown argument name most likely means: a PyTorch/NumPy habit first (when
/// the callee has the DL name), then the nearest spelling.
pub fn param_suggestion(name: &str, params: &[&str]) -> Option<String> {
    let habit = PARAM_HABITS.iter().find(|(from, to)| *from == name && params.contains(to)).map(|(_, to)| to.to_string());
    habit.or_else(|| did_you_mean(name, params.iter().copied()))
}

/// Words that start a line in DL: items, statements and recipe clauses.
pub const LINE_KEYWORDS: &[&str] =
    &["use", "fn", "model", "data", "train", "evaluate", "infer", "let", "log", "checkpoint", "step", "update"];

/// A keyword that `word` (an identifier at the start of a line) is a typo of: one edit away,
/// counting a swap of neighbouring letters as one (`lte` for `let`, `modle` for `model`).
/// Short words and other first letters are left alone: `lr 0.1` is a missing `=`, not `log`.
pub fn keyword_typo(word: &str) -> Option<&'static str> {
    if word.chars().count() < 3 {
        return None;
    }
    LINE_KEYWORDS
        .iter()
        .copied()
        .filter(|k| *k != word && k.chars().next() == word.chars().next())
        .find(|k| edit_distance(word, k, true) == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_answer_with_the_function_form() {
        assert_eq!(tensor_method("reshape", "x", "3, 4").as_deref(), Some("reshape(x, (3, 4))"));
        assert_eq!(tensor_method("sum", "h", "1").as_deref(), Some("sum(h, axis: 1)"));
        assert_eq!(tensor_method("sum", "h", "").as_deref(), Some("sum(h)"));
        assert_eq!(tensor_method("transpose", "x", "0, 1").as_deref(), Some("transpose(x, 0, 1)"));
        assert_eq!(tensor_method("view", "x", "-1").as_deref(), Some("reshape(x, (-1,))"));
        assert_eq!(tensor_method("view", "x", "(3, 4)").as_deref(), Some("reshape(x, (3, 4))"));
        assert_eq!(tensor_method("mean", "x", "dim: 1").as_deref(), Some("mean(x, axis: 1)"));
        assert_eq!(tensor_method("shape", "x", ""), None);
    }

    #[test]
    fn habits_before_spelling() {
        assert_eq!(param_suggestion("dim", &["x", "axis", "keepdim"]).as_deref(), Some("axis"));
        assert_eq!(param_suggestion("keepdims", &["x", "axis", "keepdim"]).as_deref(), Some("keepdim"));
        // A habit whose DL name the callee lacks falls back to spelling.
        assert_eq!(param_suggestion("dims", &["x", "dim"]).as_deref(), Some("dim"));
    }

    #[test]
    fn keyword_typos_by_one_edit_or_swap() {
        assert_eq!(keyword_typo("modle"), Some("model"));
        assert_eq!(keyword_typo("lte"), Some("let"));
        assert_eq!(keyword_typo("logg"), Some("log"));
        assert_eq!(keyword_typo("accuracy"), None);
        assert_eq!(keyword_typo("x"), None);
        assert_eq!(keyword_typo("lr"), None);
        assert_eq!(keyword_typo("net"), None);
        assert_eq!(keyword_typo("model"), None);
    }
}
