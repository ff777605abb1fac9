//! The kernel dataplane as the daemon owns it: the loaded BPF program
//! (loaded on the first `attach`, so the daemon runs — and its tests pass —
//! without BPF), its attachments, and the glue that keeps the kernel equal
//! to the state: the active ruleset's image, actions and sets, and every
//! set change before its reply.
//!
//! [`Kernel`] lives inside the daemon's state, so it is only touched
//! under the state lock: a set change and its kernel update, or an apply
//! and its swap, are one step for every other client.

mod addr_mirror;
mod hook_stats;
mod install;
mod load_child;
mod netfilter;
mod readout;
mod restart;
mod set_sync;
mod tc_placement;
mod xdp_engine;

pub use install::kernel_chain;
use install::{fits, install, needs_ct, Placed};
pub use load_child::{run_load_helper, TEST_LOAD_HELPER_FAIL};
pub use tc_placement::HookPlacement;

use crate::compiled::CompiledChain;
use crate::hooks::{self, NfWant};
use crate::proto::{code, ErrorReply};
use parapet_dataplane::ct_table::ConntrackTable;
use parapet_dataplane::{
    bridge, AttachPoint, Dataplane, Features, LoadOptions, Mode, Programs, SetSizing, Stat,
};
use parapet_model::{Counters, Ruleset};
use parapet_sets::{Element, SetStore};
use serde_json::{json, Value};

/// How the program is sized and which chain it runs (parapetd flags).
#[derive(Clone, Debug)]
pub struct KernelConfig {
    /// Largest rule id the kernel counts and logs (`--max-rules`).
    pub max_rules: u32,
    /// MiB per image slot (`--image-mib`; two slots are allocated).
    pub image_mib: u32,
    /// The chain that runs at the hooks (`--chain`; default the input chain).
    pub chain: Option<String>,
    /// LOG events per second for rules without `-m limit` (`--log-rate`).
    pub log_rate: u32,
    /// Install the nft table that makes the kernel track connections while
    /// the conntrack lookup is on and the program is attached (off:
    /// `--no-conntrack-table`, for hosts whose own rules use conntrack).
    pub conntrack_table: bool,
    /// Where programs, maps and links are pinned under bpffs, so the
    /// kernel keeps enforcing when parapetd dies (`--pin-dir`; `None`:
    /// nothing pinned, attachments end with the process).
    pub pin_dir: Option<std::path::PathBuf>,
    /// Load the program with its debug constant on (tests: a different
    /// build of the program, for the upgrade swap).
    pub debug_program: bool,
    /// Allocate the netfilter hooks' classifier images (off:
    /// `--no-hook-images`, for XDP/tc-only hosts: the image map is a sixth
    /// of its size and `attach` without an interface is refused).
    pub hook_images: bool,
    /// Where `attach` without an interface puts the filter chains
    /// (`--hook-placement`: the netfilter hooks, or tc where the kernel
    /// has no netfilter BPF links).
    pub hook_placement: HookPlacement,
    /// Keep the per-packet statistics (off: `--no-packet-stats`;
    /// `Dataplane::set_packet_stats`).
    pub packet_stats: bool,
    /// Tests only (`--test-abort-between-tc-links`): the link watcher
    /// aborts the process between a new interface's two tc placement
    /// links.
    pub test_abort_between_tc_links: bool,
    /// The command line (argv, from argv[0] on) that runs this daemon
    /// again: loads run it, with `--load-helper`, as a child process that
    /// pins what it loaded for this one to open (`kernel/load_child.rs`),
    /// so the kernel BTF's parse stays out of this process's memory peak.
    /// `None`, or no `pin_dir`: loads run in this process.
    pub load_child: Option<Vec<std::ffi::OsString>>,
    /// The program on XDP links (`--xdp-engine`): the walker, a program
    /// generated from the interface chain (straight-line or the tree
    /// form), or the cheapest that fits
    /// (`parapet_dataplane::codegen::choose_with_image`).
    pub xdp_engine: parapet_dataplane::EngineWant,
    /// Tests only (`--test-tree-budget`): instructions per program of the
    /// split tree form (`None`: `codegen::TREE_PROGRAM_BUDGET`), so a
    /// small list takes the split form.
    pub test_tree_budget: Option<usize>,
    /// Tests only (`--test-xdp-load-hold-ms`): the background load of a
    /// tree form waits this long (without the state lock) before its swap.
    pub test_xdp_load_hold: std::time::Duration,
}

