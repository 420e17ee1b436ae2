//! `workload=sense-cost`'s words, named as the `sp_sense` module's parameters are
//! (`harness/linux/sp_sense/sp_sense.c`), so one description of a row runs on both stacks:
//! `modes=M,…`, `touch=zero|error`, `hosts=H`, `cpus=1|2`, `fail=P`, `rounds=R`, and the round
//! lengths `commands=N` and `commands_short=N` (the module's `n` and `n_short`). `iodepth` and
//! `seed` are the fio words of [`crate::io::WorkloadParams`].

use alloc::vec::Vec;
use scsi::param::number::count;
use scsi::param::{Key, ValueError, choice};

use super::{CostMode, MAX_MODES, Touch};
use crate::io::probability_ppm;

/// Rings per CPU, at most (the module's `SP_MAX_HOSTS`).
pub const MAX_HOSTS: u16 = 64;

/// The parameters of `workload=sense-cost`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SenseCostParams {
    /// The modes, one counted slot each, in the order of the first round.
    pub modes: Vec<CostMode>,
    /// What a command does to its new buffer.
    pub touch: Touch,
    /// Rings (hosts) per CPU, sharing the CPU's allocator and the one cache.
    pub hosts: u16,
    /// CPUs running rings at once: 1, or 2 (CPU 1 a competing user of the same cache).
    pub cpus: u8,
    /// Probability an allocation attempt fails, in parts per million.
    pub fail_ppm: u32,
    /// Rounds; each rotates the modes' order by one.
    pub rounds: u32,
    /// Commands per ring in an even round.
    pub commands: u64,
    /// Commands per ring in an odd round (`None`: half of `commands`).
    pub commands_short: Option<u64>,
}

impl Default for SenseCostParams {
    fn default() -> Self {
        SenseCostParams {
            modes: CostMode::SEED_ROWS.to_vec(),
            touch: Touch::Zero,
            hosts: 1,
            cpus: 1,
            fail_ppm: 0,
            rounds: 6,
            commands: 1_000_000,
            commands_short: None,
        }
    }
}

impl SenseCostParams {
    /// Commands per ring in `round`: odd rounds are the short ones, so two neighbouring
    /// rounds' counts differ only by commands.
    pub fn commands_in(&self, round: u32) -> u64 {
        if round % 2 == 0 {
            self.commands
        } else {
            self.commands_short.unwrap_or(self.commands / 2).max(1)
        }
    }

    /// The key table.
    pub const KEYS: &'static [Key<SenseCostParams>] = TABLE;
}

const TABLE: &[Key<SenseCostParams>] = &[
    Key {
        name: "modes",
        aliases: &[],
        set: |p, v| {
            let modes = v
                .split(',')
                .map(CostMode::parse)
                .collect::<Result<Vec<_>, _>>()?;
            if modes.is_empty() || modes.len() > MAX_MODES {
                return Err(ValueError::expected("1 to 16 modes"));
            }
            p.modes = modes;
            Ok(())
        },
    },
    Key {
        name: "touch",
        aliases: &[],
        set: |p, v| {
            p.touch = choice(v, &[("zero", Touch::Zero), ("error", Touch::Error)])?;
            Ok(())
        },
    },
    Key {
        name: "hosts",
        aliases: &[],
        set: |p, v| {
            p.hosts = count(v, 1, MAX_HOSTS.into())?;
            Ok(())
        },
    },
    Key {
        name: "cpus",
        aliases: &[],
        set: |p, v| {
            p.cpus = count(v, 1, 2)?;
            Ok(())
        },
    },
    Key {
        name: "fail",
        aliases: &[],
        set: |p, v| {
            p.fail_ppm = probability_ppm(v)
                .ok_or_else(|| ValueError::expected("a probability 0..1, six decimals at most"))?;
            Ok(())
        },
    },
    Key {
        name: "rounds",
        aliases: &[],
        set: |p, v| {
            p.rounds = count(v, 1, 1000)?;
            Ok(())
        },
    },
    Key {
        name: "commands",
        aliases: &[],
        set: |p, v| {
            p.commands = count(v, 1, 1 << 40)?;
            Ok(())
        },
    },
    Key {
        name: "commands_short",
        aliases: &[],
        set: |p, v| {
            p.commands_short = Some(count(v, 1, 1 << 40)?);
            Ok(())
        },
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    fn set(params: &mut SenseCostParams, key: &str, value: &str) -> Result<(), ValueError> {
        let entry = scsi::param::find(TABLE, key).expect("a key of the table");
        (entry.set)(params, value)
    }

    #[test]
    fn words_read_as_the_module_reads_them() {
        let mut params = SenseCostParams::default();
        set(&mut params, "modes", "static,slab+idle:1519,mempool:0").unwrap();
        assert_eq!(
            params.modes,
            [
                CostMode::Static,
                CostMode::Slab { idle: 1519 },
                CostMode::Mempool(0)
            ]
        );
        set(&mut params, "touch", "error").unwrap();
        set(&mut params, "fail", "0.01").unwrap();
        set(&mut params, "cpus", "2").unwrap();
        assert_eq!(
            (params.touch, params.fail_ppm, params.cpus),
            (Touch::Error, 10_000, 2)
        );
        assert_eq!(
            (params.commands_in(0), params.commands_in(1)),
            (1_000_000, 500_000)
        );
        set(&mut params, "commands_short", "7").unwrap();
        assert_eq!(params.commands_in(3), 7);
    }

    #[test]
    fn bad_words_are_errors() {
        let mut params = SenseCostParams::default();
        for (key, value) in [
            ("modes", "slab,hoard"),
            ("modes", ""),
            ("modes", "slab+idle:x"),
            ("touch", "maybe"),
            ("cpus", "3"),
            ("hosts", "0"),
            ("fail", "1.5"),
            ("fail", "0.0000001"),
        ] {
            assert!(set(&mut params, key, value).is_err(), "{key}={value}");
        }
        let seventeen = ["slab"; 17].join(",");
        assert!(set(&mut params, "modes", &seventeen).is_err());
        assert_eq!(params, SenseCostParams::default());
    }
}
