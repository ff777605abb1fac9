//! `parapet gen`: the rulesets and traces the benchmarks use, so anyone can
//! reproduce them.

use anyhow::{anyhow, bail, Result};
use clap::{Subcommand, ValueEnum};
use parapet_model::{Family, Packet, Ruleset};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Which ruleset to generate.
#[derive(Subcommand)]
pub enum GenCommand {
    /// nf-HiPAC's worst case: N rules every probe packet walks completely in a linear filter.
    WorstCase {
        /// Number of rules before the final ACCEPT.
        rules: usize,
        #[command(flatten)]
        out: GenOut,
    },
    /// Random rules with chains, jumps, RETURNs, LOGs, negations (IPv4 and IPv6).
    Random {
        /// Rules in the base chain.
        rules: usize,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Rules only (no chains, jumps, LOG).
        #[arg(long)]
        plain: bool,
        #[command(flatten)]
        out: GenOut,
    },
    /// Adversarial for decision trees: half the rules pin only the source, half only the destination.
    CrossProduct {
        /// Number of rules.
        rules: usize,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[command(flatten)]
        out: GenOut,
    },
}

/// Where and how to write.
#[derive(clap::Args)]
pub struct GenOut {
    /// Ruleset syntax.
    #[arg(long, value_enum, default_value_t = Syntax::IptablesSave)]
    syntax: Syntax,
    /// Also write a trace of this many packets to this file.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Packets in the trace.
    #[arg(long, default_value_t = 10_000)]
    packets: usize,
}

/// Output syntax.
#[derive(Copy, Clone, ValueEnum)]
pub enum Syntax {
    /// iptables-save.
    IptablesSave,
    /// nft list ruleset.
    Nft,
}

/// Makes the trace packets for a generated ruleset.
type PacketMaker = Box<dyn Fn(&Ruleset, usize) -> Vec<Packet>>;

/// Runs a `gen` command: the ruleset on stdout, the trace to its file.
pub fn run(cmd: GenCommand) -> Result<ExitCode> {
    let (rs, out, packets): (Ruleset, GenOut, PacketMaker) = match cmd {
        GenCommand::WorstCase { rules, out } => (
            parapet_gen::worst_case(rules),
            out,
            Box::new(|_, n| vec![parapet_gen::worst_case_packet(); n]),
        ),
        GenCommand::Random {
            rules,
            seed,
            plain,
            out,
        } => {
            let spec = parapet_gen::RandomSpec {
                rules,
                user_chains: if plain { 0 } else { 3 },
                control_flow: !plain,
                ..Default::default()
            };
            (
                parapet_gen::random_ruleset(seed, &spec),
                out,
                Box::new(move |rs, n| parapet_gen::packets_for(rs, seed, n)),
            )
        }
        GenCommand::CrossProduct { rules, seed, out } => (
            parapet_gen::cross_product(rules, seed),
            out,
            Box::new(move |rs, n| parapet_gen::packets_for(rs, seed, n)),
        ),
    };
    let text = match out.syntax {
        Syntax::IptablesSave => parapet_parse::render::iptables_save(&rs),
        Syntax::Nft => parapet_parse::render::nft(&rs),
    }
    .map_err(|e| anyhow!("{e}"))?;
    std::io::stdout().write_all(text.as_bytes())?;
    if let Some(path) = out.trace {
        let pkts = packets(&rs, out.packets);
        if matches!(out.syntax, Syntax::IptablesSave) && pkts.iter().any(|p| p.family == Family::V6)
        {
            // iptables-save holds one family; keep the trace consistent.
            bail!("this ruleset has IPv6 rules; use --syntax nft");
        }
        let mut w = std::io::BufWriter::new(std::fs::File::create(&path)?);
        for p in pkts {
            match p.family {
                Family::V4 => writeln!(
                    w,
                    "{}\t{}\t{}\t{}\t{}",
                    p.src, p.dst, p.sport, p.dport, p.proto
                )?,
                Family::V6 => writeln!(
                    w,
                    "{}\t{}\t{}\t{}\t{}",
                    p.src_ip(),
                    p.dst_ip(),
                    p.sport,
                    p.dport,
                    p.proto
                )?,
            }
        }
        w.flush()?;
    }
    Ok(ExitCode::SUCCESS)
}
