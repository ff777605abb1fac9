//! Pinning under bpffs, so the kernel keeps enforcing when the process
//! that loaded the program dies, and a later process adopts what is there.
//!
//! One directory per instance ([`default_pin_dir`]) holds
//!
//! ```text
//! maps-v<PIN_ABI>/<map name>       every map of the object (image slots,
//!                                  generation, counters, sets, config, …)
//! progs/<build>-<program name>     the programs the links run; <build> is
//!                                  the hash of the loaded object and its
//!                                  load-time constants
//! links/<target>@<hook>            one bpf_link per attachment, e.g.
//!                                  `eth0@xdp`, `eth0@tc`
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
//! an upgrade swaps in ([`program_for_hook`]). The kernel cannot update a
//! netfilter link's program (`EOPNOTSUPP`): that is logged, and the old
//! program keeps enforcing.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use aya::maps::lpm_trie::Key as LpmKey;
use aya::programs::links::FdLink;
use aya::Ebpf;

use crate::abi::{RawSetDesc, MAX_SETS, MAX_SET_REFS};
use crate::bpf_sys::{self, LinkIds};
use crate::error::{Error, Result};
use crate::load::{Dataplane, PROG_TC, PROG_XDP};

/// Bump when a map's layout or meaning changes in a way its key size,
/// value size, type and size do not show: pins of another version are not
/// reused (the new program then gets fresh maps, filled from the journal,
/// and the links are swapped to it).
pub const PIN_ABI: u32 = 1;

/// Where bpffs is mounted when the system has not done it.
pub const BPFFS: &str = "/sys/fs/bpf";

const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

/// The program that runs at a hook, by the hook's pin name (`xdp`, `tc`).
/// Hooks added later (netfilter) map their names here.
pub fn program_for_hook(hook: &str) -> Option<&'static str> {
    match hook {
        "xdp" => Some(PROG_XDP),
        "tc" => Some(PROG_TC),
        _ => None,
    }
}

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

