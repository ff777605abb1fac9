//! `parapet set …`: the subcommands and their client side, with the
//! element files of `set add`/`set del --file` sent as batched requests.

use super::reply::{fail, obj};
use clap::Subcommand;
use parapet_daemon::{Client, ClientError};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Elements per request when adding from a file.
pub const FILE_BATCH: usize = 1 << 16;

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

pub(super) fn set_cmd(c: &mut Client, cmd: SetCommand) -> Result<ExitCode, ClientError> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
