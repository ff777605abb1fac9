//! The filter chains at tc instead of the netfilter hooks, for kernels
//! without netfilter BPF links (or forced: parapetd `--hook-placement tc`).
//! `attach` without an interface then links the tc placement's programs
//! at ingress and egress of every interface of the namespace
//! (`parapet_dataplane::tc_hooks`); each apply covers interfaces made
//! since. docs/hooks.md, *Without netfilter BPF links*.

use super::{dp_err, Attachment, Kernel};
use crate::hooks::NfWant;
use crate::proto::{code, ErrorReply};
use parapet_dataplane::{
    tc_hook_bit, AttachPoint, Dataplane, Mode, NfHook, PinnedAttachment, TcHooksAttached,
    TcHooksKit, TcHooksLinks, TC_HOOKS_IN,
};
use serde_json::{json, Value};

/// Where `attach` without an interface puts the filter chains
/// (parapetd `--hook-placement`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HookPlacement {
    /// At the netfilter hooks when the kernel has netfilter BPF links,
    /// else at tc.
    #[default]
    Auto,
    /// At the netfilter hooks only (refused where the kernel lacks them).
    Netfilter,
    /// At tc ingress/egress of every interface, even where the kernel has
    /// netfilter BPF links.
    Tc,
}

impl std::str::FromStr for HookPlacement {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(HookPlacement::Auto),
            "netfilter" => Ok(HookPlacement::Netfilter),
            "tc" => Ok(HookPlacement::Tc),
            _ => Err(format!(
                "unknown hook placement {s:?} (auto, netfilter or tc)"
            )),
        }
    }
}

/// What the tc placement enforces differently, as the note of its
/// attachment (`stats`, `attach`).
pub const TC_PLACEMENT_NOTE: &str = "tc placement (no netfilter BPF links): INPUT and FORWARD \
     judged at tc ingress before DNAT, OUTPUT at tc egress for packets with a socket; \
     see docs/hooks.md";

/// The interfaces of the calling thread's network namespace: (index,
/// name).
pub(crate) fn namespace_ifaces() -> Vec<(u32, String)> {
    // SAFETY: returns a malloc'd array ending with a zero entry, or NULL.
    let list = unsafe { libc::if_nameindex() };
    if list.is_null() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for i in 0.. {
        // SAFETY: within the array up to and including its zero entry.
        let e = unsafe { &*list.add(i) };
        if e.if_index == 0 || e.if_name.is_null() {
            break;
        }
        // SAFETY: if_name is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(e.if_name) };
        out.push((e.if_index, name.to_string_lossy().into_owned()));
    }
    // SAFETY: the list if_nameindex returned, freed once.
    unsafe { libc::if_freenameindex(list) };
    out
}

/// The kernel's conntrack priority at prerouting (`NF_IP_PRI_CONNTRACK`):
/// tc ingress runs before it, so a prerouting chain below it sees there
/// what it sees in the kernel (no conntrack entry, no DNAT yet).
pub(crate) const TC_PREROUTING_BELOW: i32 = -200;
/// The kernel's SNAT priority at postrouting (`NF_IP_PRI_NAT_SRC`): tc
/// egress runs after it, so a postrouting chain above it sees there what
/// it sees in the kernel (the translated source).
pub(crate) const TC_POSTROUTING_ABOVE: i32 = 100;

/// Why a plan cannot run in the tc placement: a chain before routing or
/// after it whose priority sees other addresses than tc does (prerouting
/// at or above conntrack, postrouting at or below SNAT). Those below
/// conntrack and above SNAT run at tc as stages of their own.
pub(crate) fn tc_refusal(plan: &[NfWant]) -> Option<String> {
    let w = plan.iter().find(|w| match w.hook {
        NfHook::Prerouting => w.priority >= TC_PREROUTING_BELOW,
        NfHook::Postrouting => w.priority <= TC_POSTROUTING_ABOVE,
        _ => false,
    })?;
    let (bound, why) = if w.hook == NfHook::Prerouting {
        (
            format!("below {TC_PREROUTING_BELOW} (raw)"),
            "tc ingress runs before the kernel's conntrack and DNAT",
        )
    } else {
        (
            format!("above {TC_POSTROUTING_ABOVE}"),
            "tc egress runs after the kernel's SNAT",
        )
    };
    Some(format!(
        "the tc placement (parapetd --hook-placement, a kernel without netfilter BPF links) \
         enforces a {} chain only at priority {bound}: {why}, so the ruleset's chain at \
         priority {} would see other addresses or conntrack state there than in the kernel; \
         it needs the netfilter hooks (Linux >= 6.4 with CONFIG_NETFILTER_BPF_LINK; \
         docs/hooks.md, *Without netfilter BPF links*)",
        w.hook.chain(),
        w.priority
    ))
}

