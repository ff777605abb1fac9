//! Attaching the programs to interfaces at XDP or tc ingress, and the
//! interface names the image key matches.

use aya::programs::tc::TcAttachType;
use aya::programs::{ProgramError, SchedClassifier, Xdp, XdpMode};

use crate::abi::IfName;
use crate::error::{Error, Result};
use crate::load::{Dataplane, LinkId, PROG_TC, PROG_XDP};
use crate::pin::LinkPin;
use aya::programs::links::FdLink;

/// The name of a hook in pin paths (`links/<iface>@<hook>`) and in
/// [`crate::adopt::program_for_hook`].
pub fn hook_pin_name(hook: AttachPoint) -> &'static str {
    match hook {
        AttachPoint::Xdp => "xdp",
        AttachPoint::Tc => "tc",
        AttachPoint::Netfilter => "netfilter",
    }
}

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
        if hook != AttachPoint::Netfilter {
            // loaded at its first attach (src/late_load.rs)
            self.ensure_programs(crate::programs::Programs::for_hook(hook))?;
        }
        let (link, used, note) = match hook {
            AttachPoint::Xdp => {
                self.refuse_foreign_xdp(iface)?;
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
        let link = self.pin_link(link, iface, hook)?;
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
            Some(LinkId::Fd(link)) => drop(link),
            Some(LinkId::Pinned(pin)) => {
                // without the pin, closing the last descriptor detaches
                std::fs::remove_file(&pin.path)
                    .map_err(|e| Error::Pin(format!("{}: {e}", pin.path.display())))?;
            }
            // closing the link fd detaches (unless it was pinned)
            Some(LinkId::Nf(l)) => drop(l),
            None => return Err(Error::UnknownAttachment(id)),
        }
        Ok(())
    }

    /// Refuses to attach at XDP when another program is on `iface` (in any
    /// mode): the kernel would replace a program attached without a link,
    /// and one program per interface is all XDP has. The error names the
    /// program (id and name).
    fn refuse_foreign_xdp(&self, iface: &str) -> Result<()> {
        let Ok(c) = std::ffi::CString::new(iface) else {
            return Ok(());
        };
        // SAFETY: c is a valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(c.as_ptr()) };
        if ifindex == 0 {
            // aya reports the unknown interface
            return Ok(());
        }
        let ids = crate::netlink::xdp_prog_ids(ifindex)
            .map_err(|e| Error::Pin(format!("asking which XDP program is on {iface}: {e}")))?;
        if let Some(&id) = ids.first() {
            let name = crate::netlink::prog_name(id).unwrap_or_else(|| "?".to_string());
            return Err(Error::Occupied(format!(
                "{iface} already has an XDP program (id {id}, name `{name}`); parapet does not \
                 replace another XDP program: remove it first (e.g. `ip link set dev {iface} xdp off`) \
                 or attach parapet at tc"
            )));
        }
        Ok(())
    }

    /// When pinning, moves a fresh XDP or tc link out of aya's keeping and
    /// pins it (`links/<iface>@<hook>`), so it outlives the process. A link
    /// the kernel made without bpf_link (netlink, old kernels) cannot be
    /// pinned: it is detached again and the attach fails.
    fn pin_link(&mut self, link: LinkId, iface: &str, hook: AttachPoint) -> Result<LinkId> {
        let Some(root) = self.pin_dir().map(std::path::Path::to_path_buf) else {
            return Ok(link);
        };
        // move the link out of aya's keeping (it would detach it on drop)
        let fd_link: std::result::Result<FdLink, _> = match link {
            LinkId::Xdp(l) => {
                let prog = self
                    .ebpf
                    .program_mut(PROG_XDP)
                    .ok_or(Error::Missing("program"))?;
                FdLink::try_from(<&mut Xdp>::try_from(prog)?.take_link(l)?)
            }
            LinkId::Tc(l) => {
                let prog = self
                    .ebpf
                    .program_mut(PROG_TC)
                    .ok_or(Error::Missing("program"))?;
                FdLink::try_from(<&mut SchedClassifier>::try_from(prog)?.take_link(l)?)
            }
            kept @ (LinkId::Pinned(_) | LinkId::Fd(_) | LinkId::Nf(_)) => return Ok(kept),
        };
        let fd_link = fd_link.map_err(|_| {
            Error::Pin(format!(
                "the kernel attached to {iface} without a BPF link, which cannot be pinned \
                 (XDP needs Linux >= 5.9, tc needs TCX, Linux >= 6.6)"
            ))
        })?;
        Ok(LinkId::Pinned(LinkPin::pin(
            &root,
            fd_link,
            iface,
            hook_pin_name(hook),
        )?))
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
