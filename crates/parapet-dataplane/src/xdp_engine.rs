//! Which program runs on the XDP links: the main program (the image
//! walker) or one generated from the interface chain's decision list
//! ([`crate::codegen`]), swapped on each link with `BPF_LINK_UPDATE` —
//! never detached, so no packet passes a link without a program.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use aya::maps::IterableMap;
use aya::programs::Xdp;
use parapet_image::Image;
use parapet_model::DecisionList;

use crate::attach::{hook_pin_name, AttachPoint};
use crate::bpf_sys;
use crate::codegen::{
    self, Choice, EngineWant, Maps, XdpEngine, GENERATED_PROG_NAME, GENERATED_TREE_PROG_NAME,
};
use crate::error::{Error, Result};
use crate::load::{Dataplane, LinkId, PROG_XDP};
use crate::test_run::TestRunOutcome;

/// A generated program on a dataplane's maps, loaded and not attached
/// ([`Dataplane::load_xdp_generated`]).
#[derive(Debug)]
pub struct GeneratedOnMaps {
    fd: OwnedFd,
    insns: usize,
    /// The split tree form's prog array, kept open while it runs, and
    /// its programs after the first.
    _prog_array: Option<OwnedFd>,
    parts: Vec<OwnedFd>,
}

impl GeneratedOnMaps {
    /// Instructions in the program.
    pub fn insn_count(&self) -> usize {
        self.insns
    }

    /// The instructions the verifier walked to load it (all its programs
    /// when split).
    pub fn verified_insns(&self) -> Result<u32> {
        Ok(self.verified_per_program()?.iter().sum())
    }

    /// The instructions the verifier walked per program: one, or each of
    /// a split tree form's in order.
    pub fn verified_per_program(&self) -> Result<Vec<u32>> {
        std::iter::once(&self.fd)
            .chain(&self.parts)
            .map(|fd| {
                crate::bpf_sys::prog_verified_insns(fd.as_fd())
                    .map_err(|e| crate::Error::Codegen(format!("reading the program's info: {e}")))
            })
            .collect()
    }

    /// `BPF_PROG_TEST_RUN` on `frame`, `repeat` times, with the context
    /// the main program's test runs have for `ifindex`.
    pub fn test_run(&self, frame: &[u8], ifindex: u32, repeat: u32) -> Result<TestRunOutcome> {
        crate::floor::test_run_fd(self.fd.as_fd(), AttachPoint::Xdp, frame, ifindex, repeat)
    }
}

/// An engine chosen, and its program loaded, not yet on the links
/// ([`Dataplane::prepare_xdp_engine`]).
#[derive(Debug)]
pub struct PreparedXdpEngine {
    choice: Choice,
    prog: Option<OwnedFd>,
    /// The split tree form's prog array (`codegen::TreeProgram`): pinned
    /// with the swap, as the kernel empties it when its last descriptor
    /// and pin are gone.
    prog_array: Option<OwnedFd>,
}

impl PreparedXdpEngine {
    /// The engine it will put on the links, and why.
    pub fn choice(&self) -> &Choice {
        &self.choice
    }
}

impl PreparedXdpEngine {
    /// The walker, for `reason` (nothing loaded): what the links run while
    /// a chosen program loads elsewhere ([`XdpEngineLoader`]).
    pub fn walker(reason: String) -> PreparedXdpEngine {
        PreparedXdpEngine {
            choice: Choice {
                engine: XdpEngine::Walker,
                reason,
            },
            prog: None,
            prog_array: None,
        }
    }
}

/// Loads a chosen engine's program on any thread
/// ([`Dataplane::xdp_engine_loader`]): its own descriptors of the maps the
/// program counts in, so the generation and the verifier (seconds for the
/// split tree form) need neither the dataplane nor its owner's lock. The
/// result goes on the links with [`Dataplane::commit_xdp_engine`].
#[derive(Debug)]
pub struct XdpEngineLoader {
    counters: OwnedFd,
    stats: OwnedFd,
    config: OwnedFd,
    hook_stats: OwnedFd,
    /// Instructions per program of the split tree form.
    budget: usize,
}

