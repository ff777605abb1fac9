//! What the CrowdSec source knows apart from the daemon: its settings
//! (flags), which decisions map to which set elements ([`target`]), and
//! which elements it put in ([`Owned`], diffed against each full list into
//! a [`Plan`]). The thread that polls and commits is the parent module.

use super::tls::Tls;
use crate::crowdsec_http::{self as http, Decision, Endpoint, Limits, Scope, StreamBody};
use crate::state::{BAN4, BAN6};
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    /// http://HOST:PORT or https://HOST:PORT.
    #[arg(long, value_name = "URL")]
    pub crowdsec: Option<String>,
    /// CrowdSec: file holding the bouncer API key (`cscli bouncers add`).
    #[arg(long, value_name = "FILE")]
    pub crowdsec_key_file: Option<PathBuf>,
    /// CrowdSec over https: CA certificates (PEM) that verify the LAPI's
    /// certificate (default: the system's roots).
    #[arg(long, value_name = "FILE")]
    pub crowdsec_tls_ca: Option<PathBuf>,
    /// CrowdSec over https: client certificate (PEM), for a LAPI that
    /// authenticates bouncers by certificate (then no API key is needed).
    #[arg(long, value_name = "FILE", requires = "crowdsec_tls_key")]
    pub crowdsec_tls_cert: Option<PathBuf>,
    /// CrowdSec over https: the client certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "crowdsec_tls_cert")]
    pub crowdsec_tls_key: Option<PathBuf>,
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
    pub(super) endpoint: Endpoint,
    /// Empty when a client certificate authenticates instead.
    pub(super) key: String,
    pub(super) tls: Option<Tls>,
    pub(super) interval: Duration,
    pub(super) resync: Option<Duration>,
    pub(super) max_decisions: usize,
    pub(super) limits: Limits,
}

impl CrowdsecArgs {
    /// The settings, if `--crowdsec` was given (reads the key file).
    pub fn config(&self) -> Result<Option<CrowdsecConfig>, String> {
        let Some(url) = &self.crowdsec else {
            return Ok(None);
        };
        let endpoint = Endpoint::parse(url)?;
        let client = self
            .crowdsec_tls_cert
            .as_deref()
            .zip(self.crowdsec_tls_key.as_deref());
        let tls_flags = self.crowdsec_tls_ca.is_some() || client.is_some();
        let tls = if endpoint.tls {
            Some(Tls::new(self.crowdsec_tls_ca.as_deref(), client)?)
        } else if tls_flags {
            return Err(format!(
                "--crowdsec {url}: the --crowdsec-tls-* options need an https:// URL"
            ));
        } else {
            None
        };
        let key = match &self.crowdsec_key_file {
            None if client.is_some() => String::new(),
            None => {
                return Err(
                    "--crowdsec needs --crowdsec-key-file (or, over https, a client \
                            certificate: --crowdsec-tls-cert and --crowdsec-tls-key)"
                        .into(),
                )
            }
            Some(p) => {
                let key =
                    std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
                let key = key.trim().to_string();
                if key.is_empty() || !key.bytes().all(|b| b.is_ascii_graphic()) {
                    return Err(format!(
                        "{}:1:1: expected one API key (printable, no spaces)",
                        p.display()
                    ));
                }
                key
            }
        };
        Ok(Some(CrowdsecConfig {
            url: url.clone(),
            endpoint,
            key,
            tls,
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
    if !d.ban {
        return Ok(None);
    }
    let v = d.value.trim();
    let (addr, len) = match d.scope {
        Scope::Ip => (v, None),
        Scope::Range => {
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
        Scope::Other => return Ok(None),
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

/// Each element of `by_id` with its latest expiry.
fn elements_of(by_id: &HashMap<i64, (Target, u64)>) -> HashMap<&Target, u64> {
    let mut m: HashMap<&Target, u64> = HashMap::with_capacity(by_id.len());
    for (t, exp) in by_id.values() {
        let e = m.entry(t).or_insert(0);
        *e = (*e).max(*exp);
    }
    m
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
        elements_of(&self.by_id)
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
        let (next, plan) = self.updated(body, startup, now, max)?;
        *self = next;
        Ok(plan)
    }

    /// [`Owned::update`] without touching `self`: what would be tracked
    /// after the response, and the element changes. Nothing is copied
    /// for a full list (the old map is only read, to diff against).
    pub fn updated(
        &self,
        body: &StreamBody,
        startup: bool,
        now: u64,
        max: usize,
    ) -> Result<(Owned, Plan), String> {
        let base = if startup { 0 } else { self.by_id.len() };
        if base.saturating_add(body.new.len()) > max {
            return Err(format!(
                "{} decisions would exceed --crowdsec-max-decisions {max}",
                base + body.new.len()
            ));
        }
        let mut plan = Plan::default();
        // A full list replaces what is tracked (100k decisions are some
        // 10 MB: not copied); deltas change a copy.
        let mut next = Owned {
            by_id: if startup {
                HashMap::with_capacity(body.new.len())
            } else {
                self.by_id.clone()
            },
        };
        let before = self.elements();
        if !startup {
            for d in &body.deleted {
                next.by_id.remove(&d.id);
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
                next.by_id.insert(d.id, (t, now.saturating_add(ms as u64)));
            }
        }
        next.by_id.retain(|_, (_, exp)| *exp > now);
        let after = next.elements();
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
        Ok((next, plan))
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
    pub(super) polls: AtomicU64,
    /// Full polls made because a burst of deltas ended (`Burst`).
    pub(super) settles: AtomicU64,
    pub(super) errors: AtomicU64,
    pub(super) added: AtomicU64,
    pub(super) deleted: AtomicU64,
    pub(super) ignored: AtomicU64,
    pub(super) bad_decisions: AtomicU64,
    pub(super) tracked: AtomicU64,
    pub(super) last_poll_ms: AtomicU64,
    pub(super) connected: AtomicBool,
    pub(super) last_error: Mutex<Option<String>>,
    pub(super) stop: AtomicBool,
}

impl Source {
    /// A source not yet started.
    pub fn new(config: CrowdsecConfig) -> Arc<Source> {
        Arc::new(Source {
            config,
            polls: AtomicU64::new(0),
            settles: AtomicU64::new(0),
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

    pub(super) fn error(&self, e: String) {
        eprintln!("parapetd: crowdsec: {e}");
        self.errors.fetch_add(1, Ordering::Relaxed);
        self.connected.store(false, Ordering::Relaxed);
        *self.last_error.lock().unwrap() = Some(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A decision as the LAPI sends it (through the deserializer).
    fn d(id: i64, scope: &str, value: &str, dur: &str) -> Decision {
        let j = serde_json::json!({"id": id, "duration": dur, "scope": scope,
            "type": "ban", "value": value, "origin": "cscli"});
        serde_json::from_value(j).unwrap()
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
        let c: Decision = serde_json::from_str(
            r#"{"id":1,"duration":"1h","scope":"ip","type":"captcha","value":"192.0.2.8"}"#,
        )
        .unwrap();
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
            deleted: vec![http::Deleted { id: 2 }],
        };
        let p = o.update(&del, false, 2000, 10).unwrap();
        assert!(p.dels.is_empty());
        let del = StreamBody {
            new: vec![],
            deleted: vec![http::Deleted { id: 1 }],
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
