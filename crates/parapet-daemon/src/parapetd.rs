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
    /// Fleet replication over NATS JetStream (`docs/fleet.md`).
    #[command(flatten)]
    pub fleet: crate::fleet::FleetArgs,
}

fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s.trim_start_matches("0o"), 8).map_err(|e| format!("bad mode `{s}`: {e}"))
}

/// `parapetd`'s main: the `parapetd` binary, and the `parapet` binary when
/// invoked under the name `parapetd` (one executable can serve both).
pub fn parapetd_main(a: ParapetdArgs) -> ExitCode {
    let mut c = crate::server::Config::new(a.socket, a.state_dir);
    c.config = a.config;
    c.socket_mode = a.socket_mode;
    c.socket_group = a.socket_group;
    c.fsync = !a.no_fsync;
    c.max_clients = a.max_clients.max(1);
    c.snapshot_bytes = a.snapshot_mib.max(1) << 20;
    c.kernel = crate::kernel::KernelConfig {
        max_rules: a.max_rules.max(1),
        image_mib: a.image_mib.clamp(1, 1024),
        chain: a.chain,
        log_rate: a.log_rate,
        conntrack_table: !a.no_conntrack_table,
    };
    c.clock_offset_ms = a.fleet.clock_offset_ms;
    c.fleet = match a.fleet.config(&c.state_dir) {
        Ok(f) => f,
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
