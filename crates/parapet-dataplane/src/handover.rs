//! Loading in another process and handing the result over by pins.
//!
//! Loading parses the kernel's BTF (aya's loader, the kfunc resolution,
//! the netfilter program's relocation): some 19 MB of heap that is free
//! again afterwards but stays in the loading process's memory peak
//! (VmHWM). parapetd therefore loads in a short-lived child of its own
//! (`docs/daemon.md`, "Start-up memory peak"): the child runs
//! [`Dataplane::load_for_handover`], which loads the programs asked for
//! (what the first attach needs; the others load at their first use, by
//! another such child on the same pinned maps: `src/late_load.rs`) and
//! pins the programs and maps under a staging directory inside the
//! pin directory; the daemon then builds its [`Dataplane`] from those pins
//! with [`Dataplane::open_handover`], without parsing any BTF, and removes
//! the staging pins (`crate::pin::remove_handover`). Nothing of the instance's own pins (`maps-v*`,
//! `progs`, `links`) is written by the child: the daemon adopts and
//! swaps as after an in-process load.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use aya::maps::{Map, MapData};
use aya::programs::{Program, SchedClassifier, Xdp};
use aya_obj::programs::XdpAttachType;

use crate::bpf_sys;
use crate::error::{Error, Result};
use crate::load::{Assembly, Dataplane, Features, LoadOptions, PROG_XDP};
use crate::objects::Objects;
use crate::pin::{pin_err, read_dir_names, remove_handover, Pins};
use crate::programs::{LatePrograms, Programs};
use crate::set_mirror::SetSizing;

/// Name of the netfilter program's pin in a staging directory (and among
/// the instance's program pins).
pub(crate) const PROG_NF: &str = "parapet_nf";

/// Hash of the raw object this kernel loads and the load-time constants
/// both sides can compute without the kernel's BTF: the daemon checks the
/// child loaded what it would have.
fn object_stamp(opts: &LoadOptions, conntrack: bool) -> String {
    let consts = crate::load::load_constants(
        opts.debug.into(),
        opts.slot_pages.max(1),
        u32::from(conntrack),
    );
    let raw = crate::load::bpf_object_for_this_kernel();
    format!("{:016x}", crate::pin::stable_hash([raw, &consts[..]]))
}

/// What the loader process reports on its standard output, one `key value`
/// line each.
#[derive(Debug, Default)]
struct Manifest {
    object: String,
    build: String,
    maps_reused: bool,
    conntrack: bool,
    conntrack_note: Option<String>,
    nf_note: Option<String>,
    /// The programs loaded and pinned.
    programs: Programs,
}

impl Manifest {
    fn render(&self) -> String {
        let mut s = format!(
            "object {}\nbuild {}\nmaps_reused {}\nconntrack {}\nprograms {}\n",
            self.object,
            self.build,
            u8::from(self.maps_reused),
            u8::from(self.conntrack),
            self.programs.render()
        );
        for (key, note) in [
            ("conntrack_note", &self.conntrack_note),
            ("nf_note", &self.nf_note),
        ] {
            if let Some(n) = note {
                s.push_str(&format!("{key} {}\n", n.replace('\n', " ")));
            }
        }
        s
    }

    fn parse(text: &str) -> Result<Manifest> {
        let mut m = Manifest::default();
        for line in text.lines() {
            let (key, value) = line.split_once(' ').unwrap_or((line, ""));
            match key {
                "object" => m.object = value.to_string(),
                "build" => m.build = value.to_string(),
                "maps_reused" => m.maps_reused = value == "1",
                "conntrack" => m.conntrack = value == "1",
                "conntrack_note" => m.conntrack_note = Some(value.to_string()),
                "nf_note" => m.nf_note = Some(value.to_string()),
                "programs" => {
                    m.programs = Programs::parse(value)
                        .map_err(|e| Error::Pin(format!("the loader process's report: {e}")))?
                }
                _ => {}
            }
        }
        if m.object.is_empty() || m.build.is_empty() {
            return Err(Error::Pin(format!(
                "the loader process's report names no object or build: {text:?}"
            )));
        }
        Ok(m)
    }
}

