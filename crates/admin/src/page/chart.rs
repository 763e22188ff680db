//! A rule's decisions over the last hour, as a chart read at a glance: one stacked bar a
//! minute (allowed, refused, would-be refusals of a shadow rule), labelled axes, a legend, and
//! the rule's limit as a dashed line where it bounds a minute ([`MinuteLimit`]).
//!
//! Hand-written SVG rather than `plotters`: the chart is sixty rectangles and a few lines,
//! written with maud like the rest of the page (so every text is escaped), with the classes
//! the page's style and the browser test find it by and a `<title>` per bar for a tooltip —
//! which `plotters`' SVG backend does not give — and no dependency, script or font to fetch.

use maud::{Markup, html};

use super::limit_line::MinuteLimit;
use crate::views::CountsView;
use crate::words::count;

const WIDTH: f64 = 440.0;
const HEIGHT: f64 = 190.0;
/// Room for the y axis's title and numbers.
const LEFT: f64 = 52.0;
const RIGHT: f64 = 12.0;
/// Room for the legend.
const TOP: f64 = 26.0;
/// Room for the x axis's numbers and title.
const BOTTOM: f64 = 38.0;
const PLOT_WIDTH: f64 = WIDTH - LEFT - RIGHT;
const PLOT_HEIGHT: f64 = HEIGHT - TOP - BOTTOM;
/// A bar with anything in it is at least this tall, so one refusal among thousands shows.
const MIN_BAR: f64 = 1.5;

pub(crate) const ALLOWED: &str = "#7d9bb8";
pub(crate) const REFUSED: &str = "#d70015";
pub(crate) const SHADOW: &str = "#ff9f0a";
const INK: &str = "#1d1d1f";
const AXIS: &str = "#8e8e93";
const GRID: &str = "#e5e5ea";

/// Where the limit goes, given the busiest minute.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Placed {
    /// Drawn at this many a minute.
    Line(f64),
    /// Far above every bar (which it would flatten): named at the top instead.
    AboveScale,
    /// No line.
    Absent,
}

/// The top of the y axis, and where the limit goes. The scale takes in the line unless the
/// line is over ten times the busiest minute: then bars would be flat, and one refusal
/// invisible, so the line is named above the scale instead.
fn scale(peak: u64, limit: &MinuteLimit) -> (u64, Placed) {
    match limit {
        MinuteLimit::Line { per_minute, .. } if peak == 0 || *per_minute <= 10.0 * peak as f64 => {
            // Headroom above the line for its label.
            (
                nice(f64::max(peak as f64, per_minute * 1.15)),
                Placed::Line(*per_minute),
            )
        }
        MinuteLimit::Line { .. } => (nice(peak as f64), Placed::AboveScale),
        MinuteLimit::NoLine(_) => (nice(peak as f64), Placed::Absent),
    }
}

/// The smallest of 1, 2, 4, 6, 8, 10, 20, ... at least `value` (and at least 1): an axis top
/// whose half is a whole number.
fn nice(value: f64) -> u64 {
    let mut magnitude: u64 = 1;
    loop {
        for step in [1, 2, 4, 6, 8] {
            let top = step * magnitude;
            if top as f64 >= value {
                return top;
            }
        }
        match magnitude.checked_mul(10) {
            Some(next) => magnitude = next,
            None => return u64::MAX,
        }
    }
}

