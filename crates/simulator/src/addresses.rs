//! Where simulated callers come from. Every address is synthetic, from ranges that mean
//! something to a reader: cloud machines in the benchmarking range, carrier-grade NAT in the
//! shared address space, homes spread over many blocks of a private range.

use std::net::{IpAddr, Ipv4Addr};

use crate::random::Random;

/// Address `index` of a cloud pool spread evenly over `blocks` /24 blocks (198.18.0.0/15, the
/// benchmarking range: at most 512 blocks of 254 hosts).
pub(crate) fn cloud(index: u64, blocks: u64) -> IpAddr {
    let blocks = blocks.clamp(1, 512);
    let block = index % blocks;
    let host = (index / blocks) % 254 + 1;
    IpAddr::V4(Ipv4Addr::new(
        198,
        18 + (block / 256) as u8,
        (block % 256) as u8,
        host as u8,
    ))
}

/// A home connection: a random host in one of the 65,536 /24 blocks of 10.0.0.0/8, so two real
/// users rarely share a block.
pub(crate) fn home(random: &mut Random) -> IpAddr {
    let n = random.below(1 << 24) as u32;
    IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | n))
}

/// Carrier-grade NAT address `index` (100.64.0.0/10, the shared address space), numbered from
/// 100.64.0.1.
pub(crate) fn carrier_nat(index: u64) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x6440_0001 + index as u32))
}

/// Server `index` (of up to 8) of partner `partner` (of up to 31), in 203.0.113.0/24, a
/// documentation range.
pub(crate) fn partner_server(partner: u64, index: u64) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(
        203,
        0,
        113,
        ((partner % 31) * 8 + index % 8) as u8 + 1,
    ))
}
