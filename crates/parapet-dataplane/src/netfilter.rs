//! The netfilter program: the filter chains enforced where iptables'
//! filter table runs (`NF_INET_LOCAL_IN`, `NF_INET_FORWARD`,
//! `NF_INET_LOCAL_OUT`) and where nft places filter chains before and
//! after routing (`NF_INET_PRE_ROUTING`, `NF_INET_POST_ROUTING`), one BPF
//! netfilter link per hook and family
//! (Linux >= 6.4, `CONFIG_NETFILTER_BPF_LINK`).
//!
//! aya 0.14 has no netfilter program type to load or attach, and its object
//! parser refuses a section named `netfilter`. So `parapet_nf` sits in a
//! section aya parses as a tc classifier (`classifier/parapet_nf`) and never
//! loads; `load_program` parses the same kfunc-resolved object with
//! aya-obj, points its map references at the maps aya already created (so
//! every program shares one set of maps: images, counters, sets, stats),
//! links its calls, applies its CO-RE relocations against the kernel's BTF
//! and loads it with `BPF_PROG_LOAD` as `BPF_PROG_TYPE_NETFILTER`.
//! `BPF_LINK_CREATE` then attaches it (docs/dataplane.md, "Netfilter
//! hooks", says why this and not a second object).
//!
//! The program is loaded on first use ([`NfProgram`]). Links are
//! [`NfLink`]s: a link fd that closes (detaches) when dropped and that
//! [`NfLink::pin`] can pin under bpffs so the kernel keeps it.

use std::collections::HashSet;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::time::Duration;

use aya::maps::Map;
use aya::Ebpf;
use aya_obj::btf::{Btf, BtfFeatures};
use aya_obj::generated::{bpf_attr, bpf_cmd, bpf_insn};
use aya_obj::Object;

use crate::abi::TestRunOutcome;
use crate::error::{Error, Result};

/// Program name of the netfilter entry point in the object.
pub(crate) const PROG_NF: &str = "parapet_nf";

/// `BPF_PROG_TYPE_NETFILTER` and the attach type `BPF_NETFILTER`.
const PROG_TYPE_NETFILTER: u32 = 32;
const ATTACH_NETFILTER: u32 = 45;
/// `NF_DROP` / `NF_ACCEPT`.
const NF_ACCEPT: u32 = 1;

/// How far from the asked priority [`Dataplane::attach_netfilter`] looks
/// for a free one.
pub const PRIORITY_SEARCH: i32 = 8;

/// A filter chain's netfilter hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NfHook {
    /// `NF_INET_PRE_ROUTING`: every arriving packet, before routing;
    /// before DNAT below nat's priority (-100), after it above.
    Prerouting,
    /// `NF_INET_LOCAL_IN`: packets for this host, after routing and DNAT.
    Input,
    /// `NF_INET_FORWARD`: routed packets, input and output interface known.
    Forward,
    /// `NF_INET_LOCAL_OUT`: packets this host sends, with their socket.
    Output,
    /// `NF_INET_POST_ROUTING`: every leaving packet, output interface
    /// known; before SNAT below nat's priority (100), after it above.
    Postrouting,
}

impl NfHook {
    /// The five, in the order a packet meets them.
    pub const ALL: [NfHook; 5] = [
        NfHook::Prerouting,
        NfHook::Input,
        NfHook::Forward,
        NfHook::Output,
        NfHook::Postrouting,
    ];

    /// The kernel's hook number (`enum nf_inet_hooks`).
    pub fn hooknum(self) -> u32 {
        match self {
            NfHook::Prerouting => 0,
            NfHook::Input => 1,
            NfHook::Forward => 2,
            NfHook::Output => 3,
            NfHook::Postrouting => 4,
        }
    }

    /// The classifier image this hook walks (`PARAPET_IMAGE_NF_*`: 1 +
    /// the hook number).
    pub fn image(self) -> u32 {
        1 + self.hooknum()
    }