/// The nft table parapetd installs for conntrack (`inet parapetd_ct`).
pub const CT_TABLE: &str = "parapetd_ct";

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            max_rules: 65_535,
            image_mib: 16,
            chain: None,
            log_rate: 10,
            conntrack_table: true,
            pin_dir: None,
            debug_program: false,
            hook_images: true,
            hook_placement: HookPlacement::Auto,
            packet_stats: true,
            test_abort_between_tc_links: false,
            load_child: None,
            xdp_engine: parapet_dataplane::EngineWant::Auto,
            test_tree_budget: None,
            test_xdp_load_hold: std::time::Duration::ZERO,
        }
    }
}

/// One attachment (requested, and what the kernel gave).
#[derive(Clone, Debug)]
pub struct Attachment {
    /// Interface name.
    pub iface: String,
    /// Where the program runs (`--hook`).
    pub hook: AttachPoint,
    /// XDP mode requested.
    pub mode: Mode,
    /// XDP mode in use (`None` at tc).
    pub actual: Option<Mode>,
    /// Set when the request was not met exactly (native fell back to skb),
    /// and at the netfilter hooks what is enforced differently there.
    pub note: Option<String>,
    pub(crate) id: u64,
    /// At [`AttachPoint::Netfilter`]: the links, with their attachment ids
    /// and the priority the kernel took (the nearest free one).
    pub(crate) links: Vec<(NfWant, u64, i32)>,
    /// At [`AttachPoint::Netfilter`] in the tc placement: the links per
    /// interface (`links` is then empty).
    pub(crate) tc_links: Vec<parapet_dataplane::TcHooksAttached>,
}

/// Parses the protocol's `hook` and `mode` fields.
pub fn parse_hook_mode(
    hook: Option<&str>,
    mode: Option<&str>,
) -> Result<(AttachPoint, Mode), String> {
    let h = match hook.unwrap_or("xdp") {
        "xdp" => AttachPoint::Xdp,
        "tc" => AttachPoint::Tc,
        "netfilter" => AttachPoint::Netfilter,
        other => {
            return Err(format!(
                "unknown hook `{other}` (expected xdp, tc or netfilter)"
            ))
        }
    };
    let m = match mode.unwrap_or("native") {
        "native" => Mode::Native,
        "skb" | "generic" => Mode::Skb,
        other => return Err(format!("unknown mode `{other}` (expected native or skb)")),
    };
    Ok((h, m))
}

/// The protocol's name of a hook.
pub fn hook_name(h: AttachPoint) -> &'static str {
    match h {
        AttachPoint::Xdp => "xdp",
        AttachPoint::Tc => "tc",
        AttachPoint::Netfilter => "netfilter",
    }
}

/// The protocol's name of an XDP mode.
pub fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Native => "native",
        Mode::Skb => "skb",
    }
}

pub(crate) fn dp_err(what: &str, e: impl std::fmt::Display) -> ErrorReply {
    ErrorReply::new(code::DATAPLANE, format!("{what}: {e}"))
}

/// What a failed load is reported as.
const LOAD_WHAT: &str =
    "loading the eBPF program (needs root or CAP_BPF+CAP_NET_ADMIN+CAP_PERFMON, kernel >= 6.6)";

/// The load's sizing and features, from the config: the conntrack kfuncs
/// linked in whenever the kernel has them, so a later apply can switch the
/// lookup on.
fn load_params(config: &KernelConfig) -> (LoadOptions, SetSizing, Features) {
    let opts = LoadOptions {
        max_rules: config.max_rules.max(1),
        slot_pages: config.image_mib.max(1).saturating_mul(256),
        debug: config.debug_program,
    };
    let interface_only = !config.hook_images;
    let features = Features {
        conntrack: true,
        interface_only,
        // verified now when the placement is forced; under `auto` at the
        // first attach that needs them
        tc_hooks: config.hook_placement == HookPlacement::Tc && !interface_only,
    };
    (opts, SetSizing::default(), features)
}

