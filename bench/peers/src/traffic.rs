//! Traffic generators. All send one UDP flow, GEN_IP:SRC_PORT →
//! FLT_IP:SINK_PORT, of fixed-size frames, from the generator namespace.
//!
//! * [`GeneratorKind::PacketMmap`] — AF_PACKET socket with a PACKET_MMAP TX
//!   ring and PACKET_QDISC_BYPASS: frames are written into the ring once and
//!   re-armed, one `send()` flushes a whole batch. No per-packet syscall and
//!   no local IP stack on the sending side. The default.
//! * [`GeneratorKind::Sendmmsg`] — a connected UDP socket and `sendmmsg` of
//!   64 datagrams: one syscall per batch, but the full UDP/IP output path per
//!   packet.
//! * [`GeneratorKind::Trafgen`] — netsniff-ng's `trafgen` (also PACKET_MMAP)
//!   as an external reference.
//! * [`GeneratorKind::XdpLive`] — an in-kernel generator: a two-instruction
//!   XDP program (`return XDP_TX`) run with `BPF_PROG_TEST_RUN` in
//!   live-frames mode (`BPF_F_TEST_XDP_LIVE_FRAMES`, Linux ≥ 5.18) on gen0.
//!   Each repetition transmits the frame out of gen0 through
//!   `ndo_xdp_xmit`, with no skb and no socket on the sending side. veth
//!   accepts such frames only when the peer runs NAPI, so the bed turns GRO
//!   on for flt0 (UDP datagrams are not merged by GRO without a UDP_GRO
//!   socket, so every frame is still filtered on its own).
//!
//! The socket-based generators are closed-loop: veth keeps the sending
//! socket's reference on each skb until the receiver frees it, so the
//! TX ring / socket buffer throttles the sender to the receiver's pace. The
//! XDP generator is open-loop: it offers as much as it can and the receiver
//! drops what it cannot take (at the veth ring or the RPS backlog).
//!
//! Frame sizes are nominal Ethernet sizes including the 4-byte FCS, as in
//! RFC 2544; veth carries no FCS, so a "64-byte" frame is 60 bytes on veth.

use crate::signal;
use crate::testbed::{
    pin_current_thread, Side, Testbed, FLT_IP, FLT_MAC, GEN_IF, GEN_IP, GEN_MAC, SINK_PORT,
    SRC_PORT,
};
use crate::{Error, Result};
use std::net::{Ipv4Addr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Which generator to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum GeneratorKind {
    /// AF_PACKET + PACKET_MMAP TX ring (built in).
    PacketMmap,
    /// UDP socket + sendmmsg (built in).
    Sendmmsg,
    /// netsniff-ng trafgen (external).
    Trafgen,
    /// XDP program in BPF_PROG_TEST_RUN live-frames mode (built in).
    XdpLive,
}

impl GeneratorKind {
    /// All kinds, in the order the generator comparison shows them.
    pub const ALL: [GeneratorKind; 4] = [
        GeneratorKind::PacketMmap,
        GeneratorKind::Sendmmsg,
        GeneratorKind::Trafgen,
        GeneratorKind::XdpLive,
    ];

    /// Command-line / report name.
    pub fn name(self) -> &'static str {
        match self {
            GeneratorKind::PacketMmap => "packet-mmap",
            GeneratorKind::Sendmmsg => "sendmmsg",
            GeneratorKind::Trafgen => "trafgen",
            GeneratorKind::XdpLive => "xdp-live",
        }
    }

    /// Parses a name as printed by [`GeneratorKind::name`].
    pub fn parse(s: &str) -> Option<GeneratorKind> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// Shortest Ethernet frame without FCS.
const MIN_FRAME: usize = 60;
const ETH_HDR: usize = 14;
const IP_HDR: usize = 20;
const UDP_HDR: usize = 8;

/// Builds the Ethernet/IPv4/UDP frame for a nominal frame size (with FCS).
/// The result is `nominal - 4` bytes long (at least 60).
pub fn build_frame(nominal: usize) -> Vec<u8> {
    let len = nominal.saturating_sub(4).max(MIN_FRAME);
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&FLT_MAC);
    f[6..12].copy_from_slice(&GEN_MAC);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (len - ETH_HDR) as u16;
    let ip = &mut f[ETH_HDR..ETH_HDR + IP_HDR];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[6] = 0x40; // DF: these frames must never be fragmented
    ip[8] = 64; // TTL
    ip[9] = 17; // UDP
    ip[12..16].copy_from_slice(&GEN_IP.octets());
    ip[16..20].copy_from_slice(&FLT_IP.octets());
    let csum = ipv4_checksum(ip);
    ip[10..12].copy_from_slice(&csum.to_be_bytes());
    let udp = &mut f[ETH_HDR + IP_HDR..];
    udp[0..2].copy_from_slice(&SRC_PORT.to_be_bytes());
    udp[2..4].copy_from_slice(&SINK_PORT.to_be_bytes());
    udp[4..6].copy_from_slice(&(ip_len - IP_HDR as u16).to_be_bytes());
    // UDP checksum 0 = "not computed", legal for IPv4 and saves work on the
    // receiver that is not part of what we measure.
    f
}

