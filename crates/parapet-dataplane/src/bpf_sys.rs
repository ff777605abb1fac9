//! The few `bpf(2)` commands aya 0.14 does not offer on a plain file
//! descriptor: pin an object, open a pinned one, read a link's or a
//! program's ids, swap a link's program (`BPF_LINK_UPDATE`), and write or
//! delete many map entries in one call (`BPF_MAP_UPDATE_BATCH`,
//! `BPF_MAP_DELETE_BATCH`). Every raw
//! syscall of the crate's pinning lives here (`pin.rs` uses them).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

// enum bpf_cmd (include/uapi/linux/bpf.h)
const BPF_OBJ_PIN: libc::c_long = 6;
const BPF_OBJ_GET: libc::c_long = 7;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_LINK_UPDATE: libc::c_long = 29;
const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;
const BPF_MAP_UPDATE_BATCH: libc::c_long = 26;
const BPF_MAP_DELETE_BATCH: libc::c_long = 27;

/// `union bpf_attr` is larger; 128 zeroed bytes cover every command here
/// (the kernel checks that bytes it does not know are zero).
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 128])
    }
    fn put_u32(&mut self, at: usize, v: u32) {
        self.0[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    }
    fn put_u64(&mut self, at: usize, v: u64) {
        self.0[at..at + 8].copy_from_slice(&v.to_ne_bytes());
    }
}

fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<libc::c_long> {
    // SAFETY: attr is a valid, initialised bpf_attr prefix of the size we
    // pass; the kernel reads (and for GET_INFO writes through pointers we
    // set to live buffers) only within it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut Attr,
            std::mem::size_of::<Attr>() as libc::c_uint,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a pin path"))
}

/// `BPF_OBJ_PIN`: pin the program, map or link behind `fd` at `path`.
pub(crate) fn obj_pin(fd: BorrowedFd<'_>, path: &Path) -> io::Result<()> {
    let p = c_path(path)?;
    let mut a = Attr::new();
    a.put_u64(0, p.as_ptr() as u64);
    a.put_u32(8, fd.as_raw_fd() as u32);
    bpf(BPF_OBJ_PIN, &mut a).map(drop)
}

