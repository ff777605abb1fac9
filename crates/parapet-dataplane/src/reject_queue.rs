//! REJECT at the netfilter hooks, the user-space half. The netfilter
//! program can only accept or drop, so on a REJECT it drops and queues the
//! packet's first bytes in the `parapet_nf_reject` ring buffer
//! (`bpf/lib/nf_reject.h`, within the global reply rate); [`RejectQueue`]
//! reads that ring, [`frame::reject_reply`](crate::frame::reject_reply)
//! builds the TCP reset or ICMP error, and [`RejectSender`] sends it with a
//! raw socket that takes the IP header as given. parapetd runs
//! [`RejectQueue::serve`] on a thread of its own (`src/rejecter.rs` of the
//! daemon). See docs/dataplane.md, "REJECT at the netfilter hooks".

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use aya::maps::{MapData, RingBuf};

use crate::abi::reject::{RawNfReject, TCP_RESET};
use crate::abi::{FAMILY_IPV6, HOOK_NF_INPUT};
use crate::frame::reject_reply;
use crate::Dataplane;

/// One REJECT queued by a netfilter hook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NfReject {
    /// `PARAPET_REJECT_*` type.
    pub rtype: u8,
    /// `HOOK_NF_*`.
    pub hook: u8,
    /// IPv6 (else IPv4).
    pub ipv6: bool,
    /// Input interface (0 at OUTPUT).
    pub ifindex: u32,
    /// Output interface (0 at INPUT).
    pub oifindex: u32,
    /// CLOCK_MONOTONIC nanoseconds of the drop.
    pub ts_ns: u64,
    /// The packet's first bytes from its network header.
    pub pkt: Vec<u8>,
}

/// The reader of the `parapet_nf_reject` ring, taken out of the
/// [`Dataplane`] so that a thread of its own can own it.
pub struct RejectQueue {
    ring: RingBuf<MapData>,
}

/// What [`RejectQueue::serve`] did, for `stats`.
#[derive(Debug, Default)]
pub struct RejectCounts {
    /// Replies sent.
    pub sent: AtomicU64,
    /// Records of packets that get no answer (ICMP errors, resets,
    /// fragments, multicast, a type of the other family, too short a copy).
    pub no_reply: AtomicU64,
    /// Replies the raw socket refused to send.
    pub failed: AtomicU64,
}

impl Dataplane {
    /// Take the reader of the netfilter REJECT ring; `None` once taken.
    pub fn take_reject_queue(&mut self) -> Option<RejectQueue> {
        self.nf_reject.take().map(|ring| RejectQueue { ring })
    }
}

impl RejectQueue {
    /// The ring's fd: readable when records wait.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.ring.as_fd()
    }

    /// The next queued REJECT, without blocking.
    pub fn next_reject(&mut self) -> Option<NfReject> {
        let item = self.ring.next()?;
        if item.len() < std::mem::size_of::<RawNfReject>() {
            return None; // cannot happen with a matching object
        }
        // SAFETY: the record holds a whole RawNfReject, plain old data;
        // read_unaligned makes no assumption about the ring's alignment.
        let raw: RawNfReject = unsafe { std::ptr::read_unaligned(item.as_ptr().cast()) };
        let len = usize::from(raw.len).min(raw.pkt.len());
        Some(NfReject {
            rtype: raw.rtype as u8,
            hook: raw.hook,
            ipv6: raw.family == FAMILY_IPV6,
            ifindex: raw.ifindex,
            oifindex: raw.oifindex,
            ts_ns: raw.ts_ns,
            pkt: raw.pkt[..len].to_vec(),
        })
    }

    /// Answer queued REJECTs until `stop` is set, looking at it every
    /// `tick`.
    pub fn serve(
        &mut self,
        sender: &RejectSender,
        stop: &AtomicBool,
        tick: Duration,
        counts: &RejectCounts,
    ) {
        while !stop.load(Ordering::Relaxed) {
            self.serve_once(sender, tick, counts);
        }
    }

    /// Wait up to `tick` for records, then answer at most 1024 of them.
    /// The kernel side rate-limits, so the ring (256 KiB, ~1,600 records)
    /// bounds what can wait here.
    pub fn serve_once(&mut self, sender: &RejectSender, tick: Duration, counts: &RejectCounts) {
        if !wait_readable(self.fd(), tick) {
            return;
        }
        for _ in 0..1024 {
            let Some(r) = self.next_reject() else { break };
            let c = match sender.answer(&r) {
                Ok(true) => &counts.sent,
                Ok(false) => &counts.no_reply,
                Err(_) => &counts.failed,
            };
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn wait_readable(fd: BorrowedFd<'_>, tick: Duration) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = tick.as_millis().min(60_000) as libc::c_int;
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut p, 1, ms) > 0 }
}

