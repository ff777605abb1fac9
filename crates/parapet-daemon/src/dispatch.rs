//! One request line to one reply: the line becomes a [`Command`]; the
//! commands that need work outside the state lock (`apply` compiles,
//! `attach` loads the program) and `stats` run here, the others in
//! [`State::execute`] under the lock.

use crate::change::Change;
use crate::command::Command;
use crate::journal::Lsn;
use crate::kernel::{hook_name, mode_name, Kernel};
use crate::proto::{code, parse_request, ErrorReply, Outcome};
use crate::shared::Shared;
use crate::state::{Origin, State};
use parapet_dataplane::{AttachPoint, Mode};
use serde_json::{json, Map, Value};
use std::sync::atomic::Ordering;

/// Most elements one `set.add`/`set.del`/`ban` request may carry (bounds
/// the per-request working memory; clients split bigger batches).
pub const MAX_ELEMS: usize = 1 << 18;

/// Runs one request line; returns the reply's id, the outcome, and the
/// journal position to sync before replying.
pub(crate) fn handle_line(shared: &Shared, line: &[u8]) -> (Option<u64>, Outcome, Option<Lsn>) {
    let req = match parse_request(line) {
        Ok(r) => r,
        Err((id, e)) => return (id, Err(e), None),
    };
    let id = req.id;
    let cmd = match Command::try_from(req) {
        Ok(c) => c,
        Err(e) => return (id, Err(e), None),
    };
    // After a journal write failure nothing more is changed: a change that
    // cannot be made durable must not be visible either.
    if cmd.mutates() {
        if let Some(e) = shared.journal.failed() {
            return (id, Err(ErrorReply::new(code::IO, e)), None);
        }
    }
    if cmd.elem_count() > MAX_ELEMS {
        return (
            id,
            Err(ErrorReply::new(
                code::INVALID,
                format!("more than {MAX_ELEMS} elements in one request; split it"),
            )),
            None,
        );
    }
    let (outcome, lsn) = match cmd {
        Command::Apply {
            rules,
            name,
            format,
            check,
        } => match apply(shared, name, rules, format.as_deref(), check) {
            Ok((m, lsn)) => (Ok(m), lsn),
            Err(e) => (Err(e), None),
        },
        Command::Stats => (Ok(stats(shared)), None),
        Command::Attach { iface, hook, mode } => attach(shared, iface, hook, mode),
        Command::Detach { iface, hook } => detach(shared, iface, hook),
        cmd => {
            let mut st = shared.state.lock().unwrap();
            st.execute(cmd, &shared.journal, &*shared.loader)
        }
    };
    (id, outcome, lsn)
}

fn apply_error(errs: Vec<String>) -> ErrorReply {
    let mut e = ErrorReply::new(code::APPLY, errs.first().cloned().unwrap_or_default());
    if errs.len() > 1 {
        e.msg = format!("{} (and {} more errors)", e.msg, errs.len() - 1);
    }
    e.detail = Some(("errors", Value::from(errs)));
    e
}

/// `apply`: compiles aside (no lock held), then validates and swaps under
/// the lock. Returns the position to sync unless only checked.
fn apply(
    shared: &Shared,
    name: String,
    text: String,
    format: Option<&str>,
    check: bool,
) -> Result<(Map<String, Value>, Option<Lsn>), ErrorReply> {
    let mut timer = crate::metrics::ApplyTimer::start(shared, check);
    let compiled = shared
        .loader
        .load(&name, &text, format)
        .map_err(apply_error)?;
    let mut st = shared.state.lock().unwrap();
    if !check && !shared.config.test_apply_hold.is_zero() {
        std::thread::sleep(shared.config.test_apply_hold);
    }
    st.check_loaded(&name, &compiled).map_err(apply_error)?;
    let rules = compiled.ruleset.rule_count();
    let left = left_to_kernel(&compiled.ruleset);
    if check {
        st.kernel.check(&compiled.ruleset, &compiled.compiled)?;
        return Ok((
            json!({"rules": rules, "format": compiled.format, "checked": true, "left_to_kernel": left})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            None,
        ));
    }
    let warnings = st.kernel.warnings(&compiled.ruleset, &compiled.compiled);
    let mut lsn = None;
    let change = Change::Apply {
        name,
        text,
        compiled,
    };
    st.commit(
        change,
        &mut Origin::Client {
            journal: &shared.journal,
            lsn: &mut lsn,
        },
    )?;
    timer.succeeded(&mut st.tally);
    let mut m = Map::new();
    m.insert("rules".into(), Value::from(rules));
    m.insert("generation".into(), Value::from(st.generation));
    m.insert("left_to_kernel".into(), left);
    if st.kernel.nf_attached() {
        // which chain now runs at which netfilter hook
        m.insert("hooks".into(), st.kernel.attachments_json());
    }
    if !warnings.is_empty() {
        m.insert("warnings".into(), Value::from(warnings));
    }
    Ok((m, lsn))
}

