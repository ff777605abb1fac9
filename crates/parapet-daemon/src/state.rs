//! The daemon's state, and the one function that changes it:
//! [`State::commit`] applies a [`Change`] to the set store or the active
//! ruleset, to the journal and to the kernel. Client commands
//! (`State::execute`), `ban`, journal and snapshot replay
//! ([`State::replay`]) all go through it; [`State::snapshot`] writes the
//! state as the same changes.
//!
//! [`State`] is only touched under one mutex. A client's change appends
//! its journal record while still holding it, so the journal's order is
//! the order in which changes happened; the caller then makes the record
//! durable ([`crate::journal::Journal::sync`]) before replying.

use crate::change::{Change, SetSpec};
use crate::compiled::{CompiledChain, CompiledRuleset, Loader};
use crate::journal::{self, from_bytes, Journal, Lsn, Record, CHUNK};
use crate::kernel::{Attachment, Kernel};
use crate::proto::{code, ErrorReply};
use parapet_model::{Counters, Ruleset};
use parapet_sets::{Clock, Element, KeyPart, SetError, SetStore};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

pub use crate::change::{BAN4, BAN6};
/// Longest set name.
pub const MAX_SET_NAME: usize = 64;
/// Longest element text.
pub const MAX_ELEM: usize = 512;

/// The ruleset currently in force.
pub struct Active {
    /// File name given at apply.
    pub name: String,
    /// Format recognised at apply.
    pub format: String,
    /// Source text as applied.
    pub text: String,
    /// The model, shared with readers and the kernel glue.
    pub ruleset: Arc<Ruleset>,
    /// Per rule (index = id - 1) counters.
    pub counters: Vec<Counters>,
    /// The compiled base chains.
    pub compiled: Vec<CompiledChain>,
}

/// Everything the daemon owns.
pub struct State {
    /// The sets.
    pub sets: SetStore,
    pub(crate) specs: HashMap<String, SetSpec>,
    /// The active ruleset, if any.
    pub active: Option<Active>,
    /// Bumped by every successful apply.
    pub generation: u64,
    /// The kernel dataplane (not loaded until the first `attach`).
    pub kernel: Kernel,
    /// Counts for the metrics (bans, applies, per-set changes).
    pub tally: crate::metrics_tally::Tally,
    clock: Arc<dyn Clock>,
    /// The fleet whose outbox receives clients' changes of shared sets.
    pub fleet: Option<Arc<parapet_fleet::Fleet>>,
}

/// Where a change comes from, which decides what [`State::commit`] does
/// besides changing the state.
pub enum Origin<'a> {
    /// A client: the change is checked strictly, journaled, and mirrored
    /// into the kernel. `lsn` is raised to the record's position as soon
    /// as it is appended (also when the kernel mirror then fails: the
    /// change is made, and must be made durable).
    Client {
        /// The journal.
        journal: &'a Journal,
        /// The position the reply must wait for.
        lsn: &'a mut Option<Lsn>,
    },
    /// The journal or snapshot at start-up: already durable, accepted once
    /// (so no all-or-nothing undo log), and the kernel program is not
    /// loaded yet (attachments are remembered for
    /// [`Kernel::restore`]).
    Replay,
    /// Another node of the fleet: checked, journaled and mirrored as a
    /// client's change, but not published again (loop-free).
    Remote {
        /// The journal.
        journal: &'a Journal,
        /// The position to sync before acknowledging to the broker.
        lsn: &'a mut Option<Lsn>,
    },
}

/// What a committed change did, for the reply.
#[derive(Default)]
pub struct Committed {
    /// Elements added (new ones, not refreshed) or deleted.
    pub count: usize,
    /// The attachment made by [`Change::Attach`] from a client.
    pub attachment: Option<Attachment>,
}

pub(crate) fn invalid(msg: impl Into<String>) -> ErrorReply {
    ErrorReply::new(code::INVALID, msg)
}

