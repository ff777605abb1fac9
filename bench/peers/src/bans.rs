//! Ban insertion: how fast can N addresses be added to a block list, per
//! method — the fail2ban question. Each method gets a fresh bed and a time
//! cap; a method that does not finish within the cap is extrapolated
//! linearly from the entries it did insert, and the record says so.

use crate::cmd;
use crate::experiment::{Config, Progress, Record, Results, Skipped};
use crate::signal;
use crate::stats::{si, Summary};
use crate::testbed::{Side, Testbed};
use crate::{Error, Result};
use std::io::{Seek, Write};
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A way of inserting banned addresses.
pub trait BanMethod {
    /// Name in reports.
    fn name(&self) -> String;
    /// `Err(reason)` if unusable here.
    fn available(&self) -> std::result::Result<(), String>;
    /// Creates the set/chain/rule the insertions need. Runs in the filter
    /// namespace.
    fn setup(&self) -> Result<()>;
    /// Inserts `addrs` in order until done or `deadline`; returns how many
    /// were inserted. Runs in the filter namespace.
    fn insert(&self, addrs: &[Ipv4Addr], deadline: Instant) -> Result<usize>;
}

/// `i`-th banned address: 10.0.0.1, 10.0.0.3, … (odd, so that no two are
/// adjacent and interval sets cannot merge them into ranges).
pub fn ban_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(0x0a00_0000u32 + 2 * i as u32 + 1)
}

fn spawn_ok(prog: &str, args: &[&str]) -> Result<()> {
    // Direct fork/exec, no shell: what a tuned fail2ban action would do.
    let st = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| Error(format!("cannot start {prog}: {e}")))?;
    if !st.status.success() {
        return Err(Error(format!(
            "`{prog} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&st.stderr).trim()
        )));
    }
    Ok(())
}

/// One process per address, until the deadline.
fn per_process(
    addrs: &[Ipv4Addr],
    deadline: Instant,
    mut f: impl FnMut(&str) -> Result<()>,
) -> Result<usize> {
    for (i, a) in addrs.iter().enumerate() {
        if Instant::now() >= deadline || signal::stop_requested() {
            return Ok(i);
        }
        f(&a.to_string())?;
    }
    Ok(addrs.len())
}

/// Batches of `chunk` addresses, one process each, until the deadline.
fn batched(
    addrs: &[Ipv4Addr],
    chunk: usize,
    deadline: Instant,
    mut f: impl FnMut(&[Ipv4Addr]) -> Result<()>,
) -> Result<usize> {
    let mut done = 0;
    for c in addrs.chunks(chunk.max(1)) {
        if Instant::now() >= deadline || signal::stop_requested() {
            break;
        }
        f(c)?;
        done += c.len();
    }
    Ok(done)
}