/// `BPF_OBJ_GET`: open the object pinned at `path`.
pub(crate) fn obj_get(path: &Path) -> io::Result<OwnedFd> {
    let p = c_path(path)?;
    let mut a = Attr::new();
    a.put_u64(0, p.as_ptr() as u64);
    let fd = bpf(BPF_OBJ_GET, &mut a)?;
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The first words of `struct bpf_link_info` / `struct bpf_prog_info`.
fn info(fd: BorrowedFd<'_>) -> io::Result<[u8; 256]> {
    let mut buf = [0u8; 256];
    let mut a = Attr::new();
    a.put_u32(0, fd.as_raw_fd() as u32);
    a.put_u32(4, buf.len() as u32);
    a.put_u64(8, buf.as_mut_ptr() as u64);
    bpf(BPF_OBJ_GET_INFO_BY_FD, &mut a)?;
    Ok(buf)
}

fn word(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// `struct bpf_prog_info.verified_insns` (uapi, byte offset 216; Linux
/// 5.16): the instructions the verifier walked to load the program.
pub(crate) fn prog_verified_insns(fd: BorrowedFd<'_>) -> io::Result<u32> {
    Ok(word(&info(fd)?, 216))
}

/// `struct bpf_prog_info.id` (byte offset 4): the program's id.
pub(crate) fn prog_id(fd: BorrowedFd<'_>) -> io::Result<u32> {
    Ok(word(&info(fd)?, 4))
}

/// A link's kernel ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkIds {
    /// `enum bpf_link_type` (uapi: 6 = XDP, 10 = NETFILTER, 11 = TCX).
    pub link_type: u32,
    /// The link's id (`bpftool link show id N`).
    pub link_id: u32,
    /// The id of the program it runs.
    pub prog_id: u32,
    /// The interface index for XDP and TCX links (0 otherwise).
    pub ifindex: u32,
}

/// `enum bpf_link_type` values this crate makes.
pub(crate) const LINK_TYPE_XDP: u32 = 6;
pub(crate) const LINK_TYPE_TCX: u32 = 11;
pub(crate) const LINK_TYPE_NETFILTER: u32 = 10;

/// Where a netfilter link is attached: `(pf, hooknum, priority)` from
/// `struct bpf_link_info`'s netfilter arm, or `None` for another link type.
pub(crate) fn netfilter_link_info(fd: BorrowedFd<'_>) -> io::Result<Option<(u32, u32, i32)>> {
    let b = info(fd)?;
    if word(&b, 0) != LINK_TYPE_NETFILTER {
        return Ok(None);
    }
    // netfilter { __u32 pf; __u32 hooknum; __s32 priority; __u32 flags; }
    Ok(Some((word(&b, 16), word(&b, 20), word(&b, 24) as i32)))
}

/// The ids of the link behind `fd`.
pub(crate) fn link_ids(fd: BorrowedFd<'_>) -> io::Result<LinkIds> {
    let b = info(fd)?;
    let link_type = word(&b, 0);
    // the per-type union starts at offset 16 (it holds 64-bit members);
    // XDP and TCX links both begin it with the ifindex
    let ifindex = match link_type {
        LINK_TYPE_XDP | LINK_TYPE_TCX => word(&b, 16),
        _ => 0,
    };
    Ok(LinkIds {
        link_type,
        link_id: word(&b, 4),
        prog_id: word(&b, 8),
        ifindex,
    })
}

/// `BPF_LINK_UPDATE`: the link runs `new_prog` from the next packet on.
/// One pointer swap in the kernel: no packet passes the hook unfiltered.
pub(crate) fn link_update(link: BorrowedFd<'_>, new_prog: BorrowedFd<'_>) -> io::Result<()> {
    let mut a = Attr::new();
    a.put_u32(0, link.as_raw_fd() as u32);
    a.put_u32(4, new_prog.as_raw_fd() as u32);
    bpf(BPF_LINK_UPDATE, &mut a).map(drop)
}

/// `BPF_MAP_UPDATE_BATCH`: writes `count` entries, keys and values back to
/// back in `keys` and `values` (each exactly `count` times the map's key
/// or value size), in order, as that many updates would. On an error the
/// kernel stops at the entry that failed: the error comes with how many
/// were written before it.
pub(crate) fn map_update_batch(
    fd: BorrowedFd<'_>,
    keys: &[u8],
    values: &[u8],
    count: u32,
) -> Result<(), (io::Error, u32)> {
    let mut a = Attr::new();
    // struct { in_batch, out_batch, keys, values; count, map_fd; elem_flags, flags } batch
    a.put_u64(16, keys.as_ptr() as u64);
    a.put_u64(24, values.as_ptr() as u64);
    a.put_u32(32, count);
    a.put_u32(36, fd.as_raw_fd() as u32);
    batch_call(BPF_MAP_UPDATE_BATCH, &mut a)
}

/// `BPF_MAP_LOOKUP_BATCH` over an array map: up to `count` entries from
/// index `first` on, their keys and values written back to back into
/// `keys` and `values` (room for `count` of each: a per-CPU map's value
/// is its value size rounded up to 8 bytes, once per possible CPU).
/// Returns how many were read: fewer than `count` only at the map's end.
/// The kernel walks the array as that many lookups would, one entry after
/// another, without a lock: each entry is as current as a lookup's.
pub(crate) fn map_lookup_batch(
    fd: BorrowedFd<'_>,
    first: u32,
    keys: &mut [u8],
    values: &mut [u8],
    count: u32,
) -> io::Result<u32> {
    let mut a = Attr::new();
    // in_batch is the key *before* the first one read (an array's next
    // key is the following index); none starts at index 0
    let prev = first.wrapping_sub(1).to_ne_bytes();
    let mut out_batch = [0u8; 4];
    if first > 0 {
        a.put_u64(0, prev.as_ptr() as u64);
    }
    a.put_u64(8, out_batch.as_mut_ptr() as u64);
    a.put_u64(16, keys.as_mut_ptr() as u64);
    a.put_u64(24, values.as_mut_ptr() as u64);
    a.put_u32(32, count);
    a.put_u32(36, fd.as_raw_fd() as u32);
    let read = |a: &Attr| {
        let mut n = [0u8; 4];
        n.copy_from_slice(&a.0[32..36]);
        u32::from_ne_bytes(n)
    };
    match bpf(BPF_MAP_LOOKUP_BATCH, &mut a) {
        Ok(_) => Ok(read(&a)),
        // the end of the map: what was read before it
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(read(&a)),
        Err(e) => Err(e),
    }
}

/// `BPF_MAP_DELETE_BATCH`: deletes `count` entries whose keys are back to
/// back in `keys`, in order, as that many deletes would. The kernel stops
/// at the first key that fails (`ENOENT` for an absent one): the error
/// comes with how many were deleted before it.
pub(crate) fn map_delete_batch(
    fd: BorrowedFd<'_>,
    keys: &[u8],
    count: u32,
) -> Result<(), (io::Error, u32)> {
    let mut a = Attr::new();
    a.put_u64(16, keys.as_ptr() as u64);
    a.put_u32(32, count);
    a.put_u32(36, fd.as_raw_fd() as u32);
    batch_call(BPF_MAP_DELETE_BATCH, &mut a)
}

/// Runs a batch command; on an error, also the count the kernel wrote
/// back (the entries done before the one that failed).
fn batch_call(cmd: libc::c_long, a: &mut Attr) -> Result<(), (io::Error, u32)> {
    match bpf(cmd, a) {
        Ok(_) => Ok(()),
        Err(e) => {
            let mut done = [0u8; 4];
            done.copy_from_slice(&a.0[32..36]);
            Err((e, u32::from_ne_bytes(done)))
        }
    }
}