    /// The iptables chain enforced here.
    pub fn chain(self) -> &'static str {
        match self {
            NfHook::Prerouting => "PREROUTING",
            NfHook::Input => "INPUT",
            NfHook::Forward => "FORWARD",
            NfHook::Output => "OUTPUT",
            NfHook::Postrouting => "POSTROUTING",
        }
    }

    /// The hook of a base chain name (`INPUT`, `FORWARD`, `OUTPUT`,
    /// `PREROUTING`, `POSTROUTING`, any case, as iptables and nft name
    /// them).
    pub fn of_chain(name: &str) -> Option<NfHook> {
        match name.to_ascii_lowercase().as_str() {
            "prerouting" => Some(NfHook::Prerouting),
            "input" => Some(NfHook::Input),
            "forward" => Some(NfHook::Forward),
            "output" => Some(NfHook::Output),
            "postrouting" => Some(NfHook::Postrouting),
            _ => None,
        }
    }
}

impl std::fmt::Display for NfHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.chain())
    }
}

/// One netfilter link per family: the kernel refuses `NFPROTO_INET`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NfFamily {
    /// `NFPROTO_IPV4`.
    Ipv4,
    /// `NFPROTO_IPV6`.
    Ipv6,
}

impl NfFamily {
    /// Both.
    pub const ALL: [NfFamily; 2] = [NfFamily::Ipv4, NfFamily::Ipv6];

    pub(crate) fn pf(self) -> u32 {
        match self {
            NfFamily::Ipv4 => 2,
            NfFamily::Ipv6 => 10,
        }
    }
}

/// A live netfilter link. Dropping it detaches the program from the hook
/// unless the link was pinned.
#[derive(Debug)]
pub struct NfLink {
    /// Hook.
    pub hook: NfHook,
    /// Family.
    pub family: NfFamily,
    /// Priority among the hook's other functions (iptables' filter table
    /// is 0; lower runs first).
    pub priority: i32,
    pub(crate) fd: OwnedFd,
}

impl NfLink {
    /// The link's fd (for pinning, `BPF_LINK_UPDATE`, link info).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Pin the link at `path` (on a bpffs): the kernel keeps enforcing it
    /// after this process exits, until the pin is removed.
    pub fn pin(&self, path: &Path) -> io::Result<()> {
        crate::bpf_sys::obj_pin(self.fd.as_fd(), path)
    }
}

/// A netfilter attachment as [`Dataplane::attach_netfilter`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NfAttached {
    /// Handle for [`Dataplane::detach`].
    pub id: u64,
    /// Hook.
    pub hook: NfHook,
    /// Family.
    pub family: NfFamily,
    /// Priority.
    pub priority: i32,
}

