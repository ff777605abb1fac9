//! Loading: the embedded BPF object, the load-time options and features,
//! and the [`Dataplane`] handle that owns the programs, the maps and the
//! user-space state beside them. The handle's other facets: attaching
//! (`attach.rs`), rule actions and the interim classifier (`actions.rs`),
//! image slots (`slots.rs`), counters, statistics and the LOG ring
//! (`counters.rs`), sets (`set_maps.rs`) and `BPF_PROG_TEST_RUN`
//! (`test_run.rs`).

use std::collections::HashMap;
use std::os::fd::AsFd;

use aya::maps::lpm_trie::LpmTrie;
use aya::maps::{Array, ArrayOfMaps, HashMap as BpfHashMap, MapData, PerCpuArray, RingBuf};
use aya::programs::tc::SchedClassifierLinkId;
use aya::programs::xdp::XdpLinkId;
use aya::programs::ProgramError;
use aya::EbpfLoader;

use crate::abi::reject;
use crate::abi::{
    Counter, DebugRec, IfName, LiteKey, LogLimit, RawAction, RawSetDesc, RawSetRef, SetExact4Key,
    SetExact6Key, SetTupleKey, SetVal, IMAGE_DEFAULT_SLOT_PAGES, IMAGE_PAGE_BYTES, MAX_SET_REFS,
};
use crate::error::{Error, Result};
use crate::set_mirror::{SetSizing, SetState};

/// The compiled BPF object (`bpf/parapet.bpf.c`, built by `build.rs`).
pub static BPF_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/parapet.bpf.o"));

/// The same program with the walker's budget loops written as iterator
/// loops (`-DPARAPET_ITER_LOOPS`, `bpf/lib/walk_state.h`), for kernels
/// whose verifier has no `may_goto` (6.6–6.8).
pub static BPF_OBJECT_ITER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/parapet_iter.bpf.o"));

/// The object this kernel loads: the `may_goto` loops where the verifier
/// takes them (Linux >= 6.9: a decrement and a branch per pass), else the
/// iterator loops (kfunc calls per pass). `PARAPET_WALKER_LOOPS=iter` in
/// the environment picks the iterator object on any kernel, so that the
/// tests run both objects on one machine.
pub fn bpf_object_for_this_kernel() -> &'static [u8] {
    let forced = std::env::var_os("PARAPET_WALKER_LOOPS").is_some_and(|v| v == "iter");
    if forced || !kernel_has_may_goto() {
        BPF_OBJECT_ITER
    } else {
        BPF_OBJECT
    }
}

pub(crate) const PROG_XDP: &str = "parapet_xdp";
pub(crate) const PROG_TC: &str = "parapet_tc";

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
    /// Leave the netfilter hooks' images out: the image map holds the
    /// interface image (XDP and tc) only, a sixth of its size by default
    /// (each image is two preallocated slots of `slot_pages`), and the
    /// netfilter program is never loaded ([`Dataplane::netfilter_note`]
    /// says why). For dataplanes that only run at XDP or tc.
    pub interface_only: bool,
    /// Load the tc placement's programs (`src/tc_hooks.rs`) now rather
    /// than at their first attach.
    pub tc_hooks: bool,
}

/// Why the netfilter hooks are missing from a dataplane loaded with
/// [`Features::interface_only`].
pub const INTERFACE_ONLY_NOTE: &str =
    "the hook images were left out at load (interface only: parapetd --no-hook-images)";

/// The kernel's handle of one attachment, by hook.
pub(crate) enum LinkId {
    Xdp(XdpLinkId),
    Tc(SchedClassifierLinkId),
    /// A link of any kind pinned under bpffs: it outlives the process.
    Pinned(crate::pin::LinkPin),
    /// A link of any kind, unpinned (dropping it detaches).
    Fd(aya::programs::links::FdLink),
    Nf(crate::netfilter::NfLink),
}

