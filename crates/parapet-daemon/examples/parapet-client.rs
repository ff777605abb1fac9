//! A minimal `parapet` front end over the daemon subcommands, the way the
//! real CLI embeds them (`#[command(flatten)]`). Used by the fail2ban
//! shell-action test; also handy against a running daemon:
//! `cargo run --example parapet-client -- --socket S stats`.

use clap::Parser;
use parapet_daemon::cli::{run, DaemonCommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "parapet")]
struct Cli {
    /// parapetd's socket (default: $PARAPET_SOCKET, then /run/parapet/parapet.sock).
    #[arg(long, global = true)]
    socket: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand, Debug)]
enum Cmd {
    #[command(flatten)]
    Daemon(DaemonCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Daemon(c) => run(c, cli.socket.as_deref()),
    }
}
