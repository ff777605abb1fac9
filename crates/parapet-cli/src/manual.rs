//! Man pages and shell completions, generated from the clap definitions
//! of `parapet` and `parapetd` so they cannot drift from the flags:
//! `parapet manpages DIR` (hidden; `make man` and `make deb` run it) and
//! `parapet completions SHELL [--parapetd]`.

use anyhow::{Context, Result};
use clap::Command;
use std::path::Path;

/// Section 8: system administration commands (both need root to enforce).
const SECTION: &str = "8";

/// Writes `parapet.8`, one `parapet-SUB[-SUBSUB].8` per visible
/// subcommand, and `parapetd.8` into `dir`; returns the file names.
pub fn manpages(parapet: Command, parapetd: Command, dir: &Path) -> Result<Vec<String>> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
    let mut written = Vec::new();
    for cmd in [parapet, parapetd] {
        let mut cmd = cmd.disable_help_subcommand(true);
        cmd.build();
        page(cmd, dir, &mut written)?;
    }
    written.sort();
    Ok(written)
}

fn page(cmd: Command, dir: &Path, written: &mut Vec<String>) -> Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        page(sub.clone(), dir, written)?;
    }
    let man = clap_mangen::Man::new(cmd)
        .section(SECTION)
        .manual("parapet manual")
        .source(format!("parapet {}", env!("CARGO_PKG_VERSION")));
    let path = man
        .generate_to(dir)
        .with_context(|| format!("writing a man page into {}", dir.display()))?;
    written.push(
        path.file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into(),
    );
    Ok(())
}

/// The completion script of `cmd` for `shell`, on stdout (a closed pipe
/// is an error, not a panic).
pub fn completions(mut cmd: Command, shell: clap_complete::Shell) -> Result<()> {
    use std::io::Write;
    let name = cmd.get_name().to_string();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut script);
    std::io::stdout()
        .write_all(&script)
        .context("writing the completion script")
}
