//! Hand-made Ethernet frames for the test, and their parsers: ARP (RFC
//! 826), IPv4 (RFC 791) with ICMP echo (RFC 792), UDP (RFC 768) carrying
//! DHCP (RFC 2131). Built byte by byte — the network stack (smoltcp)
//! comes later and is not what is tested here. Every parser reads through
//! bounds-checked `get`, so a short or odd frame is `None`, never a
//! panic.

use alloc::vec::Vec;

/// An IPv4 address.
pub type Ip = [u8; 4];
/// A MAC address.
pub type Mac = [u8; 6];

pub const BROADCAST: Mac = [0xff; 6];
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
const PROTO_ICMP: u8 = 1;
const PROTO_UDP: u8 = 17;
/// BOOTP's options field as slirp expects it: 312 bytes (its
/// `struct bootp_t` is taken whole, or the request is ignored).
const DHCP_OPTIONS: usize = 312;
const DHCP_MAGIC: [u8; 4] = [99, 130, 83, 99];

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn array<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at + N)?.try_into().ok()
}

/// The Internet checksum of `data` (RFC 1071).
fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn ethernet(dst: Mac, src: Mac, ethertype: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(64);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// An ARP request from `mac`/`ip` for `target`, broadcast.
pub fn arp_request(mac: Mac, ip: Ip, target: Ip) -> Vec<u8> {
    let mut f = ethernet(BROADCAST, mac, ETHERTYPE_ARP);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&mac);
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&target);
    f
}

/// If `f` is an ARP reply from `from` to `to`: the sender's MAC.
pub fn arp_reply(f: &[u8], from: Ip, to: Ip) -> Option<Mac> {
    let ok = be16(f, 12)? == ETHERTYPE_ARP
        && be16(f, 20)? == 2
        && array::<4>(f, 28)? == from
        && array::<4>(f, 38)? == to;
    ok.then(|| array::<6>(f, 22)).flatten()
}

