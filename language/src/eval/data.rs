//! Data pipelines, typed: a source fixes the element type, stages transform it. Execution (file
//! readers, worker threads) belongs to the runtime; here an element is a value whose tensors are
//! graph inputs, so `map` lambdas are checked like any other code.

use super::builtins::Bound;
use super::tracer::Tracer;
use super::value::{Pipeline, Stage, Value};
use super::R;
use crate::ir::Op;
use crate::span::Span;
use crate::types::{DType, Dim, TensorTy};
use std::rc::Rc;

impl Tracer {
    pub(super) fn elem_input(&mut self, name: &str, dtype: DType, shape: Vec<Dim>, span: Span) -> Value {
        let ty = TensorTy::new(dtype, shape);
        let id = self.graph.add_input(name, ty.clone());
        Value::Tensor(self.node(Op::Input(id), ty.dtype, ty.shape, vec![], span))
    }

    fn record(fields: Vec<(&str, Value)>) -> Value {
        Value::Record(Rc::new(fields.into_iter().map(|(n, v)| (n.to_string(), v)).collect()))
    }

    pub(super) fn pipeline_arg(&mut self, b: &Bound) -> R<Rc<Pipeline>> {
        match b.get("pipeline").cloned() {
            Some((Value::Pipeline(p), _)) => Ok(p),
            Some((v, s)) => self.err(
                "E0310",
                format!("`{}` is a pipeline stage: it needs a data pipeline, found {}", b.callee, v.kind()),
                s,
                "not a pipeline",
            ),
            None => Err(super::Reported),
        }
    }

    fn str_arg(&mut self, b: &Bound, name: &str) -> R<String> {
        match b.get(name).cloned() {
            Some((Value::Str(s), _)) => Ok(s.to_string()),
            Some((v, s)) => self.err("E0310", format!("`{name}` must be a string, found {}", v.kind()), s, "expected a string"),
            None => Ok(String::new()),
        }
    }

    /// A tensor type argument (`row: f32[784]`), or the default when absent.
    fn type_arg(&mut self, b: &Bound, name: &str, default: TensorTy) -> R<TensorTy> {
        match b.get(name).cloned() {
            Some((Value::Type(t), _)) => Ok(t),
            Some((v, s)) => {
                self.err("E0310", format!("`{name}` must be a tensor type like `f32[784]`, found {}", v.kind()), s, "expected a type")
            }
            None => Ok(default),
        }
    }

