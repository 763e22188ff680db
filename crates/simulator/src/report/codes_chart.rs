//! The chart of the code-fraud scenario: one-time codes sent a minute over time, pumped (top)
//! and real people's (bottom), a line a policy, on a log scale (a pumping attack's hundreds a
//! minute and a policy's few leaks on one axis).

use plotters::prelude::*;

use super::latency_chart::COLORS;
use super::plot;
use crate::{Outcome, Scenario, Second};

/// Which codes a panel counts, from a second's tally.
type Pick = fn(&Second) -> u32;

/// Seconds a point.
const BIN_SECONDS: usize = 60;

/// The axis floor, codes a minute: none is drawn here.
const FLOOR: f64 = 0.1;

/// Draws the chart of `outcomes` for `scenario` into `svg`.
pub(super) fn draw(
    svg: &mut String,
    scenario: &Scenario,
    outcomes: &[Outcome],
) -> Result<(), String> {
    let root = SVGBackend::with_string(svg, (960, 760)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let root = root
        .titled(
            &format!("{} — {}", scenario.name(), scenario.title()),
            ("sans-serif", 20),
        )
        .map_err(|e| e.to_string())?;
    let panels: [(&str, Pick); 2] = [
        ("pumped codes sent a minute", |second| second.pumped_sent),
        ("real people's codes sent a minute", |second| {
            second.real_codes_sent
        }),
    ];
    let minutes = scenario.duration_micros() as f64 / 60e6;
    for (area, (caption, pick)) in root.split_evenly((2, 1)).iter().zip(panels) {
        let lines: Vec<Vec<(f64, f64)>> = outcomes
            .iter()
            .map(|outcome| line(&outcome.seconds, pick))
            .collect();
        let top = lines
            .iter()
            .flatten()
            .map(|(_, codes)| *codes)
            .fold(10.0_f64, f64::max)
            * 3.0;
        let mut chart = ChartBuilder::on(area)
            .caption(caption, ("sans-serif", 15))
            .margin(10)
            .x_label_area_size(32)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..minutes, (FLOOR..top).log_scale())
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("minutes")
            .y_desc("codes a minute")
            .draw()
            .map_err(|e| e.to_string())?;
        for (index, (outcome, line)) in outcomes.iter().zip(lines).enumerate() {
            let color = COLORS[index % COLORS.len()];
            plot::line(&mut chart, line, color, outcome.policy.clone())?;
        }
        plot::legend(&mut chart, SeriesLabelPosition::LowerRight)?;
    }
    root.present().map_err(|e| e.to_string())
}

/// Codes a minute, bin by bin of [`BIN_SECONDS`], as `pick` counts them (x in minutes).
fn line(seconds: &[Second], pick: Pick) -> Vec<(f64, f64)> {
    seconds
        .chunks(BIN_SECONDS)
        .enumerate()
        .map(|(index, chunk)| {
            let codes: u32 = chunk.iter().map(pick).sum();
            let per_minute = f64::from(codes) * 60.0 / chunk.len() as f64;
            ((index * BIN_SECONDS) as f64 / 60.0, per_minute.max(FLOOR))
        })
        .collect()
}
