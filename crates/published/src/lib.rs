//! # tollgate-published
//!
//! What a fleet of gateways (every gateway sharing one Redis) publishes to each other through
//! Redis: **rule documents** — one gateway publishes a rule document, every gateway on that Redis
//! puts it over its own rule file within moments ([`PublishedRules`]) — and each gateway's **top
//! refused callers**, merged for the fleet ([`top`]).
//!
//! The Redis key and channel names keep the word `fleet` they were first deployed with
//! (`tollgate:fleet:...`), so gateways of earlier versions and these follow the same documents.
//!
//! A document is a rule file (the format of `tollgate_config`), stored under one key,
//! `tollgate:fleet:{<name>}` (a hash: version, text, signature), and announced on the channel
//! `tollgate:fleet:<name>`. Each gateway follows it with [`PublishedRules`]:
//!
//! - **Promptly**: a subscription to the channel; each announcement makes the gateway read the
//!   version in Redis and, when it is newer than the one it holds, fetch and apply the document.
//!   The announcement carries nothing but the version, and is never trusted for more.
//! - **Surely**: a gateway that missed announcements (restarting, its subscription dropped —
//!   `CLIENT KILL TYPE pubsub`, a failover) reads the version again as soon as it subscribes
//!   again and on a slow poll ([`PublishedRulesBuilder::poll_every`], default 10 s), so it converges
//!   within one poll interval whatever happened to the channel. A gateway that starts reads the
//!   document before it serves ([`PublishedRulesBuilder::follow`] returns after the first read).
//! - **Whole or not at all**: a document is checked as a whole, like a rule file; one with
//!   mistakes is refused on that gateway (logged at `error` on target `tollgate::config` with
//!   each mistake's line and column, kept in [`PublishedRulesStatus::refused`]) and the rules in force
//!   stay. So is a document above the size cap ([`PublishedRulesBuilder::max_document_bytes`], default
//!   256 KiB; checked with `HSTRLEN` before it is fetched) and, when a signing key is set, one
//!   whose HMAC-SHA256 signature does not match: with [`PublishedRulesBuilder::signing_key`], write
//!   access to Redis alone cannot change limits to anything but a document the key signed. The
//!   signature covers the document's name, version and text. What it cannot stop: deleting the
//!   key or overwriting it with garbage (gateways keep the rules in force; one that starts
//!   then runs on its file's rules, and [`PublishedRulesStatus::in_redis`] shows it), and replaying an
//!   older signed document to a gateway that has not seen a newer one (a fresh start); rotate
//!   the key to retire old documents.
//!
//! Versions are `max(previous + 1, Unix time in ms)`, written only if the version is still the
//! one the publisher read, in one Lua step that also announces it: two publishers at once
//! cannot both win, and versions keep rising even if Redis lost the key. A gateway applies only
//! versions above the one in force; a version that is not a number, or is more than a day ahead
//! of its clock, was written outside tollgate and is refused (so a forged huge version cannot
//! hold back later documents), and a publisher will not build on one
//! ([`PublishError::BadVersion`]: delete the key). A refused document is remembered by its
//! version, signature and size, so it is reported once and a later document is still applied.
//!
//! **Precedence** is the overlay's (`tollgate_config::RuleOverlay`): a rule of the
//! document replaces the gateway's file rule with the same id, rules only the document defines
//! are added, the file decides the rest; the document replaces the previous document whole (to
//! change one rule's quota, publish a document holding that rule). [`PublishedRules::withdraw`]
//! hands every rule back to the files.
//!
//! **Redis Cluster**: the document is one key (one slot); a subscriber dials any seed node,
//! since every node of a cluster hears every `PUBLISH`.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use tollgate_wrappers::FallbackStore;
//! use tollgate_redis::RedisStore;
//! use tollgate_published::PublishedRules;
//! use tollgate_tower::RateLimitLayer;
//! use tollgate_config::{Extractors, RuleWatcher};
//!
//! let store = RedisStore::connect("redis://127.0.0.1:6379/").await?;
//! let connection = store.connection().clone();
//! let layer = RateLimitLayer::new(FallbackStore::builder(store).build());
//! let watcher = RuleWatcher::start("/etc/chirp/rules.toml", Extractors::new(), &layer)?;
//! let fleet = PublishedRules::builder("chirp")
//!     .signing_key(std::env::var("RULES_KEY")?)
//!     .poll_every(Duration::from_secs(5))
//!     .follow(&connection, watcher.overlay())
//!     .await?;
//! // During an incident, on any one gateway:
//! let version = fleet.publish(r#"
//! [[rule]]
//! id = "posting"
//! match = { method = "POST", path = "/posts" }
//! algorithm = "token_bucket"
//! capacity = 5
//! refill = { amount = 20, per = "1h" }
//! key = "peer_ip"
//! "#).await?;
//! println!("published version {version}");
//! # Ok(()) }
//! ```
//!
//! The guide's chapter *Rule files* (`docs/guide/src/rule-files.md`, "Changing a fleet") in the
//! repository shows it at work.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod document;
mod follow;
pub mod top;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::task::JoinHandle;
use tollgate_config::{ConfigErrors, RuleOverlay};

