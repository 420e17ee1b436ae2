//! The one place that builds QEMU command lines (`qemu-system-x86_64` and `qemu-img`).
//!
//! A boot is a profile (devices, disks, extra options) plus what the user chose (accelerator,
//! vCPUs, memory, kernel arguments). The fixed part is the contract with the kernel:
//!
//! - `-kernel <elf>`: QEMU loads the ELF through its Xen PVH note; the command line from `-append`
//!   reaches the guest through `hvm_start_info`.
//! - `-serial stdio`: COM1 is the console xtask reads; stdin is `/dev/null`, so no terminal is needed.
//! - `-device isa-debug-exit,iobase=0xf4,iosize=0x04`: the guest writes 0x10 (success) or 0x11
//!   (failure), which QEMU turns into exit status `(v << 1) | 1` = 33 or 35. Any other status
//!   (0 after a triple fault with `-no-reboot`, 1 for a QEMU error, a signal) is a crash.
//! - `-nic none` unless the profile adds a NIC: QEMU's default e1000 would only add noise to PCI.
//!   A profile's NIC (`-nic` syntax, `TYPE,model=DEVICE,...`) becomes `-netdev TYPE,id=nic0,...`
//!   plus `-device DEVICE,netdev=nic0`: QEMU 7.2's pc machine builds `-nic` NICs before MSI is
//!   usable, so a `-nic` virtio-net-pci has `vectors = 0` (no MSI-X; `info qtree`), while the
//!   same device from `-device` has 4 and can wake the idle guest. For Hermit (a boot with an
//!   `-initrd` application) a virtio-net-pci NIC gets `disable-legacy=on`: Hermit drives only
//!   modern virtio devices.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::accel::Accel;
use crate::error::{Error, Result};
use crate::image_lock;
use crate::insns::Counting;
use crate::process;
use crate::profile::{Disk, DiskFormat, Profile};

/// What QEMU does on a host write error to a guest disk: report it to the guest, which sees a
/// SCSI error (a full host file system as DATA PROTECT, SPACE ALLOCATION FAILED WRITE PROTECT,
/// 27h/07h) and reports it to its client. QEMU's default, `enospc`, would stop the whole guest
/// on a full disk instead, and every client would wait for its timeout. Boot disks and
/// hot-plugged ones (`Qmp::plug_scsi_hd`) both take it.
pub(crate) const WRITE_ERRORS: &str = "report";
/// What QEMU does on a host read error to a guest disk: report it, as [`WRITE_ERRORS`].
pub(crate) const READ_ERRORS: &str = "report";

/// A port forward of QEMU user networking, as a `-nic` option: host `host` to the guest's
/// `guest_port`.
fn forward(host: SocketAddr, guest_port: u16) -> String {
    format!("hostfwd=tcp:{host}-:{guest_port}")
}

/// The start of the forward option that listens on `host` (to find the QEMU process that
/// forwards it by its command line).
pub(crate) fn forward_from(host: SocketAddr) -> String {
    format!("hostfwd=tcp:{host}-:")
}

/// The guest port of a `hostfwd=tcp:127.0.0.1:HOST-:GUEST` option and its host port, or `None`
/// for any other option.
fn loopback_forward(option: &str) -> Option<(u16, u16)> {
    let (host, guest) = option
        .strip_prefix("hostfwd=tcp:127.0.0.1:")?
        .split_once("-:")?;
    Some((guest.parse().ok()?, host.parse().ok()?))
}

/// The host port `nic` (a profile's `-nic` options) forwards from 127.0.0.1 to `guest_port`;
/// an error names the guest port when there is none.
pub(crate) fn forwarded_host_port(nic: &str, guest_port: u16) -> Result<u16> {
    nic.split(',')
        .filter_map(loopback_forward)
        .find(|(guest, _)| *guest == guest_port)
        .map(|(_, host)| host)
        .ok_or_else(|| missing_forward(nic, guest_port))
}

