//! IOC bring-up (in progress).
