//! The DL extension for Zed: starts the language server `dlc lsp` for DL buffers.
//!
//! The `dlc` binary is the one Zed's settings name (`"lsp": { "dlc": { "binary": { "path":
//! "/path/to/dlc", "arguments": ["lsp"] } } }`), else the first `dlc` on the worktree's PATH.

use zed_extension_api::{self as zed, settings::LspSettings, LanguageServerId, Result};

struct DlExtension;

impl zed::Extension for DlExtension {
    fn new() -> Self {
        DlExtension
    }

    fn language_server_command(&mut self, server: &LanguageServerId, worktree: &zed::Worktree) -> Result<zed::Command> {
        let binary = LspSettings::for_worktree(server.as_ref(), worktree).ok().and_then(|s| s.binary);
        let configured = binary.as_ref().and_then(|b| b.path.clone());
        let command = match configured {
            Some(path) => path,
            None => worktree
                .which("dlc")
                .ok_or_else(|| "dlc is not on PATH: install dlc, or set lsp.dlc.binary.path in Zed's settings".to_string())?,
        };
        let args = binary.as_ref().and_then(|b| b.arguments.clone()).unwrap_or_else(|| vec!["lsp".to_string()]);
        let mut env = worktree.shell_env();
        if let Some(extra) = binary.and_then(|b| b.env) {
            env.extend(extra);
        }
        Ok(zed::Command { command, args, env })
    }
}

zed::register_extension!(DlExtension);
