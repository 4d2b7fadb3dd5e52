//! The endpoint over real loopback sockets, both data paths: what the Python
//! bindings and the obstacle application rely on, checked without them.

use std::time::Duration;

use geofed_p2psap::control::ControlError;
use geofed_p2psap::io::{Endpoint, Error};
use geofed_p2psap::{Context, Location, Network, Scheme};

const T: Duration = Duration::from_secs(10);

fn ctx(scheme: Scheme, network: Network) -> Context {
    Context { scheme, location: Location::InterSite, network }
}

fn connected(network: Network) -> (Endpoint, Endpoint) {
    let a = Endpoint::open(0, 2, b"job-secret", "127.0.0.1").unwrap();
    let b = Endpoint::open(1, 2, b"job-secret", "127.0.0.1").unwrap();
    a.connect(1, &format!("127.0.0.1:{}", b.port()), ctx(Scheme::Synchronous, network)).unwrap();
    b.wait_peer(0, T).unwrap();
    (a, b)
}

#[test]
fn both_paths_deliver_in_order_exactly_once_then_reconfigure() {
    for network in [Network::Ethernet, Network::ReliableFabric] {
        let (a, b) = connected(network);
        // Sizes from under one segment to many: runs of segments leave in GSO sends and
        // arrive in GRO reads (Ethernet), or fill many blocks (fabric).
        let msgs: Vec<Vec<u8>> = (0..200).map(|i| vec![(i % 251) as u8; 100 + 997 * i]).collect();
        for m in &msgs {
            a.send(1, 5, m).unwrap();
        }
        for (i, m) in msgs.iter().enumerate() {
            let (n, d) = b.receive(0, 5, Some(T)).unwrap().unwrap_or_else(|| panic!("{network:?}: message {i}"));
            assert_eq!(n, i as u64 + 1, "{network:?}");
            assert!(d == *m, "{network:?}: message {n} altered");
        }
        assert_eq!(b.receive(0, 5, Some(Duration::from_millis(50))).unwrap(), None, "exactly once");
        assert!(a.flush(1, T).unwrap());
        let session = a.stats(1).unwrap().session;
        assert_eq!(b.stats(0).unwrap().session, session);

        // A new context: a new session over the same control connection.
        a.reconfigure(1, ctx(Scheme::Asynchronous, network)).unwrap();
        b.wait_peer(0, T).unwrap();
        let (sa, sb) = (a.stats(1).unwrap(), b.stats(0).unwrap());
        assert_ne!(sa.session, session);
        assert_eq!(sb.session, sa.session);
        assert!(sb.stack.contains("Asynchronous"), "{}", sb.stack);
        a.send(1, 2, b"newest").unwrap();
        assert!(b.wait(0, 2, T).unwrap());
        assert_eq!(b.receive(0, 2, None).unwrap(), Some((1, b"newest".to_vec())));
        assert_eq!(b.receive(0, 2, None).unwrap(), None, "asynchronous: nothing newer, at once");
        a.close();
        b.close();
    }
}

#[test]
fn control_messages_pass_both_ways() {
    let (a, b) = connected(Network::Ethernet);
    a.control_send(1, b"vote").unwrap();
    assert_eq!(b.control_receive(Some(T)), Some((0, b"vote".to_vec())));
    b.control_send(0, b"stop").unwrap();
    assert_eq!(a.control_receive(Some(T)), Some((1, b"stop".to_vec())));
    assert_eq!(a.control_receive(None), None);
}

#[test]
fn a_wrong_secret_or_an_outsider_is_refused() {
    let good = Endpoint::open(0, 2, b"right", "127.0.0.1").unwrap();
    let bad = Endpoint::open(1, 2, b"wrong", "127.0.0.1").unwrap();
    let sync = ctx(Scheme::Synchronous, Network::Ethernet);
    let e = good.connect(1, &format!("127.0.0.1:{}", bad.port()), sync).unwrap_err();
    assert!(matches!(e, Error::Control(ControlError::BadSecret | ControlError::Rejected(_))), "{e}");
    assert!(matches!(good.send(1, 0, b"x"), Err(Error::UnknownPeer(1))));
    assert!(matches!(good.connect(5, "127.0.0.1:1", sync), Err(Error::UnknownPeer(5))));
    let outsider = Endpoint::open(0, 9, b"right", "127.0.0.1").unwrap();
    let e = outsider.connect(0, &format!("127.0.0.1:{}", good.port()), sync).unwrap_err();
    assert!(e.to_string().contains("unknown peer 0"), "{e}");
}
