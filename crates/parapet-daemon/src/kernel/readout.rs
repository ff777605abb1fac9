//! What the loaded program reports: rule counters, LOG events, the
//! netfilter REJECT ring, and the attachments and `dataplane` object of
//! `stats` and `list`.

use super::*;

impl Kernel {
    /// Per-rule counters from the kernel for rules `1..=n`, plus the
    /// policy's (index 0); `None` when not loaded.
    pub fn counters(&self, n: usize) -> Option<Vec<Counters>> {
        self.counter_range(0, n + 1)
    }

    /// Kernel counters of `count` rule ids from `first` (0 = the policy),
    /// ids past the program's `max_rules` reading zero; `None` when not
    /// loaded. For metrics, which read a large ruleset in chunks.
    pub fn counter_range(&self, first: u32, count: usize) -> Option<Vec<Counters>> {
        let dp = self.dp.as_ref()?;
        // one batch lookup per 8,192 rules (the state lock is held)
        let mut out: Vec<Counters> = dp
            .counter_range(first, count)
            .unwrap_or_default()
            .into_iter()
            .map(|c| Counters {
                packets: c.packets,
                bytes: c.bytes,
            })
            .collect();
        out.resize(count, Counters::default());
        Some(out)
    }

    /// Zeroes the kernel's rule counters (when loaded).
    pub fn reset_counters(&mut self) -> Result<(), ErrorReply> {
        match &mut self.dp {
            Some(dp) => dp
                .reset_counters()
                .map_err(|e| dp_err("resetting the kernel counters", e)),
            None => Ok(()),
        }
    }

    /// Up to `max` pending LOG events.
    pub fn poll_log(&mut self, max: usize) -> Vec<parapet_dataplane::LogEvent> {
        match &mut self.dp {
            Some(dp) => dp.poll_log(max),
            None => Vec::new(),
        }
    }

    /// The netfilter REJECT ring of the loaded program, once per load
    /// (src/rejecter.rs answers it).
    pub fn take_reject_queue(&mut self) -> Option<parapet_dataplane::RejectQueue> {
        self.dp.as_mut()?.take_reject_queue()
    }

    /// The attachments as `stats` and `list` show them.
    pub fn attachments_json(&self) -> Value {
        self.attached
            .iter()
            .map(|a| {
                let mut v = json!({"iface": a.iface, "hook": hook_name(a.hook)});
                if let Some(ids) = self.dp.as_ref().and_then(|d| d.link_ids(a.id)) {
                    v["pinned"] = Value::from(true);
                    v["link_id"] = Value::from(ids.link_id);
                    v["prog_id"] = Value::from(ids.prog_id);
                }
                if a.hook == AttachPoint::Netfilter {
                    v["links"] = Self::links_json(self.dp.as_ref(), &a.links);
                    if self.tc_placed() {
                        v["placement"] = Value::from("tc");
                        v["tc_links"] = Self::tc_links_json(self.dp.as_ref(), &a.tc_links);
                        v["link_watch"] = self.tc_follow.json();
                    } else {
                        v["placement"] = Value::from("netfilter");
                    }
                }
                if let Some(m) = a.actual {
                    v["mode"] = Value::from(mode_name(m));
                }
                if a.hook == AttachPoint::Xdp {
                    // what the link runs, read from the kernel
                    let e = self.dp.as_ref().and_then(|d| d.xdp_engine_of(a.id));
                    v["engine"] = e.map_or(Value::Null, |e| Value::from(e.name()));
                }
                if let Some(n) = &a.note {
                    v["note"] = Value::from(n.clone());
                }
                v
            })
            .collect()
    }

