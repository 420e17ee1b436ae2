//! scsi_debug module parameters, by their Linux names (`drivers/scsi/scsi_debug.c`), parsed from
//! `key=value` strings such as a kernel command line.

use alloc::string::{String, ToString};

/// `opts` bit: log every command (Linux `SDEBUG_OPT_NOISE`).
pub const OPT_NOISE: u32 = 0x1;
/// `opts` bit: READs touching sectors 0x1234..0x1234+10 fail with MEDIUM ERROR 11h/00h
/// (Linux `SDEBUG_OPT_MEDIUM_ERR`, `OPT_MEDIUM_ERR_ADDR`/`OPT_MEDIUM_ERR_NUM`).
pub const OPT_MEDIUM_ERR: u32 = 0x2;
/// `opts` bit: every `every_nth` command gets no response until aborted (`SDEBUG_OPT_TIMEOUT`).
pub const OPT_TIMEOUT: u32 = 0x4;
/// `opts` bit: every `every_nth` READ/WRITE completes with RECOVERED ERROR 5Dh/00h
/// (`SDEBUG_OPT_RECOVERED_ERR`).
pub const OPT_RECOVERED_ERR: u32 = 0x8;
/// `opts` bit (sensepool extension, not in Linux): every `every_nth` command reports UNIT
/// ATTENTION 29h/02h, as after a bus reset. Linux raises such UAs only through sysfs actions.
pub const OPT_UNIT_ATTENTION: u32 = 0x0100_0000;

/// First sector of the simulated medium error (Linux `OPT_MEDIUM_ERR_ADDR`).
pub const MEDIUM_ERR_ADDR: u64 = 0x1234;
/// Number of bad sectors from [`MEDIUM_ERR_ADDR`] (Linux `OPT_MEDIUM_ERR_NUM`).
pub const MEDIUM_ERR_NUM: u64 = 10;

/// A bad parameter; names the key and the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    #[error("unknown scsi_debug parameter `{key}`")]
    UnknownKey { key: String },
    #[error("scsi_debug parameter `{key}` has no value (expected {key}=...)")]
    MissingValue { key: String },
    #[error("scsi_debug parameter `{key}={value}`: {reason}")]
    BadValue {
        key: &'static str,
        value: String,
        reason: &'static str,
    },
    /// The RAM store (`fake_rw=0`) could not be allocated.
    #[error("cannot allocate the {dev_size_mb} MiB scsi_debug store (fake_rw=1 needs none)")]
    StoreAlloc { dev_size_mb: u32 },
}

/// The parameters, with scsi_debug's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScsiDebugParams {
    /// Size of the RAM store shared by all LUNs, MiB.
    pub dev_size_mb: u32,
    /// Logical block size: 512, 1024, 2048 or 4096.
    pub sector_size: u32,
    pub num_tgts: u16,
    /// LUNs per target.
    pub max_luns: u16,
    /// Commands the host holds at once; becomes `can_queue`.
    pub max_queue: u16,
    /// Completion delay in jiffies (1 jiffy = 1 ms here); 0 = complete at the next poll.
    pub delay: u32,
    /// Completion delay in ns; overrides `delay` when non-zero.
    pub ndelay: u64,
    /// READ and WRITE skip the data move (and no store is allocated).
    pub fake_rw: bool,
    /// Injection period: every nth command when > 0; every command after the |n|th when < 0.
    pub every_nth: i32,
    /// `OPT_*` bits.
    pub opts: u32,
    /// Build descriptor-format sense instead of fixed.
    pub dsense: bool,
    /// TEST UNIT READY reports NOT READY 04h/01h for this long after power on.
    pub tur_ms_to_ready: u32,
    /// Host template limits (not scsi_debug parameters in Linux, where they are fixed).
    pub sg_tablesize: u16,
    pub max_sectors: u32,
}

impl Default for ScsiDebugParams {
    fn default() -> Self {
        ScsiDebugParams {
            dev_size_mb: 8,
            sector_size: 512,
            num_tgts: 1,
            max_luns: 1,
            max_queue: 192,
            delay: 1,
            ndelay: 0,
            fake_rw: false,
            every_nth: 0,
            opts: 0,
            dsense: false,
            tur_ms_to_ready: 0,
            sg_tablesize: 128,
            max_sectors: 1024,
        }
    }
}

