//! Attaching the programs to interfaces at XDP or tc ingress, and the
//! interface names the image key matches.

use aya::programs::tc::TcAttachType;
use aya::programs::{ProgramError, SchedClassifier, Xdp, XdpMode};

use crate::abi::IfName;
use crate::error::{Error, Result};
use crate::load::{Dataplane, LinkId, PROG_TC, PROG_XDP};

/// Where the program runs: the kernel hook it is attached at (not a
/// chain's hook, `parapet_model::Hook`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttachPoint {
    /// eXpress Data Path, before the kernel allocates an skb.
    Xdp,
    /// tc ingress (TCX on kernels >= 6.6).
    Tc,
    /// The filter chains at their netfilter hooks (INPUT, FORWARD,
    /// OUTPUT; no interface): [`Dataplane::attach_netfilter`].
    Netfilter,
}

/// XDP attach mode. Ignored for [`AttachPoint::Tc`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// In the driver; falls back to [`Mode::Skb`] (with a note) if the
    /// driver has no XDP support.
    Native,
    /// Generic XDP, run by the kernel stack after skb allocation.
    Skb,
}

/// A live attachment, returned by [`Dataplane::attach`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attached {
    /// Handle for [`Dataplane::detach`].
    pub id: u64,
    /// Interface name.
    pub iface: String,
    /// Where the program runs.
    pub hook: AttachPoint,
    /// XDP mode actually used (`None` for tc).
    pub mode: Option<Mode>,
    /// Set when the request could not be met exactly (e.g. native XDP
    /// unsupported, fell back to skb mode).
    pub note: Option<String>,
}

impl Dataplane {
    /// Attach to `iface` (resolved in the calling thread's network
    /// namespace). At XDP, [`Mode::Native`] falls back to [`Mode::Skb`] when
    /// the driver refuses, and the returned [`Attached::note`] says so.
    pub fn attach(&mut self, iface: &str, hook: AttachPoint, mode: Mode) -> Result<Attached> {
        let (link, used, note) = match hook {
            AttachPoint::Xdp => {
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
            AttachPoint::Netfilter => {
                return Err(Error::Netfilter(
                    "the netfilter hooks take no interface: use attach_netfilter".into(),
                ))
            }
            AttachPoint::Tc => {
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
            mode: (hook == AttachPoint::Xdp).then_some(used),
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
            // closing the link fd detaches (unless it was pinned)
            Some(LinkId::Nf(l)) => drop(l),
            None => return Err(Error::UnknownAttachment(id)),
        }
        Ok(())
    }

    /// The interfaces attached, by attachment id.
    pub fn attachment_ids(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.links.keys().copied().collect();
        v.sort_unstable();
        v
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
}
