//! The [`Dataplane`]: loads the embedded BPF object with aya, attaches it at
//! XDP or tc, and exposes the control surface (rule actions, the interim
//! classifier, image slots with a generation flip, counters, statistics,
//! rate-limited log events, and `BPF_PROG_TEST_RUN`).

use std::collections::HashMap;
use std::time::Duration;

use aya::maps::lpm_trie::{Key as LpmKey, LpmTrie};
use aya::maps::{
    Array, ArrayOfMaps, HashMap as BpfHashMap, MapData, MapError, PerCpuArray, RingBuf,
};
use aya::programs::tc::{SchedClassifierLinkId, TcAttachType};
use aya::programs::xdp::XdpLinkId;
use aya::programs::{ProgramError, SchedClassifier, TestRun, TestRunOptions, Xdp, XdpMode};
use aya::{Ebpf, EbpfLoader};

use crate::abi::reject;
use crate::abi::{
    Counter, DebugRec, IfName, KernelVerdict, LiteKey, LogLimit, PacketKey, ParseStatus, RawAction,
    RawLogEvent, RawSetDesc, RawSetRef, SetTupleKey, SetVal, Stat, ACTION_F_LOG, HOOK_TC,
    IMAGE_DEFAULT_SLOT_PAGES, IMAGE_PAGE_BYTES, MAX_SETS, MAX_SET_REFS, STAT_MAX,
};
use crate::sets::{
    EntryKey, PacketPart, SetDim, SetElement, SetError, SetSizing, SetState, Writes,
};

/// The compiled BPF object (`bpf/parapet.bpf.c`, built by `build.rs`).
pub static BPF_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/parapet.bpf.o"));

const PROG_XDP: &str = "parapet_xdp";
const PROG_TC: &str = "parapet_tc";

/// Where the program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hook {
    /// eXpress Data Path, before the kernel allocates an skb.
    Xdp,
    /// tc ingress (TCX on kernels >= 6.6).
    Tc,
}

/// XDP attach mode. Ignored for [`Hook::Tc`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// In the driver; falls back to [`Mode::Skb`] (with a note) if the
    /// driver has no XDP support.
    Native,
    /// Generic XDP, run by the kernel stack after skb allocation.
    Skb,
}

/// Load-time sizing and options.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Largest rule id; the action, counter and log-limit maps get
    /// `max_rules + 1` entries (entry 0 is the policy).
    pub max_rules: u32,
    /// 4 KiB pages per image slot (two slots are allocated).
    pub slot_pages: u32,
    /// Record every packet's key and decision in the debug map (tests; costs
    /// a map write per packet, compiled out by the verifier otherwise).
    pub debug: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            max_rules: 4095,
            slot_pages: IMAGE_DEFAULT_SLOT_PAGES,
            debug: false,
        }
    }
}

/// Optional parts of the program, chosen at load time (see
/// [`Dataplane::load_with`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Features {
    /// Link the conntrack lookup in and start with it on: TCP and UDP
    /// packets (and ICMP errors quoting them) are looked up in the
    /// kernel's conntrack table and the image gets their `--ctstate`
    /// (docs/dataplane.md, *Conntrack state*). Off: the lookup is not
    /// linked in and every packet is UNTRACKED. Needs the nf_conntrack
    /// kfuncs in vmlinux; without them the load succeeds with the lookup
    /// unavailable and [`Dataplane::conntrack_note`] says why. When
    /// linked in, [`Dataplane::set_conntrack`] turns it off and on
    /// without reloading.
    pub conntrack: bool,
}

