//! The rejecter thread: answers the REJECTs of the netfilter hooks, where
//! the BPF program can only drop. It takes the loaded program's reject ring
//! ([`Kernel::take_reject_queue`](crate::kernel::Kernel::take_reject_queue);
//! a reload makes a new one, picked up within a tick) and sends each TCP
//! reset or ICMP error with a raw socket of parapetd's network namespace
//! (`parapet_dataplane::RejectSender`). The kernel side applies the global
//! reply rate, and the ring is bounded, so this thread does bounded work
//! per tick. See docs/dataplane.md, "REJECT at the netfilter hooks".

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use parapet_dataplane::{RejectQueue, RejectSender};

use crate::shared::Shared;

/// How long one wait for records lasts before the thread looks for a new
/// ring and at the shutdown flag.
const TICK: Duration = Duration::from_millis(100);

pub(crate) fn reject_loop(shared: Arc<Shared>) {
    // made with the first ring: a daemon that never loads the program
    // (tests, `--no-kernel` set-ups) needs no raw socket
    let mut sender: Option<RejectSender> = None;
    let mut queue: Option<RejectQueue> = None;
    while !shared.shutdown.load(Ordering::SeqCst) {
        let (fresh, counts) = {
            let mut st = shared.state.lock().unwrap();
            (st.kernel.take_reject_queue(), st.kernel.nf_reject.clone())
        };
        if fresh.is_some() {
            queue = fresh;
            if sender.is_none() {
                match RejectSender::new() {
                    Ok(s) => sender = Some(s),
                    Err(e) => eprintln!(
                        "parapetd: REJECT at the netfilter hooks drops without answer: \
                         no raw socket ({e})"
                    ),
                }
            }
        }
        match (&mut queue, &sender) {
            (Some(q), Some(s)) => q.serve_once(s, TICK, &counts),
            _ => thread::sleep(TICK),
        }
    }
}