fn maps_dir(root: &Path) -> PathBuf {
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
        let path = root.join("links").join(format!("{target}@{hook}"));
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

fn pin_err(path: &Path, e: io::Error) -> Error {
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
        | Map::LpmTrie(d)
        | Map::PerCpuArray(d)
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

fn read_dir_names(dir: &Path) -> Vec<String> {
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
    for sub in ["links", "progs"].into_iter().map(String::from).chain(
        read_dir_names(root)
            .into_iter()
            .filter(|d| d.starts_with("maps-v")),
    ) {
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

impl Dataplane {
    /// Pinning, when the load asked for it: creates the directories, reads
    /// the live state of reused maps, and takes the pinned links.
    pub(crate) fn adopt_pins(&mut self) -> Result<()> {
        let Some(p) = &self.pins else {
            return Ok(());
        };
        let root = p.root.clone();
        for d in [maps_dir(&root), root.join("progs"), root.join("links")] {
            std::fs::create_dir_all(&d).map_err(|e| pin_err(&d, e))?;
        }
        if p.maps_reused {
            self.adopt_map_state()?;
        }
        for name in read_dir_names(&root.join("links")) {
            let Some((target, hook)) = name.rsplit_once('@') else {
                continue;
            };
            let path = root.join("links").join(&name);
            let Ok(fd) = bpf_sys::obj_get(&path) else {
                continue;
            };
            let pin = LinkPin {
                fd,
                path,
                target: target.to_string(),
                hook: hook.to_string(),
            };
            // fresh maps know no interface names yet: the image matches
            // `-i` by name
            if let Some(ids) = pin.ids().filter(|i| i.ifindex != 0) {
                self.set_ifname(ids.ifindex, target)?;
            }
            let id = self.next_id;
            self.next_id += 1;
            self.links.insert(id, crate::load::LinkId::Pinned(pin));
        }
        Ok(())
    }

    /// The generation, conntrack switch, set references and set ids of
    /// the live program, from the reused maps.
    fn adopt_map_state(&mut self) -> Result<()> {
        self.generation = self.gen.get(&0, 0)?;
        self.conntrack = self.config.get(&crate::load::CFG_CT, 0)? != 0;
        let half = (self.generation & 1) * MAX_SET_REFS;
        let mut refs = Vec::with_capacity(MAX_SET_REFS as usize);
        for i in 0..MAX_SET_REFS {
            refs.push(self.set_refs.get(&(half + i), 0)?);
        }
        let mut held: BTreeSet<u32> = refs
            .iter()
            .filter(|r| r.kind != 0)
            .map(|r| u32::from(r.set_id))
            .collect();
        for id in 0..MAX_SETS {
            if self.set_descs.get(&id, 0)?.n_shapes != 0 {
                held.insert(id);
            }
        }
        self.live_refs = refs.clone();
        self.staged_refs = refs;
        if let Some(p) = &mut self.pins {
            p.adopted_sets = held;
        }
        Ok(())
    }

    /// Pins a link of any kind made outside [`Dataplane::attach`] (e.g. a
    /// netfilter link) as `links/<target>@<hook>` and keeps it as an
    /// attachment; returns its id for [`Dataplane::detach`]. Without a pin
    /// directory the link is kept unpinned (it ends with the process).
    /// `hook` must be known to [`program_for_hook`] for upgrades to swap it.
    pub fn keep_link(&mut self, link: FdLink, target: &str, hook: &str) -> Result<u64> {
        let kept = match self.pin_dir().map(Path::to_path_buf) {
            Some(root) => crate::load::LinkId::Pinned(LinkPin::pin(&root, link, target, hook)?),
            None => crate::load::LinkId::Fd(link),
        };
        let id = self.next_id;
        self.next_id += 1;
        self.links.insert(id, kept);
        Ok(id)
    }

    /// Whether a set id is held by the adopted program's sets (not free
    /// for a new set until [`Dataplane::purge_adopted_sets`]).
    pub(crate) fn set_id_adopted(&self, id: u32) -> bool {
        self.pins
            .as_ref()
            .is_some_and(|p| p.adopted_sets.contains(&id))
    }

    /// After the first swap of an adopting load: deletes the kernel
    /// entries of the adopted sets the live image no longer references
    /// (their elements were written again under new ids from the caller's
    /// truth). Returns the ids purged.
    pub fn purge_adopted_sets(&mut self) -> Result<Vec<u32>> {
        let Some(p) = &mut self.pins else {
            return Ok(Vec::new());
        };
        let gone: Vec<u32> = std::mem::take(&mut p.adopted_sets).into_iter().collect();
        let purge: BTreeSet<u32> = gone
            .iter()
            .copied()
            .filter(|&id| !self.sets.contains_key(&id) && !self.set_in_use(id))
            .collect();
        if purge.is_empty() {
            return Ok(Vec::new());
        }
        let lpm: Vec<LpmKey<[u8; 20]>> = self
            .set_lpm
            .keys()
            .filter_map(|k| k.ok())
            .filter(|k| purge.contains(&u32::from(u16::from_be_bytes([k.data()[0], k.data()[1]]))))
            .collect();
        for k in &lpm {
            let _ = self.set_lpm.remove(k);
        }
        let tuple: Vec<_> = self
            .set_tuple
            .keys()
            .filter_map(|k| k.ok())
            .filter(|k| purge.contains(&u32::from(k.set_id)))
            .collect();
        for k in &tuple {
            let _ = self.set_tuple.remove(k);
        }
        for &id in &purge {
            self.set_descs.set(id, RawSetDesc::default(), 0)?;
        }
        Ok(purge.into_iter().collect())
    }

    /// The pin directory, when pinning.
    pub fn pin_dir(&self) -> Option<&Path> {
        self.pins.as_ref().map(|p| p.root.as_path())
    }

    /// Whether the maps were adopted from pins (the live image, sets and
    /// counters were already there at load).
    pub fn maps_adopted(&self) -> bool {
        self.pins.as_ref().is_some_and(|p| p.maps_reused)
    }

    /// The hash naming this load's build in the program pins.
    pub fn build_id(&self) -> Option<&str> {
        self.pins.as_ref().map(|p| p.build.as_str())
    }

    /// The pinned attachments this dataplane holds (found at load time or
    /// made since).
    pub fn pinned_attachments(&self) -> Vec<PinnedAttachment> {
        let mut v: Vec<PinnedAttachment> = self
            .links
            .iter()
            .filter_map(|(&id, l)| match l {
                crate::load::LinkId::Pinned(p) => Some(PinnedAttachment {
                    id,
                    target: p.target.clone(),
                    hook: p.hook.clone(),
                    ids: p.ids(),
                }),
                _ => None,
            })
            .collect();
        v.sort_by_key(|a| a.id);
        v
    }

    /// The kernel ids of attachment `id`'s link, when it is pinned.
    pub fn link_ids(&self, id: u64) -> Option<LinkIds> {
        match self.links.get(&id)? {
            crate::load::LinkId::Pinned(p) => p.ids(),
            _ => None,
        }
    }

    fn prog_fd(&self, name: &str) -> Option<BorrowedFd<'_>> {
        let p = self.pins.as_ref()?;
        p.progs
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, fd)| fd.as_fd())
    }

    /// Makes the pins describe this load, after the caller made its state
    /// live in the maps (a fresh map set must hold the ruleset before any
    /// link runs it): when the pinned programs are another build, or the
    /// maps are fresh, every pinned link is swapped to this load's program
    /// with `BPF_LINK_UPDATE` (never detached); then the program pins, and
    /// for fresh maps the map pins, are replaced. Returns what it did, as
    /// log lines.
    pub fn finish_adoption(&mut self) -> Result<Vec<String>> {
        let Some(p) = &self.pins else {
            return Ok(Vec::new());
        };
        let root = p.root.clone();
        let build = p.build.clone();
        let reused = p.maps_reused;
        let progs_dir = root.join("progs");
        let old_progs = read_dir_names(&progs_dir);
        let same_build = !old_progs.is_empty()
            && old_progs
                .iter()
                .all(|n| n.starts_with(&format!("{build}-")));
        let mut log = Vec::new();
        let swap = !(same_build && reused);
        if swap {
            for (_, l) in self.links.iter() {
                let crate::load::LinkId::Pinned(pin) = l else {
                    continue;
                };
                let Some(name) = program_for_hook(&pin.hook) else {
                    log.push(format!(
                        "{}: unknown hook; left as it is",
                        pin.path.display()
                    ));
                    continue;
                };
                let prog = self.prog_fd(name).ok_or(Error::Missing("program"))?;
                let before = pin.ids();
                match bpf_sys::link_update(pin.fd.as_fd(), prog) {
                    Ok(()) => {}
                    // netfilter links: the kernel has no update for them
                    Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                        log.push(format!(
                            "{}@{}: the kernel cannot swap this link's program ({e}); \
                             the previous program keeps running until it is detached and attached again",
                            pin.target, pin.hook
                        ));
                        continue;
                    }
                    Err(e) => {
                        return Err(Error::Pin(format!(
                            "BPF_LINK_UPDATE of {}: {e}",
                            pin.path.display()
                        )))
                    }
                }
                let after = pin.ids();
                log.push(format!(
                    "{}@{}: link {} now runs program {} (was {}), swapped in place",
                    pin.target,
                    pin.hook,
                    after.map_or(0, |i| i.link_id),
                    after.map_or(0, |i| i.prog_id),
                    before.map_or(0, |i| i.prog_id),
                ));
            }
        }
        let p = self.pins.as_ref().expect("checked above");
        if !reused {
            let dir = maps_dir(&root);
            for (name, fd) in &p.maps {
                let path = dir.join(name);
                let _ = std::fs::remove_file(&path);
                bpf_sys::obj_pin(fd.as_fd(), &path).map_err(|e| pin_err(&path, e))?;
            }
            // maps of another pin ABI: no program uses them any more
            for d in read_dir_names(&root) {
                if d.starts_with("maps-v") && root.join(&d) != dir {
                    for n in read_dir_names(&root.join(&d)) {
                        let _ = std::fs::remove_file(root.join(&d).join(n));
                    }
                    let _ = std::fs::remove_dir(root.join(&d));
                }
            }
        }
        if !same_build {
            for n in &old_progs {
                let _ = std::fs::remove_file(progs_dir.join(n));
            }
            for (name, fd) in &p.progs {
                let path = progs_dir.join(format!("{build}-{name}"));
                bpf_sys::obj_pin(fd.as_fd(), &path).map_err(|e| pin_err(&path, e))?;
            }
        }
        Ok(log)
    }
}
