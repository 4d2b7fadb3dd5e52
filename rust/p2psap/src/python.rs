//! The `geofed_p2psap` Python module: an endpoint with send / receive / wait.
//! Every blocking call releases the GIL, so other Python threads (and the
//! protocol's own threads, which never take it) keep running.

use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::control::ControlError;
use crate::io::{self, Error};
use crate::{Context, Location, Network, Scheme};

create_exception!(geofed_p2psap, ProtocolError, PyRuntimeError, "A P2PSAP session failed.");
create_exception!(geofed_p2psap, AuthenticationError, ProtocolError, "A peer failed the job-secret check.");
create_exception!(geofed_p2psap, UnknownPeerError, ProtocolError, "No session with that peer.");

fn to_py(e: Error) -> PyErr {
    match e {
        Error::Control(ControlError::BadSecret) => AuthenticationError::new_err(e.to_string()),
        Error::Control(ControlError::Rejected(ref r)) if r.contains("authentication") => {
            AuthenticationError::new_err(e.to_string())
        }
        Error::UnknownPeer(_) => UnknownPeerError::new_err(e.to_string()),
        Error::Control(ControlError::Rejected(ref r)) if r.contains("unknown peer") => {
            UnknownPeerError::new_err(e.to_string())
        }
        _ => ProtocolError::new_err(e.to_string()),
    }
}

fn context(scheme: &str, location: &str, network: &str) -> PyResult<Context> {
    let scheme = match scheme {
        "sync" => Scheme::Synchronous,
        "async" => Scheme::Asynchronous,
        _ => return Err(PyValueError::new_err(format!("scheme: expected sync or async, got {scheme:?}"))),
    };
    let location = match location {
        "intra" => Location::IntraSite,
        "inter" => Location::InterSite,
        _ => return Err(PyValueError::new_err(format!("location: expected intra or inter, got {location:?}"))),
    };
    let network = match network {
        "eth" => Network::Ethernet,
        "fabric" => Network::ReliableFabric,
        _ => return Err(PyValueError::new_err(format!("network: expected eth or fabric, got {network:?}"))),
    };
    Ok(Context { scheme, location, network })
}

fn secs(t: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(t)
        .map_err(|_| PyValueError::new_err(format!("timeout: expected seconds >= 0, got {t}")))
}

/// The micro-protocols Table I composes for a context.
#[pyfunction]
fn stack(scheme: &str, location: &str, network: &str) -> PyResult<Vec<String>> {
    Ok(context(scheme, location, network)?.compose().0.iter().map(|m| format!("{m:?}")).collect())
}

#[pyclass(module = "geofed_p2psap")]
struct Endpoint {
    inner: io::Endpoint,
}

#[pymethods]
impl Endpoint {
    /// Peer `me` of a job of `npeers` peers; `secret` is the job's shared secret.
    #[new]
    #[pyo3(signature = (me, npeers, secret, host = "0.0.0.0"))]
    fn new(me: u32, npeers: u32, secret: &[u8], host: &str) -> PyResult<Self> {
        if secret.is_empty() {
            return Err(PyValueError::new_err("secret: the job secret is empty"));
        }
        if me >= npeers {
            return Err(PyValueError::new_err(format!("me: peer {me} is not in a job of {npeers} peers")));
        }
        Ok(Endpoint { inner: io::Endpoint::open(me, npeers, secret, host).map_err(to_py)? })
    }

    /// The TCP port of the control channel (and of fabric data streams).
    #[getter]
    fn port(&self) -> u16 {
        self.inner.port()
    }

    #[pyo3(signature = (peer, addr, scheme, location, network = "eth"))]
    fn connect(
        &self,
        py: Python<'_>,
        peer: u32,
        addr: &str,
        scheme: &str,
        location: &str,
        network: &str,
    ) -> PyResult<()> {
        let ctx = context(scheme, location, network)?;
        py.allow_threads(|| self.inner.connect(peer, addr, ctx)).map_err(to_py)
    }

    #[pyo3(signature = (peer, scheme, location, network = "eth"))]
    fn reconfigure(&self, py: Python<'_>, peer: u32, scheme: &str, location: &str, network: &str) -> PyResult<()> {
        let ctx = context(scheme, location, network)?;
        py.allow_threads(|| self.inner.reconfigure(peer, ctx)).map_err(to_py)
    }