fn missing_forward(nic: &str, guest_port: u16) -> Error {
    Error::Invalid {
        path: "the profile's nic".into(),
        field: format!("hostfwd to guest port {guest_port}"),
        value: nic.into(),
        reason: "missing: it must forward 127.0.0.1 to that port",
    }
}

/// `nic` (a profile's `-nic` options) with each loopback forward to a guest port of `moves`
/// moved to its new host address; an error names a guest port `nic` does not forward.
pub(crate) fn move_forwards(nic: &str, moves: &[(u16, SocketAddr)]) -> Result<String> {
    let mut found = vec![false; moves.len()];
    let parts: Vec<String> = nic
        .split(',')
        .map(|part| {
            let guest = loopback_forward(part).map(|(guest, _)| guest);
            let moved = moves.iter().position(|(from, _)| Some(*from) == guest);
            match moved {
                Some(index) => {
                    found[index] = true;
                    let (guest, host) = moves[index];
                    forward(host, guest)
                }
                None => part.to_owned(),
            }
        })
        .collect();
    if let Some(index) = found.iter().position(|found| !found) {
        return Err(missing_forward(nic, moves[index].0));
    }
    Ok(parts.join(","))
}

/// `-nic TYPE,model=DEVICE,REST` as its `-netdev TYPE,id=nic0,REST` and `-device DEVICE,
/// netdev=nic0` pair (see the module comment); `None` for a NIC without a model (left to `-nic`).
fn nic_as_device(nic: &str) -> Option<[String; 2]> {
    let (backend, options) = nic.split_once(',')?;
    let mut model = None;
    let rest: Vec<&str> = options
        .split(',')
        .filter(|option| match option.strip_prefix("model=") {
            Some(name) => {
                model = Some(name);
                false
            }
            None => true,
        })
        .collect();
    let model = model?;
    let mut netdev = format!("{backend},id=nic0");
    for option in rest {
        netdev.push(',');
        netdev.push_str(option);
    }
    Some([netdev, format!("{model},netdev=nic0")])
}

/// QEMU's exit status when the guest wrote 0x10 to the debug-exit port.
pub(crate) const EXIT_SUCCESS: i32 = (0x10 << 1) | 1;
/// QEMU's exit status when the guest wrote 0x11 to the debug-exit port.
pub(crate) const EXIT_FAILURE: i32 = (0x11 << 1) | 1;

/// The QMP socket of a profile with `qmp = true`, beside its disk images. The name carries
/// xtask's process id, so two runs on one machine do not share a monitor; the test that boots the
/// machine finds it with the same call.
pub fn qmp_socket(images_dir: &Path, profile: &str) -> PathBuf {
    images_dir.join(format!("{profile}-qmp-{}.sock", std::process::id()))
}

/// A disk image file created for a boot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskImage {
    /// The profile's `[[disk]] name`.
    pub disk: String,
    /// `raw` or `qcow2`.
    pub format: &'static str,
    pub path: PathBuf,
}

/// A disk behind `blkdebug`: `disk` is the profile's `[[disk]] name`, `config` the rules file.
#[derive(Clone, Debug)]
pub struct Blkdebug {
    pub disk: String,
    pub config: PathBuf,
}

/// Everything that decides one QEMU invocation.
#[derive(Clone, Debug)]
pub struct Machine<'a> {
    pub profile: &'a Profile,
    pub kernel: &'a Path,
    /// A PVH module for the kernel (`-initrd`): the Hermit application the loader boots.
    pub initrd: Option<&'a Path>,
    /// The full kernel command line.
    pub cmdline: String,
    pub accel: Accel,
    pub smp: u32,
    pub memory_mb: u32,
    /// Where disk images are created.
    pub images_dir: PathBuf,
    /// A disk to put behind `blkdebug`.
    pub blkdebug: Option<&'a Blkdebug>,
    /// Keep existing image files (a restart) instead of creating them afresh.
    pub keep_images: bool,
    /// The instruction-count plugin and its log, when counting.
    pub counting: Option<&'a Counting>,
    /// Files handed to the guest through fw_cfg: (name, host path). QEMU's command line names
    /// only the path, so their contents stay out of `ps`.
    pub fw_cfg_files: Vec<(&'static str, PathBuf)>,
}

