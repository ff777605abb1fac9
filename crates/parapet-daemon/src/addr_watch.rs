//! The address watcher: keeps the dataplane's address-type mirror (the
//! `local` routing table's local and broadcast routes, which `-m addrtype`
//! and nft `fib … type` read) equal to the namespace's, so an address
//! added or removed while parapetd runs changes the types at once, without
//! an apply. One rtnetlink socket subscribed to the IPv4 and IPv6 address
//! and route groups (and the netconf groups: forwarding at `lo`, which
//! the reverse-path lookups need); any event, or a lost batch (`ENOBUFS`), re-reads the
//! whole table ([`Kernel::refresh_addr_mirror`](crate::kernel::Kernel::refresh_addr_mirror)):
//! a burst of events costs one dump. The socket plumbing is the link
//! watcher's (src/link_watch.rs).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;

use crate::link_watch::{RtnlEvents, TICK};
use crate::shared::Shared;

/// The groups whose events can change the `local` table, and the netconf
/// groups, whose forwarding changes can turn `lo`'s forwarding off under
/// the reverse-path lookups ([`Kernel::refresh_addr_mirror`](crate::kernel::Kernel::refresh_addr_mirror)
/// turns it on again).
const GROUPS: u32 = (libc::RTMGRP_IPV4_IFADDR
    | libc::RTMGRP_IPV6_IFADDR
    | libc::RTMGRP_IPV4_ROUTE
    | libc::RTMGRP_IPV6_ROUTE) as u32
    | 1 << (libc::RTNLGRP_IPV4_NETCONF - 1)
    | 1 << (libc::RTNLGRP_IPV6_NETCONF - 1);

/// The address watcher thread's body.
pub(crate) fn watch_loop(shared: Arc<Shared>) {
    let events = match RtnlEvents::open(GROUPS) {
        Ok(s) => s,
        Err(e) => {
            shared.state.lock().unwrap().kernel.addr_watch_failed(&e);
            eprintln!(
                "parapetd: no address events ({e}): the address types follow the host's \
                 addresses only as the dataplane's load found them"
            );
            return;
        }
    };
    // changes between the dataplane's load and this subscription
    let mut due = true;
    while !shared.shutdown.load(Ordering::SeqCst) {
        if due {
            shared.state.lock().unwrap().kernel.refresh_addr_mirror();
        }
        due = match events.wait() {
            Ok(n) => n > 0,
            Err(e) => {
                eprintln!("parapetd: address events: {e}");
                thread::sleep(TICK);
                true
            }
        };
    }
}
