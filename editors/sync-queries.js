#!/usr/bin/env node
// Write the editors' copies of the tree-sitter queries from editors/tree-sitter-dl/queries/:
//
//   nvim/queries/dl/      Neovim:   highlights.scm reordered, locals, indents, textobjects as they are
//   zed/languages/dl/     Zed:      highlights.scm reordered, indents, textobjects as they are
//   helix/queries/dl/     Helix:    highlights.scm reordered with Helix's capture names, locals with
//                                   Helix's `@local.definition.<highlight>`, indents, textobjects
//
// Why reordered: tree-sitter-dl's highlights.scm puts the specific patterns first because its own
// test (and Helix up to 25.01) lets the FIRST pattern that matches a node win; Neovim, Zed, Helix
// 25.07 and later, and tree-sitter-highlight 0.21 and later let the LAST one win. The copies list
// the same patterns in reverse order (each blank-line-separated group keeps its heading comment),
// which gives every node the same highlight under the last-wins rule.
//
//   node editors/sync-queries.js           rewrite the copies
//   node editors/sync-queries.js --check   exit 1 if a copy is out of date (test/run.sh runs this)
'use strict';

const fs = require('node:fs');
const path = require('node:path');

const editors = __dirname;
const source = path.join(editors, 'tree-sitter-dl', 'queries');
const check = process.argv.includes('--check');