impl<'a> Machine<'a> {
    /// The image file for `disk`, or `None` for file-less backends.
    pub fn image_path(&self, disk: &Disk) -> Option<PathBuf> {
        let format = disk.format.image_format()?;
        Some(
            self.images_dir
                .join(format!("{}-{}.{format}", self.profile.name, disk.name)),
        )
    }

    /// Creates every disk image afresh (zeroed) with `qemu-img create`; returns each disk's name
    /// and image path.
    pub(crate) fn create_images(&self) -> Result<Vec<DiskImage>> {
        let mut paths = Vec::new();
        for disk in &self.profile.disks {
            let (Some(path), Some(format)) = (self.image_path(disk), disk.format.image_format())
            else {
                continue;
            };
            let mut command = Command::new("qemu-img");
            command.args(["create", "-q", "-f", format]);
            command.arg(&path).arg(disk.size_bytes.to_string());
            if self.keep_images && path.exists() {
                paths.push(DiskImage {
                    disk: disk.name.clone(),
                    format,
                    path,
                });
                continue;
            }
            if let Err(error) = process::run(&mut command) {
                // The usual cause: a QEMU from a killed run still holds the image's lock.
                if image_lock::holders(&path).is_empty() {
                    return Err(error);
                }
                return Err(Error::ImageLocked {
                    command: process::describe(&command),
                    holders: image_lock::explain(&path),
                });
            }
            paths.push(DiskImage {
                disk: disk.name.clone(),
                format,
                path,
            });
        }
        Ok(paths)
    }

    /// The `qemu-system-x86_64` invocation (stdio is set by the caller).
    pub fn command(&self) -> Command {
        let mut command = Command::new("qemu-system-x86_64");
        command.arg("-kernel").arg(self.kernel);
        if let Some(initrd) = self.initrd {
            command.arg("-initrd").arg(initrd);
        }
        command.args(["-append", &self.cmdline]);
        command.args(["-serial", "stdio", "-display", "none", "-no-reboot"]);
        command.args(["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"]);
        command.args(["-m", &self.memory_mb.to_string()]);
        command.args(["-smp", &self.smp.to_string()]);
        command.args(["-accel", &self.accel_option()]);
        if let Some(cpu) = self.cpu_model() {
            command.args(["-cpu", cpu]);
        }
        match self.profile.nic.as_deref().and_then(nic_as_device) {
            Some([netdev, mut device]) => {
                // Hermit drives virtio-net only as a modern device (ids from 0x1040); QEMU's
                // virtio-net-pci is transitional (0x1000) unless told otherwise.
                if self.initrd.is_some() && device.starts_with("virtio-net-pci,") {
                    device.push_str(",disable-legacy=on");
                }
                command.args(["-netdev", &netdev, "-device", &device]);
            }
            None => {
                command.args(["-nic", self.profile.nic.as_deref().unwrap_or("none")]);
            }
        }
        for device in &self.profile.devices {
            command.args(["-device", &self.device_option(device)]);
        }
        for disk in &self.profile.disks {
            self.add_disk(&mut command, disk);
        }
        command.args(&self.profile.args);
        for (name, path) in &self.fw_cfg_files {
            let path = path.to_string_lossy().replace(',', ",,");
            command.args(["-fw_cfg", &format!("name={name},file={path}")]);
        }
        if let Some(counting) = self.counting {
            command.args(counting.qemu_args());
        }
        if self.profile.qmp {
            let socket = qmp_socket(&self.images_dir, &self.profile.name);
            command.args([
                "-qmp",
                &format!("unix:{},server=on,wait=off", socket.display()),
            ]);
        }
        command
    }

