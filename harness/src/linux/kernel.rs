//! The stock kernels: Debian's `linux-image-amd64` from bookworm (6.1, the dmapool before the
//! 2023 rewrite) and from bookworm-backports (6.12, after it), unpacked under
//! `target/linux/kernel/<label>/`, and the modules a case needs with their dependencies.
//!
//! The package ships no `modules.dep` (depmod writes it at install time, and nothing is
//! installed here), so dependencies come from each module's own `.modinfo` section
//! (`depends=a,b`), read from the ELF; `.ko.xz` modules (6.12) are decompressed with `xz`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::apt::{self, Apt};
use crate::error::{Error, Result};
use crate::process;

/// Which stock kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Release {
    /// bookworm's 6.1 (pre-6.4 dmapool).
    #[value(name = "6.1")]
    Bookworm,
    /// bookworm-backports' 6.12 (O(1) dmapool).
    #[value(name = "6.12")]
    Backports,
}

impl Release {
    /// The short label used in tables and file names.
    pub fn label(self) -> &'static str {
        match self {
            Release::Bookworm => "6.1",
            Release::Backports => "6.12",
        }
    }

    fn suite(self) -> &'static str {
        match self {
            Release::Bookworm => "bookworm",
            Release::Backports => "bookworm-backports",
        }
    }
}

/// One unpacked stock kernel.
#[derive(Clone, Debug)]
pub struct Kernel {
    pub release: Release,
    /// The ABI name, e.g. `6.1.0-50-amd64`.
    pub abi: String,
    /// The unpacked package root.
    pub root: PathBuf,
    pub vmlinuz: PathBuf,
    /// `CONFIG_CC_VERSION_TEXT`: the compiler Debian built it with.
    pub compiler: String,
    /// The package's `boot/config-<abi>`: how Debian configured it.
    pub config_path: PathBuf,
}

fn fail(step: &str, reason: impl Into<String>) -> Error {
    Error::Linux {
        step: step.to_owned(),
        reason: reason.into(),
    }
}

impl Kernel {
    /// Resolves `linux-image-amd64` in the release's suite, downloads the image package it
    /// depends on (once) and unpacks it (once).
    pub fn fetch(apt: &Apt, release: Release, base: &Path) -> Result<Self> {
        let meta = format!("linux-image-amd64/{}", release.suite());
        let image = apt
            .depends(&meta)?
            .into_iter()
            .find(|name| name.starts_with("linux-image-"))
            .ok_or_else(|| {
                fail(
                    "kernel lookup",
                    format!("{meta} depends on no linux-image-*"),
                )
            })?;
        let abi = image.trim_start_matches("linux-image-").to_owned();
        let debs = apt.download(std::slice::from_ref(&image), &base.join("debs"))?;
        let root = base.join("kernel").join(release.label());
        let vmlinuz = root.join(format!("boot/vmlinuz-{abi}"));
        if !vmlinuz.is_file() {
            let _ = std::fs::remove_dir_all(&root);
            apt::unpack(&debs[0], &root)?;
        }
        if !vmlinuz.is_file() {
            return Err(fail(
                "kernel unpack",
                format!("{image} has no {}", vmlinuz.display()),
            ));
        }
        let config_path = root.join(format!("boot/config-{abi}"));
        let config = std::fs::read_to_string(&config_path).map_err(|source| Error::Read {
            path: config_path.clone(),
            source,
        })?;
        let compiler = config_value(&config, "CONFIG_CC_VERSION_TEXT").unwrap_or_default();
        Ok(Self {
            release,
            abi,
            root,
            vmlinuz,
            compiler,
            config_path,
        })
    }

    /// `key`'s value in Debian's configuration of this kernel (`y`, a number, a string), or
    /// `None` when it is not set (`# CONFIG_X is not set`) or the file cannot be read.
    pub fn config_value(&self, key: &str) -> Option<String> {
        config_value(&std::fs::read_to_string(&self.config_path).ok()?, key)
    }

    /// `lib/modules/<abi>` of the unpacked package.
    pub(crate) fn modules_dir(&self) -> PathBuf {
        self.root.join("lib/modules").join(&self.abi)
    }

