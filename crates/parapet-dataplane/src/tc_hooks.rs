//! The tc facet of [`Dataplane`] for kernels without netfilter BPF links:
//! the filter chains' hook images enforced at tc ingress and egress of an
//! interface (`bpf/lib/tc_hooks.h`: a FIB lookup tells INPUT from FORWARD
//! at ingress, a socket tells OUTPUT at egress). docs/hooks.md, *Without
//! netfilter BPF links*, says what differs from the netfilter placement.

use std::borrow::Cow;
use std::os::fd::AsFd;

use aya::maps::{HashMap as BpfHashMap, IterableMap, Map, MapData, ProgramArray};
use aya::programs::links::FdLink;
use aya::programs::tc::TcAttachType;
use aya::programs::SchedClassifier;

use crate::abi::IfName;

use crate::error::{Error, Result};
use crate::load::{Dataplane, LinkId};
use crate::netfilter::{NfFamily, NfHook};
use crate::pin::LinkPin;

/// The program linked at ingress in the tc placement: PREROUTING, then
/// the INPUT/FORWARD stage by a tail call.
pub(crate) const PROG_TC_PRE_IN: &str = "parapet_tc_pre_in";
/// The ingress program's second stage (INPUT or FORWARD per packet), in
/// slot [`STAGE_ROUTE_IN`] of the stage map.
pub(crate) const PROG_TC_HOOKS_IN: &str = "parapet_tc_hooks_in";
/// The program linked at egress in the tc placement: OUTPUT, then the
/// POSTROUTING stage by a tail call.
pub(crate) const PROG_TC_HOOKS_OUT: &str = "parapet_tc_hooks_out";
/// The egress program's second stage (POSTROUTING), in slot
/// [`STAGE_POST_OUT`].
pub(crate) const PROG_TC_POST_OUT: &str = "parapet_tc_post_out";
/// The stage map (`BPF_MAP_TYPE_PROG_ARRAY`, `bpf/lib/tc_hooks.h`): the
/// linked programs tail-call their second stage through it.
const MAP_TC_STAGES: &str = "parapet_tc_stages";
/// Slot of the INPUT/FORWARD stage (`PARAPET_TC_STAGE_ROUTE_IN`).
pub const STAGE_ROUTE_IN: u32 = 0;
/// Slot of the POSTROUTING stage (`PARAPET_TC_STAGE_POST_OUT`).
pub const STAGE_POST_OUT: u32 = 1;
/// The programs of the tc placement, linked ones and stages, in load order.
pub(crate) const TC_PROGRAMS: [&str; 4] = [
    PROG_TC_PRE_IN,
    PROG_TC_HOOKS_IN,
    PROG_TC_HOOKS_OUT,
    PROG_TC_POST_OUT,
];

/// Pin name (`links/<iface>@<this>`) of a tc placement link at ingress.
pub const TC_HOOKS_IN: &str = "hooks-tc-in";
/// Pin name of a tc placement link at egress.
pub const TC_HOOKS_OUT: &str = "hooks-tc-out";

/// Whether a pin's hook name is one of the tc placement's.
pub fn is_tc_hooks_pin(hook: &str) -> bool {
    hook == TC_HOOKS_IN || hook == TC_HOOKS_OUT
}

/// The two links of the tc placement on one interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcHooksAttached {
    /// The interface.
    pub iface: String,
    /// Its index (0: gone or unknown): a renamed interface keeps it, and
    /// its links with it.
    pub ifindex: u32,
    /// Attachment id of the ingress link ([`Dataplane::detach`]).
    pub ingress: u64,
    /// Attachment id of the egress link.
    pub egress: u64,
}

/// The bit of `hook` and `family` in the tc placement's word (as
/// `bpf/lib/tc_hooks.h` reads it).
pub fn tc_hook_bit(hook: NfHook, family: NfFamily) -> u32 {
    let fam = match family {
        NfFamily::Ipv4 => 0,
        NfFamily::Ipv6 => 1,
    };
    1 << (2 * hook.hooknum() + fam)
}

/// The index of interface `name` in the calling thread's namespace (0
/// when there is none).
pub fn ifindex_of(name: &str) -> u32 {
    let Ok(c) = std::ffi::CString::new(name) else {
        return 0;
    };
    // SAFETY: c is a NUL-terminated string that outlives the call.
    unsafe { libc::if_nametoindex(c.as_ptr()) }
}