/// Runs `load` with `features`, again without the conntrack lookup when
/// that fails: a kernel that has the kfuncs but refuses the lookup code
/// still gets a dataplane, without it (an apply that needs it then says
/// so).
fn load_with_fallback<T>(
    features: &Features,
    load: impl Fn(&Features) -> parapet_dataplane::Result<T>,
) -> parapet_dataplane::Result<T> {
    load(features).or_else(|e| {
        eprintln!("parapetd: loading with the conntrack lookup failed ({e}); loading without it");
        load(&Features {
            conntrack: false,
            ..features.clone()
        })
    })
}

/// The daemon's kernel dataplane.
#[derive(Default)]
pub struct Kernel {
    /// Sizing and chain.
    pub config: KernelConfig,
    pub(crate) dp: Option<Dataplane>,
    pub(crate) attached: Vec<Attachment>,
    /// Attachments read from the journal, made at [`Kernel::restore`].
    pending: Vec<(String, AttachPoint, Mode)>,
    /// The conntrack table while installed ([`Kernel::ct_table_wanted`]).
    ct_table: Option<ConntrackTable>,
    /// The netfilter links the active ruleset wants (src/hooks.rs).
    pub(crate) nf_plan: Vec<NfWant>,
    /// The hook chains' rules on the socket owner (`HookPlan::owner`):
    /// the tc placement refuses them.
    pub(crate) nf_owner: Option<String>,
    /// The active ruleset's hook-chain rules with a reverse-path check:
    /// `attach` at the netfilter hooks refuses them (the tc placement
    /// takes them).
    pub(crate) nf_rev_path: Option<String>,
    /// The active ruleset's hook chains match ctstate.
    pub(crate) nf_ct: bool,
    /// Why the active ruleset cannot go to the netfilter hooks (two chains
    /// at one hook); refused there, fine on interfaces.
    pub(crate) nf_refused: Option<String>,
    /// Why the active ruleset has no chain for the interface hooks (no
    /// `--chain` and no input chain): `attach IFACE` is refused.
    pub(crate) no_iface_chain: Option<String>,
    /// What the rejecter thread did with the netfilter REJECTs
    /// (src/rejecter.rs), for `stats`.
    pub nf_reject: std::sync::Arc<parapet_dataplane::RejectCounts>,
    /// What the link watcher did for the tc placement (src/link_watch.rs).
    pub(crate) tc_follow: tc_placement::TcFollow,
    /// What the link watcher may link without the state lock.
    pub tc_watch: std::sync::Arc<std::sync::Mutex<tc_placement::TcWatch>>,
    /// The address-type mirror (kernel/addr_mirror.rs).
    pub(crate) addr_mirror: addr_mirror::AddrMirror,
    /// The XDP links' engine (kernel/xdp_engine.rs).
    pub(crate) xdp: xdp_engine::XdpEngineState,
}

impl Kernel {
    /// A kernel dataplane that is not loaded yet.
    pub fn new(config: KernelConfig) -> Kernel {
        Kernel {
            config,
            dp: None,
            attached: Vec::new(),
            pending: Vec::new(),
            ct_table: None,
            nf_plan: Vec::new(),
            nf_owner: None,
            nf_rev_path: None,
            nf_ct: false,
            nf_refused: None,
            no_iface_chain: None,
            nf_reject: Default::default(),
            tc_follow: Default::default(),
            tc_watch: Default::default(),
            addr_mirror: Default::default(),
            xdp: Default::default(),
        }
    }

    /// Whether the BPF program is loaded.
    pub fn loaded(&self) -> bool {
        self.dp.is_some()
    }

    /// The attachments.
    pub fn attachments(&self) -> &[Attachment] {
        &self.attached
    }

