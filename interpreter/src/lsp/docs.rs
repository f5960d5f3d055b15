//! Short documentation the checker's tables do not carry: one line per builtin (the builtins
//! table in `dlc_language::eval::builtins` has their parameters) and per recipe field, condensed
//! from docs/language.md. A builtin missing here still gets its signature.

use dlc_language::syntax::ast::RecipeKind;

const BUILTINS: &[(&str, &str)] = &[
    ("print", "Print values (tensors in PyTorch's format) when the program runs."),
    ("zeros", "A tensor of type `T` filled with 0: `zeros(f32[2, 3])`."),
    ("ones", "A tensor of type `T` filled with 1."),
    ("full", "A tensor of type `T` filled with `value`."),
    ("randn", "N(0, 1) samples of a float type `T`; deterministic for a `seed:`."),
    ("rand", "U[0, 1) samples of type `T`."),
    ("rand_like", "U[0, 1) samples of `x`'s type."),
    ("randn_like", "N(0, 1) samples of `x`'s type (a VAE's reparameterisation noise)."),
    ("arange", "An `i64` range, as `torch.arange`: `arange(n)`, `arange(start, end, step)`."),
    ("eye", "The `f32[n, n]` identity."),
    ("exp", "Elementwise e^x (computed at compile time on scalars)."),
    ("log", "Elementwise natural logarithm."),
    ("sqrt", "Elementwise square root."),
    ("rsqrt", "Elementwise 1 / sqrt(x)."),
    ("sin", "Elementwise sine."),
    ("cos", "Elementwise cosine."),
    ("tanh", "Elementwise hyperbolic tangent."),
    ("erf", "Elementwise error function."),
    ("abs", "Elementwise absolute value."),
    ("floor", "Elementwise floor."),
    ("maximum", "Elementwise maximum of two broadcast operands."),
    ("minimum", "Elementwise minimum of two broadcast operands."),
    ("where", "`a` where `cond` is true, else `b` (broadcast): the elementwise `if`."),
    ("clamp", "`x` limited to `[min, max]` (either bound optional)."),
    ("cast", "`x` converted to `dtype`: `cast(x, f32)`."),
    ("sum", "Sum over `axis` (all axes without it); `keepdim: true` keeps size-1 axes."),
    ("mean", "Mean over `axis` (all axes without it)."),
    ("max", "Maximum over `axis` (all axes without it)."),
    ("min", "Minimum over `axis` (all axes without it)."),
    ("argmax", "Index of the maximum along `axis`, as `i64`."),
    ("var", "Variance over `axis`, unbiased by default (`correction: 1`), as `torch.var`."),
    ("reshape", "`x` with a new shape of the same size; one size may be -1."),
    ("flatten", "Axes `start` to `end` (default all) merged into one."),
    ("transpose", "Axes `dim0` and `dim1` swapped."),
    ("permute", "Axes reordered: `permute(x, (0, 2, 1))`."),
    ("unsqueeze", "A size-1 axis inserted at `axis`."),
    ("squeeze", "Size-1 axes removed (only `axis` when given)."),
    ("concat", "Tensors joined along an existing `axis` (default 0)."),
    ("stack", "Tensors joined along a new `axis` (default 0)."),
    ("broadcast_to", "`x` broadcast to a tensor type or shape."),
    ("conv2d", "2-d convolution of `[N, C, H, W]` by `[O, C/groups, kh, kw]`."),
    ("max_pool2d", "2-d max pooling over `kernel` windows."),
    ("avg_pool2d", "2-d average pooling over `kernel` windows."),
    ("take", "Gather along `axis` at `indices` (an embedding lookup); on a pipeline, its first `n` elements."),
    ("one_hot", "`labels` as one-hot rows of `classes` columns."),
    ("stop_grad", "`x`, with no gradient flowing through it."),
    ("param", "A trainable parameter of type `T` initialised by `init` (in a model)."),
    ("buffer", "A state tensor of a model, checkpointed but not trained (running statistics)."),
    ("uniform", "The initialiser U(low, high)."),
    ("normal", "The initialiser N(mean, std)."),
    ("constant", "The initialiser that fills with `value`."),
    ("training", "Whether a model is traced for training (dropout on, batch statistics)."),
    ("assign", "In training, give a buffer a new value after the step."),
    ("numel", "The number of elements of `x`, an int."),
    ("float", "A compile-time number as a float."),
    ("int", "A compile-time number as an int (truncates)."),
    ("grad", "The gradients of a scalar `loss` with respect to `model`'s parameters (custom steps)."),
    ("chain", "`x` through a tuple of layers or functions in order: `chain(x, (f, g))` is `g(f(x))`."),
    ("mnist", "MNIST's IDX files in `dir`: `(image: u8[28, 28], label: i64[])`."),
    ("fashion_mnist", "Fashion-MNIST's IDX files in `dir`: `(image: u8[28, 28], label: i64[])`."),
    ("idx", "IDX image and label files: `(image: u8[_, _], label: i64[])`."),
    ("cifar", "CIFAR-10 binary batches: `(image: u8[3, 32, 32], label: i64[])`."),
    ("images", "A folder of class folders of JPEG and PNG files (torchvision's `ImageFolder`)."),
    ("shards", "WebDataset tar files (`\"data/train-*.tar\"`): each sample's `image` and `label` members, `(image: u8[3, h, w], label: i64[])`."),
    ("csv", "Rows of a CSV file: `(features: f32[n], label: T)`."),
    ("npy", "Rows of a `.npy` array of the declared `row` type, with `labels` a pair."),
    ("safetensors", "Rows of tensor `tensor` of a `.safetensors` file as the declared `row` type; `labels` names a second tensor: a pair."),
    ("text", "Blocks of token ids of a text file and the same blocks shifted by one."),
    ("jsonl", "JSON Lines, one object a line: each of `fields: (x: f32[4], y: i64[])` read from its key."),
    ("parquet", "Rows of a Parquet file: each of `fields: (x: f32[4], y: i64[])` read from its column."),
    ("tensors", "Rows of in-memory tensors; with `y`, pairs."),
    ("map", "Apply `f` to each element of the pipeline."),
    ("shuffle", "Shuffle the elements, deterministically for a `seed:`, differently each epoch; `buffer: n` shuffles the stream through n elements (shards in a seeded order)."),
    ("batch", "Stack `size` elements into a batch (the last may be smaller unless `drop_last`)."),
    ("pad_batch", "Batch `size` elements, each variable-length tensor (first dim `_`) padded with `pad` or cut to `length`, with `mask: f32[B, length]` added (1 = real token)."),
    ("bucket", "Batch elements of like length: each in the smallest of `boundaries` that holds it, each batch padded to its bucket's length `L`, with the mask; batch order shuffled by `seed`."),
    ("pack", "Concatenate token sequences into rows of `length` tokens: `(tokens: T[length], segments: i64[length])`, each token's document index in its row."),
    ("prefetch", "Make up to `n` batches ahead of the training step."),
    ("random_crop", "Zero-pad each image by `padding` and crop it back at a random offset."),
    ("random_flip", "Mirror each image left-right with probability `p`."),
    ("resize", "Resize each u8 image to `size` (bilinear, as torchvision's `Resize`)."),
    ("center_crop", "The centre `size` of each image (torchvision's `CenterCrop`)."),
    ("random_resized_crop", "torchvision's `RandomResizedCrop` of each u8 image."),
    ("color_jitter", "torchvision's `ColorJitter` of each u8 image."),
    ("skip", "All but the first `n` elements."),
    ("split", "A deterministic `fraction` of the stream (`part: \"rest\"` for the remainder)."),
];

