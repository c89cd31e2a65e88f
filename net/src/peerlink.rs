//! The guest's side of the peer link (docs/network.md, "The peer
//! link"): the static address, and the helpers the test and benchmark
//! clients share to talk to the host peer's services (protocol and
//! addresses in `ucore::netpeer`).
//!
//! Invariants: every blocking call takes the caller's timeout; a line
//! longer than [`MAX_LINE`] or not UTF-8 is an error, never a panic.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use smoltcp::time::Duration;
use smoltcp::wire::{IpAddress, IpEndpoint, Ipv4Address, Ipv4Cidr};
use ucore::netpeer as np;

use crate::stack::{Driver, Error, Net, TcpConfig, TcpStream};

/// The longest answer line the peer sends.
pub const MAX_LINE: usize = 512;

/// Gives the interface the guest's static address on the link (no
/// route: the link is all it reaches).
pub fn configure<D: Driver>(net: &Net<D>) {
    let [a, b, c, d] = np::GUEST_IP;
    net.set_address(
        Ipv4Cidr::new(Ipv4Address::new(a, b, c, d), np::PREFIX),
        None,
    );
}

/// The peer's address.
pub fn peer_ip() -> Ipv4Address {
    let [a, b, c, d] = np::PEER_IP;
    Ipv4Address::new(a, b, c, d)
}

/// The peer's service at `port`.
pub fn peer(port: u16) -> IpEndpoint {
    IpEndpoint::new(IpAddress::Ipv4(peer_ip()), port)
}

/// A connection to the peer's TCP service at `port`, reads and writes
/// limited by `timeout` too.
pub fn connect<D: Driver>(
    net: &Net<D>,
    port: u16,
    timeout: Duration,
) -> Result<TcpStream<D>, Error> {
    let mut s = TcpStream::connect(net, peer(port), TcpConfig::DEFAULT, Some(timeout))?;
    s.set_read_timeout(Some(timeout));
    s.set_write_timeout(Some(timeout));
    Ok(s)
}

/// One line from `s`, without its newline.
pub fn read_line<D: Driver>(s: &mut TcpStream<D>) -> Result<String, String> {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    loop {
        match s.read(&mut b) {
            Ok(1) if b[0] == b'\n' => break,
            Ok(1) if line.len() < MAX_LINE => line.push(b[0]),
            Ok(1) => return Err(format!("a line over {MAX_LINE} bytes")),
            Ok(_) => return Err("the connection ended before the line".into()),
            Err(e) => return Err(format!("reading a line: {e}")),
        }
    }
    String::from_utf8(line).map_err(|_| "a line that is not UTF-8".into())
}

/// A command on the peer's in-link control connection `c`, and its answer.
pub fn control<D: Driver>(c: &mut TcpStream<D>, command: &str) -> Result<String, String> {
    c.write_all(format!("{command}\n").as_bytes())
        .map_err(|e| format!("{command}: {e}"))?;
    read_line(c)
}