impl XdpEngineLoader {
    /// Splits the tree form over programs of at most `budget` instructions
    /// (`codegen::TREE_PROGRAM_BUDGET` unless set: tests split small lists
    /// with it).
    pub fn with_tree_budget(mut self, budget: usize) -> XdpEngineLoader {
        self.budget = budget;
        self
    }

    /// The chosen engine's program for `list` (and its compiled `image`
    /// for the tree form) generated and loaded, not yet on the links; one
    /// that does not load leaves the walker, with the reason.
    pub fn load(
        &self,
        choice: Choice,
        list: Option<&DecisionList>,
        image: Option<&Image>,
    ) -> PreparedXdpEngine {
        let maps = Maps {
            counters: self.counters.as_fd(),
            stats: self.stats.as_fd(),
            config: self.config.as_fd(),
            hook_stats: self.hook_stats.as_fd(),
        };
        load_within(choice, list, image, &maps, self.budget)
    }
}

/// [`XdpEngineLoader::load`] on `maps`, the tree form's programs of the
/// default budget.
fn load_chosen(
    choice: Choice,
    list: Option<&DecisionList>,
    image: Option<&Image>,
    maps: &Maps<'_>,
) -> PreparedXdpEngine {
    load_within(choice, list, image, maps, codegen::TREE_PROGRAM_BUDGET)
}

fn load_within(
    mut choice: Choice,
    list: Option<&DecisionList>,
    image: Option<&Image>,
    maps: &Maps<'_>,
    budget: usize,
) -> PreparedXdpEngine {
    let loaded = match (choice.engine, list, image) {
        (XdpEngine::Generated, Some(l), _) => {
            Some(codegen::load_attached(l, maps).map(|(fd, _)| (fd, None)))
        }
        (XdpEngine::GeneratedTree, Some(l), Some(image)) => Some(
            codegen::load_tree_attached_within(l, image, maps, budget).map(|(t, shape)| {
                if shape.programs > 1 {
                    choice.reason = format!(
                        "{}, {} programs of {} instructions",
                        choice.reason, shape.programs, shape.insns
                    );
                }
                (t.entry, t.prog_array)
            }),
        ),
        _ => None,
    };
    match loaded {
        Some(Ok((fd, array))) => PreparedXdpEngine {
            choice,
            prog: Some(fd),
            prog_array: array,
        },
        Some(Err(e)) => {
            PreparedXdpEngine::walker(format!("the generated program did not load: {e}"))
        }
        None => PreparedXdpEngine {
            choice,
            prog: None,
            prog_array: None,
        },
    }
}

impl Dataplane {
    /// Puts the engine [`codegen::choose`] picks for `list` (the chain
    /// placed on interfaces; `None`: no chain, the walker) on every XDP
    /// link, after the caller made the ruleset live in the maps (the
    /// walker must find it there): [`Dataplane::prepare_xdp_engine`] then
    /// [`Dataplane::commit_xdp_engine`].
    pub fn set_xdp_engine(&mut self, list: Option<&DecisionList>, want: EngineWant) -> Choice {
        let prepared = self.prepare_xdp_engine(list, want);
        self.commit_xdp_engine(prepared)
    }

    /// [`Dataplane::set_xdp_engine`] knowing the list's compiled image
    /// (the tree form may be chosen: [`codegen::choose_with_image`]).
    pub fn set_xdp_engine_with_image(
        &mut self,
        list: Option<(&DecisionList, &Image)>,
        want: EngineWant,
    ) -> Choice {
        let prepared = self.prepare_xdp_engine_with_image(list, want);
        self.commit_xdp_engine(prepared)
    }

