//! The client commands that run under the state lock: each [`Command`]
//! becomes a [`Change`] for [`State::commit`], or a query. (`apply`,
//! `attach`, `detach` and `stats` need work outside the lock first; the
//! server runs them.)

use crate::change::Change;
use crate::command::Command;
use crate::compiled::Loader;
use crate::journal::{Journal, Lsn};
use crate::proto::{code, ErrorReply, Outcome, Str};
use crate::state::{invalid, obj, set_err, Origin, State, BAN4, BAN6, MAX_ELEM};
use parapet_model::Counters;
use parapet_sets::{address_family, element_key, parse_element};
use parapet_sets::{Element, Family, KeyPart, SetError};
use serde_json::{json, Value};

impl State {
    /// Absolute expiry (ms, 0 = permanent) of elements added now with
    /// `timeout` seconds (None = the set's default).
    fn expiry(&self, name: &str, timeout: Option<u64>, now: u64) -> Result<u64, ErrorReply> {
        let s = self.sets.get(name).ok_or_else(|| {
            ErrorReply::new(code::NO_SUCH_SET, format!("set `{name}` does not exist"))
        })?;
        let d = s.desc();
        if !d.timeouts {
            if timeout.is_some_and(|t| t != 0) {
                return Err(set_err(SetError::TimeoutNotSupported {
                    set: name.to_string(),
                }));
            }
            return Ok(0);
        }
        let ms = match timeout {
            Some(t) => t
                .checked_mul(1000)
                .ok_or_else(|| invalid("timeout too large"))?,
            None => d.default_timeout,
        };
        Ok(if ms == 0 { 0 } else { now.saturating_add(ms) })
    }