/// `[{"table":"nat","family":"ip","chains":[{"chain":"POSTROUTING","rules":1}]}]`:
/// the tables the ruleset leaves to the kernel's netfilter, untouched.
fn left_to_kernel(rs: &parapet_model::Ruleset) -> Value {
    rs.left_to_kernel
        .iter()
        .map(|l| {
            let chains: Vec<Value> = l
                .chains
                .iter()
                .map(|(c, n)| json!({"chain": c, "rules": n}))
                .collect();
            // `describe`: the summary line (nft objects and other families'
            // tables have no chains to say what they are).
            json!({"table": l.table, "family": l.family.nft_name(), "chains": chains, "describe": l.describe()})
        })
        .collect()
}

/// What a failed load of a program at its first use is reported as.
const LATE_WHAT: &str = "loading the eBPF program this attach runs";

/// `attach`: loads the program on first use (outside the state lock: it
/// takes seconds of verifier time), installs the active ruleset in it,
/// attaches, and journals the attachment so a restart makes it again.
fn attach(shared: &Shared, iface: String, hook: AttachPoint, mode: Mode) -> (Outcome, Option<Lsn>) {
    let config = {
        let st = shared.state.lock().unwrap();
        (!st.kernel.loaded()).then(|| st.kernel.config.clone())
    };
    if let Some(config) = config {
        // what this attach runs; the other programs load at their first use
        let want = Kernel::programs_for(&config, hook);
        let loaded = Kernel::load(&config, want)
            .and_then(|dp| shared.state.lock().unwrap().kernel_adopt(dp));
        if let Err(e) = loaded {
            return (Err(e), None);
        }
    }
    // A program the first attach did not need is verified here, outside
    // the state lock too; at most twice (under the `auto` placement the
    // tc placement's programs follow a netfilter program the kernel
    // refused).
    for _ in 0..2 {
        let plan = shared.state.lock().unwrap().kernel.late_load_plan(hook);
        let Some((loader, missing)) = plan else { break };
        let added = loader(missing).and_then(|late| {
            let mut st = shared.state.lock().unwrap();
            match st.kernel.dp.as_mut() {
                Some(dp) => dp.add_late_programs(late),
                None => Ok(()),
            }
        });
        if let Err(e) = added {
            return (Err(crate::kernel::dp_err(LATE_WHAT, e)), None);
        }
    }
    let mut st = shared.state.lock().unwrap();
    let mut lsn = None;
    let change = Change::Attach {
        iface: iface.clone(),
        hook,
        mode,
    };
    let origin = &mut Origin::Client {
        journal: &shared.journal,
        lsn: &mut lsn,
    };
    let a = match st.commit(change, origin) {
        Ok(done) => done.attachment.expect("a client's attach makes one"),
        Err(e) => return (Err(e), lsn),
    };
    let mut m = Map::new();
    if hook == AttachPoint::Netfilter {
        m.insert("hooks".into(), st.kernel.attachments_json());
        if let Some(a) = &st.active {
            let w = st.kernel.warnings(&a.ruleset, &a.compiled);
            if !w.is_empty() {
                m.insert("warnings".into(), Value::from(w));
            }
        }
    } else {
        m.insert("iface".into(), Value::from(iface));
    }
    m.insert("hook".into(), Value::from(hook_name(hook)));
    if let Some(actual) = a.actual {
        m.insert("mode".into(), Value::from(mode_name(actual)));
    }
    if let Some(n) = a.note {
        m.insert("note".into(), Value::from(n));
    }
    if st.active.is_none() {
        m.insert(
            "warning".into(),
            Value::from("no ruleset is applied: every packet passes until one is"),
        );
    }
    (Ok(m), lsn)
}