/// UDP payload length that yields the nominal frame size.
pub fn payload_len(nominal: usize) -> usize {
    nominal.saturating_sub(4).max(MIN_FRAME) - ETH_HDR - IP_HDR - UDP_HDR
}

/// RFC 1071 header checksum.
pub fn ipv4_checksum(hdr: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for (i, ch) in hdr.chunks(2).enumerate() {
        if i == 5 {
            continue; // the checksum field itself
        }
        let w = u16::from_be_bytes([ch[0], *ch.get(1).unwrap_or(&0)]);
        sum += u32::from(w);
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// A running generator; [`Running::stop`] ends it and returns the number of
/// frames it handed to the kernel.
pub struct Running {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<Result<u64>>>,
    child: Option<std::process::Child>,
    stderr_path: Option<std::path::PathBuf>,
}

impl Running {
    /// `Err` with the reason if the generator has already ended on its own
    /// (an external tool that failed, a thread that hit an error).
    pub fn check_alive(&mut self) -> Result<()> {
        if let Some(c) = self.child.as_mut() {
            if let Some(st) = c.try_wait()? {
                let msg = self
                    .stderr_path
                    .as_ref()
                    .and_then(|p| std::fs::read_to_string(p).ok())
                    .map(|t| t.trim().lines().last().unwrap_or("").to_string())
                    .unwrap_or_default();
                self.child = None;
                return Err(Error(format!("generator exited ({st}): {msg}")));
            }
        }
        if self.handle.as_ref().is_some_and(|h| h.is_finished()) {
            return match self.handle.take().map(|h| h.join()) {
                Some(Ok(Err(e))) => Err(e),
                _ => Err(Error::msg("generator stopped early")),
            };
        }
        Ok(())
    }

    /// Stops the generator and waits for it.
    pub fn stop(mut self) -> Result<u64> {
        self.finish()
    }

    fn finish(&mut self) -> Result<u64> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(mut c) = self.child.take() {
            // trafgen prints its statistics and exits on SIGINT; we signal
            // only the child we started, by pid.
            // SAFETY: kill with a pid we own.
            unsafe {
                libc::kill(c.id() as i32, libc::SIGINT);
            }
            let deadline = Instant::now() + Duration::from_secs(3);
            loop {
                if c.try_wait()?.is_some() {
                    break;
                }
                if Instant::now() > deadline {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            return Ok(0);
        }
        match self.handle.take() {
            Some(h) => h
                .join()
                .map_err(|_| Error::msg("generator thread panicked"))?,
            None => Ok(0),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// Starts `kind` sending `frame`-byte frames until stopped or `max` elapsed
/// (the hard bound on every generator run).
pub fn start(bed: &Testbed, kind: GeneratorKind, frame: usize, max: Duration) -> Result<Running> {
    let stop = Arc::new(AtomicBool::new(false));
    let cpu = bed.options().gen_cpu;
    match kind {
        GeneratorKind::Trafgen => start_trafgen(bed, frame, max, stop),
        GeneratorKind::PacketMmap | GeneratorKind::Sendmmsg | GeneratorKind::XdpLive => {
            let ns = format!("/run/netns/{}", bed.ns(Side::Gen));
            let file = std::fs::File::open(&ns)?;
            let ifindex = bed.gen_ifindex();
            let s2 = stop.clone();
            let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
            let handle = std::thread::spawn(move || -> Result<u64> {
                let setup = || -> Result<()> {
                    // SAFETY: valid namespace fd; affects this thread only.
                    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                        return Err(Error::msg(format!(
                            "setns: {}",
                            std::io::Error::last_os_error()
                        )));
                    }
                    pin_current_thread(cpu)
                };
                if let Err(e) = setup() {
                    let _ = ready_tx.send(Err(e.clone()));
                    return Err(e);
                }
                let deadline = Instant::now() + max;
                match kind {
                    GeneratorKind::PacketMmap => {
                        run_packet_mmap(ifindex, frame, &s2, deadline, ready_tx)
                    }
                    GeneratorKind::XdpLive => run_xdp_live(ifindex, frame, &s2, deadline, ready_tx),
                    _ => run_sendmmsg(frame, &s2, deadline, ready_tx),
                }
            });
            match ready_rx.recv_timeout(Duration::from_secs(5)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    let _ = handle.join();
                    return Err(e);
                }
                Err(_) => {
                    stop.store(true, Ordering::SeqCst);
                    let r = handle.join();
                    return Err(match r {
                        Ok(Err(e)) => e,
                        _ => Error::msg("generator did not start"),
                    });
                }
            }
            Ok(Running {
                stop,
                handle: Some(handle),
                child: None,
                stderr_path: None,
            })
        }
    }
}

fn keep_going(stop: &AtomicBool, deadline: Instant) -> bool {
    !stop.load(Ordering::Relaxed) && !signal::stop_requested() && Instant::now() < deadline
}

const RING_FRAME: usize = 2048;
const RING_FRAMES: usize = 1024;
const RING_BLOCK: usize = 1 << 16;
const TX_BATCH: usize = 256;
// From <linux/if_packet.h>; spelled out to not depend on libc's enum form.
const TPACKET_V2: i32 = 1;
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
const TP_STATUS_SENDING: u32 = 2;
const TP_STATUS_WRONG_FORMAT: u32 = 4;

struct Ring {
    ptr: *mut u8,
    len: usize,
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: ptr/len come from a successful mmap.
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.len);
        }
    }
}

fn last_err(what: &str) -> Error {
    Error(format!("{what}: {}", std::io::Error::last_os_error()))
}

fn run_packet_mmap(
    ifindex: i32,
    nominal: usize,
    stop: &AtomicBool,
    deadline: Instant,
    ready: std::sync::mpsc::Sender<Result<()>>,
) -> Result<u64> {
    let setup = || -> Result<(std::os::fd::OwnedFd, Ring)> {
        use std::os::fd::FromRawFd;
        // Protocol 0: a send-only socket, so it never queues received frames.
        // SAFETY: plain syscall.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
        if fd < 0 {
            return Err(last_err("socket(AF_PACKET)"));
        }
        // SAFETY: fd is a fresh socket we own.
        let sock = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        crate::testbed::set_int_opt(fd, libc::SOL_PACKET, libc::PACKET_VERSION, TPACKET_V2)?;
        // Skip the qdisc layer: veth has none worth measuring, and this is
        // what trafgen does too.
        crate::testbed::set_int_opt(fd, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, 1)?;
        let req = libc::tpacket_req {
            tp_block_size: RING_BLOCK as u32,
            tp_block_nr: (RING_FRAMES * RING_FRAME / RING_BLOCK) as u32,
            tp_frame_size: RING_FRAME as u32,
            tp_frame_nr: RING_FRAMES as u32,
        };
        // SAFETY: pointer to a live tpacket_req and its size.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_PACKET,
                libc::PACKET_TX_RING,
                &req as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::tpacket_req>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(last_err("PACKET_TX_RING"));
        }
        // SAFETY: zeroed sockaddr_ll is valid; we fill the fields we need.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_IP as u16).to_be();
        sll.sll_ifindex = ifindex;
        // SAFETY: pointer to a live sockaddr_ll and its size.
        let rc = unsafe {
            libc::bind(
                fd,
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(last_err("bind(AF_PACKET)"));
        }
        let len = RING_FRAMES * RING_FRAME;
        // SAFETY: mapping the ring the kernel just allocated for this fd.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(last_err("mmap(TX ring)"));
        }
        Ok((
            sock,
            Ring {
                ptr: ptr as *mut u8,
                len,
            },
        ))
    };
    let (sock, ring) = match setup() {
        Ok(x) => x,
        Err(e) => {
            let _ = ready.send(Err(e.clone()));
            return Err(e);
        }
    };
    let frame = build_frame(nominal);
    // TX data starts right after the aligned tpacket2_hdr (the kernel's
    // tp_hdrlen minus the sockaddr_ll it reserves for RX).
    let data_off = (std::mem::size_of::<libc::tpacket2_hdr>() + 15) & !15;
    for i in 0..RING_FRAMES {
        // SAFETY: every frame slot lies inside the mapping; the kernel does
        // not touch slots whose status is AVAILABLE.
        unsafe {
            let base = ring.ptr.add(i * RING_FRAME);
            std::ptr::copy_nonoverlapping(frame.as_ptr(), base.add(data_off), frame.len());
            let hdr = base as *mut libc::tpacket2_hdr;
            (*hdr).tp_len = frame.len() as u32;
        }
    }
    let _ = ready.send(Ok(()));
    let fd = sock.as_raw_fd();
    let mut idx = 0usize;
    let mut sent: u64 = 0;
    while keep_going(stop, deadline) {
        let mut queued = 0;
        while queued < TX_BATCH {
            // SAFETY: idx < RING_FRAMES; status is shared with the kernel, so
            // volatile accesses plus fences order them against it.
            unsafe {
                let hdr = ring.ptr.add(idx * RING_FRAME) as *mut libc::tpacket2_hdr;
                let st = std::ptr::read_volatile(&(*hdr).tp_status);
                if st & TP_STATUS_WRONG_FORMAT != 0 {
                    return Err(Error::msg("kernel rejected a TX ring frame"));
                }
                if st & (TP_STATUS_SEND_REQUEST | TP_STATUS_SENDING) != 0 {
                    break; // ring full: flush what we have
                }
                debug_assert_eq!(st & !TP_STATUS_AVAILABLE, 0);
                std::sync::atomic::fence(Ordering::Release);
                std::ptr::write_volatile(&mut (*hdr).tp_status, TP_STATUS_SEND_REQUEST);
            }
            idx = (idx + 1) % RING_FRAMES;
            queued += 1;
        }
        // Blocking send: the kernel transmits every SEND_REQUEST frame and
        // returns once they are handed to the device.
        // SAFETY: null buffer with zero length is how a TX ring is flushed.
        let rc = unsafe { libc::send(fd, std::ptr::null(), 0, 0) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EINTR) => continue,
                _ => return Err(Error(format!("send(TX ring): {e}"))),
            }
        }
        sent += queued as u64;
    }
    Ok(sent)
}