/// Errors of the dataplane API.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Loading the object or creating its maps failed.
    #[error("loading the BPF object: {0}")]
    Load(#[from] aya::EbpfError),
    /// Verifying, attaching, detaching or test-running a program failed.
    #[error("BPF program: {0}")]
    Program(#[from] ProgramError),
    /// A map operation failed.
    #[error("BPF map: {0}")]
    Map(#[from] MapError),
    /// The object lacks a map or program this code expects (build mismatch).
    #[error("BPF object has no {0}")]
    Missing(&'static str),
    /// A rule id beyond `LoadOptions::max_rules`.
    #[error("rule id {rule} out of range (max {max})")]
    RuleOutOfRange {
        /// The id.
        rule: u32,
        /// The largest valid id.
        max: u32,
    },
    /// An image larger than a slot.
    #[error("image of {len} bytes exceeds the slot size of {cap} bytes")]
    ImageTooLarge {
        /// Image size.
        len: usize,
        /// Slot size.
        cap: usize,
    },
    /// `swap` without a preceding `write_image`.
    #[error("no image written since the last swap")]
    NothingToSwap,
    /// A detach of an attachment this dataplane does not know.
    #[error("unknown attachment {0}")]
    UnknownAttachment(u64),
    /// `write_image` refused the bytes.
    #[error(transparent)]
    BadImage(#[from] crate::image::BadImage),
    /// The conntrack lookup was asked for but is not linked in.
    #[error("cannot turn the conntrack lookup on: {0}")]
    ConntrackUnavailable(String),
    /// Frames shorter than an Ethernet header cannot be test-run.
    #[error("BPF_PROG_TEST_RUN needs at least 14 bytes, got {0}")]
    FrameTooShort(usize),
    /// A set operation was refused.
    #[error(transparent)]
    Set(#[from] SetError),
    /// The embedded object could not be prepared for this kernel.
    #[error("preparing the BPF object: {0}")]
    Object(String),
}

/// Result alias.
pub type Result<T> = std::result::Result<T, Error>;

/// A live attachment, returned by [`Dataplane::attach`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attached {
    /// Handle for [`Dataplane::detach`].
    pub id: u64,
    /// Interface name.
    pub iface: String,
    /// Hook.
    pub hook: Hook,
    /// XDP mode actually used (`None` for tc).
    pub mode: Option<Mode>,
    /// Set when the request could not be met exactly (e.g. native XDP
    /// unsupported, fell back to skb mode).
    pub note: Option<String>,
}

enum LinkId {
    Xdp(XdpLinkId),
    Tc(SchedClassifierLinkId),
}

/// One ring-buffer log event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogEvent {
    /// CLOCK_MONOTONIC nanoseconds at the hook.
    pub ts_ns: u64,
    /// Rule that matched (0 = policy).
    pub rule_id: u32,
    /// Its verdict.
    pub verdict: KernelVerdict,
    /// Hook that saw the packet.
    pub hook: Hook,
    /// The packet.
    pub key: PacketKey,
}

/// Dataplane-wide statistics, summed over CPUs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats(pub Vec<u64>);

impl Stats {
    /// One statistic.
    pub fn get(&self, s: Stat) -> u64 {
        self.0.get(s as usize).copied().unwrap_or(0)
    }
}

/// Outcome of one `BPF_PROG_TEST_RUN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestRunOutcome {
    /// Raw program return code (XDP_* or TC_ACT_*).
    pub retval: u32,
    /// `true` when the code lets the packet through (XDP_PASS / TC_ACT_OK).
    pub passed: bool,
    /// Kernel-measured time per run (averaged over `repeat`).
    pub duration: Duration,
}

/// The debug record decoded (test mode, see [`LoadOptions::debug`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Parsed key.
    pub key: PacketKey,
    /// Parser outcome.
    pub status: ParseStatus,
    /// Deciding rule (0 = policy, also for unparsed packets).
    pub rule_id: u32,
    /// Applied verdict.
    pub verdict: KernelVerdict,
    /// Packets recorded so far.
    pub seq: u32,
    /// True when the classifier image decided (false: interim classifier).
    pub by_image: bool,
    /// Rule ids of the image's non-terminal matches (LOG, counters,
    /// jumps, counted RETURNs), in evaluation order, at most 16.
    pub nonterminal: Vec<u32>,
    /// Why the image walker gave up on this packet, 0 when it did not (the
    /// codes are the `w->err` assignments in `bpf/lib/walk.h`).
    pub walk_err: u32,
    /// The REJECT type (`abi::reject::*`) when the verdict is REJECT.
    pub reject: u8,
    /// The ctstate the classifier saw (`parapet_image::ct`).
    pub ctstate: u32,
    /// The set bits of the image key (bit n = member of set reference n),
    /// as the kernel computed them; 0 when the image did not decide.
    pub set_bits: u64,
}

/// XDP_DROP / XDP_PASS and TC_ACT_OK / TC_ACT_SHOT, from linux/bpf.h and
/// linux/pkt_cls.h.
const XDP_PASS: u32 = 2;
const TC_ACT_OK: u32 = 0;

/// The loaded BPF dataplane and its maps.
pub struct Dataplane {
    ebpf: Ebpf,
    max_rules: u32,
    slot_pages: u32,
    generation: u32,
    staged: bool,
    next_id: u64,
    links: HashMap<u64, LinkId>,
    actions: Array<MapData, RawAction>,
    counters: PerCpuArray<MapData, Counter>,
    log_limits: Array<MapData, LogLimit>,
    stats: PerCpuArray<MapData, u64>,
    lite: BpfHashMap<MapData, LiteKey, u32>,
    image: Array<MapData, [u8; IMAGE_PAGE_BYTES]>,
    gen: Array<MapData, u32>,
    debug: Array<MapData, DebugRec>,
    ifnames: BpfHashMap<MapData, u32, IfName>,
    rcu_barrier: ArrayOfMaps<MapData, Array<MapData, u32>>,
    log: RingBuf<MapData>,
    set_refs: Array<MapData, RawSetRef>,
    set_descs: Array<MapData, RawSetDesc>,
    set_lpm: LpmTrie<MapData, [u8; 20], SetVal>,
    set_tuple: BpfHashMap<MapData, SetTupleKey, SetVal>,
    /// User-space mirrors of the sets, by id.
    sets: HashMap<u32, SetState>,
    /// The reference table that goes live with the next swap.
    staged_refs: Vec<RawSetRef>,
    /// The live image's reference table.
    live_refs: Vec<RawSetRef>,
    /// Set ids by name (`install_sets`).
    pub(crate) set_names: HashMap<String, u32>,
    reject_limit: Array<MapData, LogLimit>,
    config: Array<MapData, u32>,
    /// The lookup is linked in (load time).
    conntrack_linked: bool,
    /// The runtime switch (`parapet_config[CFG_CT]`).
    conntrack: bool,
    conntrack_note: Option<String>,
}

/// `parapet_config` word of the conntrack switch (bpf/lib/maps.h).
const CFG_CT: u32 = 0;

impl std::fmt::Debug for Dataplane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dataplane")
            .field("max_rules", &self.max_rules)
            .field("slot_pages", &self.slot_pages)
            .field("generation", &self.generation)
            .field("attachments", &self.links.len())
            .finish_non_exhaustive()
    }
}