impl Dataplane {
    /// The loader process's side: loads as [`Dataplane::load_pinned`]
    /// with `pin_dir` would (the pinned maps reused when their layout
    /// matches), but of the programs only `want` (the rest are loaded at
    /// their first use, `src/late_load.rs`; the netfilter program never
    /// with [`Features::interface_only`]), writes nothing to the maps, and
    /// pins every map and the programs loaded under `staging` (emptied
    /// first). Returns the report for [`Dataplane::open_handover`] (or,
    /// for a later load on the same maps, [`Dataplane::open_late_handover`]).
    /// The pins keep the objects once this process exits.
    pub fn load_for_handover(
        opts: &LoadOptions,
        sizing: &SetSizing,
        features: &Features,
        pin_dir: &Path,
        staging: &Path,
        want: Programs,
    ) -> Result<String> {
        remove_handover(staging).map_err(|e| pin_err(staging, e))?;
        let want = Programs {
            netfilter: want.netfilter && !features.interface_only,
            ..want
        };
        let mut dp = Dataplane::load_unfinished(
            crate::load::bpf_object_for_this_kernel(),
            None,
            opts,
            sizing,
            features,
            Some(pin_dir),
            &want.entry_names(),
        )?;
        // The netfilter program verifies beside the tc placement's.
        let nf_prog = std::mem::replace(
            &mut dp.nf_prog,
            crate::netfilter::NfProgram::unavailable("being loaded"),
        );
        let load_nf = || {
            if want.netfilter {
                nf_prog.get();
            }
        };
        let loaded = if want.tc_hooks {
            dp.load_tc_programs_beside(load_nf)
        } else {
            load_nf();
            Ok(())
        };
        dp.nf_prog = nf_prog;
        loaded?;
        let nf = want.netfilter.then(|| dp.nf_prog.get());
        let pins = dp.pins.as_ref().ok_or(Error::Missing("pins"))?;
        for sub in ["maps", "progs"] {
            let d = staging.join(sub);
            std::fs::create_dir_all(&d).map_err(|e| pin_err(&d, e))?;
        }
        let named = pins
            .maps
            .iter()
            .map(|(n, fd)| (staging.join("maps").join(n), fd));
        let progs = pins
            .progs
            .iter()
            .map(|(n, fd)| (staging.join("progs").join(n), fd));
        let nf_pin = nf
            .and_then(|r| r.as_ref().ok())
            .map(|fd| (staging.join("progs").join(PROG_NF), fd));
        for (path, fd) in named.chain(progs).chain(nf_pin) {
            bpf_sys::obj_pin(fd.as_fd(), &path).map_err(|e| pin_err(&path, e))?;
        }
        Ok(Manifest {
            object: object_stamp(opts, dp.conntrack_linked),
            build: pins.build.clone(),
            maps_reused: pins.maps_reused,
            conntrack: dp.conntrack_linked,
            conntrack_note: dp.conntrack_note.clone(),
            nf_note: nf.and_then(|r| r.as_ref().err().cloned()),
            programs: want,
        }
        .render())
    }

    /// The daemon's side: the [`Dataplane`] of the programs and maps a
    /// loader process pinned under `staging` and described in `report`
    /// ([`Dataplane::load_for_handover`] with the same options), pinning
    /// in `pin_dir`, adopted as after [`Dataplane::load_pinned`]. Refused
    /// when the loader loaded another object or other constants than
    /// this process would. The programs it left out are loaded at their
    /// first use by the loader given to [`Dataplane::set_late_loader`].
    /// The caller removes `staging` afterwards ([`remove_handover`]).
    pub fn open_handover(
        opts: &LoadOptions,
        sizing: &SetSizing,
        features: &Features,
        pin_dir: &Path,
        staging: &Path,
        report: &str,
    ) -> Result<Self> {
        let m = Manifest::parse(report)?;
        check_object(opts, &m)?;
        let maps_dir = staging.join("maps");
        let (mut maps, mut map_fds) = (Vec::new(), Vec::new());
        for name in read_dir_names(&maps_dir) {
            let path = maps_dir.join(&name);
            let fd = bpf_sys::obj_get(&path).map_err(|e| pin_err(&path, e))?;
            let dup = dup(&fd, &name)?;
            maps.push((name.clone(), Map::from_map_data(MapData::from_fd(fd)?)?));
            map_fds.push((name, dup));
        }
        let opened = open_programs(staging, m.programs)?;
        let (mut progs, mut prog_fds) = (Vec::new(), Vec::new());
        for (name, prog, fd) in opened {
            progs.push((name.to_string(), prog));
            prog_fds.push((name, fd));
        }
        let nf_prog = if features.interface_only {
            crate::netfilter::NfProgram::unavailable(crate::load::INTERFACE_ONLY_NOTE)
        } else if !m.programs.netfilter {
            crate::netfilter::NfProgram::awaiting_late_load()
        } else {
            match open_nf(staging, &m) {
                Ok(fd) => {
                    // pinned with the programs of this build: a load of the
                    // netfilter program alone must still say which build
                    // its links run (`finish_adoption`'s same-build test)
                    prog_fds.push((PROG_NF, dup(&fd, PROG_NF)?));
                    crate::netfilter::NfProgram::loaded(fd)
                }
                Err(why) => crate::netfilter::NfProgram::unavailable(&why),
            }
        };
        let pins = Pins {
            root: pin_dir.to_path_buf(),
            maps: map_fds,
            progs: prog_fds,
            build: m.build,
            maps_reused: m.maps_reused,
            adopted_sets: Default::default(),
            stale_nf: Default::default(),
        };
        let objects = Objects::opened(progs, maps);
        let mut dp = Dataplane::assemble(
            objects,
            Assembly {
                max_rules: opts.max_rules,
                slot_pages: opts.slot_pages.max(1),
                images: if features.interface_only {
                    1
                } else {
                    crate::abi::IMAGES
                },
                exact_cap: [
                    sizing.exact4_entries.max(1) as usize,
                    sizing.exact6_entries.max(1) as usize,
                ],
                conntrack: m.conntrack,
                conntrack_note: m.conntrack_note,
                pins: Some(pins),
                nf_prog,
            },
        )?;
        dp.finish_load(features)?;
        Ok(dp)
    }

