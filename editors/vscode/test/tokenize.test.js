// The TextMate grammar (syntaxes/dl.tmLanguage.json) tokenised with VS Code's own engine, the
// npm packages vscode-textmate and vscode-oniguruma, against
//
//   - hand-written expectations (test/expected/*.json): the scopes of chosen tokens of some
//     examples (keywords, block names, recipe fields, types, comments, strings, numbers,
//     operators), and scopes that must not be there (a soft keyword used as a name);
//   - every `.dl` file of examples/ (and stdlib/, bench/, tests/cases/valid/, tests/cases/numeric/):
//     no invalid or unknown scope, every token of dlc's lexer recognised (a port of
//     language/src/syntax/lexer.rs below), comments, strings, numbers, keywords, dtypes and
//     operators with their scopes;
//   - dlc's own lists (read from language/src: keywords, dtypes, builtins, recipe fields, and the
//     stdlib's functions and layers): each is highlighted as what it is;
//   - broken code (`!`, `&&`, `'a'`, `12abc`): marked invalid, so the checks above can fail.
//
// Run: `node test/tokenize.test.js` in editors/vscode after `npm ci` (test/run.sh does both).
// DL_REPO_ROOT overrides where the examples are read from, DL_GRAMMAR which grammar is tested.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const vsctm = require('vscode-textmate');
const oniguruma = require('vscode-oniguruma');

const extensionDir = path.resolve(__dirname, '..');
const repoRoot = path.resolve(process.env.DL_REPO_ROOT || path.join(extensionDir, '..', '..'));
const grammarPath = path.resolve(process.env.DL_GRAMMAR || path.join(extensionDir, 'syntaxes', 'dl.tmLanguage.json'));

// ---- the engine --------------------------------------------------------------------------------

let grammarPromise;
function loadGrammar() {
  if (!grammarPromise) {
    grammarPromise = (async () => {
      const wasm = fs.readFileSync(require.resolve('vscode-oniguruma/release/onig.wasm'));
      await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
      const registry = new vsctm.Registry({
        onigLib: Promise.resolve({
          createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
          createOnigString: (s) => new oniguruma.OnigString(s),
        }),
        loadGrammar: async (scopeName) =>
          scopeName === 'source.dl' ? vsctm.parseRawGrammar(fs.readFileSync(grammarPath, 'utf8'), grammarPath) : null,
      });
      const grammar = await registry.loadGrammar('source.dl');
      assert.ok(grammar, `no grammar for source.dl in ${grammarPath}`);
      return grammar;
    })();
  }
  return grammarPromise;
}

/** The lines of `text` and, for each, its tokens `{ start, end, text, scopes }`. */
async function tokenize(text) {
  const grammar = await loadGrammar();
  const lines = text.split(/\r?\n/);
  let stack = vsctm.INITIAL;
  return lines.map((line) => {
    const result = grammar.tokenizeLine(line, stack);
    stack = result.ruleStack;
    const tokens = result.tokens.map((t) => ({
      start: t.startIndex,
      end: Math.min(t.endIndex, line.length),
      text: line.substring(t.startIndex, t.endIndex),
      scopes: t.scopes,
    }));
    return { line, tokens };
  });
}

/** The TextMate tokens that overlap [start, end) of a line. */
function overlapping(tokens, start, end) {
  return tokens.filter((t) => t.start < end && t.end > start);
}

// ---- dlc's lexer, ported (language/src/syntax/lexer.rs): tokens never span lines -----------------

const KEYWORDS = [
  'use', 'fn', 'model', 'data', 'train', 'evaluate', 'infer', 'let', 'if', 'else', 'and', 'or', 'not',
  'true', 'false', 'auto', 'every', 'checkpoint', 'log', 'step', 'update', 'by', 'as',
];
const SOFT_KEYWORDS = new Set(['log', 'step', 'checkpoint', 'every', 'by', 'data', 'model']);
const DTYPES = ['bool', 'u8', 'i32', 'i64', 'f16', 'bf16', 'f32', 'f64'];
const PUNCT3 = ['...'];
const PUNCT2 = ['->', '=>', '|>', '//', '**', '==', '!=', '<=', '>='];
const PUNCT1 = '()[]{},:;.=+-*/%@<>';
const isWordStart = (c) => /[\p{Alphabetic}_]/u.test(c);
const isWordChar = (c) => /[\p{Alphabetic}\p{N}_]/u.test(c);
const isDigit = (c) => c >= '0' && c <= '9';

