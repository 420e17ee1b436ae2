//! QEMU machine profiles: small TOML files in `qemu/` that declare a machine (memory, vCPUs,
//! devices, disks) and the kernel command line it boots with. xtask reads them; the QEMU command
//! line itself is built in one place, [`crate::qemu`].
//!
//! ```toml
//! description = "two virtio-scsi targets"
//! memory_mb = 256
//! smp = 1
//! timeout_secs = 60
//! kernel_args = ""                    # always passed
//! default_kernel_args = "workload=…"  # replaced by `cargo xtask run -- ARGS`
//! devices = ["virtio-scsi-pci,id=scsi0"]
//! args = []                           # other QEMU options, e.g. ["-numa", "node,nodeid=0"]
//! qmp = false                         # a QMP socket target/images/<profile>-qmp-<pid>.sock
//!
//! [[disk]]
//! name = "disk0"                      # image file target/images/<profile>-disk0.raw, drive id disk0
//! size = "64M"
//! format = "raw"                      # raw | qcow2 | null-co (no file; reads return zeroes)
//! latency_ns = 10500000               # null-co only: each request completes this late
//! device = "scsi-hd,bus=scsi0.0,scsi-id=0"   # `,drive=disk0` is appended
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::workspace;

/// A parsed, validated profile.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Filled from the file name, not the file.
    #[serde(skip)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "default_memory_mb")]
    pub memory_mb: u32,
    #[serde(default = "default_smp")]
    pub smp: u32,
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
    /// Kernel arguments every boot of this machine needs.
    #[serde(default)]
    pub kernel_args: String,
    /// Kernel arguments used when the user gives none.
    #[serde(default)]
    pub default_kernel_args: String,
    /// `-cpu` model; none means QEMU's default under TCG and `host` under KVM.
    #[serde(default)]
    pub cpu: Option<String>,
    /// `-nic` value; none means `-nic none`.
    #[serde(default)]
    pub nic: Option<String>,
    /// `-device` values, in order.
    #[serde(default)]
    pub devices: Vec<String>,
    /// Any other QEMU options, passed through verbatim.
    #[serde(default)]
    pub args: Vec<String>,
    /// A QMP monitor on a unix socket ([`crate::qemu::qmp_socket`]), for tests that change the
    /// machine while it runs (hot-plug).
    #[serde(default)]
    pub qmp: bool,
    #[serde(default, rename = "disk")]
    pub disks: Vec<Disk>,
}

/// A disk the profile attaches, created fresh with `qemu-img` before each boot.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Disk {
    /// Drive id and image file stem; letters, digits, `-` and `_`.
    pub name: String,
    /// Size with an optional binary suffix: `64M`, `1G`, `512K`, or plain bytes.
    pub size: String,
    #[serde(default)]
    pub format: DiskFormat,
    /// The `-device` that exposes the drive, without `drive=`.
    pub device: String,
    /// null-co only: QEMU's `latency-ns=`, how late each request completes (a slow device
    /// without a slow host disk).
    #[serde(default)]
    pub latency_ns: Option<u64>,
    /// Size in bytes, from `size`.
    #[serde(skip)]
    pub size_bytes: u64,
}

/// How a disk is backed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DiskFormat {
    #[default]
    Raw,
    Qcow2,
    /// QEMU's null block driver: no image file, reads return zeroes, writes are dropped.
    NullCo,
}

impl DiskFormat {
    /// The qemu-img/-drive format name, or `None` when there is no image file.
    pub(crate) fn image_format(self) -> Option<&'static str> {
        match self {
            DiskFormat::Raw => Some("raw"),
            DiskFormat::Qcow2 => Some("qcow2"),
            DiskFormat::NullCo => None,
        }
    }
}

fn default_memory_mb() -> u32 {
    256
}
fn default_smp() -> u32 {
    1
}
fn default_timeout_secs() -> u64 {
    60
}

/// The folder that holds the profiles.
pub fn dir() -> PathBuf {
    workspace::root().join("qemu")
}

/// Loads `qemu/<name>.toml`.
pub fn load(name: &str) -> Result<Profile> {
    let path = dir().join(format!("{name}.toml"));
    if !valid_name(name) || !path.is_file() {
        return Err(Error::NoProfile {
            name: name.to_owned(),
            path,
            available: available().join(", "),
        });
    }
    let text = std::fs::read_to_string(&path).map_err(|source| Error::Read {
        path: path.clone(),
        source,
    })?;
    parse(name, &text, &path)
}

