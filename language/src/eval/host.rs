//! What the front end asks of its embedder: module sources and the effects of `print`.

use super::value::Value;
use crate::ir::Graph;

pub trait Host {
    /// The text of a user module `use a.b` (e.g. read `a/b.dl` next to the main file).
    /// Returns the display name and the text.
    fn load_module(&mut self, path: &[String]) -> Option<(String, String)>;
    /// Execute and show the values of a `print(...)` call. Only called in [`super::Mode::Run`].
    fn print(&mut self, graph: &Graph, values: &[Value]) -> Result<(), String>;
}

/// A host for checking only: no user modules beyond the stdlib, no effects.
pub struct NullHost;

impl Host for NullHost {
    fn load_module(&mut self, _path: &[String]) -> Option<(String, String)> {
        None
    }
    fn print(&mut self, _graph: &Graph, _values: &[Value]) -> Result<(), String> {
        Ok(())
    }
}
