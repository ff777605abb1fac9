//! The meta-engine: picks a backend for a decision list and says why, and
//! which user-space engine walks the image: the compact [`FastPath`] for
//! first-match lookups on pure first-match lists, the tree [`Walker`] for
//! everything else.

use crate::api::{CompileError, CompileOptions, CompileStats};
use crate::compile::compile;
use crate::fast::FastPath;
use crate::walk::{RawDecision, Walker};
use parapet_image::{hw, Backend, Image, ImageError, KeyWords};
use parapet_model::{Decision, DecisionList, MarkTable, Packet};
use std::fmt::Write as _;
use std::str::FromStr;

/// Which engine `--engine` asks for.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Engine {
    /// Let the meta-engine choose from the list's size and the policy.
    Auto,
    /// The flat scan: every entry checked in order. O(n) per lookup, O(n)
    /// space.
    Linear,
    /// Range-cut decision trees over rule partitions. O(depth + leaf) per
    /// lookup (depth ≤ 64, leaf ≤ a few entries unless the budget forced
    /// longer ones); space O(n × replication), capped by the budget.
    Tree,
}

impl Engine {
    /// The `--engine` names.
    pub const NAMES: [&'static str; 3] = ["auto", "linear", "tree"];

    /// The `--engine` name.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Auto => "auto",
            Engine::Linear => "linear",
            Engine::Tree => "tree",
        }
    }
}

impl FromStr for Engine {
    type Err = String;

    fn from_str(s: &str) -> Result<Engine, String> {
        match s {
            "auto" => Ok(Engine::Auto),
            "linear" => Ok(Engine::Linear),
            "tree" | "hypersplit" => Ok(Engine::Tree),
            _ => Err(format!(
                "unknown engine '{s}' (expected one of: {})",
                Engine::NAMES.join(", ")
            )),
        }
    }
}

/// What the meta-engine optimizes: the model's one `Policy`.
pub use parapet_model::Policy;

/// Inputs of [`Classifier::build`].
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// Engine to use (`Auto` lets the meta-engine choose).
    pub engine: Engine,
    /// Performance or memory.
    pub policy: Policy,
    /// Bytes the image may take (the rule records are a floor).
    pub max_memory: usize,
    /// Override the leaf size the policy would pick.
    pub leaf_size: Option<usize>,
    /// Split rules into partitions by address specificity (on by default;
    /// off only for experiments).
    pub partition: bool,
    /// Override the multi-way space factor the policy would pick (0 = binary
    /// cuts only).
    pub spfac: Option<f64>,
    /// Keep shadowed entries in the leaves (see
    /// [`CompileOptions::keep_shadowed`]); set by [`crate::Incremental`].
    pub keep_shadowed: bool,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            engine: Engine::Auto,
            policy: Policy::Performance,
            max_memory: 256 << 20,
            leaf_size: None,
            partition: true,
            spfac: None,
            keep_shadowed: false,
        }
    }
}

/// Lists with at most this many entries are scanned linearly under `auto`.
/// The tree's leaves hold 2 entries, so below this the tree *is* a scan;
/// at 25 entries the tree was already ~6× faster than the scan on the
/// worst-case list (`docs/classifier.md`).
pub const LINEAR_CROSSOVER: usize = 4;

/// A compiled classifier: an image, its engines, and how they were chosen.
#[derive(Clone, Debug)]
pub struct Classifier {
    walker: Walker,
    /// The compact copy of the trees for user-space first-match lookups
    /// (pure first-match images only).
    fast: Option<FastPath>,
    engine: Engine,
    stats: CompileStats,
    reasons: Vec<String>,
    entries: usize,
    /// The rules' mark changes, which the image does not carry: decisions
    /// get their mark from the ids of the rules that matched.
    marks: MarkTable,
}

