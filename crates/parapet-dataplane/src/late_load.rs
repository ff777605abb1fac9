//! Programs verified at their first use. Each program is seconds of
//! verifier CPU (benchmarks.md §71: 2–4 s each on a loaded 2-core
//! machine), and a dataplane attached at XDP runs one of the seven the
//! object holds: a loader process (`src/handover.rs`) therefore loads the
//! programs the first attach needs ([`Programs`]), and the others are
//! loaded when something first uses them, by a later loader process that
//! reuses this dataplane's pinned maps ([`LateLoader`], set by the
//! caller that knows how to start one). A dataplane loaded in-process
//! keeps aya's handle of the object and loads its own programs on use.

use crate::attach::AttachPoint;
use crate::error::{Error, Result};
use crate::load::{Dataplane, PROG_TC, PROG_XDP};
use crate::programs::{LateLoader, LatePrograms, Programs};
use std::os::fd::OwnedFd;
use std::path::Path;

impl Programs {
    /// What an attachment at `hook` runs: at [`AttachPoint::Netfilter`]
    /// the netfilter program (the tc placement's are the caller's to add,
    /// it knows the placement).
    pub fn for_hook(hook: AttachPoint) -> Programs {
        let mut p = Programs::default();
        match hook {
            AttachPoint::Xdp => p.xdp = true,
            AttachPoint::Tc => p.tc = true,
            AttachPoint::Netfilter => p.netfilter = true,
        }
        p
    }

    /// What the links pinned under the instance directory `pin_dir` run:
    /// an adoption swaps them to this load's programs, so those must be
    /// loaded with the dataplane.
    pub fn of_pinned_links(pin_dir: &Path) -> Programs {
        let mut p = Programs::default();
        for name in crate::pin::read_dir_names(&pin_dir.join("links")) {
            let Some((_, hook)) = name.rsplit_once('@') else {
                continue;
            };
            match hook {
                "xdp" => p.xdp = true,
                "tc" => p.tc = true,
                crate::pin::NETFILTER_HOOK => p.netfilter = true,
                h if crate::tc_hooks::is_tc_hooks_pin(h) => p.tc_hooks = true,
                // a hook this build does not know: load everything
                _ => return Programs::ALL,
            }
        }
        p
    }

    /// The entry programs of the object among these (aya loads them).
    pub(crate) fn entry_names(self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.xdp {
            v.push(PROG_XDP);
        }
        if self.tc {
            v.push(PROG_TC);
        }
        v
    }
}

impl Dataplane {
    /// Which of `want` this dataplane loaded: a dataplane loaded in-process
    /// has them all (it loads the rest itself on use).
    pub fn programs_loaded(&self) -> Programs {
        if self.ebpf.is_loaded_in_process() {
            return Programs::ALL;
        }
        let has = |name: &str| self.ebpf.program(name).is_some();
        Programs {
            xdp: has(PROG_XDP),
            tc: has(PROG_TC),
            tc_hooks: crate::tc_hooks::TC_PROGRAMS.iter().all(|n| has(n)),
            netfilter: !self.nf_prog.awaits_late_load(),
        }
    }

    /// Sets how this dataplane loads the programs its loader process left
    /// out, at their first use (or ahead of it, by the caller:
    /// [`Dataplane::late_load_plan`]).
    pub fn set_late_loader(&mut self, loader: LateLoader) {
        self.nf_prog.set_late_loader(loader.clone());
        self.late_loader = Some(loader);
    }

    /// The programs of `want` not loaded yet and the loader that loads
    /// them, so that a caller can verify them without holding its own
    /// locks (seconds of CPU) and then add them with
    /// [`Dataplane::add_late_programs`]. `None`: nothing to load ahead.
    pub fn late_load_plan(&self, want: Programs) -> Option<(LateLoader, Programs)> {
        let missing = want.minus(self.programs_loaded());
        let loader = self.late_loader.clone()?;
        (!missing.is_empty()).then_some((loader, missing))
    }