impl Dataplane {
    /// Tells the tc placement's programs which hooks have a chain for
    /// which family (the OR of [`tc_hook_bit`]s; the links of the
    /// netfilter placement): a packet whose hook and family have none
    /// passes, as where the netfilter placement has no link.
    pub fn set_tc_hooks(&mut self, bits: u32) -> Result<()> {
        self.config.set(crate::load::CFG_TC_HOOKS, bits, 0)?;
        Ok(())
    }

    /// Loads the tc placement's programs unless loaded (they are verified
    /// only by dataplanes that use them) and writes the second stages into
    /// the stage map, before any link can run the first ones. With pinning
    /// they join the pinned programs, so an upgrade swaps their links in
    /// place; the stage map is pinned with the maps, so the slots outlive
    /// the process, and an upgrade that reuses it writes its own stages
    /// here before it swaps the links' programs.
    pub fn load_tc_hook_programs(&mut self) -> Result<()> {
        self.load_tc_programs()?;
        for (slot, name) in [
            (STAGE_ROUTE_IN, PROG_TC_HOOKS_IN),
            (STAGE_POST_OUT, PROG_TC_POST_OUT),
        ] {
            let fd = self
                .ebpf
                .program(name)
                .ok_or(Error::Missing("program"))?
                .fd()?
                .try_clone()
                .map_err(|e| Error::Pin(format!("dup of program {name}: {e}")))?;
            self.tc_stages()?.set(slot, &fd, 0)?;
        }
        Ok(())
    }

    /// Loads the tc placement's programs unless loaded, and no more: the
    /// stage map is left as it is (a loader process, `src/handover.rs`,
    /// leaves the live stages to the process that takes over).
    pub(crate) fn load_tc_programs(&mut self) -> Result<()> {
        self.load_tc_programs_beside(|| ())
    }

    /// [`Self::load_tc_programs`], all at once, with `beside` running on
    /// one more thread (the loader process verifies the netfilter program
    /// there).
    pub(crate) fn load_tc_programs_beside(&mut self, beside: impl FnOnce() + Send) -> Result<()> {
        // handed over by a loader process, at their first use
        self.ensure_programs(crate::programs::Programs {
            tc_hooks: true,
            ..Default::default()
        })?;
        let loaded =
            crate::load::load_programs_at_once(self.ebpf.programs_mut(), &TC_PROGRAMS, beside)?;
        if let Some(pins) = &mut self.pins {
            pins.progs.extend(loaded);
        }
        Ok(())
    }

    fn tc_stages(&mut self) -> Result<ProgramArray<&mut MapData>> {
        let map = self
            .ebpf
            .map_mut(MAP_TC_STAGES)
            .ok_or(Error::Missing("map"))?;
        Ok(ProgramArray::try_from(map)?)
    }

    /// Empties a stage slot (tests: a linked program whose stage is
    /// missing must drop, never pass).
    #[doc(hidden)]
    pub fn clear_tc_stage(&mut self, slot: u32) -> Result<()> {
        self.tc_stages()?.clear_index(&slot)?;
        Ok(())
    }

    /// `BPF_PROG_TEST_RUN` of a linked tc placement program (`egress`
    /// false: the ingress one) on `frame`, with ingress interface
    /// `ifindex` (tests: the stage map's tail calls run as on a link).
    /// Returns the program's return code.
    #[doc(hidden)]
    pub fn test_run_tc_hooks(&self, egress: bool, frame: &[u8], ifindex: u32) -> Result<u32> {
        let name = if egress {
            PROG_TC_HOOKS_OUT
        } else {
            PROG_TC_PRE_IN
        };
        let prog = self.ebpf.program(name).ok_or(Error::Missing("program"))?;
        let ctx = crate::test_run::test_ctx(crate::AttachPoint::Tc, frame.len(), ifindex);
        let opts = aya::programs::TestRunOptions {
            data_in: Some(frame),
            ctx_in: (!ctx.is_empty()).then_some(&ctx[..]),
            repeat: 1,
            ..Default::default()
        };
        use aya::programs::TestRun;
        Ok(<&SchedClassifier>::try_from(prog)?
            .test_run(opts)?
            .return_value)
    }