    /// Parses element texts against a set's key, each with the absolute
    /// expiry `expiry` (ms, 0 = permanent) as [`Change::SetAdd`] wants it.
    fn parse_elems<'a>(
        &self,
        name: &str,
        texts: impl Iterator<Item = &'a str>,
        expiry: u64,
    ) -> Result<Vec<Element>, ErrorReply> {
        let dims = self.dims(name)?;
        let mut out = Vec::new();
        for t in texts {
            if t.len() > MAX_ELEM {
                return Err(invalid(format!("element longer than {MAX_ELEM} bytes")));
            }
            let mut el =
                parse_element(&dims, t).map_err(|m| invalid(format!("element `{t}`: {m}")))?;
            el.expires = (expiry != 0).then_some(expiry);
            out.push(el);
        }
        Ok(out)
    }

    /// Runs one command. Changes are journaled (not yet synced); the LSN to
    /// sync before replying is returned with the outcome.
    pub fn execute(
        &mut self,
        cmd: Command,
        journal: &Journal,
        loader: &dyn Loader,
    ) -> (Outcome, Option<Lsn>) {
        let mut lsn = None;
        let mut origin = Origin::Client {
            journal,
            lsn: &mut lsn,
        };
        let r = self.execute_inner(cmd, &mut origin, loader);
        (r, lsn)
    }

    fn execute_inner(&mut self, cmd: Command, origin: &mut Origin, loader: &dyn Loader) -> Outcome {
        let now = self.now();
        match cmd {
            Command::Ping => Ok(obj(
                json!({"proto": crate::proto::PROTO_VERSION, "version": env!("CARGO_PKG_VERSION")}),
            )),
            Command::SetCreate { set, spec, exist } => {
                if exist && self.specs.get(&set) == Some(&spec) {
                    return Ok(obj(json!({"created": false})));
                }
                self.commit(Change::SetCreate { name: set, spec }, origin)?;
                Ok(obj(json!({"created": true})))
            }
            Command::SetDestroy { set } => {
                self.dims(&set)?;
                if let Some(a) = &self.active {
                    if a.ruleset.set_refs.iter().any(|r| r.name == set) {
                        return Err(invalid(format!(
                            "set `{set}` is used by the active ruleset"
                        )));
                    }
                }
                self.commit(Change::SetDestroy { name: set }, origin)?;
                Ok(Default::default())
            }
            Command::SetAdd {
                set,
                elems,
                timeout,
            } => {
                let exp = self.expiry(&set, timeout, now)?;
                let n = elems.len();
                let elems = self.parse_elems(&set, elems.iter().map(|s| s.trim()), exp)?;
                let added = self
                    .commit(Change::SetAdd { name: set, elems }, origin)?
                    .count;
                Ok(obj(json!({"added": added, "refreshed": n - added.min(n)})))
            }
            Command::SetDel { set, elems } => {
                let elems = self.parse_elems(&set, elems.iter().map(|s| s.trim()), 0)?;
                let deleted = self
                    .commit(Change::SetDel { name: set, elems }, origin)?
                    .count;
                Ok(obj(json!({"deleted": deleted})))
            }
            Command::SetFlush { set } => {
                self.commit(Change::SetFlush { name: set }, origin)?;
                Ok(Default::default())
            }
            Command::SetList { set: None } => Ok(self.set_list()),
            Command::SetList { set: Some(name) } => self.set_elements(&name, now),
            Command::SetTest { set, elem } => self.set_test(&set, &elem, now),
            Command::SetExplain { set } => self.set_explain(&set),
            Command::Ban {
                set,
                elems,
                timeout,
            } => self.ban(set, &elems, Some(timeout), origin),
            Command::Unban { set, elems } => self.ban(set, &elems, None, origin),
            Command::CountersReset => {
                if let Some(a) = &mut self.active {
                    a.counters.iter_mut().for_each(|c| *c = Counters::default());
                }
                self.kernel.reset_counters()?;
                Ok(Default::default())
            }
            Command::List { format, counters } => self.list(format, counters, loader),
            Command::Recent { name, write } => self.recent(&name, write.as_deref()),
            Command::Apply { .. }
            | Command::Attach { .. }
            | Command::Detach { .. }
            | Command::Stats => Err(invalid("internal: the server runs this command")),
        }
    }

    fn no_such_set(name: &str) -> ErrorReply {
        ErrorReply::new(code::NO_SUCH_SET, format!("set `{name}` does not exist"))
    }

    fn set_list(&self) -> serde_json::Map<String, Value> {
        let mut names = self.sets.names();
        names.sort_unstable();
        let sets: Vec<Value> = names
            .iter()
            .map(|n| {
                let s = self.sets.get(n).expect("listed");
                json!({"set": n, "spec": self.specs[*n], "key": s.desc().type_name(), "elements": s.len(), "backend": s.backend().name()})
            })
            .collect();
        obj(json!({"sets": sets}))
    }

    fn set_elements(&self, name: &str, now: u64) -> Outcome {
        let s = self.sets.get(name).ok_or_else(|| Self::no_such_set(name))?;
        let dims = s.key_dims();
        let elems: Vec<Value> = s
            .elements(now)
            .iter()
            .map(|se| match se.remaining {
                Some(ms) => {
                    json!({"elem": se.element.key_text(dims), "timeout": ms.div_ceil(1000)})
                }
                None => json!({"elem": se.element.key_text(dims)}),
            })
            .collect();
        Ok(obj(
            json!({"set": name, "spec": self.specs[name], "key": s.desc().type_name(), "backend": s.backend().name(), "elems": elems}),
        ))
    }

    fn set_test(&self, name: &str, text: &str, now: u64) -> Outcome {
        let dims: Vec<KeyPart> = self.dims(name)?;
        let el =
            parse_element(&dims, text).map_err(|m| invalid(format!("element `{text}`: {m}")))?;
        let s = self.sets.get(name).expect("checked");
        let covered = match element_key(&dims, &el) {
            Some(k) => s.contains(&k, now),
            None => s.has_element(&el, now),
        };
        Ok(obj(json!({"covered": covered})))
    }

    fn set_explain(&self, name: &str) -> Outcome {
        let e = self
            .sets
            .explain(name)
            .ok_or_else(|| Self::no_such_set(name))?;
        Ok(obj(json!({
            "set": name, "backend": e.backend.name(), "key": e.key, "policy": e.policy.to_string(),
            "lookup": e.complexity.lookup, "insert": e.complexity.insert, "space": e.complexity.space,
            "reasons": e.reasons, "elements": e.elements, "maxelem": e.maxelem, "memory_bytes": e.memory_bytes,
            "text": e.to_string(),
        })))
    }

    /// `ban` (`timeout` is `Some`) or `unban`: addresses grouped by target
    /// set (the named one, or the family's), each group one set change; a
    /// missing ban set is created first.
    fn ban(
        &mut self,
        set: Option<String>,
        addrs: &[Str],
        timeout: Option<Option<u64>>,
        origin: &mut Origin,
    ) -> Outcome {
        let now = self.now();
        let mut groups: Vec<(String, Family, Vec<&str>)> = Vec::new();
        for a in addrs {
            let a = a.trim();
            let fam = address_family(a).map_err(invalid)?;
            let target = match (&set, fam) {
                (Some(s), _) => s.clone(),
                (None, Family::V4) => BAN4.to_string(),
                (None, Family::V6) => BAN6.to_string(),
            };
            match groups.iter_mut().find(|g| g.0 == target) {
                Some(g) => g.2.push(a),
                None => groups.push((target, fam, vec![a])),
            }
        }
        let mut n = 0;
        for (name, fam, addrs) in groups {
            let Some(timeout) = timeout else {
                if self.sets.get(&name).is_none() {
                    continue; // nothing was ever banned there
                }
                let elems = self.parse_elems(&name, addrs.into_iter(), 0)?;
                n += self.commit(Change::SetDel { name, elems }, origin)?.count;
                continue;
            };
            if self.sets.get(&name).is_none() {
                let spec = crate::change::SetSpec {
                    typ: if fam == Family::V4 {
                        "ipv4_addr".into()
                    } else {
                        "ipv6_addr".into()
                    },
                    family: None,
                    flags: vec!["timeout".into()],
                    timeout: None,
                    size: None,
                    policy: None,
                };
                let create = Change::SetCreate {
                    name: name.clone(),
                    spec,
                };
                self.commit(create, origin)?;
            }
            let exp = self.expiry(&name, timeout, now)?;
            let elems = self.parse_elems(&name, addrs.into_iter(), exp)?;
            n += self.commit(Change::SetAdd { name, elems }, origin)?.count;
        }
        if timeout.is_some() {
            self.tally.bans += n as u64;
        } else {
            self.tally.unbans += n as u64;
        }
        Ok(obj(if timeout.is_some() {
            json!({"banned": n})
        } else {
            json!({"unbanned": n})
        }))
    }

    fn list(&self, format: Option<String>, counters_wanted: bool, loader: &dyn Loader) -> Outcome {
        let Some(a) = &self.active else {
            return Ok(obj(json!({"generation": self.generation, "active": false})));
        };
        let format = format.unwrap_or_else(|| a.format.clone());
        let mut m = obj(json!({
            "generation": self.generation, "active": true, "name": a.name, "source_format": a.format,
            "format": format, "rules": a.ruleset.rule_count(),
            "chains": a.compiled.iter().map(|c| json!({"chain": c.name, "engine": c.classifier.engine().name(), "memory_bytes": c.classifier.memory_bytes()})).collect::<Vec<_>>(),
        }));
        // The kernel's counters when it runs the ruleset, else the daemon's;
        // they replace the ones read from the file.
        let kernel = if counters_wanted {
            self.kernel.counters(a.counters.len())
        } else {
            None
        };
        let counters: &[Counters] = match &kernel {
            Some(k) => &k[1..],
            None => &a.counters,
        };
        let with_counters = || {
            let mut rs = (*a.ruleset).clone();
            for t in &mut rs.tables {
                for c in &mut t.chains {
                    for r in &mut c.rules {
                        r.counters = counters.get(r.id as usize - 1).copied().unwrap_or_default();
                    }
                }
            }
            rs
        };
        if format == "json" {
            let rs = if counters_wanted {
                with_counters()
            } else {
                (*a.ruleset).clone()
            };
            // Not every ruleset fits serde_json's Value (128-bit interface
            // and IPv6 fields): an error reply, never a panic under the lock.
            let v = serde_json::to_value(&rs).map_err(|e| {
                invalid(format!(
                    "the ruleset has no JSON value form ({e}); list --format nft or iptables-save"
                ))
            })?;
            m.insert("ruleset".into(), v);
        } else if format == a.format && !counters_wanted {
            m.insert("text".into(), Value::from(a.text.clone()));
        } else {
            let rs = if counters_wanted {
                with_counters()
            } else {
                (*a.ruleset).clone()
            };
            match loader.render(&rs, &format) {
                Some(Ok(t)) => {
                    m.insert("text".into(), Value::from(t));
                }
                Some(Err(e)) => {
                    return Err(invalid(format!(
                        "cannot print the active ruleset as {format}: {e}"
                    )))
                }
                None => {
                    return Err(invalid(format!(
                        "unknown list format `{format}` (expected iptables-save, nft or json)"
                    )))
                }
            }
        }
        m.insert("attachments".into(), self.kernel.attachments_json());
        if counters_wanted {
            let c: Vec<Value> = counters
                .iter()
                .enumerate()
                .map(|(i, c)| json!({"rule": i + 1, "packets": c.packets, "bytes": c.bytes}))
                .collect();
            m.insert("counters".into(), Value::from(c));
            if let Some(k) = &kernel {
                m.insert(
                    "policy_counter".into(),
                    json!({"packets": k[0].packets, "bytes": k[0].bytes}),
                );
            }
        }
        Ok(m)
    }
}
