//! CrowdSec decisions as a source (`parapetd --crowdsec URL
//! --crowdsec-key-file F`; `docs/fleet.md`, section CrowdSec).
//!
//! A thread polls the Local API's `/v1/decisions/stream` — `startup=true`
//! first and after any error, `startup=false` (deltas) every interval,
//! in full again every `--crowdsec-resync` seconds (a safety net: the
//! real nftables bouncer, on the same deltas, was seen to stay 50 of
//! 10,000 decisions short, `docs/benchmarks.md` section 8), and at once
//! after a burst of bulk-inserted decisions ends ([`Burst`]: the deltas
//! miss some of an import) —
//! and commits `ban` decisions as typed [`Change`]s through
//! [`State::commit`] like a client's (journaled, mirrored into the kernel,
//! published to the fleet when the set is shared): scope `Ip` into
//! `parapet-ban4`/`parapet-ban6`, scope `Range` into the interval sets
//! `parapet-crowdsec-net4`/`-net6`, each with the decision's remaining
//! duration as its timeout.
//!
//! Which elements CrowdSec put in is kept per decision id ([`Owned`]) and
//! written to `STATE_DIR/crowdsec-owned.json` after each commit, so a
//! restart's `startup=true` list is diffed against it: only what changed
//! is added or removed (no unban/reban storm). Crash windows fail closed:
//! an element committed but not yet recorded stays until its expiry.

use crate::change::{Change, SetSpec};
use crate::crowdsec_http::{self as http, StreamBody};
use crate::shared::Shared;
use crate::state::{Origin, State, BAN4, BAN6};
use parapet_sets::{parse_element, Element};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub mod source;
pub mod tls;
pub use source::*;

/// Starts the source's thread when `--crowdsec` was given.
pub(crate) fn start(shared: &Arc<Shared>) -> std::io::Result<Option<JoinHandle<()>>> {
    let Some(src) = shared.crowdsec.clone() else {
        return Ok(None);
    };
    let s = shared.clone();
    std::thread::Builder::new()
        .name("crowdsec".into())
        .spawn(move || run(&s, &src))
        .map(Some)
}

/// `stats.crowdsec`: null without `--crowdsec`.
pub(crate) fn stats(shared: &Shared) -> Value {
    let Some(s) = &shared.crowdsec else {
        return Value::Null;
    };
    let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
    json!({
        "url": s.config.url,
        "connected": s.connected.load(Ordering::Relaxed),
        "polls": n(&s.polls),
        "settles": n(&s.settles),
        "errors": n(&s.errors),
        "decisions": n(&s.tracked),
        "added": n(&s.added),
        "deleted": n(&s.deleted),
        "ignored": n(&s.ignored),
        "bad_decisions": n(&s.bad_decisions),
        "last_poll_ms": n(&s.last_poll_ms),
        "last_error": s.last_error.lock().unwrap().clone(),
    })
}

