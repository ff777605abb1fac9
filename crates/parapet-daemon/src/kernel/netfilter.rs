//! The daemon's netfilter attachment (`parapet attach` without an
//! interface): links made per the hook plan ([`crate::hooks`]), synced on
//! every apply, taken over from their pins at a restart, and shown by
//! `stats` and `list`.

use super::{dp_err, kernel_chain, Attachment, Kernel};
use crate::compiled::CompiledChain;
use crate::hooks::{warnings, NfWant};
use crate::proto::{code, ErrorReply};
use parapet_dataplane::{
    AttachPoint, Dataplane, Mode, NfFamily, PinnedAttachment, PRIORITY_SEARCH,
};
use parapet_model::Ruleset;
use serde_json::{json, Value};

fn family_name(f: NfFamily) -> &'static str {
    match f {
        NfFamily::Ipv4 => "ipv4",
        NfFamily::Ipv6 => "ipv6",
    }
}

/// The daemon's netfilter attachment: links made, synced and shown.
impl Kernel {
    /// Makes the netfilter links equal to the plan (when attached there):
    /// new ones first, then the ones no longer wanted go.
    pub(crate) fn sync_nf_links(&mut self) -> Result<(), ErrorReply> {
        if self.tc_placed() {
            return self.sync_tc_links();
        }
        let (Some(dp), Some(att)) = (
            self.dp.as_mut(),
            self.attached
                .iter_mut()
                .find(|a| a.hook == AttachPoint::Netfilter),
        ) else {
            return Ok(());
        };
        for w in &self.nf_plan {
            if att.links.iter().any(|(x, _, _)| x == w) {
                continue;
            }
            let a = dp
                .attach_netfilter(w.hook, w.family, w.priority)
                .map_err(|e| dp_err("attaching at the netfilter hooks", e))?;
            att.links.push((*w, a.id, a.priority));
        }
        if self.nf_refused.is_some() {
            // The ruleset cannot go to the hooks (two chains at one): an
            // empty plan must not take the links away — that would open
            // the hooks. They keep enforcing the images they have.
            return Ok(());
        }
        let plan = &self.nf_plan;
        let mut err = None;
        att.links.retain(|(w, id, _)| {
            if plan.contains(w) {
                return true;
            }
            if let Err(e) = dp.detach(*id) {
                err = Some(dp_err("detaching from a netfilter hook", e));
            }
            false
        });
        err.map_or(Ok(()), Err)
    }

    /// The attachment at the netfilter hooks: one link per hook chain and
    /// family of the active ruleset (none before the first apply; an apply
    /// adds and removes links as its chains come and go).
    pub(crate) fn attach_netfilter(&mut self, mode: Mode) -> Result<Attachment, ErrorReply> {
        let dp = self
            .dp
            .as_ref()
            .ok_or_else(|| ErrorReply::new(code::DATAPLANE, "the eBPF program is not loaded"))?;
        if let Some(why) = &self.nf_refused {
            return Err(ErrorReply::new(code::APPLY, why.clone()));
        }
        if !dp.hook_images() {
            return Err(ErrorReply::new(
                code::DATAPLANE,
                "parapetd was started with --no-hook-images: the netfilter hooks have no \
                 images; restart it without that flag, or attach to an interface \
                 (`parapet attach IFACE --hook xdp|tc`)",
            ));
        }
        if self.tc_placement_with(dp) {
            return self.attach_tc_placement(mode);
        }
        if let Some(why) = crate::hooks::nf_rev_path_refusal(self.nf_rev_path.as_ref()) {
            return Err(ErrorReply::new(code::APPLY, why));
        }
        if let Some(why) = dp.netfilter_note() {
            return Err(ErrorReply::new(
                code::DATAPLANE,
                format!(
                    "this kernel cannot run parapet at the netfilter hooks (needs Linux >= 6.4                      with CONFIG_NETFILTER_BPF_LINK): {why}; attach to an interface instead                      (`parapet attach IFACE --hook xdp|tc`)"
                ),
            ));
        }
        self.attached.push(Attachment {
            iface: String::new(),
            hook: AttachPoint::Netfilter,
            mode,
            actual: None,
            note: None,
            id: 0,
            links: Vec::new(),
            tc_links: Vec::new(),
        });
        let on = self.dp.as_ref().is_some_and(Dataplane::conntrack);
        let r = self
            .ensure_ct_table(on, true)
            .and_then(|()| self.sync_nf_links());
        if let Err(e) = r {
            if let Some(a) = self.attached.pop() {
                for (_, id, _) in a.links {
                    if let Some(dp) = &mut self.dp {
                        let _ = dp.detach(id);
                    }
                }
            }
            self.prune_ct_table();
            return Err(e);
        }
        Ok(self.attached.last().expect("pushed above").clone())
    }

