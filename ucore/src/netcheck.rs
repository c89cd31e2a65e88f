//! Hand-made Ethernet frames for the network driver's test client
//! (`test-nic`), and their parsers: ARP (RFC 826), IPv4 (RFC 791) with
//! ICMP echo (RFC 792), UDP (RFC 768) carrying DHCP (RFC 2131). Built
//! byte by byte — the network stack (smoltcp) comes later and is not what
//! tests the driver. Every parser reads through bounds-checked `get`, so
//! a short or odd frame is `None`, never a panic (host tests: every
//! prefix of each frame, and random bytes).

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
pub fn checksum(data: &[u8]) -> u16 {
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

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: Mac = [0x52, 0x54, 0, 0x12, 0x34, 0x56];
    const GW_MAC: Mac = [0x52, 0x55, 10, 0, 2, 2];
    const ME: Ip = [10, 0, 2, 15];
    const GW: Ip = [10, 0, 2, 2];

    #[test]
    fn checksum_is_rfc_1071s() {
        // RFC 1071, 3: 0001 f203 f4f5 f6f7 sums to ddf2.
        assert_eq!(checksum(&[0, 1, 0xf2, 3, 0xf4, 0xf5, 0xf6, 0xf7]), !0xddf2);
        // An odd length pads with a zero byte.
        assert_eq!(checksum(&[0xff]), !0xff00);
        assert_eq!(checksum(&[]), 0xffff);
    }

    /// What slirp answers to `request`: the same ARP packet, turned round.
    fn reply_to(request: &[u8]) -> Vec<u8> {
        let mut r = request.to_vec();
        r[0..6].copy_from_slice(&MAC);
        r[6..12].copy_from_slice(&GW_MAC);
        r[21] = 2;
        r[22..28].copy_from_slice(&GW_MAC);
        r[28..32].copy_from_slice(&GW);
        r[32..38].copy_from_slice(&MAC);
        r[38..42].copy_from_slice(&ME);
        r
    }

    #[test]
    fn an_arp_request_is_answered_by_its_reply_only() {
        let req = arp_request(MAC, ME, GW);
        assert_eq!(req.len(), 42);
        assert_eq!(&req[..6], &BROADCAST);
        assert_eq!(&req[12..14], &[8, 6]);
        assert_eq!(&req[38..42], &GW);
        assert_eq!(arp_reply(&req, GW, ME), None, "a request is no reply");
        let reply = reply_to(&req);
        assert_eq!(arp_reply(&reply, GW, ME), Some(GW_MAC));
        assert_eq!(arp_reply(&reply, [10, 0, 2, 3], ME), None, "another sender");
        for n in 0..reply.len() {
            assert_eq!(arp_reply(&reply[..n], GW, ME), None);
        }
    }

    #[test]
    fn an_echo_reply_carries_the_requests_data() {
        let data: Vec<u8> = (0..56).collect();
        let req = echo_request(MAC, ME, GW_MAC, GW, 7, 9, &data);
        assert_eq!(req.len(), 14 + 20 + 8 + 56);
        let ip = &req[14..34];
        assert_eq!(checksum(ip), 0, "the IPv4 header checksum holds");
        assert_eq!(checksum(&req[34..]), 0, "the ICMP checksum holds");
        // The gateway's reply: addresses swapped, type 0, checksum fixed.
        let mut reply = req.clone();
        reply[26..30].copy_from_slice(&GW);
        reply[30..34].copy_from_slice(&ME);
        reply[34] = 0;
        reply[36..38].copy_from_slice(&[0, 0]);
        let sum = checksum(&reply[34..]);
        reply[36..38].copy_from_slice(&sum.to_be_bytes());
        assert_eq!(echo_reply(&reply, GW, 7, 9), Some(&data[..]));
        assert_eq!(echo_reply(&reply, GW, 7, 10), None, "another sequence");
        assert_eq!(echo_reply(&req, ME, 7, 9), None, "a request is no reply");
        let mut bad = reply.clone();
        bad[40] ^= 1;
        assert_eq!(echo_reply(&bad, GW, 7, 9), None, "a wrong checksum");
        for n in 0..reply.len() {
            assert_eq!(echo_reply(&reply[..n], GW, 7, 9), None);
        }
    }

    #[test]
    fn a_discover_fills_slirps_bootp_struct_and_an_offer_is_read() {
        let d = dhcp_discover(MAC, 0x1234_5678);
        assert_eq!(d.len(), 14 + 576, "slirp takes its struct bootp_t whole");
        assert_eq!(&d[..6], &BROADCAST);
        assert_eq!(checksum(&d[14..34]), 0);
        assert_eq!((be16(&d, 34), be16(&d, 36)), (Some(68), Some(67)));
        // The offer: the discover turned into a server's answer.
        let mut o = d.clone();
        o[26..30].copy_from_slice(&GW);
        o[34..36].copy_from_slice(&67u16.to_be_bytes());
        o[36..38].copy_from_slice(&68u16.to_be_bytes());
        let bootp = 42;
        o[bootp] = 2;
        o[bootp + 16..bootp + 20].copy_from_slice(&ME);
        let opts: &[u8] = &[53, 1, 2, 0, 54, 4, 10, 0, 2, 2, 3, 4, 10, 0, 2, 2, 255];
        o[bootp + 240..bootp + 240 + opts.len()].copy_from_slice(opts);
        let sum = checksum(
            &o[14..34]
                .iter()
                .enumerate()
                .map(|(i, b)| if (10..12).contains(&i) { 0 } else { *b })
                .collect::<Vec<u8>>(),
        );
        o[24..26].copy_from_slice(&sum.to_be_bytes());
        let offer = dhcp_offer(&o, 0x1234_5678).unwrap();
        assert_eq!(
            offer,
            Offer {
                address: ME,
                server: Some(GW),
                router: Some(GW),
                broadcast: true
            }
        );
        assert_eq!(dhcp_offer(&o, 0x1234_5679), None, "another transaction");
        assert_eq!(dhcp_offer(&d, 0x1234_5678), None, "a discover is no offer");
        // Another message type (an ACK), or a type of the wrong length.
        let mut ack = o.clone();
        ack[bootp + 242] = 5;
        assert_eq!(dhcp_offer(&ack, 0x1234_5678), None);
        let mut odd = o.clone();
        odd[bootp + 241] = 2;
        assert_eq!(dhcp_offer(&odd, 0x1234_5678), None);
        // Every prefix: an option running past the end is no offer, and
        // nothing is read beyond the frame.
        for n in 0..o.len() {
            assert_eq!(dhcp_offer(&o[..n], 0x1234_5678), None);
        }
    }

    #[test]
    fn random_frames_never_panic_the_parsers() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // Random bytes under real headers, so the parsers go deep.
        let seeds = [
            arp_request(MAC, ME, GW),
            echo_request(MAC, ME, GW_MAC, GW, 1, 1, &[0; 8]),
            dhcp_discover(MAC, 1),
        ];
        for i in 0..20_000 {
            let mut f = seeds[i % 3].clone();
            let flips = 1 + next() % 8;
            for _ in 0..flips {
                let at = (next() % f.len() as u64) as usize;
                f[at] = next() as u8;
            }
            let len = (next() % (f.len() as u64 + 1)) as usize;
            let f = &f[..len];
            let _ = arp_reply(f, GW, ME);
            let _ = echo_reply(f, GW, 1, 1);
            let _ = dhcp_offer(f, 1);
        }
    }
}
