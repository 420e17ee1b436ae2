//! Request slots and reply handling (in progress).