/** The top-level patterns of a query, each with the comment lines just above it. */
function splitPatterns(text) {
  const patterns = [];
  let i = 0;
  let start = 0;
  let depth = 0;
  let sawForm = false;
  const n = text.length;
  const flush = (end) => {
    const chunk = text.slice(start, end).replace(/^\n+/, '').replace(/\s+$/, '');
    if (chunk) patterns.push(chunk);
    start = end;
    sawForm = false;
  };
  while (i < n) {
    const c = text[i];
    if (c === ';') {
      // A comment: at depth 0 after a finished pattern it starts the next one.
      if (depth === 0 && sawForm) flush(i);
      while (i < n && text[i] !== '\n') i++;
      continue;
    }
    if (c === '"') {
      if (depth === 0 && sawForm) flush(i);
      i++;
      while (i < n && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
      i++;
      if (depth === 0) sawForm = true;
      continue;
    }
    if (c === '(' || c === '[') {
      if (depth === 0 && sawForm) flush(i);
      depth++;
      i++;
      continue;
    }
    if (c === ')' || c === ']') {
      depth--;
      i++;
      if (depth === 0) sawForm = true;
      continue;
    }
    if (c === '@') {
      // A capture belongs to the form before it.
      i++;
      while (i < n && /[\w.-]/.test(text[i])) i++;
      continue;
    }
    if (depth === 0 && /[A-Za-z_]/.test(c) && sawForm) flush(i);
    if (depth === 0 && /[A-Za-z_]/.test(c)) {
      // A bare node name (`_`, `identifier`): a form of its own.
      while (i < n && /[\w.-]/.test(text[i])) i++;
      sawForm = true;
      continue;
    }
    i++;
  }
  flush(n);
  return patterns;
}

/** The query's groups (blank-line separated): `{ heading: [comment lines], patterns: [...] }`. */
function groups(text) {
  return text
    .split(/\n\s*\n/)
    .map((block) => {
      const lines = block.replace(/^\n+|\s+$/g, '').split('\n');
      const heading = [];
      while (lines.length && lines[0].trimStart().startsWith(';')) heading.push(lines.shift());
      return { heading, patterns: splitPatterns(lines.join('\n')) };
    })
    .filter((g) => g.heading.length || g.patterns.length);
}

/** highlights.scm with its patterns in reverse order, under a new header. */
function reversedHighlights(text, header, rename = (p) => p) {
  const gs = groups(text);
  // The file's own header (the first group, comments only) is replaced.
  if (gs.length && gs[0].patterns.length === 0) gs.shift();
  const out = [header.trimEnd()];
  for (const g of gs.reverse()) {
    const block = [...g.heading, ...g.patterns.reverse().map(rename)];
    out.push(block.join('\n'));
  }
  return out.join('\n\n') + '\n';
}

// Helix's names where they differ from the shared (nvim-treesitter style) ones: Helix themes
// colour `constant.numeric`, not `number`, and so on.
const HELIX_NAMES = [
  ['@number.float', '@constant.numeric.float'],
  ['@number', '@constant.numeric.integer'],
  ['@boolean', '@constant.builtin.boolean'],
  ['@string.escape', '@constant.character.escape'],
  ['@module', '@namespace'],
  ['@keyword.type', '@keyword.storage.type'],
  ['@keyword.conditional', '@keyword.control.conditional'],
  ['@function.method.call', '@function.method'],
  ['@function.call', '@function'],
  ['@property', '@variable.other.member'],
];
function helixRename(pattern) {
  let out = pattern;
  for (const [from, to] of HELIX_NAMES) {
    out = out.replace(new RegExp(`${from.replace('.', '\\.')}(?![\\w.])`, 'g'), to);
  }
  return out;
}
// Helix (25.07 and later) colours a reference like its definition's `@local.definition.<name>`.
function helixLocals(text) {
  return text
    .split('\n')
    .map((line) => {
      if (!line.includes('@local.definition')) return line;
      const kind = /^\((parameter|lambda|lambda_parameters)\b/.test(line.trim()) ? 'variable.parameter' : 'variable';
      return line.replace(/@local\.definition\b/, `@local.definition.${kind}`);
    })
    .join('\n');
}

const read = (name) => fs.readFileSync(path.join(source, name), 'utf8');
const generated = (editor, from) =>
  `; GENERATED by editors/sync-queries.js from editors/tree-sitter-dl/queries/${from}: edit that file\n` +
  `; and run \`node editors/sync-queries.js\`. For ${editor}.\n`;

function outputs() {
  const hl = read('highlights.scm');
  const lastWins = (editor) =>
    generated(editor, 'highlights.scm') +
    '; The patterns are in reverse order: here the LAST pattern that matches a node wins, so the\n' +
    '; plain identifier comes first and the specific patterns after it.\n';
  const copy = (editor, name) => generated(editor, name) + read(name);
  return {
    'nvim/queries/dl/highlights.scm': reversedHighlights(hl, lastWins('Neovim')),
    'nvim/queries/dl/locals.scm': copy('Neovim', 'locals.scm'),
    'nvim/queries/dl/indents.scm': copy('Neovim (nvim-treesitter\'s indent module)', 'indents.scm'),
    'nvim/queries/dl/textobjects.scm': copy('Neovim (nvim-treesitter-textobjects)', 'textobjects.scm'),
    'zed/languages/dl/highlights.scm': reversedHighlights(hl, lastWins('Zed')),
    'zed/languages/dl/indents.scm': copy('Zed', 'indents.scm'),
    'zed/languages/dl/textobjects.scm': copy('Zed', 'textobjects.scm'),
    'helix/queries/dl/highlights.scm': reversedHighlights(
      hl,
      lastWins('Helix 25.07 or newer, with Helix\'s capture names') +
        '; Helix 25.01 and older let the FIRST match win: give those the patterns in the opposite order.\n',
      helixRename,
    ),
    'helix/queries/dl/locals.scm': generated('Helix 25.07 or newer', 'locals.scm') + helixLocals(read('locals.scm')),
    'helix/queries/dl/indents.scm': copy('Helix', 'indents.scm'),
    'helix/queries/dl/textobjects.scm': copy('Helix', 'textobjects.scm'),
  };
}

function main() {
  // Sanity: the reordering keeps every pattern.
  const hl = read('highlights.scm');
  const count = groups(hl).reduce((k, g) => k + g.patterns.length, 0);
  const stale = [];
  for (const [rel, text] of Object.entries(outputs())) {
    if (rel.endsWith('highlights.scm')) {
      const k = groups(text).reduce((s, g) => s + g.patterns.length, 0);
      if (k !== count) throw new Error(`${rel}: ${k} patterns, the source has ${count}`);
    }
    const file = path.join(editors, rel);
    const now = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : null;
    if (now === text) continue;
    if (check) stale.push(rel);
    else {
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, text);
      console.log(`wrote editors/${rel}`);
    }
  }
  if (stale.length) {
    console.error(`out of date (run \`node editors/sync-queries.js\`): ${stale.map((s) => `editors/${s}`).join(', ')}`);
    process.exit(1);
  }
  if (check) console.log(`editors/sync-queries.js: the query copies are up to date (${count} highlight patterns)`);
}

if (require.main === module) main();
module.exports = { splitPatterns, groups, reversedHighlights, helixRename };
