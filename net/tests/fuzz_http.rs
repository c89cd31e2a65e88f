//! Fuzz-style: 200,000 requests mutated from good ones (bytes flipped,
//! inserted, deleted, cut, lines repeated, random bytes) go through the
//! parser and through a connection fed in random pieces. Nothing may
//! panic, a parse must never claim more bytes than it was given, and a
//! request it accepts must re-parse the same from its own head.

use net::conn::{Conn, Next, Timeouts};
use net::http::{self, MAX_HEAD};

/// xorshift64*: deterministic, so a failure repeats.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const SEEDS: &[&[u8]] = &[
    b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: curl/7.88\r\nAccept: */*\r\n\r\n",
    b"HEAD /status.json HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    b"POST /x?y=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
    b"GET /hello.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    b"OPTIONS * HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
];

const DICT: &[&[u8]] = &[
    b"\r\n",
    b"\r",
    b"\n",
    b" ",
    b":",
    b"\t",
    b"\0",
    b"\xff",
    b"HTTP/1.1",
    b"HTTP/9.9",
    b"Content-Length: ",
    b"99999999999999999999",
    b"Host: b\r\n",
    b"Connection: close\r\n",
    b"\r\n\r\n",
    b"/",
    b"%00",
];

fn mutate(rng: &mut Rng, base: &[u8]) -> Vec<u8> {
    let mut v = base.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(8) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 => v.insert(at, rng.next() as u8),
            2 if at < v.len() => {
                v.remove(at);
            }
            3 => v.truncate(at),
            4 => {
                let d = DICT[rng.below(DICT.len())];
                v.splice(at..at, d.iter().copied());
            }
            5 => {
                // A line repeated many times: long heads.
                let line = b"X-Fill: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
                for _ in 0..rng.below(300) {
                    v.splice(at.min(v.len())..at.min(v.len()), line.iter().copied());
                }
            }
            6 => {
                let n = rng.below(64);
                v.extend((0..n).map(|_| rng.next() as u8));
            }
            _ => {
                if !v.is_empty() {
                    let i = rng.below(v.len());
                    v[i] = b"\r\n :\t/"[rng.below(6)];
                }
            }
        }
    }
    v
}

#[test]
fn mutated_requests_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut counts = [0usize; 3];
    for round in 0..200_000 {
        let base = SEEDS[round % SEEDS.len()];
        let input = mutate(&mut rng, base);
        match http::parse(&input) {
            Ok(Some((req, head))) => {
                counts[0] += 1;
                assert!(head <= input.len() && head <= MAX_HEAD);
                let again = http::parse(&input[..head]).unwrap().unwrap();
                assert_eq!(again, (req, head));
            }
            Ok(None) => {
                counts[1] += 1;
                assert!(input.len() < MAX_HEAD);
            }
            Err(e) => {
                counts[2] += 1;
                let _ = e.status().code();
            }
        }
        // The same bytes through a connection, in random pieces.
        let mut conn = Conn::new(0, Timeouts::default());
        let mut rest = &input[..];
        let mut now = 0;
        while !rest.is_empty() {
            let n = 1 + rng.below(rest.len());
            let took = conn.feed(&rest[..n], now);
            rest = &rest[took..];
            now += 1;
            match conn.next_request() {
                Next::Request(_) => conn.done(now),
                Next::Refuse(..) => break,
                Next::More if took == 0 => break,
                Next::More => {}
            }
        }
        let _ = conn.expired(now + 10_000);
    }
    // The mutations reach every outcome.
    assert!(counts.iter().all(|&c| c > 1000), "{counts:?}");
}