fn run(shared: &Shared, src: &Source) {
    let dir = &shared.config.state_dir;
    let mut owned = Owned::load(dir).unwrap_or_else(|e| {
        // Fail closed: what the previous run added stays until it expires.
        src.error(format!("ownership file unreadable, starting empty: {e}"));
        Owned::default()
    });
    let mut startup = true;
    let mut last_full = Instant::now();
    let mut burst = Burst::default();
    while !src.stop.load(Ordering::SeqCst) && !shared.shutdown.load(Ordering::SeqCst) {
        let t0 = Instant::now();
        if src.config.resync.is_some_and(|r| last_full.elapsed() >= r) {
            startup = true;
        }
        if startup {
            last_full = t0;
        }
        let polled = poll(shared, src, &mut owned, startup);
        // A full list's decoding and diff allocate tens of MB that are
        // free again now; glibc keeps freed heap mapped (RSS) unless told.
        #[cfg(target_env = "gnu")]
        // SAFETY: malloc_trim only releases free heap pages to the kernel.
        unsafe {
            libc::malloc_trim(0);
        }
        match polled {
            Ok(changes) => {
                // A delta that ends a burst of bulk inserts is followed
                // at once by a full poll: the LAPI misses some of them.
                startup = burst.ended(startup, changes);
                if startup {
                    src.settles.fetch_add(1, Ordering::Relaxed);
                }
                src.connected.store(true, Ordering::Relaxed);
            }
            Err(e) => {
                src.error(e);
                // A lost delta cannot be replayed: resynchronise in full.
                startup = true;
            }
        }
        src.polls.fetch_add(1, Ordering::Relaxed);
        src.last_poll_ms
            .store(t0.elapsed().as_millis() as u64, Ordering::Relaxed);
        let wake = Instant::now() + src.config.interval;
        while Instant::now() < wake && !src.stop.load(Ordering::SeqCst) {
            if shared.shutdown.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Decisions in consecutive non-empty delta polls that make the first
/// empty one after them call for a full poll. A `cscli decisions import`
/// or a blocklist pull inserts thousands at once, and the LAPI's deltas
/// miss some of a bulk insert (benchmarks.md §8, §67: up to the next
/// `--crowdsec-resync`, 7–14 s late at 100k); single decisions, as
/// scenarios make them, are below it and cost no full poll.
pub(crate) const SETTLE_MIN_CHANGES: u64 = 100;

/// The delta polls since the last full one: how many decisions the
/// current run of non-empty deltas brought.
#[derive(Default)]
pub(crate) struct Burst {
    changes: u64,
}

impl Burst {
    /// Records a successful poll (`full`: it was a full one) that brought
    /// `changes` decisions; returns whether the next poll is a full one:
    /// after a burst of at least [`SETTLE_MIN_CHANGES`] that this empty
    /// delta ended. At most one full poll per burst (the full poll starts
    /// the count again), so a steady stream costs no more than before.
    pub(crate) fn ended(&mut self, full: bool, changes: u64) -> bool {
        if full {
            self.changes = 0;
            return false;
        }
        if changes > 0 {
            self.changes = self.changes.saturating_add(changes);
            return false;
        }
        std::mem::take(&mut self.changes) >= SETTLE_MIN_CHANGES
    }
}

/// One poll; returns how many decisions (new and deleted) it brought.
fn poll(shared: &Shared, src: &Source, owned: &mut Owned, startup: bool) -> Result<u64, String> {
    let c = &src.config;
    let path = format!("/v1/decisions/stream?startup={startup}");
    // Decoded as it arrives: a full list of 100k decisions is about 30 MB
    // of JSON, never held as text.
    let body: StreamBody = http::get(&c.endpoint, &path, &c.key, c.tls.as_ref(), c.limits, |r| {
        serde_json::from_reader(std::io::BufReader::with_capacity(64 << 10, r))
            .map_err(|e| format!("malformed stream response: {e}"))
    })?;
    let brought = (body.new.len() + body.deleted.len()) as u64;
    let now = shared.state.lock().unwrap().now();
    // Planned beside the tracked state: a commit that fails leaves it as
    // it was, and the next (full) poll retries.
    let (next, plan) = owned.updated(&body, startup, now, c.max_decisions)?;
    // The decoded response is not needed any more: freed before the
    // commit allocates (the peak of a full poll).
    drop(body);
    src.ignored.fetch_add(plan.ignored, Ordering::Relaxed);
    src.bad_decisions
        .fetch_add(plan.bad.len() as u64, Ordering::Relaxed);
    if let Some(b) = plan.bad.first() {
        src.error(format!(
            "{} bad decisions skipped, first: {b}",
            plan.bad.len()
        ));
    }
    if !plan.adds.is_empty() || !plan.dels.is_empty() {
        let (a, d) = commit(shared, &plan)?;
        src.added.fetch_add(a, Ordering::Relaxed);
        src.deleted.fetch_add(d, Ordering::Relaxed);
        next.save(&shared.config.state_dir)?;
    }
    *owned = next;
    src.tracked.store(owned.len() as u64, Ordering::Relaxed);
    Ok(brought)
}

/// Commits a plan as a client's changes, then waits for the journal.
fn commit(shared: &Shared, plan: &Plan) -> Result<(u64, u64), String> {
    let (mut added, mut deleted) = (0, 0);
    let mut lsn = None;
    {
        let mut st = shared.state.lock().unwrap();
        if let Some(e) = shared.journal.failed() {
            return Err(format!("journal: {e}"));
        }
        let origin = &mut Origin::Client {
            journal: &shared.journal,
            lsn: &mut lsn,
        };
        for (&name, texts) in &plan.dels {
            if st.sets.get(name).is_none() {
                continue;
            }
            let elems = parse(&st, name, texts.iter().map(|t| (t.as_str(), 0)))?;
            let change = Change::SetDel {
                name: name.into(),
                elems,
            };
            let n = st.commit(change, origin).map_err(|e| e.msg)?.count as u64;
            st.tally.unbans += n;
            deleted += n;
        }
        for (&name, items) in &plan.adds {
            if st.sets.get(name).is_none() {
                let create = Change::SetCreate {
                    name: name.into(),
                    spec: spec(name),
                };
                st.commit(create, origin).map_err(|e| e.msg)?;
            }
            let elems = parse(&st, name, items.iter().map(|(t, e)| (t.as_str(), *e)))?;
            let n = st.commit(
                Change::SetAdd {
                    name: name.into(),
                    elems,
                },
                origin,
            );
            let n = n.map_err(|e| e.msg)?.count as u64;
            st.tally.bans += n;
            added += n;
        }
    }
    if let Some(l) = lsn {
        shared.journal.sync(l)?;
    }
    Ok((added, deleted))
}

fn parse<'a>(
    st: &State,
    name: &str,
    items: impl Iterator<Item = (&'a str, u64)>,
) -> Result<Vec<Element>, String> {
    let dims = st.dims(name).map_err(|e| e.msg)?;
    items
        .map(|(t, exp)| {
            let mut el = parse_element(&dims, t).map_err(|e| format!("{name}: `{t}`: {e}"))?;
            el.expires = (exp != 0).then_some(exp);
            Ok(el)
        })
        .collect()
}

/// The spec of a set the source creates: the ban sets as `ban` makes them,
/// the range sets as interval sets (shared with the fleet like the ban sets).
fn spec(name: &str) -> SetSpec {
    if name == BAN4 || name == BAN6 {
        return crate::change::ban_spec(name);
    }
    SetSpec {
        typ: if name == NET4 {
            "ipv4_addr"
        } else {
            "ipv6_addr"
        }
        .into(),
        family: None,
        flags: vec!["interval".into(), "timeout".into(), "shared".into()],
        timeout: None,
        size: None,
        policy: None,
    }
}

#[cfg(test)]
mod tests {
    use super::{Burst, SETTLE_MIN_CHANGES};

    #[test]
    fn a_full_poll_follows_a_burst_once_it_ends() {
        let mut b = Burst::default();
        assert!(!b.ended(true, 5_000), "a full poll starts the count");
        assert!(!b.ended(false, 0), "nothing happened");
        assert!(!b.ended(false, SETTLE_MIN_CHANGES / 2));
        assert!(!b.ended(false, SETTLE_MIN_CHANGES / 2), "still going");
        assert!(b.ended(false, 0), "the burst ended");
        // the full poll that follows, then quiet: no second one
        assert!(!b.ended(true, 0));
        assert!(!b.ended(false, 0));
    }

    #[test]
    fn single_decisions_cost_no_full_poll() {
        let mut b = Burst::default();
        for _ in 0..1000 {
            assert!(!b.ended(false, 1));
            assert!(!b.ended(false, 0));
        }
        // a burst the full poll interrupted (`--crowdsec-resync`) starts over
        assert!(!b.ended(false, SETTLE_MIN_CHANGES));
        assert!(!b.ended(true, 0));
        assert!(!b.ended(false, 0));
    }
}