/// `iptables -A INPUT -s ADDR -j DROP`, one process per address.
pub struct IptablesPerProcess(pub &'static str);

impl BanMethod for IptablesPerProcess {
    fn name(&self) -> String {
        format!("{}-rule-per-process", self.0)
    }
    fn available(&self) -> std::result::Result<(), String> {
        cmd::have(self.0)
            .then_some(())
            .ok_or(format!("{} missing", self.0))
    }
    fn setup(&self) -> Result<()> {
        Ok(())
    }
    fn insert(&self, addrs: &[Ipv4Addr], deadline: Instant) -> Result<usize> {
        per_process(addrs, deadline, |a| {
            spawn_ok(self.0, &["-A", "INPUT", "-s", a, "-j", "DROP"])
        })
    }
}

/// `iptables-restore --noflush` with one `-A INPUT -s ADDR -j DROP` line per
/// address, 10,000 per process.
pub struct IptablesRestore(pub &'static str);

impl BanMethod for IptablesRestore {
    fn name(&self) -> String {
        format!("{}-batch", self.0)
    }
    fn available(&self) -> std::result::Result<(), String> {
        cmd::have(self.0)
            .then_some(())
            .ok_or(format!("{} missing", self.0))
    }
    fn setup(&self) -> Result<()> {
        Ok(())
    }
    fn insert(&self, addrs: &[Ipv4Addr], deadline: Instant) -> Result<usize> {
        batched(addrs, 10_000, deadline, |c| {
            let mut t = String::from("*filter\n");
            for a in c {
                t.push_str(&format!("-A INPUT -s {a}/32 -j DROP\n"));
            }
            t.push_str("COMMIT\n");
            cmd::run(self.0, &["--noflush"], Some(t.as_bytes())).map(|_| ())
        })
    }
}

const IPSET: &str = "ppbans";

/// `ipset add SET ADDR`, one process per address.
pub struct IpsetPerProcess;

fn ipset_create() -> Result<()> {
    spawn_ok(
        "ipset",
        &[
            "create", IPSET, "hash:ip", "hashsize", "65536", "maxelem", "2000000",
        ],
    )
}

impl BanMethod for IpsetPerProcess {
    fn name(&self) -> String {
        "ipset-add-per-process".into()
    }
    fn available(&self) -> std::result::Result<(), String> {
        cmd::have("ipset")
            .then_some(())
            .ok_or("ipset missing".into())
    }
    fn setup(&self) -> Result<()> {
        ipset_create()
    }
    fn insert(&self, addrs: &[Ipv4Addr], deadline: Instant) -> Result<usize> {
        per_process(addrs, deadline, |a| spawn_ok("ipset", &["add", IPSET, a]))
    }
}

/// `ipset restore` of `add SET ADDR` lines, 100,000 per process (so 7,990
/// is one batch and the time cap can stop a 1,000,000 run between batches).
pub struct IpsetRestore;

impl BanMethod for IpsetRestore {
    fn name(&self) -> String {
        "ipset-restore".into()
    }
    fn available(&self) -> std::result::Result<(), String> {
        cmd::have("ipset")
            .then_some(())
            .ok_or("ipset missing".into())
    }
    fn setup(&self) -> Result<()> {
        ipset_create()
    }
    fn insert(&self, addrs: &[Ipv4Addr], deadline: Instant) -> Result<usize> {
        batched(addrs, 100_000, deadline, |c| {
            let mut t = String::with_capacity(c.len() * 24);
            for a in c {
                t.push_str(&format!("add {IPSET} {a}\n"));
            }
            cmd::run("ipset", &["restore"], Some(t.as_bytes())).map(|_| ())
        })
    }
}

/// nft set flavour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NftSetKind {
    /// Hash set of addresses.
    Plain,
    /// `flags interval` (rbtree/pipapo backends).
    Interval,
}

fn nft_setup(kind: NftSetKind) -> Result<()> {
    let flags = match kind {
        NftSetKind::Plain => "",
        NftSetKind::Interval => " flags interval;",
    };
    let text = format!(
        "table ip ppbans {{\n  set s {{ type ipv4_addr;{flags} }}\n  chain input {{\n    type filter hook input priority filter; policy accept;\n    ip saddr @s drop\n  }}\n}}\n"
    );
    cmd::run("nft", &["-f", "-"], Some(text.as_bytes())).map(|_| ())
}

/// `nft add element ip ppbans s { ADDR }`, one process per address.
pub struct NftPerProcess(pub NftSetKind);

impl BanMethod for NftPerProcess {
    fn name(&self) -> String {
        match self.0 {
            NftSetKind::Plain => "nft-element-per-process".into(),
            NftSetKind::Interval => "nft-interval-element-per-process".into(),
        }
    }
    fn available(&self) -> std::result::Result<(), String> {
        cmd::have("nft").then_some(()).ok_or("nft missing".into())
    }
    fn setup(&self) -> Result<()> {
        nft_setup(self.0)
    }
    fn insert(&self, addrs: &[Ipv4Addr], deadline: Instant) -> Result<usize> {
        per_process(addrs, deadline, |a| {
            spawn_ok("nft", &["add", "element", "ip", "ppbans", "s", "{", a, "}"])
        })
    }
}

/// One `nft -f` transaction per 100,000 addresses (so 7,990 is one batch).
pub struct NftBatch(pub NftSetKind);

impl BanMethod for NftBatch {
    fn name(&self) -> String {
        match self.0 {
            NftSetKind::Plain => "nft-batch".into(),
            NftSetKind::Interval => "nft-interval-batch".into(),
        }
    }
    fn available(&self) -> std::result::Result<(), String> {
        cmd::have("nft").then_some(()).ok_or("nft missing".into())
    }
    fn setup(&self) -> Result<()> {
        nft_setup(self.0)
    }
    fn insert(&self, addrs: &[Ipv4Addr], deadline: Instant) -> Result<usize> {
        batched(addrs, 100_000, deadline, |c| {
            let list: Vec<String> = c.iter().map(|a| a.to_string()).collect();
            let t = format!("add element ip ppbans s {{ {} }}\n", list.join(", "));
            cmd::run("nft", &["-f", "-"], Some(t.as_bytes())).map(|_| ())
        })
    }
}

/// Writes `+ADDR` to `/proc/net/xt_recent/ppbans` through one open file,
/// one write per address (the kernel parses one command per write). Needs
/// an `-m recent --name ppbans` rule, which setup creates.
///
/// xt_recent keeps at most `ip_list_tot` entries per table (module
/// parameter, default 100, read-only without reloading the module): further
/// additions evict the oldest, so this measures the insertion path, not a
/// table that ends up holding every address.
pub struct XtRecentFile;

impl BanMethod for XtRecentFile {
    fn name(&self) -> String {
        "xt_recent-proc-write".into()
    }
    fn available(&self) -> std::result::Result<(), String> {
        cmd::have("iptables-legacy")
            .then_some(())
            .ok_or("iptables-legacy missing".into())
    }
    fn setup(&self) -> Result<()> {
        spawn_ok(
            "iptables-legacy",
            &[
                "-A", "INPUT", "-m", "recent", "--name", "ppbans", "--rcheck", "-j", "DROP",
            ],
        )
    }
    fn insert(&self, addrs: &[Ipv4Addr], deadline: Instant) -> Result<usize> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open("/proc/thread-self/net/xt_recent/ppbans")?;
        let mut buf = Vec::with_capacity(24);
        for (i, a) in addrs.iter().enumerate() {
            // Checking the clock every 1024 writes keeps it out of the
            // measured cost.
            if i % 1024 == 0 && (Instant::now() >= deadline || signal::stop_requested()) {
                return Ok(i);
            }
            buf.clear();
            writeln!(buf, "+{a}")?;
            // xt_recent accepts a command only at offset 0 (else ESPIPE),
            // and pwrite is refused too: rewind before every write.
            f.seek(std::io::SeekFrom::Start(0))?;
            f.write_all(&buf)?;
        }
        Ok(addrs.len())
    }
}

