//! The in-guest test runner, selected with `test=all|NAME[,NAME...]`.
//!
//! Each test is a plain function returning `Result<(), String>`; the runner prints
//! `test NAME ... ok` or `test NAME ... FAILED: reason`, then the closing `N passed, N failed`
//! line that xtask (and CI's log reader) looks for, and exits with the success code only when
//! nothing failed. Tests of the failure paths (`fault-*`, `panic`) cannot return: they end the
//! boot through the fault or panic handler, so they are never part of `all`, and the runner
//! announces them with `test NAME ... expecting FAULT` (or `PANIC`) before triggering them.
//! xtask passes such a boot when QEMU's status is the failure code and the expected line appears.
//!
//! This table is the only registry of guest tests: `test=list` prints it and xtask derives the
//! boots of the `Report` tests from it (tests/guest.toml only adds per-boot settings).

use alloc::string::String;
use alloc::vec::Vec;

use crate::cmdline::TestSelection;
use os::arch::exit::ExitCode;
use os::platform::console::println;
use protocol::result::{TestListEntry, tagged_line};

#[expect(
    unsafe_code,
    reason = "deliberate page faults and invalid opcodes, to test the fault handler"
)]
mod faults;
mod irq;
#[expect(
    unsafe_code,
    reason = "writing DMA chunks through their CPU pointers and freeing them back"
)]
mod memory;
mod numa_lookups;
#[expect(
    unsafe_code,
    reason = "writing and reading tags in DMA blocks through their CPU pointers"
)]
mod numa_pools;
#[expect(
    unsafe_code,
    reason = "filling and checking DMA blocks through their CPU pointers"
)]
mod pools;
#[expect(
    unsafe_code,
    reason = "reading each CPU's stack pointer, lock statistics and freeing DMA chunks"
)]
mod smp;
#[expect(unsafe_code, reason = "reading MMIO to check the BAR mappings")]
mod system;

/// What a test is expected to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Return `Ok`.
    Pass,
    /// End the boot with a report starting with this prefix (e.g. `FAULT #PF`).
    Report(&'static str),
}

/// One guest test.
pub struct GuestTest {
    /// The name used in `test=` and in the output.
    pub name: &'static str,
    /// What it should do.
    pub expect: Expect,
    /// The body.
    pub run: fn() -> Result<(), String>,
}