/// Why the tc placement cannot run rules on the socket owner (`owner`: a
/// [`crate::hooks::HookPlan`]'s `owner`): tc egress sees packets after
/// netfilter, with no socket to read as the netfilter program does.
pub(crate) fn tc_owner_refusal(owner: Option<&String>) -> Option<String> {
    owner.map(|rules| {
        format!(
            "the tc placement (parapetd --hook-placement, a kernel without netfilter BPF links) \
             cannot enforce {rules}: they match the socket owner (-m owner, meta skuid|skgid), \
             which parapet reads only at the netfilter OUTPUT and POSTROUTING hooks (Linux >= \
             6.4 with CONFIG_NETFILTER_BPF_LINK; docs/hooks.md)"
        )
    })
}

/// What the link watcher (src/link_watch.rs) did for the tc placement,
/// as `stats` shows it (`link_watch` of the attachment).
#[derive(Debug, Default)]
pub(crate) struct TcFollow {
    /// Link event batches seen (each one re-syncs).
    events: u64,
    /// Interfaces that got their links from the watcher.
    attached_late: u64,
    /// From reading the last event that added links to the links made
    /// (ahead of the state lock, or by the re-sync under it).
    last_ms: Option<f64>,
    /// From reading that event to holding the state lock (an apply holds
    /// it while it swaps in a ruleset).
    lock_ms: Option<f64>,
    /// The last failure (no netlink socket, an attach refused).
    error: Option<String>,
}

impl TcFollow {
    pub(crate) fn json(&self) -> Value {
        json!({"events": self.events, "attached_late": self.attached_late,
            "last_ms": self.last_ms, "lock_ms": self.lock_ms, "error": self.error})
    }
}

/// What the link watcher may do without the state lock, shared with it
/// (`Kernel::tc_watch`): while the tc placement is attached, the programs
/// to link a new interface with and the interfaces whose links the state
/// holds. Published after every re-sync of the links and every detach, so
/// an apply holding the state lock does not hold a new interface's links
/// back (src/link_watch.rs).
#[derive(Default)]
pub struct TcWatch {
    /// The tc placement's programs (None: not attached in the tc placement).
    pub kit: Option<TcHooksKit>,
    /// Indices of the interfaces that have their links.
    pub covered: Vec<u32>,
    /// Links made with the kit, until a re-sync under the state lock takes
    /// them over (the watcher's or an apply's, whichever comes first).
    made: Vec<TcHooksLinks>,
    /// Tests only (parapetd `--test-abort-between-tc-links`): the process
    /// kills itself (SIGKILL) between a new interface's ingress and
    /// egress links.
    pub(crate) abort_between_links: bool,
}

impl TcWatch {
    /// Links every interface of the namespace that has no links yet with
    /// the kit (none when not attached in the tc placement): the links
    /// judge packets from now on; the next re-sync of the links takes them
    /// over. Returns the interfaces linked (index, name) and what failed
    /// (the re-sync retries those).
    pub fn link_new(&mut self) -> (Vec<(u32, String)>, Vec<String>) {
        let (mut linked, mut failed) = (Vec::new(), Vec::new());
        let Some(kit) = self.kit.as_mut() else {
            return (linked, failed);
        };
        for (index, iface) in namespace_ifaces() {
            if self.covered.contains(&index) || self.made.iter().any(|m| m.ifindex == index) {
                continue;
            }
            let abort = self.abort_between_links;
            let mut between = || {
                if abort {
                    eprintln!("parapetd: --test-abort-between-tc-links: killed on {iface}");
                    // SAFETY: kill(2) of this process; SIGKILL, as `kill -9`
                    // would (no destructor, no core file)
                    unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
                    std::process::abort();
                }
            };
            match kit.link_pausing(&iface, index, &mut between) {
                Ok(l) => {
                    self.made.push(l);
                    linked.push((index, iface));
                }
                Err(e) => failed.push(format!("linking {iface} ahead of the state lock: {e}")),
            }
        }
        (linked, failed)
    }
}