    pub fn data_builtin(&mut self, name: &'static str, b: &Bound) -> R<Value> {
        let span = b.span;
        let args = bound_args(b);
        let source = |elem: Value, _what: String| {
            let st = Stage { kind: name, args: args.clone(), input: Value::unit(), output: elem.clone(), span };
            Ok(Value::Pipeline(Rc::new(Pipeline { elem, source: st, stages: vec![], span })))
        };
        match name {
            "mnist" | "fashion_mnist" | "idx" => {
                let what = if name == "idx" { self.str_arg(b, "images")? } else { self.str_arg(b, "dir")? };
                if name != "idx" {
                    let split = self.str_arg(b, "split")?;
                    if !split.is_empty() && split != "train" && split != "test" {
                        return self.err(
                            "E0403",
                            format!("`split` must be \"train\" or \"test\", found \"{split}\""),
                            b.span_of("split"),
                            "unknown split",
                        );
                    }
                }
                let (h, w) = if name == "idx" { (Dim::Any, Dim::Any) } else { (Dim::known(28), Dim::known(28)) };
                let image = self.elem_input(&format!("{name}.image"), DType::U8, vec![h, w], span);
                let label = self.elem_input(&format!("{name}.label"), DType::I64, vec![], span);
                source(Self::record(vec![("image", image), ("label", label)]), format!("{name}({what})"))
            }
            "cifar" => {
                let image = self.elem_input("cifar.image", DType::U8, vec![Dim::known(3), Dim::known(32), Dim::known(32)], span);
                let label = self.elem_input("cifar.label", DType::I64, vec![], span);
                source(Self::record(vec![("image", image), ("label", label)]), "cifar".into())
            }
            "images" => {
                // A folder of class folders of JPEG and PNG files (torchvision's `ImageFolder`):
                // classes in sorted folder-name order. `size: (h, w)` resizes every image to it;
                // without it the images' sizes are only known when they are read.
                let dir = self.str_arg(b, "dir")?;
                let (channels, h, w) = self.image_source_args(b)?;
                let image = self.elem_input("images.image", DType::U8, vec![Dim::known(channels), h, w], span);
                let label = self.elem_input("images.label", DType::I64, vec![], span);
                source(Self::record(vec![("image", image), ("label", label)]), format!("images({dir})"))
            }
            "shards" => {
                // WebDataset tar files (paths or `*`/`?` patterns): a sample's image member is
                // decoded as an `images` file is, its label member is a class index as text.
                let files = self.shard_files_arg(b)?;
                let (channels, h, w) = self.image_source_args(b)?;
                let image = self.elem_input("shards.image", DType::U8, vec![Dim::known(channels), h, w], span);
                let label = self.elem_input("shards.label", DType::I64, vec![], span);
                source(Self::record(vec![("image", image), ("label", label)]), format!("shards({files})"))
            }
            "csv" => {
                let path = self.str_arg(b, "path")?;
                let n = match b.get("features") {
                    Some(_) => Dim::known(self.arg_int(b, "features", 0)?),
                    None => Dim::Any,
                };
                let (_, target) = match csv_target(b.get("label").map(|x| &x.0), b.get("label_row").map(|x| &x.0)) {
                    Ok(t) => t,
                    Err(e) => {
                        let at = b.get("label_row").or(b.get("label")).map(|x| x.1).unwrap_or(span);
                        return self.err("E0403", e, at, "does not fit the label columns");
                    }
                };
                let features = self.elem_input("csv.features", DType::F32, vec![n], span);
                let label = self.elem_input("csv.label", target.dtype, target.shape, span);
                source(Self::record(vec![("features", features), ("label", label)]), format!("csv({path})"))
            }
            "npy" => {
                // The file's shape is only known at run time: the program declares each row's
                // type (`row: f32[28, 28]`, default `f32[?]`), and the reader checks the file.
                let path = self.str_arg(b, "path")?;
                let row = self.type_arg(b, "row", TensorTy::new(DType::F32, vec![Dim::Any]))?;
                let x = self.elem_input("npy.x", row.dtype, row.shape, span);
                if b.get("labels").is_some() {
                    self.str_arg(b, "labels")?;
                    let lrow = self.type_arg(b, "label_row", TensorTy::new(DType::I64, vec![]))?;
                    let y = self.elem_input("npy.y", lrow.dtype, lrow.shape, span);
                    return source(Value::Tuple(Rc::new(vec![x, y])), format!("npy({path})"));
                }
                source(x, format!("npy({path})"))
            }
            "safetensors" => {
                // As `npy`, the tensors' shapes are known only at run time: the program declares
                // each row's type and the reader checks the file's header against it.
                let path = self.str_arg(b, "path")?;
                let tensor = self.str_arg(b, "tensor")?;
                let row = self.type_arg(b, "row", TensorTy::new(DType::F32, vec![Dim::Any]))?;
                let x = self.elem_input("safetensors.x", row.dtype, row.shape, span);
                let what = format!("safetensors({path}, {tensor})");
                if b.get("labels").is_some() {
                    self.str_arg(b, "labels")?;
                    let lrow = self.type_arg(b, "label_row", TensorTy::new(DType::I64, vec![]))?;
                    let y = self.elem_input("safetensors.y", lrow.dtype, lrow.shape, span);
                    return source(Value::Tuple(Rc::new(vec![x, y])), what);
                }
                source(x, what)
            }
            "text" => {
                let path = self.str_arg(b, "path")?;
                let block = self.arg_int(b, "block", 128)?;
                let level = self.str_arg(b, "level")?;
                if !level.is_empty() && level != "char" && level != "byte" {
                    return self.err(
                        "E0403",
                        format!("`level` must be \"char\" or \"byte\", found \"{level}\""),
                        b.span_of("level"),
                        "unknown level",
                    );
                }
                // A tokenizer.json gives the ids; a level as well would say two things.
                if b.get("tokenizer").is_some() {
                    self.str_arg(b, "tokenizer")?;
                    if !level.is_empty() {
                        return self.err(
                            "E0403",
                            "`level` and `tokenizer` both say how to make ids: give one",
                            b.span_of("level"),
                            "remove `level` (or `tokenizer`)",
                        );
                    }
                }
                let x = self.elem_input("text.x", DType::I64, vec![Dim::known(block)], span);
                let y = self.elem_input("text.y", DType::I64, vec![Dim::known(block)], span);
                source(Value::Tuple(Rc::new(vec![x, y])), format!("text({path})"))
            }
            "jsonl" | "parquet" => {
                // A record a line (JSON Lines) or a row (Parquet): each declared field read from
                // the key or column of its name, as its declared type (data_fields.rs).
                let fields = self.record_source_fields(b)?;
                let path = self.str_arg(b, "path")?;
                let elem = fields.into_iter().map(|(n, t)| (n.clone(), self.elem_input(&format!("{name}.{n}"), t.dtype, t.shape, span)));
                let elem = Value::Record(Rc::new(elem.collect()));
                source(elem, format!("{name}({path})"))
            }
            "tensors" => {
                // Rows of in-memory tensors: drop the leading dim of each.
                let mut elems = vec![];
                for key in ["x", "y"] {
                    if let Some((v, s)) = b.get(key).cloned() {
                        let n = self.to_tensor(&v, None, s)?;
                        let ty = self.ty(n);
                        if ty.rank() == 0 {
                            return self.err("E0303", "`tensors` needs tensors with a leading dimension to iterate over", s, "0-d tensor");
                        }
                        elems.push(self.elem_input(&format!("tensors.{key}"), ty.dtype, ty.shape[1..].to_vec(), span));
                    }
                }
                let elem = if elems.len() == 1 { elems.remove(0) } else { Value::Tuple(Rc::new(elems)) };
                source(elem, "tensors".into())
            }
            "map" => {
                let p = self.pipeline_arg(b)?;
                let (f, fs) = b.get("f").cloned().ok_or(super::Reported)?;
                let elem = self.call(&f, vec![(None, p.elem.clone(), p.span)], fs, fs)?;
                check_element(self, &elem, fs)?;
                Ok(self.stage(&p, name, b, elem))
            }
            "batch" => {
                let p = self.pipeline_arg(b)?;
                let size = self.arg_int(b, "size", 1)?;
                if size < 1 {
                    return self.err("E0403", format!("batch size must be at least 1, found {size}"), b.span_of("size"), "too small");
                }
                let drop_last = self.arg_bool(b, "drop_last", false)?;
                // With drop_last every batch has `size` rows; otherwise the last may be smaller.
                let dim = if drop_last { Dim::known(size) } else { Dim::sym("B") };
                let elem = self.batch_elem(&p.elem, &dim, span);
                Ok(self.stage(&p, name, b, elem))
            }
            "random_crop" | "random_flip" => {
                // Augmentations of the element's first tensor (the image), torchvision-style:
                // RandomCrop(size, padding) and RandomHorizontalFlip(p), before `batch`.
                let p = self.pipeline_arg(b)?;
                let mut first = vec![];
                first_tensor(&p.elem, &mut first);
                let ok = first.first().map(|n| self.ty(*n).rank() >= 2).unwrap_or(false);
                if !ok {
                    let found = first.first().map(|n| self.ty(*n).to_string()).unwrap_or_else(|| "no tensor".into());
                    return self.err(
                        "E0403",
                        format!("`{name}` works on images: the element's first tensor must be [H, W] or [C, H, W], found {found}"),
                        span,
                        "not an image",
                    );
                }
                if name == "random_crop" && self.arg_int(b, "padding", 0)? < 0 {
                    return self.err("E0403", "`padding` must be at least 0", b.span_of("padding"), "negative");
                }
                if name == "random_flip" {
                    let prob = self.arg_float(b, "p", 0.5)?;
                    if !(0.0..=1.0).contains(&prob) {
                        return self.err("E0403", format!("`p` is a probability, found {prob}"), b.span_of("p"), "out of range");
                    }
                }
                let elem = p.elem.clone();
                Ok(self.stage(&p, name, b, elem))
            }
            "resize" | "center_crop" | "random_resized_crop" | "color_jitter" => {
                // torchvision's Resize((h, w)), CenterCrop((h, w)), RandomResizedCrop((h, w))
                // and ColorJitter of the element's first tensor, a u8 image [C, H, W] or [H, W]:
                // its last two dims become (h, w) (the jitter keeps them).
                let p = self.pipeline_arg(b)?;
                let mut first = vec![];
                first_tensor(&p.elem, &mut first);
                let found = first.first().map(|n| self.ty(*n));
                let Some(ty) = found.clone().filter(|t| t.dtype == DType::U8 && (t.rank() == 2 || t.rank() == 3)) else {
                    let found = found.map(|t| t.to_string()).unwrap_or_else(|| "no tensor".into());
                    return self.err(
                        "E0403",
                        format!("`{name}` works on u8 images: the element's first tensor must be u8[H, W] or u8[C, H, W], found {found} (put it before `map`)"),
                        span,
                        "not a u8 image",
                    );
                };
                if name == "color_jitter" {
                    check_jitter(self, b)?;
                    let elem = p.elem.clone();
                    return Ok(self.stage(&p, name, b, elem));
                }
                if name == "random_resized_crop" {
                    self.arg_range(b, "scale", (0.08, 1.0))?;
                    self.arg_range(b, "ratio", (0.75, 4.0 / 3.0))?;
                }
                let (h, w) = self.arg_pair(b, "size", 0)?;
                if h < 1 || w < 1 {
                    return self.err("E0403", format!("`size` must be positive, found ({h}, {w})"), b.span_of("size"), "not a size");
                }
                let mut shape = ty.shape.clone();
                let r = shape.len();
                shape[r - 2] = Dim::known(h);
                shape[r - 1] = Dim::known(w);
                let image = self.elem_input(&format!("{name}.image"), DType::U8, shape, span);
                let elem = with_first_tensor(&p.elem, image, &mut false);
                Ok(self.stage(&p, name, b, elem))
            }
            "pad_batch" | "bucket" | "pack" => self.sequence_stage(name, b),
            "shuffle" | "prefetch" | "skip" | "take" | "split" => {
                let p = self.pipeline_arg(b)?;
                if name == "shuffle" && b.get("buffer").is_some() && self.arg_int(b, "buffer", 1)? < 1 {
                    return self.err("E0403", "a shuffle `buffer` holds at least 1 element", b.span_of("buffer"), "too small");
                }
                if name == "split" {
                    let f = self.arg_float(b, "fraction", 0.9)?;
                    if !(0.0..=1.0).contains(&f) {
                        return self.err(
                            "E0403",
                            format!("split fraction must be between 0 and 1, found {f}"),
                            b.span_of("fraction"),
                            "out of range",
                        );
                    }
                }
                let elem = p.elem.clone();
                Ok(self.stage(&p, name, b, elem))
            }
            _ => self.err("E0404", format!("`{name}` is not a data source or stage"), span, "unknown"),
        }
    }

