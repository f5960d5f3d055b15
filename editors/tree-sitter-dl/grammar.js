/**
 * @file Tree-sitter grammar for DL, the declarative deep-learning language of dlc.
 * @license MIT OR Apache-2.0
 *
 * The truth is dlc's own parser (language/src/syntax/: lexer.rs, layout.rs, parser/), which this
 * grammar follows; where it is more lenient (an `if` without `else`, chained comparisons, any word
 * as a scalar type), dlc reports the error after parsing (README.md lists them). Line breaks are
 * decided by the external scanner (src/scanner.c) as layout.rs decides them: a line break ends a
 * statement where the grammar can end one (never inside `( )` or `[ ]`), unless the next line
 * starts with `|>`, `and`, `or` or `else`.
 */

/// <reference types="tree-sitter-cli/dsl" />
// @ts-check

// Loosest first, as in language/src/syntax/parser/operators.rs.
const PREC = {
  lambda: -1,
  pipe: 1,
  or: 2,
  and: 3,
  not: 4,
  compare: 5,
  add: 6,
  mul: 7,
  neg: 8,
  pow: 9,
  postfix: 10,
  type: 11,
};

const DTYPES = ['bool', 'u8', 'i32', 'i64', 'f16', 'bf16', 'f32', 'f64'];

// Keywords that are also ordinary names where no keyword meaning applies (token.rs `soft`), and
// `precision`, which is a keyword only when a word and a block follow it.
const SOFT_KEYWORDS = ['log', 'step', 'checkpoint', 'every', 'by', 'data', 'model', 'precision'];

/** `rule` separated by `sep`, at least one, with an optional trailing `sep`. */
function commaSep1(rule, sep = ',') {
  return seq(rule, repeat(seq(sep, rule)), optional(sep));
}

function commaSep(rule, sep = ',') {
  return optional(commaSep1(rule, sep));
}

/** Lines of `rule` separated by one or more of `sep` (line breaks, `;`, ...). */
function lines(rule, sep) {
  return seq(repeat(sep), optional(seq(rule, repeat(seq(sep, optional(rule))))));
}

