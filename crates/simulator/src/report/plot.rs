//! What every chart draws alike: a policy's line with its legend entry, and the legend's box.

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// A panel: minutes across, a log scale up.
pub(super) type Panel<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, LogCoord<f64>>>;

/// Draws `line` in `color`, named `label` in the legend.
pub(super) fn line(
    panel: &mut Panel<'_, '_>,
    line: Vec<(f64, f64)>,
    color: RGBColor,
    label: String,
) -> Result<(), String> {
    panel
        .draw_series(LineSeries::new(line, color.stroke_width(2)))
        .map_err(|e| e.to_string())?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
    Ok(())
}

/// Draws the legend's box at `position`.
pub(super) fn legend<'b>(
    panel: &mut Panel<'b, 'b>,
    position: SeriesLabelPosition,
) -> Result<(), String> {
    panel
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}