/** dlc's tokens of one line: `{ kind, text, start, end }` (UTF-16 offsets, as TextMate's). */
function lexLine(line) {
  const out = [];
  let i = 0;
  const at = (k) => line[i + k];
  while (i < line.length) {
    const c = line[i];
    const start = i;
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    if (c === '#') {
      out.push({ kind: 'comment', start, end: line.length });
      break;
    }
    if (c === '"') {
      i++;
      while (i < line.length && line[i] !== '"') i += line[i] === '\\' ? 2 : 1;
      i = Math.min(i + 1, line.length);
      out.push({ kind: 'string', start, end: i });
      continue;
    }
    if (isDigit(c)) {
      let float = false;
      while (i < line.length && (isDigit(line[i]) || line[i] === '_')) i++;
      if (at(0) === '.' && at(1) !== undefined && isDigit(at(1))) {
        float = true;
        i++;
        while (i < line.length && (isDigit(line[i]) || line[i] === '_')) i++;
      }
      if (at(0) === 'e' || at(0) === 'E') {
        const digitAt = at(1) === '+' || at(1) === '-' ? 2 : 1;
        if (at(digitAt) !== undefined && isDigit(at(digitAt))) {
          float = true;
          i += digitAt;
          while (i < line.length && isDigit(line[i])) i++;
        }
      }
      let bad = false;
      while (i < line.length && isWordChar(line[i])) {
        bad = true;
        i++;
      }
      out.push({ kind: bad ? 'bad-number' : float ? 'float' : 'integer', start, end: i });
      continue;
    }
    if (isWordStart(c)) {
      while (i < line.length && isWordChar(line[i])) i++;
      out.push({ kind: 'word', start, end: i });
      continue;
    }
    const p = [PUNCT3, PUNCT2].flat().find((q) => line.startsWith(q, i)) || (PUNCT1.includes(c) ? c : null);
    if (p) {
      i += p.length;
      out.push({ kind: 'punct', start, end: i });
    } else {
      i += c.length;
      out.push({ kind: 'invalid', start, end: i });
    }
  }
  for (const t of out) t.text = line.substring(t.start, t.end);
  return out;
}

// What each of dlc's tokens must be scoped as, wherever it stands (`null`: any recognised scope).
const KEYWORD_SCOPES = {
  use: ['keyword.control.import.dl'],
  fn: ['storage.type.function.dl', 'storage.type.dl'],
  let: ['storage.type.let.dl', 'storage.type.dl'],
  train: ['storage.type.recipe.dl', 'storage.type.dl'],
  evaluate: ['storage.type.recipe.dl', 'keyword.other.recipe.dl', 'storage.type.dl'],
  infer: ['storage.type.recipe.dl', 'storage.type.dl'],
  if: ['keyword.control.conditional.dl'],
  else: ['keyword.control.conditional.dl'],
  and: ['keyword.operator.logical.dl'],
  or: ['keyword.operator.logical.dl'],
  not: ['keyword.operator.logical.dl'],
  true: ['constant.language.boolean.dl'],
  false: ['constant.language.boolean.dl'],
  auto: ['constant.language.auto.dl'],
  update: ['keyword.other.recipe.dl'],
  as: ['keyword.other.reserved.dl'],
};
const PUNCT_SCOPES = {
  '|>': ['keyword.operator.pipe.dl'],
  '=>': ['storage.type.function.arrow.dl'],
  '->': ['punctuation.separator.return-type.dl'],
  '**': ['keyword.operator.arithmetic.power.dl'],
  '//': ['keyword.operator.arithmetic.floor-division.dl'],
  '@': ['keyword.operator.arithmetic.matrix.dl'],
  '==': ['keyword.operator.comparison.dl'],
  '!=': ['keyword.operator.comparison.dl'],
  '<': ['keyword.operator.comparison.dl'],
  '<=': ['keyword.operator.comparison.dl'],
  '>': ['keyword.operator.comparison.dl'],
  '>=': ['keyword.operator.comparison.dl'],
  '+': ['keyword.operator.arithmetic.dl'],
  '-': ['keyword.operator.arithmetic.dl'],
  '*': ['keyword.operator.arithmetic.dl', 'keyword.operator.dimension.dl'],
  '/': ['keyword.operator.arithmetic.dl'],
  '%': ['keyword.operator.arithmetic.dl'],
  '=': ['keyword.operator.assignment.dl'],
  '...': ['keyword.operator.ellipsis.dl', 'keyword.operator.spread.dl'],
  ',': ['punctuation.separator.comma.dl'],
  ':': ['punctuation.separator.colon.dl'],
  ';': ['punctuation.terminator.statement.dl'],
  '.': ['punctuation.accessor.dl', 'entity.name.namespace.dl'],
};
const BRACKET_SCOPE = /^punctuation\.(section|definition)\.[a-z-]+\.(begin|end)\.dl$/;