    /// The netfilter links as `stats` shows them (with their kernel ids
    /// when pinned).
    pub(crate) fn links_json(dp: Option<&Dataplane>, links: &[(NfWant, u64, i32)]) -> Value {
        links
            .iter()
            .map(|(w, id, priority)| {
                let mut v = json!({"chain": w.hook.chain(), "family": family_name(w.family),
                    "priority": priority});
                if let Some(ids) = dp.and_then(|d| d.link_ids(*id)) {
                    v["pinned"] = Value::from(true);
                    v["link_id"] = Value::from(ids.link_id);
                    v["prog_id"] = Value::from(ids.prog_id);
                }
                v
            })
            .collect()
    }

    /// A starting parapetd and the netfilter links an earlier one pinned
    /// (`nf_pinned`, found by the load; `self.nf_plan` is the journal's
    /// ruleset's, installed already). When the journal has the attachment
    /// at the netfilter hooks, each pinned link its ruleset still wants
    /// (same hook and family) is taken over without re-attaching; one that
    /// runs an older program (an upgrade, or fresh maps) or sits too far
    /// from the chain's priority is renewed make-before-break. The others
    /// are removed. Returns whether the attachment was taken (the caller
    /// then makes the links the pins lacked, [`Kernel::sync_nf_links`]);
    /// with no pinned links it stays pending for [`Kernel::restore`].
    pub(crate) fn adopt_netfilter(
        &mut self,
        dp: &mut Dataplane,
        nf_pinned: Vec<PinnedAttachment>,
    ) -> bool {
        let wanted = self
            .pending
            .iter()
            .position(|(_, h, _)| *h == AttachPoint::Netfilter);
        let stale = dp.stale_netfilter_links();
        let mut links: Vec<(NfWant, u64, i32)> = Vec::new();
        let found = !nf_pinned.is_empty();
        for p in nf_pinned {
            let ids = |dp: &Dataplane| {
                dp.link_ids(p.id).map_or_else(String::new, |i| {
                    format!("link {}, program {}", i.link_id, i.prog_id)
                })
            };
            let was = ids(dp);
            let at = dp.netfilter_attachment(p.id);
            let want = at.as_ref().filter(|_| wanted.is_some()).and_then(|a| {
                self.nf_plan.iter().find(|w| {
                    w.hook == a.hook
                        && w.family == a.family
                        && !links.iter().any(|(x, _, _)| x == *w)
                })
            });
            if let (Some(a), Some(why)) = (&at, wanted.and(self.nf_refused.as_ref())) {
                // refused at the hooks: keep the link (never fail open)
                eprintln!(
                    "parapetd: dataplane: the journal's ruleset cannot go to the netfilter hooks ({why}); \
                     the pinned link {} keeps enforcing its image ({was})",
                    p.target
                );
                let keep = NfWant {
                    hook: a.hook,
                    family: a.family,
                    priority: a.priority,
                };
                links.push((keep, p.id, a.priority));
                continue;
            }
            let (Some(a), Some(w)) = (at, want) else {
                eprintln!(
                    "parapetd: dataplane: the journal wants no netfilter link {}; removing its pin ({was})",
                    p.target
                );
                if let Err(e) = dp.detach(p.id) {
                    eprintln!("parapetd: dataplane: {e}");
                }
                continue;
            };
            let far = (a.priority - w.priority).abs() > PRIORITY_SEARCH;
            let priority = if stale.contains(&p.id) || far {
                match dp.renew_netfilter_link(p.id, w.priority) {
                    Ok(n) => {
                        eprintln!(
                            "parapetd: dataplane: netfilter link {} renewed make-before-break at priority {} \
                             ({}; was {was} at priority {})",
                            p.target,
                            n.priority,
                            ids(dp),
                            a.priority
                        );
                        n.priority
                    }
                    Err(e) => {
                        // the old link keeps enforcing the same maps
                        eprintln!(
                            "parapetd: dataplane: renewing netfilter link {}: {e}; the previous link \
                             ({was}) stays",
                            p.target
                        );
                        a.priority
                    }
                }
            } else {
                eprintln!(
                    "parapetd: dataplane: adopted the pinned netfilter link {} at priority {} ({was}); \
                     not re-attached",
                    p.target, a.priority
                );
                a.priority
            };
            links.push((*w, p.id, priority));
        }
        let Some(k) = wanted.filter(|_| found) else {
            return false;
        };
        let (iface, hook, mode) = self.pending.remove(k);
        self.attached.push(Attachment {
            iface,
            hook,
            mode,
            actual: None,
            note: Some("adopted from its pins".to_string()),
            id: 0,
            links,
            tc_links: Vec::new(),
        });
        true
    }

    /// What the ruleset means differently where it is placed now (see
    /// [`hooks::warnings`]).
    pub fn warnings(&self, rs: &Ruleset, compiled: &[CompiledChain]) -> Vec<String> {
        let iface = self
            .attached
            .iter()
            .any(|a| a.hook != AttachPoint::Netfilter);
        let chain = if iface {
            kernel_chain(&self.config, rs, compiled).ok()
        } else {
            None
        };
        let mut w = warnings(rs, compiled, chain, self.nf_attached());
        if self.tc_placed() {
            w.extend(crate::hooks::tc_placement_warnings(rs, compiled));
        }
        w
    }
}
