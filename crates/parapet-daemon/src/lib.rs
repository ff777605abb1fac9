//! # parapet-daemon
//!
//! `parapetd`, the daemon that owns parapet's state — rulesets, sets,
//! timeouts, counters and the loaded eBPF program — and the client library
//! of its control protocol. From the bottom up:
//!
//! - [`proto`]: the line-delimited JSON protocol, versioned (`"v":1`);
//!   [`command`]: each request as a typed [`command::Command`].
//! - [`compiled`]: a ruleset parsed and compiled ([`CompiledRuleset`]) and
//!   the [`Loader`] trait; [`loader`]: the loaders (`parapet-parse` +
//!   `parapet-compile`; JSON).
//! - [`kernel`]: the loaded BPF program, its attachments, and keeping the
//!   kernel equal to the state.
//! - [`change`]: [`change::Change`], every change the state can undergo;
//!   [`journal`]: append-only journal + snapshot of changes with per-record
//!   CRC-32C; acknowledged changes survive `kill -9`, expiries are absolute.
//! - [`state`]: the state and [`state::State::commit`], the one function
//!   that applies a change to the store, the journal and the kernel (client
//!   commands, `ban`, replay and snapshots all use it).
//! - [`server`]: the daemon ([`server::Daemon`], [`server::run`]): local
//!   Unix socket (mode 0660, no network listener), a reader and a writer
//!   thread per client, group-committed journal, expiry reaper, sd_notify,
//!   the rejecter (`rejecter.rs`: answers REJECTs at the netfilter hooks);
//!   [`parapetd`]: the binary's flags.
//! - [`metrics`]: Prometheus metrics (opt-in; settings in [`metrics_config`],
//!   counts kept by the state and journal in [`metrics_tally`]); [`metrics_http`]: their
//!   loopback HTTP listener and node_exporter text file.
//! - [`crowdsec`]: CrowdSec Local API decisions as a source (`--crowdsec`);
//!   [`crowdsec_http`]: its bounded HTTP GET and stream parsing.
//! - [`client`]: [`client::Client`], which the `parapet` CLI's daemon
//!   commands use.
//!
//! The protocol, persistence, limits and the fail2ban set-up are documented
//! in `docs/daemon.md`.

mod addr_watch;
pub mod change;
pub mod client;
pub mod command;
pub mod compiled;
mod connection;
mod crc;
pub mod crowdsec;
pub mod crowdsec_http;
mod dispatch;
mod execute;
pub mod fleet;
pub mod hooks;
pub mod journal;
pub mod kernel;
mod link_watch;
pub mod loader;
pub mod metrics;
pub mod metrics_config;
pub mod metrics_http;
mod metrics_sources;
pub mod metrics_tally;
pub mod parapetd;
pub mod proto;
mod recent;
mod recovery;
mod rejecter;
pub mod server;
mod shared;
pub mod state;
mod xdp_loader;

pub use client::{socket_path, Client, ClientError, DEFAULT_SOCKET, DEFAULT_STATE_DIR, SOCKET_ENV};
pub use compiled::{CompiledChain, CompiledRuleset, Loader};
pub use crc::crc32c;
pub use loader::{JsonLoader, ParseLoader};
pub use server::{Config, Daemon};