    pub(super) fn stage(&mut self, p: &Pipeline, name: &'static str, b: &Bound, elem: Value) -> Value {
        let mut stages = p.stages.clone();
        stages.push(Stage { kind: name, args: bound_args(b), input: p.elem.clone(), output: elem.clone(), span: b.span });
        Value::Pipeline(Rc::new(Pipeline { elem, source: p.source.clone(), stages, span: p.span }))
    }

    pub(super) fn batch_elem(&mut self, v: &Value, dim: &Dim, span: Span) -> Value {
        match v {
            Value::Tensor(n) => {
                let ty = self.ty(*n);
                let mut shape = vec![dim.clone()];
                shape.extend(ty.shape);
                self.elem_input("batch", ty.dtype, shape, span)
            }
            Value::Tuple(items) => Value::Tuple(Rc::new(items.iter().map(|x| self.batch_elem(x, dim, span)).collect())),
            Value::Record(items) => Value::Record(Rc::new(items.iter().map(|(k, x)| (k.clone(), self.batch_elem(x, dim, span))).collect())),
            other => other.clone(),
        }
    }
}

impl Tracer {
    /// An image source's `channels` (1 or 3; 3 by default) and `size: (h, w)` (the image's dims,
    /// unknown without it), with its `on_error` checked: `images` and `shards` take them alike.
    fn image_source_args(&mut self, b: &Bound) -> R<(i64, Dim, Dim)> {
        let channels = self.arg_int(b, "channels", 3)?;
        if channels != 1 && channels != 3 {
            return self.err("E0403", format!("`channels` must be 1 or 3, found {channels}"), b.span_of("channels"), "1 or 3");
        }
        let (h, w) = match b.get("size") {
            None => (Dim::Any, Dim::Any),
            Some(_) => match self.arg_pair(b, "size", 0)? {
                (h, w) if h >= 1 && w >= 1 => (Dim::known(h), Dim::known(w)),
                (h, w) => return self.err("E0403", format!("`size` must be positive, found ({h}, {w})"), b.span_of("size"), "not a size"),
            },
        };
        let on_error = self.str_arg(b, "on_error")?;
        if !on_error.is_empty() && on_error != "stop" && on_error != "skip" {
            let message = format!("`on_error` must be \"stop\" or \"skip\", found \"{on_error}\"");
            return self.err("E0403", message, b.span_of("on_error"), "stop or skip");
        }
        Ok((channels, h, w))
    }

