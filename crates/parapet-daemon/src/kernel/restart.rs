//! A starting parapetd and the kernel: adopting what an earlier parapetd
//! left pinned ([`Kernel::adopt`]), and attaching again what the journal
//! names ([`Kernel::restore`]).

use super::*;

impl Kernel {
    /// Takes a freshly loaded program and installs the active ruleset in
    /// it; keeps the one already there if another request was first.
    ///
    /// With pinning, the program may have adopted the pinned maps and
    /// links of an earlier parapetd: the journal is the truth, so its
    /// ruleset is made live in them (an atomic image swap, never a
    /// detach); then the pinned links run this build's program (swapped
    /// by `BPF_LINK_UPDATE` when it differs; a netfilter link is renewed
    /// make-before-break instead, see [`Kernel::adopt_netfilter`]); links
    /// the journal names are taken over without re-attaching, the others
    /// are removed.
    pub fn adopt(
        &mut self,
        mut dp: Dataplane,
        active: Option<(&Ruleset, &[CompiledChain])>,
        sets: &SetStore,
    ) -> Result<(), ErrorReply> {
        if self.dp.is_some() {
            return Ok(());
        }
        // before any image goes live: the address types read it
        self.addr_mirror.fill(&mut dp);
        let pinned = dp.pinned_attachments();
        if self.config.conntrack_table && pinned.is_empty() {
            // left behind by a parapetd that was killed (a pinned program
            // still needs it: it is installed again below when wanted)
            ConntrackTable::delete_stale(CT_TABLE);
        }
        if let Some((rs, compiled)) = active {
            // counters survive a restart that keeps the same images
            let same = dp.maps_adopted() && live_images_are(&self.config, &dp, rs, compiled);
            if dp.maps_adopted() {
                eprintln!(
                    "parapetd: dataplane: adopted the pinned maps at generation {}; the journal's ruleset {}",
                    dp.generation(),
                    if same { "is the live image (made live again, counters kept)" } else { "differs from the live image: made live from the journal" }
                );
            }
            let tc = self
                .pending
                .iter()
                .any(|(_, h, _)| *h == AttachPoint::Netfilter)
                && self.tc_placement_with(&dp);
            let done = install(
                &self.config,
                &mut dp,
                rs,
                compiled,
                sets,
                !same,
                Placed {
                    on_iface: false,
                    tc_placed: tc,
                },
            )?;
            self.nf_plan = done.links;
            self.nf_owner = done.owner;
            self.nf_rev_path = done.rev_path;
            self.nf_ct = done.needs_ct;
            self.nf_refused = done.refused;
            self.no_iface_chain = done.no_iface_chain;
        }
        if !dp.maps_adopted() && !pinned.is_empty() {
            eprintln!(
                "parapetd: dataplane: the pinned maps do not match this program's layout \
                 (another pin ABI, --max-rules or --image-mib); the journal's state was made \
                 live in fresh maps"
            );
        }
        if let Err(e) = dp.purge_adopted_sets() {
            eprintln!("parapetd: dataplane: clearing the adopted sets: {e}");
        }
        for line in dp
            .finish_adoption()
            .map_err(|e| dp_err("adopting the pinned dataplane", e))?
        {
            eprintln!("parapetd: dataplane: {line}");
        }
        // the journal names the attachments that stay
        let (nf_pinned, pinned): (Vec<_>, Vec<_>) = pinned
            .into_iter()
            .partition(|p| p.hook == parapet_dataplane::hook_pin_name(AttachPoint::Netfilter));
        let (tc_pinned, pinned): (Vec<_>, Vec<_>) = pinned
            .into_iter()
            .partition(|p| parapet_dataplane::is_tc_hooks_pin(&p.hook));
        let nf_adopted = self.adopt_netfilter(&mut dp, nf_pinned);
        let nf_adopted = self.adopt_tc_placement(&mut dp, tc_pinned) || nf_adopted;
        for p in pinned {
            let want = self.pending.iter().position(|(i, h, _)| {
                *i == p.target && parapet_dataplane::hook_pin_name(*h) == p.hook
            });
            let ids = dp.link_ids(p.id).map_or_else(String::new, |i| {
                format!(" (link {}, program {})", i.link_id, i.prog_id)
            });
            match want {
                Some(k) => {
                    let (iface, hook, mode) = self.pending.remove(k);
                    eprintln!(
                        "parapetd: dataplane: adopted the pinned attachment to {iface} at {}{ids}; not re-attached",
                        hook_name(hook)
                    );
                    self.attached.push(Attachment {
                        iface,
                        hook,
                        mode,
                        actual: (hook == AttachPoint::Xdp).then_some(mode),
                        note: Some("adopted from its pin".to_string()),
                        id: p.id,
                        links: Vec::new(),
                        tc_links: Vec::new(),
                    });
                }
                None => {
                    eprintln!(
                        "parapetd: dataplane: the journal has no attachment to {} at {}; removing its pin{ids}",
                        p.target, p.hook
                    );
                    if let Err(e) = dp.detach(p.id) {
                        eprintln!("parapetd: dataplane: {e}");
                    }
                }
            }
        }
        let on = dp.conntrack();
        self.dp = Some(dp);
        // the adopted XDP links keep running what they ran until now: the
        // engine is chosen again for the journal's ruleset and swapped in
        if let Some((rs, compiled)) = active {
            self.keep_iface_list(rs, compiled);
        }
        self.sync_xdp_engine();
        if nf_adopted {
            // chains the journal's ruleset has and the pins had not
            if let Err(e) = self.sync_nf_links() {
                eprintln!("parapetd: dataplane: {}", e.msg);
            }
        }
        if let Err(e) = self.ensure_ct_table(on, !self.attached.is_empty()) {
            eprintln!("parapetd: dataplane: {}", e.msg);
        }
        self.prune_ct_table();
        Ok(())
    }