    /// A profile's `-device` value, with what follows from the machine: a virtio-scsi
    /// adapter gets one request queue per vCPU (`num_queues`, what Linux's virtio_scsi and
    /// the guest's multi-queue driver use; QEMU 7.2's default is the same, made explicit here
    /// so `--smp` and the device never disagree), unless the profile sets it.
    fn device_option(&self, device: &str) -> String {
        let driver = device.split(',').next().unwrap_or_default();
        if driver == "virtio-scsi-pci" && !device.contains("num_queues=") {
            format!("{device},num_queues={}", self.smp)
        } else {
            device.to_string()
        }
    }

    fn accel_option(&self) -> String {
        match self.accel {
            Accel::Kvm => "kvm".into(),
            // Multi-threaded TCG runs each vCPU on its own host thread.
            Accel::Tcg if self.smp > 1 => "tcg,thread=multi".into(),
            Accel::Tcg => "tcg".into(),
        }
    }

    fn cpu_model(&self) -> Option<&str> {
        match (&self.profile.cpu, self.accel) {
            (Some(cpu), _) => Some(cpu),
            (None, Accel::Kvm) => Some("host"),
            (None, Accel::Tcg) => None,
        }
    }

    fn add_disk(&self, command: &mut Command, disk: &Disk) {
        match (disk.format, self.image_path(disk)) {
            (DiskFormat::NullCo, _) | (_, None) => {
                command.args([
                    "-blockdev",
                    &format!(
                        "driver=null-co,node-name={},size={},read-zeroes=on{}",
                        disk.name,
                        disk.size_bytes,
                        disk.latency_ns
                            .map_or(String::new(), |ns| format!(",latency-ns={ns}"))
                    ),
                ]);
            }
            (format, Some(path)) => {
                // Raw images see every write at once (QEMU writes straight to the file). qcow2
                // metadata sits in QEMU's cache until the guest flushes (SYNCHRONIZE CACHE),
                // because isa-debug-exit ends QEMU without closing its block devices.
                let file = path.to_string_lossy().replace(',', ",,");
                let format = format.image_format().unwrap_or("raw");
                let errors = format!("werror={WRITE_ERRORS},rerror={READ_ERRORS}");
                let drive = match self.blkdebug.filter(|b| b.disk == disk.name) {
                    // The format driver on top of blkdebug, so blkdebug sees its read_aio and
                    // write_aio events (with blkdebug on top, the format driver emits them below
                    // it and blkdebug never sees them).
                    Some(blkdebug) => format!(
                        "if=none,id={},driver={format},{errors},file.driver=blkdebug,file.config={},file.image.driver=file,file.image.filename={file}",
                        disk.name,
                        blkdebug.config.to_string_lossy().replace(',', ",,")
                    ),
                    None => format!(
                        "if=none,id={},format={format},{errors},file={file}",
                        disk.name
                    ),
                };
                command.args(["-drive", &drive]);
            }
        }
        // The disk's name is its unit serial number (VPD page 80h) unless the profile sets one,
        // so the guest can say which image a disk is (`VERIFY-PLAN` lines name it).
        let serial = if disk.device.contains("serial=") {
            String::new()
        } else {
            format!(",serial={}", disk.name)
        };
        command.args([
            "-device",
            &format!("{},drive={}{serial}", disk.device, disk.name),
        ]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(text: &str) -> Profile {
        crate::profile::parse("p", text, Path::new("p.toml")).unwrap()
    }

    fn args(machine: &Machine) -> Vec<String> {
        let command = machine.command();
        command
            .get_args()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect()
    }

    fn machine<'a>(profile: &'a Profile, accel: Accel, smp: u32) -> Machine<'a> {
        Machine {
            profile,
            kernel: Path::new("/k/kernel"),
            initrd: None,
            cmdline: "workload=dmapool n=10".into(),
            accel,
            smp,
            memory_mb: 128,
            images_dir: PathBuf::from("/img"),
            counting: None,
            blkdebug: None,
            keep_images: false,
            fw_cfg_files: Vec::new(),
        }
    }