function expectedScopes(tok) {
  switch (tok.kind) {
    case 'comment':
      return ['comment.line.number-sign.dl'];
    case 'string':
      return ['string.quoted.double.dl'];
    case 'integer':
      return ['constant.numeric.integer.dl'];
    case 'float':
      return ['constant.numeric.float.dl'];
    case 'word':
      if (DTYPES.includes(tok.text)) return ['storage.type.dtype.dl'];
      return KEYWORD_SCOPES[tok.text] || null;
    case 'punct':
      return PUNCT_SCOPES[tok.text] || null;
    default:
      return null;
  }
}

// The scope names TextMate themes know (the first component of a scope).
const ROOTS = new Set([
  'comment', 'constant', 'entity', 'invalid', 'keyword', 'markup', 'meta', 'punctuation', 'storage', 'string',
  'support', 'variable',
]);
const isRecognised = (scope) => scope !== 'source.dl' && !scope.startsWith('meta.');

/** Every problem with one file's tokens, as `file:line:col: message` strings. */
async function problems(file, text, { invalidAllowed = false } = {}) {
  const lines = await tokenize(text);
  const found = [];
  lines.forEach(({ line, tokens }, n) => {
    const where = (col) => `${file}:${n + 1}:${col + 1}`;
    for (const t of tokens) {
      for (const s of t.scopes) {
        if (s === 'source.dl') continue;
        if (!s.endsWith('.dl') || !ROOTS.has(s.split('.')[0])) found.push(`${where(t.start)}: unknown scope ${s}`);
        if (s.startsWith('invalid.') && !invalidAllowed) found.push(`${where(t.start)}: ${JSON.stringify(t.text)} is ${s}`);
      }
    }
    for (const tok of lexLine(line)) {
      const tms = overlapping(tokens, tok.start, tok.end);
      const what = `${JSON.stringify(tok.text)} (${tok.kind})`;
      if (tok.kind === 'invalid' || tok.kind === 'bad-number') {
        if (!invalidAllowed) found.push(`${where(tok.start)}: dlc rejects ${what}`);
        continue;
      }
      // A token of dlc's is one TextMate token, or a part of one (`std.nn` is one namespace):
      // comments and strings are split by their punctuation and escapes, nothing else is.
      if (tok.kind !== 'comment' && tok.kind !== 'string' && tms.length !== 1) {
        found.push(`${where(tok.start)}: ${what} is split into ${tms.map((t) => JSON.stringify(t.text)).join(' ')}`);
        continue;
      }
      for (const tm of tms) {
        if (!tm.scopes.some(isRecognised)) found.push(`${where(tm.start)}: ${what} has no scope (${tm.scopes.join(' ')})`);
        const want = expectedScopes(tok);
        if (tok.kind === 'punct' && '()[]{}'.includes(tok.text)) {
          if (!tm.scopes.some((s) => BRACKET_SCOPE.test(s))) found.push(`${where(tm.start)}: ${what} is ${tm.scopes.join(' ')}`);
        } else if (want && !want.some((w) => tm.scopes.includes(w))) {
          found.push(`${where(tm.start)}: ${what} is ${tm.scopes.join(' ')}, wanted ${want.join(' or ')}`);
        }
      }
    }
  });
  return found;
}

