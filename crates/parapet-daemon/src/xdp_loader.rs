//! The XDP loader thread: loads the tree form of the interface chain
//! (generation and the verifier: up to tens of seconds for the split form)
//! without the state lock, so bans and every other command proceed while
//! the walker enforces the new ruleset, then takes the lock to swap it in
//! — only if no later change superseded it
//! (`Kernel::finish_xdp_job`, src/kernel/xdp_engine.rs). One job at a
//! time; a job posted while one loads waits in the mailbox, where a newer
//! post replaces it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::link_watch::TICK;
use crate::shared::Shared;

/// Runs until shutdown (looked at every [`TICK`] and after each load).
pub(crate) fn load_loop(shared: Arc<Shared>) {
    let mailbox = shared.state.lock().unwrap().kernel.xdp_mailbox();
    while !shared.shutdown.load(Ordering::SeqCst) {
        let Some(job) = mailbox.take(TICK) else {
            continue;
        };
        let (generation, prepared) = job.load();
        let mut st = shared.state.lock().unwrap();
        st.kernel.finish_xdp_job(generation, prepared);
    }
}
