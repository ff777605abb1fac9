//! The `parapet` subcommands served by `parapetd` (declared once here,
//! flattened into the command line in `main.rs`) and their client side,
//! over [`parapet_daemon::Client`].
//!
//! Exit status: 0 on success; 1 on failure (daemon error, unreachable
//! daemon, ruleset errors — printed as `FILE:LINE:COL: message` on stderr);
//! `set test` exits 0 when covered, 1 when not, 2 on error.

use clap::{Args, Subcommand};
use parapet_daemon::{socket_path, Client, ClientError};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod reply;
mod set_cmd;

use reply::{fail, obj, report};
use set_cmd::set_cmd;
pub use set_cmd::SetCommand;

/// Commands served by `parapetd`, flattened into `parapet`'s command line.
#[derive(Subcommand, Debug, Clone)]
pub enum DaemonCommand {
    /// Compile RULES aside and swap them into parapetd atomically (nothing changes on error).
    Apply {
        /// Ruleset file.
        rules: PathBuf,
        /// Validate only; change nothing.
        #[arg(long)]
        check: bool,
        /// Input format (default: recognized from the content).
        #[arg(long)]
        format: Option<String>,
    },
    /// The active ruleset (`parapet list` without a file; declared in `main.rs`).
    #[command(skip)]
    List {
        /// Include per-rule packet and byte counters.
        counters: bool,
        /// Output format: iptables-save, nft or json (default: as applied).
        format: Option<String>,
    },
    /// parapetd's statistics.
    Stats {
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// parapetd's rule counters.
    Counters {
        #[command(subcommand)]
        cmd: CountersCommand,
    },
    /// Named sets held by parapetd (create, add, del, flush, list, test, explain).
    Set {
        #[command(subcommand)]
        cmd: SetCommand,
    },
    /// Ban addresses in parapetd (IPv4 into parapet-ban4, IPv6 into parapet-ban6).
    Ban(BanArgs),
    /// Lift bans.
    Unban(BanArgs),
    /// An xt_recent table in parapetd: list it, or write it as /proc/net/xt_recent/NAME
    /// takes (+ADDR adds or refreshes, -ADDR removes, / flushes).
    Recent {
        /// Table name (`-m recent --name`; iptables' default is DEFAULT).
        name: String,
        /// +ADDR, -ADDR or /; none: list the table.
        #[arg(allow_hyphen_values = true)]
        write: Option<String>,
    },
    /// Attach parapetd's eBPF dataplane: without an interface, the ruleset's INPUT, FORWARD
    /// and OUTPUT chains at their netfilter hooks; with one, at XDP or tc there (loads it on
    /// first use; root daemon).
    Attach(AttachArgs),
    /// Detach parapetd's eBPF dataplane from an interface (without one: from the netfilter hooks).
    Detach(DetachArgs),
}

/// Arguments of `attach`.
#[derive(Args, Debug, Clone)]
pub struct AttachArgs {
    /// Network interface (in parapetd's network namespace); none: the netfilter hooks.
    pub iface: Option<String>,
    /// Where to hook on the interface: xdp or tc (ingress); default xdp.
    #[arg(long, value_parser = ["xdp", "tc", "netfilter"])]
    pub hook: Option<String>,
    /// XDP mode: native (falls back to skb, with a note) or skb.
    #[arg(long, default_value = "native", value_parser = ["native", "skb"])]
    pub mode: String,
}

/// Arguments of `detach`.
#[derive(Args, Debug, Clone)]
pub struct DetachArgs {
    /// Network interface; none: the netfilter hooks.
    pub iface: Option<String>,
    /// Only this hook: xdp or tc.
    #[arg(long, value_parser = ["xdp", "tc"])]
    pub hook: Option<String>,
}

/// Arguments of `ban` / `unban`.
#[derive(Args, Debug, Clone)]
pub struct BanArgs {
    /// Addresses or prefixes.
    #[arg(required = true)]
    pub addrs: Vec<String>,
    /// Seconds until the ban lifts (0 = permanent; default: the set's default, permanent for the ban sets).
    #[arg(long)]
    pub timeout: Option<u64>,
    /// Use this set instead of parapet-ban4/parapet-ban6.
    #[arg(long)]
    pub set: Option<String>,
}

/// `counters …`
#[derive(Subcommand, Debug, Clone)]
pub enum CountersCommand {
    /// Zero every rule counter.
    Reset,
}

/// Runs a daemon command against the socket (argument, `$PARAPET_SOCKET`
/// or the default).
pub fn run(cmd: DaemonCommand, socket: Option<&Path>) -> ExitCode {
    let path = socket_path(socket);
    let err_code = if matches!(
        cmd,
        DaemonCommand::Set {
            cmd: SetCommand::Test { .. }
        }
    ) {
        2
    } else {
        1
    };
    let mut c = match Client::connect(&path) {
        Ok(c) => c,
        Err(e) => return fail(err_code, e),
    };
    match exec(&mut c, cmd) {
        Ok(code) => code,
        Err(e) => {
            report(&e);
            ExitCode::from(err_code)
        }
    }
}

fn exec(c: &mut Client, cmd: DaemonCommand) -> Result<ExitCode, ClientError> {
    match cmd {
        DaemonCommand::Apply {
            rules,
            check,
            format,
        } => {
            let text = std::fs::read_to_string(&rules).map_err(|e| {
                ClientError::Io(std::io::Error::new(
                    e.kind(),
                    format!("{}: {e}", rules.display()),
                ))
            })?;
            let name = rules.display().to_string();
            let mut m = obj(json!({"cmd": "apply", "rules": text, "name": name, "check": check}));
            if let Some(f) = format {
                m.insert("format".into(), Value::from(f));
            }
            let waiting = crate::progress::Waiting::new(format!("applying {name}"));
            let r = c.call(Value::Object(m));
            drop(waiting);
            let r = r?;
            let n = r.get("rules").and_then(Value::as_u64).unwrap_or(0);
            if check {
                println!("{name}: OK, {n} rules");
            } else {
                println!(
                    "applied {name}: {n} rules (generation {})",
                    r.get("generation").and_then(Value::as_u64).unwrap_or(0)
                );
            }
            if let Some(a) = nf_attachment(r.get("hooks")) {
                println!("# {}", placed(a));
            }
            print_left_to_kernel(r.get("left_to_kernel"));
            print_notes(&r);
        }
        DaemonCommand::List { counters, format } => {
            let mut m = obj(json!({"cmd": "list", "counters": counters}));
            if let Some(f) = format {
                m.insert("format".into(), Value::from(f));
            }
            let r = c.call(Value::Object(m))?;
            if r.get("active") == Some(&Value::Bool(false)) {
                eprintln!("parapet: no ruleset is active");
            } else if let Some(t) = r.get("text").and_then(Value::as_str) {
                print!("{t}");
                if !t.ends_with('\n') {
                    println!();
                }
            } else if let Some(rs) = r.get("ruleset") {
                println!("{}", serde_json::to_string_pretty(rs).unwrap_or_default());
            }
            if counters {
                for a in r
                    .get("attachments")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if a["links"].is_array() {
                        println!("# attached {}", placed(a));
                        continue;
                    }
                    println!(
                        "# attached to {} at {}{}",
                        a["iface"].as_str().unwrap_or(""),
                        a["hook"].as_str().unwrap_or(""),
                        a["mode"]
                            .as_str()
                            .map(|m| format!(" ({m})"))
                            .unwrap_or_default()
                    );
                }
            }
            if let Some(cs) = r.get("counters").and_then(Value::as_array) {
                for x in cs {
                    println!(
                        "# rule {} packets {} bytes {}",
                        x["rule"], x["packets"], x["bytes"]
                    );
                }
            }
        }
        DaemonCommand::Stats { json } => {
            let r = c.call(json!({"cmd": "stats"}))?;
            let mut body = r.body.clone();
            for k in ["v", "id", "ok"] {
                body.remove(k);
            }
            if json {
                println!("{}", Value::Object(body));
            } else {
                let stats_on = body["dataplane"]["packet_stats"].as_bool();
                let xdp = body["dataplane"]["xdp_engine"].clone();
                for (k, v) in body {
                    println!("{k}: {v}");
                }
                // said in words: with it off, the packet counts above stand still
                if let Some(on) = stats_on {
                    println!("per-packet statistics: {}", on_off(on));
                }
                if let (Some(e), Some(why)) = (xdp["engine"].as_str(), xdp["reason"].as_str()) {
                    println!("xdp engine: {e} ({why})");
                }
                let loading = &xdp["loading"];
                if let (Some(e), Some(n)) =
                    (loading["engine"].as_str(), loading["entries"].as_u64())
                {
                    let ms = loading["ms"].as_u64().unwrap_or(0);
                    println!("xdp engine loading: {e} of {n} entries, for {ms} ms");
                }
            }
        }
        DaemonCommand::Counters {
            cmd: CountersCommand::Reset,
        } => {
            c.call(json!({"cmd": "counters.reset"}))?;
        }
        DaemonCommand::Ban(a) => {
            let mut m = obj(json!({"cmd": "ban", "elems": a.addrs}));
            if let Some(t) = a.timeout {
                m.insert("timeout".into(), Value::from(t));
            }
            if let Some(s) = a.set {
                m.insert("set".into(), Value::from(s));
            }
            c.call(Value::Object(m))?;
        }
        DaemonCommand::Unban(a) => {
            let mut m = obj(json!({"cmd": "unban", "elems": a.addrs}));
            if let Some(s) = a.set {
                m.insert("set".into(), Value::from(s));
            }
            c.call(Value::Object(m))?;
        }
        DaemonCommand::Attach(AttachArgs { iface, hook, mode }) => {
            let Some(iface) = iface else {
                let mut m = obj(json!({"cmd": "attach"}));
                if let Some(h) = hook {
                    m.insert("hook".into(), Value::from(h));
                }
                let r = c.call(Value::Object(m))?;
                let a = nf_attachment(r.get("hooks"))
                    .cloned()
                    .unwrap_or(Value::Null);
                println!("attached {}", placed(&a));
                print_notes(&r);
                return Ok(ExitCode::SUCCESS);
            };
            let hook = hook.unwrap_or_else(|| "xdp".into());
            let r = c.call(json!({"cmd": "attach", "iface": iface, "hook": hook, "mode": mode}))?;
            let mode = r
                .get("mode")
                .and_then(Value::as_str)
                .map(|m| format!(" ({m})"))
                .unwrap_or_default();
            println!("attached to {iface} at {hook}{mode}");
            print_notes(&r);
        }
        DaemonCommand::Detach(DetachArgs { iface, hook }) => {
            let mut m = obj(json!({"cmd": "detach"}));
            if let Some(i) = iface {
                m.insert("iface".into(), Value::from(i));
            }
            if let Some(h) = hook {
                m.insert("hook".into(), Value::from(h));
            }
            c.call(Value::Object(m))?;
        }
        DaemonCommand::Set { cmd } => return set_cmd(c, cmd),
        DaemonCommand::Recent { name, write } => {
            return crate::recent_cmd::recent_cmd(c, name, write)
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// An attach reply's note, warning and warnings on stderr.
/// The attachment without an interface among a reply's attachments.
fn nf_attachment(attachments: Option<&Value>) -> Option<&Value> {
    attachments?
        .as_array()?
        .iter()
        .find(|a| a["links"].is_array())
}

/// Where the attachment without an interface enforces: `at the netfilter
/// hooks: INPUT ipv4 (priority 0), …`, or on kernels without netfilter BPF
/// links (docs/hooks.md) `in the tc placement (…): lo, eth0`.
fn placed(a: &Value) -> String {
    if a["placement"] == "tc" {
        let ifaces: Vec<&str> = a["tc_links"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l["iface"].as_str())
            .collect();
        return format!(
            "in the tc placement (INPUT, FORWARD, OUTPUT at tc ingress and egress): {}",
            ifaces.join(", ")
        );
    }
    let links = a["links"].as_array().cloned().unwrap_or_default();
    format!("at the netfilter hooks: {}", hook_links(&links))
}

/// Which chain runs at which netfilter hook: `INPUT ipv4 (priority 0), …`.
fn hook_links(links: &[Value]) -> String {
    if links.is_empty() {
        return "no chain yet (the next apply places its base chains)".into();
    }
    let l: Vec<String> = links
        .iter()
        .map(|l| {
            format!(
                "{} {} (priority {})",
                l["chain"].as_str().unwrap_or(""),
                l["family"].as_str().unwrap_or(""),
                l["priority"]
            )
        })
        .collect();
    l.join(", ")
}

fn print_notes(r: &parapet_daemon::proto::Reply) {
    let r = &r.body;
    for k in ["note", "warning"] {
        if let Some(n) = r.get(k).and_then(Value::as_str) {
            eprintln!("parapet: {n}");
        }
    }
    for hook in r
        .get("hooks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(n) = hook.get("note").and_then(Value::as_str) {
            eprintln!("parapet: {n}");
        }
    }
    for w in r
        .get("warnings")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(w) = w.as_str() {
            eprintln!("parapet: warning: {w}");
        }
    }
}

/// One line per table the applied ruleset leaves to the kernel's netfilter
/// (the reply's `left_to_kernel`): `left to the kernel: nat (POSTROUTING 1 rule)`.
fn print_left_to_kernel(left: Option<&Value>) {
    let Some(tables) = left.and_then(Value::as_array) else {
        return;
    };
    for t in tables {
        let chains: Vec<String> = t
            .get("chains")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| {
                let n = c.get("rules").and_then(Value::as_u64).unwrap_or(0);
                let name = c.get("chain").and_then(Value::as_str).unwrap_or("?");
                format!("{name} {n} rule{}", if n == 1 { "" } else { "s" })
            })
            .collect();
        if let Some(d) = t.get("describe").and_then(Value::as_str) {
            println!("left to the kernel: {d}");
            continue;
        }
        let table = t.get("table").and_then(Value::as_str).unwrap_or("?");
        println!("left to the kernel: {table} ({})", chains.join(", "));
    }
}

