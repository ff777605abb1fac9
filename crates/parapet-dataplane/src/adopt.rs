//! Adopting pinned state: a load with a pin directory takes the pinned
//! maps and links ([`crate::pin`] is the store on bpffs), swaps each link to
//! a new build of its program, and pins new links of any kind.

use std::collections::BTreeSet;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;

use aya::maps::lpm_trie::Key as LpmKey;
use aya::programs::links::FdLink;

use crate::abi::{RawSetDesc, MAX_SETS, MAX_SET_REFS};
use crate::bpf_sys::{self, LinkIds};
use crate::error::{Error, Result};
use crate::load::{Dataplane, PROG_TC, PROG_XDP};
use crate::pin::{
    maps_dir, pin_err, read_dir_names, staged_final_name, LinkPin, PinnedAttachment,
    NETFILTER_HOOK, REPLACING,
};

/// Gives each link pin staged ahead of a killed process's takeover
/// ([`crate::pin::STAGED`]) its own name, as the takeover would have: the
/// link keeps enforcing through the rename (bpffs renames atomically). A
/// pin of that name whose link still runs on an interface is kept and the
/// staged link removed (the interface's name went to another device
/// meanwhile: the caller links it anew).
fn adopt_staged_pins(links: &Path) {
    for name in read_dir_names(links) {
        let Some(fin) = staged_final_name(&name) else {
            continue;
        };
        let (from, to) = (links.join(&name), links.join(fin));
        let live = bpf_sys::obj_get(&to)
            .ok()
            .and_then(|fd| bpf_sys::link_ids(fd.as_fd()).ok())
            .is_some_and(|ids| ids.ifindex != 0);
        // on failure the staged pin stays: it is then taken as a link of
        // an interface named `staged:…`, which none is, so the caller
        // drops it after linking the interface anew
        let _ = if live {
            std::fs::remove_file(&from)
        } else {
            std::fs::rename(&from, &to)
        };
    }
}

/// The program that runs at a hook, by the hook's pin name (`xdp`, `tc`).
/// Netfilter links are not here: their program cannot be swapped in place
/// ([`Dataplane::renew_netfilter_link`]).
pub fn program_for_hook(hook: &str) -> Option<&'static str> {
    match hook {
        "xdp" => Some(PROG_XDP),
        "tc" => Some(PROG_TC),
        crate::tc_hooks::TC_HOOKS_IN => Some(crate::tc_hooks::PROG_TC_PRE_IN),
        crate::tc_hooks::TC_HOOKS_OUT => Some(crate::tc_hooks::PROG_TC_HOOKS_OUT),
        _ => None,
    }
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
        let mut netfilter = false;
        let mut tc_hooks = false;
        adopt_staged_pins(&root.join("links"));
        for name in read_dir_names(&root.join("links")) {
            let path = root.join("links").join(&name);
            if name.starts_with(REPLACING) {
                // a renewal that died before its rename: the link it pins
                // is a second one beside the link it was to replace
                let _ = std::fs::remove_file(&path);
                continue;
            }
            let Some((target, hook)) = name.rsplit_once('@') else {
                continue;
            };
            netfilter |= hook == NETFILTER_HOOK;
            tc_hooks |= crate::tc_hooks::is_tc_hooks_pin(hook);
            let Ok(fd) = bpf_sys::obj_get(&path) else {
                continue;
            };
            let target = crate::pin::unescape_target(target);
            let pin = LinkPin {
                fd,
                path,
                target,
                hook: hook.to_string(),
            };
            // fresh maps know no interface names yet: the image matches
            // `-i` by name
            if let Some(ids) = pin.ids().filter(|i| i.ifindex != 0) {
                self.set_ifname(ids.ifindex, &pin.target)?;
            }
            let id = self.next_id;
            self.next_id += 1;
            self.links.insert(id, crate::load::LinkId::Pinned(pin));
        }
        if netfilter || tc_hooks {
            // the netfilter hooks see every interface: `-i`/`-o` by name
            self.refresh_ifnames()?;
        }
        if tc_hooks {
            // their links are swapped to this load's programs, if another
            self.load_tc_hook_programs()?;
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
        // every entry of the exact hashes is the adopted program's: it
        // takes room the new sets' single addresses cannot have until
        // the purge
        self.exact_adopted = [
            self.set_exact4.keys().count(),
            self.set_exact6.keys().count(),
        ];
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
        let exact4: Vec<_> = self
            .set_exact4
            .keys()
            .filter_map(|k| k.ok())
            .filter(|k| purge.contains(&u32::from(k.set_id)))
            .collect();
        for k in &exact4 {
            let _ = self.set_exact4.remove(k);
        }
        let exact6: Vec<_> = self
            .set_exact6
            .keys()
            .filter_map(|k| k.ok())
            .filter(|k| purge.contains(&u32::from(k.set_id)))
            .collect();
        for k in &exact6 {
            let _ = self.set_exact6.remove(k);
        }
        self.exact_adopted[0] = self.exact_adopted[0].saturating_sub(exact4.len());
        self.exact_adopted[1] = self.exact_adopted[1].saturating_sub(exact6.len());
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
    /// maps are fresh, every pinned XDP and tc link is swapped to this
    /// load's program with `BPF_LINK_UPDATE` (never detached), and the
    /// netfilter links are marked for [`Dataplane::renew_netfilter_link`]
    /// (the kernel has no update for them); then the program pins, and
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
        let mut stale_nf = BTreeSet::new();
        if swap {
            for (&id, l) in self.links.iter() {
                let crate::load::LinkId::Pinned(pin) = l else {
                    continue;
                };
                if pin.hook == NETFILTER_HOOK {
                    // no BPF_LINK_UPDATE for netfilter links (EOPNOTSUPP):
                    // the caller renews the ones it keeps, make-before-break
                    stale_nf.insert(id);
                    continue;
                }
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
        if let Some(p) = &mut self.pins {
            p.stale_nf = stale_nf;
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
