//! CrowdSec decisions as a source (`parapetd --crowdsec URL
//! --crowdsec-key-file F`; `docs/fleet.md`, section CrowdSec).
//!
//! A thread polls the Local API's `/v1/decisions/stream` — `startup=true`
//! first and after any error, `startup=false` (deltas) every interval,
//! in full again every `--crowdsec-resync` seconds (a safety net: the
//! real nftables bouncer, on the same deltas, was seen to stay 50 of
//! 10,000 decisions short, `docs/benchmarks.md` section 7) —
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
use crate::crowdsec_http::{self as http, Decision, Endpoint, Limits, StreamBody};
use crate::shared::Shared;
use crate::state::{Origin, State, BAN4, BAN6};
use parapet_sets::{parse_element, Element};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Interval set of CrowdSec's IPv4 `Range` decisions.
pub const NET4: &str = "parapet-crowdsec-net4";
/// Interval set of CrowdSec's IPv6 `Range` decisions.
pub const NET6: &str = "parapet-crowdsec-net6";
const OWNED_FILE: &str = "crowdsec-owned.json";
/// Expiries closer than this are the same decision seen twice (durations
/// are relative to the LAPI's clock at the response).
const SAME_EXPIRY_MS: u64 = 5_000;

/// `parapetd`'s CrowdSec flags.
#[derive(clap::Args, Debug, Clone)]
pub struct CrowdsecArgs {
    /// Enforce the ban decisions of a CrowdSec Local API:
    /// http://HOST:PORT (plain HTTP; loopback in the common case).
    #[arg(long, value_name = "URL", requires = "crowdsec_key_file")]
    pub crowdsec: Option<String>,
    /// CrowdSec: file holding the bouncer API key (`cscli bouncers add`).
    #[arg(long, value_name = "FILE")]
    pub crowdsec_key_file: Option<PathBuf>,
    /// CrowdSec: seconds between delta polls.
    #[arg(long, default_value_t = 10, value_name = "S")]
    pub crowdsec_interval: u64,
    /// CrowdSec: seconds between full polls (`startup=true`, diffed
    /// against what is enforced), which repair any delta the LAPI missed;
    /// 0 = only at start and after errors.
    #[arg(long, default_value_t = 300, value_name = "S")]
    pub crowdsec_resync: u64,
    /// CrowdSec: most decisions tracked; a response that would exceed it is
    /// rejected (counted, enforcement unchanged).
    #[arg(long, default_value_t = 1_000_000, value_name = "N")]
    pub crowdsec_max_decisions: usize,
    /// CrowdSec: largest response, MiB.
    #[arg(long, default_value_t = 256, value_name = "MIB")]
    pub crowdsec_max_mib: u64,
    /// CrowdSec: connect and read timeout, seconds.
    #[arg(long, default_value_t = 30, value_name = "S")]
    pub crowdsec_timeout: u64,
}

/// The source's settings.
#[derive(Clone, Debug)]
pub struct CrowdsecConfig {
    /// The URL as given.
    pub url: String,
    endpoint: Endpoint,
    key: String,
    interval: Duration,
    resync: Option<Duration>,
    max_decisions: usize,
    limits: Limits,
}

impl CrowdsecArgs {
    /// The settings, if `--crowdsec` was given (reads the key file).
    pub fn config(&self) -> Result<Option<CrowdsecConfig>, String> {
        let Some(url) = &self.crowdsec else {
            return Ok(None);
        };
        let endpoint = Endpoint::parse(url)?;
        let p = self
            .crowdsec_key_file
            .as_ref()
            .ok_or("--crowdsec needs --crowdsec-key-file")?;
        let key = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
        let key = key.trim().to_string();
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "{}:1:1: expected one API key (printable, no spaces)",
                p.display()
            ));
        }
        Ok(Some(CrowdsecConfig {
            url: url.clone(),
            endpoint,
            key,
            interval: Duration::from_secs(self.crowdsec_interval.max(1)),
            resync: (self.crowdsec_resync > 0).then(|| Duration::from_secs(self.crowdsec_resync)),
            max_decisions: self.crowdsec_max_decisions.max(1),
            limits: Limits {
                timeout: Duration::from_secs(self.crowdsec_timeout.max(1)),
                max_bytes: self.crowdsec_max_mib.max(1) << 20,
            },
        }))
    }
}