    /// A `shards` source's `files`: a path or pattern, or a tuple of them (as the message shows
    /// them); and its member extensions, `image` (`"jpg"`, or alternatives `"jpg;png"`) and
    /// `label`, which must not be empty.
    fn shard_files_arg(&mut self, b: &Bound) -> R<String> {
        let files = match b.get("files").cloned() {
            Some((Value::Str(s), _)) => vec![s.to_string()],
            Some((Value::Tuple(items), s)) => {
                match items.iter().map(|v| if let Value::Str(p) = v { Some(p.to_string()) } else { None }).collect::<Option<Vec<_>>>() {
                    Some(files) if !items.is_empty() => files,
                    _ => return self.err("E0310", "`files` must be a path or a tuple of paths (strings)", s, "not a tuple of strings"),
                }
            }
            Some((v, s)) => {
                let message = format!("`files` must be a path, a pattern like \"data/train-*.tar\" or a tuple of them, found {}", v.kind());
                return self.err("E0310", message, s, "expected a string");
            }
            None => return Err(super::Reported),
        };
        for ext in ["image", "label"] {
            if b.get(ext).is_some() && self.str_arg(b, ext)?.trim().trim_start_matches('.').is_empty() {
                return self.err(
                    "E0403",
                    format!("`{ext}` names the extension of a sample's member, like \"jpg\""),
                    b.span_of(ext),
                    "empty",
                );
            }
        }
        Ok(files.join(", "))
    }
}

