//! Incremental updates of pure first-match lists: insert or delete one rule
//! without recompiling the trees.
//!
//! The compiled base image stays as it is. Deleted base entries are
//! tombstoned (the walker skips them and keeps scanning its leaf); inserted
//! entries go to a small **overlay** — itself a linear image, recompiled on
//! each change, which is cheap because it is small. Every entry carries a
//! priority (`u64`, its logical position spread out with gaps), so the
//! answer is whichever of the base's first live match and the overlay's
//! first match comes first. When the overlay or the tombstones grow past a
//! threshold, or a gap runs out, everything is merged into a fresh base.

use crate::api::CompileError;
use crate::meta::{BuildOptions, Classifier, Engine};
use parapet_image::KeyWords;
use parapet_model::{DecisionList, Entry, EntryKind, Packet, Verdict};

/// Gap between consecutive priorities after a rebuild: room for ~20
/// successive inserts between two neighbours before a rebuild.
const SPREAD: u64 = 1 << 20;

/// Where an item of the logical list lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// Entry `i` of the base image.
    Base(u32),
    /// Entry `j` of the overlay list.
    Overlay(u32),
}

/// Why an update was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpdateError {
    /// Only terminal (Decide) entries can be inserted, into pure lists.
    NotPure,
    /// Position past the end of the list.
    OutOfRange(usize),
    /// Recompiling failed.
    Compile(CompileError),
}

