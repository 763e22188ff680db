//! Many path patterns looked up at once: a tree of their segments, so a request's path is
//! matched against 10,000 exempt paths or route rows in the time of its own segments, not of
//! the patterns' number.
//!
//! Hand-written rather than `matchit` (which axum itself uses): `matchit` answers the one
//! most specific route and refuses overlapping ones (`/users/{id}` beside `/users/{name}`, or
//! two rows on one pattern), while a rule set applies **every** row whose pattern matches, in
//! the order the rows were added. The tree keeps every pattern and reports them all; each
//! pattern matches here exactly as [`PathPattern::matches`] says (a test compares them on
//! random patterns and paths).

use std::collections::HashMap;

use smallvec::SmallVec;

use super::path_pattern::Segment;
use crate::rules::path_pattern::PathPattern;

/// The positions of the patterns a path matched (in no particular order).
pub(crate) type Matches = SmallVec<[usize; 8]>;

/// Path patterns by position, as a tree of segments.
#[derive(Debug, Clone, Default)]
pub(crate) struct PathIndex {
    root: Node,
}

#[derive(Debug, Clone, Default)]
struct Node {
    /// Patterns whose last segment is this node's: the path must be used up here.
    ends: Vec<usize>,
    /// The next segment, by its exact text.
    literals: HashMap<Box<str>, Node>,
    /// `<prefix>{name}` next: any segment starting with the prefix.
    params: Vec<(Box<str>, Node)>,
    /// `<prefix>{*name}` next: any non-empty rest starting with the prefix.
    rests: Vec<(Box<str>, usize)>,
}

impl PathIndex {
    /// The index of `patterns`, each known by its position.
    pub(crate) fn new<'p>(patterns: impl IntoIterator<Item = &'p PathPattern>) -> Self {
        let mut index = PathIndex::default();
        for (position, pattern) in patterns.into_iter().enumerate() {
            index.insert(position, pattern);
        }
        index
    }

    fn insert(&mut self, position: usize, pattern: &PathPattern) {
        let mut node = &mut self.root;
        for segment in pattern.segments() {
            node = match segment {
                Segment::Literal(text) => node.literals.entry(text.clone()).or_default(),
                Segment::Param { prefix } => {
                    let at = match node.params.iter().position(|(held, _)| held == prefix) {
                        Some(at) => at,
                        None => {
                            node.params.push((prefix.clone(), Node::default()));
                            node.params.len() - 1
                        }
                    };
                    &mut node.params[at].1
                }
                Segment::Rest { prefix } => {
                    node.rests.push((prefix.clone(), position));
                    return;
                }
            };
        }
        node.ends.push(position);
    }

    /// Whether any pattern matches `path`.
    pub(crate) fn any(&self, path: &str) -> bool {
        let mut found = false;
        self.root.walk(path.strip_prefix('/'), &mut |_| {
            found = true;
        });
        found
    }

    /// The position of every pattern that matches `path`.
    pub(crate) fn matching(&self, path: &str) -> Matches {
        let mut matches = Matches::new();
        self.root.walk(path.strip_prefix('/'), &mut |position| {
            matches.push(position)
        });
        matches
    }
}

impl Node {
    /// Reports every pattern below this node that matches `remaining` (`None`: the path is
    /// used up; `Some("")`: an empty segment is still to match), as `PathPattern::matches`
    /// reads a path.
    fn walk(&self, remaining: Option<&str>, found: &mut impl FnMut(usize)) {
        let Some(rest) = remaining else {
            self.ends.iter().copied().for_each(&mut *found);
            return;
        };
        for (prefix, position) in &self.rests {
            if rest.len() > prefix.len() && rest.starts_with(&**prefix) {
                found(*position);
            }
        }
        let (piece, after) = match rest.split_once('/') {
            Some((piece, after)) => (piece, Some(after)),
            None => (rest, None),
        };
        if let Some(next) = self.literals.get(piece) {
            next.walk(after, found);
        }
        for (prefix, next) in &self.params {
            if piece.starts_with(&**prefix) {
                next.walk(after, found);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator.
    struct Sequence(u64);

    impl Sequence {
        fn next(&mut self, below: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((self.0 >> 33) % below as u64) as usize
        }
    }

    const PIECES: [&str; 8] = ["a", "b", "ab", "", "v1", "{id}", "v{version}", "@{handle}"];
    const LASTS: [&str; 4] = ["{*rest}", "a{*rest}", "*", "b"];
    const PATH_PIECES: [&str; 7] = ["a", "b", "ab", "", "v1", "@x", "abc"];

    fn pattern(random: &mut Sequence) -> String {
        let mut text = String::new();
        for _ in 0..=random.next(3) {
            text.push('/');
            text.push_str(PIECES[random.next(PIECES.len())]);
        }
        if random.next(3) == 0 {
            text.push('/');
            text.push_str(LASTS[random.next(LASTS.len())]);
        }
        text
    }

    fn path(random: &mut Sequence) -> String {
        let mut text = String::new();
        for _ in 0..=random.next(4) {
            text.push('/');
            text.push_str(PATH_PIECES[random.next(PATH_PIECES.len())]);
        }
        text
    }

    #[test]
    fn the_index_matches_exactly_what_each_pattern_matches() {
        let mut random = Sequence(17);
        for _ in 0..300 {
            let patterns: Vec<PathPattern> = (0..=random.next(12))
                .map(|_| PathPattern::new(&pattern(&mut random)).expect("a valid pattern"))
                .collect();
            let index = PathIndex::new(&patterns);
            for _ in 0..40 {
                let path = path(&mut random);
                let mut found = index.matching(&path).to_vec();
                found.sort_unstable();
                let expected: Vec<usize> = (0..patterns.len())
                    .filter(|&at| patterns[at].matches(&path))
                    .collect();
                assert_eq!(found, expected, "{path} against {patterns:?}");
                assert_eq!(index.any(&path), !expected.is_empty());
            }
        }
        assert!(!PathIndex::new(&[]).any("/"));
    }
}
