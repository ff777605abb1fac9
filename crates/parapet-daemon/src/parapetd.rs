//! The `parapetd` binary's command line and main. The `parapet` binary
//! runs it too when invoked under the name `parapetd` (one executable can
//! serve both).

use std::path::PathBuf;
use std::process::ExitCode;

/// The parapet daemon: owns rulesets, sets, timeouts and counters, and
/// serves the `parapet` CLI over a local Unix socket.
#[derive(clap::Parser, Debug)]
#[command(name = "parapetd", version)]
pub struct ParapetdArgs {
    /// Control socket.
    #[arg(long, default_value = crate::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// State directory (journal, snapshot).
    #[arg(long, default_value = crate::DEFAULT_STATE_DIR)]
    pub state_dir: PathBuf,
    /// Ruleset applied at start and on SIGHUP.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Socket file mode (octal).
    #[arg(long, default_value = "0660", value_parser = parse_mode)]
    pub socket_mode: u32,
    /// Group owning the socket.
    #[arg(long)]
    pub socket_group: Option<String>,
    /// Do not fdatasync the journal before acknowledging changes. Only for
    /// throwaway state: a crash may lose acknowledged changes.
    #[arg(long)]
    pub no_fsync: bool,
    /// Most concurrent clients.
    #[arg(long, default_value_t = 256)]
    pub max_clients: usize,
    /// Journal size in MiB that triggers a snapshot.
    #[arg(long, default_value_t = 64)]
    pub snapshot_mib: u64,
    /// Kernel dataplane: largest rule id counted and logged (an applied
    /// ruleset with more rules is refused while the program is loaded).
    #[arg(long, default_value_t = 65_535)]
    pub max_rules: u32,
    /// Kernel dataplane: MiB per classifier image slot (two are allocated;
    /// a bigger image is refused by `apply`).
    #[arg(long, default_value_t = 16)]
    pub image_mib: u32,
    /// Kernel dataplane: leave out the netfilter hooks' classifier images
    /// (five of the six, each two slots of --image-mib, preallocated in
    /// kernel memory); `attach` without an interface is then refused. For
    /// hosts that only attach at XDP or tc.
    #[arg(long)]
    pub no_hook_images: bool,
    /// Kernel dataplane: do not keep the per-packet statistics no rule
    /// needs (packets seen, image-decided, per hook and interface: `stats`'
    /// `dataplane.hooks`, `parapet top`, `parapet_hook_*_total`), a few ns
    /// per packet; rule counters and drop reasons still count.
    #[arg(long)]
    pub no_packet_stats: bool,
    /// Kernel dataplane: where `attach` without an interface enforces the
    /// filter chains: `netfilter` (netfilter BPF links, Linux >= 6.4),
    /// `tc` (tc ingress/egress of every interface with a FIB lookup; the
    /// fallback, see docs/hooks.md), or `auto` (netfilter where the kernel
    /// has it, else tc).
    #[arg(long, default_value = "auto")]
    pub hook_placement: crate::kernel::HookPlacement,
    /// Kernel dataplane: the program on XDP attachments: `walker` (the
    /// main program, every ruleset), `generated` (a straight-line program
    /// generated from the interface chain whenever it is eligible:
    /// header fields, ACCEPT/DROP, no sets, conntrack, LOG or REJECT), or
    /// `generated-tree` (the tree form, from the chain's compiled trees),
    /// or `auto` (generated when eligible and its rules take at most 512
    /// comparisons, where it is the faster, else the tree form up to
    /// 131,072 entries; the tree form loads in the background while the
    /// walker enforces; docs/dataplane.md).
    #[arg(long, default_value = "auto")]
    pub xdp_engine: parapet_dataplane::EngineWant,
    /// Kernel dataplane: the chain run at the hooks, TABLE/CHAIN (default:
    /// filter/INPUT, or the one base chain on the input hook).
    #[arg(long)]
    pub chain: Option<String>,
    /// Kernel dataplane: LOG events per second per rule without `-m limit`.
    #[arg(long, default_value_t = 10)]
    pub log_rate: u32,
    /// Kernel dataplane: do not create the nft table `inet parapetd_ct`
    /// that makes the kernel track connections while the active ruleset
    /// matches ctstate (for hosts whose own rules already use conntrack).
    #[arg(long)]
    pub no_conntrack_table: bool,
    /// Kernel dataplane: bpffs directory of this instance's pinned
    /// programs, maps and links, which keep enforcing while parapetd is
    /// down (default: /sys/fs/bpf/parapet/<netns inode>-<hash of the
    /// state directory>; bpffs is mounted at /sys/fs/bpf when missing).
    #[arg(long)]
    pub pin_dir: Option<PathBuf>,
    /// Remove every pin of this instance (its attachments stop filtering)
    /// and exit.
    #[arg(long)]
    pub remove_pinned: bool,
    /// Tests only: load the program with its debug constant on, a
    /// different build of the program (exercises the upgrade swap).
    #[arg(long, hide = true)]
    pub test_program_variant: bool,
    /// Tests only: `apply` holds the state lock this long before it swaps
    /// (a long apply: the link watcher must not wait for it).
    #[arg(long, hide = true, value_name = "MS", default_value_t = 0)]
    pub test_apply_hold_ms: u64,
    /// Tests only: instructions per program of the split tree form (a
    /// small list then takes the split form).
    #[arg(long, hide = true, value_name = "INSNS")]
    pub test_tree_budget: Option<usize>,
    /// Tests only: the background load of a tree form waits this long
    /// (without the state lock) before its swap.
    #[arg(long, hide = true, value_name = "MS", default_value_t = 0)]
    pub test_xdp_load_hold_ms: u64,
    /// Tests only: the link watcher aborts parapetd between a new
    /// interface's ingress and egress links in the tc placement (the
    /// restart must complete the interface).
    #[arg(long, hide = true)]
    pub test_abort_between_tc_links: bool,
    /// Load the eBPF program in this process rather than in a child
    /// (benchmarks and tests: the load's kernel BTF parse then stays in
    /// parapetd's memory peak).
    #[arg(long, hide = true)]
    pub load_in_process: bool,
    /// Internal: be the loader child of a parapetd with the same flags
    /// (`kernel/load_child.rs`): load, pin under DIR, report, exit.
    #[arg(long, hide = true, value_name = "DIR")]
    pub load_helper: Option<PathBuf>,
    /// Internal, with --load-helper: the programs to load
    /// (`xdp,tc,tc-hooks,netfilter`; the others load at their first use).
    #[arg(
        long,
        hide = true,
        value_name = "LIST",
        default_value = "xdp,tc,tc-hooks,netfilter"
    )]
    pub load_programs: String,
    /// Serve Prometheus metrics at http://ADDR:PORT/metrics (loopback only
    /// unless --metrics-allow-remote; no listener without this flag).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Allow --metrics on a non-loopback address.
    #[arg(long)]
    pub metrics_allow_remote: bool,
    /// Write DIR/parapet.prom for node_exporter's textfile collector
    /// (atomically, every --metrics-interval seconds; no listener).
    #[arg(long, value_name = "DIR")]
    pub metrics_textfile: Option<PathBuf>,
    /// Seconds between --metrics-textfile writes.
    #[arg(long, default_value_t = 15)]
    pub metrics_interval: u64,
    /// Most per-rule metric series; the rest are summed into rule="other".
    #[arg(long, default_value_t = crate::metrics::DEFAULT_MAX_RULE_SERIES)]
    pub metrics_max_rules: usize,
    /// Fleet replication over NATS JetStream (`docs/fleet.md`).
    #[command(flatten)]
    pub fleet: crate::fleet::FleetArgs,
    /// CrowdSec decisions as a source (`docs/fleet.md`).
    #[command(flatten)]
    pub crowdsec: crate::crowdsec::CrowdsecArgs,
}

