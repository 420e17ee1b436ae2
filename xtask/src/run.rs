//! `cargo xtask run`: build a kernel (ours, Hermit's, or both in turn), boot it once in a QEMU
//! profile with the console shown live, resolve a fault's call trace, and judge the verdict.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use harness::accel::AccelRequest;
use harness::boot::Echo;
use harness::error::{Error, Result};
use harness::guest::{Guest, Os, OsChoice, Overrides};
use harness::nbd_guest::{Door, Listen, NbdGuest};
use harness::{hermit, profile, symbols};

/// Options of `cargo xtask run`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// Which kernel to boot: ours, hermit (Hermit 0.11 through hermit/loader), or both in turn.
    #[arg(long, value_enum, default_value_t = OsChoice::Ours)]
    pub os: OsChoice,
    /// Accelerator: auto picks KVM only when it is hardware-backed.
    #[arg(long, value_enum, default_value_t = AccelRequest::Auto)]
    pub accel: AccelRequest,
    /// Number of vCPUs (default: the profile's).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=255))]
    pub smp: Option<u32>,
    /// Guest memory in MiB (default: the profile's).
    #[arg(long = "mem", value_name = "MB", value_parser = clap::value_parser!(u32).range(16..))]
    pub memory_mb: Option<u32>,
    /// QEMU machine profile: a file qemu/NAME.toml.
    #[arg(long, default_value = "default")]
    pub profile: String,
    /// Kill QEMU after this many seconds (default: the profile's).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
    /// Boot this kernel ELF instead of building one.
    #[arg(long, value_name = "ELF")]
    pub kernel: Option<PathBuf>,
    /// A serving profile (`nbd`, `nbd-readonly`): the address clients connect to. Anything but
    /// a loopback address lets every host that can reach it use the export.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub listen: IpAddr,
    /// A serving profile: the NBD port (default: the profile's, 40809; 0 picks a free one).
    #[arg(long, value_name = "PORT")]
    pub nbd_port: Option<u16>,
    /// A serving profile: the stats port (default: the profile's, 40810; 0 picks a free one).
    #[arg(long, value_name = "PORT")]
    pub stats_port: Option<u16>,
    /// A serving profile: what clients connect through. `front` (the default) is xtask's
    /// listener with a real accept queue; `slirp-direct` is QEMU's forward itself, whose
    /// backlog of 1 leaves clients of a burst waiting for ever (docs/nbd.md).
    #[arg(long, value_enum, default_value_t = Door::Front)]
    pub door: Door,
    /// Kernel command line words (replace the profile's default_kernel_args).
    #[arg(last = true, value_name = "KERNEL_ARGS")]
    pub kernel_args: Vec<String>,
}

impl Options {
    /// Whether any option that only a serving profile takes was given.
    fn serving_options_given(&self) -> bool {
        self.listen != IpAddr::from(Ipv4Addr::LOCALHOST)
            || self.nbd_port.is_some()
            || self.stats_port.is_some()
            || self.door != Door::Front
    }

    /// Where a serving profile listens: its own ports on 127.0.0.1 behind front doors, unless
    /// the options say otherwise.
    fn listen(&self, profile: &profile::Profile) -> Result<Listen> {
        let ports = Listen::profile_ports(profile)?;
        Ok(Listen {
            ip: self.listen,
            nbd_port: self.nbd_port.unwrap_or(ports.nbd_port),
            stats_port: self.stats_port.unwrap_or(ports.stats_port),
            door: self.door,
        })
    }
}