/// `on` or `off (…)`: the per-packet statistics switch in `stats`' text.
fn on_off(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off (parapetd --no-packet-stats: packets seen, image-decided and per-hook counts stand still)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[arg(long, global = true)]
        socket: Option<PathBuf>,
        #[command(subcommand)]
        cmd: DaemonCommand,
    }

    #[test]
    fn commands_parse() {
        let c = Cli::try_parse_from([
            "parapet",
            "--socket",
            "/tmp/s",
            "set",
            "create",
            "b",
            "hash:ip",
            "--flags",
            "interval,timeout",
            "--timeout",
            "60",
        ])
        .unwrap();
        match c.cmd {
            DaemonCommand::Set {
                cmd: SetCommand::Create { flags, timeout, .. },
            } => {
                assert_eq!(flags, vec!["interval", "timeout"]);
                assert_eq!(timeout, Some(60));
            }
            other => panic!("{other:?}"),
        }
        assert!(
            Cli::try_parse_from(["parapet", "ban"]).is_err(),
            "ban needs an address"
        );
        assert!(
            Cli::try_parse_from(["parapet", "ban", "1.2.3.4", "::1", "--timeout", "5"]).is_ok()
        );
        assert!(Cli::try_parse_from(["parapet", "counters", "reset"]).is_ok());
        assert!(Cli::try_parse_from(["parapet", "apply", "--check", "r.rules"]).is_ok());
        assert!(Cli::try_parse_from(["parapet", "set", "test", "b", "1.2.3.4"]).is_ok());
        assert!(Cli::try_parse_from(["parapet", "attach", "eth0", "--hook", "tc"]).is_ok());
        assert!(Cli::try_parse_from(["parapet", "attach", "eth0", "--mode", "skb"]).is_ok());
        assert!(Cli::try_parse_from(["parapet", "attach", "eth0", "--hook", "nf"]).is_err());
        assert!(Cli::try_parse_from(["parapet", "detach", "eth0"]).is_ok());
    }
}