/// Every key [`ScsiDebugParams::set`] accepts.
pub const KEYS: &[&str] = &[
    "dev_size_mb",
    "sector_size",
    "num_tgts",
    "max_luns",
    "max_queue",
    "delay",
    "ndelay",
    "fake_rw",
    "every_nth",
    "opts",
    "dsense",
    "tur_ms_to_ready",
    "sg_tablesize",
    "max_sectors",
];

fn bad(key: &'static str, value: &str, reason: &'static str) -> ParamError {
    ParamError::BadValue {
        key,
        value: value.to_string(),
        reason,
    }
}

fn parse_u64(key: &'static str, value: &str) -> Result<u64, ParamError> {
    let parsed = match value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => value.parse::<u64>(),
    };
    parsed.map_err(|_| bad(key, value, "not an unsigned integer"))
}

fn ranged<T: TryFrom<u64>>(
    key: &'static str,
    value: &str,
    min: u64,
    max: u64,
) -> Result<T, ParamError> {
    let n = parse_u64(key, value)?;
    if n < min || n > max {
        return Err(bad(key, value, "out of range"));
    }
    T::try_from(n).map_err(|_| bad(key, value, "out of range"))
}

fn parse_bool(key: &'static str, value: &str) -> Result<bool, ParamError> {
    match value {
        "1" | "y" | "Y" | "true" => Ok(true),
        "0" | "n" | "N" | "false" => Ok(false),
        _ => Err(bad(key, value, "expected 0 or 1")),
    }
}