/// Parses and validates a profile's text; `path` is only used in messages.
pub fn parse(name: &str, text: &str, path: &Path) -> Result<Profile> {
    let mut profile: Profile = toml::from_str(text).map_err(|source| Error::Toml {
        path: path.to_owned(),
        source: Box::new(source),
    })?;
    profile.name = name.to_owned();
    let invalid = |field: &str, value: String, reason| Error::Invalid {
        path: path.to_owned(),
        field: field.to_owned(),
        value,
        reason,
    };
    if profile.memory_mb < 16 {
        return Err(invalid(
            "memory_mb",
            profile.memory_mb.to_string(),
            "must be at least 16",
        ));
    }
    if !(1..=255).contains(&profile.smp) {
        return Err(invalid("smp", profile.smp.to_string(), "must be 1..=255"));
    }
    for disk in &mut profile.disks {
        if !valid_name(&disk.name) {
            return Err(invalid(
                "disk.name",
                disk.name.clone(),
                "use letters, digits, - and _",
            ));
        }
        disk.size_bytes = parse_size(&disk.size).ok_or_else(|| {
            invalid(
                "disk.size",
                disk.size.clone(),
                "expected e.g. 64M, 1G, 4096",
            )
        })?;
        if let Some(latency_ns) = disk.latency_ns
            && disk.format != DiskFormat::NullCo
        {
            return Err(invalid(
                "disk.latency_ns",
                latency_ns.to_string(),
                "only a null-co disk has a latency",
            ));
        }
    }
    let mut names: Vec<&str> = profile
        .disks
        .iter()
        .map(|disk| disk.name.as_str())
        .collect();
    names.sort_unstable();
    if let Some(pair) = names.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(invalid("disk.name", pair[0].to_owned(), "used twice"));
    }
    Ok(profile)
}

/// Names of all profiles in `qemu/`, sorted.
pub(crate) fn available() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let path = entry.path();
            (path.extension()? == "toml").then(|| path.file_stem()?.to_str().map(str::to_owned))?
        })
        .collect();
    names.sort();
    names
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// `64M` → 67108864. Binary suffixes K, M, G, T (optionally followed by `B` or `iB`).
pub(crate) fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(digits_end);
    let number: u64 = digits.parse().ok()?;
    let shift = match suffix.trim_end_matches("iB").trim_end_matches('B') {
        "" => 0,
        "K" | "k" => 10,
        "M" | "m" => 20,
        "G" | "g" => 30,
        "T" | "t" => 40,
        _ => return None,
    };
    number.checked_mul(1u64 << shift).filter(|&bytes| bytes > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("64M"), Some(64 << 20));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("2KiB"), Some(2048));
        assert_eq!(parse_size("0"), None);
        assert_eq!(parse_size("64Q"), None);
        assert_eq!(parse_size("M"), None);
        assert_eq!(parse_size("99999999999T"), None);
    }

    #[test]
    fn profile_with_disks_parses_and_unknown_fields_are_errors() {
        let text = r#"
            memory_mb = 128
            devices = ["virtio-scsi-pci,id=scsi0"]
            [[disk]]
            name = "disk0"
            size = "64M"
            format = "qcow2"
            device = "scsi-hd,bus=scsi0.0"
        "#;
        let profile = parse("t", text, Path::new("t.toml")).unwrap();
        assert_eq!(profile.disks[0].size_bytes, 64 << 20);
        assert_eq!(profile.disks[0].format, DiskFormat::Qcow2);
        assert_eq!(profile.smp, 1);
        assert!(parse("t", "memory = 1", Path::new("t.toml")).is_err());
    }

    #[test]
    fn bad_values_name_the_field() {
        let error = parse("t", "smp = 0", Path::new("t.toml")).unwrap_err();
        assert!(error.to_string().contains("smp"), "{error}");
        let twice =
            "[[disk]]\nname='a'\nsize='1M'\ndevice='x'\n[[disk]]\nname='a'\nsize='1M'\ndevice='y'";
        let error = parse("t", twice, Path::new("t.toml")).unwrap_err();
        assert!(error.to_string().contains("used twice"), "{error}");
    }

    #[test]
    fn every_shipped_profile_parses() {
        let names = available();
        assert!(names.iter().any(|name| name == "default"), "{names:?}");
        for name in names {
            load(&name).unwrap();
        }
    }
}
