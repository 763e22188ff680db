//! The chart: for one scenario, a panel a policy of requests admitted and refused over time,
//! innocents' and attackers', on a log scale (a 5,000-a-second loop and a few users' refusals
//! on one axis).

use std::io::{self, Write};

use plotters::prelude::*;

use super::plot;
use crate::{Outcome, Scenario, Second};

/// At most this many points a line.
const POINTS: usize = 300;

/// The axis floor: a rate of zero is drawn here.
const FLOOR: f64 = 0.01;

/// Writes an SVG chart of `outcomes` (one panel each) for `scenario`; for a scenario that
/// models the service's work, one panel of the innocents' latency, a line a policy; for the
/// code-fraud scenario, codes sent over time (pumped, and real people's), a line a policy.
///
/// ```
/// use tollgate_simulator::{Crowd, Policy, Scenario, report::write_chart, simulate};
///
/// let crowd = Scenario::Crowd(Crowd { users: 10, minutes: 1.0, ..Crowd::default() });
/// let outcome = simulate(&crowd, &Policy::layered()?, 1, &mut |_| {})?;
/// let mut svg = Vec::new();
/// write_chart(&mut svg, &crowd, &[outcome]).expect("written to memory");
/// assert!(String::from_utf8_lossy(&svg).starts_with("<svg"));
/// # Ok::<(), tollgate_simulator::Error>(())
/// ```
pub fn write_chart(
    out: &mut dyn Write,
    scenario: &Scenario,
    outcomes: &[Outcome],
) -> io::Result<()> {
    let mut svg = String::new();
    let drawn = if scenario.service().is_some() {
        super::latency_chart::draw(&mut svg, scenario, outcomes)
    } else if let Scenario::Otp(_) = scenario {
        super::codes_chart::draw(&mut svg, scenario, outcomes)
    } else {
        draw(&mut svg, scenario, outcomes)
    };
    drawn.map_err(io::Error::other)?;
    out.write_all(svg.as_bytes())
}

/// A line's rate a second, bin by bin.
type Line = Vec<(f64, f64)>;

fn draw(svg: &mut String, scenario: &Scenario, outcomes: &[Outcome]) -> Result<(), String> {
    let panels = outcomes.len().max(1);
    let height = 70 + 230 * panels as u32;
    let root = SVGBackend::with_string(svg, (960, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let title = format!("{} — {}", scenario.name(), scenario.title());
    let root = root
        .titled(&title, ("sans-serif", 20))
        .map_err(|e| e.to_string())?;
    let minutes = scenario.duration_micros() as f64 / 60e6;
    let lines: Vec<[Line; 4]> = outcomes
        .iter()
        .map(|outcome| lines(&outcome.seconds))
        .collect();
    let top = lines
        .iter()
        .flatten()
        .flatten()
        .map(|(_, rate)| *rate)
        .fold(10.0_f64, f64::max)
        * 3.0;
    let styles = [
        ("innocents admitted", RGBColor(31, 119, 180)),
        ("innocents refused", RGBColor(255, 127, 14)),
        ("attackers admitted", RGBColor(214, 39, 40)),
        ("attackers refused", RGBColor(127, 127, 127)),
    ];
    // The store's outage, if any, shaded (in minutes).
    let outage = scenario
        .outage()
        .map(|down| (down.start as f64 / 60e6, down.end as f64 / 60e6));
    let shaded = if outage.is_some() {
        " (shaded: the store is down)"
    } else {
        ""
    };
    for ((area, outcome), lines) in root
        .split_evenly((panels, 1))
        .iter()
        .zip(outcomes)
        .zip(lines)
    {
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("policy: {}{shaded}", outcome.policy),
                ("sans-serif", 15),
            )
            .margin(10)
            .x_label_area_size(32)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..minutes, (FLOOR..top).log_scale())
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("minutes")
            .y_desc("requests a second")
            .y_label_formatter(&|rate| {
                if *rate >= 1.0 {
                    format!("{rate:.0}")
                } else {
                    format!("{rate}")
                }
            })
            .draw()
            .map_err(|e| e.to_string())?;
        if let Some((from, to)) = outage {
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(from, FLOOR), (to, top)],
                    BLACK.mix(0.07).filled(),
                )))
                .map_err(|e| e.to_string())?;
        }
        for ((label, color), line) in styles.iter().zip(lines) {
            plot::line(&mut chart, line, *color, (*label).to_owned())?;
        }
        plot::legend(&mut chart, SeriesLabelPosition::LowerRight)?;
    }
    root.present().map_err(|e| e.to_string())
}

/// The four lines of one outcome, binned to at most [`POINTS`] points (x in minutes).
fn lines(seconds: &[Second]) -> [Line; 4] {
    let bin = seconds.len().div_ceil(POINTS).max(1);
    let mut lines: [Line; 4] = Default::default();
    for (index, chunk) in seconds.chunks(bin).enumerate() {
        let x = (index * bin) as f64 / 60.0;
        let per_second = |count: u32| (f64::from(count) / chunk.len() as f64).max(FLOOR);
        let sum = |pick: fn(&Second) -> u32| chunk.iter().map(pick).sum::<u32>();
        lines[0].push((x, per_second(sum(|s| s.innocent_admitted))));
        lines[1].push((x, per_second(sum(|s| s.innocent_refused))));
        lines[2].push((x, per_second(sum(|s| s.attacker_admitted))));
        lines[3].push((x, per_second(sum(|s| s.attacker_refused))));
    }
    lines
}