/// GCRA parameters of a token bucket; rate 0 gives interval 0 (closed).
fn gcra(rate_per_sec: u32, burst: u32) -> LogLimit {
    if rate_per_sec == 0 {
        return LogLimit::default();
    }
    let interval_ns = 1_000_000_000 / u64::from(rate_per_sec);
    LogLimit {
        interval_ns: interval_ns.max(1),
        tolerance_ns: interval_ns * u64::from(burst.max(1) - 1),
        tat_ns: 0,
    }
}

fn take(ebpf: &mut Ebpf, name: &'static str) -> Result<aya::maps::Map> {
    ebpf.take_map(name).ok_or(Error::Missing(name))
}

impl Dataplane {
    /// Load and verify both programs and create the maps. Needs
    /// `CAP_BPF` + `CAP_NET_ADMIN` (or root). Nothing is attached yet; the
    /// policy is ACCEPT and the interim classifier is empty.
    pub fn load(opts: &LoadOptions) -> Result<Self> {
        Self::load_sized(opts, &SetSizing::default())
    }

    /// [`Dataplane::load`] with explicit sizes of the set element maps.
    pub fn load_sized(opts: &LoadOptions, sizing: &SetSizing) -> Result<Self> {
        Self::load_with(opts, sizing, &Features::default())
    }

    /// [`Dataplane::load_sized`] with optional [`Features`].
    pub fn load_with(opts: &LoadOptions, sizing: &SetSizing, features: &Features) -> Result<Self> {
        // aya 0.14 cannot link kfuncs: resolve them against this kernel's
        // BTF first (src/kfunc.rs).
        let kernel_btf = aya::Btf::from_sys_fs().ok();
        let (object, missing) =
            crate::kfunc::resolve(BPF_OBJECT, kernel_btf.as_ref()).map_err(Error::Object)?;
        let conntrack_note = if !features.conntrack {
            None
        } else if kernel_btf.is_none() {
            Some("conntrack lookup off: no /sys/kernel/btf/vmlinux".to_string())
        } else if !missing.is_empty() {
            Some(format!(
                "conntrack lookup off: the kernel lacks {} (nf_conntrack not built in?)",
                missing.join(", ")
            ))
        } else {
            None
        };
        let conntrack = features.conntrack && conntrack_note.is_none();
        let ct_mode = u32::from(conntrack);
        let entries = opts.max_rules.saturating_add(1);
        let slot_pages = opts.slot_pages.max(1);
        let debug_mode: u32 = opts.debug.into();
        let mut ebpf = EbpfLoader::new()
            .map_max_entries("parapet_actions", entries)
            .map_max_entries("parapet_counters", entries)
            .map_max_entries("parapet_log_limits", entries)
            .map_max_entries("parapet_image", slot_pages.saturating_mul(2))
            .map_max_entries("parapet_set_lpm", sizing.lpm_entries.max(1))
            .map_max_entries("parapet_set_tuple", sizing.tuple_entries.max(1))
            .override_global("parapet_debug_mode", &debug_mode, true)
            .override_global("parapet_slot_pages", &slot_pages, true)
            .override_global("parapet_ct_mode", &ct_mode, true)
            .load(&object)?;
        for name in [PROG_XDP, PROG_TC] {
            let prog = ebpf.program_mut(name).ok_or(Error::Missing("program"))?;
            match name {
                PROG_XDP => <&mut Xdp>::try_from(prog)?.load()?,
                _ => <&mut SchedClassifier>::try_from(prog)?.load()?,
            }
        }
        let actions = Array::try_from(take(&mut ebpf, "parapet_actions")?)?;
        let counters = PerCpuArray::try_from(take(&mut ebpf, "parapet_counters")?)?;
        let log_limits = Array::try_from(take(&mut ebpf, "parapet_log_limits")?)?;
        let stats = PerCpuArray::try_from(take(&mut ebpf, "parapet_stats")?)?;
        let lite = BpfHashMap::try_from(take(&mut ebpf, "parapet_lite")?)?;
        let image = Array::try_from(take(&mut ebpf, "parapet_image")?)?;
        let gen = Array::try_from(take(&mut ebpf, "parapet_gen")?)?;
        let debug = Array::try_from(take(&mut ebpf, "parapet_debug")?)?;
        let ifnames = BpfHashMap::try_from(take(&mut ebpf, "parapet_ifnames")?)?;
        let rcu_barrier = ArrayOfMaps::try_from(take(&mut ebpf, "parapet_rcu_barrier")?)?;
        let log = RingBuf::try_from(take(&mut ebpf, "parapet_log")?)?;
        let set_refs = Array::try_from(take(&mut ebpf, "parapet_set_refs")?)?;
        let set_descs = Array::try_from(take(&mut ebpf, "parapet_set_descs")?)?;
        let set_lpm = LpmTrie::try_from(take(&mut ebpf, "parapet_set_lpm")?)?;
        let set_tuple = BpfHashMap::try_from(take(&mut ebpf, "parapet_set_tuple")?)?;
        let reject_limit = Array::try_from(take(&mut ebpf, "parapet_reject_limit")?)?;
        let config = Array::try_from(take(&mut ebpf, "parapet_config")?)?;
        let mut dp = Dataplane {
            ebpf,
            max_rules: opts.max_rules,
            slot_pages,
            generation: 0,
            staged: false,
            next_id: 1,
            links: HashMap::new(),
            actions,
            counters,
            log_limits,
            stats,
            lite,
            image,
            gen,
            debug,
            ifnames,
            rcu_barrier,
            log,
            set_refs,
            set_descs,
            set_lpm,
            set_tuple,
            sets: HashMap::new(),
            staged_refs: vec![RawSetRef::default(); MAX_SET_REFS as usize],
            live_refs: vec![RawSetRef::default(); MAX_SET_REFS as usize],
            set_names: HashMap::new(),
            reject_limit,
            config,
            conntrack_linked: conntrack,
            conntrack: false,
            conntrack_note,
        };
        dp.set_reject_rate(reject::DEFAULT_RATE, reject::DEFAULT_BURST)?;
        dp.set_conntrack(conntrack)?;
        Ok(dp)
    }