use self::document::Place;
use tollgate_redis::RedisConnection;

/// The default poll interval.
const POLL_EVERY: Duration = Duration::from_secs(10);

/// The default size cap of a document.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// How many times a publisher tries when other publishers keep winning.
const PUBLISH_ATTEMPTS: u32 = 5;

/// The shortest signing key accepted.
const MIN_KEY_BYTES: usize = 32;

/// How to follow (and publish) a fleet document: [`PublishedRules::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct PublishedRulesBuilder {
    name: String,
    signing_key: Option<Vec<u8>>,
    poll_every: Duration,
    max_bytes: usize,
    connect_timeout: Duration,
}

impl PublishedRulesBuilder {
    /// Signs what this gateway publishes and refuses documents not signed with `key`
    /// (HMAC-SHA256; at least 32 bytes — [`follow`](Self::follow) refuses a shorter key, an empty
    /// environment variable say — random, the same on every gateway). Default: none — anyone
    /// who can write to Redis can change limits.
    pub fn signing_key(mut self, key: impl Into<Vec<u8>>) -> Self {
        self.signing_key = Some(key.into());
        self
    }

    /// How often the version in Redis is read even without an announcement (default 10 s): the
    /// bound on how long a gateway that missed an announcement runs on old rules. Set to
    /// at least 10 ms.
    pub fn poll_every(mut self, interval: Duration) -> Self {
        self.poll_every = interval.max(Duration::from_millis(10));
        self
    }

    /// The largest document published or accepted, in bytes (default 256 KiB).
    pub fn max_document_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// Reads the current document into `overlay` (when there is one and Redis answers: a
    /// gateway starts during an outage on its file's rules) and follows it in a background
    /// task until the returned value is dropped. An error for a name that is not 1–64
    /// letters, digits, `-`, `_` or `.`, and for a signing key under 32 bytes. Needs a tokio
    /// runtime.
    pub async fn follow(
        self,
        connection: &RedisConnection,
        overlay: RuleOverlay,
    ) -> Result<PublishedRules, PublishedRulesError> {
        if !valid_name(&self.name) {
            return Err(PublishedRulesError::InvalidName(self.name));
        }
        if let Some(key) = &self.signing_key
            && key.len() < MIN_KEY_BYTES
        {
            return Err(PublishedRulesError::WeakKey(key.len()));
        }
        let inner = Arc::new(Inner {
            place: Place::new(&self.name),
            connection: connection.clone(),
            overlay,
            signing_key: self.signing_key,
            max_bytes: self.max_bytes,
            poll_every: self.poll_every,
            connect_timeout: self.connect_timeout,
            progress: tokio::sync::Mutex::new(follow::Progress::default()),
            publishing: tokio::sync::Mutex::new(()),
            status: Mutex::new(PublishedRulesStatus::default()),
        });
        inner.check().await;
        let task = tokio::spawn(follow::follow(Arc::clone(&inner)));
        Ok(PublishedRules { inner, task })
    }
}

/// Why a gateway cannot follow a fleet document.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum PublishedRulesError {
    /// A document, fleet or gateway name is not 1–64 letters, digits, `-`, `_` or `.`.
    #[error("fleet name {0:?} is not 1–64 letters, digits, '-', '_' or '.'")]
    InvalidName(String),
    /// The signing key is shorter than 32 bytes (an empty environment variable, say): anyone
    /// could guess it.
    #[error("the fleet signing key is {0} bytes; use at least 32 random bytes")]
    WeakKey(usize),
}

/// Where this gateway stands with the fleet document.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct PublishedRulesStatus {
    /// The version in force on this gateway (applied, or withdrawn), if any.
    pub version: Option<u64>,
    /// The newest version refused here, and why (the rules in force stay); cleared when a later
    /// version is applied.
    pub refused: Option<(u64, DocumentRefusal)>,
    /// Whether the announcement channel is subscribed right now (polls go on either way).
    pub subscribed: bool,
    /// When the version in Redis was last read (or tried).
    pub last_checked: Option<SystemTime>,
    /// The version Redis held at the last read, as written (`None`: no document, or the key is
    /// gone). Differing from `version` means this gateway does not follow what Redis holds: a
    /// refused document, or a document lost or rolled back in Redis (which is not followed: a
    /// gateway only moves to newer versions).
    pub in_redis: Option<String>,
    /// The last failure to read from Redis, until a read succeeds.
    pub last_redis_error: Option<String>,
}

