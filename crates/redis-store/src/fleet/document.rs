//! A fleet document in Redis: one hash holding the version, the text and its signature, and a
//! pub/sub channel announcing each new version.

use hmac::{Hmac, Mac};
use redis::RedisResult;
use sha2::Sha256;

use crate::RedisConnection;

/// Writes a new version only if the version is still the one the publisher read (compared as
/// written: `''` for none), and announces it, in one step: two publishers at once cannot both
/// win, and no gateway sees a version before its text.
const PUBLISH: &str = r"
local current = redis.call('HGET', KEYS[1], 'version') or ''
if current ~= ARGV[1] then return -1 end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'body', ARGV[3], 'mac', ARGV[4])
redis.call('PUBLISH', ARGV[5], ARGV[2])
return 1
";

/// Where a named fleet document lives.
#[derive(Debug, Clone)]
pub(super) struct Place {
    pub(super) name: String,
    pub(super) key: String,
    pub(super) channel: String,
}

impl Place {
    /// The key and channel of `name` (checked by the caller: letters, digits, `-`, `_`, `.`).
    pub(super) fn new(name: &str) -> Place {
        Place {
            name: name.to_owned(),
            key: format!("tollgate:fleet:{{{name}}}"),
            channel: format!("tollgate:fleet:{name}"),
        }
    }
}

/// A document as read from Redis.
pub(super) struct Stored {
    pub(super) version: String,
    pub(super) body: Vec<u8>,
    pub(super) mac: Vec<u8>,
}

/// The version in Redis as written (`None` when nothing was ever published or the key is gone;
/// not necessarily a number: anyone with write access can put anything there).
pub(super) async fn raw_version(
    connection: &RedisConnection,
    place: &Place,
) -> RedisResult<Option<String>> {
    connection
        .query(redis::cmd("HGET").arg(&place.key).arg("version"))
        .await
}

/// What identifies a stored document without fetching its text: its version as written, its
/// signature and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Head {
    pub(super) version: String,
    pub(super) mac: Vec<u8>,
    pub(super) bytes: usize,
}

/// The head of the stored document (`None` when there is none).
pub(super) async fn head(connection: &RedisConnection, place: &Place) -> RedisResult<Option<Head>> {
    let (version, mac): (Option<String>, Option<Vec<u8>>) = connection
        .query(
            redis::cmd("HMGET")
                .arg(&place.key)
                .arg("version")
                .arg("mac"),
        )
        .await?;
    let Some(version) = version else {
        return Ok(None);
    };
    let bytes: usize = connection
        .query(redis::cmd("HSTRLEN").arg(&place.key).arg("body"))
        .await?;
    Ok(Some(Head {
        version,
        mac: mac.unwrap_or_default(),
        bytes,
    }))
}

/// The document (`None` when there is none).
pub(super) async fn read(
    connection: &RedisConnection,
    place: &Place,
) -> RedisResult<Option<Stored>> {
    let (version, body, mac): (Option<String>, Option<Vec<u8>>, Option<Vec<u8>>) = connection
        .query(
            redis::cmd("HMGET")
                .arg(&place.key)
                .arg("version")
                .arg("body")
                .arg("mac"),
        )
        .await?;
    Ok(version.map(|version| Stored {
        version,
        body: body.unwrap_or_default(),
        mac: mac.unwrap_or_default(),
    }))
}

/// Writes `body` as `next` if the stored version is still `seen` as written (`""`: none);
/// whether it was written.
pub(super) async fn write(
    connection: &RedisConnection,
    place: &Place,
    seen: &str,
    next: u64,
    body: &[u8],
    mac: &[u8],
) -> RedisResult<bool> {
    let written: i64 = connection
        .query(
            redis::cmd("EVAL")
                .arg(PUBLISH)
                .arg(1)
                .arg(&place.key)
                .arg(seen)
                .arg(next)
                .arg(body)
                .arg(mac)
                .arg(&place.channel),
        )
        .await?;
    Ok(written == 1)
}

/// The signature of version `version` of the document `name`: HMAC-SHA256 over the name, the
/// version and the text, so a signed text cannot be moved to another name or replayed as a
/// newer version. Empty without a key.
pub(super) fn sign(key: Option<&[u8]>, name: &str, version: u64, body: &[u8]) -> Vec<u8> {
    let Some(mac) = keyed(key, name, version, body) else {
        return Vec::new();
    };
    mac.finalize().into_bytes().to_vec()
}

/// Whether `mac` is the signature of the document (constant-time comparison); always true
/// without a key.
pub(super) fn verify(
    key: Option<&[u8]>,
    name: &str,
    version: u64,
    body: &[u8],
    mac: &[u8],
) -> bool {
    match keyed(key, name, version, body) {
        Some(expected) => expected.verify_slice(mac).is_ok(),
        None => true,
    }
}

fn keyed(key: Option<&[u8]>, name: &str, version: u64, body: &[u8]) -> Option<Hmac<Sha256>> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key?).ok()?;
    mac.update(b"tollgate fleet document\n");
    mac.update(name.as_bytes());
    mac.update(b"\n");
    mac.update(version.to_string().as_bytes());
    mac.update(b"\n");
    mac.update(body);
    Some(mac)
}

#[cfg(test)]
mod tests {
    use super::{sign, verify};

    #[test]
    fn a_signature_binds_name_version_and_text() {
        let key = Some(&b"secret"[..]);
        let mac = sign(key, "chirp", 7, b"text");
        assert!(verify(key, "chirp", 7, b"text", &mac));
        assert!(!verify(key, "chirp", 8, b"text", &mac));
        assert!(!verify(key, "other", 7, b"text", &mac));
        assert!(!verify(key, "chirp", 7, b"texT", &mac));
        assert!(!verify(key, "chirp", 7, b"text", b""));
        assert!(!verify(Some(&b"other key"[..]), "chirp", 7, b"text", &mac));
    }
}
