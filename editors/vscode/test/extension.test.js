// extension.js against stand-ins for the `vscode` API and vscode-languageclient (VS Code itself
// cannot run here): the client is started with `dl.server.path` and `dl.server.args`, for the
// `dl` language over stdio, restarted when those settings change, not started when the path is
// empty, and a server that cannot start is reported with a way to the setting. And the manifest
// names what the extension uses.
//
// Run: `node test/extension.test.js` in editors/vscode (no npm packages needed).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const Module = require('node:module');
const fs = require('node:fs');
const path = require('node:path');

const extensionDir = path.resolve(__dirname, '..');

/** A fresh extension.js with stand-ins; returns the extension and what it did. */
function load(settings, { startFails = false } = {}) {
  const seen = { clients: [], errors: [], commands: {}, configListeners: [], executed: [] };
  const vscode = {
    workspace: {
      getConfiguration: (section) => ({ get: (key) => settings[`${section}.${key}`] }),
      workspaceFolders: [{ uri: { scheme: 'file', fsPath: '/project' } }],
      createFileSystemWatcher: (glob) => ({ glob, dispose() {} }),
      onDidChangeConfiguration: (f) => {
        seen.configListeners.push(f);
        return { dispose() {} };
      },
    },
    window: {
      createOutputChannel: (name) => ({ name, appendLine() {}, dispose() {} }),
      showErrorMessage: async (message, ...items) => {
        seen.errors.push(message);
        return items[0];
      },
    },
    commands: {
      registerCommand: (name, f) => {
        seen.commands[name] = f;
        return { dispose() {} };
      },
      executeCommand: async (...args) => seen.executed.push(args),
    },
  };
  class LanguageClient {
    constructor(id, name, serverOptions, clientOptions) {
      Object.assign(this, { id, name, serverOptions, clientOptions, started: false, stopped: false });
      seen.clients.push(this);
    }
    async start() {
      if (startFails) throw new Error('spawn dlc ENOENT');
      this.started = true;
    }
    async stop() {
      this.stopped = true;
    }
  }
  const languageclient = { LanguageClient, TransportKind: { stdio: 0, ipc: 1, pipe: 2, socket: 3 } };
  const file = path.join(extensionDir, 'extension.js');
  const originalLoad = Module._load;
  Module._load = function (request, parent, isMain) {
    if (request === 'vscode') return vscode;
    if (request === 'vscode-languageclient/node') return languageclient;
    return originalLoad.call(this, request, parent, isMain);
  };
  try {
    delete require.cache[require.resolve(file)];
    return { ext: require(file), seen };
  } finally {
    Module._load = originalLoad;
  }
}

const context = () => ({ subscriptions: [] });

test('activate starts `dlc lsp` over stdio for dl documents', async () => {
  const { ext, seen } = load({ 'dl.server.path': 'dlc', 'dl.server.args': ['lsp'] });
  await ext.activate(context());
  assert.equal(seen.clients.length, 1);
  const c = seen.clients[0];
  assert.equal(c.id, 'dl');
  assert.ok(c.started);
  assert.equal(c.serverOptions.run.command, 'dlc');
  assert.deepEqual(c.serverOptions.run.args, ['lsp']);
  // No `transport`: vscode-languageclient would add `--stdio` to the arguments (stdio is the default).
  assert.equal(c.serverOptions.run.transport, undefined);
  assert.equal(c.serverOptions.run.options.cwd, '/project');
  assert.deepEqual(c.clientOptions.documentSelector.map((s) => s.language), ['dl', 'dl']);
  assert.equal(c.clientOptions.synchronize.fileEvents.glob, '**/*.dl');
  assert.equal(typeof seen.commands['dl.restartServer'], 'function');
});

test('dl.server.path and dl.server.args are used; a change restarts the server', async () => {
  const settings = { 'dl.server.path': '/opt/dlc/bin/dlc', 'dl.server.args': ['lsp', '--log', 'debug'] };
  const { ext, seen } = load(settings);
  await ext.activate(context());
  assert.equal(seen.clients[0].serverOptions.run.command, '/opt/dlc/bin/dlc');
  assert.deepEqual(seen.clients[0].serverOptions.run.args, ['lsp', '--log', 'debug']);
  settings['dl.server.path'] = '/usr/local/bin/dlc';
  seen.configListeners[0]({ affectsConfiguration: (s) => s === 'dl.server' });
  await new Promise((r) => setImmediate(r));
  assert.ok(seen.clients[0].stopped);
  assert.equal(seen.clients.length, 2);
  assert.equal(seen.clients[1].serverOptions.run.command, '/usr/local/bin/dlc');
  assert.ok(seen.clients[1].started);
  // Another setting's change leaves the server alone.
  seen.configListeners[0]({ affectsConfiguration: (s) => s === 'editor.fontSize' });
  await new Promise((r) => setImmediate(r));
  assert.equal(seen.clients.length, 2);
  await ext.deactivate();
  assert.ok(seen.clients[1].stopped);
});

test('the default command is `dlc lsp`; an empty path starts nothing', async () => {
  const defaults = load({});
  assert.deepEqual(defaults.ext.serverCommand(), null, 'no path setting at all (the manifest gives the default)');
  const manifest = JSON.parse(fs.readFileSync(path.join(extensionDir, 'package.json'), 'utf8'));
  const props = manifest.contributes.configuration.properties;
  const { ext } = load({ 'dl.server.path': props['dl.server.path'].default, 'dl.server.args': props['dl.server.args'].default });
  assert.deepEqual(ext.serverCommand(), { command: 'dlc', args: ['lsp'] });
  const off = load({ 'dl.server.path': '  ', 'dl.server.args': ['lsp'] });
  await off.ext.activate(context());
  assert.equal(off.seen.clients.length, 0);
});