    /// Chooses the engine for `list` and, for a generated one, generates
    /// and loads its program — before the ruleset goes live, so the swap
    /// that follows it ([`Dataplane::commit_xdp_engine`]) is only the link
    /// update. One the verifier refuses leaves the walker. Unpinned XDP
    /// links (no pin directory) keep the walker: the swap needs the link's
    /// descriptor, which aya keeps for itself.
    pub fn prepare_xdp_engine(
        &self,
        list: Option<&DecisionList>,
        want: EngineWant,
    ) -> PreparedXdpEngine {
        self.prepare(list, None, want)
    }

    /// [`Dataplane::prepare_xdp_engine`] knowing the list's compiled
    /// image: the tree form may be chosen ([`codegen::choose_with_image`]).
    pub fn prepare_xdp_engine_with_image(
        &self,
        list: Option<(&DecisionList, &Image)>,
        want: EngineWant,
    ) -> PreparedXdpEngine {
        self.prepare(list.map(|l| l.0), list.map(|l| l.1), want)
    }

    fn prepare(
        &self,
        list: Option<&DecisionList>,
        image: Option<&Image>,
        want: EngineWant,
    ) -> PreparedXdpEngine {
        let choice = self.choose_xdp_engine(list, image, want);
        self.load_xdp_engine(choice, list, image)
    }

    /// The program of `choice` (from [`Dataplane::choose_xdp_engine`])
    /// loaded on this thread, on this dataplane's maps.
    pub fn load_xdp_engine(
        &self,
        choice: Choice,
        list: Option<&DecisionList>,
        image: Option<&Image>,
    ) -> PreparedXdpEngine {
        load_chosen(choice, list, image, &self.codegen_maps())
    }

    /// The engine [`codegen::choose_with_image`] picks for `list` (`None`:
    /// no chain, the walker), the walker while an XDP link is not pinned
    /// (the swap needs the link's descriptor, which aya keeps for an
    /// unpinned one). Nothing is loaded: [`XdpEngineLoader::load`] does
    /// that, on any thread.
    pub fn choose_xdp_engine(
        &self,
        list: Option<&DecisionList>,
        image: Option<&Image>,
        want: EngineWant,
    ) -> Choice {
        let choice = match list {
            Some(l) => codegen::choose_with_image(l, image, want),
            None => Choice {
                engine: XdpEngine::Walker,
                reason: "no chain for the interface hooks".into(),
            },
        };
        let unpinned = self
            .links
            .values()
            .any(|l| matches!(l, LinkId::Xdp(_)) || is_fd_xdp(l));
        if choice.engine != XdpEngine::Walker && unpinned {
            return Choice {
                engine: XdpEngine::Walker,
                reason: "an XDP link is not pinned (no pin directory): only the walker".into(),
            };
        }
        choice
    }