/// parapet's binaries: `PARAPET_BIN` (else `parapet`), and `PARAPETD_BIN`
/// (else `parapetd` beside it, else on the PATH).
pub fn parapet_binaries() -> (String, String) {
    let cli = std::env::var("PARAPET_BIN").unwrap_or_else(|_| "parapet".into());
    let daemon = std::env::var("PARAPETD_BIN").unwrap_or_else(|_| {
        let sibling = std::path::Path::new(&cli).with_file_name("parapetd");
        if sibling.is_file() {
            sibling.to_string_lossy().into_owned()
        } else {
            "parapetd".into()
        }
    });
    (cli, daemon)
}

/// A `parapetd` started for the ban measurements: temporary socket and
/// state directory (fsync on, as in production), stopped on drop. The
/// daemon binary is `PARAPETD_BIN`, else `parapetd` beside `PARAPET_BIN`,
/// else `parapetd` on the PATH.
struct Parapetd {
    child: std::process::Child,
    dir: std::path::PathBuf,
}

impl Parapetd {
    fn binaries() -> (String, String) {
        parapet_binaries()
    }

    fn start() -> Result<Parapetd> {
        let (_, daemon) = Self::binaries();
        let dir = crate::workdir()?.join(format!("parapetd-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let sock = dir.join("sock");
        let child = Command::new(&daemon)
            .arg("--socket")
            .arg(&sock)
            .arg("--state-dir")
            .arg(dir.join("state"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| Error(format!("{daemon}: {e}")))?;
        let d = Parapetd { child, dir };
        let t0 = Instant::now();
        while !sock.exists() || parapet_daemon::Client::connect(&sock).is_err() {
            if t0.elapsed() > std::time::Duration::from_secs(20) {
                return Err(Error("parapetd did not open its socket within 20 s".into()));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Ok(d)
    }

    fn socket(&self) -> std::path::PathBuf {
        self.dir.join("sock")
    }
}

impl Drop for Parapetd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How a parapet ban entry reaches the daemon.
#[derive(Clone, Copy)]
pub enum ParapetBanStyle {
    /// `parapet ban ADDR`: one process per ban, like a fail2ban shell action.
    PerProcess,
    /// One connection kept open, one request per ban, pipelined: what
    /// parapet's Python fail2ban action does.
    Pipelined,
    /// `parapet set add parapet-ban4 --file F`: one batch.
    FileBatch,
}

/// parapet's ban paths, each against its own fresh `parapetd`.
pub struct ParapetBan {
    style: ParapetBanStyle,
    daemon: std::sync::Mutex<Option<Parapetd>>,
}

impl ParapetBan {
    /// A method of the given style.
    pub fn new(style: ParapetBanStyle) -> Self {
        ParapetBan {
            style,
            daemon: std::sync::Mutex::new(None),
        }
    }

    fn socket(&self) -> Result<std::path::PathBuf> {
        let d = self.daemon.lock().map_err(|_| Error("poisoned".into()))?;
        d.as_ref()
            .map(Parapetd::socket)
            .ok_or_else(|| Error("setup() was not called".into()))
    }
}

impl BanMethod for ParapetBan {
    fn name(&self) -> String {
        match self.style {
            ParapetBanStyle::PerProcess => "parapet-ban-per-process",
            ParapetBanStyle::Pipelined => "parapet-ban-pipelined",
            ParapetBanStyle::FileBatch => "parapet-set-add-file",
        }
        .into()
    }
    fn available(&self) -> std::result::Result<(), String> {
        let (cli, daemon) = Parapetd::binaries();
        for prog in [&cli, &daemon] {
            if !cmd::have(prog) && !std::path::Path::new(prog).is_file() {
                return Err(format!("{prog} not found (cargo build --release -p parapet -p parapet-daemon, or set PARAPET_BIN)"));
            }
        }
        Ok(())
    }
    fn setup(&self) -> Result<()> {
        let d = Parapetd::start()?;
        // The ban set exists before the clock starts, as it would in use.
        let mut c = parapet_daemon::Client::connect(&d.socket())?;
        c.call(serde_json::json!({"cmd": "ban", "elems": ["192.0.2.1"]}))
            .map_err(|e| Error(format!("parapetd: {e}")))?;
        *self.daemon.lock().map_err(|_| Error("poisoned".into()))? = Some(d);
        Ok(())
    }
    fn insert(&self, addrs: &[Ipv4Addr], deadline: Instant) -> Result<usize> {
        let sock = self.socket()?;
        let sock_s = sock.to_string_lossy().into_owned();
        let (cli, _) = Parapetd::binaries();
        match self.style {
            ParapetBanStyle::PerProcess => {
                for (i, a) in addrs.iter().enumerate() {
                    if Instant::now() >= deadline || signal::stop_requested() {
                        return Ok(i);
                    }
                    cmd::run(&cli, &["--socket", &sock_s, "ban", &a.to_string()], None)?;
                }
                Ok(addrs.len())
            }
            ParapetBanStyle::Pipelined => {
                let mut c = parapet_daemon::Client::connect(&sock)?;
                let mut done = 0;
                for chunk in addrs.chunks(8192) {
                    if Instant::now() >= deadline || signal::stop_requested() {
                        break;
                    }
                    let lines = chunk
                        .iter()
                        .map(|a| {
                            let m = serde_json::json!({"cmd": "ban", "elems": [a.to_string()]});
                            let serde_json::Value::Object(m) = m else {
                                unreachable!()
                            };
                            c.encode(m).1
                        })
                        .collect();
                    for r in c.pipeline(lines)? {
                        if let Some((code, msg)) = r.error() {
                            return Err(Error(format!("parapetd: {code}: {msg}")));
                        }
                    }
                    done += chunk.len();
                }
                Ok(done)
            }
            ParapetBanStyle::FileBatch => {
                let path = crate::workdir()?.join("parapet-bans.txt");
                batched(addrs, 1_000_000, deadline, |c| {
                    let t: String = c.iter().map(|a| format!("{a}\n")).collect();
                    std::fs::write(&path, t)?;
                    cmd::run(
                        &cli,
                        &[
                            "--socket",
                            &sock_s,
                            "set",
                            "add",
                            "parapet-ban4",
                            "--file",
                            &path.to_string_lossy(),
                        ],
                        None,
                    )
                    .map(|_| ())
                })
            }
        }
    }
}

pub use crate::experiment::BAN_METHODS as ALL_METHODS;

/// Looks a method up by name.
pub fn by_name(name: &str) -> Option<Box<dyn BanMethod + Send + Sync>> {
    Some(match name {
        "iptables-legacy-rule-per-process" => Box::new(IptablesPerProcess("iptables-legacy")),
        "iptables-nft-rule-per-process" => Box::new(IptablesPerProcess("iptables-nft")),
        "iptables-legacy-restore-batch" => Box::new(IptablesRestore("iptables-legacy-restore")),
        "iptables-nft-restore-batch" => Box::new(IptablesRestore("iptables-nft-restore")),
        "ipset-add-per-process" => Box::new(IpsetPerProcess),
        "ipset-restore" => Box::new(IpsetRestore),
        "nft-element-per-process" => Box::new(NftPerProcess(NftSetKind::Plain)),
        "nft-batch" => Box::new(NftBatch(NftSetKind::Plain)),
        "nft-interval-element-per-process" => Box::new(NftPerProcess(NftSetKind::Interval)),
        "nft-interval-batch" => Box::new(NftBatch(NftSetKind::Interval)),
        "xt_recent-proc-write" => Box::new(XtRecentFile),
        "parapet-ban-per-process" => Box::new(ParapetBan::new(ParapetBanStyle::PerProcess)),
        "parapet-ban-pipelined" => Box::new(ParapetBan::new(ParapetBanStyle::Pipelined)),
        "parapet-set-add-file" => Box::new(ParapetBan::new(ParapetBanStyle::FileBatch)),
        _ => return None,
    })
}

/// Result of one (method, size) insertion.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Insertion {
    /// Entries actually inserted.
    pub inserted: usize,
    /// Wall time for them.
    pub elapsed: Duration,
}

/// Sets up `m` in a fresh bed and inserts `count` addresses within `cap`.
pub fn measure(
    cfg: &Config,
    m: &(dyn BanMethod + Send + Sync),
    count: usize,
    cap: Duration,
) -> Result<Insertion> {
    let bed = Testbed::create(cfg.bed)?;
    let addrs: Vec<Ipv4Addr> = (0..count).map(ban_addr).collect();
    bed.in_ns(Side::Filter, || -> Result<Insertion> {
        m.setup()?;
        let t = Instant::now();
        let inserted = m.insert(&addrs, t + cap)?;
        Ok(Insertion {
            inserted,
            elapsed: t.elapsed(),
        })
    })?
}

/// Runs every configured method at every configured size.
pub fn run(cfg: &Config, res: &mut Results, p: &mut Progress) -> Result<()> {
    for name in &cfg.ban_methods {
        let m = by_name(name).ok_or_else(|| {
            Error(format!(
                "unknown ban method {name:?} (known: {})",
                ALL_METHODS.join(", ")
            ))
        })?;
        if let Err(reason) = m.available() {
            for _ in &cfg.ban_counts {
                p.step(&format!("ban {name}: skipped ({reason})"));
            }
            res.skipped.push(Skipped {
                what: format!("ban method {name}"),
                reason,
            });
            continue;
        }
        for &count in &cfg.ban_counts {
            signal::check()?;
            match measure(cfg, m.as_ref(), count, cfg.ban_cap) {
                Ok(ins) if ins.inserted > 0 => {
                    let rate = ins.inserted as f64 / ins.elapsed.as_secs_f64().max(1e-9);
                    let extrapolated = ins.inserted < count;
                    let total_s = count as f64 / rate;
                    p.step(&format!(
                        "ban {name:<34} {count:>7}: {}entries/s, {} {total_s:.2} s{}",
                        si(rate),
                        if extrapolated { "projected" } else { "took" },
                        if extrapolated {
                            format!(" (capped after {} entries)", ins.inserted)
                        } else {
                            String::new()
                        }
                    ));
                    res.records.push(
                        Record::new(
                            "ban-insert",
                            name,
                            Some(count),
                            None,
                            "entries/s",
                            Summary::one(rate),
                        )
                        .with("inserted", ins.inserted)
                        .with("seconds", ins.elapsed.as_secs_f64())
                        .with("extrapolated", extrapolated)
                        .with("total_seconds", total_s),
                    );
                }
                Ok(_) => {
                    p.step(&format!(
                        "ban {name} {count}: nothing inserted within the cap"
                    ));
                    res.skipped.push(Skipped {
                        what: format!("ban {name} {count}"),
                        reason: "no batch finished within the time cap".into(),
                    });
                }
                Err(e) => {
                    signal::check()?;
                    p.step(&format!("ban {name} {count}: failed: {e}"));
                    res.skipped.push(Skipped {
                        what: format!("ban {name} {count}"),
                        reason: e.0,
                    });
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_distinct_and_non_adjacent() {
        assert_eq!(ban_addr(0), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(ban_addr(1), Ipv4Addr::new(10, 0, 0, 3));
        assert_eq!(
            ban_addr(999_999),
            Ipv4Addr::from(0x0a00_0000u32 + 1_999_999)
        );
    }

    #[test]
    fn every_method_name_resolves() {
        for n in ALL_METHODS {
            assert_eq!(by_name(n).unwrap().name(), n);
        }
    }
}