    /// Loads and verifies the programs `want` (what the attach that asks
    /// runs), sized by the config: seconds of CPU per program, so call it
    /// without the state lock, then [`Kernel::adopt`]. The links pinned
    /// by an earlier parapetd add their programs (an adoption swaps them
    /// to this load's), and a forced tc placement its own; the others load
    /// at their first use ([`Kernel::late_load_plan`]).
    pub fn load(config: &KernelConfig, want: Programs) -> Result<Dataplane, ErrorReply> {
        let (opts, sizing, features) = load_params(config);
        let pins = config.pin_dir.as_deref();
        let mut want = want;
        want.tc_hooks |= features.tc_hooks;
        if let Some(root) = pins {
            want = want.union(Programs::of_pinned_links(root));
        }
        let mut dp = match (&config.load_child, pins) {
            (Some(argv), Some(pins)) => {
                load_child::load_in_child(argv, &opts, &sizing, &features, pins, want)?
            }
            _ => load_with_fallback(&features, |f| {
                Dataplane::load_pinned(&opts, &sizing, f, pins)
            })
            .map_err(|e| dp_err(LOAD_WHAT, e))?,
        };
        if !dp.maps_adopted() {
            // (adopted maps keep the live program's switch until the
            // journal's ruleset is made live in them)
            dp.set_conntrack(false)
                .map_err(|e| dp_err("switching the conntrack lookup off", e))?;
        }
        // this start's flag, adopted maps included
        dp.set_packet_stats(config.packet_stats)
            .map_err(|e| dp_err("setting the per-packet statistics switch", e))?;
        // The netfilter program loads on first use; here, outside the state
        // lock, when the attach that loads runs it. A kernel without it
        // just has no netfilter hooks.
        if want.netfilter {
            if let Some(why) = dp.netfilter_note() {
                eprintln!("parapetd: the netfilter hooks are not available: {why}");
            }
        }
        // Loading parsed the kernel's BTF (twice: aya's loader and the
        // netfilter program's relocation) and the object: tens of MB of
        // heap, free again now, that glibc keeps resident unless told.
        #[cfg(target_env = "gnu")]
        // SAFETY: malloc_trim only releases free heap pages to the kernel.
        unsafe {
            libc::malloc_trim(0);
        }
        Ok(dp)
    }

    /// The programs an attach at `hook` runs with this config: at the
    /// netfilter hooks, the netfilter program, or the tc placement's when
    /// it is forced (under `auto` they load when the netfilter program
    /// turns out unavailable).
    pub fn programs_for(config: &KernelConfig, hook: AttachPoint) -> Programs {
        match (hook, config.hook_placement) {
            (AttachPoint::Netfilter, HookPlacement::Tc) => Programs {
                tc_hooks: true,
                ..Default::default()
            },
            _ => Programs::for_hook(hook),
        }
    }

    /// What an attach at `hook` needs that the loaded dataplane has not
    /// loaded yet, and the loader that verifies it: for the caller to run
    /// without the state lock, then add with
    /// [`Dataplane::add_late_programs`]. `None` when nothing is to load
    /// ahead (the dataplane loads in-process programs itself on use).
    pub fn late_load_plan(
        &self,
        hook: AttachPoint,
    ) -> Option<(parapet_dataplane::LateLoader, Programs)> {
        let dp = self.dp.as_ref()?;
        let mut want = Self::programs_for(&self.config, hook);
        if hook == AttachPoint::Netfilter
            && self.config.hook_placement == HookPlacement::Auto
            && matches!(dp.netfilter_tried(), Some(Err(_)))
        {
            // the tc placement stands in for the netfilter hooks
            want.tc_hooks = true;
        }
        dp.late_load_plan(want)
    }

    /// Whether the conntrack table should exist: the lookup is on, the
    /// program is attached somewhere, and the flag allows it.
    fn ct_table_wanted(&self, lookup_on: bool, attached: bool) -> bool {
        self.config.conntrack_table
            && ((lookup_on && attached) || (self.nf_ct && self.nf_attached()))
    }

    /// Whether the netfilter hooks are attached.
    pub fn nf_attached(&self) -> bool {
        self.attached
            .iter()
            .any(|a| a.hook == AttachPoint::Netfilter)
    }