    /// True when packets get their ctstate from the kernel's conntrack
    /// table: the lookup is linked in and switched on.
    pub fn conntrack(&self) -> bool {
        self.conntrack
    }

    /// True when the lookup is linked in ([`Features::conntrack`] and the
    /// kernel has the kfuncs), so [`Dataplane::set_conntrack`] can turn
    /// it on.
    pub fn conntrack_available(&self) -> bool {
        self.conntrack_linked
    }

    /// Turn the conntrack lookup on or off for the packets that start
    /// after this call (each packet reads the switch once). Off costs one
    /// inlined array load per packet. Turning it on without the lookup
    /// linked in is [`Error::ConntrackUnavailable`]; turning it off always
    /// works.
    pub fn set_conntrack(&mut self, on: bool) -> Result<()> {
        if on && !self.conntrack_linked {
            return Err(Error::ConntrackUnavailable(
                self.conntrack_note
                    .clone()
                    .unwrap_or_else(|| "not linked in at load time".to_string()),
            ));
        }
        self.config.set(CFG_CT, u32::from(on), 0)?;
        self.conntrack = on;
        Ok(())
    }

    /// Why the conntrack lookup is off although it was asked for.
    pub fn conntrack_note(&self) -> Option<&str> {
        self.conntrack_note.as_deref()
    }

    /// Limit REJECT answers (TCP resets, ICMP errors) to `rate_per_sec`
    /// with bursts of `burst`, over all CPUs and rules together; the rest
    /// are dropped silently ([`Stat::RejectLimited`]). Rate 0: never
    /// answer. Loading sets 1000/s, burst 50.
    pub fn set_reject_rate(&mut self, rate_per_sec: u32, burst: u32) -> Result<()> {
        self.reject_limit.set(0, gcra(rate_per_sec, burst), 0)?;
        Ok(())
    }

    /// [`Dataplane::set_action`] for a REJECT with a `--reject-with` type
    /// (`abi::reject::*`, from `parapet_image::reject::reject_code`); used
    /// when the interim classifier decides.
    pub fn set_action_reject(&mut self, rule: u32, reject_type: u8, log: bool) -> Result<()> {
        self.check_rule(rule)?;
        let a = RawAction {
            verdict: KernelVerdict::Reject as u8,
            flags: if log { ACTION_F_LOG } else { 0 },
            reject: reject_type,
            _pad: 0,
        };
        self.actions.set(rule, a, 0)?;
        Ok(())
    }

    /// Largest valid rule id.
    pub fn max_rules(&self) -> u32 {
        self.max_rules
    }

    /// Attach to `iface` (resolved in the calling thread's network
    /// namespace). At XDP, [`Mode::Native`] falls back to [`Mode::Skb`] when
    /// the driver refuses, and the returned [`Attached::note`] says so.
    pub fn attach(&mut self, iface: &str, hook: Hook, mode: Mode) -> Result<Attached> {
        let (link, used, note) = match hook {
            Hook::Xdp => {
                let prog = self
                    .ebpf
                    .program_mut(PROG_XDP)
                    .ok_or(Error::Missing("program"))?;
                let prog = <&mut Xdp>::try_from(prog)?;
                match mode {
                    Mode::Skb => (
                        LinkId::Xdp(prog.attach(iface, XdpMode::Skb)?),
                        Mode::Skb,
                        None,
                    ),
                    Mode::Native => match prog.attach(iface, XdpMode::Driver) {
                        Ok(id) => (LinkId::Xdp(id), Mode::Native, None),
                        // An unknown interface fails the same way in both
                        // modes; do not hide it behind a fallback.
                        Err(e @ ProgramError::UnknownInterface { .. }) => return Err(e.into()),
                        Err(native) => {
                            let id = prog.attach(iface, XdpMode::Skb)?;
                            let note = format!(
                                "native XDP unavailable on {iface} ({native}); \
                                 attached in generic (skb) mode"
                            );
                            (LinkId::Xdp(id), Mode::Skb, Some(note))
                        }
                    },
                }
            }
            Hook::Tc => {
                let prog = self
                    .ebpf
                    .program_mut(PROG_TC)
                    .ok_or(Error::Missing("program"))?;
                let prog = <&mut SchedClassifier>::try_from(prog)?;
                let id = prog.attach(iface, TcAttachType::Ingress)?;
                (LinkId::Tc(id), mode, None)
            }
        };
        let id = self.next_id;
        self.next_id += 1;
        self.links.insert(id, link);
        // The image key carries the input interface by name; record it for
        // the index the packets will arrive with (same namespace as the
        // attach, so the same lookup).
        if let Ok(c) = std::ffi::CString::new(iface) {
            // SAFETY: c is a valid NUL-terminated string.
            let ifindex = unsafe { libc::if_nametoindex(c.as_ptr()) };
            if ifindex != 0 {
                self.set_ifname(ifindex, iface)?;
            }
        }
        Ok(Attached {
            id,
            iface: iface.to_string(),
            hook,
            mode: (hook == Hook::Xdp).then_some(used),
            note,
        })
    }