impl std::fmt::Display for UpdateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpdateError::NotPure => {
                f.write_str("incremental updates need a pure first-match list and terminal rules")
            }
            UpdateError::OutOfRange(p) => write!(f, "position {p} is past the end of the list"),
            UpdateError::Compile(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for UpdateError {}

/// A classifier over a pure first-match list that takes single-rule
/// inserts and deletes.
pub struct Incremental {
    opts: BuildOptions,
    policy: Verdict,
    base_list: DecisionList,
    base: Classifier,
    base_prio: Vec<u64>,
    dead: Vec<bool>,
    dead_count: usize,
    overlay_list: DecisionList,
    overlay: Classifier,
    overlay_prio: Vec<u64>,
    /// The logical list, in order.
    order: Vec<Slot>,
    /// Merge when the overlay has more entries than this.
    pub max_overlay: usize,
    rebuilds: usize,
}

fn empty(policy: &Verdict) -> DecisionList {
    DecisionList {
        entries: Vec::new(),
        policy: policy.clone(),
        set_ref_count: 0,
    }
}

impl Incremental {
    /// Compiles `list` (which must be pure first-match) as the base.
    pub fn new(list: DecisionList, opts: BuildOptions) -> Result<Incremental, UpdateError> {
        if !list.is_pure_first_match() {
            return Err(UpdateError::NotPure);
        }
        // A tombstone uncovers the entries after it: the base's leaves must
        // keep them (the tree would drop what a covering entry shadows).
        let opts = BuildOptions {
            keep_shadowed: true,
            ..opts
        };
        let policy = list.policy.clone();
        let overlay_list = empty(&policy);
        let linear = BuildOptions {
            engine: Engine::Linear,
            ..opts.clone()
        };
        let overlay = Classifier::build(&overlay_list, &linear).map_err(UpdateError::Compile)?;
        let mut inc = Incremental {
            base: Classifier::build(&list, &opts).map_err(UpdateError::Compile)?,
            opts,
            policy,
            base_prio: Vec::new(),
            dead: Vec::new(),
            dead_count: 0,
            base_list: list,
            overlay_list,
            overlay,
            overlay_prio: Vec::new(),
            order: Vec::new(),
            max_overlay: 64,
            rebuilds: 0,
        };
        inc.reset_after_build();
        Ok(inc)
    }

    fn reset_after_build(&mut self) {
        let n = self.base_list.entries.len();
        self.base_prio = (0..n as u64).map(|i| (i + 1) * SPREAD).collect();
        self.dead = vec![false; n];
        self.dead_count = 0;
        self.overlay_list = empty(&self.policy);
        self.overlay_prio.clear();
        self.order = (0..n as u32).map(Slot::Base).collect();
    }

    /// The logical list as it stands.
    pub fn list(&self) -> DecisionList {
        DecisionList {
            entries: self
                .order
                .iter()
                .map(|s| match *s {
                    Slot::Base(i) => self.base_list.entries[i as usize].clone(),
                    Slot::Overlay(j) => self.overlay_list.entries[j as usize].clone(),
                })
                .collect(),
            policy: self.policy.clone(),
            set_ref_count: self.base_list.set_ref_count,
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// True when the list has no entries.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Full rebuilds so far (initial build excluded).
    pub fn rebuilds(&self) -> usize {
        self.rebuilds
    }

    /// Entries waiting in the overlay.
    pub fn overlay_len(&self) -> usize {
        self.overlay_list.entries.len()
    }

    fn prio(&self, s: Slot) -> u64 {
        match s {
            Slot::Base(i) => self.base_prio[i as usize],
            Slot::Overlay(j) => self.overlay_prio[j as usize],
        }
    }

    /// Inserts `entry` so that it becomes entry `pos` of the list.
    pub fn insert(&mut self, pos: usize, entry: Entry) -> Result<(), UpdateError> {
        if !matches!(entry.kind, EntryKind::Decide(_)) {
            return Err(UpdateError::NotPure);
        }
        if pos > self.order.len() {
            return Err(UpdateError::OutOfRange(pos));
        }
        let before = if pos == 0 {
            0
        } else {
            self.prio(self.order[pos - 1])
        };
        let after = match self.order.get(pos) {
            Some(&s) => self.prio(s),
            None => before + 2 * SPREAD,
        };
        if after - before < 2 || self.overlay_list.entries.len() >= self.max_overlay {
            // No room between the neighbours, or the overlay is full: merge.
            let mut list = self.list();
            list.entries.insert(pos, entry);
            return self.rebuild(list);
        }
        let prio = before + (after - before) / 2;
        // Keep the overlay sorted by priority so its first match is the
        // earliest.
        let j = self.overlay_prio.partition_point(|&p| p < prio);
        self.overlay_prio.insert(j, prio);
        self.overlay_list.entries.insert(j, entry);
        for s in &mut self.order {
            if let Slot::Overlay(k) = s {
                if *k as usize >= j {
                    *k += 1;
                }
            }
        }
        self.order.insert(pos, Slot::Overlay(j as u32));
        self.recompile_overlay()
    }

    /// Removes entry `pos` of the list.
    pub fn remove(&mut self, pos: usize) -> Result<Entry, UpdateError> {
        let Some(&slot) = self.order.get(pos) else {
            return Err(UpdateError::OutOfRange(pos));
        };
        self.order.remove(pos);
        match slot {
            Slot::Base(i) => {
                self.dead[i as usize] = true;
                self.dead_count += 1;
                let e = self.base_list.entries[i as usize].clone();
                if self.dead_count * 8 > self.base_list.entries.len().max(64) {
                    let list = self.list();
                    self.rebuild(list)?;
                }
                Ok(e)
            }
            Slot::Overlay(j) => {
                let e = self.overlay_list.entries.remove(j as usize);
                self.overlay_prio.remove(j as usize);
                for s in &mut self.order {
                    if let Slot::Overlay(k) = s {
                        if *k > j {
                            *k -= 1;
                        }
                    }
                }
                self.recompile_overlay()?;
                Ok(e)
            }
        }
    }

    fn recompile_overlay(&mut self) -> Result<(), UpdateError> {
        let linear = BuildOptions {
            engine: Engine::Linear,
            ..self.opts.clone()
        };
        self.overlay =
            Classifier::build(&self.overlay_list, &linear).map_err(UpdateError::Compile)?;
        Ok(())
    }

    fn rebuild(&mut self, list: DecisionList) -> Result<(), UpdateError> {
        self.base = Classifier::build(&list, &self.opts).map_err(UpdateError::Compile)?;
        self.base_list = list;
        self.rebuilds += 1;
        self.reset_after_build();
        self.recompile_overlay()
    }

    /// Deciding rule id and verdict of a packet (0 and the policy when no
    /// rule matches).
    pub fn classify(&self, pkt: &Packet) -> (u32, Verdict) {
        let key = KeyWords::new(pkt, 0);
        self.classify_key(&key)
    }

    /// As [`Incremental::classify`], for a key.
    pub fn classify_key(&self, key: &KeyWords) -> (u32, Verdict) {
        let dead = &self.dead;
        let b = if self.dead_count == 0 {
            self.base.first_match(key)
        } else {
            self.base
                .walker()
                .first_match_where(key, |i| dead[i as usize])
        };
        let o = self.overlay.first_match(key);
        let pb = b.map_or(u64::MAX, |i| self.base_prio[i as usize]);
        let po = o.map_or(u64::MAX, |j| self.overlay_prio[j as usize]);
        if pb == u64::MAX && po == u64::MAX {
            return (0, self.policy.clone());
        }
        let (w, i) = if pb < po {
            (self.base.walker(), b.unwrap_or(0))
        } else {
            (self.overlay.walker(), o.unwrap_or(0))
        };
        (w.rule_id(i), w.verdict(i).clone())
    }
}
