//! The Linux side: Debian's 6.12 kernel (the one `bench linux` uses, cached under
//! `target/linux/`) with an initramfs of its own: busybox, `sg_cdb` built static from
//! `harness/linux/scsi-conformance/sg_cdb.c`, scsi_mod, sg and scsi_debug with their
//! dependencies, `harness/linux/scsi-conformance/init.sh` as `/init`, and one script per
//! scenario. One boot runs every scenario (a module load each).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::scenarios::Scenario;
use super::script;
use harness::accel::Accel;
use harness::boot::{self, Echo, Outcome};
use harness::error::{Error, Result};
use harness::linux::cpio::Archive;
use harness::linux::kernel::{self, Kernel};
use harness::linux::{Release, apt, tools};
use harness::qemu::Machine;
use harness::{profile, workspace};

/// `scsi_mod`'s `dev_flags`: BLIST_NO_RSOC (bit 29, `include/scsi/scsi_devinfo.h`) for
/// scsi_debug, so the scan sends no REPORT SUPPORTED OPERATION CODES: that command does not
/// skip unit attentions, and would take the power-on one before our first command.
pub const SCSI_MOD_PARAMS: &str = "dev_flags=Linux:scsi_debug:0x20000000";

/// The scsi_debug parameters Linux gets on `insmod` and those it gets through sysfs after the
/// scan (`every_nth`, `opts`: the scan's commands would count towards every_nth, or be
/// injected), each as `key value`.
pub fn split_params(params: &str) -> (String, Vec<(String, String)>) {
    let mut insmod = vec!["no_uld=1".to_owned()];
    let mut sysfs = Vec::new();
    for word in params.split_whitespace() {
        match word.split_once('=') {
            Some((key @ ("every_nth" | "opts"), value)) => {
                sysfs.push((key.to_owned(), value.to_owned()))
            }
            _ => insmod.push(word.to_owned()),
        }
    }
    // opts first: writing every_nth last restarts the count.
    sysfs.sort_by_key(|(key, _)| key != "opts");
    (insmod.join(" "), sysfs)
}

/// Fetches the 6.12 kernel and busybox (cached) and builds the initramfs for `scenarios`.
pub fn prepare(scenarios: &[Scenario]) -> Result<(Kernel, PathBuf)> {
    let base = harness::linux::base()?;
    let apt = apt::Apt::prepare(&base.join("apt"))?;
    let busybox = tools::busybox(&apt, &base)?;
    let kernel = Kernel::fetch(&apt, Release::Backports, &base)?;
    let sg_cdb = tools::static_program(&base, "sg_cdb", "harness/linux/scsi-conformance/sg_cdb.c")?;
    let drain = tools::drain(&base)?;
    let initramfs = initramfs(&kernel, &busybox, &[&sg_cdb, &drain], scenarios, &base)?;
    Ok((kernel, initramfs))
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn initramfs(
    kernel: &Kernel,
    busybox: &Path,
    programs: &[&Path],
    scenarios: &[Scenario],
    base: &Path,
) -> Result<PathBuf> {
    let mut archive = Archive::default();
    for dir in [
        "/bin",
        "/dev",
        "/etc",
        "/etc/sgc",
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
    archive.file("/bin/busybox", 0o755, &read(busybox)?);
    archive.symlink("/bin/sh", "busybox");
    for program in programs {
        let name = program.file_name().unwrap_or_default().to_string_lossy();
        archive.file(&format!("/bin/{name}"), 0o755, &read(program)?);
    }
    let init = workspace::root().join("harness/linux/scsi-conformance/init.sh");
    archive.file("/init", 0o755, &read(&init)?);
    // scsi_mod first (its dev_flags must be set before scsi_debug's scan), scsi_debug last
    // (loaded per scenario).
    let mut order = String::new();
    for path in kernel.module_closure(&["scsi_mod", "sg", "scsi_debug"])? {
        let file_name = path.file_name().unwrap_or_default().to_string_lossy();
        let name = format!("{}.ko", kernel::module_name(&file_name));
        archive.file(
            &format!("/lib/modules/{name}"),
            0o644,
            &kernel::read_module(&path)?,
        );
        if name != "scsi_debug.ko" {
            order.push_str(&name);
            order.push('\n');
        }
    }
    archive.file("/etc/sgc/modules", 0o644, order.as_bytes());
    archive.file(
        "/etc/sgc/scsi_mod.params",
        0o644,
        SCSI_MOD_PARAMS.as_bytes(),
    );
    let mut names = String::new();
    for scenario in scenarios {
        let (insmod, sysfs) = split_params(scenario.params);
        let sysfs: String = sysfs.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
        let file = |suffix: &str| format!("/etc/sgc/{}.{suffix}", scenario.name);
        archive.file(&file("insmod"), 0o644, insmod.as_bytes());
        archive.file(&file("sysfs"), 0o644, sysfs.as_bytes());
        archive.file(&file("luns"), 0o644, scenario.luns.to_string().as_bytes());
        if scenario.well_known {
            archive.file(&file("wlun"), 0o644, b"");
        }
        archive.file(
            &file("script"),
            0o644,
            script::render(&scenario.steps).as_bytes(),
        );
        names.push_str(scenario.name);
        names.push('\n');
    }
    archive.file("/etc/sgc/scenarios", 0o644, names.as_bytes());
    let path = base.join("initramfs-scsi-conformance.cpio");
    std::fs::write(&path, archive.finish()).map_err(|source| Error::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// Boots the kernel with the initramfs on the default machine (1 vCPU) and returns the run.
pub fn boot(kernel: &Kernel, initramfs: &Path, accel: Accel, timeout: Duration) -> Result<Outcome> {
    let mut profile = profile::load("default")?;
    profile.args.push("-initrd".into());
    profile.args.push(initramfs.to_string_lossy().into_owned());
    let machine = Machine {
        profile: &profile,
        kernel: &kernel.vmlinuz,
        initrd: None,
        cmdline: "console=ttyS0 quiet loglevel=1 panic=-1".into(),
        accel,
        smp: 1,
        memory_mb: profile.memory_mb.max(512),
        images_dir: workspace::output_dir("images")?,
        counting: None,
        blkdebug: None,
        keep_images: false,
        fw_cfg_files: Vec::new(),
    };
    boot::boot(&machine, timeout, Echo::Quiet)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_nth_and_opts_go_through_sysfs_opts_first() {
        let (insmod, sysfs) = split_params("every_nth=3 dsense=1 opts=8");
        assert_eq!(insmod, "no_uld=1 dsense=1");
        assert_eq!(
            sysfs,
            [
                ("opts".to_owned(), "8".to_owned()),
                ("every_nth".to_owned(), "3".to_owned())
            ]
        );
        assert_eq!(split_params("").0, "no_uld=1");
    }
}