/// Why a gateway refused a fleet document.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum DocumentRefusal {
    /// Not signed with this gateway's key (tampered with, or written without the key).
    #[error("the document's signature does not match this gateway's signing key")]
    BadSignature,
    /// Above the size cap.
    #[error("the document is {bytes} bytes, above the cap of {max}")]
    TooLarge {
        /// Its size.
        bytes: usize,
        /// The cap.
        max: usize,
    },
    /// Not UTF-8 text.
    #[error("the document is not UTF-8 text")]
    NotUtf8,
    /// A version no publisher writes: not a number, or more than a day ahead of this gateway's
    /// clock (versions are Unix milliseconds). Written outside tollgate; delete the key.
    #[error(
        "the document's version {0:?} was not written by a publisher (not a number, or a day or more ahead of this clock)"
    )]
    BadVersion(String),
    /// Rules with mistakes, each at its line and column.
    #[error("{0}")]
    Invalid(ConfigErrors),
}

/// Why a document was not published.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// The rules have mistakes (checked here before anything is written).
    #[error("{0}")]
    Invalid(ConfigErrors),
    /// Above the size cap.
    #[error("the document is {bytes} bytes, above the cap of {max}")]
    TooLarge {
        /// Its size.
        bytes: usize,
        /// The cap.
        max: usize,
    },
    /// Redis failed; nothing was published, or (if the answer was lost) the document may have
    /// been: read [`PublishedRules::status`] after the next check.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// [`PublishedRules::publish_over`]: Redis holds another version than the one the document was
    /// built on; nothing was published.
    #[error(
        "the fleet document changed meanwhile (Redis holds version {in_redis:?}); rebuild on it and try again"
    )]
    Stale {
        /// The version Redis holds (empty: none).
        in_redis: String,
    },
    /// Other publishers kept writing first; nothing was published.
    #[error("other publishers kept changing the document; try again")]
    Contended,
    /// Written, but not in force on this gateway after its check: a newer document came first,
    /// or the check could not read it back (see [`PublishedRules::status`]).
    #[error("version {version} was published but is not in force here: {why}")]
    NotApplied {
        /// The version written.
        version: u64,
        /// What this gateway's status says.
        why: String,
    },
    /// The stored version was not written by a publisher (not a number, or far in the future):
    /// someone wrote the key outside tollgate. Nothing was published; delete the key
    /// (`DEL tollgate:fleet:{<name>}`) and publish again.
    #[error(
        "the stored version {0:?} was not written by a publisher; delete the key and publish again"
    )]
    BadVersion(String),
}

/// A gateway following a fleet document (and able to publish one). Dropping it stops following;
/// the rules in force stay.
pub struct PublishedRules {
    inner: Arc<Inner>,
    task: JoinHandle<()>,
}

struct Inner {
    place: Place,
    connection: RedisConnection,
    overlay: RuleOverlay,
    signing_key: Option<Vec<u8>>,
    max_bytes: usize,
    poll_every: Duration,
    connect_timeout: Duration,
    /// What was applied and refused; checks hold it while they run.
    progress: tokio::sync::Mutex<follow::Progress>,
    /// Held by a publish from its read of the version to its check: this gateway's publishes
    /// run one at a time instead of racing each other.
    publishing: tokio::sync::Mutex<()>,
    status: Mutex<PublishedRulesStatus>,
}

impl PublishedRules {
    /// Follows the document `name` (see [`PublishedRulesBuilder`] for the settings).
    pub fn builder(name: impl Into<String>) -> PublishedRulesBuilder {
        PublishedRulesBuilder {
            name: name.into(),
            signing_key: None,
            poll_every: POLL_EVERY,
            max_bytes: MAX_DOCUMENT_BYTES,
            connect_timeout: Duration::from_secs(1),
        }
    }

    /// Checks `text` as this gateway would apply it — as a rule file with its registered
    /// extractors, against its layer, and merged over its rule file — and publishes it as the
    /// fleet document, signed when a key is set; applies it here before returning and gives its
    /// version. Nothing is written when the text has mistakes or is too large. (Another gateway
    /// may still refuse it: one without an extractor the document names, say.)
    pub async fn publish(&self, text: &str) -> Result<u64, PublishError> {
        self.check_size(text.len())?;
        self.inner
            .overlay
            .check(text)
            .map_err(PublishError::Invalid)?;
        self.publish_raw(text.as_bytes(), None).await
    }

    /// Withdraws the fleet document: every gateway goes back to its own file's rules.
    pub async fn withdraw(&self) -> Result<u64, PublishError> {
        self.publish_raw(b"", None).await
    }

