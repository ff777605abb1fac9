//! The `recent` command: an xt_recent table of the dataplane read, or
//! written in `/proc/net/xt_recent/NAME`'s syntax (`+ADDR` adds the
//! address or records one more hit now, `-ADDR` removes it, `/` flushes
//! the table), so a fail2ban action written for xt_recent has a
//! counterpart. The tables live in the kernel (`bpf/lib/stateful.h`) and
//! are not journaled, as the kernel's are not.

use crate::proto::{code, ErrorReply, Outcome};
use crate::state::{invalid, obj, State};
use serde_json::{json, Value};
use std::net::IpAddr;

/// Most addresses one listing returns (the BPF map holds fewer).
const MAX_LISTED: usize = 1 << 16;

fn dp_error(e: impl std::fmt::Display) -> ErrorReply {
    ErrorReply::new(code::IO, format!("recent: {e}"))
}

impl State {
    /// `recent NAME [+ADDR|-ADDR|/]`.
    pub(crate) fn recent(&mut self, name: &str, write: Option<&str>) -> Outcome {
        if name.is_empty() || name.len() >= 200 || name.contains('/') {
            return Err(invalid(format!(
                "recent table name `{name}`: 1 to 199 bytes and no '/'"
            )));
        }
        let table = parapet_model::table_id(name);
        let Some(dp) = self.kernel.dp.as_mut() else {
            return Err(invalid(
                "the dataplane is not loaded (attach first): its recent tables do not exist yet",
            ));
        };
        let addr = |s: &str| -> Result<IpAddr, ErrorReply> {
            s.trim()
                .parse()
                .map_err(|_| invalid(format!("expected an IPv4 or IPv6 address, found `{s}`")))
        };
        match write.map(str::trim) {
            None => {
                let entries: Vec<Value> = dp
                    .recent_list(table, MAX_LISTED)
                    .map_err(dp_error)?
                    .into_iter()
                    .map(|a| {
                        json!({
                            "src": a.addr.to_string(),
                            "ttl": a.ttl,
                            "last_seen": a.last_seen,
                            "oldest_pkt": a.index,
                            "stamps": a.stamps,
                        })
                    })
                    .collect();
                Ok(obj(json!({"table": name, "entries": entries})))
            }
            Some("/") => {
                let n = dp.recent_flush(table).map_err(dp_error)?;
                Ok(obj(json!({"flushed": n})))
            }
            Some(w) if w.starts_with('+') => {
                let a = addr(&w[1..])?;
                let now = parapet_dataplane::stateful::kernel_jiffies()
                    .ok_or_else(|| dp_error("the kernel's jiffies are unknown"))?;
                let new = dp.recent_add(table, a, now).map_err(dp_error)?;
                Ok(obj(json!({"added": new as u32, "refreshed": !new as u32})))
            }
            Some(w) if w.starts_with('-') => {
                let a = addr(&w[1..])?;
                let gone = dp.recent_remove(table, a).map_err(dp_error)?;
                Ok(obj(json!({"removed": gone as u32})))
            }
            Some(w) => Err(invalid(format!(
                "expected +ADDR, -ADDR or / (as /proc/net/xt_recent takes), found `{w}`"
            ))),
        }
    }
}
