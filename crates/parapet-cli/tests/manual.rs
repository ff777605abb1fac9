//! Man pages and completions are generated from the command definitions:
//! every subcommand `parapet --help` lists (and every one of `parapet set
//! --help`) gets its own page, is named in `parapet.8`, and is offered by
//! the bash, zsh and fish completions; `parapetd.8` documents every flag
//! `parapetd --help` lists. The pages must also render with `man`.

use std::path::Path;
use std::process::Command;

fn run(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_parapet"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "parapet {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// The subcommand names of a `--help` text's `Commands:` section.
fn commands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

/// The `--long` flags of a `--help` text.
fn flags(help: &str) -> Vec<String> {
    help.split_whitespace()
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| w.trim_end_matches([',', '.']).to_string())
        .filter(|w| w != "--help" && w != "--version")
        .collect()
}

#[test]
fn every_subcommand_has_a_page_and_completions() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["manpages", dir.path().to_str().unwrap()]);
    assert!(out.contains("man pages in"), "{out}");
    let read = |name: &str| {
        std::fs::read_to_string(dir.path().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let top = commands(&run(&["--help"]));
    assert!(top.len() >= 15, "{top:?}");
    let main = read("parapet.8");
    assert!(
        main.starts_with(".ie") || main.contains(".TH parapet 8"),
        "{main}"
    );
    let scripts: Vec<(&str, String)> = ["bash", "zsh", "fish"]
        .into_iter()
        .map(|s| (s, run(&["completions", s])))
        .collect();
    for c in &top {
        assert!(main.contains(c.as_str()), "parapet.8 does not name `{c}`");
        let page = read(&format!("parapet-{c}.8"));
        assert!(
            page.contains(&format!(".TH parapet-{c} 8")),
            "parapet-{c}.8:\n{page}"
        );
        for (shell, script) in &scripts {
            assert!(
                script.contains(c.as_str()),
                "{shell} completion lacks `{c}`"
            );
        }
    }
    for c in commands(&run(&["set", "--help"])) {
        read(&format!("parapet-set-{c}.8"));
    }
    // The hidden generator itself gets no page.
    assert!(!dir.path().join("parapet-manpages.8").exists());
    let daemon = read("parapetd.8");
    let dflags = flags(&run_parapetd_help());
    assert!(dflags.iter().any(|f| f == "--metrics"), "{dflags:?}");
    for f in dflags {
        // roff escapes '-' as '\-'.
        let roff = f.replace('-', "\\-");
        assert!(daemon.contains(&roff), "parapetd.8 lacks {f}");
    }
    for s in ["bash", "zsh", "fish"] {
        assert!(run(&["completions", s, "--parapetd"]).contains("metrics-textfile"));
    }
    // `man` renders a page without warnings.
    let man = Command::new("man")
        .args(["-l", "--warnings", "-E", "UTF-8"])
        .arg(dir.path().join("parapet-ban.8"))
        .env("MANWIDTH", "80")
        .output();
    if let Ok(o) = man {
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success() && text.contains("parapet-ban"), "{text}");
    }
}

/// `parapetd --help`, through `parapet` under the name `parapetd`.
fn run_parapetd_help() -> String {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("parapetd");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_parapet"), &link).unwrap();
    let o = Command::new(Path::new(&link))
        .arg("--help")
        .output()
        .unwrap();
    assert!(o.status.success());
    String::from_utf8(o.stdout).unwrap()
}
