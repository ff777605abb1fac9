//! The one way out to the fleet: [`crate::state::State::commit`] hands a
//! client's change of a shared set to [`publish`]. Kept apart from the
//! applier (the parent module), which needs the daemon's shared state:
//! the commit path must not import it back.

use crate::change::{Change, SetSpec, BAN4, BAN6};
use parapet_fleet::{Fleet, Kind};
use parapet_sets::KeyPart;
use std::collections::HashMap;

/// Whether changes of set `name` are replicated: the ban sets, and sets
/// created with the `shared` flag.
pub fn is_shared(specs: &HashMap<String, SetSpec>, name: &str) -> bool {
    name == BAN4
        || name == BAN6
        || specs
            .get(name)
            .is_some_and(|s| s.flags.iter().any(|f| f == "shared"))
}

/// The hook of [`State::commit`] for a client's change: queues it for the
/// fleet when its set is shared (elements with their absolute expiries).
pub(crate) fn publish(
    fleet: &Fleet,
    specs: &HashMap<String, SetSpec>,
    change: &Change,
    dims: &[KeyPart],
) {
    let (kind, name, elems) = match change {
        Change::SetAdd { name, elems } => (Kind::Add, name, &elems[..]),
        Change::SetDel { name, elems } => (Kind::Del, name, &elems[..]),
        Change::SetFlush { name } => (Kind::Flush, name, &[][..]),
        _ => return,
    };
    if !is_shared(specs, name) {
        return;
    }
    let texts: Vec<(String, u64)> = elems
        .iter()
        .map(|e| (e.key_text(dims), e.expires.unwrap_or(0)))
        .collect();
    fleet.publish(kind, name, &texts);
}
