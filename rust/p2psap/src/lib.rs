//! P2PSAP: a self-adaptive transport protocol for peer-to-peer iterative
//! computing (seed 003), in the quinn-proto style.
//!
//! - [`context`]: the context of a pair of peers and the micro-protocol stack it composes (Table I);
//! - [`connection`]: the data channel as a state machine without I/O;
//! - [`rtt`], [`cc`]: RTTEstimation (RFC 6298) and window congestion control (NewReno, CCID2);
//! - [`control`]: the control channel's frames and authenticated opening;
//! - [`io`]: the I/O layer (UDP datagrams, or a reliable stream standing for the fabric) and the endpoint,
//!   its socket calls in `geofed_os`;
//! - `python` (feature `python`): the `geofed_p2psap` module.

pub mod cc;
pub mod connection;
pub mod context;
pub mod control;
pub mod rtt;
pub mod segment;

pub use connection::{Config, Connection, SendError, Stats};
pub use context::{Context, Location, MicroProtocol, Network, Scheme, Stack};
pub mod fabric;
pub mod io;
#[cfg(feature = "python")]
mod python;