function dlFiles(dir) {
  const full = path.join(repoRoot, dir);
  if (!fs.existsSync(full)) return [];
  const out = [];
  for (const e of fs.readdirSync(full, { withFileTypes: true })) {
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...dlFiles(rel));
    else if (e.name.endsWith('.dl')) out.push(rel);
  }
  return out.sort();
}

// ---- the tests ---------------------------------------------------------------------------------

test('the grammar names only scopes of DL (`*.dl`) and is valid JSON', () => {
  const raw = JSON.parse(fs.readFileSync(grammarPath, 'utf8'));
  assert.equal(raw.scopeName, 'source.dl');
  const names = [];
  (function walk(v) {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        if ((k === 'name' || k === 'contentName') && typeof x === 'string') names.push(x);
        else walk(x);
      }
    }
  })(raw.repository);
  assert.ok(names.length > 50, `only ${names.length} scope names`);
  for (const n of names) for (const s of n.split(/\s+/)) assert.match(s, /^[a-z]+(\.[a-z0-9-]+)*\.dl$/, `scope ${s}`);
});

const examples = dlFiles('examples');
test('there are examples to tokenise', () => {
  assert.ok(examples.length >= 10, `found ${examples.length} .dl files in ${path.join(repoRoot, 'examples')}`);
});

for (const file of examples) {
  test(`${file}: every token recognised, no invalid scope`, async () => {
    const found = await problems(file, fs.readFileSync(path.join(repoRoot, file), 'utf8'));
    assert.deepEqual(found, [], found.join('\n'));
  });
}

// The rest of the repository's DL, a test per folder.
for (const dir of ['stdlib', 'bench', 'tests/cases/valid', 'tests/cases/numeric', 'tests/parity']) {
  const files = dlFiles(dir);
  if (files.length === 0) continue;
  test(`${dir}/ (${files.length} files): every token recognised, no invalid scope`, async () => {
    const found = [];
    for (const f of files) found.push(...(await problems(f, fs.readFileSync(path.join(repoRoot, f), 'utf8'))));
    assert.deepEqual(found, [], found.join('\n'));
  });
}

// The ```dl blocks of the language reference and the README.
for (const doc of ['docs/language.md', 'README.md']) {
  const full = path.join(repoRoot, doc);
  if (!fs.existsSync(full)) continue;
  test(`${doc}: every \`\`\`dl block's tokens recognised, no invalid scope`, async () => {
    const blocks = [...fs.readFileSync(full, 'utf8').matchAll(/^```dl\n([\s\S]*?)^```/gm)].map((m) => m[1]);
    assert.ok(blocks.length > 0, `no \`\`\`dl block in ${doc}`);
    const found = [];
    for (const [k, block] of blocks.entries()) found.push(...(await problems(`${doc} block ${k + 1}`, block)));
    assert.deepEqual(found, [], found.join('\n'));
  });
}

// Hand-written expectations: [line, text, scope] or [line, text, occurrence, scope], where `line`
// is a line number or a text that finds the first line holding it; a scope that starts with `!`
// must not be there. `text` is found in the line (its n-th occurrence, from 1) and every TextMate
// token over it must carry the scope.
const expectedDir = path.join(__dirname, 'expected');
for (const name of fs.readdirSync(expectedDir).filter((f) => f.endsWith('.json')).sort()) {
  const spec = JSON.parse(fs.readFileSync(path.join(expectedDir, name), 'utf8'));
  test(`${spec.file}: the scopes of test/expected/${name}`, async () => {
    const lines = await tokenize(fs.readFileSync(path.join(repoRoot, spec.file), 'utf8'));
    const failures = [];
    assert.ok(spec.expect.length >= 20, `${name}: only ${spec.expect.length} expectations`);
    for (const entry of spec.expect) {
      const [anchor, text, occurrence, scope] = entry.length === 3 ? [entry[0], entry[1], 1, entry[2]] : entry;
      const lineNo = typeof anchor === 'number' ? anchor : lines.findIndex((l) => l.line.includes(anchor)) + 1;
      const at = lines[lineNo - 1];
      if (!at) {
        failures.push(`${spec.file}: no line ${JSON.stringify(anchor)}`);
        continue;
      }
      let col = -1;
      for (let k = 0; k < occurrence; k++) col = at.line.indexOf(text, col + 1);
      if (col < 0) {
        failures.push(`${spec.file}:${lineNo}: ${JSON.stringify(text)} (occurrence ${occurrence}) is not on the line`);
        continue;
      }
      const negated = scope.startsWith('!');
      const want = negated ? scope.slice(1) : scope;
      for (const tm of overlapping(at.tokens, col, col + text.length)) {
        if (tm.scopes.includes(want) === negated) {
          failures.push(`${spec.file}:${lineNo}:${col + 1}: ${JSON.stringify(tm.text)} is ${tm.scopes.join(' ')}; wanted ${scope}`);
        }
      }
    }
    assert.deepEqual(failures, [], failures.join('\n'));
  });
}

