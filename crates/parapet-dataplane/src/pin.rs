//! Pinning under bpffs, so the kernel keeps enforcing when the process
//! that loaded the program dies, and a later process adopts what is there.
//!
//! One directory per instance ([`default_pin_dir`]) holds
//!
//! ```text
//! maps-v<PIN_ABI>/<map name>       every map of the object (image slots,
//!                                  generation, counters, sets, config, …)
//! progs/<build>-<program name>     the programs the links run, as each
//!                                  was loaded (at the first attach that
//!                                  runs it: `src/late_load.rs`); <build>
//!                                  is the hash of the loaded object and
//!                                  its load-time constants
//! links/<target>@<hook>            one bpf_link per attachment, e.g.
//!                                  `eth0@xdp`, `eth0@tc`, and one per
//!                                  netfilter hook and family, e.g.
//!                                  `input-ipv4@netfilter`
//! xdp-tree/progs-<prog id>         the prog array of the split tree form
//!                                  the XDP links run (its first program's
//!                                  id; `src/xdp_engine.rs`)
//! handover-<pid>-<n>/{maps,progs}/  what a loader process loaded for
//!                                  daemon <pid> (`src/handover.rs`), for
//!                                  the moment of the hand-over only
//! ```
//!
//! A load with a pin directory ([`Dataplane::load_pinned`]) reuses
//! the pinned maps when every one has the layout the new object asks for
//! (the programs then read the live image, sets and counters in place) and
//! finds the pinned links. [`Dataplane::finish_adoption`] then swaps a link
//! to the new program with `BPF_LINK_UPDATE` when the build differs, or
//! when the maps could not be reused — never detaching first. Links of any
//! kind are pinned the same way: [`Dataplane::keep_link`] takes an aya
//! `FdLink` (a netfilter link, say), and a hook's name picks the program
//! an upgrade swaps in ([`crate::adopt::program_for_hook`]). The kernel cannot update a
//! netfilter link's program (`EOPNOTSUPP`): an upgrade attaches a second
//! link with the new program beside it (the nearest free priority), pins
//! it and renames that pin over the old one, then closes the old link
//! ([`LinkPin::replace_with`]): make-before-break, never a moment without
//! a link.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use aya::programs::links::FdLink;
use aya::Ebpf;

use crate::bpf_sys::{self, LinkIds};
use crate::error::{Error, Result};

/// Bump when a map's layout or meaning changes in a way its key size,
/// value size, type and size do not show: pins of another version are not
/// reused (the new program then gets fresh maps, filled from the journal,
/// and the links are swapped to it). 2: six images (PREROUTING and
/// POSTROUTING), so an image map of the same size can have another slot
/// layout (`--image-mib` 3 with four images is 2 with six). 3: single
/// addresses of address sets in the exact hashes, no longer in the trie
/// (a program of version 2 on these maps would miss them).
pub const PIN_ABI: u32 = 3;

/// Where bpffs is mounted when the system has not done it.
pub const BPFFS: &str = "/sys/fs/bpf";

const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

fn fnv1a(h: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *h ^= u64::from(*b);
        *h = h.wrapping_mul(0x0100_0000_01b3);
    }
}

/// A stable 64-bit hash (FNV-1a) of byte strings, for names on disk.
pub(crate) fn stable_hash<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        fnv1a(&mut h, &(p.len() as u64).to_le_bytes());
        fnv1a(&mut h, p);
    }
    h
}

/// The default pin directory of a daemon with state in `state_dir`:
/// `/sys/fs/bpf/parapet/<netns inode>-<hash of the state directory>`, so
/// daemons in several network namespaces, or with several state
/// directories, keep their pins apart.
pub fn default_pin_dir(state_dir: &Path) -> PathBuf {
    let netns = std::fs::metadata("/proc/self/ns/net")
        .map(|m| m.ino())
        .unwrap_or(0);
    pin_dir_in_netns(netns, state_dir)
}

