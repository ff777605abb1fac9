//! Set membership for offline classification: rules' set references
//! answered from a [`SetStore`] loaded from ipset-save or nft set files.

use anyhow::{anyhow, bail, Context, Result};
use parapet_model::{Packet, Ruleset, SetKeySpec, SetLookup, SetRef};
use parapet_sets::SetStore;
use std::path::Path;

/// A [`SetStore`] seen through the model's [`SetLookup`].
pub struct StoreLookup(pub SetStore);

impl SetLookup for StoreLookup {
    fn contains(&self, set_ref: &SetRef, pkt: &Packet) -> bool {
        // A packet of the other family, or a key the set's type cannot
        // hold, is not a member (ipset behaves the same way); a list:set
        // answers with its first matching member.
        self.0.ref_matches(set_ref, pkt).unwrap_or(false)
    }
}

/// Loads set files (ipset save or nft set text, detected from the content)
/// plus the nft `set` blocks of the ruleset file itself, and checks that
/// every set the rules use exists.
pub fn load(files: &[std::path::PathBuf], parsed: &parapet_parse::Parsed) -> Result<SetStore> {
    let mut store = SetStore::new();
    for block in &parsed.set_blocks {
        store.load_nft(&block.text).map_err(|e| {
            let (l, c) = block.file_position(e.line, e.column);
            anyhow!("{l}:{c}: set '{}': {}", block.name, e.message)
        })?;
    }
    for path in files {
        load_file(&mut store, path)?;
    }
    check_refs(&store, &parsed.ruleset)?;
    Ok(store)
}

fn load_file(store: &mut SetStore, path: &Path) -> Result<()> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    let result = match parapet_parse::detect(&text) {
        parapet_parse::Format::Ipset => store.load_ipset(&text),
        _ => store.load_nft(&text),
    };
    // The sets crate reports LINE:COL; the file name makes it FILE:LINE:COL.
    result
        .map(|_| ())
        .map_err(|e| anyhow!("{}:{e}", path.display()))
}

fn check_refs(store: &SetStore, rs: &Ruleset) -> Result<()> {
    for r in &rs.set_refs {
        if let Some(list) = store.list(&r.name) {
            if !matches!(r.key, SetKeySpec::Flags(_)) {
                bail!(
                    "set '{}' is an ipset list:set: only iptables' --match-set can use it",
                    r.name
                );
            }
            // Members whose key carries what the packet key does not would
            // never match: refuse them as a direct reference is refused.
            for m in &list.members {
                if let Some(part) = parapet_sets::unreferenceable(store.key_dims(&m.name)) {
                    bail!("list:set '{}' holds set '{}', keyed on {part}, which rules cannot match yet", r.name, m.name);
                }
            }
            continue;
        }
        if store.get(&r.name).is_none() {
            bail!(
                "the ruleset uses set '{}', which no --sets file defines",
                r.name
            );
        }
        if let Some(part) = parapet_sets::unreferenceable(store.key_dims(&r.name)) {
            bail!(
                "set '{}' is keyed on {part}, which rules cannot match yet (parapet's packet key does not carry it): the set loads and lists, but a rule cannot use it",
                r.name
            );
        }
        if let SetKeySpec::Flags(dirs) = &r.key {
            let dims = store.key_dims(&r.name).len();
            if dirs.len() > dims {
                bail!(
                    "--match-set {} has {} direction flags but the set's key has {dims} part(s)",
                    r.name,
                    dirs.len()
                );
            }
        }
    }
    Ok(())
}
