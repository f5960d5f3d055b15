; Highlights for DL, with the capture names Helix, Zed, Neovim and tree-sitter-highlight share.
; Where several patterns match one node the first wins (tree-sitter-highlight, Helix, GitHub), so
; the specific patterns come first and the plain identifier last; an editor whose last match wins
; (Neovim) reads the file in reverse order of priority.

; Definitions and calls
(function_definition name: (identifier) @function)
(method_definition name: (identifier) @function.method)
(model_definition name: (identifier) @type)
(data_definition name: (identifier) @variable)
(recipe_definition name: (identifier) @label)
(parameter name: (identifier) @variable.parameter)
(lambda parameters: (identifier) @variable.parameter)
(lambda_parameters (identifier) @variable.parameter)

((call_expression
  function: (identifier) @constructor)
  (#match? @constructor "^[A-Z]"))
(call_expression
  function: (identifier) @function.call)
(call_expression
  function: (field_expression field: (identifier) @function.method.call))
(pipe_expression
  right: (identifier) @function.call)
(pipe_expression
  right: (call_expression function: (identifier) @function.call))

(field_definition name: (identifier) @property)
(spread_field name: (identifier) @property)
(recipe_field name: (identifier) @property)
(record_field name: (identifier) @property)
(named_argument name: (identifier) @variable.parameter)
(field_expression field: (identifier) @property)
(field_expression field: (field_index) @number)
(module_path (identifier) @module)
(every unit: (identifier) @constant)

; Types
(dtype) @type.builtin
(primitive_type) @type.builtin
(dimensions (identifier) @type.parameter)
(dimension_product (identifier) @type.parameter)
(dimension_pack name: (identifier) @type.parameter)
(precision_block precision: (identifier) @type.builtin)

((identifier) @type
  (#match? @type "^[A-Z][A-Za-z0-9_]*[a-z][A-Za-z0-9_]*$"))

; Literals
(integer) @number
(float) @number.float
(string) @string
(escape_sequence) @string.escape
(boolean) @boolean
(auto) @constant.builtin
(ellipsis) @punctuation.special
(comment) @comment

; Keywords
[
  "use"
  "let"
] @keyword

[
  "fn"
] @keyword.function

[
  "model"
  "data"
  "train"
  "evaluate"
  "infer"
] @keyword.type

[
  "if"
  "else"
] @keyword.conditional

[
  "and"
  "or"
  "not"
] @keyword.operator

[
  "every"
  "checkpoint"
  "log"
  "step"
  "update"
  "by"
  "precision"
] @keyword

; Operators and punctuation
[
  "|>"
  "=>"
  "->"
  "="
  "+"
  "-"
  "*"
  "**"
  "/"
  "//"
  "%"
  "@"
  "=="
  "!="
  "<"
  "<="
  ">"
  ">="
] @operator

[
  "("
  ")"
  "["
  "]"
  "{"
  "}"
] @punctuation.bracket

[
  ","
  ";"
  ":"
  "."
] @punctuation.delimiter

(identifier) @variable