/// The index of the device a pinned link runs on (0: its device is gone,
/// or its ids could not be read).
fn live_ifindex(p: &PinnedAttachment) -> u32 {
    p.ids.map_or(0, |i| i.ifindex)
}

/// Whether two pinned links are on one device (by name when either
/// device is gone).
fn same_device(a: &PinnedAttachment, b: &PinnedAttachment) -> bool {
    match (live_ifindex(a), live_ifindex(b)) {
        (0, _) | (_, 0) => a.target == b.target,
        (x, y) => x == y,
    }
}

/// A tc placement link pinned without its partner (a parapetd killed
/// between the two links of an interface): the missing one is linked now
/// with this dataplane's program and the lone one kept, so its direction
/// stays judged throughout. Packets of the missing direction passed from
/// the kill to here (docs/hooks.md, *Without netfilter BPF links*).
/// `Err` (what to log) when its device is gone or the link fails: the
/// caller removes the lone link and the re-sync links the interface anew.
fn complete_half(dp: &mut Dataplane, p: &PinnedAttachment) -> Result<TcHooksAttached, String> {
    let ifindex = live_ifindex(p);
    let now = namespace_ifaces()
        .into_iter()
        .find(|(i, _)| *i == ifindex && ifindex != 0)
        .map(|(_, name)| name)
        .ok_or_else(|| {
            format!(
                "the tc placement link {}@{} has no device",
                p.target, p.hook
            )
        })?;
    let ingress_alone = p.hook == TC_HOOKS_IN;
    let other = dp
        .attach_tc_hook_half(&now, ingress_alone)
        .map_err(|e| format!("completing the tc placement on {now}: {e}"))?;
    eprintln!(
        "parapetd: dataplane: the tc placement on {now} had only its {} link pinned (a \
         parapetd stopped between its two links): kept it, linked {} now",
        if ingress_alone { "ingress" } else { "egress" },
        if ingress_alone { "egress" } else { "ingress" },
    );
    let (ingress, egress) = if ingress_alone {
        (p.id, other)
    } else {
        (other, p.id)
    };
    Ok(TcHooksAttached {
        iface: p.target.clone(),
        ifindex,
        ingress,
        egress,
    })
}