    /// What loads a chosen engine's program away from this dataplane
    /// (another thread, without the caller's locks): its own descriptors
    /// of the maps the program counts in.
    pub fn xdp_engine_loader(&self) -> Result<XdpEngineLoader> {
        let dup = |fd: BorrowedFd<'_>| {
            fd.try_clone_to_owned()
                .map_err(|e| Error::Codegen(format!("dup of a map: {e}")))
        };
        let m = self.codegen_maps();
        Ok(XdpEngineLoader {
            counters: dup(m.counters)?,
            stats: dup(m.stats)?,
            config: dup(m.config)?,
            hook_stats: dup(m.hook_stats)?,
            budget: codegen::TREE_PROGRAM_BUDGET,
        })
    }

    /// Swaps the prepared engine onto every pinned XDP link with
    /// `BPF_LINK_UPDATE`; returns the choice (its reason names a failed
    /// update: the links already swapped run a program as valid as the
    /// others).
    ///
    /// A split tree form's prog array is pinned first
    /// (`xdp-tree/progs-<entry program id>` in the pin directory, so the
    /// program keeps its tail calls while parapetd is dead or restarting);
    /// when it cannot be, the walker stays. After the swap the other
    /// programs' prog array pins go.
    pub fn commit_xdp_engine(&mut self, prepared: PreparedXdpEngine) -> Choice {
        let PreparedXdpEngine {
            mut choice,
            mut prog,
            prog_array,
        } = prepared;
        let mut keep = None;
        if let (Some(array), Some(entry)) = (&prog_array, &prog) {
            match self.pin_prog_array(array, entry) {
                Ok(path) => keep = Some(path),
                Err(e) => {
                    choice = Choice {
                        engine: XdpEngine::Walker,
                        reason: format!(
                            "{} (pinning its prog array: {e}); the walker",
                            choice.reason
                        ),
                    };
                    prog = None;
                }
            }
        }
        match self.swap_xdp_links(prog.as_ref()) {
            Err(e) => choice.reason = format!("{} (swapping: {e})", choice.reason),
            Ok(()) => self.unpin_prog_arrays_but(keep.as_deref()),
        }
        choice
    }

    /// The pin directory's home of the split tree form's prog arrays.
    fn prog_array_dir(&self) -> Option<std::path::PathBuf> {
        Some(self.pins.as_ref()?.root.join(crate::pin::XDP_TREE_DIR))
    }

    /// Pins `array`, the prog array of the tree program `entry`, as
    /// `xdp-tree/progs-<entry program id>`.
    fn pin_prog_array(&self, array: &OwnedFd, entry: &OwnedFd) -> Result<std::path::PathBuf> {
        let dir = self
            .prog_array_dir()
            .ok_or(Error::Pin("no pin directory".into()))?;
        std::fs::create_dir_all(&dir).map_err(|e| crate::pin::pin_err(&dir, e))?;
        let id = bpf_sys::prog_id(entry.as_fd())
            .map_err(|e| Error::Pin(format!("the tree program's id: {e}")))?;
        let path = dir.join(format!("progs-{id}"));
        bpf_sys::obj_pin(array.as_fd(), &path).map_err(|e| crate::pin::pin_err(&path, e))?;
        Ok(path)
    }

    /// Removes the pinned prog arrays other than `keep` (no link runs
    /// their programs any more).
    fn unpin_prog_arrays_but(&self, keep: Option<&std::path::Path>) {
        let Some(dir) = self.prog_array_dir() else {
            return;
        };
        for name in crate::pin::read_dir_names(&dir) {
            let path = dir.join(name);
            if Some(path.as_path()) != keep {
                let _ = std::fs::remove_file(&path);
            }
        }
    }

    /// The program [`Dataplane::set_xdp_engine`] would put on the XDP
    /// links for `list` (eligible), loaded but not attached: for test runs
    /// (tests, the benchmark). It counts in this dataplane's maps.
    pub fn load_xdp_generated(&self, list: &DecisionList) -> Result<GeneratedOnMaps> {
        let (fd, insns) = self.load_generated(list)?;
        Ok(GeneratedOnMaps {
            fd,
            insns,
            _prog_array: None,
            parts: Vec::new(),
        })
    }

    /// The tree form of `list`'s generated program from its compiled
    /// `image` (pure first-match lists, [`codegen::tree_ineligible`]),
    /// counting in this dataplane's maps as [`Dataplane::load_xdp_generated`]'s
    /// does, loaded but not attached, and its shape.
    pub fn load_xdp_generated_tree(
        &self,
        list: &DecisionList,
        image: &parapet_image::Image,
    ) -> Result<(GeneratedOnMaps, codegen::TreeShape)> {
        self.load_xdp_generated_tree_within(list, image, codegen::TREE_PROGRAM_BUDGET)
    }

    /// [`Dataplane::load_xdp_generated_tree`] split over programs of at
    /// most `budget` instructions when it is larger (tests split small
    /// lists with it; `codegen::TREE_PROGRAM_BUDGET` otherwise).
    pub fn load_xdp_generated_tree_within(
        &self,
        list: &DecisionList,
        image: &parapet_image::Image,
        budget: usize,
    ) -> Result<(GeneratedOnMaps, codegen::TreeShape)> {
        let (t, shape) =
            codegen::load_tree_attached_within(list, image, &self.codegen_maps(), budget)?;
        let loaded = GeneratedOnMaps {
            fd: t.entry,
            insns: shape.insns,
            _prog_array: t.prog_array,
            parts: t.parts,
        };
        Ok((loaded, shape))
    }

    /// The generated program of `list`, counting in this dataplane's maps.
    fn load_generated(&self, list: &DecisionList) -> Result<(OwnedFd, usize)> {
        codegen::load_attached(list, &self.codegen_maps())
    }

    /// The main program's maps a generated program counts in (for
    /// [`codegen::generate_tree_attached`] in tests).
    pub fn codegen_maps(&self) -> Maps<'_> {
        Maps {
            counters: self.counters.map().fd().as_fd(),
            stats: self.stats.map().fd().as_fd(),
            config: self.config.map().fd().as_fd(),
            hook_stats: self.hook_stats.map().fd().as_fd(),
        }
    }

    /// `BPF_LINK_UPDATE` of every pinned XDP link to `prog`, or to the
    /// main XDP program when `None`. A link that already runs a build of
    /// the main program keeps it (an adopted link keeps the program it was
    /// adopted with, as `finish_adoption` leaves it).
    fn swap_xdp_links(&self, prog: Option<&OwnedFd>) -> Result<()> {
        let xdp_links = self.links.values().any(
            |l| matches!(l, LinkId::Pinned(pin) if pin.hook == hook_pin_name(AttachPoint::Xdp)),
        );
        if !xdp_links {
            // (a dataplane never attached at XDP may not have loaded the
            // main program: src/late_load.rs)
            return Ok(());
        }
        let main = <&Xdp>::try_from(
            self.ebpf
                .program(PROG_XDP)
                .ok_or(Error::Missing("program"))?,
        )?
        .fd()?
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| Error::Pin(format!("dup of the XDP program: {e}")))?;
        let to = prog.unwrap_or(&main);
        for l in self.links.values() {
            let LinkId::Pinned(pin) = l else { continue };
            if pin.hook != hook_pin_name(AttachPoint::Xdp) {
                continue;
            }
            if prog.is_none() && engine_of_link(pin) == Some(XdpEngine::Walker) {
                continue;
            }
            bpf_sys::link_update(pin.fd.as_fd(), to.as_fd()).map_err(|e| {
                Error::Pin(format!("BPF_LINK_UPDATE of {}: {e}", pin.path.display()))
            })?;
        }
        Ok(())
    }

    /// The engine running on attachment `id` (an XDP one), read from the
    /// kernel: the name of the program its link runs.
    pub fn xdp_engine_of(&self, id: u64) -> Option<XdpEngine> {
        match self.links.get(&id)? {
            LinkId::Pinned(pin) => engine_of_link(pin),
            _ => Some(XdpEngine::Walker),
        }
    }
}

/// The engine the pinned link runs, by its program's name.
fn engine_of_link(pin: &crate::pin::LinkPin) -> Option<XdpEngine> {
    let name = crate::netlink::prog_name(pin.ids()?.prog_id)?;
    Some(match name.as_str() {
        GENERATED_PROG_NAME => XdpEngine::Generated,
        GENERATED_TREE_PROG_NAME => XdpEngine::GeneratedTree,
        _ => XdpEngine::Walker,
    })
}

/// An unpinned link kept by descriptor that is an XDP link.
fn is_fd_xdp(l: &LinkId) -> bool {
    let LinkId::Fd(link) = l else { return false };
    link.info()
        .ok()
        .and_then(|i| i.link_type().ok())
        .is_some_and(|t| t as u32 == bpf_sys::LINK_TYPE_XDP)
}
