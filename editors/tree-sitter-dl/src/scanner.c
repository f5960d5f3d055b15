// The external scanner of the DL grammar: which line breaks end a statement.
//
// As language/src/syntax/layout.rs decides it: a line break ends a statement at top level and
// inside `{ }`, never inside `( )` or `[ ]`, and not where the line before ends with `=`, `|>`,
// `and`, `or` or `else` (the grammar cannot end a statement there, so `_newline` is not valid
// and the break is whitespace), nor where the next line, past blank lines and comments, starts
// with `|>`, `and`, `or` or `else` (that line continues this one).

#include "tree_sitter/parser.h"

#include <stdbool.h>
#include <stdint.h>

enum TokenType {
  NEWLINE,
  ERROR_SENTINEL,
};

void *tree_sitter_dl_external_scanner_create(void) { return NULL; }

void tree_sitter_dl_external_scanner_destroy(void *payload) { (void)payload; }

unsigned tree_sitter_dl_external_scanner_serialize(void *payload, char *buffer) {
  (void)payload;
  (void)buffer;
  return 0;
}

void tree_sitter_dl_external_scanner_deserialize(void *payload, const char *buffer, unsigned length) {
  (void)payload;
  (void)buffer;
  (void)length;
}

// A letter, digit or `_` (any character past ASCII counts: DL's names may hold Unicode letters).
static bool is_word_char(int32_t c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 128;
}

// Whether the next line (the lexer stands at its first character, after any blank or comment
// lines) continues the line before: it starts with `|>`, `and`, `or` or `else`.
static bool continues(TSLexer *lexer) {
  for (;;) {
    int32_t c = lexer->lookahead;
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v') {
      lexer->advance(lexer, false);
    } else if (c == '#') {
      while (lexer->lookahead != '\n' && !lexer->eof(lexer)) {
        lexer->advance(lexer, false);
      }
    } else {
      break;
    }
  }
  if (lexer->eof(lexer)) {
    return false;
  }
  if (lexer->lookahead == '|') {
    lexer->advance(lexer, false);
    return lexer->lookahead == '>';
  }
  char word[5];
  unsigned len = 0;
  while (is_word_char(lexer->lookahead)) {
    if (len == sizeof word) {
      return false;
    }
    word[len++] = (char)lexer->lookahead;
    lexer->advance(lexer, false);
  }
  return (len == 3 && word[0] == 'a' && word[1] == 'n' && word[2] == 'd') ||
         (len == 2 && word[0] == 'o' && word[1] == 'r') ||
         (len == 4 && word[0] == 'e' && word[1] == 'l' && word[2] == 's' && word[3] == 'e');
}

bool tree_sitter_dl_external_scanner_scan(void *payload, TSLexer *lexer, const bool *valid_symbols) {
  (void)payload;
  // Error recovery marks every token valid: let the grammar's own lexer go on there.
  if (valid_symbols[ERROR_SENTINEL] || !valid_symbols[NEWLINE]) {
    return false;
  }
  while (lexer->lookahead == ' ' || lexer->lookahead == '\t' || lexer->lookahead == '\r' ||
         lexer->lookahead == '\f' || lexer->lookahead == '\v') {
    lexer->advance(lexer, true);
  }
  if (lexer->lookahead != '\n') {
    return false;
  }
  lexer->advance(lexer, false);
  lexer->mark_end(lexer);
  lexer->result_symbol = NEWLINE;
  return !continues(lexer);
}