/// An IPv4 packet of `proto` from `src` to `dst` carrying `payload`,
/// in a frame from `mac` to `dst_mac`.
fn ipv4(mac: Mac, dst_mac: Mac, src: Ip, dst: Ip, proto: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = ethernet(dst_mac, mac, ETHERTYPE_IPV4);
    let total = (20 + payload.len()) as u16;
    let mut h = [0u8; 20];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[6] = 0x40; // don't fragment
    h[8] = 64;
    h[9] = proto;
    h[12..16].copy_from_slice(&src);
    h[16..20].copy_from_slice(&dst);
    let sum = checksum(&h);
    h[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(payload);
    f
}

/// If `f` is an IPv4 packet of `proto` from `src` (header checksum
/// right): its payload, cut to the packet's own length.
fn ipv4_payload(f: &[u8], proto: u8, src: Option<Ip>) -> Option<&[u8]> {
    if be16(f, 12)? != ETHERTYPE_IPV4 {
        return None;
    }
    let ip = f.get(14..)?;
    let ihl = usize::from(*ip.first()? & 0xf) * 4;
    let total = usize::from(be16(ip, 2)?);
    let header = ip.get(..ihl)?;
    let ok = *ip.first()? >> 4 == 4
        && ihl >= 20
        && checksum(header) == 0
        && *ip.get(9)? == proto
        && src.is_none_or(|s| array::<4>(ip, 12) == Some(s));
    ok.then(|| ip.get(ihl..total)).flatten()
}

/// An ICMP echo request (`id`, `seq`, `data`) from `mac`/`ip` to
/// `dst` at `dst_mac`.
pub fn echo_request(
    mac: Mac,
    ip: Ip,
    dst_mac: Mac,
    dst: Ip,
    id: u16,
    seq: u16,
    data: &[u8],
) -> Vec<u8> {
    let mut icmp = Vec::with_capacity(8 + data.len());
    icmp.extend_from_slice(&[8, 0, 0, 0]);
    icmp.extend_from_slice(&id.to_be_bytes());
    icmp.extend_from_slice(&seq.to_be_bytes());
    icmp.extend_from_slice(data);
    let sum = checksum(&icmp);
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    ipv4(mac, dst_mac, ip, dst, PROTO_ICMP, &icmp)
}

/// If `f` is an ICMP echo reply from `src` with `id` and `seq` (checksum
/// right): its data.
pub fn echo_reply(f: &[u8], src: Ip, id: u16, seq: u16) -> Option<&[u8]> {
    let icmp = ipv4_payload(f, PROTO_ICMP, Some(src))?;
    let ok =
        *icmp.first()? == 0 && checksum(icmp) == 0 && be16(icmp, 4)? == id && be16(icmp, 6)? == seq;
    ok.then(|| icmp.get(8..)).flatten()
}

/// A DHCP DISCOVER (transaction `xid`) from `mac`: broadcast, from
/// 0.0.0.0:68 to 255.255.255.255:67.
pub fn dhcp_discover(mac: Mac, xid: u32) -> Vec<u8> {
    let mut bootp = Vec::with_capacity(236 + DHCP_OPTIONS);
    bootp.extend_from_slice(&[1, 1, 6, 0]); // request, Ethernet, 6, 0 hops
    bootp.extend_from_slice(&xid.to_be_bytes());
    bootp.extend_from_slice(&[0, 0, 0x80, 0]); // 0 s, broadcast reply
    bootp.extend_from_slice(&[0; 16]); // ciaddr, yiaddr, siaddr, giaddr
    bootp.extend_from_slice(&mac);
    bootp.extend_from_slice(&[0; 10 + 64 + 128]); // chaddr pad, sname, file
    let mut options = [0u8; DHCP_OPTIONS];
    let opts: &[u8] = &[53, 1, 1, 55, 3, 1, 3, 6, 255]; // DISCOVER; asks mask, router, DNS
    options[..4].copy_from_slice(&DHCP_MAGIC);
    options[4..4 + opts.len()].copy_from_slice(opts);
    bootp.extend_from_slice(&options);
    let mut udp = Vec::with_capacity(8 + bootp.len());
    udp.extend_from_slice(&68u16.to_be_bytes());
    udp.extend_from_slice(&67u16.to_be_bytes());
    udp.extend_from_slice(&((8 + bootp.len()) as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]); // no checksum (IPv4 allows it)
    udp.extend_from_slice(&bootp);
    ipv4(mac, BROADCAST, [0; 4], [255; 4], PROTO_UDP, &udp)
}

/// A DHCP OFFER as [`dhcp_offer`] reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offer {
    /// The address offered.
    pub address: Ip,
    /// The server (option 54).
    pub server: Option<Ip>,
    /// The router (option 3).
    pub router: Option<Ip>,
    /// Whether the frame went to the broadcast MAC.
    pub broadcast: bool,
}

/// If `f` is a DHCP OFFER for transaction `xid` (UDP 67 → 68).
pub fn dhcp_offer(f: &[u8], xid: u32) -> Option<Offer> {
    let udp = ipv4_payload(f, PROTO_UDP, None)?;
    if be16(udp, 0)? != 67 || be16(udp, 2)? != 68 {
        return None;
    }
    let bootp = udp.get(8..)?;
    if *bootp.first()? != 2 || be32(bootp, 4)? != xid || array::<4>(bootp, 236)? != DHCP_MAGIC {
        return None;
    }
    let mut offer = Offer {
        address: array::<4>(bootp, 16)?,
        server: None,
        router: None,
        broadcast: f.get(..6) == Some(&BROADCAST[..]),
    };
    let mut kind = None;
    let mut at = 240;
    while let Some(&code) = bootp.get(at) {
        match code {
            0 => {
                at += 1;
                continue;
            }
            255 => break,
            _ => {}
        }
        let len = usize::from(*bootp.get(at + 1)?);
        let value = bootp.get(at + 2..at + 2 + len)?;
        match (code, len) {
            (53, 1) => kind = Some(value[0]),
            (54, 4) => offer.server = array::<4>(value, 0),
            (3, l) if l >= 4 => offer.router = array::<4>(value, 0),
            _ => {}
        }
        at += 2 + len;
    }
    (kind == Some(2)).then_some(offer)
}

/// `ip` as text.
pub struct Dotted(pub Ip);

impl core::fmt::Display for Dotted {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let [a, b, c, d] = self.0;
        write!(f, "{a}.{b}.{c}.{d}")
    }
}