pub(crate) fn set_err(e: SetError) -> ErrorReply {
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

pub(crate) fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// Turns the absolute expiries of [`Change::SetAdd`] into the set's
/// remaining lifetimes at `now` (`timeout: Some(0)` marks a permanent
/// element of a set with timeouts), in place: a record holds up to 64k
/// elements, and a request up to `MAX_ELEMS`.
fn to_lifetimes(elems: &mut [Element], now: u64, timeouts: bool) {
    for el in elems {
        match el.expires {
            Some(exp) if timeouts => el.expires = Some(exp - now),
            Some(_) => el.expires = None,
            None if timeouts => el.timeout = Some(0),
            None => {}
        }
    }
}

/// The inverse of [`to_lifetimes`], for the journal and the kernel.
fn to_expiries(elems: &mut [Element], now: u64) {
    for el in elems {
        el.expires = el.expires.map(|r| now + r);
        el.timeout = None;
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
            kernel: Kernel::default(),
            tally: Default::default(),
            clock,
            fleet: None,
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
        let mut total = 0;
        for n in &names {
            let Some(k) = self.sets.get_mut(n).map(|s| s.reap(now, budget)) else {
                continue;
            };
            if k > 0 {
                self.tally.set(n).expiries += k as u64;
            }
            total += k;
        }
        total
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

    pub(crate) fn dims(&self, name: &str) -> Result<Vec<KeyPart>, ErrorReply> {
        match self.sets.get(name) {
            Some(s) => Ok(s.key_dims().to_vec()),
            None => Err(ErrorReply::new(
                code::NO_SUCH_SET,
                format!("set `{name}` does not exist"),
            )),
        }
    }

    fn check_widths(&self, name: &str, widths: &[u8]) -> Result<(), String> {
        let dims = self.dims(name).map_err(|e| e.msg)?;
        if dims
            .iter()
            .map(|d| journal::dim_bytes(*d))
            .ne(widths.iter().copied())
        {
            return Err(format!(
                "set {name}: record key widths {widths:?} do not match the set's type"
            ));
        }
        Ok(())
    }

    /// Adds elements whose `expires` are set lifetimes ([`to_lifetimes`]);
    /// from a client all or nothing, returning the number of new elements.
    fn insert(&mut self, name: &str, els: &[Element], replay: bool) -> Result<usize, ErrorReply> {
        let now = self.now();
        let set = self.sets.get_mut(name).ok_or_else(|| {
            ErrorReply::new(code::NO_SUCH_SET, format!("set `{name}` does not exist"))
        })?;
        if replay {
            // One by one: what was journaled was accepted once, so replay
            // needs no undo log, which halves the hash probes of `add_many`.
            for el in els {
                set.add(el, now).map_err(set_err)?;
            }
            return Ok(0);
        }
        // `add_many` skips its undo log itself when the batch cannot fail
        // (single values with room for all of them in a growable hash).
        set.add_many(els, now).map_err(set_err)
    }

    /// Applies one change: to the state (for `apply` and `attach`, the
    /// kernel first: if it refuses, nothing changes), then, from a client,
    /// to the journal, then to the kernel's copy of the sets and, for
    /// `apply`, the swap of the active ruleset.
    pub fn commit(
        &mut self,
        mut change: Change,
        origin: &mut Origin,
    ) -> Result<Committed, ErrorReply> {
        let now = self.now();
        let replay = matches!(origin, Origin::Replay);
        let mut done = Committed::default();
        let mut dims: Vec<KeyPart> = Vec::new();
        match &mut change {
            Change::SetCreate { name, spec } => {
                if !self.create_set(name, spec, replay)? {
                    return Ok(done); // replayed over an identical set
                }
            }
            Change::SetDestroy { name } => {
                self.specs.remove(name.as_str());
                self.sets.destroy(name);
                self.tally.sets.remove(name.as_str());
            }
            Change::SetAdd { name, elems } => {
                dims = self.dims(name)?;
                let timeouts = self.sets.get(name).is_some_and(|s| s.desc().timeouts);
                elems.retain(|e| !matches!(e.expires, Some(exp) if exp <= now));
                to_lifetimes(elems, now, timeouts);
                done.count = self.insert(name, elems, replay)?;
                to_expiries(elems, now);
            }
            Change::SetDel { name, elems } => {
                dims = self.dims(name)?;
                let set = self.sets.get_mut(name).expect("checked");
                done.count = set.del_many(elems).map_err(set_err)?;
            }
            Change::SetFlush { name } => self.sets.flush(name).map_err(set_err)?,
            Change::Apply { compiled, .. } => {
                self.kernel
                    .apply(&compiled.ruleset, &compiled.compiled, &self.sets)?
            }
            Change::Attach { iface, hook, mode } => {
                if replay {
                    self.kernel.replay_attach(iface.clone(), *hook, *mode);
                } else {
                    done.attachment = Some(self.kernel.attach(iface, *hook, *mode)?);
                }
            }
            Change::Detach { iface, hook } => {
                if replay {
                    self.kernel.replay_detach(iface, *hook);
                } else {
                    self.kernel.detach(iface, Some(*hook))?;
                }
            }
        }
        if let Origin::Client { journal, lsn } | Origin::Remote { journal, lsn } = origin {
            match &change {
                Change::SetAdd { name, .. } => self.tally.set(name).inserts += done.count as u64,
                Change::SetDel { name, .. } => self.tally.set(name).deletes += done.count as u64,
                _ => {}
            }
            **lsn = Some(journal.append(|b| journal::encode(b, &change, &dims)));
        }
        if let (Origin::Client { .. }, Some(f)) = (&origin, &self.fleet) {
            crate::fleet::publish::publish(f, &self.specs, &change, &dims);
        }
        match change {
            Change::SetAdd { name, elems } => self.kernel.set_add(&name, &elems, now)?,
            Change::SetDel { name, elems } => self.kernel.set_del(&name, &elems)?,
            Change::SetFlush { name } => self.kernel.set_flush(&name)?,
            Change::Apply {
                name,
                text,
                compiled,
            } => self.install(name, text, compiled),
            _ => {}
        }
        Ok(done)
    }

    /// Replays one journal or snapshot record. Returns a problem to report
    /// when the record no longer applies (which replay then skips).
    pub fn replay(&mut self, rec: Record, loader: &dyn Loader) -> Result<(), String> {
        let change = match rec {
            Record::SetCreate { name, spec } => {
                let spec: SetSpec = serde_json::from_str(&spec)
                    .map_err(|e| format!("set {name}: bad spec: {e}"))?;
                Change::SetCreate { name, spec }
            }
            Record::SetDestroy { name } => Change::SetDestroy { name },
            Record::SetAdd {
                name,
                widths,
                elems,
            } => {
                self.check_widths(&name, &widths)?;
                Change::SetAdd { name, elems }
            }
            Record::SetDel {
                name,
                widths,
                elems,
            } => {
                self.check_widths(&name, &widths)?;
                Change::SetDel { name, elems }
            }
            Record::SetFlush { name } => Change::SetFlush { name },
            Record::Apply { name, format, text } => {
                let compiled = loader
                    .load(&name, &text, Some(&format))
                    .map_err(|e| format!("ruleset {name} no longer loads: {}", e.join("; ")))?;
                Change::Apply {
                    name,
                    text,
                    compiled,
                }
            }
            Record::Attach { iface, hook, mode } => {
                let (hook, mode) = from_bytes(hook, mode);
                Change::Attach { iface, hook, mode }
            }
            Record::Detach { iface, hook } => Change::Detach {
                iface,
                hook: from_bytes(hook, 0).0,
            },
        };
        self.commit(change, &mut Origin::Replay)
            .map(|_| ())
            .map_err(|e| e.msg)
    }

    fn install(&mut self, name: String, text: String, loaded: CompiledRuleset) {
        // Counters are indexed by rule id - 1; ids are positions in the file,
        // and rules of tables left to the kernel keep theirs without being
        // rules here, so size by the largest id, not the rule count.
        let n = loaded
            .ruleset
            .rules()
            .map(|r| r.id as usize)
            .max()
            .unwrap_or(0);
        self.active = Some(Active {
            name,
            format: loaded.format,
            text,
            ruleset: loaded.ruleset,
            counters: vec![Counters::default(); n],
            compiled: loaded.compiled,
        });
        self.generation += 1;
    }

    /// Writes the whole state as snapshot records: the changes that make
    /// it from nothing.
    pub fn snapshot(&self, emit: &mut journal::Emit) -> std::io::Result<()> {
        let now = self.now();
        let mut write = |change: Change, dims: &[KeyPart]| {
            emit(&|b: &mut Vec<u8>| journal::encode(b, &change, dims))
        };
        let mut names: Vec<&str> = self.sets.names();
        names.sort_unstable();
        for name in names {
            let spec = self.specs[name].clone();
            write(
                Change::SetCreate {
                    name: name.to_string(),
                    spec,
                },
                &[],
            )?;
            let set = self.sets.get(name).expect("listed");
            let dims = set.key_dims().to_vec();
            for chunk in set.elements(now).chunks(CHUNK) {
                let elems = chunk
                    .iter()
                    .map(|se| {
                        let mut el = se.element.clone();
                        el.expires = se.remaining.map(|r| now + r.max(1));
                        el
                    })
                    .collect();
                write(
                    Change::SetAdd {
                        name: name.to_string(),
                        elems,
                    },
                    &dims,
                )?;
            }
        }
        if let Some(a) = &self.active {
            let compiled = CompiledRuleset {
                ruleset: a.ruleset.clone(),
                format: a.format.clone(),
                compiled: a.compiled.clone(),
            };
            write(
                Change::Apply {
                    name: a.name.clone(),
                    text: a.text.clone(),
                    compiled,
                },
                &[],
            )?;
        }
        for (iface, hook, mode) in self.kernel.journaled() {
            write(Change::Attach { iface, hook, mode }, &[])?;
        }
        Ok(())
    }

    /// Validates a loaded ruleset against the state (every set it refers
    /// to must exist); errors name the rule's line.
    pub fn check_loaded(&self, name: &str, loaded: &CompiledRuleset) -> Result<(), Vec<String>> {
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

    /// Takes a freshly loaded BPF program and installs the active ruleset
    /// and its sets in it.
    pub fn kernel_adopt(&mut self, dp: parapet_dataplane::Dataplane) -> Result<(), ErrorReply> {
        let active = self.active.as_ref().map(|a| (&*a.ruleset, &a.compiled[..]));
        self.kernel.adopt(dp, active, &self.sets)
    }

    /// After recovery: loads the program and re-attaches what the journal
    /// names (see [`crate::kernel::Kernel::restore`]); returns log lines.
    pub fn kernel_restore(&mut self) -> Vec<String> {
        let active = self.active.as_ref().map(|a| (&*a.ruleset, &a.compiled[..]));
        self.kernel.restore(active, &self.sets)
    }
}
