//! The host state the address types read (`-m addrtype`, nft `fib …
//! type`; bpf/lib/addr_type.h): the `local` routing table's `local` and
//! `broadcast` routes, IPv4 and IPv6, read with an rtnetlink dump
//! ([`local_table`]) and mirrored into the program's LPM trie
//! `parapet_addr_types` ([`Dataplane::set_addr_types`]). parapetd refreshes
//! the mirror on every address and route event of its namespace
//! (docs/daemon.md, "The address mirror").

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use aya::maps::lpm_trie::Key as LpmKey;

use crate::netlink::{attrs, u16_at, u32_at};
use crate::{Dataplane, Error, Result};

/// The kernel's `RTN_LOCAL`.
pub const RTN_LOCAL: u8 = 2;
/// The kernel's `RTN_BROADCAST`.
pub const RTN_BROADCAST: u8 = 3;
/// Most routes the trie holds (`PARAPET_ADDR_TYPE_ENTRIES`).
pub const MAX_ADDR_ROUTES: usize = 4096;

const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const RT_TABLE_LOCAL: u32 = 255;
const RTA_DST: u16 = 1;
const RTA_TABLE: u16 = 15;

/// One route of the `local` table the dataplane mirrors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LocalRoute {
    /// The route's destination (its prefix's first address).
    pub addr: IpAddr,
    /// The prefix length (32 / 128 for one address).
    pub prefix_len: u8,
    /// [`RTN_LOCAL`] or [`RTN_BROADCAST`].
    pub kind: u8,
}