/// Every guest test, in `test=all` order (the `Report` ones are excluded from `all`).
pub const TESTS: &[GuestTest] = &[
    GuestTest {
        name: "boot",
        expect: Expect::Pass,
        run: system::boot,
    },
    GuestTest {
        name: "cmdline-errors",
        expect: Expect::Pass,
        run: system::cmdline_errors,
    },
    GuestTest {
        name: "mmio-map",
        expect: Expect::Pass,
        run: system::mmio_map,
    },
    GuestTest {
        name: "heap-stress",
        expect: Expect::Pass,
        run: memory::heap_stress,
    },
    GuestTest {
        name: "dma-frames",
        expect: Expect::Pass,
        run: memory::dma_frames,
    },
    GuestTest {
        name: "dmapool-legacy",
        expect: Expect::Pass,
        run: pools::dmapool_legacy,
    },
    GuestTest {
        name: "dmapool-scalable",
        expect: Expect::Pass,
        run: pools::dmapool_scalable,
    },
    GuestTest {
        name: "dmapool-misuse",
        expect: Expect::Pass,
        run: pools::dmapool_misuse,
    },
    GuestTest {
        name: "slab",
        expect: Expect::Pass,
        run: pools::slab,
    },
    GuestTest {
        name: "slab-misuse",
        expect: Expect::Pass,
        run: pools::slab_misuse,
    },
    GuestTest {
        name: "smp-online",
        expect: Expect::Pass,
        run: smp::online,
    },
    GuestTest {
        name: "smp-run-on-each-cpu",
        expect: Expect::Pass,
        run: smp::run_on_each_cpu,
    },
    GuestTest {
        name: "smp-spinlock",
        expect: Expect::Pass,
        run: smp::spinlock,
    },
    GuestTest {
        name: "numa-node-alloc",
        expect: Expect::Pass,
        run: smp::numa_node_alloc,
    },
    GuestTest {
        name: "smp-dmapool-stress",
        expect: Expect::Pass,
        run: smp::dmapool_stress,
    },
    GuestTest {
        name: "numa-pool-set-node",
        expect: Expect::Pass,
        run: numa_pools::numa_pool_set_node,
    },
    GuestTest {
        name: "numa-pool-set-stress",
        expect: Expect::Pass,
        run: numa_pools::numa_pool_set_stress,
    },
    GuestTest {
        name: "numa-pool-lookups",
        expect: Expect::Pass,
        run: numa_lookups::numa_pool_lookups,
    },
    GuestTest {
        name: "irq-vector-counts",
        expect: Expect::Pass,
        run: irq::vector_counts,
    },
    GuestTest {
        name: "irq-vector-allocator",
        expect: Expect::Pass,
        run: irq::vector_allocator,
    },
    GuestTest {
        name: "fault-pf",
        expect: Expect::Report("FAULT #PF"),
        run: faults::page_fault,
    },
    GuestTest {
        name: "fault-ud",
        expect: Expect::Report("FAULT #UD"),
        run: faults::invalid_opcode,
    },
    GuestTest {
        name: "fault-stack-overflow",
        expect: Expect::Report("FAULT #DF"),
        run: faults::stack_overflow,
    },
    GuestTest {
        name: "fault-ap-stack-overflow",
        expect: Expect::Report("FAULT #DF"),
        run: faults::ap_stack_overflow,
    },
    GuestTest {
        name: "panic",
        expect: Expect::Report("PANIC "),
        run: faults::panic,
    },
];

/// The names `test=` accepts (besides `all`).
pub fn names() -> Vec<&'static str> {
    TESTS.iter().map(|test| test.name).collect()
}

/// Prints one `TEST-LIST {"name":…,"expect":…}` line per test (`expect` is `pass` or the
/// report prefix, e.g. `FAULT #PF`). xtask boots `test=list` first and derives its guest test
/// list from these lines: each `Report` test becomes a boot expecting that report.
fn list() -> ExitCode {
    for test in TESTS {
        let expect = match test.expect {
            Expect::Pass => "pass",
            Expect::Report(prefix) => prefix,
        };
        let entry = TestListEntry {
            name: test.name.into(),
            expect: expect.into(),
        };
        println!("{}", tagged_line("TEST-LIST", &entry));
    }
    ExitCode::Success
}

/// Runs the selected tests and returns the verdict for the exit port.
pub fn run(selection: &TestSelection) -> ExitCode {
    let selected: Vec<&GuestTest> = match selection {
        TestSelection::List => return list(),
        TestSelection::All => TESTS
            .iter()
            .filter(|test| test.expect == Expect::Pass)
            .collect(),
        TestSelection::Named(names) => names
            .iter()
            .filter_map(|name| TESTS.iter().find(|test| test.name == name))
            .collect(),
    };
    let (mut passed, mut failed) = (0, 0);
    for test in selected {
        if let Expect::Report(prefix) = test.expect {
            println!(
                "test {} ... expecting {}",
                test.name,
                prefix.split(' ').next().unwrap_or(prefix)
            );
        }
        match ((test.run)(), test.expect) {
            (Ok(()), Expect::Pass) => {
                println!("test {} ... ok", test.name);
                passed += 1;
            }
            (Ok(()), Expect::Report(prefix)) => {
                println!(
                    "test {} ... FAILED: returned without a `{prefix}` report",
                    test.name
                );
                failed += 1;
            }
            (Err(reason), _) => {
                println!("test {} ... FAILED: {reason}", test.name);
                failed += 1;
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::Success
    } else {
        ExitCode::Failure
    }
}

/// `Err(format!(...))` unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            return Err(alloc::format!($($arg)*));
        }
    };
}
pub(crate) use ensure;
