//! `drivers::virtio::queue::OwnedQueue` against a fake device that misbehaves: a token it was
//! never given, a token returned twice, a used length beyond the buffer, and a full queue.
//! None may panic, lose a buffer or hand one back while the device still has it.

mod virtio_fake;

use drivers::virtio::queue::{DataDirection, DeviceWrites, Exchange, OwnedQueue, QueueError};
use drivers::virtio_net::wire::{Features, RECEIVE_QUEUE};
use virtio_drivers::queue::VirtQueue;
use virtio_drivers::transport::Transport;
use virtio_fake::HeapHal;
use virtio_fake::net::FakeNet;

const SIZE: usize = 8;
type Queue = OwnedQueue<HeapHal, DeviceWrites<Box<[u8]>>, u32, SIZE>;
type ExchangeQueue = OwnedQueue<HeapHal, Exchange<Box<[u8]>, Box<[u8]>, 8>, u32, SIZE>;

/// A receive queue admitting `limit` buffers on a fake virtio-net device.
fn queue(limit: usize) -> (FakeNet, Queue) {
    let mut fake = FakeNet::new();
    fake.begin_init(Features::all());
    let ring = VirtQueue::new(&mut fake, RECEIVE_QUEUE, false, false).expect("queue set up");
    fake.finish_init();
    (fake, OwnedQueue::new(ring, limit))
}

fn buffer(len: usize) -> DeviceWrites<Box<[u8]>> {
    DeviceWrites(vec![0u8; len].into_boxed_slice())
}

#[test]
fn a_completion_hands_back_the_same_buffer_and_record() {
    let (fake, mut queue) = queue(4);
    let lent = buffer(2048);
    let address = lent.0.as_ptr();
    queue.add(lent, 7).map_err(|e| e.error).unwrap();
    queue.add(buffer(2048), 8).map_err(|e| e.error).unwrap();
    assert!(fake.state().deliver(&[0xab; 60]));
    let done = queue.pop().unwrap().expect("a completion");
    assert_eq!((done.meta, done.lent.0.as_ptr()), (7, address));
    assert_eq!(done.checked_used_len(), Ok(12 + 60));
    assert_eq!(
        done.lent.0[12], 0xab,
        "the device wrote into the buffer lent"
    );
    assert_eq!(queue.in_flight(), 1);
    assert!(queue.pop().unwrap().is_none());
}

#[test]
fn an_unknown_token_is_an_error_and_leaves_every_buffer_lent() {
    let (fake, mut queue) = queue(4);
    let token = queue.add(buffer(2048), 1).map_err(|e| e.error).unwrap();
    let never_given = (token + 3) % SIZE as u16;
    fake.state()
        .push_used(RECEIVE_QUEUE, u32::from(never_given), 10);
    assert_eq!(
        queue.pop().err(),
        Some(QueueError::UnknownToken { token: never_given })
    );
    assert_eq!(queue.in_flight(), 1);
    assert!(queue.lent(token).is_ok(), "the real buffer stays lent");
    // Out of the ring's range entirely.
    let (fake, mut queue) = self::queue(4);
    fake.state().push_used(RECEIVE_QUEUE, 4000, 10);
    assert_eq!(
        queue.pop().err(),
        Some(QueueError::UnknownToken { token: 4000 })
    );
}

#[test]
fn a_token_returned_twice_is_unknown_the_second_time() {
    let (fake, mut queue) = queue(4);
    let token = queue.add(buffer(2048), 1).map_err(|e| e.error).unwrap();
    assert!(fake.state().deliver(&[1; 60]));
    let done = queue.pop().unwrap().expect("first completion");
    assert_eq!(done.token, token);
    fake.state().push_used(RECEIVE_QUEUE, u32::from(token), 72);
    assert_eq!(queue.pop().err(), Some(QueueError::UnknownToken { token }));
    assert_eq!(queue.in_flight(), 0);
}

#[test]
fn a_used_length_beyond_the_buffer_is_refused_with_both_lengths() {
    let (fake, mut queue) = queue(4);
    queue.add(buffer(100), 1).map_err(|e| e.error).unwrap();
    assert!(fake.state().deliver_with_length(5000));
    let done = queue.pop().unwrap().expect("popped all the same");
    assert_eq!(
        done.checked_used_len(),
        Err(QueueError::UsedLengthTooLong {
            used_len: 5000,
            lent_len: 100
        })
    );
    assert_eq!(done.lent.0.len(), 100, "the buffer comes back whole");
}

#[test]
fn a_full_queue_hands_the_request_back() {
    let (_fake, mut queue) = queue(2);
    for meta in 0..2 {
        queue.add(buffer(64), meta).map_err(|e| e.error).unwrap();
    }
    let refused = queue.add(buffer(64), 9).expect_err("over the limit");
    assert_eq!(
        refused.error,
        QueueError::Full {
            in_flight: 2,
            limit: 2
        }
    );
    let (lent, meta) = refused.returned.expect("handed back");
    assert_eq!((lent.0.len(), meta), (64, 9));
    // Within the limit, the ring's descriptors can still run out: three per exchange.
    let mut fake = FakeNet::new();
    fake.begin_init(Features::all());
    let ring = VirtQueue::new(&mut fake, RECEIVE_QUEUE, false, false).expect("queue set up");
    fake.finish_init();
    let mut queue: ExchangeQueue = OwnedQueue::new(ring, SIZE);
    let exchange = || {
        let header = vec![0u8; 16].into_boxed_slice();
        let data = vec![0u8; 64].into_boxed_slice();
        Exchange::new(header, data, DataDirection::FromDevice)
    };
    for meta in 0..(SIZE / 3) as u32 {
        queue.add(exchange(), meta).map_err(|e| e.error).unwrap();
    }
    let refused = queue.add(exchange(), 99).expect_err("no descriptors left");
    assert_eq!(
        refused.error,
        QueueError::Virtqueue(virtio_drivers::Error::QueueFull)
    );
    let (lent, meta) = refused.returned.expect("handed back");
    assert_eq!((lent.data().len(), meta), (64, 99));
}

#[test]
fn a_confirmed_reset_hands_back_everything_in_token_order() {
    let (_fake, mut queue) = queue(4);
    for meta in [3, 4, 5] {
        queue.add(buffer(64), meta).map_err(|e| e.error).unwrap();
    }
    let back: Vec<u32> = queue
        .drain_after_reset()
        .into_iter()
        .map(|(_, m)| m)
        .collect();
    assert_eq!(back, [3, 4, 5]);
    assert_eq!(queue.in_flight(), 0);
}
