//! The initramfs of one stock kernel: busybox, the static fio, the modules each target needs
//! (decompressed, in load order), the `sp_dmapool` module when it could be built, and
//! `harness/linux/init.sh` as `/init`. Written as an uncompressed newc cpio to
//! `target/linux/initramfs-<label>.cpio`.

use std::path::{Path, PathBuf};

use super::cpio::Archive;
use super::kernel::{self, Kernel};
use super::tools::GuestModule;
use crate::error::{Error, Result};
use crate::workspace;

/// The guest's targets and the modules each one loads (dependencies are added).
pub const TARGETS: [(&str, &[&str]); 2] = [
    ("scsi_debug", &["scsi_debug", "sd_mod"]),
    ("virtio", &["virtio_pci", "virtio_scsi", "sd_mod"]),
];

/// What goes in besides the kernel's modules.
pub(crate) struct Contents<'a> {
    pub busybox: &'a Path,
    pub fio: &'a Path,
    /// `sp_marker`, for counted boots.
    pub marker: &'a Path,
    /// `sp_drain`, run before the guest leaves.
    pub drain: &'a Path,
    /// Each of our modules: built, or why there is none (the guest prints it for the module's
    /// case).
    pub modules: Vec<(GuestModule, Module)>,
}

/// An out-of-tree module for the guest: built, or the reason it could not be.
#[derive(Clone, Debug)]
pub(crate) enum Module {
    Built(PathBuf),
    Missing { reason: String },
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Our modules: each one built as `/lib/modules/<name>.ko`, or the reason it is missing as
/// `/etc/sp/<case>.missing` (the guest prints it for the module's case).
fn add_ours(archive: &mut Archive, modules: &[(GuestModule, Module)]) -> Result<()> {
    for (which, module) in modules {
        match module {
            Module::Built(path) => archive.file(
                &format!("/lib/modules/{}.ko", which.name()),
                0o644,
                &read(path)?,
            ),
            Module::Missing { reason } => archive.file(
                &format!("/etc/sp/{}.missing", which.case()),
                0o644,
                reason.as_bytes(),
            ),
        }
    }
    Ok(())
}

/// Builds the archive and returns its path.
pub fn build(kernel: &Kernel, contents: &Contents<'_>, base: &Path) -> Result<PathBuf> {
    let mut archive = Archive::default();
    for dir in [
        "/bin",
        "/dev",
        "/etc",
        "/etc/sp",
        "/lib",
        "/lib/modules",
        "/proc",
        "/sys",
        "/tmp",
    ] {
        archive.dir(dir);
    }
    archive.char_device("/dev/console", 0o600, 5, 1);
    archive.char_device("/dev/null", 0o666, 1, 3);
    archive.file("/bin/busybox", 0o755, &read(contents.busybox)?);
    archive.symlink("/bin/sh", "busybox");
    archive.file("/bin/fio", 0o755, &read(contents.fio)?);
    archive.file("/bin/sp_marker", 0o755, &read(contents.marker)?);
    archive.file("/bin/sp_drain", 0o755, &read(contents.drain)?);
    let init = workspace::root().join("harness/linux/init.sh");
    archive.file("/init", 0o755, &read(&init)?);
    let mut added: Vec<String> = Vec::new();
    for (target, modules) in TARGETS {
        let files = kernel.module_closure(modules)?;
        let mut list = String::new();
        for path in files {
            let file_name = path.file_name().unwrap_or_default().to_string_lossy();
            let name = format!("{}.ko", kernel::module_name(&file_name));
            if !added.contains(&name) {
                archive.file(
                    &format!("/lib/modules/{name}"),
                    0o644,
                    &kernel::read_module(&path)?,
                );
                added.push(name.clone());
            }
            list.push_str(&name);
            list.push('\n');
        }
        archive.file(&format!("/etc/sp/{target}.modules"), 0o644, list.as_bytes());
    }
    add_ours(&mut archive, &contents.modules)?;
    let path = base.join(format!("initramfs-{}.cpio", kernel.release.label()));
    std::fs::write(&path, archive.finish()).map_err(|source| Error::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}
