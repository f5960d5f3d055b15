// extension.js with the real vscode-languageclient (from node_modules, as the .vsix carries it)
// against a stand-in language server (test/fixtures/fake-server.js): the client spawns the
// command of `dl.server.path` with exactly `dl.server.args` (no `--stdio` added), in the
// workspace folder, and goes through initialize, initialized, shutdown and exit. VS Code's API
// is a stand-in: objects whose unknown members are inert functions.
//
// Run: `node test/client.test.js` in editors/vscode after `npm ci`.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const Module = require('node:module');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const extensionDir = path.resolve(__dirname, '..');

// Any member not given is an inert function that returns another such object.
const inert = {
  get: (target, prop) => (prop in target ? target[prop] : prop === 'then' ? undefined : new Proxy(function () {}, inert)),
  apply: () => new Proxy(function () {}, inert),
  construct: () => new Proxy(function () {}, inert),
};
const stub = (o) => new Proxy(o, inert);

test('the real client starts the configured server with its arguments and shuts it down', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dl-client-'));
  const logFile = path.join(dir, 'server.log');
  process.env.FAKE_SERVER_LOG = logFile;
  const settings = {
    'dl.server.path': process.execPath,
    'dl.server.args': [path.join(__dirname, 'fixtures', 'fake-server.js'), 'lsp'],
  };
  const disposable = { dispose() {} };
  const errors = [];
  const vscode = stub({
    version: '1.90.0',
    workspace: stub({
      getConfiguration: (section) => stub({ get: (key, d) => settings[`${section}.${key}`] ?? (key.endsWith('trace.server') ? 'off' : d) }),
      workspaceFolders: [{ uri: { scheme: 'file', fsPath: dir } }],
      textDocuments: [],
      createFileSystemWatcher: () => stub({ dispose() {} }),
      onDidChangeConfiguration: () => disposable,
    }),
    window: stub({
      createOutputChannel: () => stub({ append() {}, appendLine() {}, dispose() {} }),
      showErrorMessage: async (m) => errors.push(m),
    }),
    commands: stub({ registerCommand: () => disposable, executeCommand: async () => {} }),
    Disposable: class {
      constructor(f) {
        this.f = f;
      }
      dispose() {
        if (this.f) this.f();
      }
      static from() {
        return disposable;
      }
    },
    EventEmitter: class {
      constructor() {
        this.event = () => disposable;
      }
      fire() {}
      dispose() {}
    },
  });
  const originalLoad = Module._load;
  Module._load = function (request, parent, isMain) {
    return request === 'vscode' ? vscode : originalLoad.call(this, request, parent, isMain);
  };
  let ext;
  try {
    ext = require(path.join(extensionDir, 'extension.js'));
  } finally {
    Module._load = originalLoad;
  }
  await ext.activate({ subscriptions: [], extensionPath: extensionDir });
  assert.deepEqual(errors, []);
  await ext.deactivate();
  // The server exits on `exit`; give it a moment to write its last line.
  for (let i = 0; i < 50 && !fs.readFileSync(logFile, 'utf8').includes('"exit"'); i++) await new Promise((r) => setTimeout(r, 100));
  const entries = fs.readFileSync(logFile, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  assert.deepEqual(entries[0], { args: ['lsp'], cwd: fs.realpathSync(dir) });
  assert.deepEqual(entries.slice(1).map((e) => e.method), ['initialize', 'initialized', 'shutdown', 'exit']);
  assert.equal(entries[1].params.processId, process.pid);
  fs.rmSync(dir, { recursive: true });
});