/// Pipeline elements are tensors, or tuples/records of them.
/// The first tensor node of an element, depth-first (the image of `(image, label)`).
fn first_tensor(v: &Value, out: &mut Vec<crate::ir::NodeId>) {
    match v {
        Value::Tensor(n) if out.is_empty() => out.push(*n),
        Value::Tuple(items) => items.iter().for_each(|x| first_tensor(x, out)),
        Value::Record(items) => items.iter().for_each(|(_, x)| first_tensor(x, out)),
        _ => {}
    }
}

/// `v` with its first tensor (depth-first) replaced by `by`.
fn with_first_tensor(v: &Value, by: Value, done: &mut bool) -> Value {
    match v {
        Value::Tensor(_) if !*done => {
            *done = true;
            by
        }
        Value::Tuple(items) => Value::Tuple(Rc::new(items.iter().map(|x| with_first_tensor(x, by.clone(), done)).collect())),
        Value::Record(items) => {
            Value::Record(Rc::new(items.iter().map(|(k, x)| (k.clone(), with_first_tensor(x, by.clone(), done))).collect()))
        }
        other => other.clone(),
    }
}

fn check_element(t: &mut Tracer, v: &Value, span: Span) -> R<()> {
    match v {
        Value::Tensor(_) => Ok(()),
        Value::Int(_) | Value::Float(_) | Value::Bool(_) => Ok(()),
        Value::Tuple(items) => items.iter().try_for_each(|x| check_element(t, x, span)),
        Value::Record(items) => items.iter().try_for_each(|(_, x)| check_element(t, x, span)),
        other => t.err(
            "E0310",
            format!("a pipeline element must be tensors, tuples or records, found {}", other.kind()),
            span,
            "from this function",
        ),
    }
}

