; Text objects: functions and methods, models and recipes (as classes), parameters and
; arguments, comments. Each pattern carries both naming schemes: nvim-treesitter-textobjects'
; `@X.inner`/`@X.outer` and Helix's and Zed's `@X.inside`/`@X.around` (each editor ignores the
; captures it does not know).

(function_definition
  body: (_) @function.inner @function.inside) @function.outer @function.around

(method_definition
  body: (_) @function.inner @function.inside) @function.outer @function.around

(step_clause
  body: (_) @function.inner @function.inside) @function.outer @function.around

(lambda
  body: (_) @function.inner @function.inside) @function.outer @function.around

(model_definition
  body: (model_body) @class.inner @class.inside) @class.outer @class.around

(recipe_definition
  body: (recipe_body) @class.inner @class.inside) @class.outer @class.around

(parameters
  ((parameter) @parameter.inner @parameter.inside . ","? @_end)
  @parameter.outer @parameter.around)

(lambda_parameters
  ((identifier) @parameter.inner @parameter.inside . ","? @_end)
  @parameter.outer @parameter.around)

(arguments
  ((_) @parameter.inner @parameter.inside . ","? @_end)
  @parameter.outer @parameter.around)

(comment) @comment.inner @comment.inside

(comment)+ @comment.outer @comment.around

(block) @block.outer @block.around