impl ScsiDebugParams {
    /// Sets one parameter by name.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ParamError> {
        match key {
            "dev_size_mb" => self.dev_size_mb = ranged("dev_size_mb", value, 1, 1 << 20)?,
            "sector_size" => {
                self.sector_size = ranged("sector_size", value, 512, 4096)?;
                if !matches!(self.sector_size, 512 | 1024 | 2048 | 4096) {
                    return Err(bad("sector_size", value, "must be 512, 1024, 2048 or 4096"));
                }
            }
            "num_tgts" => self.num_tgts = ranged("num_tgts", value, 1, 256)?,
            "max_luns" => self.max_luns = ranged("max_luns", value, 1, 0x3fff)?,
            "max_queue" => self.max_queue = ranged("max_queue", value, 1, 4096)?,
            "delay" => self.delay = ranged("delay", value, 0, 1_000_000)?,
            "ndelay" => self.ndelay = ranged("ndelay", value, 0, 1_000_000_000)?,
            "fake_rw" => self.fake_rw = parse_bool("fake_rw", value)?,
            "every_nth" => {
                self.every_nth = value
                    .parse()
                    .map_err(|_| bad("every_nth", value, "not an integer"))?
            }
            "opts" => self.opts = ranged("opts", value, 0, u64::from(u32::MAX))?,
            "dsense" => self.dsense = parse_bool("dsense", value)?,
            "tur_ms_to_ready" => {
                self.tur_ms_to_ready = ranged("tur_ms_to_ready", value, 0, 600_000)?
            }
            "sg_tablesize" => self.sg_tablesize = ranged("sg_tablesize", value, 1, 4096)?,
            "max_sectors" => self.max_sectors = ranged("max_sectors", value, 8, 1 << 24)?,
            _ => {
                return Err(ParamError::UnknownKey {
                    key: key.to_string(),
                });
            }
        }
        Ok(())
    }

    /// Whether `key` is a scsi_debug parameter (so a command-line parser can route it here).
    pub fn is_key(key: &str) -> bool {
        KEYS.contains(&key)
    }

    /// Parses whitespace- or comma-separated `key=value` pairs over the defaults.
    pub fn parse(text: &str) -> Result<ScsiDebugParams, ParamError> {
        let mut params = ScsiDebugParams::default();
        for item in text
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|s| !s.is_empty())
        {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| ParamError::MissingValue {
                    key: item.to_string(),
                })?;
            params.set(key, value)?;
        }
        Ok(params)
    }

    /// Checks the fields [`set`](Self::set) cannot have checked because they were written
    /// directly: a store of at least 1 MiB and at most 1 TiB (READ CAPACITY reports the last
    /// LBA, which an empty store does not have), the parser's target and LUN counts, and one
    /// of the four block sizes (the capacity divides by it).
    pub fn validate(&self) -> Result<(), ParamError> {
        let invalid = |key, value: u32, reason| ParamError::BadValue {
            key,
            value: value.to_string(),
            reason,
        };
        if !(1..=1 << 20).contains(&self.dev_size_mb) {
            return Err(invalid("dev_size_mb", self.dev_size_mb, "out of range"));
        }
        // The per-LUN state table has num_tgts × max_luns entries: the parser's bounds keep
        // it at a few MiB, where 65535 × 65535 would be an 8 GiB allocation.
        if !(1..=256).contains(&self.num_tgts) {
            return Err(invalid("num_tgts", self.num_tgts.into(), "out of range"));
        }
        if !(1..=0x3fff).contains(&self.max_luns) {
            return Err(invalid("max_luns", self.max_luns.into(), "out of range"));
        }
        if !matches!(self.sector_size, 512 | 1024 | 2048 | 4096) {
            return Err(invalid(
                "sector_size",
                self.sector_size,
                "must be 512, 1024, 2048 or 4096",
            ));
        }
        Ok(())
    }

    /// Logical blocks in the store.
    pub fn capacity_blocks(&self) -> u64 {
        u64::from(self.dev_size_mb) * 1024 * 1024 / u64::from(self.sector_size)
    }

    /// The completion delay in ns (`ndelay` wins when set; a jiffy is 1 ms).
    pub fn delay_ns(&self) -> u64 {
        if self.ndelay > 0 {
            self.ndelay
        } else {
            u64::from(self.delay) * 1_000_000
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_linux_style_parameters() {
        let p = ScsiDebugParams::parse(
            "dev_size_mb=16 sector_size=4096 fake_rw=1,opts=0x8 every_nth=-3 delay=0",
        )
        .unwrap();
        assert_eq!(p.dev_size_mb, 16);
        assert_eq!(p.sector_size, 4096);
        assert!(p.fake_rw);
        assert_eq!(p.opts, OPT_RECOVERED_ERR);
        assert_eq!(p.every_nth, -3);
        assert_eq!(p.capacity_blocks(), 4096);
        assert_eq!(p.delay_ns(), 0);
        assert_eq!(ScsiDebugParams::default().delay_ns(), 1_000_000);
    }

    #[test]
    fn errors_name_the_key_and_value() {
        let e = ScsiDebugParams::parse("sector_size=1000").unwrap_err();
        assert_eq!(
            e.to_string(),
            "scsi_debug parameter `sector_size=1000`: must be 512, 1024, 2048 or 4096"
        );
        let e = ScsiDebugParams::parse("max_luns=abc").unwrap_err();
        assert!(e.to_string().contains("max_luns=abc"), "{e}");
        assert_eq!(
            ScsiDebugParams::parse("bogus=1").unwrap_err(),
            ParamError::UnknownKey {
                key: "bogus".to_string()
            }
        );
        assert_eq!(
            ScsiDebugParams::parse("fake_rw").unwrap_err(),
            ParamError::MissingValue {
                key: "fake_rw".to_string()
            }
        );
        assert!(ScsiDebugParams::parse("max_queue=0").is_err());
        // Fields written directly are checked by validate (ScsiDebug::try_new calls it).
        let huge = ScsiDebugParams {
            num_tgts: u16::MAX,
            max_luns: u16::MAX,
            ..ScsiDebugParams::default()
        };
        assert_eq!(
            huge.validate(),
            Err(ParamError::BadValue {
                key: "num_tgts",
                value: "65535".to_string(),
                reason: "out of range"
            })
        );
        let no_luns = ScsiDebugParams {
            max_luns: 0,
            ..ScsiDebugParams::default()
        };
        assert!(matches!(
            no_luns.validate(),
            Err(ParamError::BadValue {
                key: "max_luns",
                ..
            })
        ));
        assert_eq!(ScsiDebugParams::default().validate(), Ok(()));
        for key in KEYS {
            assert!(ScsiDebugParams::is_key(key));
        }
    }
}
