//! (e) Slow exports: one account starting report exports that each take half a minute, beside
//! users browsing, on a service that can work on only so many requests at once.
//!
//! Unlike the other scenarios, requests here overlap: each admitted request holds one of the
//! service's workers for its service time (queueing, first come first served, when all are
//! busy), and its response — with any concurrency slot it holds — ends only when its work is
//! done. Innocents' latency is the time from arrival to the end of their work.

use std::net::{IpAddr, Ipv4Addr};

use crate::people::{Habits, Person};
use crate::timeline::{Poisson, Source};
use crate::visit::{Call, Caller, Visit};

/// The exporting account's number (far from the users', which count from 0).
pub const EXPORTING_ACCOUNT: u32 = 4_000_000;

/// The slow-exports scenario's parameters.
///
/// Defaults: for 10 minutes, one account starts an export every 2 seconds on average, each
/// taking 30 seconds of work; 300 users browse from home with [`Habits::default`]; the service
/// has 8 workers and an ordinary request takes 100 ms of one.
#[derive(Debug, Clone, PartialEq)]
pub struct SlowExports {
    /// How long it lasts.
    pub minutes: f64,
    /// Exports the account starts a minute.
    pub exports_per_minute: f64,
    /// Seconds of work an export takes.
    pub export_seconds: f64,
    /// Users browsing meanwhile.
    pub users: u32,
    /// How they browse.
    pub habits: Habits,
    /// Requests the service works on at once.
    pub workers: u32,
    /// Milliseconds of work an ordinary request takes.
    pub request_millis: f64,
}

impl Default for SlowExports {
    fn default() -> Self {
        SlowExports {
            minutes: 10.0,
            exports_per_minute: 30.0,
            export_seconds: 30.0,
            users: 300,
            habits: Habits::default(),
            workers: 8,
            request_millis: 100.0,
        }
    }
}

/// How much work the service does for each request, and how many it works on at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Service {
    /// Requests worked on at once (at least 1).
    pub workers: u32,
    /// µs of work an export takes.
    pub export_micros: u64,
    /// µs of work any other request takes.
    pub request_micros: u64,
}

impl Service {
    /// The work `call` takes, µs.
    pub fn work(&self, call: &Call) -> u64 {
        match call {
            Call::Export { .. } => self.export_micros,
            _ => self.request_micros,
        }
    }
}

impl SlowExports {
    pub(crate) fn duration(&self) -> u64 {
        (self.minutes * 60e6) as u64
    }

    pub(crate) fn service(&self) -> Service {
        Service {
            workers: self.workers.max(1),
            export_micros: (self.export_seconds * 1e6) as u64,
            request_micros: (self.request_millis * 1e3) as u64,
        }
    }

    pub(crate) fn parameters(&self) -> Vec<(&'static str, String)> {
        vec![
            ("minutes", self.minutes.to_string()),
            ("exports a minute", self.exports_per_minute.to_string()),
            ("seconds of work an export", self.export_seconds.to_string()),
            ("users", self.users.to_string()),
            ("habits", self.habits.to_string()),
            ("workers", self.workers.max(1).to_string()),
            ("ms of work a request", self.request_millis.to_string()),
        ]
    }

    pub(crate) fn sources(&self) -> Vec<Box<dyn Source>> {
        let end = self.duration();
        let exports = Poisson::new(self.exports_per_minute / 60.0, 0, end, |_, at| Visit {
            at,
            caller: Caller::attacker(),
            from: IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)),
            call: Call::Export {
                account: EXPORTING_ACCOUNT,
            },
        });
        let mut sources: Vec<Box<dyn Source>> = vec![Box::new(exports)];
        for user in 0..self.users {
            sources.push(Box::new(Person::at_home(user, self.habits.clone(), end)));
        }
        sources
    }
}
