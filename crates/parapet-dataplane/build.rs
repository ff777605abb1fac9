//! Compiles `bpf/parapet.bpf.c` into a BPF object (embedded by `src/lib.rs`
//! with `include_bytes!`) and runs `bpf/layout_probe.c` on the host to record
//! the C struct layout for the ABI tests.
//!
//! One object from one compilation unit: `bpf/parapet.bpf.c` holds the XDP
//! and tc entry points and includes the `bpf/lib/*.h` headers (one concern
//! each, include-guarded, each including what it uses).  Both programs share
//! every map, and the loader opens maps and programs by name in that one
//! object; two objects would each define their own copy of every map.
//!
//! Needs `clang` (Debian: `apt-get install clang`) and the libbpf headers
//! (`libbpf-dev`) plus kernel uapi headers (`linux-libc-dev`).  Set `CLANG`
//! to use another clang binary.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets this"));
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets this"));
    let bpf_dir = manifest.join("bpf");
    // A directory makes cargo watch every file below it, so a new header
    // under bpf/lib/ needs no entry here.
    println!("cargo:rerun-if-changed={}", bpf_dir.display());
    println!("cargo:rerun-if-env-changed=CLANG");

    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".to_string());
    match Command::new(&clang).arg("--version").output() {
        Ok(o) if o.status.success() => {}
        _ => fail(&format!(
            "`{clang}` not found or not working. parapet-dataplane compiles its BPF program \
             with clang: install it (Debian/Ubuntu: `apt-get install clang libbpf-dev \
             linux-libc-dev`) or point the CLANG environment variable at a clang binary."
        )),
    }
    if !Path::new("/usr/include/bpf/bpf_helpers.h").exists() {
        fail(
            "/usr/include/bpf/bpf_helpers.h is missing: install the libbpf headers \
             (Debian/Ubuntu: `apt-get install libbpf-dev`).",
        );
    }

    // <asm/types.h> lives in the multiarch directory on Debian; -target bpf
    // does not search it by itself.
    let multiarch = multiarch_include();

    check_headers_alone(&clang, &bpf_dir, multiarch.as_deref());

    // Two objects from one source: the walker's budget loops as may_goto
    // loops (Linux >= 6.9) and as iterator loops (older kernels); the
    // loader probes the kernel and picks one (src/load.rs). A third, for
    // benchmarks only: the may_goto object with the stage profile's early
    // returns (bpf/lib/stage_stop.h, src/stage_profile.rs).
    for (name, defines) in [
        ("parapet.bpf.o", &[][..]),
        ("parapet_iter.bpf.o", &["-DPARAPET_ITER_LOOPS"][..]),
        ("parapet_stages.bpf.o", &["-DPARAPET_STAGE_PROFILE"][..]),
    ] {
        let mut cmd = Command::new(&clang);
        cmd.args([
            "-O2", "-g", "-target", "bpf", "-mcpu=v3", "-Wall", "-Werror",
        ])
        .args(defines)
        .arg("-I")
        .arg(&bpf_dir);
        if let Some(dir) = &multiarch {
            cmd.arg("-I").arg(dir);
        }
        cmd.arg("-c")
            .arg(bpf_dir.join("parapet.bpf.c"))
            .arg("-o")
            .arg(out.join(name));
        run(&mut cmd, "compiling bpf/parapet.bpf.c");
    }

    // The layout probe runs on the build host; the library is only ever
    // built for Linux hosts that also run it, so host == target here.
    let probe = out.join("layout_probe");
    let mut cmd = Command::new(&clang);
    cmd.args(["-O0", "-Wall", "-Werror", "-I"])
        .arg(&bpf_dir)
        .arg(bpf_dir.join("layout_probe.c"))
        .arg("-o")
        .arg(&probe);
    run(&mut cmd, "compiling bpf/layout_probe.c");
    let o = Command::new(&probe)
        .output()
        .unwrap_or_else(|e| fail(&format!("running {}: {e}", probe.display())));
    if !o.status.success() {
        fail("bpf/layout_probe.c failed");
    }
    std::fs::write(out.join("c_layout.rs"), &o.stdout)
        .unwrap_or_else(|e| fail(&format!("writing c_layout.rs: {e}")));
}

/// Every `bpf/lib/*.h` must compile on its own: a header that calls a
/// static or uses a macro it does not include would otherwise only work
/// after whichever header happens to come first in `parapet.bpf.c`.
fn check_headers_alone(clang: &str, bpf_dir: &Path, multiarch: Option<&Path>) {
    let lib = bpf_dir.join("lib");
    let mut headers: Vec<PathBuf> = std::fs::read_dir(&lib)
        .unwrap_or_else(|e| fail(&format!("reading {}: {e}", lib.display())))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "h"))
        .collect();
    headers.sort();
    for h in headers {
        let mut cmd = Command::new(clang);
        // Unused statics are expected in a header compiled alone.
        cmd.args([
            "-fsyntax-only",
            "-target",
            "bpf",
            "-mcpu=v3",
            "-Wall",
            "-Werror",
            "-Wno-unused-function",
            "-I",
        ])
        .arg(bpf_dir);
        if let Some(dir) = multiarch {
            cmd.arg("-I").arg(dir);
        }
        cmd.arg("-include").arg(&h).args(["-x", "c", "/dev/null"]);
        run(&mut cmd, &format!("compiling {} on its own", h.display()));
    }
}

fn multiarch_include() -> Option<PathBuf> {
    let target = env::var("TARGET").unwrap_or_default();
    let arch = target.split('-').next().unwrap_or("");
    let triple = match arch {
        "x86_64" => "x86_64-linux-gnu",
        "aarch64" => "aarch64-linux-gnu",
        "riscv64gc" => "riscv64-linux-gnu",
        "powerpc64le" => "powerpc64le-linux-gnu",
        "s390x" => "s390x-linux-gnu",
        _ => return None,
    };
    let dir = PathBuf::from("/usr/include").join(triple);
    dir.exists().then_some(dir)
}

fn run(cmd: &mut Command, what: &str) {
    match cmd.status() {
        Ok(s) if s.success() => {}
        Ok(s) => fail(&format!("{what} failed ({s}); command: {cmd:?}")),
        Err(e) => fail(&format!("{what}: could not run {cmd:?}: {e}")),
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("error: parapet-dataplane build: {msg}");
    panic!("parapet-dataplane build: {msg}");
}
