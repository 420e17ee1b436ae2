//! What runs inside the stock Linux guest besides the kernel: busybox (Debian's
//! `busybox-static`), fio built statically from Debian's source package (the binary package
//! links librados, librbd, libgfapi and a dozen more), and our modules ([`GuestModule`]) built against
//! the kernel's own `linux-headers-*` / `linux-kbuild-*` packages.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::apt::{self, Apt};
use super::kernel::Kernel;
use crate::error::{Error, Result};
use crate::{process, workspace};

fn fail(step: &str, reason: impl Into<String>) -> Error {
    Error::Linux {
        step: step.to_owned(),
        reason: reason.into(),
    }
}

fn mkdir(path: &Path) -> Result<()> {
    std::fs::create_dir_all(path).map_err(|source| Error::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// `bin/busybox` from Debian's `busybox-static`, unpacked once.
pub fn busybox(apt: &Apt, base: &Path) -> Result<PathBuf> {
    let root = base.join("busybox");
    let binary = root.join("bin/busybox");
    if !binary.is_file() {
        let debs = apt.download(&["busybox-static".to_owned()], &base.join("debs"))?;
        apt::unpack(&debs[0], &root)?;
    }
    binary
        .is_file()
        .then_some(binary)
        .ok_or_else(|| fail("busybox", "busybox-static has no bin/busybox"))
}

/// A static fio (libaio and io_uring engines) from Debian's fio source package, built once.
/// libaio's static library comes from Debian's `libaio-dev`, unpacked beside it.
pub fn fio(apt: &Apt, base: &Path) -> Result<PathBuf> {
    let built = base.join("fio/fio");
    if built.is_file() {
        return Ok(built);
    }
    let step = "fio (static build)";
    let aio = base.join("libaio");
    if !aio.join("usr/include/libaio.h").is_file() {
        let debs = apt.download(&["libaio-dev".to_owned()], &base.join("debs"))?;
        apt::unpack(&debs[0], &aio)?;
    }
    let dsc = apt.source("fio", &base.join("src"))?;
    let tree = base.join("fio/src");
    let _ = std::fs::remove_dir_all(&tree);
    mkdir(&base.join("fio"))?;
    let mut unpack = Command::new("dpkg-source");
    unpack.args(["--no-check", "-x"]).arg(&dsc).arg(&tree);
    process::output(&mut unpack).map_err(|error| fail(step, format!("{error}")))?;
    let include = aio.join("usr/include");
    let lib = aio.join("usr/lib/x86_64-linux-gnu");
    let mut configure = Command::new("./configure");
    configure
        .args(["--build-static", "--disable-native"])
        .arg(format!("--extra-cflags=-I{} -g0", include.display()))
        .env("LIBRARY_PATH", &lib)
        .current_dir(&tree);
    process::output(&mut configure).map_err(|error| fail(step, format!("{error}")))?;
    let config = std::fs::read_to_string(tree.join("config-host.h")).unwrap_or_default();
    if !config.contains("CONFIG_LIBAIO") {
        return Err(fail(
            step,
            "fio's configure found no libaio (libaio-dev unpacked?)",
        ));
    }
    let mut make = Command::new("make");
    make.args(["-j2", "fio"])
        .env("LIBRARY_PATH", &lib)
        .current_dir(&tree);
    process::output(&mut make).map_err(|error| fail(step, format!("{error}")))?;
    let mut strip = Command::new("strip");
    strip.arg("-o").arg(&built).arg(tree.join("fio"));
    process::output(&mut strip).map_err(|error| fail(step, format!("{error}")))?;
    Ok(built)
}

/// `sp_marker` (`harness/linux/sp_marker.c`): it executes the instruction-count plugin's markers
/// from the Linux guest's user space.
pub fn marker(base: &Path) -> Result<PathBuf> {
    static_program(base, "sp_marker", "harness/linux/sp_marker.c")
}

/// `sp_drain` (`harness/linux/sp_drain.c`): the guest's last step before isa-debug-exit, so that
/// no console output is still in the guest's tty buffer when QEMU ends.
pub fn drain(base: &Path) -> Result<PathBuf> {
    static_program(base, "sp_drain", "harness/linux/sp_drain.c")
}

/// `base/name`, built static with the host's C compiler from `source` (relative to the
/// workspace) when the source is newer than the program.
pub fn static_program(base: &Path, name: &str, source: &str) -> Result<PathBuf> {
    let built = base.join(name);
    let source = workspace::root().join(source);
    let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    if let (Some(built_at), Some(written_at)) = (modified(&built), modified(&source))
        && built_at >= written_at
    {
        return Ok(built);
    }
    let mut gcc = Command::new("gcc");
    gcc.args(["-static", "-O2", "-Wall", "-o"])
        .arg(&built)
        .arg(&source);
    process::output(&mut gcc).map_err(|error| fail(name, format!("{error}")))?;
    Ok(built)
}

/// The compiler the headers' kbuild will call, and whether it is the one Debian built the kernel
/// with (`CONFIG_CC_VERSION_TEXT`, e.g. `gcc-12 (Debian 12.2.0-14+deb12u1) 12.2.0`).
pub(crate) fn compiler_match(kernel: &Kernel) -> (String, bool) {
    let program = if kernel.compiler.starts_with("x86_64-linux-gnu-gcc-12") {
        "x86_64-linux-gnu-gcc-12"
    } else {
        "gcc-12"
    };
    let host = Command::new(program)
        .arg("--version")
        .output()
        .ok()
        .map(|out| {
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .to_owned()
        })
        .unwrap_or_default();
    let same = !host.is_empty() && host == kernel.compiler;
    (host, same)
}

/// `kernel`'s header tree, downloaded and unpacked under `base` once, with its Makefile
/// pointed at the unpacked common tree.
fn headers_tree(apt: &Apt, kernel: &Kernel, base: &Path) -> Result<PathBuf> {
    let headers = format!("linux-headers-{}", kernel.abi);
    let mut packages = vec![headers.clone()];
    packages.extend(
        apt.depends(&headers)?
            .into_iter()
            .filter(|name| name.starts_with("linux-headers-") || name.starts_with("linux-kbuild-")),
    );
    let root = base.join("headers").join(kernel.release.label());
    let tree = root.join("usr/src").join(&headers);
    if tree.join("Module.symvers").is_file() {
        return Ok(tree);
    }
    let debs = apt.download(&packages, &base.join("debs"))?;
    for deb in &debs {
        apt::unpack(deb, &root)?;
    }
    // The package's Makefile includes the common tree by its installed, absolute path.
    let makefile = tree.join("Makefile");
    let text = std::fs::read_to_string(&makefile).map_err(|source| Error::Read {
        path: makefile.clone(),
        source,
    })?;
    let local = format!("include {}/usr/src/", root.display());
    std::fs::write(&makefile, text.replace("include /usr/src/", &local)).map_err(|source| {
        Error::Write {
            path: makefile.clone(),
            source,
        }
    })?;
    Ok(tree)
}

/// An out-of-tree module of ours for the stock kernels, in `harness/linux/<name>/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GuestModule {
    /// `sp_dmapool`: the mpt3sas chain-pool pattern on dmapool (case `dmapool`).
    Dmapool,
    /// `sp_sense`: the 2008 sense-buffer experiment on SLUB and mempool (case `sense`).
    Sense,
}

impl GuestModule {
    /// Every module, in build order.
    pub(crate) const ALL: [GuestModule; 2] = [GuestModule::Dmapool, GuestModule::Sense];

    /// The module's name: its folder, source file stem and `.ko` stem.
    pub(crate) fn name(self) -> &'static str {
        match self {
            GuestModule::Dmapool => "sp_dmapool",
            GuestModule::Sense => "sp_sense",
        }
    }

    /// The guest case that loads it (`init.sh` reads `/etc/sp/<case>.missing` without it).
    pub(crate) fn case(self) -> &'static str {
        match self {
            GuestModule::Dmapool => "dmapool",
            GuestModule::Sense => "sense",
        }
    }
}