    /// Creates the conntrack table when wanted and missing (before the
    /// lookup needs it: an error then changes nothing).
    pub(crate) fn ensure_ct_table(
        &mut self,
        lookup_on: bool,
        attached: bool,
    ) -> Result<(), ErrorReply> {
        if self.ct_table.is_none() && self.ct_table_wanted(lookup_on, attached) {
            let t = ConntrackTable::install(CT_TABLE).map_err(|e| {
                ErrorReply::new(
                    code::DATAPLANE,
                    format!(
                        "the ruleset matches ctstate, so the kernel must track connections, \
                         but creating nft table inet {CT_TABLE} failed ({e}); \
                         start parapetd with --no-conntrack-table if conntrack is enabled otherwise"
                    ),
                )
            })?;
            self.ct_table = Some(t);
        }
        Ok(())
    }

    /// Deletes the conntrack table when no longer wanted.
    pub(crate) fn prune_ct_table(&mut self) {
        let on = self.dp.as_ref().is_some_and(Dataplane::conntrack);
        if !self.ct_table_wanted(on, !self.attached.is_empty()) {
            if let Some(t) = self.ct_table.take() {
                if let Err(e) = t.remove() {
                    eprintln!("parapetd: deleting nft table inet {CT_TABLE}: {e}");
                }
            }
        }
    }

    /// Checks that a ruleset can run in the loaded program and makes it
    /// live there (nothing when not loaded). On error the old ruleset stays
    /// live in the kernel; the caller then leaves user space alone too.
    pub fn apply(
        &mut self,
        rs: &Ruleset,
        compiled: &[CompiledChain],
        sets: &SetStore,
    ) -> Result<(), ErrorReply> {
        let Some(dp) = &self.dp else {
            return Ok(());
        };
        let needs = needs_ct(&self.config, dp, rs, compiled)?;
        let plan = hooks::hook_plan(rs, compiled);
        if let (Err(e), true) = (&plan, self.nf_attached()) {
            return Err(ErrorReply::new(
                code::APPLY,
                format!("attached at the netfilter hooks: {e}"),
            ));
        }
        if let (Ok(p), true) = (&plan, self.tc_placed()) {
            if let Some(why) = tc_placement::tc_refusal(&p.links)
                .or_else(|| tc_placement::tc_owner_refusal(p.owner.as_ref()))
            {
                return Err(ErrorReply::new(code::APPLY, why));
            }
        }
        if let (Ok(p), true, false) = (&plan, self.nf_attached(), self.tc_placed()) {
            if let Some(why) = hooks::nf_rev_path_refusal(p.rev_path.as_ref()) {
                return Err(ErrorReply::new(code::APPLY, why));
            }
        }
        let nf_ct = plan.is_ok_and(|p| p.needs_ct);
        // the table first, so connections are tracked when the image
        // that reads their state goes live
        let iface = self
            .attached
            .iter()
            .any(|a| a.hook != AttachPoint::Netfilter);
        self.ensure_ct_table((needs && iface) || (nf_ct && self.nf_attached()), true)?;
        // the XDP links' next program loaded before the swap, put on them
        // right after it
        let xdp = self.prepare_xdp(rs, compiled);
        let tc = self.tc_placed();
        let r = match &mut self.dp {
            Some(dp) => {
                // interfaces made since the attach get their names (-i/-o)
                if self
                    .attached
                    .iter()
                    .any(|a| a.hook == AttachPoint::Netfilter)
                {
                    dp.refresh_ifnames()
                        .map_err(|e| dp_err("reading the interface names", e))?;
                }
                install(
                    &self.config,
                    dp,
                    rs,
                    compiled,
                    sets,
                    true,
                    Placed {
                        on_iface: iface,
                        tc_placed: tc,
                    },
                )
            }
            None => Ok(Default::default()),
        };
        if r.is_ok() {
            // the walker's image is live: the XDP links get their engine
            self.commit_xdp(xdp);
        }
        let r = r.and_then(|done| {
            self.nf_plan = done.links;
            self.nf_owner = done.owner;
            self.nf_rev_path = done.rev_path;
            self.nf_ct = done.needs_ct;
            self.nf_refused = done.refused;
            self.no_iface_chain = done.no_iface_chain;
            // after the swap: a new link finds its chain's image live
            self.sync_nf_links()
        });
        self.prune_ct_table();
        r
    }

