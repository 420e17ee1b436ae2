//! What `--case sense` runs: the modes, the configurations, the stock kernels' variants, the
//! round lengths, and the facts of Debian's configuration that the rows depend on.

use harness::linux::kernel::Kernel;
use protocol::result::SenseCostResult;
use serde::Serialize;

/// The thread's four rows and the two designs around them.
pub const SEED_ROWS: [&str; 6] = [
    "static",
    "slab",
    "mempool:1",
    "mempool:2",
    "slab+idle:1519",
    "mempool:1519",
];

/// [`SEED_ROWS`] and the idle-object sweep, K ∈ {0, 32, 1519, 10107} (`slab+idle:0` is
/// `slab`; 10107 is mpt3sas's sense pool in the thread).
pub const SWEEP: [&str; 11] = [
    "static",
    "slab",
    "mempool:1",
    "mempool:2",
    "slab+idle:1519",
    "mempool:1519",
    "slab+idle:32",
    "slab+idle:10107",
    "mempool:0",
    "mempool:32",
    "mempool:10107",
];

/// The ring's queue depth on both stacks (the thread's and fio's 32).
pub const IODEPTH: u32 = 32;

/// One configuration: the words that differ from the defaults (`touch=zero hosts=1 cpus=1
/// fail=0`), and the modes it runs.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub words: &'static [(&'static str, &'static str)],
    pub modes: &'static [&'static str],
}

/// The mechanism: 48 commands in flight do not fit one 32-object slab, so where the ring starts
/// against the slab boundaries (K mod 32 idle objects before it) could change SLUB's work per
/// command; 1504 and 1536 are whole slabs of idle objects, 16 and 1519 are not.
pub const PHASE: [&str; 8] = [
    "static",
    "slab",
    "slab+idle:16",
    "slab+idle:1504",
    "slab+idle:1519",
    "slab+idle:1536",
    "mempool:2",
    "mempool:1519",
];

/// Every configuration: the sweep as the thread ran it, then the seed's rows with one option
/// changed each, then [`PHASE`] (the kernels' variants run the first only).
pub const CONFIGS: [Config; 6] = [
    Config {
        words: &[],
        modes: &SWEEP,
    },
    Config {
        words: &[("touch", "error")],
        modes: &SEED_ROWS,
    },
    Config {
        words: &[("fail", "0.01")],
        modes: &SEED_ROWS,
    },
    Config {
        words: &[("cpus", "2")],
        modes: &SEED_ROWS,
    },
    Config {
        words: &[("hosts", "4")],
        modes: &SEED_ROWS,
    },
    Config {
        words: &[("iodepth", "48")],
        modes: &PHASE,
    },
];

impl Config {
    /// The stock guest's case word (`harness/linux/init.sh`): `sense`, or
    /// `sense:K=V/…/modes=a;b` (a case word holds no comma).
    pub fn linux_case(&self) -> String {
        if self.words.is_empty() && self.modes == SWEEP {
            return "sense".into();
        }
        let mut words: Vec<String> = self.words.iter().map(|(k, v)| format!("{k}={v}")).collect();
        words.push(format!("modes={}", self.modes.join(";")));
        format!("sense:{}", words.join("/"))
    }

    /// Our kernel's words for the same configuration, `iodepth` included.
    pub fn ours(&self) -> String {
        let mut words: Vec<String> = self.words.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if !self.words.iter().any(|(key, _)| *key == "iodepth") {
            words.push(format!("iodepth={IODEPTH}"));
        }
        words.push(format!("modes={}", self.modes.join(",")));
        words.join(" ")
    }
}

/// How a stock kernel boots: as Debian ships it, or without the allocation-time zeroing and
/// KFENCE's sampling.
#[derive(Clone, Copy, Debug)]
pub struct Variant {
    /// Appended to the stack's name (`Linux 6.12` + this).
    pub suffix: &'static str,
    /// Kernel command-line words.
    pub cmdline: &'static str,
}

/// Shipped first: it runs every configuration, the other the sweep only.
pub const VARIANTS: [Variant; 2] = [
    Variant {
        suffix: "",
        cmdline: "",
    },
    Variant {
        suffix: " init_on_alloc=0",
        cmdline: "init_on_alloc=0 kfence.sample_interval=0",
    },
];

/// Commands per ring in the long (even) and short (odd) rounds, and the rounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lengths {
    pub commands: u64,
    pub commands_short: u64,
    pub rounds: u32,
}

/// Timed rounds run ≥ 100 ms for the allocating modes under TCG (about 300–900 ns per command
/// there); counted ones only need the two lengths to differ by enough commands to dwarf what a
/// window's start costs, and run several times slower under the plugin's models.
pub fn lengths(quick: bool, counted: bool) -> Lengths {
    match (quick, counted) {
        (true, false) => Lengths {
            commands: 400_000,
            commands_short: 200_000,
            rounds: 6,
        },
        (false, false) => Lengths {
            commands: 1_000_000,
            commands_short: 500_000,
            rounds: 10,
        },
        (true, true) => Lengths {
            commands: 20_000,
            commands_short: 10_000,
            rounds: 6,
        },
        (false, true) => Lengths {
            commands: 40_000,
            commands_short: 20_000,
            rounds: 10,
        },
    }
}

