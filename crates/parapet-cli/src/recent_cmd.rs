//! `parapet recent NAME [+ADDR|-ADDR|/]`: parapetd's xt_recent tables, read
//! and written as `/proc/net/xt_recent/NAME` is (`cat` lists it, `echo
//! +ADDR >` adds, `echo -ADDR >` removes, `echo / >` flushes), and listed
//! in its format.

use parapet_daemon::client::{Client, ClientError};
use serde_json::{json, Value};
use std::process::ExitCode;

/// Runs the command against the daemon.
pub fn recent_cmd(
    c: &mut Client,
    name: String,
    write: Option<String>,
) -> Result<ExitCode, ClientError> {
    let mut req = json!({"cmd": "recent", "set": name});
    if let Some(w) = &write {
        req["elems"] = json!([w]);
    }
    let r = c.call(req)?;
    if write.is_some() {
        return Ok(ExitCode::SUCCESS);
    }
    // The kernel's line: src=ADDR ttl: T last_seen: J oldest_pkt: N J1, J2, …
    for e in r
        .body
        .get("entries")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let stamps: Vec<String> = e["stamps"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| s.to_string())
            .collect();
        println!(
            "src={} ttl: {} last_seen: {} oldest_pkt: {} {}",
            e["src"].as_str().unwrap_or(""),
            e["ttl"].as_u64().unwrap_or(0),
            e["last_seen"],
            e["oldest_pkt"],
            stamps.join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}