pub fn builtin(name: &str) -> Option<&'static str> {
    BUILTINS.iter().find(|(n, _)| *n == name).map(|(_, d)| *d)
}

const TRAIN: &[(&str, &str)] = &[
    ("model", "The model to train, `Mlp(hidden: 512)`; bound as `model` for the fields below."),
    ("models", "A record of models, `(g: Generator(), d: Discriminator())`, each bound by its name; for custom steps."),
    ("data", "The data pipeline to train on (required); its element binds `x`, `y`, ..."),
    ("loss", "What to minimise: a 0-d float tensor, `cross_entropy(model(x), y)` (required without `step`)."),
    ("optimizer", "An optimiser, `adamw(lr: 1e-3)` (`sgd adam adamw lamb lars`)."),
    ("optimizers", "A record of optimisers with the names of `models`."),
    ("schedule", "A learning-rate schedule, `warmup_cosine(warmup: 200)`; constant without one."),
    ("epochs", "Passes over the data, an int >= 1 (`epochs` or `steps` is required)."),
    ("steps", "Optimiser steps in total, an int >= 1."),
    ("precision", "`f32`, `bf16`, `f16` or `tf32`: `bf16`/`f16` autocast with f32 accumulation."),
    ("device", "`auto` (the GPU when there is one), `cpu` or `cuda`."),
    ("parallel", "`data_parallel(ranks: auto)`: data parallelism under `mpirun`; one process without."),
    ("accumulate", "Micro-batches per optimiser step (default 1)."),
    ("seed", "The seed of parameter initialisation and data order."),
    ("clip_grad_norm", "The largest global gradient norm; no clipping without it."),
    ("init", "A PyTorch `state_dict` (safetensors) or dlc checkpoint to start from (strict)."),
];