/// Raw sockets that send replies as built (IP header included), in the
/// network namespace they were made in, and UDP sockets that find the
/// source address the kernel would pick toward a destination.
pub struct RejectSender {
    v4: OwnedFd,
    v6: Option<OwnedFd>,
    route4: UdpSocket,
    route6: Option<UdpSocket>,
}

fn raw_socket(family: libc::c_int) -> io::Result<OwnedFd> {
    // IPPROTO_RAW: the header is included (IP_HDRINCL, and for IPv6 the
    // kernel sets the same on such sockets); send only, never receives
    // SAFETY: plain socket(2); the result is checked before use.
    let fd = unsafe {
        libc::socket(
            family,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::IPPROTO_RAW,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl RejectSender {
    /// The sockets, in the calling thread's network namespace. Needs
    /// CAP_NET_RAW. IPv6 is optional (a kernel without it).
    pub fn new() -> io::Result<RejectSender> {
        Ok(RejectSender {
            v4: raw_socket(libc::AF_INET)?,
            v6: raw_socket(libc::AF_INET6).ok(),
            route4: UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?,
            route6: UdpSocket::bind((Ipv6Addr::UNSPECIFIED, 0)).ok(),
        })
    }

    /// The source address the kernel picks toward `dst` (a UDP connect
    /// makes the route lookup; nothing is sent).
    fn source_toward(&self, dst: IpAddr) -> Option<IpAddr> {
        let s = match dst {
            IpAddr::V4(_) => &self.route4,
            IpAddr::V6(_) => self.route6.as_ref()?,
        };
        s.connect(SocketAddr::new(dst, 9)).ok()?;
        Some(s.local_addr().ok()?.ip())
    }

    /// Build and send the answer to `r`: `Ok(false)` when the packet gets
    /// none. Sources as the kernel's REJECT picks them: a reset comes from
    /// the packet's destination (`nf_send_reset`); an ICMP error from the
    /// destination when the packet was for this host (INPUT), else from
    /// this host's address toward the packet's source (`icmp_send`).
    pub fn answer(&self, r: &NfReject) -> io::Result<bool> {
        let src = if r.hook == HOOK_NF_INPUT || r.rtype == TCP_RESET {
            None
        } else {
            let from = packet_source(&r.pkt, r.ipv6);
            match from.and_then(|a| self.source_toward(a)) {
                Some(s) => Some(s),
                None => return Ok(false),
            }
        };
        let Some(reply) = reject_reply(&r.pkt, r.rtype, src) else {
            return Ok(false);
        };
        let (fd, addr) = match reply.dst {
            IpAddr::V4(a) => (self.v4.as_raw_fd(), SocketAddr::new(a.into(), 0)),
            IpAddr::V6(a) => match &self.v6 {
                Some(s) => (s.as_raw_fd(), SocketAddr::new(a.into(), 0)),
                None => return Ok(false),
            },
        };
        send_to(fd, &reply.bytes, addr)?;
        Ok(true)
    }
}

/// The source address of a packet from its network header.
fn packet_source(pkt: &[u8], ipv6: bool) -> Option<IpAddr> {
    if ipv6 {
        Some(IpAddr::from(<[u8; 16]>::try_from(pkt.get(8..24)?).ok()?))
    } else {
        Some(IpAddr::from(<[u8; 4]>::try_from(pkt.get(12..16)?).ok()?))
    }
}

fn send_to(fd: libc::c_int, buf: &[u8], to: SocketAddr) -> io::Result<()> {
    // SAFETY: all-zero sockaddr_storage is valid; the family-specific part
    // is written below within its size.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match to {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: 0,
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: 0,
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in6.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    // SAFETY: buf and ss are valid for the lengths given.
    let n = unsafe {
        libc::sendto(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT,
            (&ss as *const libc::sockaddr_storage).cast(),
            len as libc::socklen_t,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