impl Classifier {
    /// Compiles `list` with the engine the options ask for (or the one the
    /// meta-engine picks).
    pub fn build(list: &DecisionList, opts: &BuildOptions) -> Result<Classifier, CompileError> {
        let n = list.entries.len();
        let mut reasons = Vec::new();
        let engine = match opts.engine {
            Engine::Auto if n <= LINEAR_CROSSOVER => {
                reasons.push(format!(
                    "{n} entries ≤ {LINEAR_CROSSOVER}: a scan of compact records beats a tree walk"
                ));
                Engine::Linear
            }
            Engine::Auto => {
                reasons.push(format!(
                    "{n} entries > {LINEAR_CROSSOVER}: a tree makes lookups independent of the rule count"
                ));
                Engine::Tree
            }
            e => {
                reasons.push(format!("engine '{}' requested", e.name()));
                e
            }
        };
        // Leaf size 2 measured best on ClassBench 10k (fewer record checks,
        // which are the cache misses, for ~1.5 more nodes; docs/classifier.md).
        let leaf_size = opts.leaf_size.unwrap_or(match opts.policy {
            Policy::Performance => 2,
            Policy::Memory => 32,
        });
        let max_memory = match opts.policy {
            Policy::Performance => opts.max_memory,
            Policy::Memory => {
                // About twice the records: the trees may add as much again
                // as the rules themselves take, no more.
                let floor = 64 * n + (64 << 10);
                reasons.push(format!(
                    "policy memory: leaves of up to {leaf_size} entries, tree budget ~{} KiB",
                    floor / 1024 * 2
                ));
                opts.max_memory.min(2 * floor)
            }
        };
        let copts = CompileOptions {
            backend: match engine {
                Engine::Linear => Backend::Linear,
                _ => Backend::Tree,
            },
            max_memory,
            leaf_size,
            partition: opts.partition,
            keep_shadowed: opts.keep_shadowed,
            spfac: opts.spfac.unwrap_or(match opts.policy {
                Policy::Performance => 4.0,
                Policy::Memory => 1.5,
            }),
            ..CompileOptions::default()
        };
        let (image, stats) = compile(list, &copts)?;
        if stats.memory_limited {
            reasons.push(format!(
                "memory budget of {} bytes reached: some subtrees stopped cutting and use longer leaves",
                max_memory
            ));
        }
        if stats.work_limited {
            reasons.push(
                "build work budget reached: some subtrees stopped cutting and use longer leaves"
                    .into(),
            );
        }
        Ok(Classifier {
            fast: FastPath::build(&image),
            walker: Walker::new(image),
            engine,
            stats,
            reasons,
            entries: n,
            marks: list.mark_table(),
        })
    }

    /// A classifier over an image loaded from elsewhere (a file, a map).
    pub fn from_image(image: Image) -> Classifier {
        let entries = image.header(hw::N_ENTRIES) as usize;
        let engine = match image.backend() {
            Backend::Linear => Engine::Linear,
            Backend::Tree => Engine::Tree,
        };
        Classifier {
            fast: FastPath::build(&image),
            walker: Walker::new(image),
            engine,
            stats: CompileStats::default(),
            reasons: vec!["loaded from an image".into()],
            entries,
            // an image says nothing of marks (the kernel refuses them)
            marks: MarkTable::default(),
        }
    }

