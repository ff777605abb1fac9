//! The `parapet` subcommands served by `parapetd` (declared once here,
//! flattened into the command line in `main.rs`) and their client side,
//! over [`parapet_daemon::Client`].
//!
//! Exit status: 0 on success; 1 on failure (daemon error, unreachable
//! daemon, ruleset errors — printed as `FILE:LINE:COL: message` on stderr);
//! `set test` exits 0 when covered, 1 when not, 2 on error.

use clap::{Args, Subcommand};
use parapet_daemon::{socket_path, Client, ClientError};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Elements per request when adding from a file.
pub const FILE_BATCH: usize = 1 << 16;

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

/// `set …`
#[derive(Subcommand, Debug, Clone)]
pub enum SetCommand {
    /// Create a set: TYPE is nft (`ipv4_addr`, `ipv4_addr . inet_service`) or ipset (`hash:net`).
    Create {
        /// Set name.
        name: String,
        /// Key type.
        #[arg(value_name = "TYPE")]
        typ: String,
        /// Flags: interval, timeout (comma separated).
        #[arg(long, value_delimiter = ',')]
        flags: Vec<String>,
        /// Default element timeout in seconds (enables timeouts).
        #[arg(long)]
        timeout: Option<u64>,
        /// Maximum number of elements.
        #[arg(long)]
        size: Option<usize>,
        /// Backend policy: performance or memory.
        #[arg(long)]
        policy: Option<String>,
        /// Family of ipset types: inet or inet6.
        #[arg(long)]
        family: Option<String>,
        /// Replicate the set to the fleet (`parapetd --fleet`); the same
        /// as `--flags shared`.
        #[arg(long)]
        shared: bool,
        /// Succeed if an identical set exists.
        #[arg(long)]
        exist: bool,
    },
    /// Destroy a set (not while the active ruleset uses it).
    Destroy {
        /// Set name.
        name: String,
    },
    /// Add elements (or refresh their timeouts).
    Add {
        /// Set name.
        name: String,
        /// Elements.
        elems: Vec<String>,
        /// Read elements from a file: one per line, optional `timeout N`; `#` comments.
        #[arg(long)]
        file: Option<PathBuf>,
        /// Seconds until the elements expire (0 = permanent).
        #[arg(long)]
        timeout: Option<u64>,
    },
    /// Delete elements.
    Del {
        /// Set name.
        name: String,
        /// Elements.
        elems: Vec<String>,
        /// Read elements from a file, one per line.
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// Remove every element.
    Flush {
        /// Set name.
        name: String,
    },
    /// List the sets, or one set's elements with remaining timeouts.
    List {
        /// Set name.
        name: Option<String>,
        /// Print the daemon's JSON reply.
        #[arg(long)]
        json: bool,
    },
    /// Exit 0 when ELEM is covered by the set, 1 otherwise.
    Test {
        /// Set name.
        name: String,
        /// Element or packet key.
        elem: String,
    },
    /// Which backend holds the set, and why.
    Explain {
        /// Set name.
        name: String,
    },
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn report(e: &ClientError) {
    match e {
        ClientError::Daemon { reply, msg, .. } => {
            let errs = reply
                .get("error")
                .and_then(|e| e.get("errors"))
                .and_then(Value::as_array);
            match errs {
                Some(list) => list
                    .iter()
                    .filter_map(Value::as_str)
                    .for_each(|l| eprintln!("{l}")),
                None => eprintln!("parapet: {msg}"),
            }
        }
        ClientError::Io(e) => eprintln!("parapet: {e}"),
    }
}

/// One parsed line of an element file.
#[derive(Debug)]
struct FileElem {
    line: usize,
    elem: String,
    timeout: Option<u64>,
}

fn read_elem_file(path: &Path) -> Result<Vec<FileElem>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let l = raw.split('#').next().unwrap_or("").trim();
        if l.is_empty() {
            continue;
        }
        if !l.contains(char::is_whitespace) {
            // The common case, one bare element: no tokenizing.
            out.push(FileElem {
                line: i + 1,
                elem: l.to_string(),
                timeout: None,
            });
            continue;
        }
        let mut timeout = None;
        let mut elem = l;
        let toks: Vec<&str> = l.split_whitespace().collect();
        if toks.len() >= 3 && toks[toks.len() - 2] == "timeout" {
            let t = toks[toks.len() - 1];
            timeout = Some(t.parse::<u64>().map_err(|_| {
                let col = raw.rfind(t).map_or(1, |c| c + 1);
                format!(
                    "{}:{}:{col}: expected a timeout in seconds, found `{t}`",
                    path.display(),
                    i + 1
                )
            })?);
            elem = l[..l.rfind("timeout").expect("token present")].trim_end();
        } else if toks.len() == 2 && toks[0] != "timeout" && !l.contains(" . ") {
            let col = raw.find(toks[1]).map_or(1, |c| c + 1);
            return Err(format!(
                "{}:{}:{col}: unexpected `{}` (one element per line, optionally `timeout N`)",
                path.display(),
                i + 1,
                toks[1]
            ));
        }
        out.push(FileElem {
            line: i + 1,
            elem: elem.to_string(),
            timeout,
        });
    }
    Ok(out)
}