test('a server that cannot start is reported, with the setting to fix it', async () => {
  const { ext, seen } = load({ 'dl.server.path': 'dlc', 'dl.server.args': ['lsp'] }, { startFails: true });
  await ext.activate(context());
  assert.equal(seen.errors.length, 1);
  assert.match(seen.errors[0], /dlc lsp/);
  assert.match(seen.errors[0], /dl\.server\.path/);
  assert.deepEqual(seen.executed, [['workbench.action.openSettings', 'dl.server']]);
});

test('the manifest wires the client, grammar, snippets and settings', () => {
  const manifest = JSON.parse(fs.readFileSync(path.join(extensionDir, 'package.json'), 'utf8'));
  assert.equal(manifest.main, './extension.js');
  assert.ok(manifest.activationEvents.includes('onLanguage:dl'));
  assert.ok(manifest.dependencies['vscode-languageclient'], 'vscode-languageclient is a dependency');
  for (const key of ['vscode-textmate', 'vscode-oniguruma', '@vscode/vsce']) assert.ok(manifest.devDependencies[key], key);
  const c = manifest.contributes;
  for (const rel of [c.languages[0].configuration, c.grammars[0].path, c.snippets[0].path]) {
    assert.ok(fs.existsSync(path.join(extensionDir, rel)), `${rel} exists`);
    JSON.parse(fs.readFileSync(path.join(extensionDir, rel), 'utf8'));
  }
  assert.deepEqual(c.configuration.properties['dl.server.args'].default, ['lsp']);
  assert.equal(c.configuration.properties['dl.server.path'].default, 'dlc');
  assert.ok(c.commands.some((x) => x.command === 'dl.restartServer'));
  // vscode-languageclient 9 needs VS Code 1.82 or newer.
  assert.match(manifest.engines.vscode, /^\^1\.(8[2-9]|9\d)/);
});

test('the snippets: model, data, train, infer and evaluate, each valid DL once filled in', () => {
  const snippets = JSON.parse(fs.readFileSync(path.join(extensionDir, 'snippets', 'dl.json'), 'utf8'));
  const prefixes = Object.values(snippets).flatMap((s) => [].concat(s.prefix));
  for (const p of ['model', 'data', 'train', 'infer', 'evaluate']) assert.ok(prefixes.includes(p), `a snippet for ${p}`);
  for (const [name, s] of Object.entries(snippets)) {
    assert.ok(Array.isArray(s.body) && s.body.length > 0, `${name}: body`);
    assert.ok(s.description, `${name}: description`);
  }
});

// ---- the snippets as DL: filled in with their defaults, `dlc check` accepts them together -------

/** A snippet body with each placeholder's default (a choice's first), `\t` as two spaces. */
function expand(body, overrides = {}) {
  const values = { ...overrides };
  let text = body.join('\n');
  // Defaults first (`${1:x}`, `${1|a,b|}`), innermost out, then the plain references (`$1`).
  for (let again = true; again; ) {
    again = false;
    text = text.replace(/\$\{(\d+):([^{}$]*)\}/g, (_, n, d) => {
      again = true;
      if (!(n in values)) values[n] = d;
      return values[n];
    });
    text = text.replace(/\$\{(\d+)\|([^|]*)\|\}/g, (_, n, choices) => {
      again = true;
      if (!(n in values)) values[n] = choices.split(',')[0];
      return values[n];
    });
    text = text.replace(/\$(\d+)/g, (m, n) => (n in values ? ((again = true), values[n]) : m));
  }
  text = text.replace(/\$(\d+)/g, (_, n) => values[n] || '');
  return text.replace(/\t/g, '  ');
}

function findDlc() {
  const candidates = [process.env.DLC, path.join(extensionDir, '..', '..', 'target', 'debug', 'dlc'), path.join(extensionDir, '..', '..', 'target', 'release', 'dlc')];
  return candidates.find((p) => p && fs.existsSync(p));
}

test('the snippets, filled in, make a program `dlc check` and `dlc fmt --check` accept', (t) => {
  const dlc = findDlc();
  if (!dlc) return t.skip('no dlc binary (build it, or set DLC)');
  const { execFileSync } = require('node:child_process');
  const os = require('node:os');
  const s = JSON.parse(fs.readFileSync(path.join(extensionDir, 'snippets', 'dl.json'), 'utf8'));
  const program = [
    expand(s['use the standard library'].body).trimEnd(),
    '',
    expand(s.fn.body),
    '',
    expand(s.model.body).trimEnd(),
    '',
    expand(s.data.body).trimEnd(),
    '',
    expand(s.data.body, { 1: 'test_set', 4: 'test', 7: 'false' }).trimEnd(),
    '',
    expand(s['data from a CSV file'].body).trimEnd(),
    '',
    expand(s.train.body, { 0: [expand(s['evaluate clause'].body), expand(s['checkpoint clause'].body)].join('\n  ') }),
    '',
    expand(s['train with a custom step'].body, { 1: 'custom' }).trimEnd(),
    '',
    expand(s.evaluate.body).trimEnd(),
    '',
    expand(s.infer.body).trimEnd(),
    '',
    `let h = ${expand(s['precision block'].body, { 0: 'randn(f32[2, 2], seed: 0) * 2.0' })}`,
    '',
  ].join('\n');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dl-snippets-'));
  const file = path.join(dir, 'snippets.dl');
  fs.writeFileSync(file, program);
  const run = (args) => {
    try {
      return execFileSync(dlc, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (e) {
      assert.fail(`dlc ${args.join(' ')} failed:\n${e.stdout}${e.stderr}\n--- ${file}:\n${program}`);
    }
  };
  run(['check', file]);
  run(['fmt', '--check', file]);
  fs.rmSync(dir, { recursive: true });
});
