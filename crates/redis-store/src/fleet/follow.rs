//! Following the fleet document: a subscription for prompt news, a slow poll for what a dropped
//! subscription missed, and a check that applies each new version at most once.

use std::sync::{Arc, PoisonError};
use std::time::{Duration, SystemTime};

use futures_util::StreamExt;

use super::document;
use super::{FleetRefusal, Inner, now_ms};

/// The first pause before dialling a lost subscription again; it doubles up to the poll
/// interval (at most 5 s).
const FIRST_PAUSE: Duration = Duration::from_millis(100);

/// How far past this gateway's clock a version may be: versions are Unix milliseconds, so one
/// further ahead than any clock skew was not written by a publisher (it would hold back every
/// later document).
pub(super) const FUTURE_SLACK_MS: u64 = 24 * 60 * 60 * 1000;

/// What a follower has handled: the version in force, and the last document it refused — so a
/// refused document is neither applied nor reported again, and never holds back a later one
/// (a forged document with a huge version is refused, not remembered as "the newest").
#[derive(Debug, Default)]
pub(super) struct Progress {
    applied: u64,
    refused: Option<document::Head>,
}

/// One check's outcome: nothing new, or a document applied or refused.
enum Outcome {
    Nothing,
    Applied(u64),
    Refused(document::Head, u64, FleetRefusal),
}

impl Inner {
    /// Reads the head of the document in Redis and, when it is newer than the version in force
    /// and not the document refused last, fetches, verifies and applies (or refuses) it. Checks
    /// run one at a time.
    pub(super) async fn check(&self) {
        let mut progress = self.progress.lock().await;
        let outcome = self.fetch_newer(&progress).await;
        let mut status = self.status.lock().unwrap_or_else(PoisonError::into_inner);
        status.last_checked = Some(SystemTime::now());
        match outcome {
            Err(error) => {
                if status.last_redis_error.is_none() {
                    tracing::warn!(target: "tollgate::config", document = %self.place.name, %error, "cannot read the fleet document; the rules in force stay");
                }
                status.last_redis_error = Some(error.to_string());
            }
            Ok(outcome) => {
                status.last_redis_error = None;
                match outcome {
                    Outcome::Nothing => {}
                    Outcome::Applied(version) => {
                        progress.applied = version;
                        progress.refused = None;
                        status.version = Some(version);
                        status.refused = None;
                    }
                    Outcome::Refused(head, version, refusal) => {
                        if !matches!(refusal, FleetRefusal::Invalid(_)) {
                            // The overlay logs a document's mistakes itself.
                            tracing::error!(target: "tollgate::config", document = %self.place.name, version = %head.version, "fleet document refused, the rules in force stay: {refusal}");
                        }
                        progress.refused = Some(head);
                        status.refused = Some((version, refusal));
                    }
                }
            }
        }
    }

    /// What the document in Redis gives, measured against `progress`.
    async fn fetch_newer(&self, progress: &Progress) -> redis::RedisResult<Outcome> {
        let Some(head) = document::head(&self.connection, &self.place).await? else {
            return Ok(Outcome::Nothing);
        };
        if progress.refused.as_ref() == Some(&head) {
            return Ok(Outcome::Nothing);
        }
        let Ok(version) = head.version.parse::<u64>() else {
            let refusal = FleetRefusal::BadVersion(head.version.clone());
            return Ok(Outcome::Refused(head, 0, refusal));
        };
        if version <= progress.applied {
            return Ok(Outcome::Nothing);
        }
        if version > now_ms().saturating_add(FUTURE_SLACK_MS) {
            let refusal = FleetRefusal::BadVersion(head.version.clone());
            return Ok(Outcome::Refused(head, version, refusal));
        }
        if head.bytes > self.max_bytes {
            let refusal = self.too_large(head.bytes);
            return Ok(Outcome::Refused(head, version, refusal));
        }
        let Some(stored) = document::read(&self.connection, &self.place).await? else {
            return Ok(Outcome::Nothing);
        };
        if stored.version != head.version || stored.mac != head.mac {
            // Rewritten since the head was read: its announcement brings another check.
            return Ok(Outcome::Nothing);
        }
        Ok(match self.apply(version, &stored) {
            Ok(()) => Outcome::Applied(version),
            Err(refusal) => Outcome::Refused(head, version, refusal),
        })
    }

    fn too_large(&self, bytes: usize) -> FleetRefusal {
        FleetRefusal::TooLarge {
            bytes,
            max: self.max_bytes,
        }
    }

    /// Verifies and applies one stored document.
    fn apply(&self, version: u64, stored: &document::Stored) -> Result<(), FleetRefusal> {
        if stored.body.len() > self.max_bytes {
            return Err(self.too_large(stored.body.len()));
        }
        let key = self.signing_key.as_deref();
        if !document::verify(key, &self.place.name, version, &stored.body, &stored.mac) {
            return Err(FleetRefusal::BadSignature);
        }
        let text = std::str::from_utf8(&stored.body).map_err(|_| FleetRefusal::NotUtf8)?;
        if text.is_empty() {
            self.overlay.clear();
            return Ok(());
        }
        self.overlay
            .apply(&version.to_string(), text)
            .map_err(FleetRefusal::Invalid)
    }

    fn set_subscribed(&self, subscribed: bool) {
        self.status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .subscribed = subscribed;
    }
}

/// Follows the document until the task is aborted: subscribed, a check on every announcement
/// and on every poll tick; unsubscribed, a check before each attempt to subscribe again.
pub(super) async fn follow(inner: Arc<Inner>) {
    let mut pause = FIRST_PAUSE;
    let mut dial = 0usize;
    loop {
        let urls = inner.connection.urls();
        let url = &urls[dial % urls.len().max(1)];
        dial = dial.wrapping_add(1);
        match subscribe(url, &inner.place.channel, inner.connect_timeout).await {
            Ok(mut messages) => {
                pause = FIRST_PAUSE;
                inner.set_subscribed(true);
                // Whatever was published while unsubscribed.
                inner.check().await;
                let mut poll = tokio::time::interval(inner.poll_every);
                poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                poll.tick().await;
                loop {
                    tokio::select! {
                        message = messages.next() => match message {
                            Some(_) => inner.check().await,
                            None => break,
                        },
                        _ = poll.tick() => inner.check().await,
                    }
                }
                inner.set_subscribed(false);
                tracing::warn!(target: "tollgate::config", document = %inner.place.name, "fleet subscription lost; polling until it is back");
            }
            Err(error) => {
                tracing::debug!(target: "tollgate::config", document = %inner.place.name, %error, "cannot subscribe to the fleet channel yet");
            }
        }
        inner.check().await;
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(inner.poll_every.min(Duration::from_secs(5)));
    }
}

/// A subscription to `channel` on the server at `url` (on a cluster, any node hears every
/// `PUBLISH`).
async fn subscribe(
    url: &str,
    channel: &str,
    timeout: Duration,
) -> redis::RedisResult<redis::aio::PubSubStream> {
    let client = redis::Client::open(url)?;
    let connect = async {
        let mut pubsub = client.get_async_pubsub().await?;
        pubsub.subscribe(channel).await?;
        Ok::<_, redis::RedisError>(pubsub.into_on_message())
    };
    tokio::time::timeout(timeout, connect).await.map_err(|_| {
        redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "subscribing timed out",
        ))
    })?
}
