//! The nft table that makes the kernel track connections.
//!
//! The conntrack lookup (`Dataplane::set_conntrack`) only finds entries
//! while the kernel tracks connections in the network namespace, and it
//! does so only while some netfilter rule there needs conntrack
//! (`nf_ct_netns_get`, taken when an nft `ct` expression is loaded). With
//! no iptables or nft rules at all every lookup misses and every reply
//! looks NEW. [`ConntrackTable::install`] loads the smallest such rule —
//! one `ct state` counter without a verdict, so it changes no packet's
//! fate — in a table of its own, with one `nft -f -` (once per apply,
//! never per packet or set change); dropping the value deletes it again.

use std::io::Write;
use std::process::{Command, Stdio};

/// A conntrack-enabling nft table that exists while this value does.
#[derive(Debug)]
pub struct ConntrackTable {
    name: String,
}

/// The table's text: `add` + `delete` first make reloading it idempotent
/// (one transaction: the old table and its rule go, the new come).
fn script(name: &str) -> String {
    format!(
        "add table inet {name}\n\
         delete table inet {name}\n\
         table inet {name} {{\n \
         chain track {{\n  \
         type filter hook input priority 0; policy accept;\n  \
         ct state untracked counter\n \
         }}\n\
         }}\n"
    )
}

fn nft(stdin: &str) -> Result<(), String> {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running nft: {e}"))?;
    if let Some(mut i) = child.stdin.take() {
        i.write_all(stdin.as_bytes())
            .map_err(|e| format!("writing to nft: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("running nft: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "nft: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl ConntrackTable {
    /// Creates (or replaces) table `inet NAME` in the current network
    /// namespace. `name` must be an nft identifier.
    pub fn install(name: &str) -> Result<ConntrackTable, String> {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("bad nft table name {name:?}"));
        }
        nft(&script(name))?;
        Ok(ConntrackTable {
            name: name.to_string(),
        })
    }

    /// Deletes table `inet NAME` if it exists (one left behind by a
    /// process that was killed); errors are ignored.
    pub fn delete_stale(name: &str) {
        let _ = nft(&format!("delete table inet {name}\n"));
    }

    /// The table's name (`inet NAME`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Deletes the table, reporting failure (dropping deletes it too, but
    /// silently).
    pub fn remove(self) -> Result<(), String> {
        let r = nft(&format!("delete table inet {}\n", self.name));
        std::mem::forget(self);
        r
    }
}

impl Drop for ConntrackTable {
    fn drop(&mut self) {
        let _ = nft(&format!("delete table inet {}\n", self.name));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_script_replaces_the_table_in_one_go() {
        let s = super::script("pp_ct");
        assert!(s.starts_with("add table inet pp_ct\ndelete table inet pp_ct\n"));
        assert!(s.contains("ct state untracked counter"));
        assert!(super::ConntrackTable::install("bad name").is_err());
        assert!(super::ConntrackTable::install("").is_err());
    }
}
