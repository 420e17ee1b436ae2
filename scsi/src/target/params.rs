//! scsi_debug module parameters, by their Linux names (`drivers/scsi/scsi_debug.c`), parsed from
//! `key=value` strings such as a kernel command line.

use crate::param::number::{count, signed};
use crate::param::{self, Key, NumberError, ValueError, boolean};
use alloc::string::{String, ToString};

pub use super::opts::*;
use super::opts::{max_queue, opts};

/// A bad parameter; names the key and the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// A key scsi_debug does not have.
    #[error("unknown scsi_debug parameter `{key}`")]
    UnknownKey {
        /// The key as written.
        key: String,
    },
    /// A key without `=value`.
    #[error("scsi_debug parameter `{key}` has no value (expected {key}=...)")]
    MissingValue {
        /// The key.
        key: String,
    },
    /// A value the key does not take.
    #[error("scsi_debug parameter `{key}={value}`: {reason}")]
    BadValue {
        /// The key.
        key: &'static str,
        /// The value as written.
        value: String,
        /// What is wrong with it.
        reason: ValueError,
    },
    /// The RAM store (`fake_rw=0`) could not be allocated.
    #[error("cannot allocate the {dev_size_mb} MiB scsi_debug store (fake_rw=1 needs none)")]
    StoreAlloc {
        /// The store size asked for.
        dev_size_mb: u32,
    },
}

/// The parameters, with scsi_debug's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScsiDebugParams {
    /// Size of the RAM store shared by all LUNs, MiB.
    pub dev_size_mb: u32,
    /// Logical block size: 512, 1024, 2048 or 4096.
    pub sector_size: u32,
    /// Targets on the host (ids 0..num_tgts).
    pub num_tgts: u16,
    /// LUNs per target.
    pub max_luns: u16,
    /// Commands the host holds at once (1..=[`SDEBUG_CANQUEUE`], as in Linux); becomes
    /// `can_queue` unless [`can_queue`](Self::can_queue) overrides it.
    pub max_queue: u16,
    /// Host template override (not a Linux scsi_debug parameter): the host's `can_queue` and
    /// queue limit, for comparisons that need more tags than Linux's scsi_debug allows (the
    /// 2008 sense-buffer measurement had can_queue 1519).
    pub can_queue: Option<u16>,
    /// Completion delay in jiffies ([`JIFFY_NS`]: 4 ms, Debian's HZ=250); 0 = complete at
    /// the next poll.
    pub delay: u32,
    /// Completion delay in ns; overrides `delay` when non-zero.
    pub ndelay: u64,
    /// Not a Linux scsi_debug parameter: once the oldest pending completion is due, every
    /// pending one is reported in the same poll (interrupt coalescing taken to the whole
    /// queue). A host that resubmits after such a poll has nothing in flight: the worst case
    /// for a sense reserve, since no buffer of its own is on its way back.
    pub batch_complete: bool,
    /// READ and WRITE skip the data move (and no store is allocated).
    pub fake_rw: bool,
    /// Injection period: every nth command when > 0. When < 0 the |n|th command is the first
    /// hit, and the first hit that reaches the timeout check turns it into -1 (every command
    /// from then on), as Linux's `fake_timeout` does; so this field can change at run time.
    pub every_nth: i32,
    /// `OPT_*` bits.
    pub opts: u32,
    /// Build descriptor-format sense instead of fixed.
    pub dsense: bool,
    /// The LUNs are "becoming ready" for this long after power on: TEST UNIT READY reports
    /// NOT READY 04h/01h with the milliseconds left in INFORMATION, media access 04h/02h.
    pub tur_ms_to_ready: u32,
    /// Host template limit (not a scsi_debug parameter in Linux, where it is fixed): data
    /// segments per command.
    pub sg_tablesize: u16,
    /// Host template limit, like `sg_tablesize`: 512-byte sectors per command.
    pub max_sectors: u32,
}