    /// Enforce the INPUT, FORWARD and OUTPUT images at tc on `iface`: one
    /// link at ingress, one at egress, both TCX links (Linux >= 6.6), pinned
    /// as `links/<iface>@hooks-tc-in|out` with a pin directory. Either both
    /// are made or neither.
    pub fn attach_tc_hooks(&mut self, iface: &str) -> Result<TcHooksAttached> {
        self.load_tc_hook_programs()?;
        let ingress = self.attach_tc_hook(iface, PROG_TC_PRE_IN, TcAttachType::Ingress)?;
        let egress = match self.attach_tc_hook(iface, PROG_TC_HOOKS_OUT, TcAttachType::Egress) {
            Ok(id) => id,
            Err(e) => {
                let _ = self.detach(ingress);
                return Err(e);
            }
        };
        // -i / -o match names: every interface may be one a packet leaves by
        self.refresh_ifnames()?;
        Ok(TcHooksAttached {
            iface: iface.to_string(),
            ifindex: ifindex_of(iface),
            ingress,
            egress,
        })
    }

    /// One of the tc placement's two links on `iface` (`egress`: the
    /// egress one), pinned as `links/<iface>@hooks-tc-in|out`: a starting
    /// parapetd completes an interface an earlier one was killed between
    /// linking (the lone link keeps enforcing throughout). Returns the
    /// attachment id.
    pub fn attach_tc_hook_half(&mut self, iface: &str, egress: bool) -> Result<u64> {
        self.load_tc_hook_programs()?;
        let (name, at) = if egress {
            (PROG_TC_HOOKS_OUT, TcAttachType::Egress)
        } else {
            (PROG_TC_PRE_IN, TcAttachType::Ingress)
        };
        let id = self.attach_tc_hook(iface, name, at)?;
        self.refresh_ifnames()?;
        Ok(id)
    }

    /// The interface of `links` was renamed to `new` (the kernel keeps
    /// the links on the device): their pins follow the name
    /// (`links/<new>@hooks-tc-in|out`, renamed in place, so each always
    /// pins the live link) and `-i`/`-o` see the new name.
    pub fn rename_tc_hooks(&mut self, links: &mut TcHooksAttached, new: &str) -> Result<()> {
        let root = self.pin_dir().map(std::path::Path::to_path_buf);
        for id in [links.ingress, links.egress] {
            if let (Some(root), Some(LinkId::Pinned(pin))) = (&root, self.links.get_mut(&id)) {
                let to = crate::pin::link_path(root, new, &pin.hook);
                std::fs::rename(&pin.path, &to).map_err(|e| crate::pin::pin_err(&pin.path, e))?;
                pin.path = to;
                pin.target = new.to_string();
            }
        }
        links.iface = new.to_string();
        self.refresh_ifnames()
    }

    fn attach_tc_hook(&mut self, iface: &str, name: &str, at: TcAttachType) -> Result<u64> {
        let prog = self
            .ebpf
            .program_mut(name)
            .ok_or(Error::Missing("program"))?;
        let prog = <&mut SchedClassifier>::try_from(prog)?;
        let id = prog.attach(iface, at)?;
        // out of aya's keeping: a TCX link is a BPF link (pinnable, closed
        // by its descriptor); a netlink filter (before 6.6) is neither
        let link = FdLink::try_from(prog.take_link(id)?).map_err(|_| {
            Error::Pin(format!(
                "the tc placement needs TCX links (Linux >= 6.6): {iface} got a netlink \
                 tc filter, which cannot be pinned or adopted"
            ))
        })?;
        let hook = if name == PROG_TC_PRE_IN {
            TC_HOOKS_IN
        } else {
            TC_HOOKS_OUT
        };
        self.keep_tc_link(iface, hook, link)
    }

    /// Takes a link made ahead into the dataplane's keeping: a staged pin
    /// is renamed to `links/<iface>@<hook>` (atomically: the link is
    /// pinned throughout), an unstaged link pinned there.
    fn keep_ahead_link(&mut self, iface: &str, hook: &str, ahead: &mut AheadLink) -> Result<u64> {
        let (Some(root), Some(staged)) = (
            self.pin_dir().map(std::path::Path::to_path_buf),
            ahead.staged.clone(),
        ) else {
            let link = ahead.link.take().expect("held until taken");
            return self.keep_tc_link(iface, hook, link);
        };
        let path = crate::pin::link_path(&root, iface, hook);
        std::fs::rename(&staged, &path).map_err(|e| crate::pin::pin_err(&path, e))?;
        ahead.staged = None;
        let pin = LinkPin::open(path, iface, hook)?;
        let id = self.next_id;
        self.next_id += 1;
        self.links.insert(id, LinkId::Pinned(pin));
        Ok(id)
    }

