//! Where gRPC messages start in a request body: each is a 5-byte prefix (a compression flag
//! and a big-endian 4-byte length) and that many bytes, and a body's data frames may cut
//! messages anywhere or carry several.

/// Where the reading of a gRPC message stream is, across the body's data frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Framing {
    /// The next byte starts a message, which must be admitted before it is passed on.
    #[default]
    Between,
    /// `seen` bytes of an admitted message's prefix have been passed on.
    Prefix { prefix: [u8; PREFIX], seen: usize },
    /// `left` bytes of an admitted message's payload remain.
    Payload { left: u64 },
}

/// The length of a message's prefix: the compression flag, then the payload's length.
const PREFIX: usize = 5;

impl Framing {
    /// How many bytes of `data` may be passed on before a message that is not yet admitted
    /// starts (all of them when none starts), moving past them.
    pub(crate) fn pass(&mut self, data: &[u8]) -> usize {
        let mut at = 0;
        while at < data.len() {
            match self {
                Framing::Between => return at,
                Framing::Prefix { prefix, seen } => {
                    let take = (PREFIX - *seen).min(data.len() - at);
                    prefix[*seen..*seen + take].copy_from_slice(&data[at..at + take]);
                    *seen += take;
                    at += take;
                    if *seen == PREFIX {
                        let length =
                            u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]);
                        *self = Framing::payload(u64::from(length));
                    }
                }
                Framing::Payload { left } => {
                    let take = (*left).min((data.len() - at) as u64);
                    at += take as usize;
                    *self = Framing::payload(*left - take);
                }
            }
        }
        at
    }

    /// At the start of a stream whose first message is already admitted (paid when the call
    /// opened).
    pub(crate) fn first_admitted() -> Framing {
        let mut framing = Framing::default();
        framing.admit();
        framing
    }

    /// Whether the next byte starts a message still to be admitted.
    pub(crate) fn at_message_start(&self) -> bool {
        *self == Framing::Between
    }

    /// The message starting at the next byte is admitted.
    pub(crate) fn admit(&mut self) {
        debug_assert!(self.at_message_start());
        *self = Framing::Prefix {
            prefix: [0; PREFIX],
            seen: 0,
        };
    }

    fn payload(left: u64) -> Framing {
        if left == 0 {
            Framing::Between
        } else {
            Framing::Payload { left }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(payload: &[u8]) -> Vec<u8> {
        let mut framed = vec![0];
        framed.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        framed.extend_from_slice(payload);
        framed
    }

    /// Feeds `data` in pieces of `piece` bytes, admitting every message: the offsets (in the
    /// whole stream) where messages were admitted.
    fn starts(data: &[u8], piece: usize) -> Vec<usize> {
        let mut framing = Framing::default();
        let mut admitted = Vec::new();
        let mut offset = 0;
        for chunk in data.chunks(piece) {
            let mut at = 0;
            loop {
                at += framing.pass(&chunk[at..]);
                if at == chunk.len() {
                    break;
                }
                admitted.push(offset + at);
                framing.admit();
            }
            offset += chunk.len();
        }
        admitted
    }

    #[test]
    fn every_message_start_is_found_however_the_frames_cut_the_stream() {
        let stream: Vec<u8> = [
            message(b"hello"),
            message(b""),
            message(&[7; 300]),
            message(b"x"),
        ]
        .concat();
        let expected = vec![0, 10, 15, 320];
        for piece in [1, 2, 3, 4, 5, 6, 7, 64, 1_000] {
            assert_eq!(starts(&stream, piece), expected, "pieces of {piece} bytes");
        }
    }

    #[test]
    fn a_stream_whose_first_message_is_paid_stops_at_the_second() {
        let mut framing = Framing::first_admitted();
        let stream = [message(b"one"), message(b"two")].concat();
        assert_eq!(framing.pass(&stream), 8);
        assert!(framing.at_message_start());
    }

    #[test]
    fn nothing_passes_before_a_message_is_admitted() {
        let mut framing = Framing::default();
        assert!(framing.at_message_start());
        assert_eq!(framing.pass(&message(b"abc")), 0);
        framing.admit();
        assert_eq!(framing.pass(&message(b"abc")), 8);
        assert!(framing.at_message_start());
    }

    #[test]
    fn a_length_read_across_frames_counts_the_whole_payload() {
        let mut framing = Framing::default();
        framing.admit();
        // The prefix of a 70,000-byte message, split after its second byte.
        let prefix = message(&vec![1; 70_000]);
        assert_eq!(framing.pass(&prefix[..2]), 2);
        assert_eq!(framing.pass(&prefix[2..5]), 3);
        assert_eq!(framing, Framing::Payload { left: 70_000 });
        assert_eq!(framing.pass(&prefix[5..]), 70_000);
        assert!(framing.at_message_start());
    }
}
