//! A fleet document in Redis: one hash holding the version, the text and its signature, and a
//! pub/sub channel announcing each new version.

use hmac::{Hmac, Mac};
use redis::RedisResult;
use sha2::Sha256;

use tollgate_redis::RedisConnection;

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

/// Reads a document in one step: its head (version as written, signature, size), and its text
/// only when it is within the size cap and not the one the reader already has (`ARGV[2]`: the
/// version in force) or already refused (`ARGV[3]`, `ARGV[4]`: its version and signature). A
/// steady poll costs one round trip and no text; an oversized text is never sent.
const READ: &str = r"
local version = redis.call('HGET', KEYS[1], 'version')
if not version then return {} end
local mac = redis.call('HGET', KEYS[1], 'mac') or ''
local bytes = redis.call('HSTRLEN', KEYS[1], 'body')
if bytes > tonumber(ARGV[1]) or version == ARGV[2] or (version == ARGV[3] and mac == ARGV[4]) then
  return {version, mac, bytes}
end
return {version, mac, bytes, redis.call('HGET', KEYS[1], 'body') or ''}
";

/// What identifies a stored document without its text: its version as written (anyone with
/// write access can put anything there), its signature and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Head {
    pub(super) version: String,
    pub(super) mac: Vec<u8>,
    pub(super) bytes: usize,
}

/// A read document: its head, and its text unless the reader did not need it.
pub(super) struct Fetched {
    pub(super) head: Head,
    pub(super) body: Option<Vec<u8>>,
}

/// The stored document (`None` when there is none), its text only if it is at most
/// `max_bytes`, and neither `in_force` (a version as written) nor `refused`.
pub(super) async fn fetch(
    connection: &RedisConnection,
    place: &Place,
    max_bytes: usize,
    in_force: &str,
    refused: Option<&Head>,
) -> RedisResult<Option<Fetched>> {
    let (refused_version, refused_mac) =
        refused.map_or(("", &[][..]), |head| (head.version.as_str(), &head.mac[..]));
    let parts: Vec<redis::Value> = connection
        .query(
            redis::cmd("EVAL")
                .arg(READ)
                .arg(1)
                .arg(&place.key)
                .arg(max_bytes)
                .arg(in_force)
                .arg(refused_version)
                .arg(refused_mac),
        )
        .await?;
    let mut parts = parts.into_iter();
    let Some(version) = parts.next() else {
        return Ok(None);
    };
    let version: String = redis::from_redis_value(version)?;
    let mac: Vec<u8> = parts
        .next()
        .map(redis::from_redis_value)
        .transpose()?
        .unwrap_or_default();
    let bytes: usize = parts
        .next()
        .map(redis::from_redis_value)
        .transpose()?
        .unwrap_or_default();
    let body: Option<Vec<u8>> = parts.next().map(redis::from_redis_value).transpose()?;
    Ok(Some(Fetched {
        head: Head {
            version,
            mac,
            bytes,
        },
        body,
    }))
}

/// The version in Redis as written (`None` when nothing was ever published or the key is gone).
pub(super) async fn raw_version(
    connection: &RedisConnection,
    place: &Place,
) -> RedisResult<Option<String>> {
    connection
        .query(redis::cmd("HGET").arg(&place.key).arg("version"))
        .await
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
    key.and_then(|key| keyed(key, name, version, body))
        .map(|mac| mac.finalize().into_bytes().to_vec())
        .unwrap_or_default()
}

/// Whether `mac` is the signature of the document (constant-time comparison). Without a key
/// every document passes; with one, anything that cannot be checked fails.
pub(super) fn verify(
    key: Option<&[u8]>,
    name: &str,
    version: u64,
    body: &[u8],
    mac: &[u8],
) -> bool {
    let Some(key) = key else {
        return true;
    };
    keyed(key, name, version, body).is_some_and(|expected| expected.verify_slice(mac).is_ok())
}

fn keyed(key: &[u8], name: &str, version: u64, body: &[u8]) -> Option<Hmac<Sha256>> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).ok()?;
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
