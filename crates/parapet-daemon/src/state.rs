//! The daemon's state and the commands that read and change it.
//!
//! [`State`] is only touched under one mutex. A changing command appends
//! its journal record while still holding it, so the journal's order is
//! the order in which changes happened; the caller then makes the record
//! durable ([`crate::journal::Journal::sync`]) before replying.

use crate::journal::{enc, Journal, Lsn, Record, CHUNK};
use crate::proto::{code, ErrorReply, Outcome, Request};
use parapet_model::{Counters, Ruleset};
use parapet_sets::{address_family, element_key, parse_element, parse_type};
use parapet_sets::{Clock, Element, Family, KeyPart, Policy, SetDesc, SetError, SetStore};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// Default ban set for IPv4 addresses.
pub const BAN4: &str = "parapet-ban4";
/// Default ban set for IPv6 addresses.
pub const BAN6: &str = "parapet-ban6";
/// Longest set name.
pub const MAX_SET_NAME: usize = 64;
/// Longest element text.
pub const MAX_ELEM: usize = 512;

/// How a set was created: the `set.create` request, kept so that it can be
/// journaled, snapshotted and listed exactly as the client asked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetSpec {
    /// Type text (nft or ipset spelling).
    #[serde(rename = "type")]
    pub typ: String,
    /// Family for ipset types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// `interval`, `timeout`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// Default timeout, seconds (implies the timeout flag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// Maximum number of elements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<usize>,
    /// `performance` or `memory`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

impl SetSpec {
    /// The `parapet-sets` description of this spec.
    pub fn desc(&self) -> Result<(SetDesc, Vec<KeyPart>), String> {
        let (dims, mut interval) = parse_type(&self.typ, self.family.as_deref())?;
        let mut timeouts = self.timeout.is_some();
        for f in &self.flags {
            match f.as_str() {
                "interval" => interval = true,
                "timeout" => timeouts = true,
                "" => {}
                other => {
                    return Err(format!(
                        "unknown set flag `{other}` (expected interval, timeout)"
                    ))
                }
            }
        }
        let mut d = SetDesc::new(&dims);
        if interval {
            d = d.interval();
        }
        if timeouts {
            d = d.timeouts(self.timeout.unwrap_or(0).saturating_mul(1000));
        }
        if let Some(n) = self.size {
            if n == 0 {
                return Err("size must be at least 1".into());
            }
            d = d.size(n).maxelem(n);
        }
        d = d.policy(match self.policy.as_deref() {
            None | Some("performance") => Policy::Performance,
            Some("memory") => Policy::Memory,
            Some(p) => {
                return Err(format!(
                    "unknown policy `{p}` (expected performance or memory)"
                ))
            }
        });
        Ok((d, dims))
    }
}

/// A parsed and compiled ruleset, ready to be swapped in.
pub struct Loaded {
    /// The model.
    pub ruleset: Ruleset,
    /// The input format that was recognised (`iptables-save`, `nft`, `json`, …).
    pub format: String,
    /// Compiled base chains (empty for loaders that do not compile).
    pub compiled: Vec<crate::loader::CompiledChain>,
}

/// Parses and compiles ruleset text. Implementations must be deterministic:
/// the journal stores the text and replays it through the loader.
pub trait Loader: Send + Sync {
    /// Loads `text` (named `name` in messages). Errors are
    /// `FILE:LINE:COL: message` lines.
    fn load(&self, name: &str, text: &str, format: Option<&str>) -> Result<Loaded, Vec<String>>;
    /// Renders the ruleset in `format` (`iptables-save`, `nft`, `json`);
    /// `None` when the loader has no printer for that format.
    fn render(&self, _ruleset: &Ruleset, _format: &str) -> Option<Result<String, String>> {
        None
    }
}

/// The ruleset currently in force.
pub struct Active {
    /// File name given at apply.
    pub name: String,
    /// Format recognised at apply.
    pub format: String,
    /// Source text as applied.
    pub text: String,
    /// The model, shared with readers (and later the dataplane).
    pub ruleset: Arc<Ruleset>,
    /// Per rule (index = id - 1) counters.
    pub counters: Vec<Counters>,
    /// The compiled base chains.
    pub compiled: Vec<crate::loader::CompiledChain>,
}