// ---- dlc's own lists ---------------------------------------------------------------------------

function readSource(rel) {
  const p = path.join(repoRoot, rel);
  return fs.existsSync(p) ? fs.readFileSync(p, 'utf8') : null;
}

/** The innermost non-meta scope of the token at `col` of line `n`. */
function scopeAt(lines, n, col) {
  const t = lines[n].tokens.find((x) => x.start <= col && col < x.end);
  return t ? t.scopes.filter(isRecognised).pop() : undefined;
}

test('every keyword and dtype of token.rs and dtype.rs', async (t) => {
  const tokenRs = readSource('language/src/syntax/token.rs');
  const dtypeRs = readSource('language/src/types/dtype.rs');
  if (!tokenRs || !dtypeRs) return t.skip('language/src is not beside the extension');
  const kws = [...tokenRs.matchAll(/\("([a-z]+)", Kw::[A-Za-z]+\)/g)].map((m) => m[1]);
  assert.deepEqual([...kws].sort(), [...KEYWORDS].sort(), 'token.rs keywords differ from this test\'s list');
  const dts = [...dtypeRs.matchAll(/DType::[A-Za-z0-9]+ => "([a-z0-9]+)"/g)].map((m) => m[1]);
  assert.deepEqual([...new Set(dts)].sort(), [...DTYPES].sort(), 'dtype.rs dtypes differ from this test\'s list');
  // Each hard keyword alone in an expression; each dtype as a value and as a tensor type.
  const hard = KEYWORDS.filter((k) => !SOFT_KEYWORDS.has(k) && !['fn', 'let', 'use', 'train', 'evaluate', 'infer'].includes(k));
  const src = [...hard.map((k) => `let v = ${k}`), ...DTYPES.map((d) => `let v = cast(x, ${d}) + zeros(${d}[B, 2])`)].join('\n');
  const lines = await tokenize(src);
  const failures = [];
  hard.forEach((k, n) => {
    const s = scopeAt(lines, n, 8);
    if (!KEYWORD_SCOPES[k].includes(s)) failures.push(`${k}: ${s}`);
  });
  DTYPES.forEach((d, n) => {
    const line = lines[hard.length + n];
    for (const col of [line.line.indexOf(d), line.line.lastIndexOf(d)]) {
      const s = scopeAt(lines, hard.length + n, col);
      if (s !== 'storage.type.dtype.dl') failures.push(`${d} at ${col}: ${s}`);
    }
  });
  assert.deepEqual(failures, []);
});