/// The loaded BPF dataplane and its maps.
pub struct Dataplane {
    /// The programs and the maps taken on first use: aya's handle of an
    /// in-process load, or the ones a loader process handed over
    /// (`src/handover.rs`).
    pub(crate) ebpf: crate::objects::Objects,
    pub(crate) max_rules: u32,
    pub(crate) slot_pages: u32,
    pub(crate) generation: u32,
    pub(crate) staged: bool,
    pub(crate) next_id: u64,
    pub(crate) links: HashMap<u64, LinkId>,
    pub(crate) actions: Array<MapData, RawAction>,
    pub(crate) counters: PerCpuArray<MapData, Counter>,
    pub(crate) log_limits: Array<MapData, LogLimit>,
    pub(crate) stats: PerCpuArray<MapData, u64>,
    pub(crate) hook_stats: PerCpuArray<MapData, crate::abi::HookStat>,
    pub(crate) lite: BpfHashMap<MapData, LiteKey, u32>,
    pub(crate) image: Array<MapData, [u8; IMAGE_PAGE_BYTES]>,
    pub(crate) gen: Array<MapData, u32>,
    pub(crate) debug: Array<MapData, DebugRec>,
    pub(crate) ifnames: BpfHashMap<MapData, u32, IfName>,
    pub(crate) rcu_barrier: ArrayOfMaps<MapData, Array<MapData, u32>>,
    pub(crate) log: RingBuf<MapData>,
    /// REJECTs at the netfilter hooks (src/reject_queue.rs); taken by
    /// the thread that answers them.
    pub(crate) nf_reject: Option<RingBuf<MapData>>,
    pub(crate) set_refs: Array<MapData, RawSetRef>,
    pub(crate) set_descs: Array<MapData, RawSetDesc>,
    pub(crate) set_lpm: LpmTrie<MapData, [u8; 20], SetVal>,
    pub(crate) set_tuple: BpfHashMap<MapData, SetTupleKey, SetVal>,
    /// Single addresses of address sets (`set_maps.rs`): expiry by key.
    pub(crate) set_exact4: BpfHashMap<MapData, SetExact4Key, u64>,
    pub(crate) set_exact6: BpfHashMap<MapData, SetExact6Key, u64>,
    /// Capacity of the two exact hashes (IPv4, IPv6), and the entries the
    /// adopted sets hold in them until they are purged: a set's single
    /// addresses go to the trie when the hash has no room left.
    pub(crate) exact_cap: [usize; 2],
    pub(crate) exact_adopted: [usize; 2],
    /// The address-type mirror (src/addr_types.rs).
    pub(crate) addr_types: LpmTrie<MapData, [u8; 20], u32>,
    /// Whether set entries are written with `BPF_MAP_UPDATE_BATCH`
    /// (`set_maps.rs`); off only to measure one update per entry.
    pub(crate) batch_writes: bool,
    /// Whether reaping finds expired elements by scanning every element
    /// of a set rather than by its expiry index (`set_expiry.rs`); on only
    /// to measure what the index saves.
    pub(crate) reap_by_scan: bool,
    /// User-space mirrors of the sets, by id.
    pub(crate) sets: HashMap<u32, SetState>,
    /// The reference table that goes live with the next swap.
    pub(crate) staged_refs: Vec<RawSetRef>,
    /// The live image's reference table.
    pub(crate) live_refs: Vec<RawSetRef>,
    /// Set ids by name (`install_sets`).
    pub(crate) set_names: HashMap<String, u32>,
    pub(crate) reject_limit: Array<MapData, LogLimit>,
    pub(crate) config: Array<MapData, u32>,
    /// The lookup is linked in (load time).
    pub(crate) conntrack_linked: bool,
    /// The runtime switch (`parapet_config[CFG_CT]`).
    pub(crate) conntrack: bool,
    pub(crate) conntrack_note: Option<String>,
    /// Pinning state, when loaded with [`LoadOptions::pin_dir`].
    pub(crate) pins: Option<crate::pin::Pins>,
    /// The netfilter program (src/netfilter.rs), or why there is none.
    pub(crate) nf_prog: crate::netfilter::NfProgram,
    /// Loads the programs a loader process left out, at their first use
    /// (src/late_load.rs); `None` after an in-process load.
    pub(crate) late_loader: Option<crate::programs::LateLoader>,
    /// Pages of each image (src/slots.rs).
    pub(crate) image_pages: ImagePages,
    /// Images the image map holds: all (`abi::IMAGES`), or 1 with
    /// [`Features::interface_only`].
    pub(crate) images: u32,
}