/// `detach`: from `iface` at `hook`, or at every hook when none is given;
/// one journaled change per hook.
fn detach(shared: &Shared, iface: String, hook: Option<AttachPoint>) -> (Outcome, Option<Lsn>) {
    let mut st = shared.state.lock().unwrap();
    let hooks: Vec<AttachPoint> = st
        .kernel
        .attachments()
        .iter()
        .filter(|a| a.iface == iface && hook.map_or(true, |h| h == a.hook))
        .map(|a| a.hook)
        .collect();
    if hooks.is_empty() {
        return (
            Err(ErrorReply::new(
                code::INVALID,
                format!("not attached to {iface}"),
            )),
            None,
        );
    }
    let mut lsn = None;
    for hook in &hooks {
        let change = Change::Detach {
            iface: iface.clone(),
            hook: *hook,
        };
        let origin = &mut Origin::Client {
            journal: &shared.journal,
            lsn: &mut lsn,
        };
        if let Err(e) = st.commit(change, origin) {
            return (Err(e), lsn);
        }
    }
    let mut m = Map::new();
    m.insert("detached".into(), Value::from(hooks.len()));
    (Ok(m), lsn)
}

/// `apply` of a file (start-up `--config`, SIGHUP), synced before it returns.
pub(crate) fn do_apply(
    shared: &Shared,
    name: &str,
    text: &str,
    format: Option<&str>,
    check: bool,
) -> Result<Map<String, Value>, ErrorReply> {
    let (m, lsn) = apply(shared, name.to_string(), text.to_string(), format, check)?;
    if let Some(l) = lsn {
        shared
            .journal
            .sync(l)
            .map_err(|e| ErrorReply::new(code::IO, e))?;
    }
    Ok(m)
}

fn stats(shared: &Shared) -> Map<String, Value> {
    let st = shared.state.lock().unwrap();
    let s = &shared.stats;
    let names = st.sets.names();
    let memory: usize = names
        .iter()
        .filter_map(|n| st.sets.get(n))
        .map(|s| s.memory_bytes())
        .sum();
    let v = json!({
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_s": shared.started.elapsed().as_secs(),
        "generation": st.generation,
        "rules": st.active.as_ref().map_or(0, |a| a.ruleset.rule_count()),
        "ruleset": st.active.as_ref().map(|a| a.name.clone()),
        "sets": names.len(),
        "elements": st.element_count(),
        "set_memory_bytes": memory,
        "requests": s.requests.load(Ordering::Relaxed),
        "errors": s.errors.load(Ordering::Relaxed),
        "clients": s.clients.load(Ordering::Relaxed),
        "connections": s.connections.load(Ordering::Relaxed),
        "journal_bytes": shared.journal.bytes(),
        "journal_epoch": shared.journal.epoch(),
        "journal_syncs": s.syncs.load(Ordering::Relaxed),
        "snapshots": s.snapshots.load(Ordering::Relaxed),
        "fsync": shared.config.fsync,
        "bans": st.tally.bans,
        "unbans": st.tally.unbans,
        "dataplane": st.kernel.stats(),
        "fleet": crate::fleet::stats(shared),
        "crowdsec": crate::crowdsec::stats(shared),
        "counters": kernel_counters(&st),
        "recovery": {
            "snapshot_records": shared.recovery.snapshot_records,
            "journal_records": shared.recovery.journal_records,
            "problems": shared.recovery.problems,
            "millis": shared.recovery.millis,
            "cpu_millis": shared.recovery.cpu_millis,
        },
    });
    v.as_object().cloned().unwrap_or_default()
}

/// The kernel's per-rule counters of rules that counted something (rule 0
/// is the policy); `null` when the program is not loaded.
fn kernel_counters(st: &State) -> Value {
    let n = st.active.as_ref().map_or(0, |a| a.counters.len());
    match st.kernel.counters(n) {
        None => Value::Null,
        Some(cs) => Value::from(
            cs.iter()
                .enumerate()
                .filter(|(_, c)| c.packets > 0)
                .map(|(i, c)| json!({"rule": i, "packets": c.packets, "bytes": c.bytes}))
                .collect::<Vec<_>>(),
        ),
    }
}