/// What one decision is enforced as.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Target {
    /// Set name.
    pub set: &'static str,
    /// Canonical element text.
    pub elem: String,
}

/// Maps a decision to its set element: `Ok(None)` for what parapet does
/// not enforce (other types and scopes), `Err` for a bad value.
pub fn target(d: &Decision) -> Result<Option<Target>, String> {
    if !d.typ.eq_ignore_ascii_case("ban") {
        return Ok(None);
    }
    let v = d.value.trim();
    let (addr, len) = match d.scope.to_ascii_lowercase().as_str() {
        "ip" => (v, None),
        "range" => {
            let (a, l) = v
                .split_once('/')
                .ok_or_else(|| format!("range `{v}` without /LEN"))?;
            (
                a,
                Some(
                    l.parse::<u8>()
                        .map_err(|_| format!("range `{v}`: bad length"))?,
                ),
            )
        }
        _ => return Ok(None),
    };
    let ip: IpAddr = addr
        .parse()
        .map_err(|_| format!("bad address `{}`", clip(v)))?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let len = len.unwrap_or(max);
    if len > max {
        return Err(format!("range `{v}`: length over {max}"));
    }
    let net = mask(ip, len);
    Ok(Some(match (net, len == max) {
        (IpAddr::V4(a), true) => Target {
            set: BAN4,
            elem: a.to_string(),
        },
        (IpAddr::V6(a), true) => Target {
            set: BAN6,
            elem: a.to_string(),
        },
        (IpAddr::V4(a), false) => Target {
            set: NET4,
            elem: format!("{a}/{len}"),
        },
        (IpAddr::V6(a), false) => Target {
            set: NET6,
            elem: format!("{a}/{len}"),
        },
    }))
}

fn mask(ip: IpAddr, len: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - len as u32).unwrap_or(0);
            IpAddr::V4((u32::from(a) & m).into())
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - len as u32).unwrap_or(0);
            IpAddr::V6((u128::from(a) & m).into())
        }
    }
}

fn clip(s: &str) -> String {
    s.chars().take(80).collect()
}

/// The decisions CrowdSec has in force here: id → element and absolute
/// expiry (Unix ms).
#[derive(Default, Debug, Clone)]
pub struct Owned {
    by_id: HashMap<i64, (Target, u64)>,
}

/// What a stream response changes: per set, elements to add (with
/// expiry) and to delete.
#[derive(Default, Debug)]
pub struct Plan {
    /// Set → (element, expiry).
    pub adds: BTreeMap<&'static str, Vec<(String, u64)>>,
    /// Set → elements.
    pub dels: BTreeMap<&'static str, Vec<String>>,
    /// Decisions parapet does not enforce (not `ban`, other scopes).
    pub ignored: u64,
    /// Decisions with a bad value or duration (skipped).
    pub bad: Vec<String>,
}

impl Owned {
    /// Decisions tracked.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether none is tracked.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Each element's latest expiry.
    fn elements(&self) -> HashMap<&Target, u64> {
        let mut m: HashMap<&Target, u64> = HashMap::with_capacity(self.by_id.len());
        for (t, exp) in self.by_id.values() {
            let e = m.entry(t).or_insert(0);
            *e = (*e).max(*exp);
        }
        m
    }

    /// Takes in one response (`startup`: the full list, replacing what is
    /// tracked) and returns the element changes. A response that would
    /// track more than `max` decisions is refused whole, before any change.
    pub fn update(
        &mut self,
        body: &StreamBody,
        startup: bool,
        now: u64,
        max: usize,
    ) -> Result<Plan, String> {
        let base = if startup { 0 } else { self.by_id.len() };
        if base.saturating_add(body.new.len()) > max {
            return Err(format!(
                "{} decisions would exceed --crowdsec-max-decisions {max}",
                base + body.new.len()
            ));
        }
        let mut plan = Plan::default();
        let before: HashMap<Target, u64> = self
            .elements()
            .into_iter()
            .map(|(t, e)| (t.clone(), e))
            .collect();
        if startup {
            self.by_id.clear();
        } else {
            for d in &body.deleted {
                self.by_id.remove(&d.id);
            }
        }
        for d in &body.new {
            let t = match target(d) {
                Ok(Some(t)) => t,
                Ok(None) => {
                    plan.ignored += 1;
                    continue;
                }
                Err(e) => {
                    plan.bad.push(format!("decision {}: {e}", d.id));
                    continue;
                }
            };
            let ms = match http::go_duration_ms(&d.duration) {
                Ok(ms) => ms,
                Err(e) => {
                    plan.bad.push(format!("decision {}: {e}", d.id));
                    continue;
                }
            };
            if ms > 0 {
                self.by_id.insert(d.id, (t, now.saturating_add(ms as u64)));
            }
        }
        self.by_id.retain(|_, (_, exp)| *exp > now);
        let after = self.elements();
        for (t, exp) in &after {
            if before
                .get(*t)
                .map_or(true, |b| b.abs_diff(*exp) > SAME_EXPIRY_MS)
            {
                plan.adds
                    .entry(t.set)
                    .or_default()
                    .push((t.elem.clone(), *exp));
            }
        }
        for t in before.keys() {
            if !after.contains_key(t) {
                plan.dels.entry(t.set).or_default().push(t.elem.clone());
            }
        }
        Ok(plan)
    }