/// Sends `elems` as batched, pipelined requests; consecutive elements with
/// the same timeout share a request. Returns the summed `field` of the
/// replies, or the first error (naming the file lines of its batch).
fn bulk(
    client: &mut Client,
    cmd: &str,
    set: &str,
    elems: &[FileElem],
    default_timeout: Option<u64>,
    field: &str,
    path: &str,
) -> Result<u64, String> {
    let mut lines = Vec::new();
    let mut spans = Vec::new();
    let mut done_after = Vec::new();
    let mut i = 0;
    while i < elems.len() {
        let t = elems[i].timeout.or(default_timeout);
        let mut j = i;
        while j < elems.len() && j - i < FILE_BATCH && elems[j].timeout.or(default_timeout) == t {
            j += 1;
        }
        // Serialized straight from borrowed strings: no JSON tree per batch.
        #[derive(serde::Serialize)]
        struct Batch<'a> {
            v: u64,
            id: u64,
            cmd: &'a str,
            set: &'a str,
            elems: Vec<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            timeout: Option<u64>,
        }
        let b = Batch {
            v: parapet_daemon::proto::PROTO_VERSION,
            id: client.take_id(),
            cmd,
            set,
            elems: elems[i..j].iter().map(|e| e.elem.as_str()).collect(),
            timeout: t,
        };
        let mut line = serde_json::to_vec(&b).expect("batch serializes");
        line.push(b'\n');
        lines.push(line);
        spans.push((elems[i].line, elems[j - 1].line));
        done_after.push(j as u64); // elements done once this batch is
        i = j;
    }
    let mut progress = crate::progress::Progress::new(
        format!("{} {set}", cmd.replace('.', " ")),
        elems.len() as u64,
    );
    let replies = client
        .pipeline_with(lines, |k| progress.update(done_after[k - 1]))
        .map_err(|e| e.to_string())?;
    drop(progress);
    let mut total = 0;
    let mut first_err = None;
    for (r, (a, b)) in replies.iter().zip(spans) {
        match r.error() {
            None => total += r.get(field).and_then(Value::as_u64).unwrap_or(0),
            Some((_, msg)) => {
                first_err.get_or_insert(format!(
                    "{path}:{a}-{b}: {msg} (this batch of lines was not applied)"
                ));
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(total),
    }
}

fn fail(code: u8, msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("parapet: {msg}");
    ExitCode::from(code)
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
                for (k, v) in body {
                    println!("{k}: {v}");
                }
                // said in words: with it off, the packet counts above stand still
                if let Some(on) = stats_on {
                    println!("per-packet statistics: {}", on_off(on));
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

fn elems_from(elems: Vec<String>, file: Option<&Path>) -> Result<Vec<FileElem>, String> {
    let mut out: Vec<FileElem> = elems
        .into_iter()
        .map(|e| FileElem {
            line: 0,
            elem: e,
            timeout: None,
        })
        .collect();
    if let Some(f) = file {
        out.extend(read_elem_file(f)?);
    }
    if out.is_empty() {
        return Err("no elements given".into());
    }
    Ok(out)
}

fn set_cmd(c: &mut Client, cmd: SetCommand) -> Result<ExitCode, ClientError> {
    match cmd {
        SetCommand::Create {
            name,
            typ,
            flags,
            timeout,
            size,
            policy,
            family,
            exist,
            shared,
        } => {
            let mut flags = flags;
            if shared {
                flags.push("shared".into());
            }
            let mut m = obj(
                json!({"cmd": "set.create", "set": name, "type": typ, "flags": flags, "exist": exist}),
            );
            for (k, v) in [
                ("timeout", timeout.map(Value::from)),
                ("size", size.map(Value::from)),
                ("policy", policy.map(Value::from)),
                ("family", family.map(Value::from)),
            ] {
                if let Some(v) = v {
                    m.insert(k.into(), v);
                }
            }
            c.call(Value::Object(m))?;
        }
        SetCommand::Destroy { name } => {
            c.call(json!({"cmd": "set.destroy", "set": name}))?;
        }
        SetCommand::Add {
            name,
            elems,
            file,
            timeout,
        } => {
            let path = file
                .as_ref()
                .map_or(String::from("<args>"), |p| p.display().to_string());
            let els = match elems_from(elems, file.as_deref()) {
                Ok(e) => e,
                Err(e) => return Ok(fail(1, e)),
            };
            match bulk(c, "set.add", &name, &els, timeout, "added", &path) {
                Ok(n) => {
                    if file.is_some() {
                        println!("{n} new elements ({} lines)", els.len());
                    }
                }
                Err(e) => return Ok(fail(1, e)),
            }
        }
        SetCommand::Del { name, elems, file } => {
            let path = file
                .as_ref()
                .map_or(String::from("<args>"), |p| p.display().to_string());
            let els = match elems_from(elems, file.as_deref()) {
                Ok(e) => e,
                Err(e) => return Ok(fail(1, e)),
            };
            if let Err(e) = bulk(c, "set.del", &name, &els, None, "deleted", &path) {
                return Ok(fail(1, e));
            }
        }
        SetCommand::Flush { name } => {
            c.call(json!({"cmd": "set.flush", "set": name}))?;
        }
        SetCommand::List { name, json } => {
            let mut m = obj(json!({"cmd": "set.list"}));
            if let Some(n) = &name {
                m.insert("set".into(), Value::from(n.clone()));
            }
            let r = c.call(Value::Object(m))?;
            if json {
                println!("{}", Value::Object(r.body.clone()));
            } else if let Some(sets) = r.get("sets").and_then(Value::as_array) {
                for s in sets {
                    println!(
                        "{} type {} elements {} backend {}",
                        s["set"].as_str().unwrap_or(""),
                        s["key"].as_str().unwrap_or(""),
                        s["elements"],
                        s["backend"].as_str().unwrap_or("")
                    );
                }
            } else if let Some(els) = r.get("elems").and_then(Value::as_array) {
                for e in els {
                    match e.get("timeout") {
                        Some(t) => println!("{} timeout {t}", e["elem"].as_str().unwrap_or("")),
                        None => println!("{}", e["elem"].as_str().unwrap_or("")),
                    }
                }
            }
        }
        SetCommand::Test { name, elem } => {
            let r = c.call(json!({"cmd": "set.test", "set": name, "elem": elem}))?;
            let covered = r.get("covered").and_then(Value::as_bool) == Some(true);
            if covered {
                println!("{elem} is in set {name}");
                return Ok(ExitCode::SUCCESS);
            }
            println!("{elem} is NOT in set {name}");
            return Ok(ExitCode::from(1));
        }
        SetCommand::Explain { name } => {
            let r = c.call(json!({"cmd": "set.explain", "set": name}))?;
            print!("{}", r.get("text").and_then(Value::as_str).unwrap_or(""));
        }
    }
    Ok(ExitCode::SUCCESS)
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

    #[test]
    fn element_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e");
        std::fs::write(
            &p,
            "# bans\n10.0.0.1\n\n10.0.0.2 timeout 60\n10.0.0.0/8 # net\n1.2.3.4 . 80 timeout 5\n",
        )
        .unwrap();
        let e = read_elem_file(&p).unwrap();
        let got: Vec<(usize, &str, Option<u64>)> = e
            .iter()
            .map(|x| (x.line, x.elem.as_str(), x.timeout))
            .collect();
        assert_eq!(
            got,
            vec![
                (2, "10.0.0.1", None),
                (4, "10.0.0.2", Some(60)),
                (5, "10.0.0.0/8", None),
                (6, "1.2.3.4 . 80", Some(5))
            ]
        );
        std::fs::write(&p, "10.0.0.1\n10.0.0.2 timeout x\n").unwrap();
        let err = read_elem_file(&p).unwrap_err();
        assert!(
            err.ends_with(":2:18: expected a timeout in seconds, found `x`"),
            "{err}"
        );
        std::fs::write(&p, "10.0.0.1 junk\n").unwrap();
        assert!(read_elem_file(&p)
            .unwrap_err()
            .contains(":1:10: unexpected `junk`"));
    }
}
