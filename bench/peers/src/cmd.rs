//! Running external tools (ip, iptables, nft, ipset, trafgen) with useful
//! errors and measured wall time.

use crate::{Error, Result};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Output of a finished command.
#[derive(Debug, Clone)]
pub struct Done {
    /// Captured standard output.
    pub stdout: String,
    /// Wall time from spawn to exit, including process start-up: this is the
    /// cost a user of the tool pays, so load times include it on purpose.
    pub elapsed: Duration,
}

/// Runs `prog args…`, feeding `stdin` if given; fails on a non-zero exit
/// status with the tool's stderr in the message.
pub fn run(prog: &str, args: &[&str], stdin: Option<&[u8]>) -> Result<Done> {
    let mut c = Command::new(prog);
    c.args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
    let start = Instant::now();
    let mut child = c
        .spawn()
        .map_err(|e| Error(format!("cannot start {prog}: {e}")))?;
    if let Some(data) = stdin {
        // Write from a thread so a tool that produces output before
        // consuming all its input cannot deadlock us on full pipes.
        let mut pipe = child.stdin.take().expect("stdin was piped");
        let data = data.to_vec();
        let writer = std::thread::spawn(move || pipe.write_all(&data));
        let out = child.wait_with_output()?;
        let elapsed = start.elapsed();
        let _ = writer.join();
        return finish(prog, args, out, elapsed);
    }
    let out = child.wait_with_output()?;
    let elapsed = start.elapsed();
    finish(prog, args, out, elapsed)
}

fn finish(prog: &str, args: &[&str], out: std::process::Output, elapsed: Duration) -> Result<Done> {
    if !out.status.success() {
        let mut err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if err.len() > 600 {
            err.truncate(600);
            err.push('…');
        }
        let shown: Vec<&str> = args.iter().take(8).copied().collect();
        return Err(Error(format!(
            "`{prog} {}` failed ({}): {err}",
            shown.join(" "),
            out.status
        )));
    }
    Ok(Done {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        elapsed,
    })
}

/// True if `prog` is found on PATH (or is an existing path).
pub fn have(prog: &str) -> bool {
    if prog.contains('/') {
        return std::path::Path::new(prog).exists();
    }
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
        .unwrap_or(false)
}

/// First line of `prog --version`-style output, for the machine description.
pub fn version(prog: &str, arg: &str) -> String {
    match Command::new(prog).arg(arg).output() {
        Ok(o) => {
            let s = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&s)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        }
        Err(_) => "not installed".to_string(),
    }
}
