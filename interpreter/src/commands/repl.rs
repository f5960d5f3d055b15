//! `dlc repl`: declarations and expressions, multi-line input while brackets are open, history in a
//! file, tab completion of names in scope, and `:type`, `:load`, `:reset`, `:help`, `:quit`.
//! Errors render against the input and never end the session.

use dlc::api::RuntimeHost;
use dlc::render::render;
use dlc_language::eval::{Mode, Session};
use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::{Context, Editor, Helper, Highlighter, Hinter, Validator};
use std::cell::RefCell;
use std::io::IsTerminal;
use std::rc::Rc;

const HELP: &str = "\
Enter declarations (fn, model, data, let, use) or expressions; an expression's value is printed.
  :type EXPR    show the inferred type (e.g. f32[4, 10]) without running
  :load FILE    load and run a .dl file into this session
  :reset        forget everything defined so far
  :help         this text
  :quit         leave (also Ctrl-D)
Input continues on the next line while a bracket is open.";

#[derive(Helper, Highlighter, Hinter, Validator)]
struct Names {
    names: Rc<RefCell<Vec<String>>>,
}

impl Completer for Names {
    type Candidate = Pair;
    fn complete(&self, line: &str, pos: usize, _: &Context<'_>) -> rustyline::Result<(usize, Vec<Pair>)> {
        let start = line[..pos].rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map(|i| i + 1).unwrap_or(0);
        let word = &line[start..pos];
        let mut out: Vec<Pair> = self
            .names
            .borrow()
            .iter()
            .filter(|n| n.starts_with(word))
            .map(|n| Pair { display: n.clone(), replacement: n.clone() })
            .collect();
        for c in [":type", ":load", ":reset", ":help", ":quit"] {
            if start == 0 && c.starts_with(word) && word.starts_with(':') {
                out.push(Pair { display: c.into(), replacement: c.into() });
            }
        }
        Ok((start, out))
    }
}

/// Open brackets minus closed ones, ignoring strings and comments.
fn open_brackets(text: &str) -> i32 {
    let (toks, _) = dlc_language::syntax::lexer::lex(dlc_language::FileId(0), text);
    use dlc_language::syntax::token::{Punct, Tok};
    toks.iter()
        .map(|t| match t.tok {
            Tok::Punct(Punct::LParen | Punct::LBracket | Punct::LBrace) => 1,
            Tok::Punct(Punct::RParen | Punct::RBracket | Punct::RBrace) => -1,
            _ => 0,
        })
        .sum()
}

struct State {
    session: Session,
    host: RuntimeHost,
    color: bool,
}

impl State {
    fn new() -> State {
        State { session: Session::new(Mode::Run), host: RuntimeHost::new(Some(".".into()), true), color: std::io::stdout().is_terminal() }
    }

    fn show_diags(&self, diags: &[dlc_language::Diagnostic]) {
        for d in diags {
            eprint!("{}", render(d, &self.session.t.sources, self.color));
        }
    }

    fn eval(&mut self, text: &str) {
        let r = self.session.eval_input(text, &mut self.host);
        self.show_diags(&r.diags);
        if let Some(v) = r.value {
            // Show an expression's value unless it was a `print(...)` (which returns `()`).
            if !matches!(&v, dlc_language::eval::Value::Tuple(t) if t.is_empty()) {
                let g = &self.session.t.graph;
                let mut ts = vec![];
                match self.host.show(g, &v, &mut ts) {
                    Ok(s) => println!("{s}"),
                    Err(e) => eprintln!("error: {e}"),
                }
            }
        }
    }

    fn command(&mut self, line: &str) -> bool {
        let (cmd, arg) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let arg = arg.trim();
        match cmd {
            ":quit" | ":q" | ":exit" => return false,
            ":help" | ":h" => println!("{HELP}"),
            ":reset" => {
                *self = State::new();
                println!("session reset");
            }
            ":type" | ":t" => match self.session.type_of(arg) {
                Ok(t) => println!("{t}"),
                Err(diags) => self.show_diags(&diags),
            },
            ":load" | ":l" => match std::fs::read_to_string(arg) {
                Ok(text) => {
                    if let Some(dir) = std::path::Path::new(arg).parent() {
                        self.host.root = Some(dir.to_path_buf());
                    }
                    self.eval(&text);
                }
                Err(e) => eprintln!("error: cannot read `{arg}`: {e}"),
            },
            other => eprintln!("error: unknown command `{other}` (try :help)"),
        }
        true
    }
}

pub fn run() -> i32 {
    let names = Rc::new(RefCell::new(vec![]));
    let mut ed: Editor<Names, rustyline::history::DefaultHistory> = match Editor::new() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: cannot start the line editor: {e}");
            return 1;
        }
    };
    ed.set_helper(Some(Names { names: names.clone() }));
    let history = std::env::var_os("DLC_HISTORY")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".dlc_history")));
    if let Some(h) = &history {
        let _ = ed.load_history(h);
    }
    let interactive = std::io::stdin().is_terminal();
    if interactive {
        println!("dlc {} REPL — :help for commands, :quit to leave", env!("CARGO_PKG_VERSION"));
    }
    let mut state = State::new();
    let mut buffer = String::new();
    loop {
        *names.borrow_mut() = state.session.t.visible_names();
        let prompt = if buffer.is_empty() { ">> " } else { ".. " };
        match ed.readline(prompt) {
            Ok(line) => {
                if buffer.is_empty() && line.trim_start().starts_with(':') {
                    let _ = ed.add_history_entry(line.as_str());
                    if !state.command(line.trim()) {
                        break;
                    }
                    continue;
                }
                buffer.push_str(&line);
                buffer.push('\n');
                if open_brackets(&buffer) > 0 {
                    continue;
                }
                let input = std::mem::take(&mut buffer);
                if input.trim().is_empty() {
                    continue;
                }
                let _ = ed.add_history_entry(input.trim_end());
                state.eval(&input);
            }
            Err(ReadlineError::Interrupted) => {
                buffer.clear();
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                eprintln!("error: {e}");
                break;
            }
        }
    }
    if let Some(h) = &history {
        let _ = ed.save_history(h);
    }
    0
}
