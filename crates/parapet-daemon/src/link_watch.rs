//! The link watcher: follows the interfaces of parapetd's network
//! namespace so the tc placement covers an interface from the moment it
//! appears (a VLAN, a veth, a hot-plugged or renamed NIC), not from the
//! next apply. One rtnetlink socket subscribed to link events
//! (`RTNLGRP_LINK`); any event — or a lost one (`ENOBUFS`) — makes the
//! kernel state re-sync the placement's links with the namespace's
//! interfaces ([`Kernel::follow_links`](crate::kernel::Kernel::follow_links)).
//! The messages are not parsed: the re-sync reads the interfaces itself,
//! so a burst of events costs one re-sync. New interfaces are linked
//! before the state lock is taken, with the programs the kernel state
//! publishes (`TcWatch` in src/kernel/tc_placement.rs), so an
//! apply holding the lock does not hold them back. docs/hooks.md, *Without
//! netfilter BPF links*, says what the window between an interface
//! appearing and its links is.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::shared::Shared;

/// How long one wait for events lasts before the thread looks at the
/// shutdown flag.
pub(crate) const TICK: Duration = Duration::from_millis(200);

/// An rtnetlink socket that receives some of the namespace's event
/// groups (`RTMGRP_*`): link events here, address and route events for the
/// address mirror (src/addr_watch.rs).
pub(crate) struct RtnlEvents(OwnedFd);

impl RtnlEvents {
    pub(crate) fn open(groups: u32) -> io::Result<RtnlEvents> {
        // SAFETY: plain socket(2); the descriptor is owned right below.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor nothing else owns.
        let sock = RtnlEvents(unsafe { OwnedFd::from_raw_fd(fd) });
        // SAFETY: sockaddr_nl is plain data; zero is its empty value.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        addr.nl_groups = groups;
        // SAFETY: addr is a valid sockaddr_nl of the size given.
        let r = unsafe {
            libc::bind(
                fd,
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let tv = libc::timeval {
            tv_sec: TICK.as_secs() as libc::time_t,
            tv_usec: TICK.subsec_micros() as libc::suseconds_t,
        };
        // SAFETY: tv is a valid timeval of the size given.
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(sock)
    }

    /// Waits up to [`TICK`] for events, then takes every queued one;
    /// returns how many arrived (a lost batch counts as one: the caller
    /// re-syncs either way).
    pub(crate) fn wait(&self) -> io::Result<u64> {
        let mut buf = [0u8; 8192];
        let mut n = 0u64;
        let mut flags = 0;
        loop {
            // SAFETY: buf is writable for its length.
            let r = unsafe {
                libc::recv(
                    self.0.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    flags,
                )
            };
            if r >= 0 {
                n += 1;
                // the rest without waiting: one re-sync per burst
                flags = libc::MSG_DONTWAIT;
                continue;
            }
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(n),
                // the kernel dropped events (socket buffer full): which
                // links changed is unknown, a re-sync covers them all
                Some(libc::ENOBUFS) => Ok(n + 1),
                _ => Err(e),
            };
        }
    }
}

/// The link watcher thread's body.
pub(crate) fn watch_loop(shared: Arc<Shared>) {
    let events = match RtnlEvents::open(libc::RTMGRP_LINK as u32) {
        Ok(s) => s,
        Err(e) => {
            shared.state.lock().unwrap().kernel.link_watch_failed(&e);
            eprintln!(
                "parapetd: no link events ({e}): the tc placement covers new interfaces \
                 only at the next apply"
            );
            return;
        }
    };
    let ahead = shared.state.lock().unwrap().kernel.tc_watch.clone();
    // interfaces made between the daemon's restore and this subscription
    let mut due = true;
    while !shared.shutdown.load(Ordering::SeqCst) {
        if due {
            let t0 = Instant::now();
            // new interfaces get their links first, without the state lock
            // (an apply may hold it for seconds); the re-sync under the
            // lock then takes them over
            let (linked, failed) = ahead.lock().unwrap_or_else(|e| e.into_inner()).link_new();
            let linked_at = Instant::now();
            for line in failed {
                eprintln!("parapetd: dataplane: {line}");
            }
            let said = shared
                .state
                .lock()
                .unwrap()
                .kernel
                .follow_links(t0, &linked, linked_at);
            for line in said {
                eprintln!("parapetd: dataplane: {line}");
            }
        }
        due = match events.wait() {
            Ok(n) => n > 0,
            Err(e) => {
                eprintln!("parapetd: link events: {e}");
                thread::sleep(TICK);
                true
            }
        };
    }
}
