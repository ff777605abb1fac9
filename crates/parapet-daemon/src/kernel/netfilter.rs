//! The daemon's netfilter attachment (`parapet attach` without an
//! interface): links made per the hook plan ([`crate::hooks`]), synced on
//! every apply, and shown by `stats` and `list`.

use super::{dp_err, kernel_chain, Attachment, Kernel};
use crate::compiled::CompiledChain;
use crate::hooks::{warnings, NfWant};
use crate::proto::{code, ErrorReply};
use parapet_dataplane::{AttachPoint, Dataplane, Mode};
use parapet_model::Ruleset;
use serde_json::{json, Value};

/// The daemon's netfilter attachment: links made, synced and shown.
impl Kernel {
    /// Makes the netfilter links equal to the plan (when attached there):
    /// new ones first, then the ones no longer wanted go.
    pub(crate) fn sync_nf_links(&mut self) -> Result<(), ErrorReply> {
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

    /// The netfilter links as `stats` shows them.
    pub(crate) fn links_json(links: &[(NfWant, u64, i32)]) -> Value {
        links
            .iter()
            .map(|(w, _, priority)| {
                json!({"chain": w.hook.chain(), "family": match w.family {
                    parapet_dataplane::NfFamily::Ipv4 => "ipv4",
                    parapet_dataplane::NfFamily::Ipv6 => "ipv6",
                }, "priority": priority})
            })
            .collect()
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
        warnings(rs, compiled, chain, self.nf_attached())
    }
}