    #[pyo3(signature = (peer, timeout = 30.0))]
    fn wait_peer(&self, py: Python<'_>, peer: u32, timeout: f64) -> PyResult<()> {
        let t = secs(timeout)?;
        py.allow_threads(|| self.inner.wait_peer(peer, t)).map_err(to_py)
    }

    /// Returns the message's number (per peer and tag).
    fn send(&self, py: Python<'_>, peer: u32, tag: u32, data: &[u8]) -> PyResult<u64> {
        py.allow_threads(|| self.inner.send(peer, tag, data)).map_err(to_py)
    }

    /// (number, bytes) or None: synchronous waits up to `timeout` (None: forever);
    /// asynchronous returns at once.
    #[pyo3(signature = (peer, tag, timeout = None))]
    fn receive<'py>(
        &self,
        py: Python<'py>,
        peer: u32,
        tag: u32,
        timeout: Option<f64>,
    ) -> PyResult<Option<(u64, Bound<'py, PyBytes>)>> {
        let t = timeout.map(secs).transpose()?;
        let got = py.allow_threads(|| self.inner.receive(peer, tag, t)).map_err(to_py)?;
        Ok(got.map(|(n, d)| (n, PyBytes::new(py, &d))))
    }

    fn wait(&self, py: Python<'_>, peer: u32, tag: u32, timeout: f64) -> PyResult<bool> {
        let t = secs(timeout)?;
        py.allow_threads(|| self.inner.wait(peer, tag, t)).map_err(to_py)
    }

    #[pyo3(signature = (peer, timeout = 30.0))]
    fn flush(&self, py: Python<'_>, peer: u32, timeout: f64) -> PyResult<bool> {
        let t = secs(timeout)?;
        py.allow_threads(|| self.inner.flush(peer, t)).map_err(to_py)
    }

    fn control_send(&self, peer: u32, data: &[u8]) -> PyResult<()> {
        self.inner.control_send(peer, data).map_err(to_py)
    }

    #[pyo3(signature = (timeout = None))]
    fn control_receive<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Option<(u32, Bound<'py, PyBytes>)>> {
        let t = timeout.map(secs).transpose()?;
        let got = py.allow_threads(|| self.inner.control_receive(t));
        Ok(got.map(|(p, d)| (p, PyBytes::new(py, &d))))
    }

    fn stats<'py>(&self, py: Python<'py>, peer: u32) -> PyResult<Bound<'py, PyDict>> {
        let ps = self.inner.stats(peer).map_err(to_py)?;
        let s = ps.counters;
        let d = PyDict::new(py);
        d.set_item("stack", ps.stack)?;
        d.set_item("session", format!("{:016x}", ps.session))?;
        d.set_item("cwnd", ps.cwnd)?;
        d.set_item("srtt_ms", ps.srtt.map(|x| x.as_secs_f64() * 1e3))?;
        for (k, v) in [
            ("segments_sent", s.segments_sent),
            ("bytes_sent", s.bytes_sent),
            ("retransmissions", s.retransmissions),
            ("fast_retransmits", s.fast_retransmits),
            ("timeouts", s.timeouts),
            ("segments_received", s.segments_received),
            ("duplicates", s.duplicates),
            ("stale", s.stale),
            ("overwritten", s.overwritten),
            ("unknown_session", s.unknown_session),
            ("malformed", s.malformed),
            ("messages_delivered", s.messages_delivered),
            ("lost", s.lost),
        ] {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// Datagrams and fabric streams dropped because no session of this endpoint matched.
    #[getter]
    fn unknown_sessions(&self) -> u64 {
        self.inner.unknown_session()
    }

    fn close(&self, py: Python<'_>) {
        py.allow_threads(|| self.inner.close())
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __exit__(&self, py: Python<'_>, _t: PyObject, _v: PyObject, _tb: PyObject) {
        self.close(py)
    }
}

#[pymodule]
fn geofed_p2psap(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Endpoint>()?;
    m.add_function(wrap_pyfunction!(stack, m)?)?;
    m.add("ProtocolError", m.py().get_type::<ProtocolError>())?;
    m.add("AuthenticationError", m.py().get_type::<AuthenticationError>())?;
    m.add("UnknownPeerError", m.py().get_type::<UnknownPeerError>())?;
    m.add("BLOCK_SIZE", crate::segment::BLOCK_SIZE)?;
    m.add("BLOCKS", crate::fabric::BLOCKS)?;
    Ok(())
}
