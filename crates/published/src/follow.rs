//! Following the fleet document: a subscription for prompt news, a slow poll for what a dropped
//! subscription missed, a quick retry after a failed read, and a check that applies each new
//! version at most once.

use std::sync::{Arc, PoisonError};
use std::time::{Duration, SystemTime};

use futures_util::{FutureExt, StreamExt};

use super::document;
use super::{DocumentRefusal, Inner, now_ms};
use tollgate_redis::subscribe;

/// The first pause before dialling a lost subscription again, or reading again after a failed
/// read; it doubles up to the poll interval (at most 5 s).
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
    Nothing { in_redis: Option<String> },
    Applied(u64),
    Refused(document::Head, u64, DocumentRefusal),
}

impl Inner {
    /// Reads the document in Redis and, when it is newer than the version in force and not the
    /// document refused last, verifies and applies (or refuses) it; whether Redis answered.
    /// Checks run one at a time.
    pub(super) async fn check(&self) -> bool {
        let mut progress = self.progress.lock().await;
        let outcome = self.fetch_newer(&progress).await;
        let mut status = self.status.lock().unwrap_or_else(PoisonError::into_inner);
        status.last_checked = Some(SystemTime::now());
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(error) => {
                if status.last_redis_error.is_none() {
                    tracing::warn!(target: "tollgate::config", document = %self.place.name, %error, "cannot read the fleet document; the rules in force stay");
                }
                status.last_redis_error = Some(error.to_string());
                return false;
            }
        };
        status.last_redis_error = None;
        match outcome {
            Outcome::Nothing { in_redis } => status.in_redis = in_redis,
            Outcome::Applied(version) => {
                progress.applied = version;
                progress.refused = None;
                status.version = Some(version);
                status.in_redis = Some(version.to_string());
                status.refused = None;
            }
            Outcome::Refused(head, version, refusal) => {
                if !matches!(refusal, DocumentRefusal::Invalid(_)) {
                    // The overlay logs a document's mistakes itself.
                    tracing::error!(target: "tollgate::config", document = %self.place.name, version = %head.version, "fleet document refused, the rules in force stay: {refusal}");
                }
                status.in_redis = Some(head.version.clone());
                progress.refused = Some(head);
                status.refused = Some((version, refusal));
            }
        }
        true
    }

    /// What the document in Redis gives, measured against `progress`.
    async fn fetch_newer(&self, progress: &Progress) -> redis::RedisResult<Outcome> {
        let in_force = if progress.applied == 0 {
            String::new()
        } else {
            progress.applied.to_string()
        };
        let fetched = document::fetch(
            &self.connection,
            &self.place,
            self.max_bytes,
            &in_force,
            progress.refused.as_ref(),
        )
        .await;
        let fetched = match fetched {
            Ok(fetched) => fetched,
            Err(error) if error.code() == Some("WRONGTYPE") => {
                // Not a hash: written outside tollgate.
                let head = document::Head {
                    version: "(not a hash)".to_owned(),
                    mac: Vec::new(),
                    bytes: 0,
                };
                if progress.refused.as_ref() == Some(&head) {
                    return Ok(Outcome::Nothing { in_redis: None });
                }
                let refusal = DocumentRefusal::BadVersion(head.version.clone());
                return Ok(Outcome::Refused(head, 0, refusal));
            }
            Err(error) => return Err(error),
        };
        let Some(document::Fetched { head, body }) = fetched else {
            return Ok(Outcome::Nothing { in_redis: None });
        };
        let nothing = || Outcome::Nothing {
            in_redis: Some(head.version.clone()),
        };
        if progress.refused.as_ref() == Some(&head) {
            return Ok(nothing());
        }
        let Ok(version) = head.version.parse::<u64>() else {
            let refusal = DocumentRefusal::BadVersion(head.version.clone());
            return Ok(Outcome::Refused(head, 0, refusal));
        };
        if version <= progress.applied {
            // The one in force, or an older one: a rollback is not followed (see the module
            // docs); `in_redis` shows it.
            return Ok(nothing());
        }
        if version > now_ms().saturating_add(FUTURE_SLACK_MS) {
            let refusal = DocumentRefusal::BadVersion(head.version.clone());
            return Ok(Outcome::Refused(head, version, refusal));
        }
        let Some(body) = body.filter(|body| body.len() <= self.max_bytes) else {
            let refusal = DocumentRefusal::TooLarge {
                bytes: head.bytes,
                max: self.max_bytes,
            };
            return Ok(Outcome::Refused(head, version, refusal));
        };
        Ok(match self.apply(version, &head.mac, &body) {
            Ok(()) => Outcome::Applied(version),
            Err(refusal) => Outcome::Refused(head, version, refusal),
        })
    }

    /// Verifies and applies one stored document.
    fn apply(&self, version: u64, mac: &[u8], body: &[u8]) -> Result<(), DocumentRefusal> {
        let key = self.signing_key.as_deref();
        if !document::verify(key, &self.place.name, version, body, mac) {
            return Err(DocumentRefusal::BadSignature);
        }
        let text = std::str::from_utf8(body).map_err(|_| DocumentRefusal::NotUtf8)?;
        if text.is_empty() {
            self.overlay.clear();
            return Ok(());
        }
        self.overlay
            .apply(&version.to_string(), text)
            .map_err(DocumentRefusal::Invalid)
    }

    fn set_subscribed(&self, subscribed: bool) {
        self.status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .subscribed = subscribed;
    }

    /// The longest pause between attempts (to subscribe, or to read after a failure).
    fn max_pause(&self) -> Duration {
        self.poll_every.min(Duration::from_secs(5))
    }
}

/// Follows the document until the task is aborted: subscribed, a check on every announcement
/// (announcements that arrived meanwhile count as one) and on every poll tick, and after a
/// failed check another soon (100 ms, doubling); unsubscribed, a check before each attempt to
/// subscribe again.
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
                let mut retry = (!inner.check().await).then_some(FIRST_PAUSE);
                let mut poll = tokio::time::interval(inner.poll_every);
                poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                poll.tick().await;
                loop {
                    let wait = retry.unwrap_or(inner.poll_every);
                    let succeeded = tokio::select! {
                        message = messages.next() => {
                            if message.is_none() {
                                break;
                            }
                            // Coalesce: one check covers every announcement already here.
                            while let Some(Some(_)) = messages.next().now_or_never() {}
                            inner.check().await
                        }
                        _ = poll.tick() => inner.check().await,
                        () = tokio::time::sleep(wait), if retry.is_some() => inner.check().await,
                    };
                    retry = if succeeded {
                        None
                    } else {
                        Some(retry.map_or(FIRST_PAUSE, |pause| (pause * 2).min(inner.max_pause())))
                    };
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
        pause = (pause * 2).min(inner.max_pause());
    }
}
