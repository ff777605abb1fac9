//! `parapetd`: runs the parapet daemon in the foreground.

use clap::Parser;
use parapet_daemon::parapetd::{parapetd_main, ParapetdArgs};
use std::process::ExitCode;

fn main() -> ExitCode {
    parapetd_main(ParapetdArgs::parse())
}