    #[test]
    fn a_blkdebug_disk_puts_the_format_driver_over_blkdebug() {
        let profile = profile(
            "description = \"d\"\n[[disk]]\nname = \"disk0\"\nsize = \"1M\"\nformat = \"raw\"\ndevice = \"scsi-hd\"\n",
        );
        let blkdebug = Blkdebug {
            disk: "disk0".into(),
            config: PathBuf::from("/img/rules.conf"),
        };
        let mut with = machine(&profile, Accel::Tcg, 1);
        with.blkdebug = Some(&blkdebug);
        assert!(has_pair(
            &args(&with),
            "-drive",
            "if=none,id=disk0,driver=raw,werror=report,rerror=report,file.driver=blkdebug,file.config=/img/rules.conf,file.image.driver=file,file.image.filename=/img/p-disk0.raw"
        ));
    }

    fn has_pair(args: &[String], flag: &str, value: &str) -> bool {
        args.windows(2)
            .any(|pair| pair[0] == flag && pair[1] == value)
    }

    #[test]
    fn an_initrd_is_passed_for_the_hermit_loader() {
        let profile = profile("");
        let mut machine = machine(&profile, Accel::Tcg, 1);
        machine.initrd = Some(Path::new("/h/app"));
        assert!(has_pair(&args(&machine), "-initrd", "/h/app"));
    }

    #[test]
    fn contract_options_are_present() {
        let profile = profile("");
        let args = args(&machine(&profile, Accel::Tcg, 1));
        assert!(has_pair(&args, "-kernel", "/k/kernel"));
        assert!(has_pair(&args, "-append", "workload=dmapool n=10"));
        assert!(!args.iter().any(|arg| arg == "-initrd"));
        assert!(has_pair(&args, "-serial", "stdio"));
        assert!(has_pair(
            &args,
            "-device",
            "isa-debug-exit,iobase=0xf4,iosize=0x04"
        ));
        assert!(has_pair(&args, "-accel", "tcg"));
        assert!(has_pair(&args, "-nic", "none"));
        assert!(has_pair(&args, "-m", "128"));
        assert!(args.iter().any(|arg| arg == "-no-reboot"));
        assert!(!args.iter().any(|arg| arg == "-cpu"));
    }

    #[test]
    fn fw_cfg_files_are_named_by_path_only() {
        let profile = profile("description = \"d\"\n");
        let mut machine = machine(&profile, Accel::Tcg, 1);
        machine.fw_cfg_files = vec![("opt/sensepool/x", PathBuf::from("/t/a,b"))];
        let args = args(&machine);
        assert!(has_pair(
            &args,
            "-fw_cfg",
            "name=opt/sensepool/x,file=/t/a,,b"
        ));
    }

    #[test]
    fn a_nic_with_a_model_becomes_netdev_and_device() {
        let nic = profile(
            r#"nic = "user,model=virtio-net-pci,hostfwd=tcp:127.0.0.1:1-:2,hostfwd=tcp:127.0.0.1:3-:4""#,
        );
        let args = args(&machine(&nic, Accel::Tcg, 1));
        assert!(has_pair(
            &args,
            "-netdev",
            "user,id=nic0,hostfwd=tcp:127.0.0.1:1-:2,hostfwd=tcp:127.0.0.1:3-:4"
        ));
        assert!(has_pair(&args, "-device", "virtio-net-pci,netdev=nic0"));
        assert!(!args.iter().any(|arg| arg == "-nic"));
        assert_eq!(nic_as_device("user"), None);
        assert_eq!(nic_as_device("user,hostfwd=x"), None);
    }