/// [`default_pin_dir`] of a daemon in the network namespace with inode
/// `netns` (what a test finds from outside, e.g. from `/run/netns/NAME`).
pub fn pin_dir_in_netns(netns: u64, state_dir: &Path) -> PathBuf {
    let abs = std::fs::canonicalize(state_dir).unwrap_or_else(|_| state_dir.to_path_buf());
    let h = stable_hash([abs.as_os_str().as_encoded_bytes()]);
    Path::new(BPFFS)
        .join("parapet")
        .join(format!("{netns}-{h:016x}"))
}

fn is_bpffs(path: &Path) -> io::Result<bool> {
    let c = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a path"))?;
    // SAFETY: statfs fills the struct we pass for a valid C string.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut s) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(s.f_type as i64 == BPF_FS_MAGIC)
}

/// Makes sure `dir` can hold pins: mounts bpffs at [`BPFFS`] when `dir` is
/// below it and nothing is mounted there, then creates the directory. A
/// directory elsewhere must already be on a bpffs.
pub fn ensure_bpffs(dir: &Path) -> io::Result<()> {
    let bpffs = Path::new(BPFFS);
    if dir.starts_with(bpffs) && !is_bpffs(bpffs)? {
        std::fs::create_dir_all(bpffs)?;
        let src = CString::new("bpf").expect("no NUL");
        let target = CString::new(BPFFS).expect("no NUL");
        let mode = CString::new("mode=0700").expect("no NUL");
        // SAFETY: valid C strings; mounting a bpffs changes nothing else.
        let rc = unsafe {
            libc::mount(
                src.as_ptr(),
                target.as_ptr(),
                src.as_ptr(),
                0,
                mode.as_ptr().cast(),
            )
        };
        if rc != 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("mounting bpffs at {BPFFS}: {e}"),
            ));
        }
    }
    std::fs::create_dir_all(dir)?;
    if !is_bpffs(dir)? {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not on a BPF file system (bpffs)", dir.display()),
        ));
    }
    Ok(())
}

/// The directory of the split tree form's prog arrays under a pin
/// directory.
pub(crate) const XDP_TREE_DIR: &str = "xdp-tree";

pub(crate) fn maps_dir(root: &Path) -> PathBuf {
    root.join(format!("maps-v{PIN_ABI}"))
}

/// A pinned link this dataplane holds: closing the descriptor leaves the
/// link to the pin; removing the pin too detaches it.
#[derive(Debug)]
pub(crate) struct LinkPin {
    pub(crate) fd: OwnedFd,
    pub(crate) path: PathBuf,
    pub(crate) target: String,
    pub(crate) hook: String,
}

impl LinkPin {
    /// Pins `link` as `links/<target>@<hook>` under `root` and holds it by
    /// a descriptor of our own. A pin left by a link the kernel already
    /// released (its device went away) is replaced.
    pub(crate) fn pin(root: &Path, link: FdLink, target: &str, hook: &str) -> Result<Self> {
        let path = link_path(root, target, hook);
        if path.exists() {
            std::fs::remove_file(&path).map_err(|e| pin_err(&path, e))?;
        }
        let pinned = link
            .pin(&path)
            .map_err(|e| Error::Pin(format!("{}: {e}", path.display())))?;
        let pin = LinkPin::open(path, target, hook);
        drop(pinned);
        pin
    }

    /// Pins the link behind `fd` (one made with `BPF_LINK_CREATE`, e.g. a
    /// netfilter link) as `links/<target>@<hook>` under `root`, replacing
    /// a pin of that name, and keeps `fd`.
    pub(crate) fn pin_fd(root: &Path, fd: OwnedFd, target: &str, hook: &str) -> Result<Self> {
        let path = link_path(root, target, hook);
        if path.exists() {
            std::fs::remove_file(&path).map_err(|e| pin_err(&path, e))?;
        }
        bpf_sys::obj_pin(fd.as_fd(), &path).map_err(|e| pin_err(&path, e))?;
        Ok(LinkPin {
            fd,
            path,
            target: target.to_string(),
            hook: hook.to_string(),
        })
    }

