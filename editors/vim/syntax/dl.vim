" Vim syntax file
" Language:    DL, the declarative deep-learning language of dlc
" Filenames:   *.dl
" Reference:   docs/language.md

if exists("b:current_syntax")
  finish
endif

let s:cpo_save = &cpo
set cpo&vim

syn case match
syn sync minlines=50

" Comments: `#` to the end of the line.
syn keyword dlTodo         contained TODO FIXME XXX NOTE
syn match   dlComment      "#.*$" contains=dlTodo,@Spell

" Strings: double quotes, escapes \n \t \" \\, no line breaks.
syn match   dlEscape       contained "\\[nt\"\\]"
syn region  dlString       start=+"+ skip=+\\\\\|\\"+ end=+"+ end=+$+ oneline contains=dlEscape,@Spell

" Numbers: 42, 1_000, 1.5, 1e-3, 2.5E+4 (`.5` is not a number in DL).
syn match   dlNumber       "\<\d[0-9_]*\>"
syn match   dlFloat        "\<\d[0-9_]*\.\d[0-9_]*\%([eE][+-]\=\d\+\)\=\>"
syn match   dlFloat        "\<\d[0-9_]*[eE][+-]\=\d\+\>"

" Keywords.
syn keyword dlInclude      use
syn keyword dlDefine       fn train evaluate infer
syn keyword dlStatement    let update as
" `by` is a keyword only in `update m by g`.
syn match   dlStatement    "\<by\>\%(\s*[:=]\)\@!"
syn keyword dlConditional  if else
syn keyword dlLogic        and or not
syn keyword dlBoolean      true false
syn keyword dlConstant     auto
" Soft keywords: `model`/`data` start an item only before a name; elsewhere they are names.
syn match   dlDefine       "\<\%(model\|data\)\>\ze\s\+\h"
" Recipe clauses; `log(x)` is also the logarithm (defined later, so it wins; `log (a, b)`, with a
" space, is the statement of a `step`). Not as a named argument or a record field
" (`arange(0, 10, step: 2)`) nor as a recipe field (`checkpoint = "..."`).
syn match   dlRecipe       "\<\%(every\|checkpoint\|log\|step\)\>\%(\s*[:=]\%([=>]\)\@!\)\@!"
" `precision bf16 { ... }` blocks (`precision` alone is an ordinary name).
syn match   dlRecipe       "\<precision\>\ze\s\+\h\w*\s*{"
syn keyword dlRecipeUnit   contained epoch epochs steps
syn match   dlRecipeEvery  "\<every\s\+\%(\d\+\s\+\)\=\%(epochs\=\|steps\=\)\>" contains=dlRecipe,dlNumber,dlRecipeUnit

" Types: dtypes (tensor types are written `f32[B, 784]`) and scalar types.
syn keyword dlType         f32 f16 bf16 f64 i64 i32 u8 bool
syn keyword dlType         str
" `int` and `float` are types, and conversions when called.
syn match   dlType         "\<\%(int\|float\)\>"
syn match   dlBuiltin      "\<\%(int\|float\)\ze\s*("

" Builtins (the prelude's primitives and the functions written in DL).
syn keyword dlBuiltin      print zeros ones full randn rand rand_like randn_like arange eye chain assign
syn keyword dlBuiltin      exp sqrt rsqrt sin cos tanh erf abs floor maximum minimum where clamp cast
syn keyword dlBuiltin      sum mean max min argmax var
syn keyword dlBuiltin      reshape flatten transpose permute unsqueeze squeeze concat stack broadcast_to numel
syn keyword dlBuiltin      conv2d max_pool2d avg_pool2d take one_hot stop_grad
syn keyword dlBuiltin      param buffer uniform normal constant training grad
syn keyword dlBuiltin      relu leaky_relu sigmoid silu softplus gelu gelu_tanh
syn keyword dlBuiltin      softmax log_softmax logsumexp layer_norm rms_norm normalize tril triu causal_mask
syn match   dlBuiltin      "\<log\ze("

