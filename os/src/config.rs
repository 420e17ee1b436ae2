//! The command line's words the OS itself takes ([`BootConfig`]). The app reads the whole line
//! (`App::configure`, the kernel binary's `cmdline` with its key table) and hands these back;
//! they are here, built on the host too, so that the app's parser and its tests name them.

/// What the OS needs from the command line before it starts the other CPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BootConfig {
    /// `loglevel=`.
    pub loglevel: log::LevelFilter,
    /// `maxcpus=N` (Linux's name): start at most N CPUs, the boot CPU included.
    pub maxcpus: Option<usize>,
    /// `smp_inject=`: a deliberate bring-up failure.
    pub smp_inject: SmpInject,
}

/// `smp_inject=`: a deliberate bring-up failure, to show that a CPU that does not come online is
/// reported and the boot goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmpInject {
    /// Start every CPU normally.
    None,
    /// Give CPU 1 no stack: it halts in the trampoline and never comes online.
    ApNoStack,
}