    /// After recovery: when the journal had attachments, loads the program,
    /// installs the active ruleset and attaches again to every interface
    /// that still exists. Problems are returned as log lines; the daemon
    /// serves regardless.
    pub fn restore(
        &mut self,
        active: Option<(&Ruleset, &[CompiledChain])>,
        sets: &SetStore,
    ) -> Vec<String> {
        let pinned = self.config.pin_dir.as_deref().is_some_and(|d| {
            std::fs::read_dir(d.join("links")).is_ok_and(|mut r| r.next().is_some())
        });
        if self.pending.is_empty() && !pinned {
            return Vec::new();
        }
        let mut log = Vec::new();
        // On failure the attachments stay pending, so snapshots keep them
        // and the next start tries again.
        // every program: the journal's attachments and the pinned links
        // are made or adopted now, before any client is served
        let dp = match Self::load(&self.config, Programs::ALL) {
            Ok(dp) => dp,
            Err(e) => {
                log.push(format!("cannot re-attach after restart: {}", e.msg));
                return log;
            }
        };
        // adopts the pinned attachments the journal names (taking them
        // out of `pending`)
        if let Err(e) = self.adopt(dp, active, sets) {
            log.push(format!("cannot re-attach after restart: {}", e.msg));
            return log;
        }
        let pending = std::mem::take(&mut self.pending);
        for (iface, hook, mode) in pending {
            if hook != AttachPoint::Netfilter && !iface_exists(&iface) {
                log.push(format!(
                    "warning: {iface} no longer exists; not re-attached at {}",
                    hook_name(hook)
                ));
                continue;
            }
            match self.attach(&iface, hook, mode) {
                Ok(a) => log.push(format!(
                    "re-attached to {iface} at {}{}",
                    hook_name(hook),
                    a.note.map(|n| format!(" ({n})")).unwrap_or_default()
                )),
                Err(e) => log.push(format!("warning: {}", e.msg)),
            }
        }
        log
    }
}

/// Whether every image of `rs` (the interface hooks' chain and each
/// netfilter hook's) is the live one in `dp`'s adopted maps.
fn live_images_are(
    cfg: &KernelConfig,
    dp: &Dataplane,
    rs: &Ruleset,
    compiled: &[CompiledChain],
) -> bool {
    let Ok(iface) = fits(cfg, dp, rs, compiled) else {
        return false;
    };
    let img = iface.image;
    if dp.read_live_image(img.len()).ok() != Some(img) {
        return false;
    }
    let Ok(plan) = hooks::hook_plan(rs, compiled) else {
        // no hook images are written for such a ruleset
        return true;
    };
    plan.chains.iter().all(|(hook, c)| {
        let img = c.classifier.image().to_bytes();
        dp.read_live_hook_image(*hook, img.len()).ok() == Some(img)
    })
}
