//! The context of a pair of peers and the micro-protocol stack it selects
//! (seed 003, Table I).

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    Synchronous,
    Asynchronous,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Location {
    IntraSite,
    InterSite,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Network {
    /// A fabric whose hardware gives reliability, ordering and flow control
    /// (InfiniBand in the seed; a TCP stream stands for it here).
    ReliableFabric,
    /// Best-effort datagrams (Ethernet/IP; UDP here).
    Ethernet,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Context {
    pub scheme: Scheme,
    pub location: Location,
    pub network: Network,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MicroProtocol {
    TransportDriver,
    Resize,
    Synchronous,
    Asynchronous,
    SequencedSegment,
    PositiveAck,
    Retransmit,
    RttEstimation,
    ReliableFifo,
    DuplicateAck,
    WindCongCtrl,
    TcpNewRenoCa,
    DccpAck,
    DccpWindCCtrl,
    TcpCongAvoid,
}

/// A composed data channel: the micro-protocols in stack order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stack(pub Vec<MicroProtocol>);

impl Stack {
    pub fn has(&self, m: MicroProtocol) -> bool {
        self.0.contains(&m)
    }

    pub fn scheme(&self) -> Scheme {
        if self.has(MicroProtocol::Asynchronous) {
            Scheme::Asynchronous
        } else {
            Scheme::Synchronous
        }
    }

    /// Software acknowledgements and retransmission (the Ethernet synchronous stacks).
    pub fn reliable(&self) -> bool {
        self.has(MicroProtocol::PositiveAck)
    }
}

impl fmt::Display for Stack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self.0.iter().map(|m| format!("{m:?}")).collect();
        write!(f, "{}", names.join(", "))
    }
}

impl Context {
    /// Table I of seed 003.
    pub fn compose(&self) -> Stack {
        use MicroProtocol::*;
        let mut s = vec![TransportDriver, Resize];
        match (self.scheme, self.network) {
            (Scheme::Synchronous, Network::ReliableFabric) => s.push(Synchronous),
            (Scheme::Synchronous, Network::Ethernet) => {
                s.extend([Synchronous, SequencedSegment, PositiveAck, Retransmit, RttEstimation, ReliableFifo]);
                if self.location == Location::InterSite {
                    s.extend([DuplicateAck, WindCongCtrl, TcpNewRenoCa]);
                }
            }
            (Scheme::Asynchronous, Network::Ethernet) if self.location == Location::InterSite => {
                s.extend([Asynchronous, DccpAck, DccpWindCCtrl, TcpCongAvoid])
            }
            (Scheme::Asynchronous, _) => s.push(Asynchronous),
        }
        Stack(s)
    }

    pub fn encode(&self) -> u8 {
        (matches!(self.scheme, Scheme::Asynchronous) as u8)
            | (matches!(self.location, Location::InterSite) as u8) << 1
            | (matches!(self.network, Network::Ethernet) as u8) << 2
    }

    pub fn decode(b: u8) -> Option<Context> {
        if b > 7 {
            return None;
        }
        Some(Context {
            scheme: if b & 1 != 0 { Scheme::Asynchronous } else { Scheme::Synchronous },
            location: if b & 2 != 0 { Location::InterSite } else { Location::IntraSite },
            network: if b & 4 != 0 { Network::Ethernet } else { Network::ReliableFabric },
        })
    }

    /// All eight contexts of Table I.
    pub fn all() -> Vec<Context> {
        (0..8).map(|b| Context::decode(b).unwrap()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use MicroProtocol::*;

    fn ctx(s: Scheme, l: Location, n: Network) -> Context {
        Context { scheme: s, location: l, network: n }
    }

    #[test]
    fn table_one() {
        use Location::*;
        use Network::*;
        use Scheme::{Asynchronous as Async, Synchronous as Sync};
        let base = [TransportDriver, Resize];
        let with = |extra: &[MicroProtocol]| Stack(base.iter().chain(extra).copied().collect());
        let reliable = [Synchronous, SequencedSegment, PositiveAck, Retransmit, RttEstimation, ReliableFifo];
        assert_eq!(ctx(Sync, IntraSite, ReliableFabric).compose(), with(&[Synchronous]));
        assert_eq!(ctx(Sync, InterSite, ReliableFabric).compose(), with(&[Synchronous]));
        assert_eq!(ctx(Sync, IntraSite, Ethernet).compose(), with(&reliable));
        let mut inter = reliable.to_vec();
        inter.extend([DuplicateAck, WindCongCtrl, TcpNewRenoCa]);
        assert_eq!(ctx(Sync, InterSite, Ethernet).compose(), with(&inter));
        for (l, n) in [(IntraSite, ReliableFabric), (IntraSite, Ethernet), (InterSite, ReliableFabric)] {
            assert_eq!(ctx(Async, l, n).compose(), with(&[Asynchronous]));
        }
        assert_eq!(
            ctx(Async, InterSite, Ethernet).compose(),
            with(&[Asynchronous, DccpAck, DccpWindCCtrl, TcpCongAvoid])
        );
    }

    #[test]
    fn context_codes_round_trip() {
        for c in Context::all() {
            assert_eq!(Context::decode(c.encode()), Some(c));
        }
        assert_eq!(Context::decode(8), None);
    }
}