" The standard library: std.nn, std.optim, std.data.
syn keyword dlLibrary      Linear Conv2d LayerNorm RMSNorm BatchNorm1d BatchNorm2d Dropout Embedding
syn keyword dlLibrary      MaxPool2d AvgPool2d GlobalAvgPool Flatten Sequential Residual CausalSelfAttention TransformerBlock
syn keyword dlLibrary      cross_entropy nll mse l1 huber smooth_l1 bce bce_with_logits accuracy top_k_accuracy
syn keyword dlLibrary      sgd adam adamw lamb lars constant_lr step_lr exponential cosine warmup_cosine one_cycle
syn keyword dlLibrary      sgd_update adam_update adamw_update lamb_update lars_update data_parallel
syn keyword dlLibrary      mnist fashion_mnist idx cifar images shards csv npy safetensors text jsonl parquet tensors
syn keyword dlLibrary      map shuffle batch pad_batch bucket pack prefetch skip split random_crop random_flip resize center_crop
syn keyword dlLibrary      random_resized_crop color_jitter to_unit

" Tensor fields.
syn match   dlField        "\.\@<=\%(shape\|dtype\|ndim\|T\)\>"

" Recipe fields (`epochs = 3`, `evaluate { model = Mlp(), data = test_set }`) and the bare words
" recipes understand.
syn match   dlRecipeField  "\%(\%(^\|[{,]\)\s*\)\@<=\<\%(model\|models\|data\|loss\|optimizer\|optimizers\|schedule\|epochs\|steps\|precision\|device\|parallel\|accumulate\|seed\|clip_grad_norm\|init\|checkpoint\|metrics\|input\|output\|generate\|vocab\|context\|temperature\)\>\ze\s*=\%([=>]\)\@!"
syn match   dlRecipeSymbol "\<\%(cpu\|cuda\|tf32\)\>\%(\s*[:(=]\)\@!"

" Names being defined.
syn match   dlFunction     "\%(\<fn\s\+\)\@<=\h\w*"
syn match   dlModelName    "\%(\<model\s\+\)\@<=\h\w*"
syn match   dlFunction     "\%(\<data\s\+\)\@<=\h\w*\ze\s*="
syn match   dlRecipeName   "\%(\<\%(train\|evaluate\|infer\)\s\+\)\@<=\h\w*\ze\s*{"

" Operators: pipe, lambda, return type, power, floor division, matmul, comparisons, arithmetic.
syn match   dlOperator     "|>"
syn match   dlOperator     "=>"
syn match   dlOperator     "->"
syn match   dlOperator     "\*\*"
syn match   dlOperator     "//"
syn match   dlOperator     "@"
syn match   dlOperator     "[=!<>]="
syn match   dlOperator     "[-+*/%<>]"
syn match   dlOperator     "\.\.\."
" Characters that are not DL (E0103).
syn match   dlError        "[!&|'$`^~?\\]\%([=>]\)\@!"

hi def link dlComment      Comment
hi def link dlTodo         Todo
hi def link dlString       String
hi def link dlEscape       SpecialChar
hi def link dlNumber       Number
hi def link dlFloat        Float
hi def link dlInclude      Include
hi def link dlDefine       Keyword
hi def link dlStatement    Statement
hi def link dlConditional  Conditional
hi def link dlLogic        Operator
hi def link dlBoolean      Boolean
hi def link dlConstant     Constant
hi def link dlRecipe       Keyword
hi def link dlRecipeUnit   Keyword
hi def link dlType         Type
hi def link dlBuiltin      Function
hi def link dlLibrary      Function
hi def link dlField        Identifier
hi def link dlRecipeField  Identifier
hi def link dlRecipeSymbol Constant
hi def link dlRecipeName   Label
hi def link dlFunction     Function
hi def link dlModelName    Structure
hi def link dlOperator     Operator
hi def link dlError        Error

let b:current_syntax = "dl"

let &cpo = s:cpo_save
unlet s:cpo_save