impl Default for ScsiDebugParams {
    fn default() -> Self {
        ScsiDebugParams {
            dev_size_mb: 8,
            sector_size: 512,
            num_tgts: 1,
            max_luns: 1,
            max_queue: SDEBUG_CANQUEUE,
            can_queue: None,
            delay: 1,
            ndelay: 0,
            batch_complete: false,
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

/// Every key [`ScsiDebugParams::set`] accepts, with its parser: the one place a scsi_debug
/// parameter is spelled.
const TABLE: &[Key<ScsiDebugParams>] = &[
    Key {
        name: "dev_size_mb",
        aliases: &[],
        set: |p, v| {
            p.dev_size_mb = count(v, 1, 1 << 20)?;
            Ok(())
        },
    },
    Key {
        name: "sector_size",
        aliases: &[],
        set: |p, v| {
            p.sector_size = sector_size(count(v, 512, 4096)?)?;
            Ok(())
        },
    },
    Key {
        name: "num_tgts",
        aliases: &[],
        set: |p, v| {
            p.num_tgts = count(v, 1, MAX_TGTS)?;
            Ok(())
        },
    },
    Key {
        name: "max_luns",
        aliases: &[],
        set: |p, v| {
            p.max_luns = count(v, 1, MAX_LUNS)?;
            Ok(())
        },
    },
    Key {
        name: "max_queue",
        aliases: &[],
        set: |p, v| {
            p.max_queue = max_queue(v)?;
            Ok(())
        },
    },
    Key {
        name: "can_queue",
        aliases: &[],
        set: |p, v| {
            p.can_queue = Some(count(v, 1, CAN_QUEUE_MAX.into())?);
            Ok(())
        },
    },
    Key {
        name: "delay",
        aliases: &[],
        set: |p, v| {
            p.delay = count(v, 0, 1_000_000)?;
            Ok(())
        },
    },
    Key {
        name: "ndelay",
        aliases: &[],
        set: |p, v| {
            // Linux ignores (with a warning) an ndelay of a second or more; we refuse it.
            p.ndelay = count(v, 0, NDELAY_MAX_NS)?;
            Ok(())
        },
    },
    Key {
        name: "batch_complete",
        aliases: &[],
        set: |p, v| {
            p.batch_complete = boolean(v)?;
            Ok(())
        },
    },
    Key {
        name: "fake_rw",
        aliases: &[],
        set: |p, v| {
            p.fake_rw = boolean(v)?;
            Ok(())
        },
    },
    Key {
        name: "every_nth",
        aliases: &[],
        set: |p, v| {
            let nth = signed(v, i32::MIN.into(), i32::MAX.into())?;
            p.every_nth = i32::try_from(nth).unwrap_or_default();
            Ok(())
        },
    },
    Key {
        name: "opts",
        aliases: &[],
        set: |p, v| {
            p.opts = opts(count(v, 0, u32::MAX.into())?)?;
            Ok(())
        },
    },
    Key {
        name: "dsense",
        aliases: &[],
        set: |p, v| {
            p.dsense = boolean(v)?;
            Ok(())
        },
    },
    Key {
        name: "tur_ms_to_ready",
        aliases: &[],
        set: |p, v| {
            p.tur_ms_to_ready = count(v, 0, 600_000)?;
            Ok(())
        },
    },
    Key {
        name: "sg_tablesize",
        aliases: &[],
        set: |p, v| {
            p.sg_tablesize = count(v, 1, 4096)?;
            Ok(())
        },
    },
    Key {
        name: "max_sectors",
        aliases: &[],
        set: |p, v| {
            p.max_sectors = count(v, 8, 1 << 24)?;
            Ok(())
        },
    },
];

/// Most targets (`num_tgts=`): the per-LUN state table has `num_tgts` × `max_luns` entries,
/// and these bounds keep it at a few MiB where 65535 × 65535 would be an 8 GiB allocation.
const MAX_TGTS: u64 = 256;
/// Most LUNs per target (`max_luns=`), SAM's flat-space limit.
const MAX_LUNS: u64 = 0x3fff;

fn sector_size(bytes: u32) -> Result<u32, ValueError> {
    match bytes {
        512 | 1024 | 2048 | 4096 => Ok(bytes),
        _ => Err(ValueError::expected("512, 1024, 2048 or 4096")),
    }
}

impl ScsiDebugParams {
    /// Every key [`Self::set`] accepts, with its parser: the one place each is spelled.
    pub const KEYS: &'static [Key<ScsiDebugParams>] = TABLE;

    /// Sets one parameter by name.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ParamError> {
        let entry = param::find(TABLE, key).ok_or_else(|| ParamError::UnknownKey {
            key: key.to_string(),
        })?;
        (entry.set)(self, value).map_err(|reason| ParamError::BadValue {
            key: entry.name,
            value: value.to_string(),
            reason,
        })
    }

    /// Whether `key` is a scsi_debug parameter (so a command-line parser can route it here).
    pub fn is_key(key: &str) -> bool {
        param::find(TABLE, key).is_some()
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
        let range = |min, max| ValueError::Number(NumberError::Range { min, max });
        if !(1..=1 << 20).contains(&self.dev_size_mb) {
            return Err(invalid("dev_size_mb", self.dev_size_mb, range(1, 1 << 20)));
        }
        if !(1..=MAX_TGTS).contains(&u64::from(self.num_tgts)) {
            return Err(invalid(
                "num_tgts",
                self.num_tgts.into(),
                range(1, MAX_TGTS),
            ));
        }
        if !(1..=MAX_LUNS).contains(&u64::from(self.max_luns)) {
            return Err(invalid(
                "max_luns",
                self.max_luns.into(),
                range(1, MAX_LUNS),
            ));
        }
        sector_size(self.sector_size)
            .map_err(|reason| invalid("sector_size", self.sector_size, reason))?;
        if !(1..=SDEBUG_CANQUEUE).contains(&self.max_queue) {
            let reason = range(1, SDEBUG_CANQUEUE.into());
            return Err(invalid("max_queue", self.max_queue.into(), reason));
        }
        if let Some(n) = self.can_queue
            && !(1..=CAN_QUEUE_MAX).contains(&n)
        {
            return Err(invalid(
                "can_queue",
                n.into(),
                range(1, CAN_QUEUE_MAX.into()),
            ));
        }
        opts(self.opts).map_err(|reason| invalid("opts", self.opts, reason))?;
        if self.ndelay > NDELAY_MAX_NS {
            let reason = ValueError::Refused(
                "Linux scsi_debug ignores an ndelay of 1 s or more; use delay= (jiffies)".into(),
            );
            return Err(ParamError::BadValue {
                key: "ndelay",
                value: self.ndelay.to_string(),
                reason,
            });
        }
        Ok(())
    }

    /// Whether a READ/WRITE may be answered on the `fake_rw` fast path: `fake_rw` set and
    /// neither noise nor unit-attention injection in `opts` (both act before the response).
    pub fn fast_rw(&self) -> bool {
        self.fake_rw && self.opts & (OPT_NOISE | OPT_UNIT_ATTENTION) == 0
    }

    /// The host's `can_queue`: the override if set, else `max_queue`.
    pub fn host_can_queue(&self) -> u16 {
        self.can_queue.unwrap_or(self.max_queue)
    }

    /// Logical blocks in the store.
    pub fn capacity_blocks(&self) -> u64 {
        u64::from(self.dev_size_mb) * 1024 * 1024 / u64::from(self.sector_size)
    }

    /// How a logical unit starts: becoming ready when `tur_ms_to_ready` is set.
    pub(crate) fn power_on_readiness(&self) -> super::Readiness {
        if self.tur_ms_to_ready > 0 {
            super::Readiness::BecomingReady
        } else {
            super::Readiness::Ready
        }
    }

    /// The completion delay in ns (`ndelay` wins when set; a jiffy is [`JIFFY_NS`]).
    pub fn delay_ns(&self) -> u64 {
        if self.ndelay > 0 {
            self.ndelay
        } else {
            u64::from(self.delay) * JIFFY_NS
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
        assert_eq!(ScsiDebugParams::default().delay_ns(), 4_000_000);
    }

    #[test]
    fn errors_name_the_key_and_value() {
        let e = ScsiDebugParams::parse("sector_size=1000").unwrap_err();
        assert_eq!(
            e.to_string(),
            "scsi_debug parameter `sector_size=1000`: expected 512, 1024, 2048 or 4096"
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
        // Linux caps max_queue at SDEBUG_CANQUEUE; the error points at can_queue=.
        assert_eq!(
            ScsiDebugParams::parse("max_queue=192").unwrap().max_queue,
            192
        );
        let e = ScsiDebugParams::parse("max_queue=1519")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("max_queue=1519") && e.contains("192") && e.contains("can_queue="),
            "{e}"
        );
        let p = ScsiDebugParams::parse("can_queue=1519").unwrap();
        assert_eq!((p.max_queue, p.host_can_queue()), (192, 1519));
        assert!(ScsiDebugParams::parse("can_queue=0").is_err());
        assert!(ScsiDebugParams::parse("can_queue=4097").is_err());
        // Unimplemented opts bits are named, not ignored.
        let e = ScsiDebugParams::parse("opts=0x18").unwrap_err().to_string();
        assert!(
            e.starts_with(
                "scsi_debug parameter `opts=0x18`: bit 0x10 (TRANSPORT_ERR) is not implemented"
            ),
            "{e}"
        );
        let e = ScsiDebugParams::parse("opts=0x40000000")
            .unwrap_err()
            .to_string();
        assert!(e.contains("bit 0x40000000"), "{e}");
        assert_eq!(
            ScsiDebugParams::parse("opts=0x100000f").unwrap().opts,
            0x100_000f
        );
        for direct in [
            ScsiDebugParams {
                max_queue: 1519,
                ..ScsiDebugParams::default()
            },
            ScsiDebugParams {
                opts: 0x10,
                ..ScsiDebugParams::default()
            },
            ScsiDebugParams {
                can_queue: Some(0),
                ..ScsiDebugParams::default()
            },
        ] {
            assert!(direct.validate().is_err(), "{direct:?}");
        }
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
                reason: ValueError::Number(NumberError::Range { min: 1, max: 256 })
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
        for key in ScsiDebugParams::KEYS {
            assert!(ScsiDebugParams::is_key(key.name));
        }
    }
}