/// Builds `harness/linux/<module>` against `kernel`'s headers (downloaded and unpacked once)
/// and returns the `.ko`, or why it cannot be had (then its case is skipped with the reason).
pub(crate) fn build_module(
    apt: &Apt,
    kernel: &Kernel,
    base: &Path,
    module: GuestModule,
) -> Result<PathBuf> {
    let name = module.name();
    let step = format!("{name} for Linux {}", kernel.release.label());
    let fail = |reason: String| fail(&step, reason);
    let (host_compiler, same) = compiler_match(kernel);
    if !same {
        return Err(fail(format!(
            "the kernel was built with `{}` but this host has `{host_compiler}`",
            kernel.compiler
        )));
    }
    let tree = headers_tree(apt, kernel, base)?;
    let build = base.join("module").join(kernel.release.label()).join(name);
    let _ = std::fs::remove_dir_all(&build);
    mkdir(&build)?;
    let source = workspace::root().join("harness/linux").join(name);
    for file in [format!("{name}.c"), "Kbuild".into()] {
        std::fs::copy(source.join(&file), build.join(&file)).map_err(|source| Error::Write {
            path: build.join(&file),
            source,
        })?;
    }
    let mut make = Command::new("make");
    make.arg("-C")
        .arg(&tree)
        .arg(format!("M={}", build.display()))
        // Module BTF needs pahole and the kernel's vmlinux; the benchmark needs neither.
        .arg("CONFIG_DEBUG_INFO_BTF_MODULES=")
        .arg("modules");
    process::output(&mut make).map_err(|error| fail(format!("{error}")))?;
    let built = build.join(format!("{name}.ko"));
    built
        .is_file()
        .then_some(built)
        .ok_or_else(|| fail(format!("make left no {name}.ko")))
}