    /// Reads the ownership file (missing = nothing owned).
    pub fn load(dir: &Path) -> Result<Owned, String> {
        let p = dir.join(OWNED_FILE);
        let text = match std::fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Owned::default()),
            Err(e) => return Err(format!("{}: {e}", p.display())),
        };
        let rows: Vec<(i64, String, String, u64)> =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?;
        let mut o = Owned::default();
        for (id, set, elem, exp) in rows {
            let set = [BAN4, BAN6, NET4, NET6]
                .into_iter()
                .find(|s| *s == set)
                .ok_or_else(|| format!("{}: unknown set `{set}`", p.display()))?;
            o.by_id.insert(id, (Target { set, elem }, exp));
        }
        Ok(o)
    }

    /// Writes the ownership file atomically (temporary file, fsync, rename).
    pub fn save(&self, dir: &Path) -> Result<(), String> {
        let rows: Vec<(i64, &str, &str, u64)> = self
            .by_id
            .iter()
            .map(|(id, (t, exp))| (*id, t.set, t.elem.as_str(), *exp))
            .collect();
        let p = dir.join(OWNED_FILE);
        let tmp = dir.join(format!("{OWNED_FILE}.tmp"));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            serde_json::to_writer(std::io::BufWriter::new(&mut f), &rows)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &p)
        };
        write().map_err(|e| format!("{}: {e}", p.display()))
    }
}

/// The running source: settings, counters and the stop flag.
pub struct Source {
    /// Settings.
    pub config: CrowdsecConfig,
    polls: AtomicU64,
    errors: AtomicU64,
    added: AtomicU64,
    deleted: AtomicU64,
    ignored: AtomicU64,
    bad_decisions: AtomicU64,
    tracked: AtomicU64,
    last_poll_ms: AtomicU64,
    connected: AtomicBool,
    last_error: Mutex<Option<String>>,
    stop: AtomicBool,
}

impl Source {
    /// A source not yet started.
    pub fn new(config: CrowdsecConfig) -> Arc<Source> {
        Arc::new(Source {
            config,
            polls: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            added: AtomicU64::new(0),
            deleted: AtomicU64::new(0),
            ignored: AtomicU64::new(0),
            bad_decisions: AtomicU64::new(0),
            tracked: AtomicU64::new(0),
            last_poll_ms: AtomicU64::new(0),
            connected: AtomicBool::new(false),
            last_error: Mutex::new(None),
            stop: AtomicBool::new(false),
        })
    }

