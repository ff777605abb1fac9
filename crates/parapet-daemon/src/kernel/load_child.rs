//! Loading in a child process (`docs/daemon.md`, "Start-up memory
//! peak"): the load parses the kernel's BTF, some 19 MB of heap that
//! would stay in parapetd's memory peak (VmHWM) for good. parapetd runs
//! itself again (`/proc/self/exe`, its own command line plus the hidden
//! `--load-helper DIR`): the child loads, pins the programs and maps under
//! the staging directory DIR inside the pin directory, prints its report
//! and exits; parapetd opens the pins ([`Dataplane::open_handover`]) and
//! removes them. fork+exec rather than a fork alone: parapetd has threads
//! by then, and a forked copy of a threaded process may only exec. The
//! child verifies the programs the load asks for (what the first attach
//! runs); one started later verifies another program, on the maps the
//! first load pinned, when it is first used (`late_load.rs` of
//! parapet-dataplane).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use parapet_dataplane::{Dataplane, Features, LoadOptions, Programs, SetSizing};

use super::{dp_err, load_params, load_with_fallback, KernelConfig, LOAD_WHAT};
use crate::proto::ErrorReply;

/// Tests only, in debug builds: the loader child fails after it pinned
/// its staging directory, with this message (the daemon must refuse to
/// load and leave the instance's pins as they were). `1` fails every
/// load; a program list (`tc,netfilter`) the loads of any of them.
pub const TEST_LOAD_HELPER_FAIL: &str = "PARAPET_TEST_LOAD_HELPER_FAIL";

/// Numbers the hand-overs of this process (two may run at once).
static HANDOVERS: AtomicU32 = AtomicU32::new(0);

/// Loads `want` in a child running `argv` with `--load-helper`, and opens
/// what it pinned; the other programs are loaded at their first use by
/// another such child (`parapet_dataplane::LateLoader`). The child's error
/// text is the load's error; its other output (notes on what is
/// unavailable) goes to our standard error.
pub(crate) fn load_in_child(
    argv: &[OsString],
    opts: &LoadOptions,
    sizing: &SetSizing,
    features: &Features,
    pins: &Path,
    want: Programs,
) -> Result<Dataplane, ErrorReply> {
    let pid = std::process::id();
    if let Err(e) = parapet_dataplane::remove_stale_handovers(pins, Some(pid)) {
        eprintln!(
            "parapetd: removing hand-over pins left under {}: {e}",
            pins.display()
        );
    }
    let mut dp = in_child(argv, pins, want, |staging, report| {
        Dataplane::open_handover(opts, sizing, features, pins, staging, report)
            .map_err(|e| e.to_string())
    })
    .map_err(|e| dp_err(LOAD_WHAT, e))?;
    let build = dp.build_id().unwrap_or_default().to_string();
    let (argv, opts, pins) = (argv.to_vec(), opts.clone(), pins.to_path_buf());
    dp.set_late_loader(std::sync::Arc::new(move |late: Programs| {
        eprintln!(
            "parapetd: loading the programs {} at their first use",
            late.render()
        );
        in_child(&argv, &pins, late, |staging, report| {
            Dataplane::open_late_handover(&opts, &build, staging, report).map_err(|e| e.to_string())
        })
        .map_err(parapet_dataplane::Error::Object)
    }));
    Ok(dp)
}

/// Runs the loader child for `want` and `open`s what it pinned (its
/// report and staging directory), then removes the staging pins.
fn in_child<T>(
    argv: &[OsString],
    pins: &Path,
    want: Programs,
    open: impl FnOnce(&Path, &str) -> Result<T, String>,
) -> Result<T, String> {
    let staging = parapet_dataplane::handover_dir(
        pins,
        std::process::id(),
        HANDOVERS.fetch_add(1, Ordering::Relaxed),
    );
    let mut cmd = Command::new("/proc/self/exe");
    if let Some(argv0) = argv.first() {
        // the `parapet` binary is the daemon when called `parapetd`
        cmd.arg0(argv0);
    }
    cmd.args(argv.iter().skip(1))
        .arg("--load-helper")
        .arg(&staging)
        .arg("--load-programs")
        .arg(want.render())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = cmd
        .output()
        .map_err(|e| format!("starting the loader process: {e}"))?;
    let errors = String::from_utf8_lossy(&out.stderr);
    let opened = if out.status.success() {
        eprint!("{errors}");
        open(&staging, &String::from_utf8_lossy(&out.stdout))
    } else {
        let said = errors.trim();
        Err(format!(
            "the loader process failed ({}): {}",
            out.status,
            if said.is_empty() { "no message" } else { said }
        ))
    };
    // what was opened holds every object by its descriptors now
    if let Err(e) = parapet_dataplane::remove_handover(&staging) {
        eprintln!(
            "parapetd: removing the hand-over pins {}: {e}",
            staging.display()
        );
    }
    opened
}

/// `parapetd --load-helper DIR --load-programs LIST`: the child's side.
/// Loads the programs `want` as the daemon with `config` would, pins
/// under `staging`, and returns the report to print, or the error.
pub fn run_load_helper(
    config: &KernelConfig,
    staging: &Path,
    want: Programs,
) -> Result<String, String> {
    let (opts, sizing, features) = load_params(config);
    let pins = config
        .pin_dir
        .as_deref()
        .ok_or("--load-helper needs a pin directory")?;
    let report = load_with_fallback(&features, |f| {
        Dataplane::load_for_handover(&opts, &sizing, f, pins, staging, want)
    })
    .map_err(|e| e.to_string())?;
    let fail = std::env::var(TEST_LOAD_HELPER_FAIL).ok().filter(|v| {
        // `1`: every load; a program list: the loads of any of them
        v == "1" || Programs::parse(v).is_ok_and(|p| p.intersects(want))
    });
    if cfg!(debug_assertions) && fail.is_some() {
        return Err(format!(
            "injected failure of the loader process ({TEST_LOAD_HELPER_FAIL})"
        ));
    }
    Ok(report)
}