    /// Make-before-break: pins `new` (a second link at the same place,
    /// already enforcing) under a temporary name, then renames it over
    /// this pin (bpffs renames atomically: the name always pins a live
    /// link), and closes this link's descriptor, which detaches it.
    pub(crate) fn replace_with(&mut self, new: OwnedFd) -> Result<()> {
        let dir = self
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = dir.join(format!("{REPLACING}{name}"));
        let _ = std::fs::remove_file(&tmp);
        bpf_sys::obj_pin(new.as_fd(), &tmp).map_err(|e| pin_err(&tmp, e))?;
        if let Err(e) = std::fs::rename(&tmp, &self.path) {
            // the old link stays; the new one goes with its temporary pin
            let _ = std::fs::remove_file(&tmp);
            return Err(pin_err(&self.path, e));
        }
        // the old link's pin is gone with the rename: closing our
        // descriptor releases it
        self.fd = new;
        Ok(())
    }

    /// Holds the link pinned at `path` by a descriptor of our own.
    pub(crate) fn open(path: PathBuf, target: &str, hook: &str) -> Result<Self> {
        let fd = bpf_sys::obj_get(&path).map_err(|e| pin_err(&path, e))?;
        Ok(LinkPin {
            fd,
            path,
            target: target.to_string(),
            hook: hook.to_string(),
        })
    }

    /// The link's kernel ids.
    pub(crate) fn ids(&self) -> Option<LinkIds> {
        bpf_sys::link_ids(self.fd.as_fd()).ok()
    }
}

/// `links/<target>@<hook>` under `root`, the target escaped
/// ([`escape_target`]).
pub(crate) fn link_path(root: &Path, target: &str, hook: &str) -> PathBuf {
    root.join("links")
        .join(format!("{}@{hook}", escape_target(target)))
}

/// bpffs refuses a `.` anywhere in a pin name (EPERM), and VLAN interfaces
/// are called `eth0.100`: `%` and `.` are written `%25` and `%2E`.
pub(crate) fn escape_target(target: &str) -> String {
    target.replace('%', "%25").replace('.', "%2E")
}

/// The interface name an escaped pin name stands for ([`escape_target`]).
pub(crate) fn unescape_target(name: &str) -> String {
    name.replace("%2E", ".").replace("%25", "%")
}

/// The hook name of netfilter link pins (`links/input-ipv4@netfilter`).
pub(crate) const NETFILTER_HOOK: &str = "netfilter";

/// Prefix of a link pin being made by [`LinkPin::replace_with`]: one left
/// behind (the process died between the pin and the rename) pins a second
/// link beside the one it was to replace, and is removed at the next load.
/// No interface name has a `:`; bpffs refuses a `.` in names (EPERM).
pub(crate) const REPLACING: &str = "replacing:";

/// Prefix of a link pin made ahead of the owner's state lock (the tc
/// placement's links of a new interface, [`crate::TcHooksKit`]): the link
/// is pinned the moment it exists, so a process killed before it takes
/// the link over leaves it enforcing; the takeover renames the pin to its
/// own name, and a starting process adopts a staged pin as if it had
/// ([`staged_final_name`]).
pub(crate) const STAGED: &str = "staged:";

/// `links/staged:<target>@<hook>` under `root` (see [`STAGED`]).
pub(crate) fn staged_link_path(root: &Path, target: &str, hook: &str) -> PathBuf {
    root.join("links")
        .join(format!("{STAGED}{}@{hook}", escape_target(target)))
}

/// The pin name a staged pin takes when adopted (its name without
/// [`STAGED`]), or None for other names.
pub(crate) fn staged_final_name(name: &str) -> Option<&str> {
    name.strip_prefix(STAGED)
}

pub(crate) fn pin_err(path: &Path, e: io::Error) -> Error {
    Error::Pin(format!("{}: {e}", path.display()))
}

