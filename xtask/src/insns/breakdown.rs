//! Attributing counted instructions to the kernel's functions and layers (`--breakdown`).