    /// `apply --check` while loaded: would the ruleset fit the program?
    pub fn check(&self, rs: &Ruleset, compiled: &[CompiledChain]) -> Result<(), ErrorReply> {
        match &self.dp {
            None => Ok(()),
            Some(dp) => {
                let iface = fits(&self.config, dp, rs, compiled)?;
                let on_iface = self
                    .attached
                    .iter()
                    .any(|a| a.hook != AttachPoint::Netfilter);
                if let (Some(why), true) = (iface.missing, on_iface) {
                    return Err(ErrorReply::new(
                        code::APPLY,
                        format!("attached to an interface (xdp/tc): {why}; detach it first"),
                    ));
                }
                if let (Err(e), true) = (hooks::hook_plan(rs, compiled), self.nf_attached()) {
                    return Err(ErrorReply::new(
                        code::APPLY,
                        format!("attached at the netfilter hooks: {e}"),
                    ));
                }
                if let (Ok(p), true) = (hooks::hook_plan(rs, compiled), self.tc_placed()) {
                    if let Some(why) = tc_placement::tc_refusal(&p.links)
                        .or_else(|| tc_placement::tc_owner_refusal(p.owner.as_ref()))
                    {
                        return Err(ErrorReply::new(code::APPLY, why));
                    }
                }
                if let (Ok(p), true, false) = (
                    hooks::hook_plan(rs, compiled),
                    self.nf_attached(),
                    self.tc_placed(),
                ) {
                    if let Some(why) = hooks::nf_rev_path_refusal(p.rev_path.as_ref()) {
                        return Err(ErrorReply::new(code::APPLY, why));
                    }
                }
                needs_ct(&self.config, dp, rs, compiled).map(|_| ())
            }
        }
    }

    /// Attaches the loaded program to `iface`.
    pub fn attach(
        &mut self,
        iface: &str,
        hook: AttachPoint,
        mode: Mode,
    ) -> Result<Attachment, ErrorReply> {
        if self
            .attached
            .iter()
            .any(|a| a.iface == iface && a.hook == hook)
        {
            return Err(ErrorReply::new(
                code::EXISTS,
                if hook == AttachPoint::Netfilter {
                    "already attached at the netfilter hooks".to_string()
                } else {
                    format!("already attached to {iface} at {}", hook_name(hook))
                },
            ));
        }
        if hook == AttachPoint::Netfilter {
            return self.attach_netfilter(mode);
        }
        if let Some(why) = &self.no_iface_chain {
            return Err(ErrorReply::new(
                code::APPLY,
                format!("cannot attach to {iface}: {why}"),
            ));
        }
        let on = self
            .dp
            .as_ref()
            .ok_or_else(|| ErrorReply::new(code::DATAPLANE, "the eBPF program is not loaded"))?
            .conntrack();
        self.ensure_ct_table(on, true)?;
        let dp = self.dp.as_mut().expect("checked above");
        let a = dp
            .attach(iface, hook, mode)
            .map_err(|e| dp_err(&format!("attaching to {iface}"), e));
        let a = match a {
            Ok(a) => a,
            Err(e) => {
                self.prune_ct_table();
                return Err(e);
            }
        };
        let att = Attachment {
            iface: iface.to_string(),
            hook,
            mode,
            actual: a.mode,
            note: a.note,
            id: a.id,
            links: Vec::new(),
            tc_links: Vec::new(),
        };
        self.attached.push(att.clone());
        if hook == AttachPoint::Xdp {
            self.sync_xdp_engine();
        }
        Ok(att)
    }