/// `parapet_config` word of the conntrack switch (bpf/lib/maps.h).
pub(crate) const CFG_CT: u32 = 0;
/// `parapet_config[CFG_STATS_OFF]`: non-zero skips the per-packet
/// statistics no rule needs (bpf/lib/counters.h, `stats_on`).
pub(crate) const CFG_STATS_OFF: u32 = 1;
/// `parapet_config[CFG_OWNER]`: non-zero when the live images constrain
/// the socket owner, which the netfilter program then reads at LOCAL_OUT
/// and POST_ROUTING (bpf/lib/nf.h, `nf_sk_owner`).
pub(crate) const CFG_OWNER: u32 = 2;
/// `parapet_config[CFG_TC_HOOKS]`: which hooks and families the tc
/// placement enforces (`src/tc_hooks.rs`).
pub(crate) const CFG_TC_HOOKS: u32 = 3;
/// `parapet_config[CFG_TCP_OPTIONS]`: non-zero when the live images test
/// TCP option kinds; the entries then copy each segment's option area
/// for the walker (bpf/lib/tcp_options.h).
pub(crate) const CFG_TCP_OPTIONS: u32 = 4;
/// `parapet_config[CFG_PATTERNS]`: non-zero when the live images test
/// `-m string` patterns: the entries copy the datagram for the walker's
/// search (bpf/lib/patterns.h).
pub(crate) const CFG_PATTERNS: u32 = 5;
/// `parapet_config[CFG_REV_PATH]`: non-zero when the live images read the
/// reverse-path outcome: the XDP and tc ingress entries then look each
/// packet's source up with `bpf_fib_lookup` (bpf/lib/rev_path.h).
pub(crate) const CFG_REV_PATH: u32 = 6;

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

fn take(objs: &mut crate::objects::Objects, name: &'static str) -> Result<aya::maps::Map> {
    objs.take_map(name).ok_or(Error::Missing(name))
}