    /// Asks the thread to stop (it notices within 100 ms, or after the
    /// request in flight, bounded by the timeout).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    fn error(&self, e: String) {
        eprintln!("parapetd: crowdsec: {e}");
        self.errors.fetch_add(1, Ordering::Relaxed);
        self.connected.store(false, Ordering::Relaxed);
        *self.last_error.lock().unwrap() = Some(e);
    }
}

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
    while !src.stop.load(Ordering::SeqCst) && !shared.shutdown.load(Ordering::SeqCst) {
        let t0 = Instant::now();
        if src.config.resync.is_some_and(|r| last_full.elapsed() >= r) {
            startup = true;
        }
        if startup {
            last_full = t0;
        }
        match poll(shared, src, &mut owned, startup) {
            Ok(()) => {
                startup = false;
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

fn poll(shared: &Shared, src: &Source, owned: &mut Owned, startup: bool) -> Result<(), String> {
    let c = &src.config;
    let path = format!("/v1/decisions/stream?startup={startup}");
    let body = http::get(&c.endpoint, &path, &c.key, c.limits)?;
    let body: StreamBody =
        serde_json::from_slice(&body).map_err(|e| format!("malformed stream response: {e}"))?;
    let now = shared.state.lock().unwrap().now();
    // Planned on a copy: a commit that fails leaves the tracked state as
    // it was, and the next (full) poll retries.
    let mut next = owned.clone();
    let plan = next.update(&body, startup, now, c.max_decisions)?;
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
    Ok(())
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
        return crate::fleet::ban_spec(name);
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
    use super::*;

    fn d(id: i64, scope: &str, value: &str, dur: &str) -> Decision {
        Decision {
            id,
            duration: dur.into(),
            scope: scope.into(),
            typ: "ban".into(),
            value: value.into(),
        }
    }

    #[test]
    fn targets() {
        let t = |s, v| target(&d(1, s, v, "1h")).unwrap().unwrap();
        assert_eq!(
            t("Ip", "192.0.2.7"),
            Target {
                set: BAN4,
                elem: "192.0.2.7".into()
            }
        );
        assert_eq!(t("Ip", "2001:DB8::7").elem, "2001:db8::7");
        assert_eq!(
            t("Range", "198.51.100.9/24"),
            Target {
                set: NET4,
                elem: "198.51.100.0/24".into()
            }
        );
        assert_eq!(t("Range", "2001:db8:1::/48").set, NET6);
        assert_eq!(t("Range", "192.0.2.1/32").set, BAN4);
        assert!(target(&d(1, "Country", "FR", "1h")).unwrap().is_none());
        let mut c = d(1, "Ip", "192.0.2.8", "1h");
        c.typ = "captcha".into();
        assert!(target(&c).unwrap().is_none());
        for v in ["x", "1.2.3.4/33", "1.2.3.4/", "::/129", "1.2.3.4; rm"] {
            let s = if v.contains('/') { "Range" } else { "Ip" };
            assert!(target(&d(1, s, v, "1h")).is_err(), "{v}");
        }
    }

    #[test]
    fn deltas_startup_and_restart_diff() {
        let mut o = Owned::default();
        let body = StreamBody {
            new: vec![
                d(1, "Ip", "192.0.2.1", "1h"),
                d(2, "Ip", "192.0.2.1", "2h"),
                d(3, "Range", "10.0.0.0/8", "1h"),
                d(4, "Ip", "bad", "1h"),
            ],
            deleted: vec![],
        };
        let p = o.update(&body, true, 1000, 10).unwrap();
        assert_eq!(p.adds[BAN4], vec![("192.0.2.1".into(), 1000 + 7_200_000)]);
        assert_eq!(p.adds[NET4].len(), 1);
        assert_eq!(p.bad.len(), 1);
        // deleting one of two decisions on an address keeps it banned
        let del = StreamBody {
            new: vec![],
            deleted: vec![d(2, "Ip", "192.0.2.1", "-1s")],
        };
        let p = o.update(&del, false, 2000, 10).unwrap();
        assert!(p.dels.is_empty());
        let del = StreamBody {
            new: vec![],
            deleted: vec![d(1, "Ip", "192.0.2.1", "-1s")],
        };
        let p = o.update(&del, false, 3000, 10).unwrap();
        assert_eq!(p.dels[BAN4], vec!["192.0.2.1".to_string()]);
        // a restart's full list equal to what is owned changes nothing
        let full = StreamBody {
            new: vec![d(3, "Range", "10.0.0.0/8", "59m59s")],
            deleted: vec![],
        };
        let p = o.update(&full, true, 4000, 10).unwrap();
        assert!(p.adds.is_empty() && p.dels.is_empty(), "{p:?}");
        // a full list without it removes it
        let p = o.update(&StreamBody::default(), true, 5000, 10).unwrap();
        assert_eq!(p.dels[NET4], vec!["10.0.0.0/8".to_string()]);
        // over the cap: refused whole, nothing changed
        let big = StreamBody {
            new: (0..11).map(|i| d(i, "Ip", "192.0.2.2", "1h")).collect(),
            deleted: vec![],
        };
        assert!(o.update(&big, true, 6000, 10).is_err());
        assert!(o.is_empty());
    }
}
