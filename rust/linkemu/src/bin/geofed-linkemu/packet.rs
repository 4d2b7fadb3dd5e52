//! The emulator's two ends: a packet socket on each interface, taking every
//! frame whole (GSO super-frames and offload state intact) with its kernel
//! receive stamp.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;

use geofed_os::sockopt::{grow_recv_buffer, grow_send_buffer, setsockopt};

use crate::PROG;

/// Big socket buffers so bursts are queued by the model, not dropped by the kernel.
const SOCK_BUF: libc::c_int = 32 << 20;
/// From linux/if_packet.h; older libc crates lack it.
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

/// A bound, promiscuous packet socket on `ifname`; errors name `flag` and what failed.
pub fn open_packet_socket(flag: &str, ifname: &str) -> Result<RawFd, String> {
    let cname = CString::new(ifname).map_err(|_| format!("{flag}: invalid interface name"))?;
    let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if ifindex == 0 {
        return Err(format!("{flag}: no interface '{ifname}' in this network namespace"));
    }
    let e = |what: &str| format!("{flag} {ifname}: {what}: {}", io::Error::last_os_error());
    // Protocol 0 at creation: the socket hears nothing until bind names the
    // device, so no frames from other interfaces sneak in meanwhile.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(e("socket(AF_PACKET)"));
    }
    // Keep veth's GSO super-frames and checksum-offload state intact end to
    // end; without this every 64 KiB frame would be segmented and checksummed.
    setsockopt(fd, libc::SOL_PACKET, libc::PACKET_VNET_HDR, &(1 as libc::c_int)).map_err(|_| e("PACKET_VNET_HDR"))?;
    // Our own sends on this interface must not come back as input.
    if setsockopt(fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &(1 as libc::c_int)).is_err() {
        eprintln!("{PROG}: warning: PACKET_IGNORE_OUTGOING unsupported; filtering by pkttype");
    }
    let _ = grow_recv_buffer(fd, SOCK_BUF);
    let _ = grow_send_buffer(fd, SOCK_BUF);
    // Kernel receive stamps let arrival time exclude our own wake-up latency.
    if setsockopt(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &(1 as libc::c_int)).is_err() {
        eprintln!("{PROG}: warning: SO_TIMESTAMPNS unsupported; using recv time as arrival");
    }
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    sll.sll_ifindex = ifindex as i32;
    let r = unsafe {
        libc::bind(
            fd,
            &sll as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(e("bind"));
    }
    // Frames are addressed to the far side's MAC, not ours: be a wire, take all.
    let mr = libc::packet_mreq {
        mr_ifindex: ifindex as i32,
        mr_type: libc::PACKET_MR_PROMISC as u16,
        mr_alen: 0,
        mr_address: [0; 8],
    };
    if setsockopt(fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mr).is_err() {
        return Err(e("PACKET_MR_PROMISC"));
    }
    Ok(fd)
}