    /// Detach one attachment. (Dropping the `Dataplane` detaches all.)
    pub fn detach(&mut self, id: u64) -> Result<()> {
        match self.links.remove(&id) {
            Some(LinkId::Xdp(l)) => {
                let prog = self
                    .ebpf
                    .program_mut(PROG_XDP)
                    .ok_or(Error::Missing("program"))?;
                <&mut Xdp>::try_from(prog)?.detach(l)?;
            }
            Some(LinkId::Tc(l)) => {
                let prog = self
                    .ebpf
                    .program_mut(PROG_TC)
                    .ok_or(Error::Missing("program"))?;
                <&mut SchedClassifier>::try_from(prog)?.detach(l)?;
            }
            None => return Err(Error::UnknownAttachment(id)),
        }
        Ok(())
    }

    fn check_rule(&self, rule: u32) -> Result<()> {
        if rule > self.max_rules {
            return Err(Error::RuleOutOfRange {
                rule,
                max: self.max_rules,
            });
        }
        Ok(())
    }

    /// Set what rule `rule` does when it decides a packet (0 = the policy).
    pub fn set_action(&mut self, rule: u32, verdict: KernelVerdict, log: bool) -> Result<()> {
        self.check_rule(rule)?;
        let a = RawAction {
            verdict: verdict as u8,
            flags: if log { ACTION_F_LOG } else { 0 },
            reject: 0,
            _pad: 0,
        };
        self.actions.set(rule, a, 0)?;
        Ok(())
    }

    /// The policy: what happens when no rule matches.
    pub fn set_policy(&mut self, verdict: KernelVerdict) -> Result<()> {
        self.set_action(0, verdict, false)
    }

    /// Interim classifier: packets of `proto` to `dport` are decided by
    /// `rule` (`dport` 0 = any port of `proto`; `proto` 0 and `dport` 0 =
    /// anything). Lookup order: exact, then any-port, then anything, then
    /// the policy. Replaced by the image walker once it lands.
    pub fn set_lite_rule(&mut self, proto: u8, dport: u16, rule: u32) -> Result<()> {
        self.check_rule(rule)?;
        let k = LiteKey {
            proto,
            _pad: 0,
            dport,
        };
        self.lite.insert(k, rule, 0)?;
        Ok(())
    }

