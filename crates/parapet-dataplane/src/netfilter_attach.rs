//! The netfilter facet of [`Dataplane`]: attaching the hook images at
//! their netfilter hooks (links per hook and family, pinned when the
//! dataplane pins), renewing a pinned link make-before-break, and test
//! runs of the netfilter program. The program and its links themselves are
//! [`crate::netfilter`].

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use crate::abi::TestRunOutcome;
use crate::error::{Error, Result};
use crate::load::{Dataplane, LinkId};
use crate::netfilter::*;
use crate::pin::{LinkPin, NETFILTER_HOOK};

/// The pin name of a netfilter link: `input-ipv4`, `forward-ipv6`, …
/// (`links/<this>@netfilter`).
pub(crate) fn nf_pin_target(hook: NfHook, family: NfFamily) -> String {
    let f = match family {
        NfFamily::Ipv4 => "ipv4",
        NfFamily::Ipv6 => "ipv6",
    };
    format!("{}-{f}", hook.chain().to_ascii_lowercase())
}

impl Dataplane {
    /// The netfilter program, or why there is none.
    fn nf_program(&self) -> Result<BorrowedFd<'_>> {
        match self.nf_prog.get() {
            Ok(fd) => Ok(fd.as_fd()),
            Err(e) => Err(Error::Netfilter(e.clone())),
        }
    }

    /// Why the netfilter program is not available (no kernel support, or
    /// it failed to load), or `None` when it is.
    pub fn netfilter_note(&self) -> Option<&str> {
        self.nf_prog.get().as_ref().err().map(String::as_str)
    }

    /// [`Dataplane::netfilter_note`] without loading the program: `None`
    /// while it has not been used (it loads at its first use), else
    /// whether it is available, or why not.
    pub fn netfilter_tried(&self) -> Option<std::result::Result<(), &str>> {
        self.nf_prog
            .peek()
            .map(|r| r.as_ref().map(|_| ()).map_err(String::as_str))
    }

    /// Enforce the hook's image (written with
    /// [`Dataplane::write_hook_image`]) at `hook` for `family`, at
    /// `priority` (0 = where iptables' filter table runs), or at the
    /// nearest free one (see [`Dataplane::nf_link_near`]). The priority
    /// used is in the result. With a pin directory the link is pinned as
    /// `links/<chain>-<family>@netfilter` and outlives the process.
    pub fn attach_netfilter(
        &mut self,
        hook: NfHook,
        family: NfFamily,
        priority: i32,
    ) -> Result<NfAttached> {
        let (fd, priority) = self.nf_link_near(hook, family, priority)?;
        self.refresh_ifnames()?;
        let kept = match self.pin_dir().map(Path::to_path_buf) {
            Some(root) => LinkId::Pinned(LinkPin::pin_fd(
                &root,
                fd,
                &nf_pin_target(hook, family),
                NETFILTER_HOOK,
            )?),
            None => LinkId::Nf(NfLink {
                hook,
                family,
                priority,
                fd,
            }),
        };
        let id = self.next_id;
        self.next_id += 1;
        self.links.insert(id, kept);
        Ok(NfAttached {
            id,
            hook,
            family,
            priority,
        })
    }

    /// A new link of the netfilter program at `hook` for `family`, at
    /// `priority` or the nearest free one: the kernel refuses a BPF hook
    /// at a priority another function of the hook already has (EBUSY), so
    /// 1, -1, 2, -2, … away are tried in turn (at most
    /// [`PRIORITY_SEARCH`]).
    fn nf_link_near(
        &self,
        hook: NfHook,
        family: NfFamily,
        priority: i32,
    ) -> Result<(OwnedFd, i32)> {
        let prog = self.nf_program()?;
        let mut tried = 0;
        loop {
            // 0, +1, -1, +2, -2, ...
            let off = (tried + 1) / 2 * if tried % 2 == 1 { 1 } else { -1 };
            let p = priority.saturating_add(off);
            match link_create(prog, hook, family, p) {
                Ok(fd) => return Ok((fd, p)),
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tried < 2 * PRIORITY_SEARCH => {
                    tried += 1;
                }
                Err(e) => {
                    return Err(Error::Netfilter(format!(
                        "netfilter link at {hook}/{family:?} priority {p}: {e}"
                    )))
                }
            }
        }
    }

    /// The netfilter link of attachment `id`, to pin or inspect it (an
    /// unpinned one; see [`Dataplane::netfilter_attachment`]).
    pub fn netfilter_link(&self, id: u64) -> Option<&NfLink> {
        match self.links.get(&id) {
            Some(LinkId::Nf(l)) => Some(l),
            _ => None,
        }
    }

    /// Where attachment `id` enforces, when it is a netfilter link (pinned
    /// or not; a pinned one as the kernel reports it).
    pub fn netfilter_attachment(&self, id: u64) -> Option<NfAttached> {
        match self.links.get(&id)? {
            LinkId::Nf(l) => Some(NfAttached {
                id,
                hook: l.hook,
                family: l.family,
                priority: l.priority,
            }),
            LinkId::Pinned(p) if p.hook == NETFILTER_HOOK => {
                let (pf, hooknum, priority) =
                    crate::bpf_sys::netfilter_link_info(p.fd.as_fd()).ok()??;
                Some(NfAttached {
                    id,
                    hook: NfHook::ALL.into_iter().find(|h| h.hooknum() == hooknum)?,
                    family: NfFamily::ALL.into_iter().find(|f| f.pf() == pf)?,
                    priority,
                })
            }
            _ => None,
        }
    }

    /// The pinned netfilter links whose program is not this load's (an
    /// upgrade, or fresh maps the old program does not read): the kernel
    /// cannot swap a netfilter link's program, so the caller renews each
    /// it keeps ([`Dataplane::renew_netfilter_link`]).
    pub fn stale_netfilter_links(&self) -> Vec<u64> {
        self.pins
            .as_ref()
            .map(|p| p.stale_nf.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Make-before-break for a netfilter link (attachment `id`, pinned):
    /// attaches this load's program at the same hook and family at
    /// `priority` or the nearest free one (the old link holds its own
    /// priority, so the new one is next to it: both read the same maps and
    /// decide alike), pins it in the old one's place, then closes the old
    /// link. The attachment keeps its id.
    pub fn renew_netfilter_link(&mut self, id: u64, priority: i32) -> Result<NfAttached> {
        let now = self
            .netfilter_attachment(id)
            .ok_or(Error::UnknownAttachment(id))?;
        let (fd, priority) = self.nf_link_near(now.hook, now.family, priority)?;
        match self.links.get_mut(&id) {
            Some(LinkId::Pinned(pin)) => pin.replace_with(fd)?,
            // unpinned: the new link replaces the old one in our keeping
            Some(LinkId::Nf(l)) => {
                l.fd = fd;
                l.priority = priority;
            }
            _ => return Err(Error::UnknownAttachment(id)),
        }
        if let Some(p) = &mut self.pins {
            p.stale_nf.remove(&id);
        }
        Ok(NfAttached { priority, ..now })
    }

    /// Record the name of every interface of the calling thread's network
    /// namespace for the image key (`-i`/`-o` match names; the netfilter
    /// hooks see every interface, not one attached one).
    pub fn refresh_ifnames(&mut self) -> Result<()> {
        // if_nameindex asks the kernel over netlink in the calling thread's
        // namespace (sysfs may show another one's).
        // SAFETY: returns a malloc'd array ending with a zero entry, or NULL.
        let list = unsafe { libc::if_nameindex() };
        if list.is_null() {
            return Ok(());
        }
        let mut names = Vec::new();
        for i in 0.. {
            // SAFETY: within the array up to and including its zero entry.
            let e = unsafe { &*list.add(i) };
            if e.if_index == 0 || e.if_name.is_null() {
                break;
            }
            // SAFETY: if_name is a NUL-terminated string owned by the list.
            let name = unsafe { std::ffi::CStr::from_ptr(e.if_name) };
            names.push((e.if_index, name.to_string_lossy().into_owned()));
        }
        // SAFETY: the list if_nameindex returned, freed once.
        unsafe { libc::if_freenameindex(list) };
        for (ifindex, name) in names {
            self.set_ifname(ifindex, &name)?;
        }
        Ok(())
    }

    /// Run the netfilter program on `frame` (an Ethernet frame) with
    /// `BPF_PROG_TEST_RUN` as the kernel would at `hook` for `family`,
    /// `repeat` times. The kernel strips the Ethernet header (at OUTPUT it
    /// takes the bare IP packet: this strips it first). The kernel makes
    /// loopback the input or the output interface by a rule of its own
    /// (not always the one of `hook`); the debug record's key shows which.
    pub fn test_run_netfilter(
        &self,
        hook: NfHook,
        family: NfFamily,
        frame: &[u8],
        repeat: u32,
    ) -> Result<TestRunOutcome> {
        let prog = self.nf_program()?;
        test_run_fd(prog, hook, family, frame, repeat)
    }
}