    /// The module files for `names` and everything they depend on, dependencies first;
    /// modules built into the kernel are skipped. A name the package lacks is an error.
    pub fn module_closure(&self, names: &[&str]) -> Result<Vec<PathBuf>> {
        let dir = self.modules_dir();
        let builtin = std::fs::read_to_string(dir.join("modules.builtin")).unwrap_or_default();
        let builtin: Vec<String> = builtin
            .lines()
            .filter_map(|line| Some(module_name(Path::new(line).file_name()?.to_str()?)))
            .collect();
        let mut files = BTreeMap::new();
        index_modules(&dir.join("kernel"), &mut files);
        let mut order = Vec::new();
        for name in names {
            self.visit(&module_name(name), &files, &builtin, &mut order, 0)?;
        }
        Ok(order)
    }

    fn visit(
        &self,
        name: &str,
        files: &BTreeMap<String, PathBuf>,
        builtin: &[String],
        order: &mut Vec<PathBuf>,
        depth: usize,
    ) -> Result<()> {
        if builtin.iter().any(|b| b == name) {
            return Ok(());
        }
        let path = files.get(name).ok_or_else(|| {
            fail(
                "modules",
                format!(
                    "Linux {} ({}) has no module {name}",
                    self.release.label(),
                    self.abi
                ),
            )
        })?;
        if order.contains(path) || depth > 32 {
            return Ok(());
        }
        let bytes = read_module(path)?;
        for dependency in modinfo(&bytes, "depends") {
            self.visit(&module_name(&dependency), files, builtin, order, depth + 1)?;
        }
        if !order.contains(path) {
            order.push(path.clone());
        }
        Ok(())
    }
}

/// `KEY="value"` or `KEY=value` from a kernel `.config`.
pub(crate) fn config_value(config: &str, key: &str) -> Option<String> {
    config.lines().find_map(|line| {
        let value = line.strip_prefix(key)?.strip_prefix('=')?;
        Some(value.trim_matches('"').to_owned())
    })
}

/// A module's name as the kernel spells it: file stem without `.ko[.xz]`, `-` as `_`.
pub fn module_name(file: &str) -> String {
    let stem = file.split(".ko").next().unwrap_or(file);
    stem.replace('-', "_")
}

fn index_modules(dir: &Path, files: &mut BTreeMap<String, PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for path in entries.flatten().map(|entry| entry.path()) {
        if path.is_dir() {
            index_modules(&path, files);
        } else if let Some(file) = path.file_name().and_then(|f| f.to_str()) {
            if file.contains(".ko") {
                files.insert(module_name(file), path.clone());
            }
        }
    }
}

/// A module's bytes, decompressed if it is `.ko.xz` or `.ko.zst`.
pub fn read_module(path: &Path) -> Result<Vec<u8>> {
    let name = path.to_string_lossy();
    let tool = if name.ends_with(".xz") {
        Some("xz")
    } else if name.ends_with(".zst") {
        Some("zstd")
    } else {
        None
    };
    match tool {
        None => std::fs::read(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        }),
        Some(tool) => {
            let mut command = Command::new(tool);
            command.arg("-dc").arg(path);
            let described = process::describe(&command);
            let out = command.output().map_err(|source| Error::Spawn {
                command: described.clone(),
                source,
            })?;
            if !out.status.success() {
                return Err(Error::CommandFailed {
                    command: described,
                    status: out.status,
                });
            }
            Ok(out.stdout)
        }
    }
}

