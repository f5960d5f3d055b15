//! Where an epoch's elements come from: prepared in memory (the source decoded and the stages
//! before the first epoch-dependent one applied, once a run), or read from the files as the
//! feed's workers ask for them (an uncompressed `npy` source whose whole pipeline streams), so
//! that a data set larger than memory trains with the memory of the batches in flight.

use super::{data_err, npy_types, str_arg, Element};
use crate::runtime::data::npy;
use crate::runtime::RuntimeError;
use dlc_language::eval::value::Stage;
use dlc_language::Span;
use std::path::Path;
use std::sync::Arc;

#[derive(Clone)]
pub enum Elements {
    Memory(Arc<Vec<Element>>),
    /// An `npy` source's rows, and its labels' rows, read when asked for.
    Rows {
        x: Arc<npy::Rows>,
        y: Option<Arc<npy::Rows>>,
        span: Span,
    },
}

impl Elements {
    pub fn len(&self) -> usize {
        match self {
            Elements::Memory(v) => v.len(),
            Elements::Rows { x, .. } => x.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i`.
    pub fn get(&self, i: usize) -> Result<Element, RuntimeError> {
        match self {
            Elements::Memory(v) => Ok(v[i].clone()),
            Elements::Rows { x, y, span } => {
                let mut e = vec![x.row(i).map_err(|e| data_err(e, *span))?];
                if let Some(y) = y {
                    e.push(y.row(i).map_err(|e| data_err(e, *span))?);
                }
                Ok(e)
            }
        }
    }

    /// Every element, in order (a pipeline that does not stream applies its stages to all).
    pub fn all(&self) -> Result<Vec<Element>, RuntimeError> {
        match self {
            Elements::Memory(v) => Ok((**v).clone()),
            other => (0..other.len()).map(|i| other.get(i)).collect(),
        }
    }
}

/// An `npy` source as rows read on demand, when its files are not gzip; `None` otherwise (and
/// for every other source).
pub fn on_demand(root: &Path, src: &Stage) -> Result<Option<Elements>, RuntimeError> {
    if src.kind != "npy" {
        return Ok(None);
    }
    let path = |name: &str| crate::paths::in_program(root, &str_arg(src, name).unwrap_or_default());
    let (row, label_row) = npy_types(src);
    let Some(x) = npy::Rows::open(&path("path"), &row).map_err(|e| data_err(e, src.span))? else { return Ok(None) };
    let y = match str_arg(src, "labels") {
        None => None,
        Some(_) => match npy::Rows::open(&path("labels"), &label_row).map_err(|e| data_err(e, src.span))? {
            None => return Ok(None),
            Some(y) if y.len() != x.len() => {
                let message = format!("{} has {} rows but {} has {}", path("path").display(), x.len(), path("labels").display(), y.len());
                return Err(RuntimeError::Data { message, span: src.span });
            }
            Some(y) => Some(Arc::new(y)),
        },
    };
    Ok(Some(Elements::Rows { x: Arc::new(x), y, span: src.span }))
}
