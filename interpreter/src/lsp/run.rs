//! `workspace/executeCommand` for the run lens's `dlc.run`. The server advertises the command,
//! so every client runs the lens without code of its own (VS Code's language client forwards an
//! advertised command to the server; Neovim sends it when no client-side handler is registered):
//! it starts `dlc run FILE` in the background, its output going to a log file it names. A plugin
//! that would rather run it in a terminal intercepts the command (VS Code: the client's
//! `middleware.executeCommand`).

use super::server::Server;
use lsp_types::{ExecuteCommandParams, MessageType};
use std::process::{Command, Stdio};

pub fn execute(s: &mut Server, p: ExecuteCommandParams) -> Result<(), String> {
    if p.command != super::lens::RUN {
        return Err(format!("unknown command `{}`", p.command));
    }
    let file = p.arguments.first().and_then(|f| f.as_str()).ok_or("`dlc.run` takes the file to run")?.to_string();
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the dlc binary: {e}"))?;
    let stem = std::path::Path::new(&file).file_stem().and_then(|s| s.to_str()).unwrap_or("program").to_string();
    let log = std::env::temp_dir().join(format!("dlc-run-{stem}-{}.log", std::process::id()));
    let out = std::fs::File::create(&log).map_err(|e| format!("cannot write {}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let child = Command::new(exe)
        .arg("run")
        .arg(&file)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .map_err(|e| format!("cannot start `dlc run {file}`: {e}"))?;
    s.message(MessageType::INFO, format!("started `dlc run {file}` (process {}); output in {}", child.id(), log.display()));
    s.runs.push(child);
    Ok(())
}