/// The values of `key` in the `.modinfo` section of a 64-bit little-endian ELF module
/// (`key=value` strings separated by NULs); `depends=` is split at commas. A malformed ELF
/// gives no values.
pub(crate) fn modinfo(elf: &[u8], key: &str) -> Vec<String> {
    let Some(section) = elf_section(elf, ".modinfo") else {
        return Vec::new();
    };
    let prefix = format!("{key}=");
    section
        .split(|&byte| byte == 0)
        .filter_map(|entry| std::str::from_utf8(entry).ok()?.strip_prefix(&prefix))
        .flat_map(|value| value.split(','))
        .filter(|value| !value.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The bytes of section `wanted` (ELF64 LE), if the headers are in bounds.
fn elf_section<'a>(elf: &'a [u8], wanted: &str) -> Option<&'a [u8]> {
    let u16_at = |at: usize| Some(u16::from_le_bytes(elf.get(at..at + 2)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(elf.get(at..at + 8)?.try_into().ok()?));
    if elf.get(..5)? != b"\x7fELF\x02" {
        return None;
    }
    let shoff = usize::try_from(u64_at(0x28)?).ok()?;
    let (entsize, count, names) = (
        usize::from(u16_at(0x3a)?),
        usize::from(u16_at(0x3c)?),
        usize::from(u16_at(0x3e)?),
    );
    let header = |index: usize| -> Option<(usize, usize, usize)> {
        let at = shoff.checked_add(index.checked_mul(entsize)?)?;
        let name = u32::from_le_bytes(elf.get(at..at + 4)?.try_into().ok()?) as usize;
        let offset = usize::try_from(u64_at(at + 0x18)?).ok()?;
        let size = usize::try_from(u64_at(at + 0x20)?).ok()?;
        Some((name, offset, size))
    };
    let (_, strings_at, strings_len) = header(names)?;
    let strings = elf.get(strings_at..strings_at.checked_add(strings_len)?)?;
    (0..count).find_map(|index| {
        let (name, offset, size) = header(index)?;
        let tail = strings.get(name..)?;
        let end = tail.iter().position(|&b| b == 0)?;
        (&tail[..end] == wanted.as_bytes()).then(|| elf.get(offset..offset.checked_add(size)?))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 with a NULL section, `.shstrtab` and `.modinfo`.
    fn elf_with_modinfo(modinfo: &[u8]) -> Vec<u8> {
        let strings = b"\0.shstrtab\0.modinfo\0";
        let mut elf = vec![0u8; 64];
        elf[..5].copy_from_slice(b"\x7fELF\x02");
        let strings_at = elf.len();
        elf.extend_from_slice(strings);
        let modinfo_at = elf.len();
        elf.extend_from_slice(modinfo);
        let shoff = elf.len();
        elf[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        elf[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        elf[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
        elf[0x3e..0x40].copy_from_slice(&1u16.to_le_bytes());
        for (name, offset, size) in [
            (0u32, 0usize, 0usize),
            (1, strings_at, strings.len()),
            (11, modinfo_at, modinfo.len()),
        ] {
            let mut header = [0u8; 64];
            header[..4].copy_from_slice(&name.to_le_bytes());
            header[0x18..0x20].copy_from_slice(&(offset as u64).to_le_bytes());
            header[0x20..0x28].copy_from_slice(&(size as u64).to_le_bytes());
            elf.extend_from_slice(&header);
        }
        elf
    }

    #[test]
    fn depends_come_from_the_modinfo_section() {
        let elf = elf_with_modinfo(b"license=GPL\0depends=scsi_mod,crc-t10dif\0vermagic=6.1\0");
        assert_eq!(modinfo(&elf, "depends"), ["scsi_mod", "crc-t10dif"]);
        assert_eq!(modinfo(&elf, "license"), ["GPL"]);
        let none = elf_with_modinfo(b"depends=\0");
        assert!(modinfo(&none, "depends").is_empty());
    }

    #[test]
    fn malformed_elves_give_nothing() {
        assert!(modinfo(b"", "depends").is_empty());
        assert!(modinfo(b"\x7fELF\x02", "depends").is_empty());
        let mut elf = elf_with_modinfo(b"depends=a\0");
        elf[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(modinfo(&elf, "depends").is_empty());
    }

    #[test]
    fn module_names_and_config_values() {
        assert_eq!(module_name("crc-t10dif.ko.xz"), "crc_t10dif");
        assert_eq!(module_name("scsi_debug"), "scsi_debug");
        let config = "CONFIG_CC_VERSION_TEXT=\"gcc-12 (Debian 12.2.0-14) 12.2.0\"\nCONFIG_AIO=y\n";
        assert_eq!(
            config_value(config, "CONFIG_CC_VERSION_TEXT").as_deref(),
            Some("gcc-12 (Debian 12.2.0-14) 12.2.0")
        );
        assert_eq!(config_value(config, "CONFIG_AIO").as_deref(), Some("y"));
    }
}
