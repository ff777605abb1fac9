//! Choosing and running an engine: the linear reference, the flat
//! decision-list scan, or a compiled classifier (picked by the meta-engine
//! under `auto`).

use anyhow::{anyhow, bail, Result};
use clap::Args;
use parapet_compile::{BuildOptions, Classifier, CompileError, KeyWords, Policy};
use parapet_model::{
    flatten, ChainId, Decision, DecisionList, Field, LinearEngine, NoSets, Packet, Ruleset,
    SetLookup,
};
use std::path::PathBuf;

/// Options shared by the commands that classify.
#[derive(Args, Clone, Debug)]
pub struct EngineArgs {
    /// Engine: auto (the meta-engine's choice), linear (the reference: walks chains as
    /// iptables does), flat (decision-list scan), scan (compiled linear image), tree
    /// (compiled decision trees).
    #[arg(long, default_value = "auto")]
    pub engine: String,
    /// Ruleset format: auto, iptables-save, ip6tables-save, nft, classbench.
    #[arg(long, default_value = "auto")]
    pub format: String,
    /// Base chain to evaluate: CHAIN (table filter) or TABLE/CHAIN. Default filter/INPUT,
    /// or the one base chain on the input hook.
    #[arg(long)]
    pub chain: Option<String>,
    /// Set definitions to load (ipset save or nft set text); repeatable.
    #[arg(long = "sets", value_name = "FILE")]
    pub sets: Vec<PathBuf>,
    /// Meta-engine policy: performance or memory.
    #[arg(long, default_value = "performance")]
    pub policy: String,
    /// Memory budget of the compiled classifier: bytes, or with K, M, G.
    #[arg(long = "max-memory", value_name = "SIZE")]
    pub max_memory: Option<String>,
    /// An address of the host, ADDR or ADDR/LEN (repeatable): packets from or to it
    /// have address type LOCAL (-m addrtype, fib … type), and with /LEN (IPv4) the
    /// subnet's broadcast address has type BROADCAST; other addresses are typed by
    /// prefix.
    #[arg(long = "local-addr", value_name = "ADDR[/LEN]")]
    pub local_addr: Vec<String>,
}

/// The host's addresses and broadcast addresses of `--local-addr`.
#[derive(Debug, Default, Clone)]
pub struct HostAddrs {
    /// LOCAL addresses (field values: IPv4 as 32 bits).
    pub local: Vec<u128>,
    /// BROADCAST addresses.
    pub broadcast: Vec<u128>,
}

impl HostAddrs {
    /// Reads `--local-addr` values.
    pub fn parse(specs: &[String]) -> Result<HostAddrs> {
        let mut h = HostAddrs::default();
        for spec in specs {
            let (addr, len) = match spec.split_once('/') {
                Some((a, l)) => (a, Some(l)),
                None => (spec.as_str(), None),
            };
            let ip: std::net::IpAddr = addr.parse().map_err(|_| {
                anyhow!("--local-addr '{spec}': expected an address, optionally /LEN")
            })?;
            let (family, v) = parapet_model::from_ip(ip);
            h.local.push(v);
            if let (Some(l), parapet_model::Family::V4) = (len, family) {
                let l: u32 = l.parse().ok().filter(|&l| l <= 32).ok_or_else(|| {
                    anyhow!("--local-addr '{spec}': expected a prefix length 0-32")
                })?;
                // `ip addr add A/LEN brd +`: the all-ones host part (none
                // for /31 and /32).
                if l < 31 {
                    h.broadcast.push(v | (u32::MAX >> l) as u128);
                }
            }
        }
        Ok(h)
    }

    /// Types `pkt`'s addresses.
    pub fn apply(&self, pkt: &mut Packet) {
        pkt.set_host_addrs(&self.local, &self.broadcast);
    }
}