    #[test]
    fn hermit_gets_a_modern_only_virtio_nic() {
        let nic = profile(r#"nic = "user,model=virtio-net-pci,hostfwd=tcp:127.0.0.1:1-:2""#);
        let mut machine = machine(&nic, Accel::Tcg, 1);
        machine.initrd = Some(Path::new("/h/app"));
        let args = args(&machine);
        assert!(has_pair(
            &args,
            "-device",
            "virtio-net-pci,netdev=nic0,disable-legacy=on"
        ));
    }

    #[test]
    fn qmp_profiles_get_a_monitor_socket_beside_the_images() {
        let plain = args(&machine(&profile(""), Accel::Tcg, 1));
        assert!(!plain.iter().any(|arg| arg == "-qmp"));
        let with_qmp = profile("qmp = true");
        let socket = qmp_socket(Path::new("/img"), "p");
        assert!(has_pair(
            &args(&machine(&with_qmp, Accel::Tcg, 1)),
            "-qmp",
            &format!("unix:{},server=on,wait=off", socket.display())
        ));
        assert!(socket.starts_with("/img"));
    }

    #[test]
    fn smp_tcg_is_multithreaded_and_kvm_uses_host_cpu() {
        let profile = profile("");
        assert!(has_pair(
            &args(&machine(&profile, Accel::Tcg, 2)),
            "-accel",
            "tcg,thread=multi"
        ));
        let kvm = args(&machine(&profile, Accel::Kvm, 2));
        assert!(has_pair(&kvm, "-accel", "kvm"));
        assert!(has_pair(&kvm, "-cpu", "host"));
    }

    #[test]
    fn virtio_scsi_gets_a_request_queue_per_vcpu_unless_the_profile_says() {
        let both = profile(r#"devices = ["virtio-scsi-pci,id=scsi0", "mptsas1068,id=mpt0"]"#);
        let args2 = args(&machine(&both, Accel::Tcg, 2));
        assert!(has_pair(
            &args2,
            "-device",
            "virtio-scsi-pci,id=scsi0,num_queues=2"
        ));
        assert!(has_pair(&args2, "-device", "mptsas1068,id=mpt0"));
        let fixed = profile(r#"devices = ["virtio-scsi-pci,id=scsi0,num_queues=1"]"#);
        assert!(has_pair(
            &args(&machine(&fixed, Accel::Tcg, 2)),
            "-device",
            "virtio-scsi-pci,id=scsi0,num_queues=1"
        ));
    }

    #[test]
    fn disks_become_drives_with_their_devices() {
        let profile = profile(
            r#"
            devices = ["virtio-scsi-pci,id=scsi0"]
            [[disk]]
            name = "disk0"
            size = "1M"
            device = "scsi-hd,bus=scsi0.0,scsi-id=0"
            [[disk]]
            name = "null0"
            size = "1G"
            format = "null-co"
            device = "scsi-hd,bus=scsi0.0,scsi-id=1"
            "#,
        );
        let machine = machine(&profile, Accel::Tcg, 1);
        let args = args(&machine);
        assert!(has_pair(
            &args,
            "-device",
            "virtio-scsi-pci,id=scsi0,num_queues=1"
        ));
        assert!(has_pair(
            &args,
            "-drive",
            "if=none,id=disk0,format=raw,werror=report,rerror=report,file=/img/p-disk0.raw"
        ));
        assert!(has_pair(
            &args,
            "-device",
            "scsi-hd,bus=scsi0.0,scsi-id=0,drive=disk0,serial=disk0"
        ));
        assert!(has_pair(
            &args,
            "-blockdev",
            "driver=null-co,node-name=null0,size=1073741824,read-zeroes=on"
        ));
        assert_eq!(machine.image_path(&profile.disks[1]), None);
    }
}