/// Boots each kernel `options.os` names; returns the worst verdict's exit status
/// ([`harness::boot::Verdict::exit_status`]).
pub fn run(options: &Options) -> Result<u8> {
    // A misspelt profile fails before anything is built.
    let profile = profile::load(&options.profile)?;
    if options.kernel.is_some() && options.os != OsChoice::Ours {
        return Err(Error::Hermit {
            step: "run".into(),
            reason:
                "--kernel replaces our kernel's ELF; it cannot be combined with --os hermit|both"
                    .into(),
        });
    }
    // A serving profile listens where the user connects, through front doors (see
    // `harness::nbd_guest`); its QEMU forwards move to free loopback ports.
    let serving = match NbdGuest::serves(&profile) {
        true => Some(NbdGuest::listening(&profile, options.listen(&profile)?)?),
        false if options.serving_options_given() => {
            return Err(Error::Invalid {
                path: format!("qemu/{}.toml", profile.name).into(),
                field: "--listen/--nbd-port/--stats-port/--door".into(),
                value: profile.name.clone(),
                reason: "only a profile that serves NBD (forwards the guest's ports 10809 and 10810) takes them",
            });
        }
        false => None,
    };
    let profile = serving
        .as_ref()
        .map_or(profile.clone(), |nbd| nbd.profile.clone());
    let mut worst = 0;
    for &os in options.os.list() {
        let guest = Guest::prepare_os(os, options.accel, options.kernel.clone())?;
        if let Some(nbd) = &serving {
            eprintln!("xtask: {}", nbd.describe());
            tell_tls(options, &profile, nbd)?;
            if !options.listen.is_loopback() {
                eprintln!(
                    "xtask: warning: listening on {}: every host that reaches it can use the export (see docs/nbd.md for nbd_tls=require and nbd_readonly=1)",
                    options.listen
                );
            }
        }
        worst = worst.max(boot_once(options, &profile, &guest)?);
    }
    Ok(worst)
}

/// For a guest asked to serve with TLS (`nbd_tls=on|require` in its command line, e.g. the
/// `nbd-tls` profile): where the client's certificates are (made now on first use) and how the
/// clients users have connect with them.
fn tell_tls(options: &Options, profile: &profile::Profile, nbd: &NbdGuest) -> Result<()> {
    let user_args = options.kernel_args.join(" ");
    let args = match options.kernel_args.is_empty() {
        true => &profile.default_kernel_args,
        false => &user_args,
    };
    if !harness::tls::wanted(&format!("{} {args}", profile.kernel_args)) {
        return Ok(());
    }
    let dir = harness::tls::credentials_dir()?;
    let addr = nbd.nbd_addr();
    eprintln!(
        "xtask: TLS with client certificates from {dir}:\n  nbdinfo 'nbds://{addr}/?tls-certificates={dir}'\n  qemu-img info --object tls-creds-x509,id=tls0,dir={dir},endpoint=client --image-opts driver=nbd,host={},port={},tls-creds=tls0",
        addr.ip(),
        addr.port(),
        dir = dir.display()
    );
    Ok(())
}

/// Boots `guest` once and tells what happened; returns the verdict's exit status.
fn boot_once(options: &Options, profile: &profile::Profile, guest: &Guest) -> Result<u8> {
    let overrides = Overrides {
        smp: options.smp,
        memory_mb: options.memory_mb,
        timeout: options.timeout.map(Duration::from_secs),
        kernel_args: (!options.kernel_args.is_empty()).then(|| options.kernel_args.join(" ")),
        ..Overrides::default()
    };
    println!("profile: {} ({})", profile.name, profile.description);
    if guest.os == Os::Hermit {
        println!(
            "os: hermit (Hermit {} booted by hermit-loader)",
            hermit::KERNEL_VERSION
        );
    }
    let outcome = guest.boot(profile, &overrides, Echo::Live)?;
    if let Some(trace) = symbols::symbolize(&guest.kernel, &outcome.console) {
        eprintln!("xtask: call trace, resolved with addr2line:");
        for line in trace {
            eprintln!("{line}");
        }
    }
    for image in &outcome.images {
        eprintln!("xtask: disk {} is {}", image.disk, image.path.display());
    }
    let first_workload_ms = outcome
        .report
        .boot
        .as_ref()
        .map(|boot| boot.tsc_ms_to_first_workload);
    if let Some(ms) = first_workload_ms {
        eprintln!("xtask: guest reached its first workload after {ms:.3} ms (guest TSC)");
    }
    eprintln!(
        "xtask: {} guest {}; QEMU wall time {:.3} s",
        guest.os,
        outcome.verdict,
        outcome.wall.as_secs_f64()
    );
    Ok(outcome.verdict.exit_status())
}