fn run_sendmmsg(
    nominal: usize,
    stop: &AtomicBool,
    deadline: Instant,
    ready: std::sync::mpsc::Sender<Result<()>>,
) -> Result<u64> {
    const BATCH: usize = 64;
    let sock = match (|| -> Result<UdpSocket> {
        let s = UdpSocket::bind((GEN_IP, crate::testbed::SRC_PORT))?;
        s.connect((FLT_IP, SINK_PORT))?;
        Ok(s)
    })() {
        Ok(s) => s,
        Err(e) => {
            let _ = ready.send(Err(e.clone()));
            return Err(e);
        }
    };
    let payload = vec![0u8; payload_len(nominal)];
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut libc::c_void,
        iov_len: payload.len(),
    };
    // SAFETY: zeroed mmsghdr is valid; every entry points at the same iovec,
    // which outlives the loop.
    let mut msgs: Vec<libc::mmsghdr> = (0..BATCH)
        .map(|_| unsafe {
            let mut m: libc::mmsghdr = std::mem::zeroed();
            m.msg_hdr.msg_iov = &mut iov;
            m.msg_hdr.msg_iovlen = 1;
            m
        })
        .collect();
    let _ = ready.send(Ok(()));
    let mut sent = 0u64;
    while keep_going(stop, deadline) {
        // SAFETY: msgs is a valid array of BATCH headers.
        let n = unsafe { libc::sendmmsg(sock.as_raw_fd(), msgs.as_mut_ptr(), BATCH as u32, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EINTR) => continue,
                _ => return Err(Error(format!("sendmmsg: {e}"))),
            }
        }
        sent += n as u64;
    }
    Ok(sent)
}