const EVALUATE: &[(&str, &str)] = &[
    ("model", "The model to evaluate (required)."),
    ("data", "The data to evaluate on (required); its element binds `x`, `y`, ..."),
    ("checkpoint", "A dlc checkpoint directory or a safetensors state dict to load."),
    ("metrics", "A metric, or a tuple or record of metrics."),
    ("precision", "`f32`, `bf16`, `f16` or `tf32`."),
    ("device", "`auto`, `cpu` or `cuda`."),
];

const INFER: &[(&str, &str)] = &[
    ("model", "The model (or function) to run (required)."),
    ("checkpoint", "A dlc checkpoint directory or a safetensors state dict to load."),
    ("input", "The inputs (required): a tensor or a tuple of tensors; a text prompt with `generate`."),
    ("output", "A file for the outputs: `.npy`, or `.png` for a grid of images."),
    ("generate", "Sample this many tokens from a language model after the prompt."),
    ("vocab", "With `generate`: the text file of the vocabulary, or a `tokenizer.json`."),
    ("context", "With `generate`: the longest window the model takes (its `block`)."),
    ("temperature", "With `generate`: logits are divided by it before the softmax (default 1)."),
    ("seed", "With `generate`: the sampling seed (default 0)."),
    ("precision", "`f32`, `bf16`, `f16` or `tf32`."),
    ("device", "`auto`, `cpu` or `cuda`."),
];

pub fn recipe_field(kind: RecipeKind, name: &str) -> Option<&'static str> {
    let table = match kind {
        RecipeKind::Train => TRAIN,
        RecipeKind::Evaluate => EVALUATE,
        RecipeKind::Infer => INFER,
    };
    table.iter().find(|(n, _)| *n == name).map(|(_, d)| *d)
}

/// The values a field takes as bare words.
pub fn field_words(field: &str) -> &'static [&'static str] {
    match field {
        "precision" => &["f32", "bf16", "f16", "tf32"],
        "device" => &["auto", "cpu", "cuda"],
        _ => &[],
    }
}

/// A recipe's clauses: (what completion inserts, what it does).
pub const CLAUSES: &[(&str, &str)] = &[
    ("evaluate", "`evaluate DATA every N UNIT { metric }`: metrics on a pipeline, without gradients"),
    ("checkpoint", "`checkpoint \"dir\" every N UNIT`: save parameters, buffers and optimiser state"),
    ("log", "`log every N UNIT`: report the loss and the learning rate"),
    ("step", "`step(batch) { ... }`: a custom training step"),
];

/// Keywords, dtypes and bare words a name may be.
pub const WORDS: &[&str] = &[
    "use",
    "fn",
    "model",
    "data",
    "train",
    "evaluate",
    "infer",
    "let",
    "if",
    "else",
    "and",
    "or",
    "not",
    "true",
    "false",
    "auto",
    "every",
    "checkpoint",
    "log",
    "step",
    "update",
    "by",
    "f32",
    "f64",
    "bf16",
    "f16",
    "i64",
    "i32",
    "u8",
    "bool",
    "int",
    "float",
    "str",
];