module.exports = grammar({
  name: 'dl',

  externals: $ => [$._newline, $._error_sentinel],

  extras: $ => [/\s/, $.comment],

  word: $ => $.identifier,

  supertypes: $ => [$._expression, $._type],

  inline: $ => [$._name, $._line_sep, $._member_sep],

  conflicts: $ => [
    // `(a, b)` is a tuple until a `=>` makes it a lambda's parameters.
    [$._primary, $.lambda_parameters],
    // In a `step` block `log x` is a statement, `log(x)` elsewhere a call.
    [$._primary, $.log_statement],
  ],

  rules: {
    source_file: $ => lines($._item, $._line_sep),

    _line_sep: $ => choice($._newline, ';'),
    // Members of a model and entries of a recipe may also be separated by `,`.
    _member_sep: $ => choice($._newline, ';', ','),

    _item: $ => choice(
      $.use_declaration,
      $.function_definition,
      $.model_definition,
      $.data_definition,
      $.let_declaration,
      $.recipe_definition,
      $.expression_statement,
    ),

    // A name: an identifier, or a soft keyword where it is no keyword.
    _name: $ => choice($.identifier, alias(choice(...SOFT_KEYWORDS), $.identifier)),

    identifier: _ => /[_\p{Alphabetic}][_\p{Alphabetic}\p{N}]*/,

    // ---- items ---------------------------------------------------------------------------------

    use_declaration: $ => seq('use', field('path', $.module_path)),

    module_path: $ => seq($._name, repeat(seq('.', $._name))),

    let_declaration: $ => seq('let', field('name', $._name), '=', field('value', $._expression)),

    data_definition: $ => seq('data', field('name', $.identifier), '=', field('value', $._expression)),

    function_definition: $ => seq(
      'fn',
      field('name', $._name),
      $._signature_and_body,
    ),

    _signature_and_body: $ => seq(
      field('parameters', $.parameters),
      optional(seq('->', field('return_type', $._type))),
      choice(seq('=', field('body', $._expression)), field('body', $.block)),
    ),

    parameters: $ => seq('(', commaSep($.parameter), ')'),

    parameter: $ => seq(
      field('name', $._name),
      optional(seq(':', field('type', $._type))),
      optional(seq('=', field('default', $._expression))),
    ),

    model_definition: $ => seq(
      'model',
      field('name', $.identifier),
      optional(field('parameters', $.parameters)),
      field('body', $.model_body),
    ),

    model_body: $ => seq('{', lines($._member, $._member_sep), '}'),

    _member: $ => choice($.field_definition, $.spread_field, $.method_definition),

    field_definition: $ => seq(field('name', $._name), '=', field('value', $._expression)),

    // `...layers = Sequential(...)`: the items are named directly under the model.
    spread_field: $ => seq('...', field('name', $._name), '=', field('value', $._expression)),

    method_definition: $ => seq(field('name', $._name), $._signature_and_body),

    recipe_definition: $ => seq(
      field('kind', choice('train', 'evaluate', 'infer')),
      optional(field('name', $.identifier)),
      field('body', $.recipe_body),
    ),

    recipe_body: $ => seq('{', lines($._recipe_entry, $._member_sep), '}'),

    _recipe_entry: $ => choice(
      $.recipe_field,
      $.evaluate_clause,
      $.checkpoint_clause,
      $.log_clause,
      $.step_clause,
    ),

    recipe_field: $ => seq(field('name', $._name), '=', field('value', $._expression)),

    evaluate_clause: $ => seq(
      'evaluate',
      field('data', $._expression),
      field('every', $.every),
      field('body', $.block),
    ),

    checkpoint_clause: $ => seq('checkpoint', field('directory', $._expression), field('every', $.every)),

    log_clause: $ => seq('log', field('every', $.every)),

    step_clause: $ => seq('step', field('parameters', $.parameters), field('body', alias($.step_block, $.block))),

    // `every epoch`, `every 2 epochs`, `every 50 steps`.
    every: $ => seq('every', optional(field('count', $.integer)), field('unit', $._name)),

    // ---- blocks and statements -----------------------------------------------------------------

    block: $ => seq('{', lines($._statement, $._line_sep), '}'),

    // A `step` block: `log` statements belong there.
    step_block: $ => seq('{', lines(choice($._statement, $.log_statement), $._line_sep), '}'),

    _statement: $ => choice($.let_declaration, $.update_statement, $.expression_statement),

    update_statement: $ => seq('update', field('target', $._expression), 'by', field('gradients', $._expression)),

    // `log (a, b)` and `log(x)` log; dlc's parser tries the statement before the expression.
    log_statement: $ => prec.dynamic(1, seq('log', field('value', $._expression))),

    expression_statement: $ => $._expression,

    // ---- expressions ---------------------------------------------------------------------------

    _expression: $ => choice(
      $.pipe_expression,
      $.binary_expression,
      $.unary_expression,
      $.lambda,
      $._primary,
    ),

    pipe_expression: $ => prec.left(PREC.pipe, seq(
      field('left', $._expression),
      field('operator', '|>'),
      field('right', $._expression),
    )),

    binary_expression: $ => {
      /** @type {[number, RuleOrLiteral, 'left' | 'right'][]} */
      const table = [
        [PREC.or, 'or', 'left'],
        [PREC.and, 'and', 'left'],
        [PREC.compare, choice('==', '!=', '<', '<=', '>', '>='), 'left'],
        [PREC.add, choice('+', '-'), 'left'],
        [PREC.mul, choice('*', '/', '//', '%', '@'), 'left'],
        [PREC.pow, '**', 'right'],
      ];
      return choice(...table.map(([p, op, assoc]) => prec[assoc](p, seq(
        field('left', $._expression),
        field('operator', op),
        field('right', $._expression),
      ))));
    },

    unary_expression: $ => choice(
      prec(PREC.not, seq(field('operator', 'not'), field('operand', $._expression))),
      prec(PREC.neg, seq(field('operator', '-'), field('operand', $._expression))),
    ),

    // `x => body`, `(a, b) => body`, `() => body`; the body reaches as far as it can.
    lambda: $ => prec.right(PREC.lambda, seq(
      field('parameters', choice($._name, $.lambda_parameters)),
      '=>',
      field('body', $._expression),
    )),

    lambda_parameters: $ => seq('(', commaSep($._name), ')'),

    _primary: $ => choice(
      $._name,
      $.integer,
      $.float,
      $.string,
      $.boolean,
      $.auto,
      $.tensor_type,
      $.unit,
      $.parenthesized_expression,
      $.tuple,
      $.record,
      $.list,
      $.block,
      $.if_expression,
      $.precision_block,
      $.checkpoint_block,
      $.call_expression,
      $.index_expression,
      $.field_expression,
    ),

    call_expression: $ => prec(PREC.postfix, seq(field('function', $._primary), field('arguments', $.arguments))),

    arguments: $ => seq('(', commaSep(choice($._expression, $.named_argument)), ')'),

    named_argument: $ => seq(field('name', $._name), ':', field('value', $._expression)),

    index_expression: $ => prec(PREC.postfix, seq(
      field('value', $._primary),
      '[',
      commaSep1(choice($._expression, $.slice, $.ellipsis)),
      ']',
    )),

    // `a:b`, `:b`, `a:`, `::c`, `a:b:c`.
    slice: $ => seq(
      optional(field('start', $._expression)),
      ':',
      optional(field('end', $._expression)),
      optional(seq(':', optional(field('step', $._expression)))),
    ),

    field_expression: $ => prec(PREC.postfix, seq(
      field('value', $._primary),
      '.',
      field('field', choice($._name, alias($.integer, $.field_index))),
    )),

    unit: _ => seq('(', ')'),

    parenthesized_expression: $ => seq('(', $._expression, ')'),

    tuple: $ => seq('(', choice(
      seq($._expression, ','),
      seq($._expression, repeat1(seq(',', $._expression)), optional(',')),
    ), ')'),

    record: $ => seq('(', commaSep1($.record_field), ')'),

    record_field: $ => seq(field('name', $._name), ':', field('value', $._expression)),

    list: $ => seq('[', commaSep($._expression), ']'),

    if_expression: $ => prec.right(seq(
      'if',
      field('condition', $._expression),
      field('consequence', $.block),
      optional(seq('else', field('alternative', choice($.if_expression, $.block)))),
    )),

    // `precision bf16 { ... }`.
    precision_block: $ => prec(1, seq('precision', field('precision', choice($.dtype, $.identifier)), field('body', $.block))),

    // `checkpoint { ... }`.
    checkpoint_block: $ => prec(1, seq('checkpoint', field('body', $.block))),

    // ---- literals ------------------------------------------------------------------------------

    integer: _ => /\d[\d_]*/,

    float: _ => token(choice(
      /\d[\d_]*\.\d[\d_]*([eE][+-]?\d+)?/,
      /\d[\d_]*[eE][+-]?\d+/,
    )),

    string: $ => seq(
      '"',
      repeat(choice($.string_content, $.escape_sequence)),
      token.immediate('"'),
    ),

    string_content: _ => token.immediate(prec(1, /[^"\\\n]+/)),

    escape_sequence: _ => token.immediate(/\\[^\n]/),

    boolean: _ => choice('true', 'false'),

    auto: _ => 'auto',

    comment: _ => token(seq('#', /.*/)),

    // ---- types ---------------------------------------------------------------------------------

    // A scalar type is `int`, `float` or `str` (dlc reports any other word as E0101).
    _type: $ => choice($.tensor_type, alias($.identifier, $.primitive_type), $.union_type),

    // `i64[*B] or f32[*B, C]`, in annotations.
    union_type: $ => prec.left(seq($._type, 'or', $._type)),

    // `f32[B, 784]`, `bool`, `f32[]`; also a value (`zeros(f32[2, 3])`).
    tensor_type: $ => prec.right(PREC.type, seq(field('dtype', $.dtype), optional(field('dimensions', $.dimensions)))),

    dtype: _ => choice(...DTYPES),

    dimensions: $ => seq('[', commaSep($._dimension), ']'),

    _dimension: $ => choice($._dimension_atom, $.dimension_product, $.dimension_pack),

    _dimension_atom: $ => choice($.integer, $.identifier, $.ellipsis),

    // `H * D`.
    dimension_product: $ => seq($._dimension_atom, repeat1(seq('*', $._dimension_atom))),

    // `*S`: a named pack of dims.
    dimension_pack: $ => seq('*', field('name', $.identifier)),

    ellipsis: _ => '...',
  },
});