/// What [`Dataplane::assemble`] needs besides the maps and programs.
pub(crate) struct Assembly {
    pub(crate) max_rules: u32,
    pub(crate) slot_pages: u32,
    pub(crate) images: u32,
    pub(crate) exact_cap: [usize; 2],
    pub(crate) conntrack: bool,
    pub(crate) conntrack_note: Option<String>,
    pub(crate) pins: Option<crate::pin::Pins>,
    pub(crate) nf_prog: crate::netfilter::NfProgram,
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
        Self::load_pinned(opts, sizing, features, None)
    }

    /// [`Dataplane::load_with`], pinning in the bpffs directory `pin_dir`
    /// (see `pin.rs`): the maps pinned there by an earlier load are reused
    /// when their layout matches, and its pinned links adopted; every
    /// attachment is pinned. `None`: nothing is pinned, attachments end
    /// with the process.
    pub fn load_pinned(
        opts: &LoadOptions,
        sizing: &SetSizing,
        features: &Features,
        pin_dir: Option<&std::path::Path>,
    ) -> Result<Self> {
        Self::load_object(
            bpf_object_for_this_kernel(),
            None,
            opts,
            sizing,
            features,
            pin_dir,
        )
    }

    /// [`Dataplane::load_pinned`] of `raw_object`; `stop_after`, for the
    /// stage profile's object only (src/stage_profile.rs), is the stage
    /// its programs return after (`parapet_stop_after`).
    pub(crate) fn load_object(
        raw_object: &[u8],
        stop_after: Option<u32>,
        opts: &LoadOptions,
        sizing: &SetSizing,
        features: &Features,
        pin_dir: Option<&std::path::Path>,
    ) -> Result<Self> {
        let mut dp = Self::load_unfinished(
            raw_object,
            stop_after,
            opts,
            sizing,
            features,
            pin_dir,
            &[PROG_XDP, PROG_TC],
        )?;
        dp.finish_load(features)?;
        Ok(dp)
    }

    /// The load itself: programs verified, maps created or reused, nothing
    /// written to the maps or taken from the pins yet (a loader process
    /// hands this over, `src/handover.rs`). Of the entry programs, `entry`
    /// are verified (the others when first used); the netfilter program is
    /// left out with [`Features::interface_only`] only and loads on first
    /// use; the tc placement's are not loaded.
    pub(crate) fn load_unfinished(
        raw_object: &[u8],
        stop_after: Option<u32>,
        opts: &LoadOptions,
        sizing: &SetSizing,
        features: &Features,
        pin_dir: Option<&std::path::Path>,
        entry: &[&'static str],
    ) -> Result<Self> {
        // aya 0.14 cannot link kfuncs: resolve them against this kernel's
        // BTF first (src/kfunc.rs).
        let kernel_btf = aya::Btf::from_sys_fs().ok();
        let (object, missing) =
            crate::kfunc::resolve(raw_object, kernel_btf.as_ref()).map_err(Error::Object)?;
        // The image walker's loops are the kernel's numeric iterator
        // (bpf/lib/walk_state.h): without it they would run no iteration.
        if kernel_btf.is_none() || missing.iter().any(|m| m.starts_with("bpf_iter_num_")) {
            return Err(Error::Object(
                "the image walker needs the bpf_iter_num kfuncs (Linux >= 6.4 with BTF)".into(),
            ));
        }
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
        // Parsed, the kernel's BTF is some 16 MB of heap, and aya's loader
        // parses its own copy: free ours first so the two never coexist.
        drop(kernel_btf);
        let ct_mode = u32::from(conntrack);
        let entries = opts.max_rules.saturating_add(1);
        let slot_pages = opts.slot_pages.max(1);
        // image 0 serves the interfaces; 1.. the netfilter hooks
        let images = if features.interface_only {
            1
        } else {
            crate::abi::IMAGES
        };
        let debug_mode: u32 = opts.debug.into();
        // xt_limit counts in jiffies: the program needs the kernel's HZ.
        let hz = crate::stateful::kernel_hz().unwrap_or(0);
        let mut loader = EbpfLoader::new();
        loader
            .map_max_entries("parapet_actions", entries)
            .map_max_entries("parapet_counters", entries)
            .map_max_entries("parapet_log_limits", entries)
            .map_max_entries("parapet_image", slot_pages.saturating_mul(2 * images))
            .map_max_entries("parapet_set_lpm", sizing.lpm_entries.max(1))
            .map_max_entries("parapet_set_tuple", sizing.tuple_entries.max(1))
            .map_max_entries("parapet_set_exact4", sizing.exact4_entries.max(1))
            .map_max_entries("parapet_set_exact6", sizing.exact6_entries.max(1))
            .override_global("parapet_debug_mode", &debug_mode, true)
            .override_global("parapet_slot_pages", &slot_pages, true)
            .override_global("parapet_ct_mode", &ct_mode, true)
            .override_global("parapet_hz", &hz, true);
        if let Some(stop) = &stop_after {
            loader.override_global("parapet_stop_after", stop, true);
        }
        let mut ebpf = loader.load(&object)?;
        // Pinning: the maps must point at the pinned ones before the
        // programs that use them are loaded.
        let mut pins = match pin_dir {
            None => None,
            Some(root) => {
                crate::pin::ensure_bpffs(root)
                    .map_err(|e| Error::Pin(format!("{}: {e}", root.display())))?;
                let maps_reused = crate::pin::reuse_pinned_maps(root, &ebpf)?;
                let maps = crate::pin::object_map_fds(&ebpf)?;
                // the build: the object and every load-time constant
                let consts = load_constants(debug_mode, slot_pages, ct_mode);
                let build = crate::pin::stable_hash([&object[..], &consts[..]]);
                Some(crate::pin::Pins {
                    root: root.to_path_buf(),
                    maps,
                    progs: Vec::new(),
                    build: format!("{build:016x}"),
                    maps_reused,
                    adopted_sets: Default::default(),
                    stale_nf: Default::default(),
                })
            }
        };
        for (name, fd) in load_programs_at_once(ebpf.programs_mut().collect(), entry, || ())? {
            if let Some(p) = &mut pins {
                p.progs.push((name, fd));
            }
        }
        // Before the maps are taken: it shares them (src/netfilter.rs).
        let nf_prog = if features.interface_only {
            crate::netfilter::NfProgram::unavailable(INTERFACE_ONLY_NOTE)
        } else {
            crate::netfilter::NfProgram::new(object, &ebpf)
        };
        Self::assemble(
            crate::objects::Objects::loaded(ebpf),
            Assembly {
                max_rules: opts.max_rules,
                slot_pages,
                images,
                exact_cap: [
                    sizing.exact4_entries.max(1) as usize,
                    sizing.exact6_entries.max(1) as usize,
                ],
                conntrack,
                conntrack_note,
                pins,
                nf_prog,
            },
        )
    }

    /// The [`Dataplane`] of loaded programs and maps in `objs`.
    pub(crate) fn assemble(mut objs: crate::objects::Objects, a: Assembly) -> Result<Self> {
        let ebpf = &mut objs;
        let actions = Array::try_from(take(ebpf, "parapet_actions")?)?;
        let counters = PerCpuArray::try_from(take(ebpf, "parapet_counters")?)?;
        let log_limits = Array::try_from(take(ebpf, "parapet_log_limits")?)?;
        let stats = PerCpuArray::try_from(take(ebpf, "parapet_stats")?)?;
        let hook_stats = PerCpuArray::try_from(take(ebpf, "parapet_hook_stats")?)?;
        let lite = BpfHashMap::try_from(take(ebpf, "parapet_lite")?)?;
        let image = Array::try_from(take(ebpf, "parapet_image")?)?;
        let gen = Array::try_from(take(ebpf, "parapet_gen")?)?;
        let debug = Array::try_from(take(ebpf, "parapet_debug")?)?;
        let ifnames = BpfHashMap::try_from(take(ebpf, "parapet_ifnames")?)?;
        let rcu_barrier = ArrayOfMaps::try_from(take(ebpf, "parapet_rcu_barrier")?)?;
        let log = RingBuf::try_from(take(ebpf, "parapet_log")?)?;
        let nf_reject = Some(RingBuf::try_from(take(ebpf, "parapet_nf_reject")?)?);
        let set_refs = Array::try_from(take(ebpf, "parapet_set_refs")?)?;
        let set_descs = Array::try_from(take(ebpf, "parapet_set_descs")?)?;
        let set_lpm = LpmTrie::try_from(take(ebpf, "parapet_set_lpm")?)?;
        let set_tuple = BpfHashMap::try_from(take(ebpf, "parapet_set_tuple")?)?;
        let set_exact4 = BpfHashMap::try_from(take(ebpf, "parapet_set_exact4")?)?;
        let set_exact6 = BpfHashMap::try_from(take(ebpf, "parapet_set_exact6")?)?;
        let addr_types = LpmTrie::try_from(take(ebpf, "parapet_addr_types")?)?;
        let reject_limit = Array::try_from(take(ebpf, "parapet_reject_limit")?)?;
        let config = Array::try_from(take(ebpf, "parapet_config")?)?;
        Ok(Dataplane {
            ebpf: objs,
            max_rules: a.max_rules,
            slot_pages: a.slot_pages,
            images: a.images,
            generation: 0,
            staged: false,
            next_id: 1,
            links: HashMap::new(),
            actions,
            counters,
            log_limits,
            stats,
            hook_stats,
            lite,
            image,
            gen,
            debug,
            ifnames,
            rcu_barrier,
            log,
            nf_reject,
            set_refs,
            set_descs,
            set_lpm,
            set_tuple,
            set_exact4,
            set_exact6,
            exact_cap: a.exact_cap,
            exact_adopted: [0, 0],
            addr_types,
            batch_writes: true,
            reap_by_scan: false,
            sets: HashMap::new(),
            staged_refs: vec![RawSetRef::default(); MAX_SET_REFS as usize],
            live_refs: vec![RawSetRef::default(); MAX_SET_REFS as usize],
            set_names: HashMap::new(),
            reject_limit,
            config,
            conntrack_linked: a.conntrack,
            conntrack: false,
            conntrack_note: a.conntrack_note,
            pins: a.pins,
            nf_prog: a.nf_prog,
            late_loader: None,
            image_pages: Default::default(),
        })
    }

    /// After the load: the tc placement's programs when asked for, the
    /// wall clock, and the pinned state adopted (or the defaults written
    /// to fresh maps).
    pub(crate) fn finish_load(&mut self, features: &Features) -> Result<()> {
        let dp = self;
        if features.tc_hooks {
            dp.load_tc_hook_programs()?;
        }
        // Time windows read the wall clock from the first packet on.
        dp.set_wall_clock(crate::stateful::WallClock::now())?;
        if dp.maps_adopted() {
            // the live program's settings stay; the caller's state is
            // made live from the pinned generation on
            dp.adopt_pins()?;
        } else {
            dp.set_reject_rate(reject::DEFAULT_RATE, reject::DEFAULT_BURST)?;
            dp.set_conntrack(dp.conntrack_linked)?;
            dp.adopt_pins()?;
        }
        Ok(())
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

    /// Turn the per-packet statistics on or off for the packets that
    /// start after this call: the packets, image-decided and per-netfilter-
    /// hook counters of the stats map and the per-hook/interface table
    /// (`parapet_hook_stats`). Rule counters, error and drop-reason
    /// statistics always count. On is the map's initial state, so a
    /// program nobody configured counts.
    pub fn set_packet_stats(&mut self, on: bool) -> Result<()> {
        self.config.set(CFG_STATS_OFF, u32::from(!on), 0)?;
        Ok(())
    }

    /// Whether the per-packet statistics are on (see
    /// [`Dataplane::set_packet_stats`]); read from the map, so a pinned
    /// program adopted after a restart reports what it does.
    pub fn packet_stats(&self) -> Result<bool> {
        Ok(self.config.get(&CFG_STATS_OFF, 0)? == 0)
    }

    /// The verifier's instruction count (`verified_insns`) of every
    /// program this dataplane has loaded, by name: the entry programs of
    /// the object, and the netfilter program once it is loaded (it loads
    /// on first use; `netfilter_note` loads it). For
    /// `bench/dataplane/verified_insns.sh`.
    pub fn verified_insns(&self) -> Result<Vec<(String, u32)>> {
        use std::os::fd::AsFd;
        let mut out = Vec::new();
        for (name, prog) in self.ebpf.programs() {
            if let Ok(fd) = prog.fd() {
                let n = crate::bpf_sys::prog_verified_insns(fd.as_fd())
                    .map_err(|e| Error::Object(format!("program info of {name}: {e}")))?;
                out.push((name.to_string(), n));
            }
        }
        if let Ok(fd) = self.nf_prog.get() {
            let n = crate::bpf_sys::prog_verified_insns(fd.as_fd())
                .map_err(|e| Error::Netfilter(format!("program info: {e}")))?;
            out.push(("parapet_nf".to_string(), n));
        }
        out.sort();
        Ok(out)
    }

    /// Why the conntrack lookup is off although it was asked for.
    pub fn conntrack_note(&self) -> Option<&str> {
        self.conntrack_note.as_deref()
    }

    /// Largest valid rule id.
    pub fn max_rules(&self) -> u32 {
        self.max_rules
    }
}

/// The load-time constants that, with the object, make a build (the
/// program pins' `<build>`).
pub(crate) fn load_constants(debug_mode: u32, slot_pages: u32, ct_mode: u32) -> Vec<u8> {
    [debug_mode, slot_pages, ct_mode]
        .iter()
        .flat_map(|c| c.to_le_bytes())
        .collect()
}

/// Pages each image occupies, live and staged (written since the last
/// swap), for carrying unchanged images forward across a swap.
#[derive(Clone, Debug, Default)]
pub(crate) struct ImagePages {
    pub(crate) live: [usize; crate::abi::IMAGES as usize],
    pub(crate) staged: [Option<usize>; crate::abi::IMAGES as usize],
}

/// Whether this kernel's verifier takes `may_goto`: loads the XDP program
/// `may_goto +0; r0 = XDP_PASS; exit` and drops it.
fn kernel_has_may_goto() -> bool {
    use aya_obj::generated::{bpf_attr, bpf_cmd};
    // BPF_JMP | BPF_JCOND (may_goto, offset 0); BPF_ALU64 | BPF_MOV | BPF_K
    // r0 = 2; BPF_JMP | BPF_EXIT
    let raw: [[u8; 8]; 3] = [
        [0xe5, 0, 0, 0, 0, 0, 0, 0],
        [0xb7, 0, 0, 0, 2, 0, 0, 0],
        [0x95, 0, 0, 0, 0, 0, 0, 0],
    ];
    let license = std::ffi::CString::new("GPL").expect("no NUL");
    // SAFETY: zeroed bpf_attr is valid.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: plain integer fields of the prog_load arm; raw and license
    // outlive the syscall.
    unsafe {
        let u = &mut attr.__bindgen_anon_3;
        u.prog_type = 6; // BPF_PROG_TYPE_XDP
        u.insns = raw.as_ptr() as u64;
        u.insn_cnt = raw.len() as u32;
        u.license = license.as_ptr() as u64;
    }
    crate::netfilter::sys_bpf(bpf_cmd::BPF_PROG_LOAD, &mut attr)
        .map(crate::netfilter::owned)
        .is_ok()
}

/// Loads one program, again when the kernel answers EAGAIN: the verifier
/// stops with EAGAIN whenever a signal is pending for the loading thread
/// (a child's exit under a SIGCHLD handler, as tokio installs one), which
/// says nothing about the program; libbpf retries the same way. Bounded:
/// five attempts, then the error stands.
/// Loads (verifies) the programs `names` (of `programs`) that are not loaded
/// yet, one thread each, and runs `beside` on one more: each program's
/// verification is seconds of CPU on its own (a privileged load takes no
/// verifier-wide lock), so on two cores the wall time is about half the
/// sum instead of the sum (benchmarks.md §71: a fresh node's first attach
/// verified seven programs one after the other). Returns a duplicate of
/// each newly loaded program's descriptor, in `names` order.
pub(crate) fn load_programs_at_once(
    programs: Vec<(&str, &mut aya::programs::Program)>,
    names: &[&'static str],
    beside: impl FnOnce() + Send,
) -> Result<Vec<(&'static str, std::os::fd::OwnedFd)>> {
    use aya::programs::Program;
    let mut todo: Vec<(&'static str, &mut Program)> = Vec::new();
    for (have, prog) in programs {
        if let Some(&name) = names.iter().find(|n| **n == have) {
            todo.push((name, prog));
        }
    }
    if todo.len() != names.len() {
        return Err(Error::Missing("program"));
    }
    let load_one = |name: &'static str, prog: &mut Program| -> Result<_> {
        let fd = match prog {
            Program::Xdp(p) if p.fd().is_err() => {
                load_retrying(|| p.load())?;
                p.fd()?.as_fd().try_clone_to_owned()
            }
            Program::SchedClassifier(p) if p.fd().is_err() => {
                load_retrying(|| p.load())?;
                p.fd()?.as_fd().try_clone_to_owned()
            }
            Program::Xdp(_) | Program::SchedClassifier(_) => return Ok(None),
            _ => return Err(Error::Missing("program")),
        };
        let fd = fd.map_err(|e| Error::Pin(format!("dup of program {name}: {e}")))?;
        Ok(Some((name, fd)))
    };
    std::thread::scope(|s| {
        let side = s.spawn(beside);
        let threads: Vec<_> = todo
            .into_iter()
            .map(|(name, prog)| s.spawn(move || load_one(name, prog)))
            .collect();
        let mut out = Vec::new();
        let mut first_err = None;
        for t in threads {
            match t.join().expect("a program's load panicked") {
                Ok(Some(done)) => out.push(done),
                Ok(None) => {}
                Err(e) => first_err = first_err.or(Some(e)),
            }
        }
        side.join().expect("the load beside the programs panicked");
        match first_err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    })
}

pub(crate) fn load_retrying(
    mut load: impl FnMut() -> std::result::Result<(), ProgramError>,
) -> std::result::Result<(), ProgramError> {
    let mut attempts = 1;
    loop {
        match load() {
            Err(ProgramError::LoadError { io_error, .. })
                if io_error.kind() == std::io::ErrorKind::WouldBlock && attempts < 5 =>
            {
                attempts += 1
            }
            r => return r,
        }
    }
}