    /// The `dataplane` object of `stats`.
    pub fn stats(&self) -> Value {
        let attachments = self.attachments_json();
        let Some(dp) = &self.dp else {
            return json!({"loaded": false, "attachments": attachments,
                "packet_stats": self.config.packet_stats});
        };
        let s = dp.stats().unwrap_or_default();
        // read without loading the netfilter program (seconds of verifier
        // CPU under the state lock): it loads at its first use
        let nf_tried = dp.netfilter_tried();
        let placement = match (nf_tried, self.config.hook_placement) {
            (None, HookPlacement::Auto) => Value::Null,
            _ if self.tc_placement_with(dp) => Value::from("tc"),
            _ => Value::from("netfilter"),
        };
        let sets: Vec<Value> = dp
            .installed_sets()
            .into_iter()
            .map(|(name, id)| {
                json!({"set": name, "id": id,
                    "elements": dp.set_len(id).unwrap_or(0), "entries": dp.set_entries(id).unwrap_or(0)})
            })
            .collect();
        json!({
            "loaded": true,
            "attachments": attachments,
            "sets": sets,
            "generation": dp.generation(),
            "pin_dir": dp.pin_dir().map(|p| p.display().to_string()),
            "build": dp.build_id(),
            "max_rules": dp.max_rules(),
            // what the program does (read from its config map), not what
            // was asked: a pinned program adopted at start says its own
            "packet_stats": dp.packet_stats().unwrap_or(self.config.packet_stats),
            "netfilter": {
                "available": nf_tried.map(|t| t.is_ok()),
                "note": match nf_tried {
                    None => Some(NF_NOT_LOADED),
                    Some(t) => t.err(),
                },
                "placement": placement,
                "packets": {
                    "input": s.get(Stat::NfInput),
                    "forward": s.get(Stat::NfForward),
                    "output": s.get(Stat::NfOutput),
                    "prerouting": s.get(Stat::NfPrerouting),
                    "postrouting": s.get(Stat::NfPostrouting),
                },
                "reject": {
                    "queued": s.get(Stat::NfRejectQueued),
                    "ring_full": s.get(Stat::NfRejectRingFull),
                    "sent": self.nf_reject.sent.load(std::sync::atomic::Ordering::Relaxed),
                    "no_reply": self.nf_reject.no_reply.load(std::sync::atomic::Ordering::Relaxed),
                    "failed": self.nf_reject.failed.load(std::sync::atomic::Ordering::Relaxed),
                },
            },
            "hooks": hook_stats::hooks_json(dp),
            "xdp_engine": self.xdp_engine_json(),
            "image_slot_bytes": dp.slot_capacity(),
            "addr_mirror": self.addr_mirror.json(),
            "conntrack": {
                "available": dp.conntrack_available(),
                "lookup": dp.conntrack(),
                "table": self.ct_table.as_ref().map(|t| format!("inet {}", t.name())),
            },
            "kernel": {
                "packets": s.get(Stat::Packets),
                "not_ip": s.get(Stat::NotIp),
                "truncated": s.get(Stat::Truncated),
                "malformed": s.get(Stat::Malformed),
                "ext_limit": s.get(Stat::ExtLimit),
                "by_image": s.get(Stat::Image),
                "image_errors": s.get(Stat::ImageError),
                "no_action": s.get(Stat::NoAction),
                "nonterm_truncated": s.get(Stat::NontermTruncated),
                "log_emitted": s.get(Stat::LogEmitted),
                "log_rate_limited": s.get(Stat::LogRateLimited),
                "log_ring_full": s.get(Stat::LogRingFull),
                "reject_sent": s.get(Stat::RejectSent),
                "reject_limited": s.get(Stat::RejectLimited),
                "reject_no_reply": s.get(Stat::RejectNoReply),
                "reject_failed": s.get(Stat::RejectFailed),
                "ct_lookups": s.get(Stat::CtLookup),
                "ct_found": s.get(Stat::CtFound),
            },
        })
    }
}

/// `stats`' netfilter note before the netfilter program's first use.
const NF_NOT_LOADED: &str = "not loaded yet: verified at the first attach without an interface";