/// A probability in parts per million as `fail=` spells it (`10000` → `0.01`).
fn probability(ppm: u64) -> String {
    let text = format!("{}.{:06}", ppm / 1_000_000, ppm % 1_000_000);
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// The configuration a window ran in: `default`, or the words that differ from it.
pub fn config_label(line: &SenseCostResult) -> String {
    let mut words = Vec::new();
    if line.iodepth != u64::from(IODEPTH) {
        words.push(format!("iodepth={}", line.iodepth));
    }
    if line.touch != "zero" {
        words.push(format!("touch={}", line.touch));
    }
    if line.hosts != 1 {
        words.push(format!("hosts={}", line.hosts));
    }
    if line.cpus != 1 {
        words.push(format!("cpus={}", line.cpus));
    }
    if line.fail_ppm != 0 {
        words.push(format!("fail={}", probability(line.fail_ppm)));
    }
    if words.is_empty() {
        "default".into()
    } else {
        words.join(" ")
    }
}

/// What Debian's configuration says about a kernel's slab allocator: which one it is (6.1's
/// config compiles SLAB out; 6.8 removed it), and the options that change its per-object work.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SlabFacts {
    pub release: String,
    pub abi: String,
    /// `SLUB` when `CONFIG_SLUB=y` and `CONFIG_SLAB` is not set.
    pub allocator: String,
    /// `CONFIG_INIT_ON_ALLOC_DEFAULT_ON`: every allocation zeroed unless `init_on_alloc=0`.
    pub init_on_alloc: bool,
    /// `CONFIG_KFENCE`, and its default sample interval in ms (0: off unless booted with
    /// `kfence.sample_interval=N`).
    pub kfence: bool,
    pub kfence_sample_interval_ms: Option<u64>,
    /// `CONFIG_SLAB_FREELIST_HARDENED` (free pointers obfuscated) and `_RANDOM`.
    pub freelist_hardened: bool,
    pub freelist_random: bool,
    /// `CONFIG_SLUB_CPU_PARTIAL`.
    pub cpu_partial: bool,
}

impl SlabFacts {
    /// Reads the facts from `kernel`'s `boot/config-*`.
    pub fn of(kernel: &Kernel) -> SlabFacts {
        let on = |key: &str| kernel.config_value(key).as_deref() == Some("y");
        let allocator = match (on("CONFIG_SLUB"), on("CONFIG_SLAB"), on("CONFIG_SLOB")) {
            (true, false, false) => "SLUB",
            (false, true, false) => "SLAB",
            (false, false, true) => "SLOB",
            _ => "unknown",
        };
        SlabFacts {
            release: kernel.release.label().into(),
            abi: kernel.abi.clone(),
            allocator: allocator.into(),
            init_on_alloc: on("CONFIG_INIT_ON_ALLOC_DEFAULT_ON"),
            kfence: on("CONFIG_KFENCE"),
            kfence_sample_interval_ms: kernel
                .config_value("CONFIG_KFENCE_SAMPLE_INTERVAL")
                .and_then(|ms| ms.parse().ok()),
            freelist_hardened: on("CONFIG_SLAB_FREELIST_HARDENED"),
            freelist_random: on("CONFIG_SLAB_FREELIST_RANDOM"),
            cpu_partial: on("CONFIG_SLUB_CPU_PARTIAL"),
        }
    }

    /// One line for the console and the page.
    pub fn sentence(&self) -> String {
        let kfence = match (self.kfence, self.kfence_sample_interval_ms) {
            (false, _) => "no KFENCE".to_owned(),
            (true, Some(0)) => "KFENCE built in but off (sample interval 0)".to_owned(),
            (true, Some(ms)) => format!("KFENCE sampling every {ms} ms"),
            (true, None) => "KFENCE".to_owned(),
        };
        format!(
            "Linux {} ({}): {} from Debian's config; init_on_alloc {}, {kfence}, freelist hardened {}, random {}, CPU partial slabs {}",
            self.release,
            self.abi,
            self.allocator,
            if self.init_on_alloc { "on" } else { "off" },
            self.freelist_hardened,
            self.freelist_random,
            self.cpu_partial
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_words_carry_no_comma_and_name_the_changed_option() {
        assert_eq!(CONFIGS[0].linux_case(), "sense");
        assert_eq!(
            CONFIGS[2].linux_case(),
            "sense:fail=0.01/modes=static;slab;mempool:1;mempool:2;slab+idle:1519;mempool:1519"
        );
        for config in CONFIGS {
            assert!(!config.linux_case().contains(','), "{config:?}");
            assert!(config.ours().contains("modes=static,slab"), "{config:?}");
        }
    }

    #[test]
    fn a_window_names_its_configuration_as_the_configuration_spells_it() {
        let mut line = SenseCostResult {
            touch: "zero".into(),
            hosts: 1,
            cpus: 1,
            iodepth: 32,
            ..SenseCostResult::default()
        };
        assert_eq!(config_label(&line), "default");
        line.fail_ppm = 10_000;
        assert_eq!(config_label(&line), "fail=0.01");
        line.fail_ppm = 1_000_000;
        line.cpus = 2;
        assert_eq!(config_label(&line), "cpus=2 fail=1");
        for config in &CONFIGS[1..] {
            let (key, value) = config.words[0];
            assert!(
                !config_label(&SenseCostResult {
                    touch: if key == "touch" {
                        value.into()
                    } else {
                        "zero".into()
                    },
                    hosts: if key == "hosts" { 4 } else { 1 },
                    cpus: if key == "cpus" { 2 } else { 1 },
                    fail_ppm: if key == "fail" { 10_000 } else { 0 },
                    iodepth: if key == "iodepth" { 48 } else { 32 },
                    ..SenseCostResult::default()
                })
                .contains("default")
            );
        }
    }
}
