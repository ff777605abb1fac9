//! Which program runs on the XDP links: the main program (the image
//! walker) or one generated from the interface chain's decision list
//! ([`crate::codegen`]), swapped on each link with `BPF_LINK_UPDATE` —
//! never detached, so no packet passes a link without a program.

use std::os::fd::{AsFd, OwnedFd};

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
}

impl GeneratedOnMaps {
    /// Instructions in the program.
    pub fn insn_count(&self) -> usize {
        self.insns
    }

    /// The instructions the verifier walked to load it.
    pub fn verified_insns(&self) -> Result<u32> {
        crate::bpf_sys::prog_verified_insns(self.fd.as_fd())
            .map_err(|e| crate::Error::Codegen(format!("reading the program's info: {e}")))
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
}

impl PreparedXdpEngine {
    /// The engine it will put on the links, and why.
    pub fn choice(&self) -> &Choice {
        &self.choice
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
        let mut choice = match list {
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
            choice = Choice {
                engine: XdpEngine::Walker,
                reason: "an XDP link is not pinned (no pin directory): only the walker".into(),
            };
        }
        let loaded = match (choice.engine, list, image) {
            (XdpEngine::Generated, Some(l), _) => Some(self.load_generated(l).map(|(fd, _)| fd)),
            (XdpEngine::GeneratedTree, Some(l), Some(image)) => {
                Some(codegen::load_tree_attached(l, image, &self.codegen_maps()).map(|(fd, _)| fd))
            }
            _ => None,
        };
        let prog = match loaded {
            Some(Ok(fd)) => Some(fd),
            Some(Err(e)) => {
                choice = Choice {
                    engine: XdpEngine::Walker,
                    reason: format!("the generated program did not load: {e}"),
                };
                None
            }
            None => None,
        };
        PreparedXdpEngine { choice, prog }
    }

    /// Swaps the prepared engine onto every pinned XDP link with
    /// `BPF_LINK_UPDATE`; returns the choice (its reason names a failed
    /// update: the links already swapped run a program as valid as the
    /// others).
    pub fn commit_xdp_engine(&mut self, prepared: PreparedXdpEngine) -> Choice {
        let PreparedXdpEngine { mut choice, prog } = prepared;
        if let Err(e) = self.swap_xdp_links(prog.as_ref()) {
            choice.reason = format!("{} (swapping: {e})", choice.reason);
        }
        choice
    }

    /// The program [`Dataplane::set_xdp_engine`] would put on the XDP
    /// links for `list` (eligible), loaded but not attached: for test runs
    /// (tests, the benchmark). It counts in this dataplane's maps.
    pub fn load_xdp_generated(&self, list: &DecisionList) -> Result<GeneratedOnMaps> {
        let (fd, insns) = self.load_generated(list)?;
        Ok(GeneratedOnMaps { fd, insns })
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
        let (fd, shape) = codegen::load_tree_attached(list, image, &self.codegen_maps())?;
        let insns = shape.insns;
        Ok((GeneratedOnMaps { fd, insns }, shape))
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
