//! The address-type mirror: the host's `local` and `broadcast` routes of
//! the `local` routing table in the dataplane's trie, which `-m addrtype`
//! and nft `fib … type` read (bpf/lib/addr_type.h). Filled when the
//! dataplane is loaded or adopted, and again on every address or route
//! event of the namespace (src/addr_watch.rs), so an address added with
//! `ip addr add` is LOCAL without an apply (docs/daemon.md, "The address
//! mirror").

use parapet_dataplane::Dataplane;
use serde_json::{json, Value};

use super::Kernel;

/// What the mirror holds and how it got there, for `stats`.
#[derive(Debug, Default, Clone)]
pub(crate) struct AddrMirror {
    /// Routes mirrored by the last refresh that succeeded.
    pub routes: usize,
    /// Refreshes that succeeded.
    pub refreshes: u64,
    /// Why the last refresh failed (cleared by the next one that works),
    /// or why there are no events to follow.
    pub error: Option<String>,
}

impl AddrMirror {
    /// Reads the namespace's `local` table into `dp`'s mirror.
    pub(crate) fn fill(&mut self, dp: &mut Dataplane) {
        match dp.mirror_local_table() {
            Ok(n) => {
                self.routes = n;
                self.refreshes += 1;
                self.error = None;
            }
            Err(e) => {
                eprintln!("parapetd: dataplane: address mirror: {e}");
                self.error = Some(e.to_string());
            }
        }
    }

    pub(crate) fn json(&self) -> Value {
        json!({"routes": self.routes, "refreshes": self.refreshes, "error": self.error})
    }
}

impl Kernel {
    /// Refreshes the address mirror (the address watcher's call on every
    /// burst of events); nothing to do before the dataplane is loaded, which
    /// fills it then.
    pub fn refresh_addr_mirror(&mut self) {
        if let Some(dp) = self.dp.as_mut() {
            self.addr_mirror.fill(dp);
        }
        self.keep_lo_forwarding();
    }

    /// While a live image reads the reverse-path outcome, forwarding at
    /// `lo` stays on: writing `net.ipv4.ip_forward` (or `…all.forwarding`)
    /// turns it off there too, and then every lookup fails and the walk
    /// is abandoned (parapet_dataplane::rev_path). The address watcher
    /// hears the netconf change and calls this.
    fn keep_lo_forwarding(&mut self) {
        let Some(dp) = self.dp.as_ref() else { return };
        if !dp.reads_rev_path().unwrap_or(false) || parapet_dataplane::rev_path::lo_forwarding_on()
        {
            return;
        }
        match parapet_dataplane::rev_path::lo_forwarding() {
            Ok(()) => eprintln!(
                "parapetd: forwarding at lo was turned off (ip_forward written?): on again, \
                 for the reverse-path lookups of the live ruleset"
            ),
            Err(e) => eprintln!("parapetd: {e}: the reverse-path checks abandon their walks"),
        }
    }

    /// The address watcher could not subscribe to events: the mirror
    /// stays as the load left it.
    pub fn addr_watch_failed(&mut self, e: &std::io::Error) {
        self.addr_mirror.error = Some(format!("no address events: {e}"));
    }
}
