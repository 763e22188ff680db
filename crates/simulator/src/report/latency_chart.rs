//! The chart of a scenario that models the service's work ([`Scenario::service`]): one line a
//! policy of the innocents' mean latency over time, on a log scale (a tenth of a second and
//! minutes of queueing on one axis).

use plotters::prelude::*;

use super::plot;
use crate::{Outcome, Scenario, Second};

/// Seconds a point.
const BIN_SECONDS: usize = 10;

/// The axis floor, seconds.
const FLOOR: f64 = 0.01;

/// Colours of the policies' lines, in order.
pub(super) const COLORS: [RGBColor; 5] = [
    RGBColor(214, 39, 40),
    RGBColor(255, 127, 14),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// Draws the chart of `outcomes` for `scenario` into `svg`.
pub(super) fn draw(
    svg: &mut String,
    scenario: &Scenario,
    outcomes: &[Outcome],
) -> Result<(), String> {
    let root = SVGBackend::with_string(svg, (960, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let minutes = scenario.duration_micros() as f64 / 60e6;
    let lines: Vec<Vec<(f64, f64)>> = outcomes
        .iter()
        .map(|outcome| line(&outcome.seconds))
        .collect();
    let top = lines
        .iter()
        .flatten()
        .map(|(_, latency)| *latency)
        .fold(1.0_f64, f64::max)
        * 3.0;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{} — innocents' mean latency, by policy", scenario.title()),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..minutes, (FLOOR..top).log_scale())
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("minutes")
        .y_desc("seconds, arrival to the end of the work")
        .draw()
        .map_err(|e| e.to_string())?;
    for (index, (outcome, line)) in outcomes.iter().zip(lines).enumerate() {
        let color = COLORS[index % COLORS.len()];
        let label = format!(
            "{} (innocents refused: {})",
            outcome.policy, outcome.score.innocent_requests_refused
        );
        plot::line(&mut chart, line, color, label)?;
    }
    plot::legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    root.present().map_err(|e| e.to_string())
}

/// The innocents' mean latency (seconds) of each bin of [`BIN_SECONDS`] that served any, x in
/// minutes.
fn line(seconds: &[Second]) -> Vec<(f64, f64)> {
    seconds
        .chunks(BIN_SECONDS)
        .enumerate()
        .filter_map(|(index, chunk)| {
            let served: u32 = chunk.iter().map(|second| second.innocent_served).sum();
            let total: u64 = chunk
                .iter()
                .map(|second| second.innocent_latency_micros)
                .sum();
            (served > 0).then(|| {
                let mean = total as f64 / 1e6 / f64::from(served);
                ((index * BIN_SECONDS) as f64 / 60.0, mean.max(FLOOR))
            })
        })
        .collect()
}