/// A number on an axis: "800", "12k", "1.2M".
fn short_count(n: u64) -> String {
    match n {
        0..10_000 => count(n),
        10_000..1_000_000 => format!("{}k", n / 1_000),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

fn px(value: f64) -> String {
    format!("{value:.1}")
}

/// The chart of `rule`'s `minutes` (the last 60, oldest first) with its limit; `overridden`:
/// some callers have quotas of their own, which the line is not.
pub(crate) fn chart(
    rule: &str,
    minutes: &[CountsView],
    limit: &MinuteLimit,
    overridden: bool,
) -> Markup {
    let total = |counts: &CountsView| counts.allowed + counts.refused + counts.shadow_refused;
    let peak = minutes.iter().map(total).max().unwrap_or(0);
    let (top, placed) = scale(peak, limit);
    let y = |value: f64| TOP + PLOT_HEIGHT * (1.0 - value / top as f64);
    let height = |value: u64| {
        if value == 0 {
            0.0
        } else {
            f64::max(PLOT_HEIGHT * value as f64 / top as f64, MIN_BAR)
        }
    };
    let slot = PLOT_WIDTH / minutes.len().max(1) as f64;
    let sum = |part: fn(&CountsView) -> u64| minutes.iter().map(part).sum::<u64>();
    let (allowed, refused, shadow) = (
        sum(|counts| counts.allowed),
        sum(|counts| counts.refused),
        sum(|counts| counts.shadow_refused),
    );
    let label = match limit {
        MinuteLimit::Line { label, .. } => Some(label.as_str()),
        MinuteLimit::NoLine(_) => None,
    };
    let summary = format!(
        "Decisions per minute of {rule} over the last hour: {} allowed, {} refused{}{}",
        count(allowed),
        count(refused),
        if shadow > 0 {
            format!(", {} would have been refused (shadow)", count(shadow))
        } else {
            String::new()
        },
        label.map_or(String::new(), |label| format!("; limit {label}")),
    );
    let ticks = if top >= 2 {
        vec![0, top / 2, top]
    } else {
        vec![0, top]
    };
    let mut legend = vec![(ALLOWED, "allowed"), (REFUSED, "refused")];
    if shadow > 0 {
        legend.push((SHADOW, "would refuse (shadow)"));
    }
    // Each key's left edge: a swatch, its name (about 6 px a character), a gap.
    let mut keys_at = vec![LEFT];
    for (_, name) in &legend {
        let last = keys_at.last().copied().unwrap_or(LEFT);
        keys_at.push(last + 30.0 + 6.0 * name.chars().count() as f64);
    }
    let plot_bottom = TOP + PLOT_HEIGHT;
    html! {
        figure.chart {
            svg viewBox={ "0 0 " (WIDTH) " " (HEIGHT) } width=(WIDTH) height=(HEIGHT) role="img"
                aria-label=(summary) {
                title { (summary) }
                // The grid and the y axis's numbers: 0, half, top.
                @for value in ticks {
                    line.grid x1=(px(LEFT)) x2=(px(LEFT + PLOT_WIDTH)) y1=(px(y(value as f64)))
                        y2=(px(y(value as f64))) stroke=(GRID) {}
                    text.tick x=(px(LEFT - 4.0)) y=(px(y(value as f64) + 3.5)) text-anchor="end" {
                        (short_count(value))
                    }
                }
                @for (at, counts) in minutes.iter().enumerate() {
                    @let x = LEFT + at as f64 * slot + 0.5;
                    @let width = f64::max(slot - 1.0, 1.0);
                    @let (a, r, s) = (height(counts.allowed), height(counts.refused), height(counts.shadow_refused));
                    g.minute {
                        title {
                            (minutes.len() - 1 - at) " min ago: " (count(counts.allowed)) " allowed, "
                            (count(counts.refused)) " refused"
                            @if counts.shadow_refused > 0 { ", " (count(counts.shadow_refused)) " would refuse (shadow)" }
                        }
                        @if a > 0.0 {
                            rect.allowed x=(px(x)) y=(px(plot_bottom - a)) width=(px(width)) height=(px(a)) fill=(ALLOWED) {}
                        }
                        @if r > 0.0 {
                            rect.refused x=(px(x)) y=(px(plot_bottom - a - r)) width=(px(width)) height=(px(r)) fill=(REFUSED) {}
                        }
                        @if s > 0.0 {
                            rect.shadow x=(px(x)) y=(px(plot_bottom - a - r - s)) width=(px(width)) height=(px(s)) fill=(SHADOW) {}
                        }
                    }
                }
                // The axes, over the bars' feet.
                line.axis x1=(px(LEFT)) x2=(px(LEFT)) y1=(px(TOP)) y2=(px(plot_bottom)) stroke=(AXIS) {}
                line.axis x1=(px(LEFT)) x2=(px(LEFT + PLOT_WIDTH)) y1=(px(plot_bottom)) y2=(px(plot_bottom)) stroke=(AXIS) {}
                // Every quarter hour, on the minutes' boundaries: 60 minutes ago ... now.
                @for boundary in [0usize, 15, 30, 45, 60] {
                    @let x = LEFT + PLOT_WIDTH * boundary as f64 / 60.0;
                    line.axis x1=(px(x)) x2=(px(x)) y1=(px(plot_bottom)) y2=(px(plot_bottom + 3.0)) stroke=(AXIS) {}
                    text.tick x=(px(x)) y=(px(plot_bottom + 13.0)) text-anchor="middle" {
                        @if boundary == 60 { "now" } @else { (60 - boundary) }
                    }
                }
                text.axis-title x=(px(LEFT + PLOT_WIDTH / 2.0)) y=(px(HEIGHT - 6.0)) text-anchor="middle" {
                    "minutes ago"
                }
                text.axis-title text-anchor="middle"
                    transform={ "translate(12 " (px(TOP + PLOT_HEIGHT / 2.0)) ") rotate(-90)" } {
                    "requests per minute"
                }
                @match (placed, label) {
                    (Placed::Line(per_minute), Some(label)) => {
                        line.limit x1=(px(LEFT)) x2=(px(LEFT + PLOT_WIDTH)) y1=(px(y(per_minute)))
                            y2=(px(y(per_minute))) stroke=(INK) stroke-width="1.5" stroke-dasharray="5 3" {}
                        // At the old end, where bars are fewest, haloed in white over any.
                        text.limit-label x=(px(LEFT + 4.0)) y=(px(y(per_minute) - 4.0))
                            stroke="white" stroke-width="3" paint-order="stroke" {
                            "limit: " (label)
                        }
                    }
                    (Placed::AboveScale, Some(label)) => {
                        text.limit-label.above-scale x=(px(LEFT + PLOT_WIDTH - 2.0)) y=(px(TOP + 10.0)) text-anchor="end" {
                            "limit: " (label) ", above this scale ↑"
                        }
                    }
                    _ => {}
                }
                // The legend, left to right along the top.
                g.legend {
                    @for ((colour, name), x) in legend.iter().zip(&keys_at) {
                        @let x = *x;
                        rect x=(px(x)) y="6" width="10" height="10" fill=(colour) {}
                        text x=(px(x + 14.0)) y="15" { (name) }
                    }
                    @if matches!(placed, Placed::Line(_)) {
                        @let x = keys_at[legend.len()];
                        line x1=(px(x)) x2=(px(x + 12.0)) y1="11" y2="11" stroke=(INK) stroke-width="1.5" stroke-dasharray="4 2" {}
                        text x=(px(x + 16.0)) y="15" { "limit" }
                    }
                }
            }
            @match limit {
                MinuteLimit::NoLine(why) => figcaption.muted { (why) },
                MinuteLimit::Line { .. } if overridden => figcaption.muted {
                    "The line is the rule's own quota: the plans and callers listed beside it have theirs."
                },
                MinuteLimit::Line { .. } => {},
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minutes(counts: &[(u64, u64)]) -> Vec<CountsView> {
        let mut minutes = vec![
            CountsView {
                allowed: 0,
                refused: 0,
                shadow_refused: 0
            };
            60 - counts.len()
        ];
        minutes.extend(counts.iter().map(|&(allowed, refused)| CountsView {
            allowed,
            refused,
            shadow_refused: 0,
        }));
        minutes
    }

    fn line(per_minute: f64) -> MinuteLimit {
        MinuteLimit::Line {
            per_minute,
            label: format!("{per_minute} a minute per caller"),
        }
    }

    /// The value of `attribute` in the first element of `class` in `svg`.
    fn attribute(svg: &str, class: &str, attribute: &str) -> f64 {
        let element = svg
            .split('<')
            .find(|element| element.contains(&format!("class=\"{class}\"")))
            .unwrap_or_else(|| panic!("no {class} in {svg}"));
        let value = element
            .split(&format!(" {attribute}=\""))
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("no {attribute} in {element}"));
        value.parse().expect("a number")
    }

    #[test]
    fn axes_are_labelled_and_the_legend_names_each_colour() {
        let svg = chart("reads", &minutes(&[(3, 2)]), &line(2.0), false).into_string();
        for words in [
            "minutes ago",
            "requests per minute",
            ">now<",
            ">60<",
            ">allowed<",
            ">refused<",
            ">limit<",
            "limit: 2 a minute per caller",
            "3 allowed, 2 refused",
        ] {
            assert!(svg.contains(words), "{words:?} not in {svg}");
        }
        assert_eq!(svg.matches("class=\"minute\"").count(), 60);
        assert!(!svg.contains("shadow"), "no shadow refusals, no shadow key");
    }

    #[test]
    fn the_limit_line_sits_at_its_value_on_the_scale() {
        // Peak 5, line at 2: the axis tops at 6 (the first round number over 5 and 2 × 1.15),
        // so the line is a third of the way up.
        let svg = chart("posts", &minutes(&[(3, 2)]), &line(2.0), false).into_string();
        let y = attribute(&svg, "limit", "y1");
        let expected = TOP + PLOT_HEIGHT * (1.0 - 2.0 / 6.0);
        assert!((y - expected).abs() < 0.06, "{y} against {expected}");
        // The busiest bar's top is higher (smaller y) than the line: 5 is above 2.
        let refused_top = attribute(&svg, "refused", "y");
        assert!(refused_top < y, "{refused_top} should be above {y}");
        let allowed_top = attribute(&svg, "allowed", "y");
        let expected = TOP + PLOT_HEIGHT * (1.0 - 3.0 / 6.0);
        assert!((allowed_top - expected).abs() < 0.06);
    }

    #[test]
    fn a_line_far_above_the_traffic_is_named_not_drawn() {
        let svg = chart("otp", &minutes(&[(10, 1)]), &line(120_000.0), false).into_string();
        assert!(!svg.contains("class=\"limit\""));
        assert!(svg.contains("above this scale"));
        // The one refusal still shows.
        assert!(attribute(&svg, "refused", "height") >= MIN_BAR);
        // No traffic: the scale takes the line in.
        let quiet = chart("otp", &minutes(&[]), &line(120_000.0), false).into_string();
        assert!(quiet.contains("class=\"limit\""));
    }

    #[test]
    fn no_line_says_why_under_the_chart() {
        let why = "No limit line: this limit counts requests in flight at once, not a rate.";
        let svg = chart(
            "exports",
            &minutes(&[(1, 0)]),
            &MinuteLimit::NoLine(why.to_owned()),
            false,
        )
        .into_string();
        assert!(!svg.contains("class=\"limit\""));
        assert!(!svg.contains(">limit<"));
        assert!(svg.contains(&format!("<figcaption class=\"muted\">{why}</figcaption>")));
    }

    #[test]
    fn overrides_are_not_the_line() {
        let plain = chart("partners", &minutes(&[]), &line(2.0), false).into_string();
        assert!(!plain.contains("<figcaption"));
        let overridden = chart("partners", &minutes(&[]), &line(2.0), true).into_string();
        assert!(overridden.contains("The line is the rule's own quota"));
    }

    #[test]
    fn shadow_refusals_have_their_own_colour() {
        let mut counts = minutes(&[]);
        counts[59].shadow_refused = 4;
        let svg = chart("shadowed", &counts, &line(2.0), false).into_string();
        assert!(svg.contains("would refuse (shadow)"));
        assert!(attribute(&svg, "shadow", "height") > 0.0);
    }

    #[test]
    fn axis_tops_are_round() {
        assert_eq!(nice(0.0), 1);
        assert_eq!(nice(3.0), 4);
        assert_eq!(nice(5.0), 6);
        assert_eq!(nice(9.0), 10);
        assert_eq!(nice(690.0), 800);
        assert_eq!(nice(138_000.0), 200_000);
        assert_eq!(short_count(8_000), "8,000");
        assert_eq!(short_count(200_000), "200k");
        assert_eq!(short_count(2_000_000), "2.0M");
    }
}
