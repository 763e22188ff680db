//! Rule ids: a rate_limit's `name`, or one made from the domain and the descriptor's entries;
//! made valid and unique, each change said in a note.
//!
//! Names come first (in file order), since `replaces` entries and people refer to them; made
//! ids yield. An id already taken gets the first free suffix `-2`, `-3`, ...

use std::collections::BTreeMap;

use tollgate_core::RuleId;

/// What a rule asks for: its ratelimit `name`, else an id made from `made_from`.
pub(crate) struct Wanted<'w> {
    pub(crate) name: Option<&'w str>,
    /// The domain, then each entry as ratelimit names it (`key`, or `key_value`).
    pub(crate) made_from: Vec<String>,
    pub(crate) line: usize,
}

/// A rule's id, and what was changed to get it (one sentence each).
pub(crate) struct Assigned {
    pub(crate) id: String,
    pub(crate) notes: Vec<String>,
}

/// An id for each of `wanted`, in the same order: valid and all different.
pub(crate) fn assign(wanted: &[Wanted<'_>]) -> Vec<Assigned> {
    let mut assigned: Vec<Option<Assigned>> = wanted.iter().map(|_| None).collect();
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    let named = wanted
        .iter()
        .enumerate()
        .filter(|(_, want)| want.name.is_some());
    let made = wanted
        .iter()
        .enumerate()
        .filter(|(_, want)| want.name.is_none());
    for (index, want) in named.chain(made) {
        let (id, mut notes) = candidate(want);
        let id = match taken.get(&id) {
            None => id,
            Some(line) => {
                let free = (2..)
                    .map(|n| suffixed(&id, n))
                    .find(|free| !taken.contains_key(free))
                    .unwrap_or_default();
                notes.push(format!(
                    "the id {id:?} is taken by the rule from line {line}: this one is {free:?}"
                ));
                free
            }
        };
        taken.insert(id.clone(), want.line);
        assigned[index] = Some(Assigned { id, notes });
    }
    assigned.into_iter().flatten().collect()
}

/// The id `want` asks for, made valid.
fn candidate(want: &Wanted<'_>) -> (String, Vec<String>) {
    match want.name {
        Some(name) if is_valid(name) => (name.to_owned(), Vec::new()),
        Some(name) => {
            let id = cut(name
                .chars()
                .map(|c| if allowed(c) { c } else { '_' })
                .collect());
            let note = format!(
                "the ratelimit name {name:?} is not a valid rule id (A-Z a-z 0-9 _ - ., at most \
                 {} bytes): this rule's id is {id:?}",
                RuleId::MAX_LEN
            );
            (id, vec![note])
        }
        None => {
            let whole: Vec<String> = want.made_from.iter().map(|part| segment(part)).collect();
            let whole = whole.join(".");
            if whole.len() <= RuleId::MAX_LEN {
                return (whole, Vec::new());
            }
            let id = cut(whole);
            let note = format!(
                "the id made from the domain and the descriptor is cut to {} bytes",
                RuleId::MAX_LEN
            );
            (id, vec![note])
        }
    }
}

/// `part` with each run of characters an id cannot have (and of `_`) as one `_`, none at
/// either end: `path_/login` is `path_login`.
fn segment(part: &str) -> String {
    let mut segment = String::with_capacity(part.len());
    for c in part.chars() {
        let c = if allowed(c) { c } else { '_' };
        if !(c == '_' && segment.ends_with('_')) {
            segment.push(c);
        }
    }
    let trimmed = segment.trim_matches('_');
    if trimmed.is_empty() {
        "_".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// `id` (valid characters, so one byte each) at most [`RuleId::MAX_LEN`] bytes long, without
/// a `.` or `_` left dangling at the cut.
fn cut(mut id: String) -> String {
    if id.len() > RuleId::MAX_LEN {
        id.truncate(RuleId::MAX_LEN);
        while id.len() > 1 && (id.ends_with('.') || id.ends_with('_')) {
            id.pop();
        }
    }
    id
}

/// `id` with the suffix `-n`, cut to leave it room.
fn suffixed(id: &str, n: usize) -> String {
    let suffix = format!("-{n}");
    let room = RuleId::MAX_LEN.saturating_sub(suffix.len());
    format!("{}{suffix}", &id[..id.len().min(room)])
}

/// Whether `id` is a valid rule id as it is.
pub(crate) fn is_valid(id: &str) -> bool {
    !id.is_empty() && id.len() <= RuleId::MAX_LEN && id.chars().all(allowed)
}

/// Whether a rule id may have `c`.
fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn made(parts: &[&str], line: usize) -> Wanted<'static> {
        Wanted {
            name: None,
            made_from: parts.iter().map(|part| (*part).to_owned()).collect(),
            line,
        }
    }

    #[test]
    fn made_ids_join_cleaned_segments() {
        let ids = assign(&[
            made(&["edge", "path_/login", "user"], 3),
            made(&["edge", "client_internal*"], 9),
            made(&["my domain", "/"], 12),
        ]);
        let ids: Vec<&str> = ids.iter().map(|assigned| assigned.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "edge.path_login.user",
                "edge.client_internal",
                "my_domain._"
            ]
        );
    }

    #[test]
    fn names_come_first_and_made_ids_yield() {
        let wanted = [
            made(&["edge", "remote_address"], 3),
            Wanted {
                name: Some("edge.remote_address"),
                made_from: vec!["edge".into(), "other".into()],
                line: 7,
            },
        ];
        let assigned = assign(&wanted);
        assert_eq!(assigned[0].id, "edge.remote_address-2");
        assert_eq!(
            assigned[0].notes,
            [
                "the id \"edge.remote_address\" is taken by the rule from line 7: this one is \"edge.remote_address-2\""
            ]
        );
        assert_eq!(assigned[1].id, "edge.remote_address");
        assert!(assigned[1].notes.is_empty());
    }

    #[test]
    fn invalid_names_are_made_valid_and_long_ids_are_cut() {
        let long = "x".repeat(100);
        let wanted = [
            Wanted {
                name: Some("per address"),
                made_from: Vec::new(),
                line: 1,
            },
            made(&["edge", &long], 2),
            made(&["edge", &long], 3),
        ];
        let assigned = assign(&wanted);
        assert_eq!(assigned[0].id, "per_address");
        assert_eq!(assigned[1].id.len(), 64);
        assert_eq!(assigned[2].id.len(), 64);
        assert!(assigned[2].id.ends_with("-2"));
        assert!(assigned.iter().all(|assigned| is_valid(&assigned.id)));
    }
}
