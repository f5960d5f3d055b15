; Zed's outline panel and breadcrumbs: functions, models and their members, data pipelines,
; recipes and top-level lets.
(function_definition
  "fn" @context
  name: (_) @name) @item

(model_definition
  "model" @context
  name: (_) @name) @item

(method_definition
  name: (_) @name) @item

(field_definition
  name: (_) @name) @item

(data_definition
  "data" @context
  name: (_) @name) @item

(recipe_definition
  kind: _ @context
  name: (_)? @name) @item

(source_file
  (let_declaration
    "let" @context
    name: (_) @name) @item)