/// Everything the daemon owns.
pub struct State {
    /// The sets.
    pub sets: SetStore,
    specs: HashMap<String, SetSpec>,
    /// The active ruleset, if any.
    pub active: Option<Active>,
    /// Bumped by every successful apply.
    pub generation: u64,
    /// The kernel dataplane (not loaded until the first `attach`).
    pub kernel: crate::dataplane::Kernel,
    clock: Arc<dyn Clock>,
}

fn invalid(msg: impl Into<String>) -> ErrorReply {
    ErrorReply::new(code::INVALID, msg)
}

fn set_err(e: SetError) -> ErrorReply {
    let c = match &e {
        SetError::NoSuchSet(_) => code::NO_SUCH_SET,
        SetError::Exists(_) => code::EXISTS,
        SetError::Full { .. } => code::FULL,
        _ => code::INVALID,
    };
    ErrorReply::new(c, e.to_string())
}

fn valid_name(n: &str) -> Result<(), ErrorReply> {
    if n.is_empty()
        || n.len() > MAX_SET_NAME
        || !n
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-:".contains(&b))
    {
        return Err(invalid(format!(
            "bad set name `{n}`: 1 to {MAX_SET_NAME} characters of A-Z a-z 0-9 _ . - :"
        )));
    }
    Ok(())
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

impl State {
    /// An empty state on `clock` (ms since the Unix epoch).
    pub fn new(clock: Arc<dyn Clock>) -> State {
        State {
            sets: SetStore::with_clock(clock.clone()),
            specs: HashMap::new(),
            active: None,
            generation: 0,
            kernel: crate::dataplane::Kernel::default(),
            clock,
        }
    }

    /// Current time, ms.
    pub fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Number of elements over all sets (including expired, unreaped ones).
    pub fn element_count(&self) -> usize {
        self.sets
            .names()
            .iter()
            .filter_map(|n| self.sets.get(n))
            .map(|s| s.len())
            .sum()
    }

    /// Removes up to `budget` expired elements per set. Expiry is not
    /// journaled: elements carry absolute expiry times.
    pub fn reap(&mut self, budget: usize) -> usize {
        let now = self.now();
        let names: Vec<String> = self.sets.names().iter().map(|s| s.to_string()).collect();
        names
            .iter()
            .filter_map(|n| self.sets.get_mut(n).map(|s| s.reap(now, budget)))
            .sum()
    }

    fn create_set(
        &mut self,
        name: &str,
        spec: &SetSpec,
        exist_ok: bool,
    ) -> Result<bool, ErrorReply> {
        valid_name(name)?;
        if let Some(old) = self.specs.get(name) {
            if exist_ok && old == spec {
                return Ok(false);
            }
            return Err(ErrorReply::new(
                code::EXISTS,
                format!("set `{name}` already exists"),
            ));
        }
        let (desc, _) = spec.desc().map_err(invalid)?;
        self.sets.create(name, desc).map_err(set_err)?;
        self.specs.insert(name.to_string(), spec.clone());
        Ok(true)
    }

    fn dims(&self, name: &str) -> Result<Vec<KeyPart>, ErrorReply> {
        match self.sets.get(name) {
            Some(s) => Ok(s.key_dims().to_vec()),
            None => Err(ErrorReply::new(
                code::NO_SUCH_SET,
                format!("set `{name}` does not exist"),
            )),
        }
    }

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

    fn parse_elems<'a, I: Iterator<Item = &'a str>>(
        &self,
        dims: &[KeyPart],
        texts: I,
        expiry: u64,
        now: u64,
        timeouts: bool,
    ) -> Result<Vec<Element>, ErrorReply> {
        let mut out = Vec::new();
        for t in texts {
            if t.len() > MAX_ELEM {
                return Err(invalid(format!("element longer than {MAX_ELEM} bytes")));
            }
            let mut el =
                parse_element(dims, t).map_err(|m| invalid(format!("element `{t}`: {m}")))?;
            if timeouts {
                if expiry == 0 {
                    el.timeout = Some(0);
                } else {
                    // Relative to the same `now` the set uses, so the stored
                    // stamp equals the journaled absolute expiry.
                    el.expires = Some(expiry - now);
                }
            }
            out.push(el);
        }
        Ok(out)
    }

    /// Adds elements with an absolute expiry; all or nothing. Returns the
    /// number of new elements and the parsed elements (for the journal).
    fn add_elems(
        &mut self,
        name: &str,
        texts: &[&str],
        expiry: u64,
        now: u64,
    ) -> Result<(usize, Vec<Element>), ErrorReply> {
        let dims = self.dims(name)?;
        let timeouts = self.sets.get(name).is_some_and(|s| s.desc().timeouts);
        let els = self.parse_elems(&dims, texts.iter().copied(), expiry, now, timeouts)?;
        let set = self.sets.get_mut(name).expect("checked");
        // Single values that certainly fit cannot fail to insert (the
        // parser already matched them to the key type), so they skip
        // `add_many`'s undo log, which costs a second hash probe each.
        // Anything else (ranges, a set near maxelem) stays all-or-nothing.
        let points = els.iter().all(|e| e.ranges().iter().all(|(l, h)| l == h));
        let n = if points && set.len().saturating_add(els.len()) <= set.maxelem() {
            let mut n = 0;
            for e in &els {
                n += set.add(e, now).map_err(set_err)?;
            }
            n
        } else {
            set.add_many(&els, now).map_err(set_err)?
        };
        Ok((n, els))
    }

    fn del_elems(
        &mut self,
        name: &str,
        texts: &[&str],
    ) -> Result<(usize, Vec<Element>), ErrorReply> {
        let dims = self.dims(name)?;
        let els = self.parse_elems(&dims, texts.iter().copied(), 0, 0, false)?;
        let n = self
            .sets
            .get_mut(name)
            .expect("checked")
            .del_many(&els)
            .map_err(set_err)?;
        Ok((n, els))
    }

    fn check_widths(&self, name: &str, widths: &[u8]) -> Result<Vec<KeyPart>, String> {
        let dims = self.dims(name).map_err(|e| e.msg)?;
        if dims
            .iter()
            .map(|d| crate::journal::dim_bytes(*d))
            .ne(widths.iter().copied())
        {
            return Err(format!(
                "set {name}: record key widths {widths:?} do not match the set's type"
            ));
        }
        Ok(dims)
    }

    /// Replays one journal or snapshot record. Returns a problem to report
    /// when the record no longer applies (which replay then skips).
    pub fn replay(&mut self, rec: Record, loader: &dyn Loader) -> Result<(), String> {
        let now = self.now();
        match rec {
            Record::SetCreate { name, spec } => {
                let spec: SetSpec = serde_json::from_str(&spec)
                    .map_err(|e| format!("set {name}: bad spec: {e}"))?;
                self.create_set(&name, &spec, true)
                    .map(|_| ())
                    .map_err(|e| e.msg)
            }
            Record::SetDestroy { name } => {
                self.specs.remove(&name);
                self.sets.destroy(&name);
                Ok(())
            }
            Record::SetAdd {
                name,
                widths,
                mut elems,
            } => {
                // Expired elements are simply not restored; the others get
                // their remaining lifetime, converted in place (a record
                // holds up to 64k elements: no second copy).
                self.check_widths(&name, &widths)?;
                let timeouts = self.sets.get(&name).is_some_and(|s| s.desc().timeouts);
                elems.retain(|e| !matches!(e.expires, Some(exp) if exp <= now));
                for el in &mut elems {
                    match el.expires {
                        Some(exp) if timeouts => el.expires = Some(exp - now),
                        Some(_) => el.expires = None,
                        None if timeouts => el.timeout = Some(0),
                        None => {}
                    }
                }
                // One by one: replay needs no all-or-nothing undo log
                // (what was journaled was accepted once), which halves the
                // hash probes of `add_many`.
                let set = self.sets.get_mut(&name).expect("checked");
                for el in &elems {
                    set.add(el, now).map_err(|e| e.to_string())?;
                }
                Ok(())
            }
            Record::SetDel {
                name,
                widths,
                elems,
            } => {
                self.check_widths(&name, &widths)?;
                self.sets
                    .get_mut(&name)
                    .expect("checked")
                    .del_many(&elems)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
            Record::SetFlush { name } => self.sets.flush(&name).map_err(|e| e.to_string()),
            Record::Apply { name, format, text } => {
                let loaded = loader
                    .load(&name, &text, Some(&format))
                    .map_err(|e| format!("ruleset {name} no longer loads: {}", e.join("; ")))?;
                self.install(name, text, loaded);
                Ok(())
            }
            Record::Attach { iface, hook, mode } => {
                let (h, m) = crate::dataplane::from_bytes(hook, mode);
                self.kernel.replay_attach(iface, h, m);
                Ok(())
            }
            Record::Detach { iface, hook } => {
                let (h, _) = crate::dataplane::from_bytes(hook, 0);
                self.kernel.replay_detach(&iface, h);
                Ok(())
            }
        }
    }

    fn install(&mut self, name: String, text: String, loaded: Loaded) {
        let n = loaded.ruleset.rule_count();
        self.active = Some(Active {
            name,
            format: loaded.format,
            text,
            ruleset: Arc::new(loaded.ruleset),
            counters: vec![Counters::default(); n],
            compiled: loaded.compiled,
        });
        self.generation += 1;
    }

    /// Writes the whole state as snapshot records.
    pub fn snapshot(&self, emit: &mut crate::journal::Emit) -> std::io::Result<()> {
        let now = self.now();
        let mut names: Vec<&str> = self.sets.names();
        names.sort_unstable();
        for name in names {
            let spec = serde_json::to_string(&self.specs[name]).expect("spec serializes");
            emit(&|b: &mut Vec<u8>| enc::create(b, name, &spec))?;
            let set = self.sets.get(name).expect("listed");
            let dims = set.key_dims().to_vec();
            let elems = set.elements(now);
            for chunk in elems.chunks(CHUNK) {
                emit(&|b: &mut Vec<u8>| {
                    enc::add(
                        b,
                        name,
                        &dims,
                        chunk
                            .iter()
                            .map(|se| (&se.element, se.remaining.map_or(0, |r| now + r.max(1)))),
                    )
                })?;
            }
        }
        if let Some(a) = &self.active {
            emit(&|b: &mut Vec<u8>| enc::apply(b, &a.name, &a.format, &a.text))?;
        }
        for (iface, hook, mode) in self.kernel.journaled() {
            emit(&|b: &mut Vec<u8>| enc::attach(b, &iface, hook, mode))?;
        }
        Ok(())
    }

    /// Runs one command. Changes are journaled (not yet synced); the LSN to
    /// sync before replying is returned with the outcome. `apply` must go
    /// through [`State::apply_loaded`] (the compile happens outside the lock).
    pub fn execute(
        &mut self,
        req: &Request,
        journal: &Journal,
        loader: &dyn Loader,
    ) -> (Outcome, Option<Lsn>) {
        let mut lsn = None;
        let r = self.execute_inner(req, journal, loader, &mut lsn);
        (r, lsn)
    }

    fn need_set<'r>(req: &'r Request) -> Result<&'r str, ErrorReply> {
        req.set
            .as_deref()
            .ok_or_else(|| invalid("missing field `set`"))
    }

    fn execute_inner(
        &mut self,
        req: &Request,
        journal: &Journal,
        loader: &dyn Loader,
        lsn: &mut Option<Lsn>,
    ) -> Outcome {
        let now = self.now();
        match &*req.cmd {
            "ping" => Ok(obj(
                json!({"proto": crate::proto::PROTO_VERSION, "version": env!("CARGO_PKG_VERSION")}),
            )),
            "set.create" => {
                let name = Self::need_set(req)?;
                let spec = SetSpec {
                    typ: req
                        .typ
                        .clone()
                        .ok_or_else(|| invalid("missing field `type`"))?,
                    family: req.family.clone(),
                    flags: req.flags.clone(),
                    timeout: req.timeout,
                    size: req.size,
                    policy: req.policy.clone(),
                };
                let created = self.create_set(name, &spec, req.exist)?;
                if created {
                    let js = serde_json::to_string(&spec).expect("spec serializes");
                    *lsn = Some(journal.append(|b| enc::create(b, name, &js)));
                }
                Ok(obj(json!({"created": created})))
            }
            "set.destroy" => {
                let name = Self::need_set(req)?;
                self.dims(name)?;
                if let Some(a) = &self.active {
                    if a.ruleset.set_refs.iter().any(|r| r.name == name) {
                        return Err(invalid(format!(
                            "set `{name}` is used by the active ruleset"
                        )));
                    }
                }
                self.sets.destroy(name);
                self.specs.remove(name);
                *lsn = Some(journal.append(|b| enc::destroy(b, name)));
                Ok(Map::new())
            }
            "set.add" => {
                let name = Self::need_set(req)?;
                if req.elems.is_empty() {
                    return Err(invalid("missing field `elems`"));
                }
                let exp = self.expiry(name, req.timeout, now)?;
                let texts: Vec<&str> = req.elems.iter().map(|s| s.trim()).collect();
                let (added, els) = self.add_elems(name, &texts, exp, now)?;
                let dims = self.dims(name)?;
                *lsn = Some(
                    journal.append(|b| enc::add(b, name, &dims, els.iter().map(|e| (e, exp)))),
                );
                self.kernel.set_add(name, &els, exp, now)?;
                Ok(obj(
                    json!({"added": added, "refreshed": texts.len() - added.min(texts.len())}),
                ))
            }
            "set.del" => {
                let name = Self::need_set(req)?;
                if req.elems.is_empty() {
                    return Err(invalid("missing field `elems`"));
                }
                let texts: Vec<&str> = req.elems.iter().map(|s| s.trim()).collect();
                let (deleted, els) = self.del_elems(name, &texts)?;
                let dims = self.dims(name)?;
                *lsn = Some(journal.append(|b| enc::del(b, name, &dims, els.iter())));
                self.kernel.set_del(name, &els)?;
                Ok(obj(json!({"deleted": deleted})))
            }
            "set.flush" => {
                let name = Self::need_set(req)?;
                self.sets.flush(name).map_err(set_err)?;
                *lsn = Some(journal.append(|b| enc::flush(b, name)));
                self.kernel.set_flush(name)?;
                Ok(Map::new())
            }
            "set.list" => match req.set.as_deref() {
                None => {
                    let mut names = self.sets.names();
                    names.sort_unstable();
                    let sets: Vec<Value> = names
                        .iter()
                        .map(|n| {
                            let s = self.sets.get(n).expect("listed");
                            json!({"set": n, "spec": self.specs[*n], "key": s.desc().type_name(), "elements": s.len(), "backend": s.backend().name()})
                        })
                        .collect();
                    Ok(obj(json!({"sets": sets})))
                }
                Some(name) => {
                    let s = self.sets.get(name).ok_or_else(|| {
                        ErrorReply::new(code::NO_SUCH_SET, format!("set `{name}` does not exist"))
                    })?;
                    let dims = s.key_dims();
                    let elems: Vec<Value> = s
                        .elements(now)
                        .iter()
                        .map(|se| match se.remaining {
                            Some(ms) => json!({"elem": se.element.key_text(dims), "timeout": ms.div_ceil(1000)}),
                            None => json!({"elem": se.element.key_text(dims)}),
                        })
                        .collect();
                    Ok(obj(
                        json!({"set": name, "spec": self.specs[name], "key": s.desc().type_name(), "backend": s.backend().name(), "elems": elems}),
                    ))
                }
            },
            "set.test" => {
                let name = Self::need_set(req)?;
                let text = req
                    .elem
                    .as_deref()
                    .or(req.elems.first().map(|s| &**s))
                    .ok_or_else(|| invalid("missing field `elem`"))?;
                let dims = self.dims(name)?;
                let el = parse_element(&dims, text)
                    .map_err(|m| invalid(format!("element `{text}`: {m}")))?;
                let s = self.sets.get(name).expect("checked");
                let covered = match element_key(&dims, &el) {
                    Some(k) => s.contains(&k, now),
                    None => s.has_element(&el, now),
                };
                Ok(obj(json!({"covered": covered})))
            }
            "set.explain" => {
                let name = Self::need_set(req)?;
                let e = self.sets.explain(name).ok_or_else(|| {
                    ErrorReply::new(code::NO_SUCH_SET, format!("set `{name}` does not exist"))
                })?;
                Ok(obj(json!({
                    "set": name, "backend": e.backend.name(), "key": e.key, "policy": e.policy.to_string(),
                    "lookup": e.complexity.lookup, "insert": e.complexity.insert, "space": e.complexity.space,
                    "reasons": e.reasons, "elements": e.elements, "maxelem": e.maxelem, "memory_bytes": e.memory_bytes,
                    "text": e.to_string(),
                })))
            }
            "ban" | "unban" => self.ban(req, journal, lsn, now),
            "counters.reset" => {
                if let Some(a) = &mut self.active {
                    a.counters.iter_mut().for_each(|c| *c = Counters::default());
                }
                self.kernel.reset_counters()?;
                Ok(Map::new())
            }
            "list" => self.list(req, loader),
            "apply" => Err(invalid("internal: apply is handled by the server")),
            other => Err(ErrorReply::new(
                code::UNKNOWN_CMD,
                format!("unknown command `{other}`"),
            )),
        }
    }

    fn ban(
        &mut self,
        req: &Request,
        journal: &Journal,
        lsn: &mut Option<Lsn>,
        now: u64,
    ) -> Outcome {
        let ban = &*req.cmd == "ban";
        if req.elems.is_empty() {
            return Err(invalid("missing field `elems` (addresses)"));
        }
        // Group addresses by target set: the named one, or the family's.
        let mut groups: Vec<(String, Family, Vec<&str>)> = Vec::new();
        for a in &req.elems {
            let a = a.trim();
            let fam = address_family(a).map_err(invalid)?;
            let target = match (&req.set, fam) {
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
        for (set, fam, addrs) in &groups {
            if !ban {
                if self.sets.get(set).is_none() {
                    continue; // nothing was ever banned there
                }
                let (k, els) = self.del_elems(set, addrs)?;
                n += k;
                let dims = self.dims(set)?;
                *lsn = Some(journal.append(|b| enc::del(b, set, &dims, els.iter())));
                self.kernel.set_del(set, &els)?;
                continue;
            }
            if self.sets.get(set).is_none() {
                let spec = SetSpec {
                    typ: if *fam == Family::V4 {
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
                self.create_set(set, &spec, false)?;
                let js = serde_json::to_string(&spec).expect("spec serializes");
                *lsn = Some(journal.append(|b| enc::create(b, set, &js)));
            }
            let exp = self.expiry(set, req.timeout, now)?;
            let (k, els) = self.add_elems(set, addrs, exp, now)?;
            n += k;
            let dims = self.dims(set)?;
            *lsn = Some(journal.append(|b| enc::add(b, set, &dims, els.iter().map(|e| (e, exp)))));
            self.kernel.set_add(set, &els, exp, now)?;
        }
        Ok(obj(if ban {
            json!({"banned": n})
        } else {
            json!({"unbanned": n})
        }))
    }

    fn list(&self, req: &Request, loader: &dyn Loader) -> Outcome {
        let Some(a) = &self.active else {
            return Ok(obj(json!({"generation": self.generation, "active": false})));
        };
        let format = req.format.clone().unwrap_or_else(|| a.format.clone());
        let mut m = obj(json!({
            "generation": self.generation, "active": true, "name": a.name, "source_format": a.format,
            "format": format, "rules": a.ruleset.rule_count(),
            "chains": a.compiled.iter().map(|c| json!({"chain": c.name, "engine": c.classifier.engine().name(), "memory_bytes": c.classifier.memory_bytes()})).collect::<Vec<_>>(),
        }));
        // The kernel's counters when it runs the ruleset, else the daemon's;
        // they replace the ones read from the file.
        let kernel = if req.counters {
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
            let rs = if req.counters {
                with_counters()
            } else {
                (*a.ruleset).clone()
            };
            m.insert(
                "ruleset".into(),
                serde_json::to_value(&rs).expect("ruleset serializes"),
            );
        } else if format == a.format && !req.counters {
            m.insert("text".into(), Value::from(a.text.clone()));
        } else {
            let rs = if req.counters {
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
        if req.counters {
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

    /// Validates a loaded ruleset against the state (every set it refers
    /// to must exist); errors name the rule's line.
    pub fn check_loaded(&self, name: &str, loaded: &Loaded) -> Result<(), Vec<String>> {
        let mut errs = Vec::new();
        for (i, r) in loaded.ruleset.set_refs.iter().enumerate() {
            if self.sets.get(&r.name).is_none() {
                let line = loaded
                    .ruleset
                    .rules()
                    .find(|rule| {
                        rule.matches
                            .iter()
                            .any(|(f, _)| *f == parapet_model::Field::Set(i as u16))
                    })
                    .map_or(0, |rule| rule.origin.line);
                errs.push(format!("{name}:{line}:1: rule refers to set `{}`, which does not exist (create it first)", r.name));
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs)
        }
    }

    /// Makes a loaded ruleset live in the kernel when the program is
    /// loaded (after [`State::check_loaded`], before
    /// [`State::apply_loaded`]); on error the old one stays live there.
    pub fn kernel_apply(&mut self, loaded: &Loaded) -> Result<(), ErrorReply> {
        self.kernel
            .apply(&loaded.ruleset, &loaded.compiled, &self.sets)
    }

    /// Takes a freshly loaded BPF program and installs the active ruleset
    /// and its sets in it.
    pub fn kernel_adopt(&mut self, dp: parapet_dataplane::Dataplane) -> Result<(), ErrorReply> {
        let active = self.active.as_ref().map(|a| (&*a.ruleset, &a.compiled[..]));
        self.kernel.adopt(dp, active, &self.sets)
    }

    /// After recovery: loads the program and re-attaches what the journal
    /// names (see [`crate::dataplane::Kernel::restore`]); returns log lines.
    pub fn kernel_restore(&mut self) -> Vec<String> {
        let active = self.active.as_ref().map(|a| (&*a.ruleset, &a.compiled[..]));
        self.kernel.restore(active, &self.sets)
    }

    /// Swaps in a ruleset compiled outside the lock (after
    /// [`State::check_loaded`]); journals it.
    pub fn apply_loaded(
        &mut self,
        name: String,
        text: String,
        loaded: Loaded,
        journal: &Journal,
    ) -> (Map<String, Value>, Lsn) {
        let lsn = journal.append(|b| enc::apply(b, &name, &loaded.format, &text));
        let rules = loaded.ruleset.rule_count();
        self.install(name, text, loaded);
        (
            obj(json!({"rules": rules, "generation": self.generation})),
            lsn,
        )
    }
}

/// Loads rulesets serialized as JSON (`parapet_model::Ruleset` via serde).
/// Used until the text frontends (`parapet-parse`) are wired in, and always
/// for `--format json`.
pub struct JsonLoader;

impl Loader for JsonLoader {
    fn load(&self, name: &str, text: &str, format: Option<&str>) -> Result<Loaded, Vec<String>> {
        match format {
            None | Some("json") | Some("auto") => {}
            Some(f) => {
                return Err(vec![format!(
                    "{name}:1:1: format `{f}` is not supported by this daemon build (json only)"
                )])
            }
        }
        serde_json::from_str::<Ruleset>(text)
            .map(|ruleset| Loaded {
                ruleset,
                format: "json".into(),
                compiled: Vec::new(),
            })
            .map_err(|e| vec![format!("{name}:{}:{}: {e}", e.line(), e.column())])
    }
}