    /// The programs a later loader process pinned under `staging` (a
    /// [`Dataplane::load_for_handover`] with the same options, after this
    /// dataplane pinned its maps), for [`Dataplane::add_late_programs`].
    /// Refused unless that process reused every pinned map and built what
    /// this one did: a program on other maps than the live ones would
    /// enforce another state.
    pub fn open_late_handover(
        opts: &LoadOptions,
        build: &str,
        staging: &Path,
        report: &str,
    ) -> Result<LatePrograms> {
        let m = Manifest::parse(report)?;
        check_object(opts, &m)?;
        if !m.maps_reused || m.build != build {
            return Err(Error::Pin(format!(
                "the loader process loaded its programs on other maps than the pinned ones \
                 (maps reused: {}, build {} where this dataplane has {build})",
                m.maps_reused, m.build
            )));
        }
        let nf = m.programs.netfilter.then(|| open_nf(staging, &m));
        Ok(LatePrograms {
            progs: open_programs(staging, m.programs)?,
            nf,
        })
    }
}

/// Refuses a report of another object or other load-time constants than
/// this process's.
fn check_object(opts: &LoadOptions, m: &Manifest) -> Result<()> {
    let ours = object_stamp(opts, m.conntrack);
    if m.object != ours {
        return Err(Error::Pin(format!(
            "the loader process loaded object {} where this process has {ours} \
             (another build of parapetd?)",
            m.object
        )));
    }
    Ok(())
}

/// Opens the pinned programs of `which` (the entry programs and the tc
/// placement's; not the netfilter program) under `staging`.
fn open_programs(staging: &Path, which: Programs) -> Result<Vec<(&'static str, Program, OwnedFd)>> {
    let tc_hooks: &[&'static str] = if which.tc_hooks {
        &crate::tc_hooks::TC_PROGRAMS
    } else {
        &[]
    };
    let mut out = Vec::new();
    for name in which
        .entry_names()
        .into_iter()
        .chain(tc_hooks.iter().copied())
    {
        let path = staging.join("progs").join(name);
        let fd = bpf_sys::obj_get(&path).map_err(|e| pin_err(&path, e))?;
        let prog = if name == PROG_XDP {
            Program::Xdp(Xdp::from_pin(&path, XdpAttachType::Interface)?)
        } else {
            Program::SchedClassifier(SchedClassifier::from_pin(&path)?)
        };
        out.push((name, prog, fd));
    }
    Ok(out)
}

/// The pinned netfilter program under `staging`, or why there is none.
fn open_nf(staging: &Path, m: &Manifest) -> std::result::Result<OwnedFd, String> {
    bpf_sys::obj_get(&staging.join("progs").join(PROG_NF)).map_err(|_| {
        m.nf_note
            .clone()
            .unwrap_or_else(|| "the loader process handed over no netfilter program".to_string())
    })
}

fn dup(fd: &OwnedFd, name: &str) -> Result<OwnedFd> {
    fd.try_clone()
        .map_err(|e| Error::Pin(format!("dup of {name}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_reads_back_and_one_without_a_build_is_refused() {
        let m = Manifest {
            object: "00ff".into(),
            build: "abcd".into(),
            maps_reused: true,
            conntrack: false,
            conntrack_note: Some("conntrack lookup off:\nno kfuncs".into()),
            nf_note: None,
            programs: Programs {
                xdp: true,
                ..Default::default()
            },
        };
        let back = Manifest::parse(&m.render()).unwrap();
        assert_eq!(
            (back.object.as_str(), back.build.as_str()),
            ("00ff", "abcd")
        );
        assert!(back.maps_reused && !back.conntrack && back.nf_note.is_none());
        assert_eq!(back.programs, m.programs);
        assert_eq!(
            back.conntrack_note.as_deref(),
            Some("conntrack lookup off: no kfuncs")
        );
        assert!(Manifest::parse("object 00ff\n").is_err());
        assert!(Manifest::parse("object 00ff\nbuild ab\nprograms xdp,bpf\n").is_err());
    }
}
