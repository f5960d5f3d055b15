//! Go to definition and find references. A name of the file links to its definition by
//! `scopes`; any other to the module the checker's session found it in: another file of the
//! program, or the standard library's file (read-only: the server never reports on it). A
//! builtin has no DL source, so no definition.

use super::analysis::Analysis;
use super::resolve::{global, location, target_at, Target};
use super::stdlib::Stdlib;
use lsp_types::{Location, Uri};

pub fn definition(a: &Analysis, std: &Stdlib, uri: &Uri, offset: usize) -> Option<Location> {
    let (_, target) = target_at(a, offset)?;
    location(a, std, uri, &target)
}

/// The uses (and with `declaration`, the definition) of what is under the cursor: in this file
/// for the file's names, in every open document for another module's item.
pub fn references(docs: &[(&Uri, &Analysis)], std: &Stdlib, uri: &Uri, offset: usize, declaration: bool) -> Vec<Location> {
    let Some((_, a)) = docs.iter().find(|(u, _)| *u == uri) else { return vec![] };
    let Some((_, target)) = target_at(a, offset) else { return vec![] };
    let mut out = vec![];
    if declaration {
        out.extend(location(a, std, uri, &target));
    }
    match &target {
        Target::Local(d) => out.extend(a.index.uses(*d).map(|r| Location { uri: uri.clone(), range: a.range(r.span) })),
        global_target => {
            for (doc_uri, doc) in docs {
                for r in doc.index.refs.iter().filter(|r| r.def.is_none()) {
                    if same(&global(&doc.session, &r.name), global_target, doc, a) {
                        out.push(Location { uri: (*doc_uri).clone(), range: doc.range(r.span) });
                    }
                }
            }
        }
    }
    out
}

/// Whether two documents' globals are the same definition (the same module by name, the same
/// item), though each session numbers its modules in its own order.
fn same(t: &Option<Target>, want: &Target, doc: &Analysis, origin: &Analysis) -> bool {
    match (t, want) {
        (Some(Target::Builtin(a)), Target::Builtin(b)) => a == b,
        (Some(Target::Item { module: m1, name: n1, .. }), Target::Item { module: m2, name: n2, .. }) => {
            n1 == n2 && doc.session.t.modules[*m1].name == origin.session.t.modules[*m2].name
        }
        _ => false,
    }
}
