// The DL extension's client: starts `dlc lsp` (the language server in dlc) over stdio for `.dl`
// files through vscode-languageclient, and restarts it when its settings change.
//
// Settings: `dl.server.path` (default `dlc`, looked up on PATH; empty turns the server off),
// `dl.server.args` (default `["lsp"]`), `dl.trace.server`. Command: "DL: Restart Language Server".
'use strict';

const vscode = require('vscode');
const { LanguageClient } = require('vscode-languageclient/node');

/** @type {LanguageClient | undefined} */
let client;
/** @type {vscode.OutputChannel | undefined} */
let output;

/** The server's command line from the settings: `{ command, args }`, or null when turned off. */
function serverCommand() {
  const config = vscode.workspace.getConfiguration('dl');
  const command = (config.get('server.path') || '').trim();
  if (!command) return null;
  const args = config.get('server.args');
  return { command, args: Array.isArray(args) ? args.map(String) : ['lsp'] };
}

async function start() {
  const cmd = serverCommand();
  if (!cmd) return;
  output = output || vscode.window.createOutputChannel('DL Language Server');
  const folder = vscode.workspace.workspaceFolders && vscode.workspace.workspaceFolders[0];
  // Stdio without `transport`: with `TransportKind.stdio` the client would append `--stdio` to
  // the arguments, and `dlc lsp` takes none.
  const run = {
    command: cmd.command,
    args: cmd.args,
    options: folder && folder.uri.scheme === 'file' ? { cwd: folder.uri.fsPath } : {},
  };
  /** @type {import('vscode-languageclient/node').LanguageClientOptions} */
  const clientOptions = {
    documentSelector: [
      { scheme: 'file', language: 'dl' },
      { scheme: 'untitled', language: 'dl' },
    ],
    outputChannel: output,
    synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher('**/*.dl') },
  };
  client = new LanguageClient('dl', 'DL Language Server', { run, debug: run }, clientOptions);
  try {
    await client.start();
  } catch (err) {
    const message = err && err.message ? err.message : String(err);
    client = undefined;
    const choice = await vscode.window.showErrorMessage(
      `DL: could not start the language server \`${cmd.command} ${cmd.args.join(' ')}\` (${message}). ` +
        'Install dlc, or set "dl.server.path" to the dlc executable.',
      'Open Settings',
    );
    if (choice === 'Open Settings') {
      await vscode.commands.executeCommand('workbench.action.openSettings', 'dl.server');
    }
  }
}

async function stop() {
  const c = client;
  client = undefined;
  if (c) {
    try {
      await c.stop();
    } catch (_) {
      // A server that already exited has nothing to stop.
    }
  }
}

async function restart() {
  await stop();
  await start();
}

/** @param {vscode.ExtensionContext} context */
async function activate(context) {
  context.subscriptions.push(
    vscode.commands.registerCommand('dl.restartServer', restart),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('dl.server')) restart();
    }),
    { dispose: () => stop() },
  );
  await start();
}

function deactivate() {
  return stop();
}

module.exports = { activate, deactivate, serverCommand };
