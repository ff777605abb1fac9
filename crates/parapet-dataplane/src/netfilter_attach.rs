//! The netfilter facet of [`Dataplane`]: attaching the hook images at
//! their netfilter hooks (links per hook and family), detaching, and test
//! runs of the netfilter program. The program and its links themselves are
//! [`crate::netfilter`].

use std::os::fd::{AsFd, BorrowedFd};

use crate::abi::TestRunOutcome;
use crate::error::{Error, Result};
use crate::load::{Dataplane, LinkId};
use crate::netfilter::*;

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

    /// Enforce the hook's image (written with
    /// [`Dataplane::write_hook_image`]) at `hook` for `family`, at
    /// `priority` (0 = where iptables' filter table runs), or at the
    /// nearest free one: the kernel refuses a BPF hook at a priority
    /// another function of the hook already has (EBUSY), so 1, -1, 2, -2,
    /// … are tried in turn (at most [`PRIORITY_SEARCH`] away). The
    /// priority used is in the result.
    pub fn attach_netfilter(
        &mut self,
        hook: NfHook,
        family: NfFamily,
        priority: i32,
    ) -> Result<NfAttached> {
        let prog = self.nf_program()?;
        let mut tried = 0;
        let (fd, priority) = loop {
            // 0, +1, -1, +2, -2, ...
            let off = (tried + 1) / 2 * if tried % 2 == 1 { 1 } else { -1 };
            let p = priority.saturating_add(off);
            match link_create(prog, hook, family, p) {
                Ok(fd) => break (fd, p),
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tried < 2 * PRIORITY_SEARCH => {
                    tried += 1;
                }
                Err(e) => {
                    return Err(Error::Netfilter(format!(
                        "netfilter link at {hook}/{family:?} priority {p}: {e}"
                    )))
                }
            }
        };
        self.refresh_ifnames()?;
        let id = self.next_id;
        self.next_id += 1;
        self.links.insert(
            id,
            LinkId::Nf(NfLink {
                hook,
                family,
                priority,
                fd,
            }),
        );
        Ok(NfAttached {
            id,
            hook,
            family,
            priority,
        })
    }

    /// The netfilter link of attachment `id`, to pin or inspect it.
    pub fn netfilter_link(&self, id: u64) -> Option<&NfLink> {
        match self.links.get(&id) {
            Some(LinkId::Nf(l)) => Some(l),
            _ => None,
        }
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
