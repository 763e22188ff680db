//! One simulated request: who sends it, from where, when, and what it asks Chirp for.

use std::net::{IpAddr, SocketAddr};

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request, header};

/// Which side of the story a caller is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Someone the policy should stop: a scripted sign-up, a looping job, an SMS fraudster.
    Attacker,
    /// Someone the policy should serve: a real user, a partner's normal traffic.
    Innocent,
}

/// A caller, numbered within its scenario (innocents and attackers number apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    /// Attacker or innocent.
    pub side: Side,
    /// Its number among the callers of its side: a group (users, newcomers, partners) in the
    /// high 32 bits and the caller's number in the group in the low 32, so no two callers of
    /// different groups share one.
    pub id: u64,
}

impl Caller {
    /// Innocent caller `number` of `group` (0: the scenario's users).
    pub(crate) fn innocent(group: u32, number: u32) -> Caller {
        Caller {
            side: Side::Innocent,
            id: u64::from(group) << 32 | u64::from(number),
        }
    }

    /// The attacker (one operator, however many machines).
    pub(crate) fn attacker() -> Caller {
        Caller {
            side: Side::Attacker,
            id: 0,
        }
    }
}

/// What a request asks Chirp for (its route, and what the handler needs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `GET /feed`.
    Feed {
        /// The signed-in account (`Authorization: Bearer user-<n>`).
        account: u32,
    },
    /// `GET /profiles/{profile}`.
    Profile {
        /// The signed-in account.
        account: u32,
        /// The profile read.
        profile: u32,
    },
    /// `GET /exports`: a report export, slow (see [`SlowExports`](crate::SlowExports)).
    Export {
        /// The signed-in account.
        account: u32,
    },
    /// `POST /posts`.
    Post {
        /// The signed-in account.
        account: u32,
    },
    /// `POST /users/{target}/follow`.
    Follow {
        /// The signed-in account.
        account: u32,
        /// Who it follows.
        target: u32,
    },
    /// `POST /signup`.
    Signup {
        /// Its `X-Device-Id` (`None`: no header).
        device: Option<u64>,
    },
    /// `POST /login`.
    Login {
        /// The account it tries.
        account: u32,
        /// With the right password, or not.
        right_password: bool,
    },
    /// `POST /otp`: a one-time code by SMS.
    Otp {
        /// The phone number's digits (E.164 without its `+`).
        phone: u64,
        /// The signed-in account asking (`Authorization: Bearer user-<n>`), if any.
        account: Option<u32>,
        /// Its `X-Device-Id` (`device-<n>`), if any.
        device: Option<u64>,
    },
    /// `GET /partner/v1/timeline`.
    Partner {
        /// Its `X-Api-Key`.
        key: &'static str,
    },
}

/// A request at a moment of simulated time.
#[derive(Debug, Clone)]
pub struct Visit {
    /// Microseconds since the scenario started.
    pub at: u64,
    /// Who sends it.
    pub caller: Caller,
    /// The address it comes from (the peer the gateway sees: no proxy in between).
    pub from: IpAddr,
    /// What it asks for.
    pub call: Call,
}

impl Call {
    /// The HTTP request Chirp's router is called with, from `from`.
    pub(crate) fn request(&self, from: IpAddr) -> Request<Body> {
        let builder = |method: Method, uri: String| Request::builder().method(method).uri(uri);
        let signed_in = |method: Method, uri: String, account: u32| {
            builder(method, uri).header(header::AUTHORIZATION, format!("Bearer user-{account}"))
        };
        let json = |uri: &str, body: String| {
            builder(Method::POST, uri.to_owned())
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body))
        };
        let request = match self {
            Call::Feed { account } => {
                signed_in(Method::GET, "/feed".into(), *account).body(Body::empty())
            }
            Call::Profile { account, profile } => {
                signed_in(Method::GET, format!("/profiles/{profile}"), *account).body(Body::empty())
            }
            Call::Export { account } => {
                signed_in(Method::GET, "/exports".into(), *account).body(Body::empty())
            }
            Call::Post { account } => {
                signed_in(Method::POST, "/posts".into(), *account).body(Body::empty())
            }
            Call::Follow { account, target } => {
                signed_in(Method::POST, format!("/users/{target}/follow"), *account)
                    .body(Body::empty())
            }
            Call::Signup { device } => {
                let request = builder(Method::POST, "/signup".into());
                match device {
                    Some(device) => request.header("x-device-id", format!("device-{device}")),
                    None => request,
                }
                .body(Body::empty())
            }
            Call::Login {
                account,
                right_password,
            } => {
                let password = if *right_password {
                    "correct horse"
                } else {
                    "wrong"
                };
                json(
                    "/login",
                    format!(r#"{{"account":"user-{account}","password":"{password}"}}"#),
                )
            }
            Call::Otp {
                phone,
                account,
                device,
            } => {
                let mut request = builder(Method::POST, "/otp".into())
                    .header(header::CONTENT_TYPE, "application/json");
                if let Some(account) = account {
                    request =
                        request.header(header::AUTHORIZATION, format!("Bearer user-{account}"));
                }
                if let Some(device) = device {
                    request = request.header("x-device-id", format!("device-{device}"));
                }
                request.body(Body::from(format!(r#"{{"phone":"+{phone}"}}"#)))
            }
            Call::Partner { key } => builder(Method::GET, "/partner/v1/timeline".into())
                .header("x-api-key", *key)
                .body(Body::empty()),
        };
        let mut request = request.unwrap_or_default();
        request
            .extensions_mut()
            .insert(ConnectInfo(SocketAddr::new(from, 40_000)));
        request
    }
}