fn join(names: &[&String]) -> String {
    names
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The tc placement's word for the plan (`Dataplane::set_tc_hooks`).
fn plan_bits(plan: &[NfWant]) -> u32 {
    plan.iter()
        .fold(0, |b, w| b | tc_hook_bit(w.hook, w.family))
}

impl Kernel {
    /// Whether `attach` without an interface uses the tc placement with
    /// this dataplane.
    pub(crate) fn tc_placement_with(&self, dp: &Dataplane) -> bool {
        match self.config.hook_placement {
            HookPlacement::Tc => true,
            HookPlacement::Netfilter => false,
            HookPlacement::Auto => dp.hook_images() && dp.netfilter_note().is_some(),
        }
    }

    /// Whether the attachment without an interface is at tc now.
    pub(crate) fn tc_placed(&self) -> bool {
        self.nf_attached()
            && self
                .dp
                .as_ref()
                .is_some_and(|dp| self.tc_placement_with(dp))
    }

    /// `attach` without an interface in the tc placement.
    pub(crate) fn attach_tc_placement(&mut self, mode: Mode) -> Result<Attachment, ErrorReply> {
        if let Some(why) =
            tc_refusal(&self.nf_plan).or_else(|| tc_owner_refusal(self.nf_owner.as_ref()))
        {
            return Err(ErrorReply::new(code::APPLY, why));
        }
        self.attached.push(Attachment {
            iface: String::new(),
            hook: AttachPoint::Netfilter,
            mode,
            actual: None,
            note: Some(TC_PLACEMENT_NOTE.to_string()),
            id: 0,
            links: Vec::new(),
            tc_links: Vec::new(),
        });
        // ctstate comes from the conntrack lookup here (the netfilter
        // hooks read the packet's own entry instead)
        if self.nf_ct {
            if let Some(dp) = self.dp.as_mut() {
                if let Err(e) = dp.set_conntrack(true) {
                    self.attached.pop();
                    return Err(dp_err(
                        "the tc placement reads ctstate with the conntrack lookup",
                        e,
                    ));
                }
            }
        }
        let on = self.dp.as_ref().is_some_and(Dataplane::conntrack);
        let r = self
            .ensure_ct_table(on, true)
            .and_then(|()| self.sync_tc_links());
        if let Err(e) = r {
            if let Some(a) = self.attached.pop() {
                if let Some(dp) = &mut self.dp {
                    for l in a.tc_links {
                        let _ = dp.detach(l.ingress);
                        let _ = dp.detach(l.egress);
                    }
                }
            }
            self.prune_ct_table();
            self.publish_tc_watch();
            return Err(e);
        }
        Ok(self.attached.last().expect("pushed above").clone())
    }

    /// Makes the tc placement cover the plan and every interface of the
    /// namespace: the hooks' word first (a new link enforces the right
    /// hooks from its first packet); then, by interface index, links of a
    /// renamed interface follow its name (the kernel keeps them on the
    /// device), links whose interface is gone are dropped (the kernel
    /// released them with the device; dropped before new ones are made, as
    /// a new interface may take a gone one's name and pin), and interfaces
    /// without links get them.
    pub(crate) fn sync_tc_links(&mut self) -> Result<(), ErrorReply> {
        // links the watcher made ahead of the state lock are taken over
        // where their interface still lacks links; the rest are dropped
        let made =
            std::mem::take(&mut self.tc_watch.lock().unwrap_or_else(|e| e.into_inner()).made);
        let r = self.sync_tc_links_with(made);
        self.publish_tc_watch();
        r
    }

    /// Tells the link watcher what it may link ahead of the state lock: the
    /// programs while attached in the tc placement (a fresh kit each time,
    /// so one of a replaced dataplane does not outlive it), and which
    /// interfaces have links.
    pub(crate) fn publish_tc_watch(&mut self) {
        let covered: Option<Vec<u32>> = self
            .attached
            .iter()
            .find(|a| a.hook == AttachPoint::Netfilter)
            .filter(|_| self.tc_placed())
            .map(|a| a.tc_links.iter().map(|l| l.ifindex).collect());
        let kit = match (&covered, self.dp.as_mut()) {
            (Some(_), Some(dp)) => dp.tc_hooks_kit().ok(),
            _ => None,
        };
        let mut w = self.tc_watch.lock().unwrap_or_else(|e| e.into_inner());
        if covered.is_none() {
            // not attached in the tc placement (any more): nothing to keep
            w.made.clear();
        }
        w.covered = covered.unwrap_or_default();
        w.kit = kit;
        w.abort_between_links = self.config.test_abort_between_tc_links;
    }

    fn sync_tc_links_with(&mut self, mut made: Vec<TcHooksLinks>) -> Result<(), ErrorReply> {
        let (Some(dp), Some(att)) = (
            self.dp.as_mut(),
            self.attached
                .iter_mut()
                .find(|a| a.hook == AttachPoint::Netfilter),
        ) else {
            return Ok(());
        };
        if self.nf_refused.is_none() {
            dp.set_tc_hooks(plan_bits(&self.nf_plan))
                .map_err(|e| dp_err("writing the tc placement's hooks", e))?;
        }
        let here = namespace_ifaces();
        let mut err = None;
        for l in &mut att.tc_links {
            let Some((_, name)) = here.iter().find(|(i, _)| *i == l.ifindex) else {
                continue;
            };
            if *name != l.iface {
                let was = l.iface.clone();
                if let Err(e) = dp.rename_tc_hooks(l, name) {
                    err = Some(dp_err(&format!("following {was} renamed {name}"), e));
                }
            }
        }
        att.tc_links.retain(|l| {
            if here.iter().any(|(i, _)| *i == l.ifindex) {
                return true;
            }
            for id in [l.ingress, l.egress] {
                if let Err(e) = dp.detach(id) {
                    err = Some(dp_err(&format!("dropping the links of {}", l.iface), e));
                }
            }
            false
        });
        for (index, iface) in &here {
            if att.tc_links.iter().any(|l| l.ifindex == *index) {
                continue;
            }
            let ahead = made
                .iter()
                .position(|m| m.ifindex == *index)
                .map(|i| made.swap_remove(i));
            // links of a kit whose programs are not this dataplane's are
            // refused (and dropped): attached anew right after
            let kept = ahead.and_then(|m| dp.keep_tc_hooks(m, iface).ok());
            let l = match kept {
                Some(l) => l,
                None => dp
                    .attach_tc_hooks(iface)
                    .map_err(|e| dp_err(&format!("attaching the tc placement to {iface}"), e))?,
            };
            att.tc_links.push(l);
        }
        err.map_or(Ok(()), Err)
    }

    /// The link watcher saw the namespace's interfaces change (or starts):
    /// while attached in the tc placement, links go onto new interfaces
    /// and off gone ones ([`Kernel::sync_tc_links`]), taking over those the
    /// watcher made ahead of the state lock (`ahead`, in place since
    /// `linked_at`; an apply's re-sync may have taken them over already);
    /// at the netfilter hooks the new names are recorded for `-i`/`-o`.
    /// `since` is when the event was read (the time to the links is kept
    /// for `stats`). Returns what to log.
    pub fn follow_links(
        &mut self,
        since: std::time::Instant,
        ahead: &[(u32, String)],
        linked_at: std::time::Instant,
    ) -> Vec<String> {
        self.tc_follow.events += 1;
        if !self.tc_placed() {
            self.publish_tc_watch();
            // the netfilter hooks see every interface already: only
            // `-i`/`-o` need the new names
            if self.nf_attached() {
                if let Some(Err(e)) = self.dp.as_mut().map(Dataplane::refresh_ifnames) {
                    return vec![format!("reading the interfaces' names: {e}")];
                }
            }
            return Vec::new();
        }
        let names = |k: &Kernel| -> Vec<String> {
            k.attached
                .iter()
                .find(|a| a.hook == AttachPoint::Netfilter)
                .map(|a| a.tc_links.iter().map(|l| l.iface.clone()).collect())
                .unwrap_or_default()
        };
        let locked_ms = since.elapsed().as_secs_f64() * 1e3;
        let before = names(self);
        let r = self.sync_tc_links();
        let after = names(self);
        let mut said = Vec::new();
        let mut added: Vec<&String> = after.iter().filter(|i| !before.contains(i)).collect();
        let gone: Vec<&String> = before.iter().filter(|i| !after.contains(i)).collect();
        // linked ahead and taken over by an apply's re-sync before this one
        for (_, n) in ahead {
            if after.contains(n) && !added.contains(&n) {
                added.push(n);
            }
        }
        if !added.is_empty() {
            // every new interface linked ahead of the lock: the window
            // ended then; else when the re-sync linked the rest
            let all_ahead = added.iter().all(|n| ahead.iter().any(|(_, a)| a == *n));
            let ms = if all_ahead {
                linked_at.saturating_duration_since(since).as_secs_f64() * 1e3
            } else {
                since.elapsed().as_secs_f64() * 1e3
            };
            self.tc_follow.attached_late += added.len() as u64;
            self.tc_follow.last_ms = Some(ms);
            self.tc_follow.lock_ms = Some(locked_ms);
            said.push(format!(
                "the tc placement now on {} ({ms:.1} ms after the link event; the state \
                 lock {locked_ms:.1} ms after it)",
                join(&added)
            ));
        }
        if !gone.is_empty() {
            said.push(format!(
                "the tc placement's links of {} dropped (interface gone)",
                join(&gone)
            ));
        }
        self.tc_follow.error = r.err().map(|e| e.msg);
        if let Some(e) = &self.tc_follow.error {
            said.push(format!("following the interfaces: {e}"));
        }
        said
    }

    /// The link watcher has no link events (`stats` says why).
    pub fn link_watch_failed(&mut self, e: &std::io::Error) {
        self.tc_follow.error = Some(format!("no link events: {e}"));
    }

    /// A starting parapetd and the tc placement's links an earlier one
    /// pinned: when the journal has the attachment without an interface
    /// and this dataplane places it at tc, each interface's pair is taken
    /// over without re-attaching (an upgrade swapped their program in
    /// place already); an interface with one link only (a parapetd killed
    /// between its two links) keeps that link and gets the other one here,
    /// before the daemon serves; the others are removed. Returns whether
    /// the attachment was taken (the caller then syncs the links).
    pub(crate) fn adopt_tc_placement(
        &mut self,
        dp: &mut Dataplane,
        pinned: Vec<PinnedAttachment>,
    ) -> bool {
        let wanted = self
            .pending
            .iter()
            .position(|(_, h, _)| *h == AttachPoint::Netfilter)
            .filter(|_| self.tc_placement_with(dp) && !pinned.is_empty());
        let mut links: Vec<TcHooksAttached> = Vec::new();
        let mut orphans = Vec::new();
        if wanted.is_some() {
            let (ins, outs): (Vec<_>, Vec<_>) =
                pinned.into_iter().partition(|p| p.hook == TC_HOOKS_IN);
            let mut outs: Vec<Option<PinnedAttachment>> = outs.into_iter().map(Some).collect();
            let mut lone = Vec::new();
            for i in ins {
                // by the device the links run on (a kill between renaming
                // the two pins of a renamed interface leaves two names)
                let out = outs
                    .iter_mut()
                    .find(|o| o.as_ref().is_some_and(|o| same_device(o, &i)))
                    .and_then(Option::take);
                match out {
                    Some(o) => {
                        eprintln!(
                            "parapetd: dataplane: adopted the pinned tc placement links of {}; \
                             not re-attached",
                            i.target
                        );
                        links.push(TcHooksAttached {
                            ifindex: live_ifindex(&i),
                            iface: i.target,
                            ingress: i.id,
                            egress: o.id,
                        });
                    }
                    None => lone.push(i),
                }
            }
            lone.extend(outs.into_iter().flatten());
            for p in lone {
                match complete_half(dp, &p) {
                    Ok(l) => links.push(l),
                    Err(why) => {
                        eprintln!("parapetd: dataplane: {why}");
                        orphans.push(p);
                    }
                }
            }
        } else {
            orphans = pinned;
        }
        for p in orphans {
            eprintln!(
                "parapetd: dataplane: removing the pinned tc placement link {}@{}",
                p.target, p.hook
            );
            if let Err(e) = dp.detach(p.id) {
                eprintln!("parapetd: dataplane: {e}");
            }
        }
        let Some(k) = wanted else {
            return false;
        };
        let (iface, hook, mode) = self.pending.remove(k);
        self.attached.push(Attachment {
            iface,
            hook,
            mode,
            actual: None,
            note: Some(format!("{TC_PLACEMENT_NOTE}; adopted from its pins")),
            id: 0,
            links: Vec::new(),
            tc_links: links,
        });
        true
    }

    /// The tc placement's links as `stats` shows them.
    pub(crate) fn tc_links_json(dp: Option<&Dataplane>, links: &[TcHooksAttached]) -> Value {
        links
            .iter()
            .map(|l| {
                let mut v = json!({"iface": l.iface});
                for (name, id) in [("ingress", l.ingress), ("egress", l.egress)] {
                    if let Some(ids) = dp.and_then(|d| d.link_ids(id)) {
                        v[name] = json!({"pinned": true, "link_id": ids.link_id,
                            "prog_id": ids.prog_id});
                    }
                }
                v
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiled::Loader;
    use crate::loader::ParseLoader;

    fn plan(text: &str) -> Vec<NfWant> {
        let c = ParseLoader::default().load("t", text, None).unwrap();
        crate::hooks::hook_plan(&c.ruleset, &c.compiled)
            .unwrap()
            .links
    }

    #[test]
    fn chains_before_or_after_routing_are_refused_and_the_hook_bits_follow_the_plan() {
        let pre = plan(
            "table inet f {\n chain p {\n  type filter hook prerouting priority 0; policy accept;\n }\n}\n",
        );
        assert!(tc_refusal(&pre).is_some_and(|w| w.contains("PREROUTING")));
        let chain = |hook: &str, prio: &str| {
            plan(&format!(
                "table inet f {{\n chain c {{\n  type filter hook {hook} priority {prio}; \
                 policy accept;\n }}\n}}\n"
            ))
        };
        // tc sees what the kernel's chain sees only below conntrack at
        // prerouting and above SNAT at postrouting
        for (hook, prio, refused) in [
            ("prerouting", "raw", false),
            ("prerouting", "-201", false),
            ("prerouting", "-200", true),
            ("prerouting", "mangle", true),
            ("postrouting", "101", false),
            ("postrouting", "300", false),
            ("postrouting", "srcnat", true),
            ("postrouting", "0", true),
        ] {
            let why = tc_refusal(&chain(hook, prio));
            assert_eq!(why.is_some(), refused, "{hook} {prio}: {why:?}");
        }
        let ipt = plan("*filter\n:INPUT DROP [0:0]\n:FORWARD DROP [0:0]\nCOMMIT\n");
        assert_eq!(tc_refusal(&ipt), None);
        // iptables-save is IPv4: INPUT (hook 1) and FORWARD (2), bit 2 * hook
        let want = (1 << 2) | (1 << 4);
        assert_eq!(plan_bits(&ipt) & want, want);
        assert_eq!(plan_bits(&ipt) & 0b10_1010_1010, 0, "no IPv6 bit");
    }
}