fn start_trafgen(
    bed: &Testbed,
    nominal: usize,
    max: Duration,
    stop: Arc<AtomicBool>,
) -> Result<Running> {
    if !crate::cmd::have("trafgen") {
        return Err(Error::msg(
            "trafgen not installed (apt-get install netsniff-ng)",
        ));
    }
    // trafgen's config: the frame as a list of byte literals.
    let frame = build_frame(nominal);
    let bytes: Vec<String> = frame.iter().map(|b| format!("0x{b:02x}")).collect();
    let cfg = format!("{{ {} }}\n", bytes.join(", "));
    let dir = crate::workdir()?;
    let path = dir.join(format!("trafgen-{nominal}.cfg"));
    std::fs::write(&path, cfg)?;
    let path_s = path.to_string_lossy().into_owned();
    let cpu = bed.options().gen_cpu.to_string();
    let secs = max.as_secs().max(1).to_string();
    let err_path = dir.join(format!("trafgen-{nominal}.err"));
    let err_file = std::fs::File::create(&err_path)?;
    let child = bed.in_ns(Side::Gen, move || {
        std::process::Command::new("timeout")
            .args([
                "--signal=INT",
                &secs,
                "taskset",
                "-c",
                &cpu,
                "trafgen",
                "--dev",
                GEN_IF,
                "--conf",
                &path_s,
                "--cpus",
                "1",
                // Leave host-wide settings alone: trafgen would otherwise
                // retune socket memory sysctls and NIC IRQ affinities.
                "--no-sock-mem",
                "--notouch-irq",
                "--no-cpu-stats",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(err_file)
            .spawn()
    })??;
    Ok(Running {
        stop,
        handle: None,
        child: Some(child),
        stderr_path: Some(err_path),
    })
}

// bpf(2) commands, program type and flags from <linux/bpf.h>.
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;
/// Frames per test-run call: 10-200 ms of sending at the rates seen here,
/// so stop requests are honoured promptly.
const XDP_REPEAT: u32 = 1 << 14;

/// The leading fields of `union bpf_attr` for BPF_PROG_LOAD; the kernel
/// treats the missing tail as zero.
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// The `test` member of `union bpf_attr` (BPF_PROG_TEST_RUN).
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    pad: u32,
}

/// `struct xdp_md`, the XDP context passed to the test run.
#[repr(C)]
#[derive(Default)]
struct XdpMd {
    data: u32,
    data_end: u32,
    data_meta: u32,
    ingress_ifindex: u32,
    rx_queue_index: u32,
    egress_ifindex: u32,
}

fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> libc::c_long {
    // SAFETY: attr is a live, properly laid out prefix of union bpf_attr and
    // we pass its exact size.
    unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>(),
        )
    }
}