test('every builtin of builtins.rs and every function and layer of stdlib/', async (t) => {
  const builtinsRs = readSource('language/src/eval/builtins.rs');
  if (!builtinsRs) return t.skip('language/src is not beside the extension');
  const table = builtinsRs.slice(builtinsRs.indexOf('pub const TABLE'), builtinsRs.indexOf('];'));
  const builtins = [...table.matchAll(/\("([a-z_0-9]+)", "([a-z.]*)"/g)].map((m) => ({ name: m[1], module: m[2] }));
  assert.ok(builtins.length > 60, `only ${builtins.length} builtins read from builtins.rs`);
  const names = builtins.map((b) => ({ name: b.name, want: b.module ? 'support.function.library.dl' : 'support.function.builtin.dl' }));
  for (const f of dlFiles('stdlib')) {
    const text = fs.readFileSync(path.join(repoRoot, f), 'utf8');
    for (const m of text.matchAll(/^(fn|model)\s+([A-Za-z_][A-Za-z0-9_]*)/gm)) {
      const want = m[1] === 'model' ? 'support.class.dl' : f.endsWith('prelude.dl') ? 'support.function.builtin.dl' : 'support.function.library.dl';
      names.push({ name: m[2], want });
    }
  }
  // Called, and piped into without a call (but for `int` and `float`, types when not called).
  const lines = await tokenize(names.map((n) => `let v = ${n.name}(x) |> ${n.name}`).join('\n'));
  const failures = [];
  names.forEach((n, i) => {
    const cols = ['int', 'float'].includes(n.name) ? [8] : [8, lines[i].line.lastIndexOf(n.name)];
    for (const col of cols) {
      const s = scopeAt(lines, i, col);
      if (s !== n.want) failures.push(`${n.name} at ${col}: ${s}, wanted ${n.want}`);
    }
  });
  assert.deepEqual(failures, []);
});

test('every recipe field and bare word of recipe.rs', async (t) => {
  const recipeRs = readSource('language/src/eval/recipe.rs');
  if (!recipeRs) return t.skip('language/src is not beside the extension');
  const fields = new Set();
  for (const table of ['TRAIN_FIELDS', 'EVAL_FIELDS', 'INFER_FIELDS']) {
    const start = recipeRs.indexOf(`const ${table}`);
    assert.ok(start >= 0, `${table} not found in recipe.rs`);
    const body = recipeRs.slice(start, recipeRs.indexOf('];', start));
    for (const m of body.matchAll(/\("([a-z_]+)", Want::/g)) fields.add(m[1]);
  }
  const symbolsAt = recipeRs.indexOf('const SYMBOLS');
  const symbols = [...recipeRs.slice(symbolsAt, recipeRs.indexOf(';', symbolsAt)).matchAll(/"([a-z0-9]+)"/g)].map((m) => m[1]);
  assert.ok(fields.size >= 20 && symbols.length >= 3, `read ${fields.size} fields and ${symbols.length} symbols`);
  const src = ['train t {', ...[...fields].map((f) => `  ${f} = x`), ...symbols.map((s) => `  device = ${s}`), '}'].join('\n');
  const lines = await tokenize(src);
  const failures = [];
  [...fields].forEach((f, i) => {
    const s = scopeAt(lines, i + 1, 2);
    if (s !== 'support.type.property-name.recipe.dl') failures.push(`${f}: ${s}`);
  });
  symbols.forEach((sym, i) => {
    const s = scopeAt(lines, fields.size + 1 + i, 11);
    if (s !== 'support.constant.recipe.dl') failures.push(`${sym}: ${s}`);
  });
  assert.deepEqual(failures, []);
});

// ---- broken code is marked, so the checks above can fail ------------------------------------------

test('characters and numbers dlc rejects are invalid', async () => {
  const src = ['let ok = true && false', "let s = 'abc'", 'let flag = !true', 'let n = 12abc', 'let w = 0.5f', 'let t = a | b'].join('\n');
  const lines = await tokenize(src);
  const marked = lines.map(({ tokens }) => tokens.filter((t) => t.scopes.some((s) => s.startsWith('invalid.'))).map((t) => t.text));
  assert.deepEqual(marked, [['&', '&'], ["'", "'"], ['!'], ['12abc'], ['5f'], ['|']]);
  const found = await problems('broken.dl', src);
  assert.ok(found.length >= 6, found.join('\n'));
});

test('an unclosed bracket does not colour the rest of the file', async () => {
  const src = ['let x = f(1, 2', 'fn g(a) = a + 1', 'model M {', '  fc = Linear(1, 2', 'data d = csv("a.csv")'].join('\n');
  const lines = await tokenize(src);
  assert.equal(scopeAt(lines, 1, 0), 'storage.type.function.dl');
  assert.equal(scopeAt(lines, 1, 3), 'entity.name.function.dl');
  assert.equal(scopeAt(lines, 4, 0), 'storage.type.data.dl');
  assert.equal(scopeAt(lines, 4, 5), 'entity.name.variable.data.dl');
});
