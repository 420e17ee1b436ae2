//! The virtio-net driver against a fake device: frames both ways with owned buffers, and a
//! device that returns tokens it was never given, lies about lengths or never finishes a
//! reset. None of it may panic, spin, or stop a queue for good.

mod virtio_fake;

use drivers::delay::CountingDelay;
use drivers::virtio_net::device::{NetError, QueueKind, VirtioNet};
use drivers::virtio_net::wire::{RECEIVE_QUEUE, TRANSMIT_QUEUE, feature};
use virtio_fake::HeapHal;
use virtio_fake::net::{FakeNet, HEADER};

type Net = VirtioNet<HeapHal, FakeNet, Box<[u8]>, CountingDelay, 16>;

fn buffer() -> Box<[u8]> {
    vec![0u8; 2048].into_boxed_slice()
}

/// A device with `posted` receive buffers.
fn net(posted: usize) -> (FakeNet, Net) {
    let fake = FakeNet::new();
    let mut net = Net::new(fake.clone(), CountingDelay::default()).expect("device comes up");
    for _ in 0..posted {
        net.post_receive(buffer()).expect("room for the buffer");
    }
    (fake, net)
}

fn frame(byte: u8) -> Vec<u8> {
    vec![byte; 60]
}

fn send(net: &mut Net, frame: &[u8]) {
    let mut buffer = buffer();
    let header = net.header_len();
    buffer[header..header + frame.len()].copy_from_slice(frame);
    net.send(buffer, frame.len()).expect("queued");
}

#[test]
fn frames_go_both_ways_and_buffers_come_back() {
    let (fake, mut net) = net(4);
    assert_eq!(net.mac(), [0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
    assert_eq!(net.header_len(), HEADER);
    let accepted = fake.state().driver_features;
    assert_eq!(
        accepted & feature::RING_EVENT_IDX,
        0,
        "EVENT_IDX is declined"
    );
    assert_ne!(accepted & feature::VERSION_1, 0);

    assert!(fake.state().deliver(&frame(1)));
    assert!(fake.state().deliver(&frame(2)));
    for byte in [1, 2] {
        let received = net.receive().unwrap().expect("a frame");
        assert_eq!(received.frame(), frame(byte));
        net.post_receive(received.into_buffer()).unwrap();
    }
    assert!(net.receive().unwrap().is_none());
    assert_eq!(net.posted_receive_buffers(), 4);

    fake.state().hold_transmit = true;
    send(&mut net, &frame(3));
    assert_eq!(net.frames_in_flight(), 1);
    assert_eq!(net.reclaim_sent(), Ok(0), "the device has not sent it yet");
    fake.state().hold_transmit = false;
    send(&mut net, &frame(4));
    assert_eq!(fake.state().sent, [frame(3), frame(4)]);
}

#[test]
fn small_buffers_and_long_frames_are_refused_with_the_buffer_back() {
    let (_fake, mut net) = net(0);
    let refused = net
        .post_receive(vec![0u8; 100].into_boxed_slice())
        .unwrap_err();
    assert_eq!(refused.buffer.len(), 100);
    assert_eq!(
        refused.error,
        NetError::BufferTooSmall {
            len_bytes: 100,
            needed_bytes: HEADER + 1514
        }
    );
    let refused = net.send(buffer(), 2048).unwrap_err();
    assert!(matches!(refused.error, NetError::BufferTooSmall { .. }));
    assert_eq!(net.frames_in_flight(), 0);
}

/// An unknown used token cannot be popped: without a reset it would come back on every poll and
/// receiving would stop for good.
#[test]
fn an_unknown_receive_token_resets_the_device_and_receiving_goes_on() {
    let (fake, mut net) = net(4);
    // Tokens 0..4 are posted; 9 was never given to the device.
    fake.state().push_used(RECEIVE_QUEUE, 9, 100);
    assert_eq!(
        net.receive().err(),
        Some(NetError::UnknownToken {
            queue: QueueKind::Receive,
            token: 9
        })
    );
    assert_eq!(fake.state().resets, 1);
    assert_eq!(net.counters().resets, 1);
    assert_eq!(net.posted_receive_buffers(), 4, "buffers are posted again");
    assert!(fake.state().deliver(&frame(7)));
    let received = net
        .receive()
        .expect("the queue works again")
        .expect("a frame");
    assert_eq!(received.frame(), frame(7));
}

/// The same on the transmit queue: without a reset, completions would stop for good.
#[test]
fn an_unknown_transmit_token_resets_the_device_and_sending_goes_on() {
    let (fake, mut net) = net(2);
    fake.state().hold_transmit = true;
    send(&mut net, &frame(1));
    fake.state().push_used(TRANSMIT_QUEUE, 11, 0);
    assert_eq!(
        net.reclaim_sent(),
        Err(NetError::UnknownToken {
            queue: QueueKind::Transmit,
            token: 11
        })
    );
    assert_eq!(net.frames_in_flight(), 0, "the frame in flight was dropped");
    fake.state().hold_transmit = false;
    send(&mut net, &frame(2));
    assert_eq!(net.reclaim_sent(), Ok(1));
    assert_eq!(fake.state().sent.last(), Some(&frame(2)));
    assert_eq!(net.posted_receive_buffers(), 2);
}

#[test]
fn a_used_length_that_does_not_fit_drops_the_frame_and_keeps_the_buffer() {
    let (fake, mut net) = net(2);
    for used_len in [4, 1_000_000] {
        assert!(fake.state().deliver_with_length(used_len));
        assert!(matches!(
            net.receive(),
            Err(NetError::BadLength { used_len: got, .. }) if got == used_len
        ));
        assert_eq!(net.posted_receive_buffers(), 2);
    }
    assert_eq!(net.counters().bad_lengths, 2);
    assert!(fake.state().deliver(&frame(5)));
    assert_eq!(net.receive().unwrap().unwrap().frame(), frame(5));
}

#[test]
fn a_device_that_never_resets_is_abandoned_without_spinning() {
    let (fake, mut net) = net(2);
    fake.state().never_reset = true;
    fake.state().push_used(RECEIVE_QUEUE, 9, 100);
    assert!(matches!(
        net.receive(),
        Err(NetError::ResetTimeout { waited_us }) if waited_us >= 1_000_000
    ));
    assert!(net.is_dead());
    assert_eq!(net.receive().err(), Some(NetError::Dead));
    assert_eq!(net.reclaim_sent(), Err(NetError::Dead));
    assert!(!net.can_send());
    let refused = net.send(buffer(), 60).unwrap_err();
    assert_eq!(refused.error, NetError::Dead);
    drop(net); // leaks the device's memory instead of waiting for it
}

#[test]
fn dropping_the_driver_resets_the_device() {
    let (fake, net) = net(3);
    drop(net);
    assert_eq!(fake.state().resets, 1);
    assert!(fake.state().status.is_empty());
}
