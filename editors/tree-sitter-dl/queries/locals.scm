; Scopes, definitions and references (tree-sitter's `@local.*` captures, as Helix, Zed and
; tree-sitter-highlight read them).

; Scopes: a file, a function or method (its parameters are local to it), a lambda, a block.
(source_file) @local.scope
(function_definition) @local.scope
(method_definition) @local.scope
(model_definition) @local.scope
(step_clause) @local.scope
(lambda) @local.scope
(block) @local.scope

; Definitions
(parameter name: (identifier) @local.definition)
(lambda parameters: (identifier) @local.definition)
(lambda_parameters (identifier) @local.definition)
(let_declaration name: (identifier) @local.definition)
(data_definition name: (identifier) @local.definition)

; References
(identifier) @local.reference