    /// As [`publish`](Self::publish), but only over the version `based_on` (`None`: no
    /// document was ever published): a document built from the one in force on this gateway
    /// (one rule changed, say) must not replace a newer one another gateway wrote meanwhile.
    /// [`PublishError::Stale`] when Redis holds another version; nothing is written then —
    /// [`refresh`](Self::refresh), rebuild on the document now in force, and try again.
    ///
    /// Pair `based_on` with the document it was read with: read
    /// [`status`](Self::status)`().version`, then the document, then the version again, and
    /// use them if both readings agree (a document is applied before its version is recorded,
    /// so a pair read that way is never older than its version).
    pub async fn publish_over(
        &self,
        based_on: Option<u64>,
        text: &str,
    ) -> Result<u64, PublishError> {
        self.check_size(text.len())?;
        if !text.is_empty() {
            self.inner
                .overlay
                .check(text)
                .map_err(PublishError::Invalid)?;
        }
        self.publish_raw(text.as_bytes(), Some(based_on.unwrap_or(0)))
            .await
    }

    /// Reads the version in Redis now and applies it if it is newer (as the poll does).
    pub async fn refresh(&self) {
        self.inner.check().await;
    }

    /// Where this gateway stands.
    pub fn status(&self) -> PublishedRulesStatus {
        self.inner
            .status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn check_size(&self, bytes: usize) -> Result<(), PublishError> {
        if bytes > self.inner.max_bytes {
            return Err(PublishError::TooLarge {
                bytes,
                max: self.inner.max_bytes,
            });
        }
        Ok(())
    }

    /// Writes `body` as the next version; with `over`, only if Redis holds version `over`
    /// (0: none).
    async fn publish_raw(&self, body: &[u8], over: Option<u64>) -> Result<u64, PublishError> {
        let inner = &self.inner;
        let _one_at_a_time = inner.publishing.lock().await;
        for attempt in 0..PUBLISH_ATTEMPTS {
            if attempt > 0 {
                // Another gateway wrote first: give it room, by a varying amount.
                let jitter = u64::from(now_ms().to_le_bytes()[0]) % 20;
                tokio::time::sleep(Duration::from_millis(5 * u64::from(attempt) + jitter)).await;
            }
            let seen = match document::raw_version(&inner.connection, &inner.place).await {
                Ok(seen) => seen.unwrap_or_default(),
                Err(error) if error.code() == Some("WRONGTYPE") => {
                    return Err(PublishError::BadVersion("(not a hash)".to_owned()));
                }
                Err(error) => return Err(error.into()),
            };
            let previous = match seen.as_str() {
                "" => 0,
                written => written
                    .parse::<u64>()
                    .ok()
                    .filter(|&version| version < now_ms().saturating_add(follow::FUTURE_SLACK_MS))
                    .ok_or_else(|| PublishError::BadVersion(seen.clone()))?,
            };
            if over.is_some_and(|over| over != previous) {
                // The compare-and-set below writes only over `seen`, so this holds at the write.
                return Err(PublishError::Stale { in_redis: seen });
            }
            let next = (previous + 1).max(now_ms());
            let in_force_before = self.status().version;
            let mac = document::sign(inner.signing_key.as_deref(), &inner.place.name, next, body);
            if document::write(&inner.connection, &inner.place, &seen, next, body, &mac).await? {
                tracing::info!(target: "tollgate::config", document = %inner.place.name, version = next, bytes = body.len(), "fleet document published");
                inner.check().await;
                let status = self.status();
                // A later version that came into force during this publish was written over
                // this one (every write is a compare-and-set on the version read): published
                // and superseded, not lost — another gateway changed the rules right after. A
                // higher version already in force before it (a clock ahead, a key lost since)
                // is not: this gateway ignores the new document as a rollback.
                let superseded = status.version.is_some_and(|in_force| in_force > next)
                    && status.version != in_force_before;
                if status.version == Some(next) || superseded {
                    return Ok(next);
                }
                let why = match (&status.refused, &status.last_redis_error) {
                    (Some((_, refusal)), _) => refusal.to_string(),
                    (None, Some(error)) => format!("cannot read it back: {error}"),
                    (None, None) => format!("Redis now holds version {:?}", status.in_redis),
                };
                return Err(PublishError::NotApplied { version: next, why });
            }
        }
        Err(PublishError::Contended)
    }
}

/// Whether `name` is 1–64 letters, digits, `-`, `_` or `.` (a document, fleet or gateway name).
fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"-_.".contains(&byte))
}

/// Now, in Unix milliseconds: what versions are made of.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

impl Drop for PublishedRules {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for PublishedRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublishedRules")
            .field("name", &self.inner.place.name)
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}
