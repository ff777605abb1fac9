//! Ctrl-C handling.
//!
//! The handler only raises a flag: every loop in the bench is bounded in
//! time and polls [`stop_requested`], so the stack unwinds normally and the
//! [`crate::testbed::Testbed`] guards delete what was created. Child
//! processes (iptables-restore, nft, trafgen) are in our process group and
//! receive the same SIGINT, so a long external command also ends promptly.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Only async-signal-safe work here: one atomic store.
    STOP.store(true, Ordering::SeqCst);
}

/// Installs the SIGINT/SIGTERM/SIGHUP handler. Idempotent.
pub fn install() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: installing a handler that performs a single atomic store is
    // async-signal-safe; the function pointer lives for the whole program.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
        libc::signal(libc::SIGHUP, handler);
    }
}

/// True once the user asked the bench to stop.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Returns an error if a stop was requested, for use with `?` in loops.
pub fn check() -> crate::Result<()> {
    if stop_requested() {
        Err(crate::Error::msg("interrupted"))
    } else {
        Ok(())
    }
}
