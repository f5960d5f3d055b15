//! Third-party decoders (image codecs, the Parquet reader) run inside `contained`: a panic on a
//! malformed file becomes that file's error, and is not also printed. Rust's default panic hook
//! prints "thread '...' panicked at ..." before `catch_unwind` sees the panic, so a user whose
//! run skipped one corrupt JPEG would see a backtrace hint above the clean warning. The hook
//! installed here stays silent on a thread while it runs contained code, and defers to the hook
//! it replaced everywhere else.

use std::cell::Cell;
use std::sync::Once;

thread_local! {
    static CONTAINED: Cell<bool> = const { Cell::new(false) };
}

/// `f()`, or the text of its panic.
pub fn contained<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let earlier = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !CONTAINED.with(Cell::get) {
                earlier(info);
            }
        }));
    });
    let was = CONTAINED.with(|c| c.replace(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    CONTAINED.with(|c| c.set(was));
    r.map_err(|p| panic_text(p.as_ref()))
}

/// A panic's message.
pub fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "a panic".into())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_contained_panic_is_its_message_and_the_thread_goes_on() {
        let r: Result<(), String> = super::contained(|| panic!("bad file at byte {}", 7));
        assert_eq!(r, Err("bad file at byte 7".to_string()));
        assert_eq!(super::contained(|| 2 + 2), Ok(4));
    }
}
