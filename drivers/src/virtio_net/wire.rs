//! virtio-net wire formats (virtio 1.2 §5.1): queue numbers, feature bits, the configuration
//! fields the driver reads and the per-packet header. All little-endian.

/// The first receive queue (§5.1.2).
pub const RECEIVE_QUEUE: u16 = 0;
/// The first transmit queue (§5.1.2).
pub const TRANSMIT_QUEUE: u16 = 1;

/// Feature bits (§5.1.3 plus the transport bits of §6).
pub mod feature {
    /// The device has a MAC address in its configuration space.
    pub const MAC: u64 = 1 << 5;
    /// Receive buffers may be merged; the header then has `num_buffers`.
    pub const MRG_RXBUF: u64 = 1 << 15;
    /// The configuration space has a link status field.
    pub const STATUS: u64 = 1 << 16;
    /// Indirect descriptors.
    pub const RING_INDIRECT_DESC: u64 = 1 << 28;
    /// Used/avail event index notification suppression.
    pub const RING_EVENT_IDX: u64 = 1 << 29;
    /// Virtio 1.0 or later (modern device).
    pub const VERSION_1: u64 = 1 << 32;
}

bitflags::bitflags! {
    /// The features the driver accepts, for virtio-drivers' `Transport::begin_init`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Features: u64 {
        /// [`feature::MAC`].
        const MAC = feature::MAC;
        /// [`feature::STATUS`].
        const STATUS = feature::STATUS;
        /// [`feature::VERSION_1`].
        const VERSION_1 = feature::VERSION_1;
    }
}

/// Byte offset of `mac` in the configuration space (§5.1.4).
pub const CONFIG_MAC: usize = 0;

/// Largest Ethernet frame without the FCS (1500-byte MTU, no VLAN tag).
pub const MAX_FRAME_BYTES: usize = 1514;

/// Length of the `virtio_net_hdr` in front of every packet (§5.1.6): 12 bytes with
/// `num_buffers`, which a modern device always has (§5.1.6.1: with `VERSION_1` the field is
/// present whether or not `MRG_RXBUF` was negotiated), 10 bytes for a legacy device without
/// `MRG_RXBUF`.
#[must_use]
pub const fn header_len(features: u64) -> usize {
    if features & (feature::VERSION_1 | feature::MRG_RXBUF) != 0 {
        12
    } else {
        10
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_has_num_buffers_on_modern_devices() {
        assert_eq!(header_len(feature::VERSION_1 | feature::MAC), 12);
        assert_eq!(header_len(feature::MRG_RXBUF), 12);
        assert_eq!(header_len(feature::MAC), 10);
    }
}