/// A pinned attachment found at load time, for the caller to match with
/// what it remembers (see [`Dataplane::pinned_attachments`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinnedAttachment {
    /// The attachment id ([`Dataplane::detach`]).
    pub id: u64,
    /// The interface (or other target) name.
    pub target: String,
    /// The hook's pin name (`xdp`, `tc`).
    pub hook: String,
    /// The kernel's ids of the link (and of the program it runs).
    pub ids: Option<LinkIds>,
}

/// The pinning state of a loaded dataplane.
#[derive(Debug)]
pub(crate) struct Pins {
    pub(crate) root: PathBuf,
    /// Every map of the object (reused or fresh), by name.
    pub(crate) maps: Vec<(String, OwnedFd)>,
    /// The programs of this load, by name.
    pub(crate) progs: Vec<(&'static str, OwnedFd)>,
    /// Hash of the object and its load-time constants.
    pub(crate) build: String,
    /// The pinned maps were reused (the live state is in them).
    pub(crate) maps_reused: bool,
    /// Set ids the pinned maps held when adopted: allocated to no new set
    /// until [`Dataplane::purge_adopted_sets`].
    pub(crate) adopted_sets: BTreeSet<u32>,
    /// Attachment ids of pinned netfilter links that run another program
    /// than this load's ([`Dataplane::renew_netfilter_link`]).
    pub(crate) stale_nf: BTreeSet<u64>,
}

/// Map fds of `ebpf`'s maps named `parapet_*` (the object's own maps,
/// not the per-load `.rodata`), duplicated.
pub(crate) fn object_map_fds(ebpf: &Ebpf) -> Result<Vec<(String, OwnedFd)>> {
    let mut out = Vec::new();
    for (name, map) in ebpf.maps() {
        if !name.starts_with("parapet_") {
            continue;
        }
        let fd = map_fd(map).ok_or(Error::Missing("map descriptor"))?;
        let owned = fd
            .try_clone_to_owned()
            .map_err(|e| Error::Pin(format!("dup of map {name}: {e}")))?;
        out.push((name.to_string(), owned));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

fn map_fd(m: &aya::maps::Map) -> Option<BorrowedFd<'_>> {
    use aya::maps::Map;
    let data = match m {
        Map::Array(d)
        | Map::ArrayOfMaps(d)
        | Map::HashMap(d)
        | Map::LruHashMap(d)
        | Map::LpmTrie(d)
        | Map::PerCpuArray(d)
        | Map::ProgramArray(d)
        | Map::RingBuf(d)
        | Map::Unsupported(d) => d,
        _ => return None,
    };
    Some(data.fd().as_fd())
}

fn shape(fd: BorrowedFd<'_>) -> Option<(u32, u32, u32, u32, u32)> {
    let dup = fd.try_clone_to_owned().ok()?;
    let m = aya::maps::MapData::from_fd(dup).ok()?;
    let i = m.info().ok()?;
    let t = i.map_type().ok()? as u32;
    Some((
        t,
        i.key_size(),
        i.value_size(),
        i.max_entries(),
        i.map_flags(),
    ))
}

/// Points the object's maps at the pinned ones of `root` before any
/// program is loaded (`dup2` over the descriptors aya's relocations
/// wrote into the programs), when every map is pinned with the same type,
/// key and value size, size and flags. Returns whether they were reused;
/// `false` leaves the fresh maps.
pub(crate) fn reuse_pinned_maps(root: &Path, ebpf: &Ebpf) -> Result<bool> {
    let dir = maps_dir(root);
    let mut pinned = Vec::new();
    for (name, map) in ebpf.maps() {
        if !name.starts_with("parapet_") {
            continue;
        }
        let fresh = map_fd(map).ok_or(Error::Missing("map descriptor"))?;
        let Ok(old) = bpf_sys::obj_get(&dir.join(name)) else {
            return Ok(false);
        };
        if shape(old.as_fd()).is_none() || shape(old.as_fd()) != shape(fresh) {
            return Ok(false);
        }
        pinned.push((old, fresh.as_raw_fd()));
    }
    if pinned.is_empty() {
        return Ok(false);
    }
    for (old, fresh) in &pinned {
        // SAFETY: both descriptors are open; dup2 atomically makes aya's
        // descriptor `fresh` refer to the pinned map (aya still owns it).
        if unsafe { libc::dup2(old.as_raw_fd(), *fresh) } < 0 {
            return Err(Error::Pin(format!(
                "reusing pinned maps: {}",
                io::Error::last_os_error()
            )));
        }
    }
    Ok(true)
}

pub(crate) fn read_dir_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Removes every pin of the instance at `root` (links first: that
/// detaches them) and the directory. Returns how many pins went.
pub fn remove_pins(root: &Path) -> io::Result<usize> {
    let mut n = 0;
    remove_stale_handovers(root, None)?;
    for sub in ["links", "progs", XDP_TREE_DIR]
        .into_iter()
        .map(String::from)
        .chain(
            read_dir_names(root)
                .into_iter()
                .filter(|d| d.starts_with("maps-v")),
        )
    {
        let dir = root.join(&sub);
        for name in read_dir_names(&dir) {
            std::fs::remove_file(dir.join(&name))?;
            n += 1;
        }
        if dir.exists() {
            std::fs::remove_dir(&dir)?;
        }
    }
    if root.exists() {
        std::fs::remove_dir(root)?;
    }
    Ok(n)
}

/// Prefix of the staging directories of hand-overs from a loader process
/// (`src/handover.rs`) under a pin directory.
const HANDOVER_PREFIX: &str = "handover-";

/// The staging directory of hand-over `n` to the process `pid` under the
/// pin directory `root` (several loads may run at once: two first
/// attaches, say).
pub fn handover_dir(root: &Path, pid: u32, n: u32) -> PathBuf {
    root.join(format!("{HANDOVER_PREFIX}{pid}-{n}"))
}

/// Removes a staging directory and its pins (the objects live on while a
/// process holds them).
pub fn remove_handover(dir: &Path) -> std::io::Result<()> {
    for sub in ["maps", "progs"] {
        let d = dir.join(sub);
        for name in read_dir_names(&d) {
            std::fs::remove_file(d.join(name))?;
        }
        if d.exists() {
            std::fs::remove_dir(&d)?;
        }
    }
    if dir.exists() {
        std::fs::remove_dir(dir)?;
    }
    Ok(())
}

/// Removes the staging directories under `root` of processes other than
/// `keep_pid` (left by a process that died during a hand-over; a pin
/// directory has one daemon, under its state directory's lock).
pub fn remove_stale_handovers(root: &Path, keep_pid: Option<u32>) -> std::io::Result<()> {
    let ours = keep_pid.map(|p| format!("{HANDOVER_PREFIX}{p}-"));
    for name in read_dir_names(root) {
        if name.starts_with(HANDOVER_PREFIX) && !ours.as_ref().is_some_and(|o| name.starts_with(o))
        {
            remove_handover(&root.join(name))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_names_of_vlan_interfaces_have_no_dot_and_come_back() {
        for name in ["eth0", "eth0.100", "br-lan.5.7", "odd%2Ename", "a%b.c"] {
            let path = link_path(Path::new("/r"), name, "xdp");
            let file = path.file_name().unwrap().to_str().unwrap();
            assert!(!file.contains('.'), "{file}");
            let (target, hook) = file.rsplit_once('@').unwrap();
            assert_eq!((unescape_target(target).as_str(), hook), (name, "xdp"));
        }
    }

    #[test]
    fn a_staged_pin_names_its_final_pin() {
        let staged = staged_link_path(Path::new("/r"), "eth0.7", "hooks-tc-in");
        let file = staged.file_name().unwrap().to_str().unwrap();
        assert_eq!(file, "staged:eth0%2E7@hooks-tc-in");
        let fin = staged_final_name(file).unwrap();
        assert_eq!(
            Path::new("/r/links").join(fin),
            link_path(Path::new("/r"), "eth0.7", "hooks-tc-in")
        );
        assert_eq!(staged_final_name("eth0@xdp"), None);
    }
}