    /// Takes `link` into the dataplane's keeping: pinned as
    /// `links/<iface>@<hook>` when pinning, detached by its id.
    fn keep_tc_link(&mut self, iface: &str, hook: &str, link: FdLink) -> Result<u64> {
        let kept = match self.pin_dir().map(std::path::Path::to_path_buf) {
            Some(root) => LinkId::Pinned(LinkPin::pin(&root, link, iface, hook)?),
            None => LinkId::Fd(link),
        };
        let id = self.next_id;
        self.next_id += 1;
        self.links.insert(id, kept);
        Ok(id)
    }
}

/// What a thread without the [`Dataplane`] needs to put the tc placement
/// on a new interface: its own handles on the two loaded programs and on
/// the interface-name map ([`Dataplane::tc_hooks_kit`]). parapetd's link
/// watcher links new interfaces with it while another thread holds the
/// dataplane (an apply): the links judge packets from then on, and the
/// dataplane takes them over later ([`Dataplane::keep_tc_hooks`]).
pub struct TcHooksKit {
    ingress: SchedClassifier,
    egress: SchedClassifier,
    ifnames: BpfHashMap<MapData, u32, IfName>,
    /// The dataplane's pin directory: each link is pinned under a staged
    /// name the moment it exists ([`crate::pin::STAGED`]).
    pin_root: Option<std::path::PathBuf>,
}

/// One link a [`TcHooksKit`] made, with its staged pin when pinning:
/// dropped before the dataplane takes it over, the pin goes too (and the
/// link with it).
struct AheadLink {
    link: Option<FdLink>,
    staged: Option<std::path::PathBuf>,
}

impl AheadLink {
    /// Pins `link` as `links/staged:<iface>@<hook>` under `root`, if any.
    fn stage(
        link: FdLink,
        root: Option<&std::path::Path>,
        iface: &str,
        hook: &str,
    ) -> Result<Self> {
        let Some(root) = root else {
            return Ok(AheadLink {
                link: Some(link),
                staged: None,
            });
        };
        let path = crate::pin::staged_link_path(root, iface, hook);
        // one left by a kit whose links were not taken over
        let _ = std::fs::remove_file(&path);
        let pinned = link
            .pin(&path)
            .map_err(|e| Error::Pin(format!("{}: {e}", path.display())))?;
        Ok(AheadLink {
            link: Some(FdLink::from(pinned)),
            staged: Some(path),
        })
    }

    fn link(&self) -> &FdLink {
        self.link.as_ref().expect("held until taken")
    }
}

impl Drop for AheadLink {
    fn drop(&mut self) {
        if let Some(p) = self.staged.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The two links a [`TcHooksKit`] made on one interface, not yet in the
/// dataplane's keeping (dropping them detaches them). With a pin
/// directory they are pinned under staged names from the moment they
/// exist, so a process killed before the takeover leaves them enforcing
/// and the next start adopts them.
pub struct TcHooksLinks {
    /// The interface, as named when linked.
    pub iface: String,
    /// Its index.
    pub ifindex: u32,
    ingress: AheadLink,
    egress: AheadLink,
}

impl std::fmt::Debug for TcHooksLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TcHooksLinks({}#{})", self.iface, self.ifindex)
    }
}

impl TcHooksKit {
    /// Links both programs on `iface` (index `ifindex`), its name first in
    /// the interface-name map so `-i`/`-o` match it from the first packet.
    /// Either both links are made or neither (a process killed between
    /// them leaves the ingress link pinned alone: the next start adds the
    /// egress one, [`Dataplane::attach_tc_hook_half`]).
    pub fn link(&mut self, iface: &str, ifindex: u32) -> Result<TcHooksLinks> {
        self.link_pausing(iface, ifindex, &mut || {})
    }