/// The pin directory of the instance `a` describes.
pub fn pin_dir_of(a: &ParapetdArgs) -> PathBuf {
    if let Some(d) = &a.pin_dir {
        return d.clone();
    }
    // the state directory's canonical path names the instance: it must
    // exist for the name to be the same at every start
    let _ = std::fs::create_dir_all(&a.state_dir);
    parapet_dataplane::default_pin_dir(&a.state_dir)
}

/// `--remove-pinned`: under the state directory's lock (never under a
/// running parapetd), removes the instance's pins and the conntrack table
/// they needed.
fn remove_pinned(a: &ParapetdArgs) -> ExitCode {
    let dir = pin_dir_of(a);
    let _lock = match crate::recovery::lock_state_dir(&a.state_dir) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("parapetd: {e}");
            return ExitCode::FAILURE;
        }
    };
    if !a.no_conntrack_table {
        // the table the pinned program read connections through
        parapet_dataplane::ct_table::ConntrackTable::delete_stale(crate::kernel::CT_TABLE);
    }
    match parapet_dataplane::remove_pins(&dir) {
        Ok(n) => {
            eprintln!("parapetd: removed {n} pins under {}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("parapetd: removing the pins under {}: {e}", dir.display());
            ExitCode::FAILURE
        }
    }
}

fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s.trim_start_matches("0o"), 8).map_err(|e| format!("bad mode `{s}`: {e}"))
}

/// The kernel dataplane's part of the flags.
fn kernel_config(a: &ParapetdArgs, pin_dir: PathBuf) -> crate::kernel::KernelConfig {
    crate::kernel::KernelConfig {
        max_rules: a.max_rules.max(1),
        image_mib: a.image_mib.clamp(1, 1024),
        chain: a.chain.clone(),
        log_rate: a.log_rate,
        conntrack_table: !a.no_conntrack_table,
        pin_dir: Some(pin_dir),
        debug_program: a.test_program_variant,
        hook_images: !a.no_hook_images,
        packet_stats: !a.no_packet_stats,
        hook_placement: a.hook_placement,
        test_abort_between_tc_links: a.test_abort_between_tc_links,
        load_child: (!a.load_in_process).then(|| std::env::args_os().collect()),
        xdp_engine: a.xdp_engine,
        test_tree_budget: a.test_tree_budget,
        test_xdp_load_hold: std::time::Duration::from_millis(a.test_xdp_load_hold_ms.min(60_000)),
    }
}

/// `--load-helper DIR`: the loader child's main. Its report goes to
/// standard output, an error to standard error (the parent's error text).
fn load_helper(a: &ParapetdArgs, pin_dir: PathBuf, staging: &std::path::Path) -> ExitCode {
    let loaded = parapet_dataplane::Programs::parse(&a.load_programs)
        .and_then(|want| crate::kernel::run_load_helper(&kernel_config(a, pin_dir), staging, want));
    match loaded {
        Ok(report) => {
            print!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// `parapetd`'s main: the `parapetd` binary, and the `parapet` binary when
/// invoked under the name `parapetd` (one executable can serve both).
pub fn parapetd_main(a: ParapetdArgs) -> ExitCode {
    if a.remove_pinned {
        return remove_pinned(&a);
    }
    let pin_dir = pin_dir_of(&a);
    if let Some(staging) = &a.load_helper {
        return load_helper(&a, pin_dir, staging);
    }
    let mut c = crate::server::Config::new(a.socket.clone(), a.state_dir.clone());
    c.kernel = kernel_config(&a, pin_dir);
    c.config = a.config;
    c.socket_mode = a.socket_mode;
    c.socket_group = a.socket_group;
    c.fsync = !a.no_fsync;
    c.max_clients = a.max_clients.max(1);
    c.snapshot_bytes = a.snapshot_mib.max(1) << 20;
    c.metrics = crate::metrics::MetricsConfig {
        listen: a.metrics,
        allow_remote: a.metrics_allow_remote,
        textfile: a.metrics_textfile,
        textfile_interval: std::time::Duration::from_secs(a.metrics_interval.max(1)),
        max_rule_series: a.metrics_max_rules,
    };
    c.clock_offset_ms = a.fleet.clock_offset_ms;
    c.test_apply_hold = std::time::Duration::from_millis(a.test_apply_hold_ms.min(60_000));
    c.fleet = match a.fleet.config(&c.state_dir) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("parapetd: {e}");
            return ExitCode::FAILURE;
        }
    };
    c.crowdsec = match a.crowdsec.config() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("parapetd: {e}");
            return ExitCode::FAILURE;
        }
    };
    match crate::server::run(c, crate::server::default_loader()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("parapetd: {e}");
            ExitCode::FAILURE
        }
    }
}
