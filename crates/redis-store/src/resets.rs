//! Resets heard from every gateway: a subscription to the channel a [`RedisStore`] announces
//! its resets on, forgetting each announced caller in this gateway's [`BlockedCache`].

use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tollgate_core::{Clock, Key, RuleId, Store};
use tollgate_wrappers::BlockedCache;

use crate::RedisStore;
use crate::subscribe::subscribe;

/// The first pause before dialling a lost subscription again; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
/// The longest pause between attempts to subscribe.
const MAX_PAUSE: Duration = Duration::from_secs(5);
/// How long one attempt to subscribe may take.
const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(2);

/// An announcement's text: the rule id, `:`, then the key's encoding (rule ids hold no `:`).
pub(crate) fn message(rule: &RuleId, key: &Key) -> Vec<u8> {
    let mut message = Vec::with_capacity(rule.as_str().len() + 1 + key.as_bytes().len());
    message.extend_from_slice(rule.as_str().as_bytes());
    message.push(b':');
    message.extend_from_slice(key.as_bytes());
    message
}

/// The rule id and key encoding an announcement names, if it is one.
fn parse(message: &[u8]) -> Option<(&str, &[u8])> {
    let colon = message.iter().position(|byte| *byte == b':')?;
    let (rule, key) = message.split_at(colon);
    Some((std::str::from_utf8(rule).ok()?, key.get(1..)?))
}

/// Follows the resets announced through a shared Redis and forgets each announced caller in
/// one gateway's [`BlockedCache`], so that an admin reset on any gateway
/// ([`Store::reset`] on a [`RedisStore`] with the same prefix, under whatever wrappers)
/// unblocks the caller on every gateway, not only until its entries end.
///
/// The follower runs as a task of the Tokio runtime it was started in, until this handle is
/// dropped. It subscribes to `<prefix>:resets` and dials again after a lost subscription (100
/// ms, doubling up to 5 s). An announcement is a hint and never trusted for more: it can only
/// make this gateway ask the store again. One missed while unsubscribed costs at most until the
/// entry's own time, and each time the follower subscribes (again) it
/// [`clear`](BlockedCache::clear)s the cache, so a gap costs one store call per blocked caller.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use tollgate_wrappers::{BlockedCache, FallbackStore};
/// use tollgate_redis::{RedisStore, ResetFollower};
///
/// let redis = RedisStore::connect("redis://127.0.0.1:6379/").await?;
/// let store = BlockedCache::new(FallbackStore::builder(redis.clone()).build());
/// let resets = ResetFollower::start(&redis, &store);
/// resets.subscribed().await; // optional: wait until announcements are heard
/// // ... RateLimitLayer::new(store.clone()), and keep `resets` as long as the gateway runs.
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ResetFollower {
    task: JoinHandle<()>,
    subscribed: watch::Receiver<bool>,
}

impl ResetFollower {
    /// Starts following the resets announced under `store`'s prefix, on its server or cluster,
    /// forgetting each in `cache`. Must be called inside a Tokio runtime.
    pub fn start<S: Store, C: Clock>(store: &RedisStore, cache: &BlockedCache<S, C>) -> Self {
        let urls: Vec<String> = store.inner.connection.urls().to_vec();
        let channel = store.inner.layout.resets_channel();
        let (tell, subscribed) = watch::channel(false);
        let task = tokio::spawn(follow(urls, channel, cache.clone(), tell));
        ResetFollower { task, subscribed }
    }

    /// Whether the follower is subscribed now.
    pub fn is_subscribed(&self) -> bool {
        *self.subscribed.borrow()
    }

    /// Waits until the follower is subscribed (at once if it is): resets announced from then
    /// on are heard.
    pub async fn subscribed(&self) {
        let mut subscribed = self.subscribed.clone();
        // An error means the task ended, which only dropping this handle does.
        let _ = subscribed.wait_for(|subscribed| *subscribed).await;
    }
}

impl Drop for ResetFollower {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn follow<S: Store, C: Clock>(
    urls: Vec<String>,
    channel: String,
    cache: BlockedCache<S, C>,
    subscribed: watch::Sender<bool>,
) {
    let mut pause = FIRST_PAUSE;
    let mut dial = 0usize;
    loop {
        let Some(url) = urls.get(dial % urls.len().max(1)) else {
            return;
        };
        dial = dial.wrapping_add(1);
        match subscribe(url, &channel, SUBSCRIBE_TIMEOUT).await {
            Ok(mut messages) => {
                pause = FIRST_PAUSE;
                // Whatever was reset while nobody listened is forgotten with everything else.
                cache.clear();
                subscribed.send_replace(true);
                while let Some(message) = messages.next().await {
                    if let Some((rule, key)) = parse(message.get_payload_bytes()) {
                        cache.forget_named(rule, key);
                    }
                }
                subscribed.send_replace(false);
                tracing::warn!(target: "tollgate::store", %channel, "reset subscription lost; dialling again (blocked callers are forgotten when it is back)");
            }
            Err(error) => {
                tracing::debug!(target: "tollgate::store", %channel, %error, "cannot subscribe to the reset channel yet");
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_names_its_rule_and_key() {
        let rule = RuleId::new("login").expect("valid");
        let key = Key::from_parts(&[b"a:b".as_slice(), b"\x00\xff"]);
        let message = message(&rule, &key);
        assert_eq!(parse(&message), Some(("login", key.as_bytes())));
        assert_eq!(parse(b"no colon"), None);
        assert_eq!(parse(b"\xff:x"), None);
        assert_eq!(parse(b"global:"), Some(("global", &b""[..])));
    }
}