    /// [`TcHooksKit::link`], calling `between` after the ingress link is
    /// made and pinned and before the egress one (tests: parapetd's
    /// `--test-abort-between-tc-links` dies there).
    #[doc(hidden)]
    pub fn link_pausing(
        &mut self,
        iface: &str,
        ifindex: u32,
        between: &mut dyn FnMut(),
    ) -> Result<TcHooksLinks> {
        let mut n = IfName::default();
        let len = iface.len().min(15);
        n.name[..len].copy_from_slice(&iface.as_bytes()[..len]);
        self.ifnames.insert(ifindex, n, 0)?;
        let root = self.pin_root.as_deref();
        let ingress = tcx_link(&mut self.ingress, iface, TcAttachType::Ingress)?;
        let ingress = AheadLink::stage(ingress, root, iface, TC_HOOKS_IN)?;
        between();
        let egress = tcx_link(&mut self.egress, iface, TcAttachType::Egress)?;
        let egress = AheadLink::stage(egress, root, iface, TC_HOOKS_OUT)?;
        Ok(TcHooksLinks {
            iface: iface.to_string(),
            ifindex,
            ingress,
            egress,
        })
    }
}

fn tcx_link(p: &mut SchedClassifier, iface: &str, at: TcAttachType) -> Result<FdLink> {
    let id = p.attach(iface, at)?;
    FdLink::try_from(p.take_link(id)?).map_err(|_| {
        Error::Pin(format!(
            "the tc placement needs TCX links (Linux >= 6.6): {iface} got a netlink tc filter"
        ))
    })
}

impl Dataplane {
    /// A [`TcHooksKit`] for the tc placement's programs (loaded here if
    /// they are not yet).
    pub fn tc_hooks_kit(&mut self) -> Result<TcHooksKit> {
        self.load_tc_hook_programs()?;
        let mut progs = Vec::new();
        for name in [PROG_TC_PRE_IN, PROG_TC_HOOKS_OUT] {
            let prog = self
                .ebpf
                .program_mut(name)
                .ok_or(Error::Missing("program"))?;
            let p = <&mut SchedClassifier>::try_from(prog)?;
            progs.push(SchedClassifier::from_program_info(
                p.info()?,
                Cow::Borrowed(name),
            )?);
        }
        let fd = self
            .ifnames
            .map()
            .fd()
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| Error::Pin(format!("dup of the interface-name map: {e}")))?;
        let ifnames = BpfHashMap::try_from(Map::HashMap(MapData::from_fd(fd)?))?;
        let egress = progs.pop().ok_or(Error::Missing("program"))?;
        let ingress = progs.pop().ok_or(Error::Missing("program"))?;
        Ok(TcHooksKit {
            ingress,
            egress,
            ifnames,
            pin_root: self.pin_dir().map(std::path::Path::to_path_buf),
        })
    }

    /// Takes over the links a [`TcHooksKit`] made, as if
    /// [`Dataplane::attach_tc_hooks`] had made them on `iface` (the
    /// interface's name now: it may have been renamed since). Refused
    /// (and the links dropped) when they run other programs than this
    /// dataplane's (a kit of a dataplane since replaced): the caller
    /// attaches anew.
    pub fn keep_tc_hooks(
        &mut self,
        mut links: TcHooksLinks,
        iface: &str,
    ) -> Result<TcHooksAttached> {
        for (name, link) in [
            (PROG_TC_PRE_IN, links.ingress.link()),
            (PROG_TC_HOOKS_OUT, links.egress.link()),
        ] {
            let prog = self
                .ebpf
                .program_mut(name)
                .ok_or(Error::Missing("program"))?;
            let ours = <&mut SchedClassifier>::try_from(prog)?.info()?.id();
            let runs = link
                .info()
                .map_err(|e| Error::Pin(format!("reading a link of {iface}: {e}")))?
                .program_id();
            if runs != ours {
                return Err(Error::Pin(format!(
                    "the links made on {iface} run program {runs}, not {ours}"
                )));
            }
        }
        let ingress = self.keep_ahead_link(iface, TC_HOOKS_IN, &mut links.ingress)?;
        let egress = match self.keep_ahead_link(iface, TC_HOOKS_OUT, &mut links.egress) {
            Ok(id) => id,
            Err(e) => {
                let _ = self.detach(ingress);
                return Err(e);
            }
        };
        self.refresh_ifnames()?;
        Ok(TcHooksAttached {
            iface: iface.to_string(),
            ifindex: links.ifindex,
            ingress,
            egress,
        })
    }
}