    /// Detaches from `iface` (at `hook`, or at every hook when `None`).
    /// Returns how many attachments went.
    pub fn detach(
        &mut self,
        iface: &str,
        hook: Option<AttachPoint>,
    ) -> Result<Vec<AttachPoint>, ErrorReply> {
        let mut gone = Vec::new();
        let mut i = 0;
        while i < self.attached.len() {
            let a = &self.attached[i];
            if a.iface == iface && hook.map_or(true, |h| h == a.hook) {
                if let Some(dp) = &mut self.dp {
                    if a.hook == AttachPoint::Netfilter {
                        for (_, id, _) in &a.links {
                            dp.detach(*id)
                                .map_err(|e| dp_err("detaching from the netfilter hooks", e))?;
                        }
                        for l in &a.tc_links {
                            for id in [l.ingress, l.egress] {
                                dp.detach(id).map_err(|e| {
                                    dp_err(
                                        &format!("detaching the tc placement from {}", l.iface),
                                        e,
                                    )
                                })?;
                            }
                        }
                    } else {
                        dp.detach(a.id)
                            .map_err(|e| dp_err(&format!("detaching from {iface}"), e))?;
                    }
                }
                gone.push(a.hook);
                self.attached.remove(i);
            } else {
                i += 1;
            }
        }
        self.prune_ct_table();
        self.publish_tc_watch();
        if gone.is_empty() {
            return Err(ErrorReply::new(
                code::INVALID,
                format!("not attached to {iface}"),
            ));
        }
        Ok(gone)
    }

    /// Remembers an attachment read from the journal (replay).
    pub fn replay_attach(&mut self, iface: String, hook: AttachPoint, mode: Mode) {
        self.pending
            .retain(|(i, h, _)| !(*i == iface && *h == hook));
        self.pending.push((iface, hook, mode));
    }

    /// Forgets an attachment read from the journal (replay).
    pub fn replay_detach(&mut self, iface: &str, hook: AttachPoint) {
        self.pending.retain(|(i, h, _)| !(i == iface && *h == hook));
    }

    /// Attachments to journal in a snapshot: the live ones, plus those the
    /// journal named that were not made yet.
    pub fn journaled(&self) -> Vec<(String, AttachPoint, Mode)> {
        self.attached
            .iter()
            .map(|a| (a.iface.clone(), a.hook, a.mode))
            .chain(self.pending.iter().cloned())
            .collect()
    }
}

impl Drop for Kernel {
    /// A stopping parapetd leaves its pinned attachments enforcing, so it
    /// leaves the conntrack table they read too (the next start adopts
    /// or re-creates it).
    fn drop(&mut self) {
        let pinned = self
            .dp
            .as_ref()
            .is_some_and(|dp| !dp.pinned_attachments().is_empty());
        if pinned {
            if let Some(t) = self.ct_table.take() {
                std::mem::forget(t);
            }
        }
    }
}

fn iface_exists(iface: &str) -> bool {
    std::ffi::CString::new(iface)
        // SAFETY: a valid NUL-terminated string.
        .map(|c| unsafe { libc::if_nametoindex(c.as_ptr()) } != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_and_modes() {
        assert_eq!(
            parse_hook_mode(None, None).unwrap(),
            (AttachPoint::Xdp, Mode::Native)
        );
        assert_eq!(
            parse_hook_mode(Some("tc"), Some("skb")).unwrap(),
            (AttachPoint::Tc, Mode::Skb)
        );
        assert!(parse_hook_mode(Some("nf"), None).is_err());
        assert!(parse_hook_mode(None, Some("offload")).is_err());
    }

    #[test]
    fn replayed_attachments_are_kept_for_restore_and_snapshots() {
        let mut k = Kernel::default();
        k.replay_attach("eth0".into(), AttachPoint::Xdp, Mode::Native);
        k.replay_attach("eth1".into(), AttachPoint::Tc, Mode::Skb);
        k.replay_attach("eth0".into(), AttachPoint::Xdp, Mode::Skb); // re-attach replaces
        k.replay_detach("eth1", AttachPoint::Tc);
        assert_eq!(
            k.journaled(),
            vec![("eth0".to_string(), AttachPoint::Xdp, Mode::Skb)]
        );
        // Not loaded: set changes, counters and detaches touch no kernel.
        assert!(!k.loaded());
        assert!(k.set_flush("x").is_ok());
        assert!(k.counters(3).is_none());
        assert_eq!(k.detach("eth0", None).unwrap_err().code, code::INVALID);
        assert_eq!(k.stats()["loaded"], false);
        assert_eq!(
            k.attach("eth0", AttachPoint::Xdp, Mode::Native)
                .unwrap_err()
                .code,
            code::DATAPLANE
        );
    }
}