/// A classifier of one chain, ready to answer, whichever engine was asked
/// for (not [`parapet_compile::Engine`], which names the compiled kinds).
pub enum ChainClassifier<'a> {
    /// The specification: walks chains as iptables does.
    Linear(LinearEngine<'a>),
    /// The flattened decision list, scanned in order.
    Flat(DecisionList),
    /// A compiled image (scan or trees), chosen by the meta-engine or named.
    Compiled(Box<Classifier>),
}

/// Parses `64M`, `1G`, `65536`.
pub fn parse_size(s: &str) -> Result<usize> {
    let s = s.trim();
    let (digits, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (
            &s[..i],
            match c.to_ascii_uppercase() {
                'K' => 1usize << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                _ => bail!("size '{s}': expected a number with an optional K, M or G suffix"),
            },
        ),
        _ => (s, 1),
    };
    let n: usize = digits
        .parse()
        .map_err(|_| anyhow!("size '{s}': expected a number with an optional K, M or G suffix"))?;
    n.checked_mul(mult)
        .ok_or_else(|| anyhow!("size '{s}' is too large"))
}

impl<'a> ChainClassifier<'a> {
    /// Builds the engine named in `args` over `chain` of `rs`.
    pub fn build(
        rs: &'a Ruleset,
        chain: ChainId,
        args: &EngineArgs,
    ) -> Result<ChainClassifier<'a>> {
        // A time window with another stateful condition in one rule is
        // not compiled (docs/syntax.md, "Time conditions"), nor are address
        // types beyond the host's local table (UNREACHABLE, …) nor the
        // conntrack original source port and addresses: `auto` picks the
        // linear engine for them. `-m string` compiles (the pattern hits,
        // image version 12) unless a chain has more distinct searches than
        // the image's pattern table holds; then, below, the linear engine
        // too.
        let timed = args.engine == "auto"
            && rs.rules().any(|r| {
                r.time_with_another_condition()
                    || [
                        Field::CtOrigSrcPort,
                        Field::CtOrigSrc,
                        Field::CtOrigDst,
                        Field::CtReplSrc,
                        Field::CtReplDst,
                    ]
                    .iter()
                    .any(|&f| r.all_matches().get(f).is_some())
                    || [Field::SrcType, Field::DstType].iter().any(|&f| {
                        r.all_matches().get(f).is_some_and(|set| {
                            !parapet_model::dataplane_typed(r.all_matches().get(Field::Family), set)
                        })
                    })
            });
        if args.engine == "linear" || timed {
            return Ok(ChainClassifier::Linear(
                LinearEngine::new(rs, chain).map_err(|e| anyhow!("{e}"))?,
            ));
        }
        let compiled = match args.engine.as_str() {
            "flat" => {
                let list = flatten(rs, chain).map_err(|e| anyhow!("{e}"))?;
                return Ok(ChainClassifier::Flat(list));
            }
            "auto" => parapet_compile::Engine::Auto,
            "scan" => parapet_compile::Engine::Linear,
            "tree" => parapet_compile::Engine::Tree,
            other => bail!("unknown engine '{other}' (expected auto, linear, flat, scan or tree)"),
        };
        let policy = match args.policy.as_str() {
            "performance" => Policy::Performance,
            "memory" => Policy::Memory,
            other => bail!("unknown policy '{other}' (expected performance or memory)"),
        };
        let mut opts = BuildOptions {
            engine: compiled,
            policy,
            ..BuildOptions::default()
        };
        if let Some(m) = &args.max_memory {
            opts.max_memory = parse_size(m)?;
        }
        let list = flatten(rs, chain).map_err(|e| anyhow!("{e}"))?;
        let classifier = match Classifier::build(&list, &opts) {
            Ok(c) => c,
            Err(CompileError::HostField { field, .. })
                if args.engine == "auto" && field == "string-rows" =>
            {
                return Ok(ChainClassifier::Linear(
                    LinearEngine::new(rs, chain).map_err(|e| anyhow!("{e}"))?,
                ));
            }
            Err(e) => bail!("{e}"),
        };
        Ok(ChainClassifier::Compiled(Box::new(classifier)))
    }

    /// The engine's name, as `--engine` spells it.
    pub fn name(&self) -> &'static str {
        match self {
            ChainClassifier::Linear(_) => "linear",
            ChainClassifier::Flat(_) => "flat",
            ChainClassifier::Compiled(c) => match c.engine() {
                parapet_compile::Engine::Linear => "scan",
                parapet_compile::Engine::Tree => "tree",
                parapet_compile::Engine::Auto => "auto",
            },
        }
    }

    /// Classifies one packet.
    pub fn classify(&self, rs: &Ruleset, pkt: &Packet, sets: &dyn SetLookup) -> Result<Decision> {
        match self {
            ChainClassifier::Linear(e) => e.classify(pkt, sets).map_err(|e| anyhow!("{e}")),
            ChainClassifier::Flat(list) => Ok(list.classify(pkt, &set_bits(rs, pkt, sets))),
            ChainClassifier::Compiled(c) => Ok(c.classify(pkt, &set_bits(rs, pkt, sets))),
        }
    }

    /// Memory held by the engine's data, in bytes (compiled engines: the image plus the user-space fast path).
    pub fn memory_bytes(&self, rs: &Ruleset) -> usize {
        let matches_bytes = |m: &parapet_model::Matches| {
            m.iter()
                .map(|(_, s)| 24 + s.ranges().len() * 32)
                .sum::<usize>()
                + 24
        };
        match self {
            ChainClassifier::Linear(_) => rs.rules().map(|r| 64 + matches_bytes(&r.matches)).sum(),
            ChainClassifier::Flat(list) => list
                .entries
                .iter()
                .map(|e| 48 + matches_bytes(&e.matches))
                .sum(),
            ChainClassifier::Compiled(c) => c.lookup_memory_bytes(),
        }
    }

    /// What the engine is, what it costs, and why it was chosen.
    pub fn explain(&self, rs: &Ruleset) -> String {
        match self {
            ChainClassifier::Linear(_) => format!(
                "engine: linear (the reference)\n  walks chains as iptables does; lookup O(rules), space O(rules)\n  rules: {}\n",
                rs.rule_count()
            ),
            ChainClassifier::Flat(list) => format!(
                "engine: flat (decision-list scan)\n  lookup O(entries), space O(entries)\n  entries after inlining jumps: {}\n  memory: {} bytes\n",
                list.entries.len(),
                self.memory_bytes(rs)
            ),
            ChainClassifier::Compiled(c) => c.explain(),
        }
    }
}

/// Membership bits of `pkt` for every set reference of `rs`.
pub fn set_bits(rs: &Ruleset, pkt: &Packet, sets: &dyn SetLookup) -> Vec<bool> {
    rs.set_refs.iter().map(|r| sets.contains(r, pkt)).collect()
}

/// The compiled walker's key of a packet.
pub fn key(rs: &Ruleset, pkt: &Packet, sets: &dyn SetLookup) -> KeyWords {
    KeyWords::from_bits(pkt, &set_bits(rs, pkt, sets))
}

/// Set membership for offline use: the sets of `--sets` files and of the
/// ruleset file's own nft `set` blocks.
pub fn sets(args: &EngineArgs, parsed: &parapet_parse::Parsed) -> Result<Box<dyn SetLookup>> {
    if args.sets.is_empty() && parsed.set_blocks.is_empty() {
        if let Some(r) = parsed.ruleset.set_refs.first() {
            bail!(
                "the ruleset uses set '{}'; load its definition with --sets FILE",
                r.name
            );
        }
        return Ok(Box::new(NoSets));
    }
    Ok(Box::new(crate::set_lookup::StoreLookup(
        crate::set_lookup::load(&args.sets, parsed)?,
    )))
}