/// The `local` and `broadcast` routes of the `local` table of the calling
/// thread's network namespace, IPv4 then IPv6 (a family the kernel does
/// not have, IPv6 disabled, gives none).
pub fn local_table() -> io::Result<Vec<LocalRoute>> {
    let mut out = Vec::new();
    for family in [libc::AF_INET, libc::AF_INET6] {
        match dump_routes(family as u8, &mut out) {
            Ok(()) => {}
            Err(e) if family == libc::AF_INET6 && e.raw_os_error() == Some(libc::EAFNOSUPPORT) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Appends the mirrored routes of one family's dump to `out`.
fn dump_routes(family: u8, out: &mut Vec<LocalRoute>) -> io::Result<()> {
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
    // SAFETY: a new descriptor nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // nlmsghdr (16) + rtmsg (12)
    let mut req = [0u8; 28];
    req[0..4].copy_from_slice(&28u32.to_ne_bytes());
    req[4..6].copy_from_slice(&RTM_GETROUTE.to_ne_bytes());
    req[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    req[16] = family;
    // SAFETY: sending our buffer on our socket, to the kernel.
    if unsafe { libc::send(sock.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "short rtnetlink route message");
    let mut buf = vec![0u8; 64 * 1024];
    // a dump ends with NLMSG_DONE; the bound only stops a kernel that
    // never says it (64 KiB batches of some 100-byte routes)
    for _ in 0..100_000 {
        // SAFETY: receiving into our buffer, at most its length.
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut msg = &buf[..n as usize];
        while msg.len() >= 16 {
            let len = u32_at(msg, 0).ok_or_else(bad)? as usize;
            let ty = u16_at(msg, 4).ok_or_else(bad)?;
            if len < 16 || len > msg.len() {
                return Err(bad());
            }
            match ty {
                NLMSG_DONE => return Ok(()),
                NLMSG_ERROR => {
                    let errno = u32_at(msg, 16).ok_or_else(bad)? as i32;
                    return Err(io::Error::from_raw_os_error(-errno));
                }
                RTM_NEWROUTE => {
                    if let Some(r) = route(&msg[16..len]) {
                        out.push(r);
                    }
                }
                _ => {}
            }
            msg = &msg[((len + 3) & !3).min(msg.len())..];
        }
    }
    Err(io::Error::other("rtnetlink route dump did not end"))
}

/// The mirrored route an `RTM_NEWROUTE` body (rtmsg + attributes)
/// describes, if it is one.
fn route(body: &[u8]) -> Option<LocalRoute> {
    let (family, dst_len, table, kind) =
        (*body.first()?, *body.get(1)?, *body.get(4)?, *body.get(7)?);
    if kind != RTN_LOCAL && kind != RTN_BROADCAST {
        return None;
    }
    let mut table = u32::from(table);
    let mut dst: Option<&[u8]> = None;
    for (t, v) in attrs(body.get(12..)?) {
        match t {
            RTA_TABLE => table = u32_at(v, 0)?,
            RTA_DST => dst = Some(v),
            _ => {}
        }
    }
    if table != RT_TABLE_LOCAL {
        return None;
    }
    let addr = match (i32::from(family), dst) {
        (libc::AF_INET, Some(d)) => IpAddr::from(<[u8; 4]>::try_from(d).ok()?),
        (libc::AF_INET6, Some(d)) => IpAddr::from(<[u8; 16]>::try_from(d).ok()?),
        _ => return None,
    };
    Some(LocalRoute {
        addr,
        prefix_len: dst_len,
        kind,
    })
}

/// The trie key's data (`struct parapet_addr_type_key` after prefixlen):
/// the family byte, 3 zero bytes, the address (IPv4 in the first 4).
fn key_of(r: &LocalRoute) -> LpmKey<[u8; 20]> {
    let mut d = [0u8; 20];
    let (family, bits) = match r.addr {
        IpAddr::V4(a) => {
            d[4..8].copy_from_slice(&a.octets());
            (4u8, 32)
        }
        IpAddr::V6(a) => {
            d[4..20].copy_from_slice(&a.octets());
            (6u8, 128)
        }
    };
    d[0] = family;
    LpmKey::new(32 + u32::from(r.prefix_len.min(bits)), d)
}

impl Dataplane {
    /// Makes the address-type mirror hold exactly `routes` (a
    /// [`local_table`] dump): the packets that start after this call type
    /// their addresses by them. A route for the same prefix as a LOCAL
    /// one stays LOCAL. More than [`MAX_ADDR_ROUTES`] is an error and
    /// leaves the mirror as it was.
    pub fn set_addr_types(&mut self, routes: &[LocalRoute]) -> Result<()> {
        let mut want: HashMap<(u32, [u8; 20]), u32> = HashMap::new();
        for r in routes {
            let k = key_of(r);
            let e = want
                .entry((k.prefix_len(), k.data()))
                .or_insert(r.kind.into());
            if r.kind == RTN_LOCAL {
                *e = RTN_LOCAL.into();
            }
        }
        if want.len() > MAX_ADDR_ROUTES {
            return Err(Error::Object(format!(
                "{} local and broadcast routes exceed the address-type mirror's {MAX_ADDR_ROUTES}",
                want.len()
            )));
        }
        let stale: Vec<LpmKey<[u8; 20]>> = self
            .addr_types
            .keys()
            .filter_map(|k| k.ok())
            .filter(|k| !want.contains_key(&(k.prefix_len(), k.data())))
            .collect();
        // new and changed routes first, so an address that stays never
        // reads as unicast in between
        for (&(plen, data), &v) in &want {
            self.addr_types.insert(&LpmKey::new(plen, data), v, 0)?;
        }
        for k in &stale {
            let _ = self.addr_types.remove(k);
        }
        Ok(())
    }

    /// Reads the calling thread's namespace's `local` table and mirrors it
    /// ([`local_table`], [`Dataplane::set_addr_types`]); returns the
    /// number of routes mirrored.
    pub fn mirror_local_table(&mut self) -> Result<usize> {
        let routes = local_table()
            .map_err(|e| Error::Object(format!("reading the local routing table: {e}")))?;
        self.set_addr_types(&routes)?;
        Ok(routes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_put_the_family_before_the_prefix() {
        let r = LocalRoute {
            addr: "127.0.0.0".parse().unwrap(),
            prefix_len: 8,
            kind: RTN_LOCAL,
        };
        let k = key_of(&r);
        assert_eq!(k.prefix_len(), 40);
        assert_eq!(&k.data()[..8], &[4, 0, 0, 0, 127, 0, 0, 0]);
        let r6 = LocalRoute {
            addr: "::1".parse().unwrap(),
            prefix_len: 128,
            kind: RTN_LOCAL,
        };
        assert_eq!(key_of(&r6).prefix_len(), 160);
        assert_eq!(key_of(&r6).data()[19], 1);
        assert_eq!(key_of(&r6).data()[0], 6);
    }

    /// The namespace the tests run in has lo: its 127.0.0.1 is a local
    /// route of the local table (when lo is up, as on every test host).
    #[test]
    fn the_dump_finds_the_loopback_address() {
        let routes = local_table().unwrap();
        let lo = IpAddr::from([127, 0, 0, 1]);
        assert!(
            routes
                .iter()
                .any(|r| r.addr == lo && r.kind == RTN_LOCAL && r.prefix_len == 32),
            "{routes:?}"
        );
    }
}