pub(crate) fn sys_bpf(cmd: bpf_cmd, attr: &mut bpf_attr) -> io::Result<i64> {
    // SAFETY: attr is a valid, fully initialised bpf_attr for cmd and
    // outlives the call; the kernel reads at most its size.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            attr as *mut bpf_attr,
            std::mem::size_of::<bpf_attr>(),
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub(crate) fn owned(fd: i64) -> OwnedFd {
    // SAFETY: the kernel just returned this new fd to us.
    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
}

/// The fd of an aya map, for the map kinds the object defines.
fn map_fd(map: &Map) -> Option<RawFd> {
    let data = match map {
        Map::Array(d)
        | Map::ArrayOfMaps(d)
        | Map::HashMap(d)
        | Map::LpmTrie(d)
        | Map::PerCpuArray(d)
        | Map::PerCpuHashMap(d)
        | Map::LruHashMap(d)
        | Map::ProgramArray(d)
        | Map::RingBuf(d) => d,
        _ => return None,
    };
    Some(data.fd().as_fd().as_raw_fd())
}

fn load_btf(btf: &Btf) -> io::Result<OwnedFd> {
    let bytes = btf.to_bytes();
    // SAFETY: zeroed bpf_attr is valid.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    attr.__bindgen_anon_7.btf = bytes.as_ptr() as u64;
    attr.__bindgen_anon_7.btf_size = bytes.len() as u32;
    sys_bpf(bpf_cmd::BPF_BTF_LOAD, &mut attr).map(owned)
}

/// What loading the netfilter program needs, kept from the dataplane's
/// load, and the program once loaded: verifying it takes seconds, so it is
/// loaded on first use (an attach, a test run, [`Dataplane::netfilter_note`]),
/// never by a dataplane that only runs at XDP or tc.
pub(crate) struct NfProgram {
    /// The kfunc-resolved object.
    object: Vec<u8>,
    /// Every map of the object by name (duplicated fds of aya's maps).
    maps: Vec<(String, OwnedFd)>,
    prog: std::sync::OnceLock<std::result::Result<OwnedFd, String>>,
    /// Loaded by a later loader process (src/late_load.rs) rather than
    /// from `object`: a loader process handed the dataplane over without it.
    awaiting_late: bool,
    late: Option<crate::programs::LateLoader>,
}

impl NfProgram {
    /// Keep what the load needs: call before the maps are taken out of
    /// `ebpf`.
    pub(crate) fn new(object: Vec<u8>, ebpf: &Ebpf) -> NfProgram {
        let maps = ebpf
            .maps()
            .filter_map(|(name, map)| {
                let fd = map_fd(map)?;
                // SAFETY: fd is aya's live map fd; it is only duplicated.
                let owned = unsafe { BorrowedFd::borrow_raw(fd) }
                    .try_clone_to_owned()
                    .ok()?;
                Some((name.to_string(), owned))
            })
            .collect();
        NfProgram {
            object,
            maps,
            prog: std::sync::OnceLock::new(),
            awaiting_late: false,
            late: None,
        }
    }

    /// The program loaded already (by a loader process,
    /// `src/handover.rs`).
    pub(crate) fn loaded(fd: OwnedFd) -> NfProgram {
        NfProgram {
            object: Vec::new(),
            maps: Vec::new(),
            prog: std::sync::OnceLock::from(Ok(fd)),
            awaiting_late: false,
            late: None,
        }
    }

    /// No netfilter program: every use answers `why`.
    pub(crate) fn unavailable(why: &str) -> NfProgram {
        NfProgram {
            object: Vec::new(),
            maps: Vec::new(),
            prog: std::sync::OnceLock::from(Err(why.to_string())),
            awaiting_late: false,
            late: None,
        }
    }

    /// Not loaded by the loader process that loaded the dataplane: loaded
    /// on first use by the late loader ([`NfProgram::set_late_loader`]).
    pub(crate) fn awaiting_late_load() -> NfProgram {
        NfProgram {
            object: Vec::new(),
            maps: Vec::new(),
            prog: std::sync::OnceLock::new(),
            awaiting_late: true,
            late: None,
        }
    }

    pub(crate) fn set_late_loader(&mut self, loader: crate::programs::LateLoader) {
        self.late = Some(loader);
    }

    /// Whether the program is still to be loaded by a late loader.
    pub(crate) fn awaits_late_load(&self) -> bool {
        self.awaiting_late && self.prog.get().is_none()
    }

    /// The program (or why there is none) a late loader handed over; kept
    /// only when none is there yet.
    pub(crate) fn set_late(&mut self, prog: std::result::Result<OwnedFd, String>) {
        let _ = self.prog.set(prog);
    }

    /// The program, or why there is none, when a load was tried; `None`
    /// before its first use.
    pub(crate) fn peek(&self) -> Option<&std::result::Result<OwnedFd, String>> {
        self.prog.get()
    }

    /// The program, loaded on the first call. The kernel's BTF is parsed
    /// for this load only: parsed, it is some 16 MB of heap that nothing
    /// needs afterwards (a daemon kept it for good before).
    pub(crate) fn get(&self) -> &std::result::Result<OwnedFd, String> {
        self.prog.get_or_init(|| {
            if self.awaiting_late {
                let Some(loader) = &self.late else {
                    return Err("no netfilter program: nothing can load it now".to_string());
                };
                let want = crate::programs::Programs {
                    netfilter: true,
                    ..Default::default()
                };
                return match loader(want) {
                    Ok(late) => late.nf.unwrap_or_else(|| {
                        Err("the loader process handed over no netfilter program".to_string())
                    }),
                    Err(e) => Err(format!("loading the netfilter program: {e}")),
                };
            }
            let kernel_btf = Btf::from_sys_fs().ok();
            let fds: Vec<(String, RawFd)> = self
                .maps
                .iter()
                .map(|(n, fd)| (n.clone(), fd.as_raw_fd()))
                .collect();
            load_program(&self.object, &fds, kernel_btf.as_ref())
        })
    }
}

/// Load `parapet_nf` from `object` (already kfunc-resolved) as a netfilter
/// program whose maps are the ones named in `fds`. Errors are the kernel's
/// words, with the verifier log's tail.
fn load_program(
    object: &[u8],
    fds: &[(String, RawFd)],
    kernel_btf: Option<&Btf>,
) -> std::result::Result<OwnedFd, String> {
    let mut obj = Object::parse(object).map_err(|e| format!("parsing the object: {e}"))?;
    // Every BTF feature this program type's kernels (>= 6.4) have.
    let features = BtfFeatures::new(true, true, true, true, true, true, true, true);
    let btf_fd = match obj.fixup_and_sanitize_btf(&features) {
        Ok(Some(btf)) => Some(load_btf(btf).map_err(|e| format!("loading the program BTF: {e}"))?),
        Ok(None) => None,
        Err(e) => return Err(format!("program BTF: {e}")),
    };
    let kernel_btf = kernel_btf.ok_or("no kernel BTF (/sys/kernel/btf/vmlinux)")?;
    obj.relocate_btf(kernel_btf)
        .map_err(|e| format!("CO-RE relocation: {e}"))?;
    let obj_maps = obj.maps.clone();
    let mut refs = Vec::new();
    for (name, m) in &obj_maps {
        let fd = fds
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, fd)| *fd)
            .ok_or_else(|| format!("map {name} was not created by the loader"))?;
        refs.push((name.as_str(), fd, m));
    }
    let text_sections: HashSet<usize> = obj.functions.keys().map(|(s, _)| *s).collect();
    obj.relocate_maps(refs.into_iter(), &text_sections)
        .map_err(|e| format!("map relocation: {e}"))?;
    obj.relocate_calls(&text_sections)
        .map_err(|e| format!("call relocation: {e}"))?;
    let prog = obj
        .programs
        .get(PROG_NF)
        .ok_or_else(|| format!("{PROG_NF} missing from the object"))?;
    let func = obj
        .functions
        .get(&prog.function_key())
        .ok_or_else(|| format!("{PROG_NF}: no code"))?;
    let insns: &[bpf_insn] = &func.instructions;
    let license = obj.license.clone();
    let func_info = func.func_info.func_info_bytes();
    let line_info = func.line_info.line_info_bytes();
    let name = CString::new(PROG_NF).expect("no NUL");

    let load = |log: &mut [u8]| -> io::Result<OwnedFd> {
        let mut attr = prog_load_attr(insns.as_ptr() as u64, insns.len(), &license);
        // SAFETY: plain integer fields of the prog_load arm; every buffer
        // pointed to outlives the syscall.
        let u = unsafe { &mut attr.__bindgen_anon_3 };
        for (d, s) in u.prog_name.iter_mut().zip(name.as_bytes()) {
            *d = *s as libc::c_char;
        }
        if let Some(btf) = &btf_fd {
            u.prog_btf_fd = btf.as_raw_fd() as u32;
            if func.func_info_rec_size > 0 {
                u.func_info = func_info.as_ptr() as u64;
                u.func_info_cnt = func.func_info.len() as u32;
                u.func_info_rec_size = func.func_info_rec_size as u32;
            }
            if func.line_info_rec_size > 0 {
                u.line_info = line_info.as_ptr() as u64;
                u.line_info_cnt = func.line_info.len() as u32;
                u.line_info_rec_size = func.line_info_rec_size as u32;
            }
        }
        if !log.is_empty() {
            u.log_level = 1;
            u.log_buf = log.as_mut_ptr() as u64;
            u.log_size = log.len() as u32;
        }
        sys_bpf(bpf_cmd::BPF_PROG_LOAD, &mut attr).map(owned)
    };
    match load(&mut []) {
        Ok(fd) => Ok(fd),
        Err(first) => {
            // Again with the verifier's log, for the error message.
            let mut log = vec![0u8; 16 << 20];
            let e = load(&mut log).err().unwrap_or(first);
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            let tail: Vec<&str> = text.lines().rev().take(20).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            Err(format!(
                "loading {PROG_NF} as a netfilter program: {e}\n{}",
                tail.join("\n")
            ))
        }
    }
}

