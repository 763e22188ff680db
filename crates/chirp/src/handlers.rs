//! Chirp's endpoints: stand-ins that answer a line of text, with the limits that live next to
//! their handlers.

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use tollgate::Key;
use tollgate::axum::{Limit, LimitRejection, Limited, Limiter};

use crate::challenge::challenge;

use crate::identity::{Account, SignedIn};
use crate::limits::{Following, LoginAttempts, SmsPerPhone, SmsPerRange, SmsPerRequester};
use crate::phone::Phone;

pub(crate) async fn feed(_: SignedIn) -> &'static str {
    "your feed\n"
}

pub(crate) async fn profile(_: SignedIn) -> &'static str {
    "a profile\n"
}

/// A report export: slow and expensive in production (tens of seconds of database work), which
/// is why `exports-in-flight` caps how many one account runs at once.
pub(crate) async fn export(_: SignedIn) -> &'static str {
    "your export\n"
}

pub(crate) async fn post(_: SignedIn) -> &'static str {
    "posted\n"
}

pub(crate) async fn follow(_: SignedIn, _following: Limited<Following>) -> &'static str {
    "followed\n"
}

pub(crate) async fn signup() -> &'static str {
    "welcome to Chirp\n"
}

/// Partners name themselves with `X-Api-Key`; without one there is no one to count.
pub(crate) async fn partner(headers: axum::http::HeaderMap) -> Response {
    if headers
        .get("x-api-key")
        .is_none_or(|key| key.as_bytes().trim_ascii().is_empty())
    {
        return (
            StatusCode::UNAUTHORIZED,
            "send your partner key in X-Api-Key\n",
        )
            .into_response();
    }
    "partner API\n".into_response()
}

/// A login attempt.
#[derive(Deserialize)]
pub(crate) struct Login {
    account: String,
    password: String,
}

/// Counts failed attempts per target account: a success gives its attempt back.
pub(crate) async fn login(
    limiter: Limiter,
    Json(login): Json<Login>,
) -> Result<Response, LimitRejection> {
    // One account, however it is written: attempts on `Ada@X.com ` count against `ada@x.com`.
    let account = login.account.trim().to_lowercase();
    if account.is_empty() {
        return Ok((StatusCode::UNPROCESSABLE_ENTITY, "name the account\n").into_response());
    }
    let attempt = limiter.check::<LoginAttempts>(&Key::new(&account)).await?;
    // Stand-in credentials: the password "correct horse" opens every account.
    if login.password == "correct horse" {
        if let Err(error) = attempt.refund().await {
            eprintln!("chirp: could not give back a successful login's attempt: {error}");
        }
        return Ok("welcome back\n".into_response());
    }
    Ok((StatusCode::UNAUTHORIZED, "wrong password\n").into_response())
}

/// A request for a one-time code by SMS.
#[derive(Deserialize)]
pub(crate) struct Otp {
    phone: String,
}

/// A one-time code by SMS, limited by what a fraudster pumping premium-rate numbers cannot
/// multiply cheaply (the rule file's `[[limit]]`s set the quotas; the layer's rules add the
/// address, its block and the global cap):
///
/// * the number: past `sms-per-phone`, refused (`429`);
/// * the number's range and whoever asks (the signed-in account, else the `X-Device-Id` the
///   app sends): past `sms-per-range` or `sms-per-requester`, challenged (`403`), since a real
///   person may share a range with a fraudster or need a code again;
/// * a request that names no one (neither signed in nor a device) is challenged at once.
///
/// The three are checked all or nothing: a refused or challenged request charges none.
pub(crate) async fn otp(
    limiter: Limiter,
    account: Option<Extension<Account>>,
    headers: HeaderMap,
    Json(otp): Json<Otp>,
) -> Result<Response, LimitRejection> {
    let Some(phone) = Phone::parse(&otp.phone) else {
        let problem = "a phone number in international form (+ and the country code), one a \
                       carrier can assign\n";
        return Ok((StatusCode::UNPROCESSABLE_ENTITY, problem).into_response());
    };
    let Some(requester) = requester(account, &headers) else {
        return Ok(challenge().map(axum::body::Body::from));
    };
    let checked = limiter
        .all()
        .check::<SmsPerPhone>(&Key::new(phone.e164()))
        .check::<SmsPerRange>(&Key::new(phone.range()))
        .check::<SmsPerRequester>(&requester)
        .run()
        .await;
    match checked {
        Ok(_) => Ok("code sent\n".into_response()),
        Err(rejection) if is_challenged(&rejection) => Ok(challenge().map(axum::body::Body::from)),
        Err(rejection) => Err(rejection),
    }
}

/// Who asks for a code: the signed-in account, else the device the app names (keys of the two
/// kinds never meet).
fn requester(account: Option<Extension<Account>>, headers: &HeaderMap) -> Option<Key> {
    if let Some(Extension(Account(account))) = account {
        return Some(Key::new(format!("account:{account}")));
    }
    let device = headers.get("x-device-id")?.to_str().ok()?.trim();
    (!device.is_empty() && device.len() <= 128).then(|| Key::new(format!("device:{device}")))
}

/// Whether a code's refusal is answered with a challenge: the range's and the requester's
/// limits, where a real person may be caught; the number's limit refuses.
fn is_challenged(rejection: &LimitRejection) -> bool {
    rejection.refused_by().is_some_and(|refused| {
        let rule = refused.rule().as_str();
        rule == SmsPerRange::ID || rule == SmsPerRequester::ID
    })
}
