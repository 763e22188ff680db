//! Browser sessions for the status page: a random id in an `HttpOnly`, `SameSite=Strict`
//! cookie, standing for the token it was exchanged for. Only digests of ids are kept.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// How long a session lasts.
pub(crate) const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// The most sessions kept; the oldest goes when a new one would pass it.
const MAX_SESSIONS: usize = 1024;

/// The cookie's name.
pub(crate) const COOKIE: &str = "tollgate_admin";

struct Session {
    token: String,
    expires: Instant,
}

/// Open sessions by the digest of their id.
#[derive(Default)]
pub(crate) struct Sessions(Mutex<HashMap<[u8; 32], Session>>);

impl Sessions {
    /// A new session for `token` (the token's name); its id, or `None` when the system has no
    /// randomness to give.
    pub(crate) fn open(&self, token: &str) -> Option<String> {
        let mut id = [0u8; 32];
        getrandom::fill(&mut id).ok()?;
        let id: String = id.iter().map(|byte| format!("{byte:02x}")).collect();
        let now = Instant::now();
        let mut sessions = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.retain(|_, session| session.expires > now);
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, session)| session.expires)
                .map(|(digest, _)| *digest)
        {
            sessions.remove(&oldest);
        }
        sessions.insert(
            digest(&id),
            Session {
                token: token.to_owned(),
                expires: now + SESSION_LIFETIME,
            },
        );
        Some(id)
    }

    /// The token name of the live session `id`.
    pub(crate) fn token(&self, id: &str) -> Option<String> {
        let sessions = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let session = sessions.get(&digest(id))?;
        (session.expires > Instant::now()).then(|| session.token.clone())
    }

    /// Ends the session `id`.
    pub(crate) fn close(&self, id: &str) {
        let mut sessions = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.remove(&digest(id));
    }
}

fn digest(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

/// The session id in a request's `Cookie` headers, if any.
pub(crate) fn cookie_of(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_stands_for_its_token_until_closed() {
        let sessions = Sessions::default();
        let id = sessions.open("alice").expect("randomness");
        assert_eq!(sessions.token(&id).as_deref(), Some("alice"));
        assert_eq!(sessions.token("not-a-session"), None);
        sessions.close(&id);
        assert_eq!(sessions.token(&id), None);
    }

    #[test]
    fn sessions_are_bounded() {
        let sessions = Sessions::default();
        let first = sessions.open("a").expect("randomness");
        for _ in 0..MAX_SESSIONS {
            sessions.open("b");
        }
        assert_eq!(sessions.0.lock().expect("lock").len(), MAX_SESSIONS);
        assert_eq!(sessions.token(&first), None);
    }
}