/// A `BPF_PROG_LOAD` attr for a netfilter program of `n` instructions at
/// `insns`; the caller keeps them and `license` alive over the syscall.
fn prog_load_attr(insns: u64, n: usize, license: &CString) -> bpf_attr {
    // SAFETY: zeroed bpf_attr is valid.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: plain integer fields of the prog_load arm.
    let u = unsafe { &mut attr.__bindgen_anon_3 };
    u.prog_type = PROG_TYPE_NETFILTER;
    u.expected_attach_type = ATTACH_NETFILTER;
    u.insns = insns;
    u.insn_cnt = n as u32;
    u.license = license.as_ptr() as u64;
    attr
}

pub(crate) fn link_create(
    prog: BorrowedFd<'_>,
    hook: NfHook,
    family: NfFamily,
    priority: i32,
) -> io::Result<OwnedFd> {
    // SAFETY: zeroed bpf_attr is valid.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: plain integer fields of the link_create arm.
    unsafe {
        let l = &mut attr.link_create;
        l.__bindgen_anon_1.prog_fd = prog.as_raw_fd() as u32;
        l.attach_type = ATTACH_NETFILTER;
        l.__bindgen_anon_3.netfilter.pf = family.pf();
        l.__bindgen_anon_3.netfilter.hooknum = hook.hooknum();
        l.__bindgen_anon_3.netfilter.priority = priority;
    }
    sys_bpf(bpf_cmd::BPF_LINK_CREATE, &mut attr).map(owned)
}