    /// Parses, validates and wraps image bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Classifier, ImageError> {
        Image::from_bytes(bytes).map(Classifier::from_image)
    }

    /// The engine in use (never `Auto`).
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// The image.
    pub fn image(&self) -> &Image {
        self.walker.image()
    }

    /// The tree walker (reads the image words, as the BPF walker does).
    pub fn walker(&self) -> &Walker {
        &self.walker
    }

    /// The fast path, when the image is pure first-match.
    pub fn fast_path(&self) -> Option<&FastPath> {
        self.fast.as_ref()
    }

    /// Bytes of the fast path's compact trees (0 without one).
    pub fn fast_bytes(&self) -> usize {
        self.fast.as_ref().map_or(0, FastPath::bytes)
    }

    /// First-match lookup (see [`Walker::first_match`]) on the fast path
    /// when there is one, else on the image.
    #[inline]
    pub fn first_match(&self, key: &KeyWords) -> Option<u32> {
        match &self.fast {
            Some(f) => f.first_match(self.walker.image().words(), key),
            None => self.walker.first_match(key),
        }
    }

    /// The raw lookup answer: the fast path's first match on pure lists,
    /// the walker's merge scan otherwise.
    fn lookup(&self, key: &KeyWords) -> RawDecision {
        if self.walker.is_pure() {
            RawDecision {
                entry: self.first_match(key),
                nonterminal: Vec::new(),
            }
        } else {
            self.walker.lookup(key)
        }
    }

    /// What the compiler did.
    pub fn stats(&self) -> &CompileStats {
        &self.stats
    }

    /// Image size in bytes (what the memory budget bounds).
    pub fn memory_bytes(&self) -> usize {
        self.image().len_bytes()
    }

    /// Memory user-space lookups read: the image plus the fast path's
    /// compact copy of its trees ([`Classifier::fast_bytes`]).
    pub fn lookup_memory_bytes(&self) -> usize {
        self.memory_bytes() + self.fast_bytes()
    }

    /// Entries of the compiled list.
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// Classifies a packet; `set_bits[n]` is membership in set reference
    /// `n`, as for `DecisionList::classify`.
    pub fn classify(&self, pkt: &Packet, set_bits: &[bool]) -> Decision {
        self.classify_key(&self.key_of(pkt, set_bits))
    }

    /// The key of a packet, with the pattern hits of its bytes when the
    /// image tests `-m string` patterns ([`Walker::fill_patterns`]).
    pub fn key_of(&self, pkt: &Packet, set_bits: &[bool]) -> KeyWords {
        let mut key = KeyWords::from_bits(pkt, set_bits);
        self.walker.fill_patterns(&mut key, pkt);
        key
    }

    /// Classifies a packet checking stateful conditions against `state`
    /// (an [`ImageState`] made for this classifier's image). Images with
    /// stateful entries are never pure, so this is the walker's merge scan.
    pub fn classify_stateful(
        &self,
        pkt: &Packet,
        set_bits: &[bool],
        state: &mut crate::ImageState,
    ) -> Decision {
        let mut d = self
            .walker
            .decide_stateful(&self.key_of(pkt, set_bits), state);
        self.marks.fill(&mut d);
        d
    }

    /// Classifies a key.
    pub fn classify_key(&self, key: &KeyWords) -> Decision {
        let mut d = self.walker.decision(&self.lookup(key));
        self.marks.fill(&mut d);
        d
    }

    /// Deciding rule id (0 = policy) of one key.
    pub fn classify_id(&self, key: &KeyWords) -> u32 {
        self.lookup(key).entry.map_or(0, |i| self.walker.rule_id(i))
    }

    /// Full decisions for many keys.
    pub fn classify_batch(&self, keys: &[KeyWords], out: &mut [Decision]) {
        assert_eq!(keys.len(), out.len(), "one output per key");
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = self.classify_key(k);
        }
    }

    /// Deciding rule ids for many keys, lock-stepping 16 lookups at a time
    /// on pure first-match lists to overlap their memory latency.
    pub fn classify_batch_ids(&self, keys: &[KeyWords], out: &mut [u32]) {
        match &self.fast {
            Some(f) => {
                assert_eq!(keys.len(), out.len(), "one output per key");
                f.first_match_ids(self.walker.image().words(), keys, out)
            }
            None => self.walker.first_match_ids(keys, out),
        }
    }

    /// Deciding rule ids for packets without sets: keys are built in
    /// chunks on the stack and classified with
    /// [`Classifier::classify_batch_ids`].
    pub fn classify_packets_ids(&self, pkts: &[Packet], out: &mut [u32]) {
        assert_eq!(pkts.len(), out.len(), "one output per packet");
        let mut keys = [KeyWords::default(); 256];
        for (pc, oc) in pkts.chunks(256).zip(out.chunks_mut(256)) {
            for (k, p) in keys.iter_mut().zip(pc) {
                *k = KeyWords::new(p, 0);
                self.walker.fill_patterns(k, p);
            }
            self.classify_batch_ids(&keys[..pc.len()], oc);
        }
    }

    /// Why this engine, and what it built.
    pub fn explain(&self) -> String {
        let mut s = String::new();
        let s_ = &self.stats;
        let _ = writeln!(
            s,
            "engine: {} ({} entries, {} partition(s))",
            self.engine.name(),
            self.entries,
            self.walker.partitions()
        );
        for r in &self.reasons {
            let _ = writeln!(s, "  because: {r}");
        }
        let _ = writeln!(
            s,
            "  complexity: {}",
            match self.engine {
                Engine::Linear => "lookup O(n) entry checks; space O(n)",
                _ => "lookup O(partitions × (depth + leaf)) — independent of n for a fixed depth cap; space O(n × replication) ≤ budget",
            }
        );
        let mut worst_lines = 0usize;
        let rec_lines = s_.max_record_words.div_ceil(16).max(1);
        for p in &s_.partitions {
            let _ = writeln!(
                s,
                "  partition '{}': {} entries, depth {}, {} nodes, {} leaves, longest leaf {}, replication {:.2}",
                p.name, p.entries, p.depth, p.nodes, p.leaves, p.max_leaf, p.replication
            );
            // One cache line per node, then per leaf entry the entry-table
            // word and its record.
            worst_lines += p.depth + 1 + p.max_leaf * (1 + rec_lines);
        }
        if !s_.partitions.is_empty() {
            let _ = writeln!(
                s,
                "  worst case per lookup: ≤ {worst_lines} memory accesses (cache lines: nodes on the deepest paths, leaf words, entry records)"
            );
        }
        let _ = writeln!(
            s,
            "  memory: {} bytes ({} bytes of rule records); user-space fast path: {} bytes more",
            self.memory_bytes(),
            s_.entry_words * 4,
            self.fast_bytes()
        );
        let _ = writeln!(s, "  build: {:.1} ms", s_.build_ms);
        s
    }
}