    /// Remove an interim-classifier entry (absent entries are fine).
    pub fn remove_lite_rule(&mut self, proto: u8, dport: u16) -> Result<()> {
        let k = LiteKey {
            proto,
            _pad: 0,
            dport,
        };
        match self.lite.remove(&k) {
            Ok(()) | Err(MapError::KeyNotFound) => Ok(()),
            // aya reports a missing key on delete as the raw ENOENT
            Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::ENOENT) => {
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Tell the image walker that `ifindex` is called `name` (the image key
    /// matches input interfaces by name). [`Dataplane::attach`] does this for
    /// the attached interface; names longer than 15 bytes are cut.
    pub fn set_ifname(&mut self, ifindex: u32, name: &str) -> Result<()> {
        let mut n = IfName::default();
        let len = name.len().min(15);
        n.name[..len].copy_from_slice(&name.as_bytes()[..len]);
        self.ifnames.insert(ifindex, n, 0)?;
        Ok(())
    }

    /// Bytes an image slot holds.
    pub fn slot_capacity(&self) -> usize {
        self.slot_pages as usize * IMAGE_PAGE_BYTES
    }

    /// The live generation: 0 before the first swap, otherwise slot
    /// `generation & 1` is live.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Write a classifier image (`docs/image-format.md`) into the inactive
    /// slot. Packets keep using the live slot until [`Dataplane::swap`]. A
    /// failed write changes nothing that packets see. The header, length and
    /// checksum are checked here; the structure should have been validated
    /// by `parapet_image::Image` (the BPF walker survives a bad image but
    /// then falls back to the interim classifier, see [`Stat::ImageError`]).
    pub fn write_image(&mut self, image: &[u8]) -> Result<()> {
        crate::image::check_header(image)?;
        self.write_image_unchecked(image)
    }

    /// [`Dataplane::write_image`] without the header checks: for tests and
    /// for exercising the walker's own defences.
    pub fn write_image_unchecked(&mut self, image: &[u8]) -> Result<()> {
        if image.len() > self.slot_capacity() {
            return Err(Error::ImageTooLarge {
                len: image.len(),
                cap: self.slot_capacity(),
            });
        }
        let slot = self.generation.wrapping_add(1) & 1;
        let base = slot * self.slot_pages;
        for (i, chunk) in image.chunks(IMAGE_PAGE_BYTES).enumerate() {
            let mut page = [0u8; IMAGE_PAGE_BYTES];
            page[..chunk.len()].copy_from_slice(chunk);
            self.image.set(base + i as u32, page, 0)?;
        }
        self.staged = true;
        Ok(())
    }

    /// Make the last written image live by storing generation + 1: a single
    /// u32 write, so each packet sees the old image or the new one, never a
    /// mix. Returns the new generation once no packet can still be walking
    /// the old image (an RCU grace period, a few milliseconds), so the next
    /// [`Dataplane::write_image`] may safely overwrite it.
    pub fn swap(&mut self) -> Result<u32> {
        if !self.staged {
            return Err(Error::NothingToSwap);
        }
        let next = self.generation.wrapping_add(1).max(1);
        // The image's set references go live with it: write them into the
        // inactive slot's half of the reference table first.
        let slot = (self.generation.wrapping_add(1) & 1) * MAX_SET_REFS;
        for (i, r) in self.staged_refs.iter().enumerate() {
            self.set_refs.set(slot + i as u32, *r, 0)?;
        }
        self.gen.set(0, next, 0)?;
        self.generation = next;
        self.live_refs.clone_from(&self.staged_refs);
        self.staged = false;
        // Any update of a map-in-map waits for synchronize_rcu() in the
        // kernel; XDP and tc programs run inside RCU read-side sections.
        self.rcu_barrier.set(0, &self.gen, 0)?;
        Ok(next)
    }

    /// Read back `len` bytes of the live image (for tests and diagnostics).
    pub fn read_live_image(&self, len: usize) -> Result<Vec<u8>> {
        let slot = self.generation & 1;
        let mut out = Vec::with_capacity(len);
        let mut page_no = slot * self.slot_pages;
        while out.len() < len.min(self.slot_capacity()) {
            let page = self.image.get(&page_no, 0)?;
            let n = (len - out.len()).min(IMAGE_PAGE_BYTES);
            out.extend_from_slice(&page[..n]);
            page_no += 1;
        }
        Ok(out)
    }

    /// Packets and bytes rule `rule` decided, summed over CPUs.
    pub fn counter(&self, rule: u32) -> Result<Counter> {
        self.check_rule(rule)?;
        let per_cpu = self.counters.get(&rule, 0)?;
        Ok(per_cpu.iter().fold(Counter::default(), |a, c| Counter {
            packets: a.packets + c.packets,
            bytes: a.bytes + c.bytes,
        }))
    }

    /// Zero every rule's counters (all CPUs). An increment racing with the
    /// reset on another CPU may survive it or be lost.
    pub fn reset_counters(&mut self) -> Result<()> {
        let cpu_err = |io_error| {
            MapError::SyscallError(aya::sys::SyscallError {
                call: "nr_cpus",
                io_error,
            })
        };
        let cpus = aya::util::nr_cpus().map_err(|(_, e)| cpu_err(e))?;
        for rule in 0..=self.max_rules {
            let zeros = aya::maps::PerCpuValues::try_from(vec![Counter::default(); cpus])
                .map_err(cpu_err)?;
            self.counters.set(rule, zeros, 0)?;
        }
        Ok(())
    }

    /// Forget a written but not swapped image and its staged set
    /// references: the next swap needs a new [`Dataplane::write_image`], and
    /// sets only the staged references used become unused.
    pub fn unstage(&mut self) {
        self.staged = false;
        self.staged_refs.clone_from(&self.live_refs);
    }

    /// The interfaces attached, by attachment id.
    pub fn attachment_ids(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.links.keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// Dataplane statistics, summed over CPUs.
    pub fn stats(&self) -> Result<Stats> {
        let mut v = Vec::with_capacity(STAT_MAX as usize);
        for i in 0..STAT_MAX {
            v.push(self.stats.get(&i, 0)?.iter().sum());
        }
        Ok(Stats(v))
    }

    /// Limit log events of `rule` to `rate_per_sec` with bursts of `burst`.
    /// `rate_per_sec` 0 disables logging for the rule. The limit holds
    /// across all CPUs together.
    pub fn set_log_rate(&mut self, rule: u32, rate_per_sec: u32, burst: u32) -> Result<()> {
        self.check_rule(rule)?;
        self.log_limits.set(rule, gcra(rate_per_sec, burst), 0)?;
        Ok(())
    }

    /// Take up to `max` pending log events without blocking. The ring
    /// buffer's fd ([`Dataplane::log_fd`]) becomes readable when events wait.
    pub fn poll_log(&mut self, max: usize) -> Vec<LogEvent> {
        let mut out = Vec::new();
        while out.len() < max {
            let Some(item) = self.log.next() else { break };
            if item.len() < std::mem::size_of::<RawLogEvent>() {
                continue; // cannot happen with a matching object; skip
            }
            // SAFETY: the record is at least size_of::<RawLogEvent>() bytes
            // and RawLogEvent is plain old data; read_unaligned makes no
            // alignment assumption about the ring buffer memory.
            let raw: RawLogEvent = unsafe { std::ptr::read_unaligned(item.as_ptr().cast()) };
            out.push(LogEvent {
                ts_ns: raw.ts_ns,
                rule_id: raw.rule_id,
                verdict: KernelVerdict::from_raw(raw.verdict.into()).unwrap_or(KernelVerdict::Drop),
                hook: if raw.hook == HOOK_TC {
                    Hook::Tc
                } else {
                    Hook::Xdp
                },
                key: raw.key,
            });
        }
        out
    }

    /// The log ring buffer's fd, for epoll.
    pub fn log_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.log.as_fd()
    }

    /// Run the real program on `frame` with `BPF_PROG_TEST_RUN`, `repeat`
    /// times (counters and logs see every run). `ifindex`, when non-zero,
    /// is reported as the ingress interface and must exist in the caller's
    /// namespace (1 = loopback always does).
    pub fn test_run(
        &self,
        hook: Hook,
        frame: &[u8],
        ifindex: u32,
        repeat: u32,
    ) -> Result<TestRunOutcome> {
        self.test_run_inner(hook, frame, ifindex, repeat, None)
            .map(|(o, _)| o)
    }

    /// [`Dataplane::test_run`] once, also returning the frame as the
    /// program left it (a REJECT answer, for instance: `retval` is then
    /// `TC_ACT_REDIRECT` (7) or `XDP_TX` (3)).
    pub fn test_run_output(
        &self,
        hook: Hook,
        frame: &[u8],
        ifindex: u32,
    ) -> Result<(TestRunOutcome, Vec<u8>)> {
        let mut out = vec![0u8; frame.len() + 2048];
        let (o, n) = self.test_run_inner(hook, frame, ifindex, 1, Some(&mut out))?;
        out.truncate(n);
        Ok((o, out))
    }

    fn test_run_inner(
        &self,
        hook: Hook,
        frame: &[u8],
        ifindex: u32,
        repeat: u32,
        data_out: Option<&mut [u8]>,
    ) -> Result<(TestRunOutcome, usize)> {
        if frame.len() < 14 {
            return Err(Error::FrameTooShort(frame.len()));
        }
        let name = match hook {
            Hook::Xdp => PROG_XDP,
            Hook::Tc => PROG_TC,
        };
        let prog = self.ebpf.program(name).ok_or(Error::Missing("program"))?;
        let mut ctx = Vec::new();
        if ifindex != 0 {
            ctx = match hook {
                // struct xdp_md: data, data_end, data_meta, ingress_ifindex,
                // rx_queue_index, egress_ifindex; data_end must equal the
                // frame length.
                Hook::Xdp => [0, frame.len() as u32, 0, ifindex, 0, 0]
                    .iter()
                    .flat_map(|v| v.to_ne_bytes())
                    .collect(),
                // struct __sk_buff up to ingress_ifindex (offset 36); the
                // kernel accepts a zero-padded prefix.
                Hook::Tc => {
                    let mut c = vec![0u8; 40];
                    c[36..40].copy_from_slice(&ifindex.to_ne_bytes());
                    c
                }
            };
        }
        let opts = TestRunOptions {
            data_in: Some(frame),
            ctx_in: (!ctx.is_empty()).then_some(&ctx[..]),
            data_out,
            repeat: repeat.max(1),
            ..TestRunOptions::default()
        };
        let r = match hook {
            Hook::Xdp => <&Xdp>::try_from(prog)?.test_run(opts)?,
            Hook::Tc => <&SchedClassifier>::try_from(prog)?.test_run(opts)?,
        };
        let passed = match hook {
            Hook::Xdp => r.return_value == XDP_PASS,
            Hook::Tc => r.return_value == TC_ACT_OK,
        };
        Ok((
            TestRunOutcome {
                retval: r.return_value,
                passed,
                duration: r.duration,
            },
            r.data_size_out as usize,
        ))
    }

    /// The last packet's key and decision. Only filled when loaded with
    /// [`LoadOptions::debug`]; `None` before the first packet.
    pub fn last_decision(&self) -> Result<Option<Decision>> {
        let d = self.debug.get(&0, 0)?;
        if d.seq == 0 {
            return Ok(None);
        }
        Ok(Some(Decision {
            key: d.key,
            status: ParseStatus::from_raw(d.status).unwrap_or(ParseStatus::Malformed),
            rule_id: d.rule_id,
            verdict: KernelVerdict::from_raw(d.verdict).unwrap_or(KernelVerdict::Drop),
            seq: d.seq,
            by_image: d.by_image != 0,
            nonterminal: d.nonterm[..(d.n_nonterm as usize).min(d.nonterm.len())].to_vec(),
            walk_err: d.walk_err,
            set_bits: u64::from(d.sets[0]) | u64::from(d.sets[1]) << 32,
            reject: d.reject as u8,
            ctstate: d.ctstate,
        }))
    }

    // ---- sets ----------------------------------------------------------

    /// Create set `id` (`0..1024`) with key dimensions `dims` (1 to 4,
    /// at most 36 bytes together). A set of one dimension keeps
    /// its elements in the LPM trie, any other in the tuple hash.
    pub fn create_set(&mut self, id: u32, dims: &[SetDim]) -> Result<()> {
        if id >= MAX_SETS {
            return Err(SetError::BadId(id).into());
        }
        if self.sets.contains_key(&id) {
            return Err(SetError::Exists(id).into());
        }
        let st = SetState::new(id, dims)?;
        self.set_descs.set(id, st.desc(), 0)?;
        self.sets.insert(id, st);
        Ok(())
    }

    /// Remove set `id` and its elements. References to it stay defined
    /// and find no elements until the id is created again (with the same
    /// dimensions; otherwise define the references again).
    pub fn destroy_set(&mut self, id: u32) -> Result<()> {
        self.set_flush(id)?;
        self.sets.remove(&id);
        self.set_names.retain(|_, v| *v != id);
        Ok(())
    }

    /// Whether the live or the staged reference table names set `id`.
    pub fn set_in_use(&self, id: u32) -> bool {
        self.live_refs
            .iter()
            .chain(&self.staged_refs)
            .any(|r| r.kind != 0 && u32::from(r.set_id) == id)
    }

    /// Destroy every set that neither the live nor the staged references
    /// use (after a swap to an image that dropped some sets). Returns the
    /// ids destroyed.
    pub fn destroy_unused_sets(&mut self) -> Result<Vec<u32>> {
        let mut unused: Vec<u32> = self
            .sets
            .keys()
            .copied()
            .filter(|&id| !self.set_in_use(id))
            .collect();
        unused.sort_unstable();
        for &id in &unused {
            self.destroy_set(id)?;
        }
        Ok(unused)
    }

    /// The set's dimensions, or `None` when it does not exist.
    pub fn set_dims(&self, id: u32) -> Option<&[SetDim]> {
        self.sets.get(&id).map(|s| &s.dims[..])
    }

    /// Elements of set `id` (user-space mirror; expired ones included
    /// until deleted).
    pub fn set_len(&self, id: u32) -> Result<usize> {
        Ok(self.set_state(id)?.len())
    }

    /// Map entries set `id` occupies (prefixes, or prefix boxes x shapes).
    pub fn set_entries(&self, id: u32) -> Result<usize> {
        Ok(self.set_state(id)?.entries.len())
    }

    fn set_state(&self, id: u32) -> Result<&SetState> {
        self.sets.get(&id).ok_or(SetError::NoSuchSet(id).into())
    }

    /// Add elements to set `id`, or refresh their expiry when present.
    /// Ranges are split into prefixes here. All elements are checked before
    /// anything is written; packets see each map entry change atomically,
    /// and no program is reloaded.
    pub fn set_add(&mut self, id: u32, els: &[SetElement]) -> Result<()> {
        let st = self.sets.get_mut(&id).ok_or(SetError::NoSuchSet(id))?;
        let w = st.add(id, els)?;
        self.apply(id, w)
    }

    /// Delete elements (named by their ranges, expiry ignored) from set
    /// `id`. Absent elements are ignored. Overlapping elements stay exact:
    /// an entry shared with another element keeps that element's expiry.
    pub fn set_del(&mut self, id: u32, els: &[SetElement]) -> Result<()> {
        let st = self.sets.get_mut(&id).ok_or(SetError::NoSuchSet(id))?;
        let w = st.del(id, els)?;
        self.apply(id, w)
    }

    /// Make set `id` hold exactly `els`, without a moment in which an
    /// element of both the old and the new contents is missing: the new
    /// elements are added (or refreshed) first, then the others deleted.
    pub fn set_replace(&mut self, id: u32, els: &[SetElement]) -> Result<()> {
        let st = self.sets.get_mut(&id).ok_or(SetError::NoSuchSet(id))?;
        let (add, del) = st.replace(id, els)?;
        self.apply(id, add)?;
        self.apply(id, del)
    }

    /// Delete up to `budget` elements of every set that expired (they
    /// already match nothing; this frees their map entries). Returns how
    /// many went.
    pub fn reap_sets(&mut self, budget: usize) -> Result<usize> {
        let now = crate::sets::monotonic_ns();
        let mut ids: Vec<u32> = self.sets.keys().copied().collect();
        ids.sort_unstable();
        let mut n = 0;
        for id in ids {
            let gone = self.sets[&id].expired(now, budget);
            if !gone.is_empty() {
                n += gone.len();
                self.set_del(id, &gone)?;
            }
        }
        Ok(n)
    }

    /// Empty set `id`.
    pub fn set_flush(&mut self, id: u32) -> Result<()> {
        let st = self.sets.get_mut(&id).ok_or(SetError::NoSuchSet(id))?;
        let w = st.flush();
        self.apply(id, w)
    }

    fn apply(&mut self, id: u32, w: Writes) -> Result<()> {
        // New shapes first: a probe of a shape without entries finds
        // nothing, an entry of an unknown shape would be missed.
        if let Some(d) = &w.desc {
            if d.n_shapes > 0 {
                self.set_descs.set(id, d, 0)?;
            }
        }
        for (k, v) in &w.put {
            match k {
                EntryKey::Lpm(l) => {
                    let mut data = [0u8; 20];
                    data[..2].copy_from_slice(&l.set_id);
                    data[2..18].copy_from_slice(&l.addr);
                    self.set_lpm.insert(&LpmKey::new(l.prefixlen, data), v, 0)?
                }
                EntryKey::Tuple(t) => self.set_tuple.insert(t, v, 0)?,
            }
        }
        for k in &w.del {
            let r = match k {
                EntryKey::Lpm(l) => {
                    let mut data = [0u8; 20];
                    data[..2].copy_from_slice(&l.set_id);
                    data[2..18].copy_from_slice(&l.addr);
                    self.set_lpm.remove(&LpmKey::new(l.prefixlen, data))
                }
                EntryKey::Tuple(t) => self.set_tuple.remove(t),
            };
            match r {
                Ok(()) | Err(MapError::KeyNotFound) => {}
                Err(MapError::SyscallError(e))
                    if e.io_error.raw_os_error() == Some(libc::ENOENT) => {}
                Err(e) => return Err(e.into()),
            }
        }
        // A flush clears the shapes last.
        if let Some(d) = &w.desc {
            if d.n_shapes == 0 {
                self.set_descs.set(id, d, 0)?;
            }
        }
        Ok(())
    }

    /// Define set reference `index` (bit `index` of the image key) of the
    /// *next* image: its key is `parts` of the packet, one per dimension of
    /// set `set`, in order. A packet of the other family than the set's
    /// addresses is not a member. The reference table goes live with the
    /// next [`Dataplane::swap`], together with the image, and stays as it is
    /// for later images until changed.
    pub fn define_set_ref(&mut self, index: u32, set: u32, parts: &[PacketPart]) -> Result<()> {
        if index >= MAX_SET_REFS {
            return Err(SetError::BadRef(index).into());
        }
        let r = self.set_state(set)?.ref_desc(set, parts)?;
        self.staged_refs[index as usize] = r;
        Ok(())
    }

    /// Make set reference `index` of the next image match nothing (e.g. a
    /// key the set's type cannot hold, as a packet of the other family).
    pub fn undefine_set_ref(&mut self, index: u32) -> Result<()> {
        if index >= MAX_SET_REFS {
            return Err(SetError::BadRef(index).into());
        }
        self.staged_refs[index as usize] = RawSetRef::default();
        Ok(())
    }
}