/// `BPF_PROG_TEST_RUN` of a netfilter program fd (also the floor program
/// of the benchmark).
pub(crate) fn test_run_fd(
    prog: BorrowedFd<'_>,
    hook: NfHook,
    family: NfFamily,
    frame: &[u8],
    repeat: u32,
) -> Result<TestRunOutcome> {
    if frame.len() < 14 {
        return Err(Error::FrameTooShort(frame.len()));
    }
    let frame = if hook == NfHook::Output {
        &frame[14..]
    } else {
        frame
    };
    // struct nf_hook_state: hook (u8), pf (u8), then pointers the kernel
    // wants zero and fills itself.
    let mut ctx = [0u8; 48];
    ctx[0] = hook.hooknum() as u8;
    ctx[1] = family.pf() as u8;
    // SAFETY: zeroed bpf_attr is valid.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: plain integer fields of the test arm; buffers outlive the call.
    unsafe {
        let t = &mut attr.test;
        t.prog_fd = prog.as_raw_fd() as u32;
        t.data_in = frame.as_ptr() as u64;
        t.data_size_in = frame.len() as u32;
        t.ctx_in = ctx.as_ptr() as u64;
        t.ctx_size_in = ctx.len() as u32;
        t.repeat = repeat.max(1);
    }
    sys_bpf(bpf_cmd::BPF_PROG_TEST_RUN, &mut attr)
        .map_err(|e| Error::Netfilter(format!("BPF_PROG_TEST_RUN at {hook}: {e}")))?;
    // SAFETY: the kernel filled the test arm.
    let (retval, duration) = unsafe { (attr.test.retval, attr.test.duration) };
    Ok(TestRunOutcome {
        retval,
        passed: retval == NF_ACCEPT,
        duration: Duration::from_nanos(duration.into()),
    })
}

/// The benchmark's floor at the netfilter hooks: a netfilter program that
/// only returns `NF_ACCEPT` (`r0 = 1; exit`), timed the same way as the
/// real one.
#[derive(Debug)]
pub struct NfFloor {
    fd: OwnedFd,
}

impl NfFloor {
    /// Load the floor program.
    pub fn load() -> Result<NfFloor> {
        // BPF_ALU64 | BPF_MOV | BPF_K r0 = 1; BPF_JMP | BPF_EXIT
        let raw: [[u8; 8]; 2] = [[0xb7, 0, 0, 0, 1, 0, 0, 0], [0x95, 0, 0, 0, 0, 0, 0, 0]];
        let license = CString::new("GPL").expect("no NUL");
        // raw and license outlive the syscall
        let mut attr = prog_load_attr(raw.as_ptr() as u64, raw.len(), &license);
        let fd = sys_bpf(bpf_cmd::BPF_PROG_LOAD, &mut attr)
            .map(owned)
            .map_err(|e| Error::Netfilter(format!("loading the floor program: {e}")))?;
        Ok(NfFloor { fd })
    }

    /// [`Dataplane::test_run_netfilter`] of the floor program.
    pub fn test_run(
        &self,
        hook: NfHook,
        family: NfFamily,
        frame: &[u8],
        repeat: u32,
    ) -> Result<TestRunOutcome> {
        test_run_fd(self.fd.as_fd(), hook, family, frame, repeat)
    }
}
