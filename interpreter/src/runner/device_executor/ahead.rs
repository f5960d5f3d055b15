//! Batches uploaded a step ahead (the tuning guide's `pin_memory` + `non_blocking`): while a
//! step runs, the trainer hands the next batch to `put_ahead`, which copies it from page-locked
//! memory on the driver's copy stream into a buffer of its own and records an event; the next
//! step's `put` of the same values takes that buffer and makes the compute stream wait for the
//! event (the host does not wait). On the emulated driver a call that touches the buffer before
//! that wait is an error, so a step that read its batch early would fail.
//!
//! A batch's buffers alternate between two (a result-style reuse by slot: see `alloc_for`), and
//! the buffer an upload reuses was last read by the step before the current one, so the copy
//! waits for the event recorded when the current run started (`mark_run_start`), not for the
//! current step. `DLC_UPLOAD_AHEAD=0` uploads each batch when its step starts.

use super::{fail, DeviceExecutor, Place, Value};
use crate::runner::driver::{Driver, EventId};
use crate::runner::{storage, Slot};
use crate::runtime::tensor::Tensor;
use crate::runtime::RuntimeError;
use std::rc::Rc;

/// A batch's values on the device, or on their way.
pub(super) struct Ahead<B> {
    /// The values sent (a `put` of other values does not use them).
    source: Tensor,
    value: Value<B>,
    event: EventId,
}

/// Whether two tensors hold the same values: the same storage (a batch peeked and then taken),
/// or equal bytes.
fn same_values(a: &Tensor, b: &Tensor) -> bool {
    use crate::runtime::tensor::Data;
    if a.dtype != b.dtype || a.shape != b.shape {
        return false;
    }
    let shared = match (&a.data, &b.data) {
        (Data::F32(x), Data::F32(y)) => std::sync::Arc::ptr_eq(x, y),
        (Data::F64(x), Data::F64(y)) => std::sync::Arc::ptr_eq(x, y),
        (Data::I64(x), Data::I64(y)) => std::sync::Arc::ptr_eq(x, y),
        (Data::U8(x), Data::U8(y)) => std::sync::Arc::ptr_eq(x, y),
        _ => false,
    };
    shared || storage::with_device_bytes(a, |x, _| storage::with_device_bytes(b, |y, _| x == y)) == Some(Some(true))
}

impl<D: Driver> DeviceExecutor<D> {
    /// Upload `t` for the next `put` of `slot` on the copy stream.
    pub(super) fn upload_ahead(&mut self, slot: Slot, t: &Tensor) -> Result<(), RuntimeError> {
        if crate::runner::switched_off("DLC_UPLOAD_AHEAD") {
            return Ok(());
        }
        let (tag, after) = (super::tag(("ahead", slot)), self.fence);
        let sent = storage::with_device_bytes(t, |bytes, ty| {
            self.report.bytes_up += bytes.len() as u64;
            self.driver.upload_ahead(tag, bytes, after).map(|(buf, event)| (buf, event, ty))
        });
        let Some(sent) = sent else { return Ok(()) };
        let (buf, event, ty) = sent.map_err(fail)?;
        let value = Value { dtype: t.dtype, shape: t.shape.clone(), place: Place::Device(Rc::new(buf), ty) };
        self.ahead.insert(slot, Ahead { source: t.clone(), value, event });
        Ok(())
    }

    /// `put` of values uploaded ahead: the slot takes their buffer, and the compute stream waits
    /// for their copy. Whether they were.
    pub(super) fn take_ahead(&mut self, slot: Slot, t: &Tensor) -> Result<bool, RuntimeError> {
        let Some(a) = self.ahead.remove(&slot) else { return Ok(false) };
        if !same_values(&a.source, t) {
            return Ok(false);
        }
        self.driver.wait(a.event).map_err(fail)?;
        self.report.uploads_ahead += 1;
        self.slots.insert(slot, a.value);
        Ok(true)
    }

    /// Record where the current run starts on the compute stream, once batches are uploaded
    /// ahead (see the module's doc).
    pub(super) fn mark_run_start(&mut self) -> Result<(), RuntimeError> {
        if self.report.uploads_ahead > 0 || !self.ahead.is_empty() {
            self.fence = Some(self.driver.fence().map_err(fail)?);
        }
        Ok(())
    }
}
