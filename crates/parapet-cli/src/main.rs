//! `parapet`: check, list, classify, trace and benchmark rulesets, and drive
//! the `parapetd` daemon.
//!
//! Offline commands read files and exit; they never need the daemon.

mod analyze;
mod analyze_explain;
mod bench_dataplane;
mod bench_stages;
mod daemon;
mod engine;
mod gen;
mod load;
mod manual;
mod pcap;
mod progress;
mod recent_cmd;
mod replay;
mod report;
mod run;
mod set_lookup;
mod top;
mod top_screen;

use anyhow::Result;
use clap::{CommandFactory, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// A packet filter whose per-packet cost does not grow with its ruleset.
#[derive(Parser)]
#[command(name = "parapet", version, about, long_about = None)]
struct Cli {
    /// Control socket of parapetd, for the daemon commands.
    #[arg(long, global = true, env = "PARAPET_SOCKET", value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Where nft `include`s of ruleset files are looked for when not next to the including
    /// file, in order (as `nft -I DIR`); repeatable.
    #[arg(short = 'I', long = "include-dir", global = true, value_name = "DIR")]
    include_dirs: Vec<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate ruleset files: exit 0 with a summary, or 1 with FILE:LINE:COL errors.
    Check {
        /// Ruleset files (iptables-save, nft, ClassBench, ipset save).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Input format.
        #[arg(long, default_value = "auto")]
        format: String,
    },
    /// Print a ruleset file normalized or translated (iptables-save, nft, json); without a
    /// file, the ruleset active in parapetd.
    List {
        /// Ruleset file; omit it to list what parapetd enforces.
        file: Option<PathBuf>,
        /// Output syntax: iptables-save, nft, json or ipset (the file's sets; the default
        /// for an ipset file) (default: iptables-save for a file, as applied for the daemon).
        #[arg(long = "format")]
        output: Option<String>,
        /// Input format of FILE.
        #[arg(long = "input-format", default_value = "auto")]
        input: String,
        /// With the daemon: include per-rule packet and byte counters.
        #[arg(long)]
        counters: bool,
    },
    /// Classify every packet of a trace: one line per packet, the deciding rule id (0 = policy).
    Classify {
        /// Ruleset file.
        rules: PathBuf,
        /// Trace: `src dst sport dport proto` per line, or a pcap/pcapng capture.
        trace: PathBuf,
        #[command(flatten)]
        opts: engine::EngineArgs,
        /// Add a tab and the verdict to each line.
        #[arg(long)]
        verdict: bool,
        #[command(flatten)]
        stateful: replay::StatefulArgs,
    },
    /// Show every rule a packet is checked against, why it did or did not match, and what decided.
    Trace {
        /// Ruleset file.
        rules: PathBuf,
        /// A packet: 'tcp 10.0.0.1:1234 > 10.0.0.2:22 iif eth0 ct new' (repeatable).
        #[arg(long, required = true)]
        packet: Vec<String>,
        #[command(flatten)]
        opts: engine::EngineArgs,
    },
    /// Explain which classifier the meta-engine picks for a ruleset, and why.
    Explain {
        /// Ruleset file.
        rules: PathBuf,
        #[command(flatten)]
        opts: engine::EngineArgs,
    },
    /// Rules that can never decide a packet: unreachable and redundant (exit 1 when found).
    Lint(analyze::LintArgs),
    /// Exactly which packets two rulesets give different verdicts (exit 1 when any).
    Diff(analyze::DiffArgs),
    #[command(flatten)]
    Daemon(daemon::DaemonCommand),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Run the eBPF dataplane in the foreground on interfaces, without the daemon (root).
    Run(run::RunArgs),
    /// Detach a `parapet run --background` and print its counters.
    Stop {
        /// The pid file given to --background.
        pidfile: PathBuf,
    },
    /// Generate benchmark rulesets (stdout) and traces (--trace FILE).
    #[command(subcommand)]
    Gen(gen::GenCommand),
    /// Live view of the rules hit right now: packets/s and bytes/s per rule, totals, sets, bans.
    Top(top::TopArgs),
    /// Print a shell completion script: `parapet completions bash > /etc/bash_completion.d/parapet`.
    Completions {
        /// Shell: bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
        /// The script for `parapetd` instead of `parapet`.
        #[arg(long)]
        parapetd: bool,
    },
    /// Write the man pages (parapet.8, parapet-SUBCOMMAND.8, parapetd.8) into DIR.
    #[command(hide = true)]
    Manpages {
        /// Output directory.
        dir: PathBuf,
    },
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Lookups per second of an engine on a ruleset and trace (median of runs).
    Classify {
        /// Ruleset file.
        rules: PathBuf,
        /// Trace file.
        trace: PathBuf,
        #[command(flatten)]
        opts: engine::EngineArgs,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// Timed runs (at least 5).
        #[arg(long, default_value_t = 7)]
        runs: usize,
    },
    /// Kernel-timed ns/packet of the eBPF program on trace packets (BPF_PROG_TEST_RUN; root).
    Dataplane(bench_dataplane::BenchArgs),
}

/// `parapet list … | head`: the reader closing early is how pipelines end,
/// not a bug — exit as a program killed by SIGPIPE would (status 141),
/// without the panic's backtrace. (SIGPIPE itself stays ignored: the
/// client's writes to parapetd's socket must fail with an error, not kill.)
fn quiet_on_closed_stdout() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        default_hook(info)
    }));
}

