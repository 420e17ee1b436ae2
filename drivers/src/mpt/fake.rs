//! Fake IOC (in progress).
