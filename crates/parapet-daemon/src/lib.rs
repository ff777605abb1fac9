//! # parapet-daemon
//!
//! `parapetd`, the daemon that owns parapet's state — rulesets, sets,
//! timeouts, counters (and later the BPF objects) — and the client side of
//! its control protocol.
//!
//! - [`server`]: the daemon ([`server::Daemon`], [`server::run`]): local
//!   Unix socket (mode 0660, no network listener), a reader and a writer thread per client,
//!   group-committed journal, expiry reaper, sd_notify.
//! - [`proto`]: the line-delimited JSON protocol, versioned (`"v":1`).
//! - [`journal`]: append-only journal + snapshot with per-record CRC-32C;
//!   acknowledged changes survive `kill -9`, expiries are absolute times.
//! - [`state`]: the state and its commands; rulesets are loaded through the
//!   [`state::Loader`] trait (parse + compile happen outside the state lock,
//!   the swap is one assignment under it).
//! - [`client`] and [`cli`]: a [`client::Client`] and the clap subcommands
//!   (`apply`, `list`, `stats`, `counters`, `set`, `ban`, `unban`) the
//!   `parapet` CLI embeds.
//!
//! The protocol, persistence, limits and the fail2ban set-up are documented
//! in `docs/daemon.md`.

pub mod cli;
pub mod client;
mod crc;
pub mod dataplane;
pub mod journal;
pub mod loader;
pub mod proto;
pub mod server;
pub mod state;

pub use client::{socket_path, Client, ClientError, DEFAULT_SOCKET, DEFAULT_STATE_DIR, SOCKET_ENV};
pub use crc::crc32c;
pub use loader::ParseLoader;
pub use server::{Config, Daemon};
pub use state::{JsonLoader, Loaded, Loader};
