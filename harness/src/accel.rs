//! Choosing the QEMU accelerator.
//!
//! KVM is only worth using when it is hardware-backed. On hosts like the project's own machines,
//! `/dev/kvm` exists but belongs to `kvm_pvm`, a software virtualizer: guest ring-0 code is
//! emulated one instruction at a time and port exits cost tens of microseconds, so TCG is both
//! faster and more reliable there. `auto` therefore picks KVM only when the CPU advertises VMX or
//! SVM, `kvm_pvm` is not loaded, and `/dev/kvm` opens; otherwise TCG. The choice and its reason are
//! printed as the first line of every boot.

use std::fmt;
use std::fs::OpenOptions;
use std::path::Path;

use crate::error::{Error, Result};

/// What the user asked for on the command line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum AccelRequest {
    /// KVM when it is hardware-backed, else TCG.
    #[default]
    Auto,
    /// QEMU's dynamic translator; works everywhere.
    Tcg,
    /// Hardware virtualization through /dev/kvm.
    Kvm,
}

/// The accelerator a boot uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accel {
    Tcg,
    Kvm,
}

impl fmt::Display for Accel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Accel::Tcg => "tcg",
            Accel::Kvm => "kvm",
        })
    }
}

/// An accelerator and why it was chosen.
#[derive(Clone, Debug)]
pub struct Choice {
    pub accel: Accel,
    pub reason: String,
}

impl fmt::Display for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "accel: {} ({})", self.accel, self.reason)
    }
}

/// What the host offers, read from /proc, /sys and /dev.
#[derive(Clone, Debug)]
struct HostKvm {
    /// The CPU flags include `vmx` (Intel) or `svm` (AMD).
    hardware_virt: bool,
    /// The `kvm_pvm` module (software virtualization) is loaded.
    pvm: bool,
    /// Why /dev/kvm cannot be used, if it cannot.
    dev_kvm_problem: Option<String>,
}

impl HostKvm {
    fn probe() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let hardware_virt = cpuinfo
            .lines()
            .filter(|line| line.starts_with("flags"))
            .any(|line| {
                line.split_whitespace()
                    .any(|flag| flag == "vmx" || flag == "svm")
            });
        let pvm = Path::new("/sys/module/kvm_pvm").exists();
        let dev_kvm_problem = match OpenOptions::new().read(true).write(true).open("/dev/kvm") {
            Ok(_) => None,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                Some("/dev/kvm does not exist".to_owned())
            }
            Err(error) => Some(format!("/dev/kvm cannot be opened: {error}")),
        };
        Self {
            hardware_virt,
            pvm,
            dev_kvm_problem,
        }
    }

    /// Why KVM would be slow or unusable here, or `None` if it is real hardware KVM.
    fn objection(&self) -> Option<String> {
        if let Some(problem) = &self.dev_kvm_problem {
            return Some(problem.clone());
        }
        if self.pvm {
            return Some(
                "/dev/kvm is kvm_pvm, a software virtualizer; TCG is faster and reliable here"
                    .into(),
            );
        }
        if !self.hardware_virt {
            return Some("the CPU has no vmx/svm flag, so /dev/kvm is not hardware-backed".into());
        }
        None
    }
}

/// Resolves the user's request against this host.
pub fn choose(request: AccelRequest) -> Result<Choice> {
    let host = HostKvm::probe();
    match request {
        AccelRequest::Tcg => Ok(Choice {
            accel: Accel::Tcg,
            reason: "requested with --accel tcg".into(),
        }),
        AccelRequest::Kvm => match (&host.dev_kvm_problem, host.objection()) {
            (Some(problem), _) => Err(Error::KvmUnavailable {
                reason: problem.clone(),
            }),
            (None, Some(warning)) => Ok(Choice {
                accel: Accel::Kvm,
                reason: format!("requested with --accel kvm, although {warning}"),
            }),
            (None, None) => Ok(Choice {
                accel: Accel::Kvm,
                reason: "requested with --accel kvm".into(),
            }),
        },
        AccelRequest::Auto => Ok(match host.objection() {
            Some(objection) => Choice {
                accel: Accel::Tcg,
                reason: format!("auto: {objection}"),
            },
            None => Choice {
                accel: Accel::Kvm,
                reason: "auto: hardware virtualization (vmx/svm) and /dev/kvm are available".into(),
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(hardware_virt: bool, pvm: bool, problem: Option<&str>) -> HostKvm {
        HostKvm {
            hardware_virt,
            pvm,
            dev_kvm_problem: problem.map(str::to_owned),
        }
    }

    #[test]
    fn only_real_hardware_kvm_has_no_objection() {
        assert!(host(true, false, None).objection().is_none());
        assert!(
            host(false, true, None)
                .objection()
                .unwrap()
                .contains("kvm_pvm")
        );
        assert!(
            host(true, true, None)
                .objection()
                .unwrap()
                .contains("kvm_pvm")
        );
        assert!(
            host(false, false, None)
                .objection()
                .unwrap()
                .contains("vmx")
        );
        assert!(
            host(true, false, Some("/dev/kvm does not exist"))
                .objection()
                .is_some()
        );
    }
}
