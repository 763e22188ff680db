//! The results, three ways: a table on the terminal, a CSV, and an SVG chart a scenario.

mod chart;
mod codes_chart;
mod csv;
mod latency_chart;
mod plot;
mod table;

pub use chart::write_chart;
pub use csv::write_csv;
pub use table::write_table;