/// Loads `r0 = XDP_TX; exit` and returns its fd.
fn load_xdp_tx() -> Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // Two eBPF instructions, 8 bytes each: `mov64 r0, 3` (opcode 0xb7,
    // imm 3 = XDP_TX) and `exit` (0x95).
    let insns: [u64; 2] = [
        u64::from_le_bytes([0xb7, 0, 0, 0, 3, 0, 0, 0]),
        u64::from_le_bytes([0x95, 0, 0, 0, 0, 0, 0, 0]),
    ];
    let license = b"GPL\0";
    let mut name = [0u8; 16];
    name[..10].copy_from_slice(b"ppbench_tx");
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: 2,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name: name,
        ..Default::default()
    };
    let fd = bpf(BPF_PROG_LOAD, &mut attr);
    if fd < 0 {
        return Err(last_err("bpf(BPF_PROG_LOAD)"));
    }
    // SAFETY: the kernel returned a fresh fd we now own.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

fn run_xdp_live(
    ifindex: i32,
    nominal: usize,
    stop: &AtomicBool,
    deadline: Instant,
    ready: std::sync::mpsc::Sender<Result<()>>,
) -> Result<u64> {
    let prog = match load_xdp_tx() {
        Ok(p) => p,
        Err(e) => {
            let _ = ready.send(Err(e.clone()));
            return Err(e);
        }
    };
    let frame = build_frame(nominal);
    let mut sent = 0u64;
    let mut first = true;
    while keep_going(stop, deadline) {
        // The context names the device whose receive queue the frames
        // pretend to arrive on; XDP_TX sends them back out of it.
        let mut ctx = XdpMd {
            data_end: frame.len() as u32,
            ingress_ifindex: ifindex as u32,
            ..Default::default()
        };
        let mut attr = TestRunAttr {
            prog_fd: prog.as_raw_fd() as u32,
            data_size_in: frame.len() as u32,
            data_in: frame.as_ptr() as u64,
            repeat: XDP_REPEAT,
            ctx_size_in: std::mem::size_of::<XdpMd>() as u32,
            ctx_in: &mut ctx as *mut XdpMd as u64,
            flags: BPF_F_TEST_XDP_LIVE_FRAMES,
            batch_size: 64,
            ..Default::default()
        };
        let rc = bpf(BPF_PROG_TEST_RUN, &mut attr);
        if rc < 0 {
            let e = last_err("bpf(BPF_PROG_TEST_RUN, live frames)");
            if first {
                let _ = ready.send(Err(e.clone()));
            }
            return Err(e);
        }
        if first {
            first = false;
            let _ = ready.send(Ok(()));
        }
        sent += u64::from(XDP_REPEAT);
    }
    if first {
        let _ = ready.send(Ok(()));
    }
    Ok(sent)
}

/// The generator's own address, for documentation and tests.
pub fn flow() -> (Ipv4Addr, u16, Ipv4Addr, u16) {
    (GEN_IP, SRC_PORT, FLT_IP, SINK_PORT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_sizes_and_checksum() {
        for n in [64, 128, 512, 1518] {
            let f = build_frame(n);
            assert_eq!(f.len(), n - 4);
            assert_eq!(payload_len(n) + 42, n - 4);
            // A correct header sums (with its checksum) to 0xffff.
            let ip = &f[14..34];
            let mut sum: u32 = ip
                .chunks(2)
                .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
                .sum();
            while sum >> 16 != 0 {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            assert_eq!(sum, 0xffff);
            assert_eq!(u16::from_be_bytes([f[36], f[37]]), SINK_PORT);
        }
    }
}