fn main() -> ExitCode {
    // Invoked as `parapetd` (a link to this binary): be the daemon.
    let argv0 = std::env::args_os().next().unwrap_or_default();
    if std::path::Path::new(&argv0).file_name() == Some(std::ffi::OsStr::new("parapetd")) {
        use parapet_daemon::parapetd::{parapetd_main, ParapetdArgs};
        return parapetd_main(ParapetdArgs::parse());
    }
    quiet_on_closed_stdout();
    let cli = Cli::parse();
    load::set_include_dirs(cli.include_dirs.clone());
    let socket = cli.socket.as_deref();
    let daemon = |cmd| daemon::run(cmd, socket);
    let result = match cli.command {
        Command::Check { files, format } => report::check(&files, &format),
        Command::List {
            file: Some(file),
            output,
            input,
            counters: false,
        } => report::list(&file, &input, output.as_deref()),
        Command::List {
            file: Some(_),
            counters: true,
            ..
        } => Err(anyhow::anyhow!(
            "--counters lists the daemon's counters; omit the file"
        )),
        Command::List {
            file: None,
            output,
            counters,
            ..
        } => Ok(daemon(daemon::DaemonCommand::List {
            counters,
            format: output,
        })),
        Command::Daemon(cmd) => Ok(daemon(cmd)),
        Command::Classify {
            rules,
            trace,
            opts,
            verdict,
            stateful,
        } => report::classify(&rules, &trace, &opts, verdict, &stateful),
        Command::Trace {
            rules,
            packet,
            opts,
        } => report::trace(&rules, &packet, &opts),
        Command::Explain { rules, opts } => report::explain(&rules, &opts),
        Command::Lint(args) => return analyze::lint(args),
        Command::Diff(args) => return analyze::diff(args),
        Command::Gen(cmd) => gen::run(cmd),
        Command::Top(args) => return top_screen::run(args, socket),
        Command::Completions { shell, parapetd } => {
            let cmd = if parapetd {
                parapetd_command()
            } else {
                Cli::command()
            };
            manual::completions(cmd, shell).map(|()| ExitCode::SUCCESS)
        }
        Command::Manpages { dir } => manual::manpages(Cli::command(), parapetd_command(), &dir)
            .map(|pages| {
                println!("{} man pages in {}", pages.len(), dir.display());
                ExitCode::SUCCESS
            }),
        Command::Run(args) => run::run(args),
        Command::Stop { pidfile } => run::stop(&pidfile),
        Command::Bench(BenchCommand::Dataplane(args)) => bench_dataplane::bench(args),
        Command::Bench(BenchCommand::Classify {
            rules,
            trace,
            opts,
            json,
            runs,
        }) => report::bench_classify(&rules, &trace, &opts, json, runs.max(5)),
    };
    finish(result)
}

/// `parapetd`'s command line, for its man page and completions.
fn parapetd_command() -> clap::Command {
    parapet_daemon::parapetd::ParapetdArgs::command()
}

/// Maps a command's outcome to the exit status: errors go to stderr, one
/// per line, and exit 1.
fn finish(result: Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("parapet: {e:#}");
            ExitCode::from(1)
        }
    }
}
