//! One rtnetlink question aya 0.14 cannot ask: which XDP programs are on
//! an interface (`RTM_GETLINK`, the `IFLA_XDP` attributes), so an attach
//! never replaces another program silently (`attach.rs`). Its message
//! and attribute readers serve the route dump of `addr_types.rs` too.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const RTM_GETLINK: u16 = 18;
const NLM_F_REQUEST: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const IFLA_XDP: u16 = 43;
/// `IFLA_XDP_PROG_ID`, `_DRV_PROG_ID`, `_SKB_PROG_ID`, `_HW_PROG_ID`.
const IFLA_XDP_IDS: [u16; 4] = [4, 5, 6, 7];
const NLA_TYPE_MASK: u16 = 0x3fff;

pub(crate) fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The `(type, payload)` of each attribute in `b`.
pub(crate) fn attrs(b: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    let mut off = 0;
    while let (Some(len), Some(ty)) = (u16_at(b, off), u16_at(b, off + 2)) {
        let len = usize::from(len);
        if len < 4 || off + len > b.len() {
            break;
        }
        out.push((ty & NLA_TYPE_MASK, &b[off + 4..off + len]));
        // attributes are 4-byte aligned
        off += (len + 3) & !3;
    }
    out
}

/// The ids of the XDP programs attached to interface `ifindex` (in the
/// calling thread's network namespace), any mode; empty when none.
pub(crate) fn xdp_prog_ids(ifindex: u32) -> io::Result<Vec<u32>> {
    // SAFETY: plain socket(2); the descriptor is owned below.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // nlmsghdr (16) + ifinfomsg (16)
    let mut req = [0u8; 32];
    req[0..4].copy_from_slice(&32u32.to_ne_bytes());
    req[4..6].copy_from_slice(&RTM_GETLINK.to_ne_bytes());
    req[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    req[16] = libc::AF_UNSPEC as u8;
    req[20..24].copy_from_slice(&(ifindex as i32).to_ne_bytes());
    // SAFETY: sending our buffer on our socket (to the kernel: a zeroed
    // sockaddr_nl is the default destination).
    let n = unsafe { libc::send(sock.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: receiving into our buffer, at most its length.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let msg = &buf[..n as usize];
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "short rtnetlink reply");
    let len = u32_at(msg, 0).ok_or_else(bad)? as usize;
    let ty = u16_at(msg, 4).ok_or_else(bad)?;
    if ty == NLMSG_ERROR {
        let errno = u32_at(msg, 16).ok_or_else(bad)? as i32;
        return Err(io::Error::from_raw_os_error(-errno));
    }
    let body = msg.get(32..len.min(msg.len())).ok_or_else(bad)?;
    let mut ids = Vec::new();
    for (t, payload) in attrs(body) {
        if t != IFLA_XDP {
            continue;
        }
        for (t, v) in attrs(payload) {
            if IFLA_XDP_IDS.contains(&t) {
                if let Some(id) = u32_at(v, 0).filter(|&id| id != 0) {
                    if !ids.contains(&id) {
                        ids.push(id);
                    }
                }
            }
        }
    }
    Ok(ids)
}

/// The name of the loaded program with id `id`, when it can be read.
pub(crate) fn prog_name(id: u32) -> Option<String> {
    aya::programs::loaded_programs()
        .filter_map(|p| p.ok())
        .find(|p| p.id() == id)
        .and_then(|p| p.name_as_str().map(str::to_string))
}