/// The arguments a builtin was called with, by parameter name.
fn bound_args(b: &Bound) -> Vec<(String, Value)> {
    b.names.iter().zip(&b.slots).filter_map(|(n, s)| s.as_ref().map(|(v, _)| (n.trim_end_matches('=').to_string(), v.clone()))).collect()
}

/// A `csv` source's label columns and the type of one row's label. `label: 4` (one column,
/// negative from the end; the last column by default) is a class index `i64[]` unless
/// `label_row` says otherwise (`f32[]` for a regression target); `label: (4, 5)` (several columns)
/// is `f32[2]` by default. The checker and the reader both ask here, so they cannot disagree.
pub fn csv_target(label: Option<&Value>, label_row: Option<&Value>) -> Result<(Vec<i64>, TensorTy), String> {
    let columns: Vec<i64> = match label {
        None => vec![-1],
        Some(Value::Tuple(items)) => {
            let cols: Option<Vec<i64>> = items.iter().map(|v| v.as_int()).collect();
            cols.filter(|c| !c.is_empty()).ok_or("`label` must be a column number or a tuple of column numbers")?
        }
        Some(v) => vec![v.as_int().ok_or("`label` must be a column number or a tuple of column numbers")?],
    };
    let k = columns.len() as i64;
    let ty = match label_row {
        None if k == 1 => TensorTy::new(DType::I64, vec![]),
        None => TensorTy::new(DType::F32, vec![Dim::known(k)]),
        Some(Value::Type(t)) => t.clone(),
        Some(v) => return Err(format!("`label_row` must be a tensor type like `f32[]`, found {}", v.kind())),
    };
    let fits = match ty.shape.as_slice() {
        [] => k == 1,
        [d] => d.as_known().is_none_or(|n| n == k),
        _ => false,
    };
    if !fits || ty.dtype == DType::Bool {
        return Err(format!(
            "`label_row: {ty}` does not fit {k} label column(s): use `{}[]` for one column or `{}[{k}]` for {k}",
            ty.dtype, ty.dtype
        ));
    }
    Ok((columns, ty))
}

/// `color_jitter`'s amounts: brightness, contrast and saturation at least 0, hue in [0, 0.5]
/// (as torchvision's `ColorJitter` checks them).
fn check_jitter(t: &mut Tracer, b: &Bound) -> R<()> {
    for name in ["brightness", "contrast", "saturation", "hue"] {
        let x = t.arg_float(b, name, 0.0)?;
        let max = if name == "hue" { 0.5 } else { f64::INFINITY };
        if !(0.0..=max).contains(&x) {
            let want = if name == "hue" { "between 0 and 0.5" } else { "at least 0" };
            return t.err("E0403", format!("`{name}` must be {want}, found {x}"), b.span_of(name), "out of range");
        }
    }
    Ok(())
}
