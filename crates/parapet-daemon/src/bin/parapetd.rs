//! `parapetd`: runs the parapet daemon in the foreground.

use clap::Parser;
use parapet_daemon::server::{run, Config};
use parapet_daemon::{DEFAULT_SOCKET, DEFAULT_STATE_DIR};
use std::path::PathBuf;
use std::process::ExitCode;

/// The parapet daemon: owns rulesets, sets, timeouts and counters, and
/// serves the `parapet` CLI over a local Unix socket.
#[derive(Parser, Debug)]
#[command(name = "parapetd", version)]
struct Args {
    /// Control socket.
    #[arg(long, default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    /// State directory (journal, snapshot).
    #[arg(long, default_value = DEFAULT_STATE_DIR)]
    state_dir: PathBuf,
    /// Ruleset applied at start and on SIGHUP.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Socket file mode (octal).
    #[arg(long, default_value = "0660", value_parser = parse_mode)]
    socket_mode: u32,
    /// Group owning the socket.
    #[arg(long)]
    socket_group: Option<String>,
    /// Do not fdatasync the journal before acknowledging changes. Only for
    /// throwaway state: a crash may lose acknowledged changes.
    #[arg(long)]
    no_fsync: bool,
    /// Most concurrent clients.
    #[arg(long, default_value_t = 256)]
    max_clients: usize,
    /// Journal size in MiB that triggers a snapshot.
    #[arg(long, default_value_t = 64)]
    snapshot_mib: u64,
    /// Kernel dataplane: largest rule id counted and logged (an applied
    /// ruleset with more rules is refused while the program is loaded).
    #[arg(long, default_value_t = 65_535)]
    max_rules: u32,
    /// Kernel dataplane: MiB per classifier image slot (two are allocated;
    /// a bigger image is refused by `apply`).
    #[arg(long, default_value_t = 16)]
    image_mib: u32,
    /// Kernel dataplane: the chain run at the hooks, TABLE/CHAIN (default:
    /// filter/INPUT, or the one base chain on the input hook).
    #[arg(long)]
    chain: Option<String>,
    /// Kernel dataplane: LOG events per second per rule without `-m limit`.
    #[arg(long, default_value_t = 10)]
    log_rate: u32,
}

fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s.trim_start_matches("0o"), 8).map_err(|e| format!("bad mode `{s}`: {e}"))
}

fn main() -> ExitCode {
    let a = Args::parse();
    let mut c = Config::new(a.socket, a.state_dir);
    c.config = a.config;
    c.socket_mode = a.socket_mode;
    c.socket_group = a.socket_group;
    c.fsync = !a.no_fsync;
    c.max_clients = a.max_clients.max(1);
    c.snapshot_bytes = a.snapshot_mib.max(1) << 20;
    c.kernel = parapet_daemon::dataplane::KernelConfig {
        max_rules: a.max_rules.max(1),
        image_mib: a.image_mib.clamp(1, 1024),
        chain: a.chain,
        log_rate: a.log_rate,
    };
    match run(c, parapet_daemon::server::default_loader()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("parapetd: {e}");
            ExitCode::FAILURE
        }
    }
}