    /// Makes the programs a later loader process handed over this
    /// dataplane's; programs it holds already (another caller was
    /// first) are kept and the new copies dropped. With pinning each is
    /// pinned with the instance's programs.
    pub fn add_late_programs(&mut self, late: LatePrograms) -> Result<()> {
        for (name, prog, fd) in late.progs {
            if self.ebpf.program(name).is_some() {
                continue;
            }
            self.pin_late_program(name, fd)?;
            self.ebpf.add_program(name, prog);
        }
        if let Some(nf) = late.nf {
            if !self.nf_prog.awaits_late_load() {
                return Ok(());
            }
            if let Ok(fd) = &nf {
                let dup = fd
                    .try_clone()
                    .map_err(|e| Error::Pin(format!("dup of the netfilter program: {e}")))?;
                self.pin_late_program(crate::handover::PROG_NF, dup)?;
            }
            self.nf_prog.set_late(nf);
        }
        Ok(())
    }

    /// With pinning, pins a program loaded late with the instance's
    /// programs (`progs/<build>-<name>`), as the first load's are.
    fn pin_late_program(&mut self, name: &'static str, fd: OwnedFd) -> Result<()> {
        let Some(pins) = &mut self.pins else {
            return Ok(());
        };
        let dir = pins.root.join("progs");
        std::fs::create_dir_all(&dir).map_err(|e| crate::pin::pin_err(&dir, e))?;
        let path = dir.join(format!("{}-{name}", pins.build));
        let _ = std::fs::remove_file(&path);
        crate::bpf_sys::obj_pin(std::os::fd::AsFd::as_fd(&fd), &path)
            .map_err(|e| crate::pin::pin_err(&path, e))?;
        pins.progs.push((name, fd));
        Ok(())
    }

    /// Loads the programs of `want` this dataplane has not loaded, with
    /// its late loader (in the caller's thread, under whatever it holds).
    pub(crate) fn ensure_programs(&mut self, want: Programs) -> Result<()> {
        let missing = want.minus(self.programs_loaded());
        if missing.is_empty() {
            return Ok(());
        }
        let loader = self.late_loader.clone().ok_or_else(|| {
            Error::Object(format!(
                "the programs {} were not loaded and nothing can load them now",
                missing.render()
            ))
        })?;
        let late = loader(missing)?;
        self.add_late_programs(late)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_render_and_parse_back() {
        for bits in 0u8..16 {
            let p = Programs::from_bits(std::array::from_fn(|i| bits & (1 << i) != 0));
            assert_eq!(Programs::parse(&p.render()), Ok(p), "{}", p.render());
        }
        assert_eq!(Programs::ALL.render(), "xdp,tc,tc-hooks,netfilter");
        assert!(Programs::parse("xdp,ebpf").is_err());
    }

    #[test]
    fn union_and_minus() {
        let x = Programs::for_hook(AttachPoint::Xdp);
        let t = Programs::for_hook(AttachPoint::Tc);
        assert_eq!(x.union(t).render(), "xdp,tc");
        assert_eq!(Programs::ALL.minus(x).render(), "tc,tc-hooks,netfilter");
        assert!(x.minus(x.union(t)).is_empty());
        assert!(x.union(t).intersects(t) && !x.intersects(t));
    }

    #[test]
    fn pinned_links_name_their_programs() {
        let dir = std::env::temp_dir().join(format!("parapet-late-load-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(Programs::of_pinned_links(&dir).is_empty());
        let links = dir.join("links");
        std::fs::create_dir_all(&links).unwrap();
        std::fs::write(links.join("eth0@xdp"), b"").unwrap();
        assert_eq!(Programs::of_pinned_links(&dir).render(), "xdp");
        std::fs::write(links.join("@netfilter"), b"").unwrap();
        assert_eq!(Programs::of_pinned_links(&dir).render(), "xdp,netfilter");
        std::fs::write(links.join("eth1@future-hook"), b"").unwrap();
        assert_eq!(Programs::of_pinned_links(&dir), Programs::ALL);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
