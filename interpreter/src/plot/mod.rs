//! `dlc plot`: a run's metrics file drawn as a PNG of charts against the step (plotters into an
//! RGB buffer, text from text.rs, encoded by train/png.rs).

mod series;
mod text;

pub use series::{last_run, panels, Panel, Series};

use plotters::prelude::*;
use std::path::Path;
use text::MonoText;

/// One chart's size in pixels; charts are laid out two to a row.
pub const PANEL: (u32, u32) = (640, 360);

/// Distinct line colours (matplotlib's first five).
const COLORS: [RGBColor; 5] =
    [RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(44, 160, 44), RGBColor(214, 39, 40), RGBColor(148, 103, 189)];

/// The image's size for `n` charts.
pub fn size(n: usize) -> (u32, u32) {
    let cols = n.clamp(1, 2) as u32;
    let rows = n.div_ceil(2).max(1) as u32;
    (PANEL.0 * cols, PANEL.1 * rows)
}

/// Draw the charts into a PNG at `out`; returns its size.
pub fn draw(panels: &[Panel], out: &Path) -> Result<(u32, u32), String> {
    let (w, h) = size(panels.len());
    let mut buf = vec![255u8; (w * h * 3) as usize];
    {
        let root = MonoText(BitMapBackend::with_buffer(&mut buf, (w, h))).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let cells = root.split_evenly(((h / PANEL.1) as usize, (w / PANEL.0) as usize));
        for (panel, cell) in panels.iter().zip(&cells) {
            chart(panel, cell).map_err(|e| format!("drawing `{}`: {e}", panel.title))?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    crate::train::png::write_rgb(out, w as usize, h as usize, &buf).map_err(|e| e.to_string())?;
    Ok((w, h))
}

type Area<'a, 'b> = DrawingArea<MonoText<'a>, plotters::coord::Shift>;

/// One chart: axes with ticks, a line per series, and a legend of their colours.
fn chart(panel: &Panel, area: &Area) -> Result<(), Box<dyn std::error::Error>> {
    let points = || panel.series.iter().flat_map(|s| s.points.iter());
    let (x0, x1) = padded(points().map(|p| p.0), 0.0);
    let (y0, y1) = padded(points().map(|p| p.1), 0.05);
    let mut c = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(84)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    c.configure_mesh()
        .x_desc("step")
        .x_labels(6)
        .y_labels(6)
        .x_label_formatter(&|v| format!("{}", v.round() as i64))
        .y_label_formatter(&|v| number(*v))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    for (i, s) in panel.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        c.draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))?;
        if s.points.len() == 1 {
            // A single point draws no line: mark it.
            c.draw_series(s.points.iter().map(|p| Circle::new(*p, 3, color.filled())))?;
        }
    }
    // The legend, top right inside the plotting area, one row per series.
    let plot = c.plotting_area();
    let (px, _) = plot.get_pixel_range();
    let right = px.end - area.get_base_pixel().0 - 8;
    for (i, s) in panel.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let y = 8 + 20 * i as i32 + c.plotting_area().get_base_pixel().1 - area.get_base_pixel().1;
        let tw = text::text_size(&s.label).0 as i32;
        area.draw(&Rectangle::new([(right - tw - 30, y + 6), (right - tw - 8, y + 9)], color.filled()))?;
        area.draw(&Text::new(s.label.clone(), (right - tw, y), ("sans-serif", 16).into_font().color(&BLACK)))?;
    }
    Ok(())
}

/// A range over the values with `frac` of it added on each side (one unit, or a tenth of the
/// value, when all are equal).
fn padded(values: impl Iterator<Item = f64>, frac: f64) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
        let d = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        return (lo - d, hi + d);
    }
    let d = (hi - lo) * frac;
    (lo - d, hi + d)
}

/// A tick label: four significant digits, in scientific notation for very small or large values.
fn number(v: f64) -> String {
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e5).contains(&a) {
        format!("{v:.2e}")
    } else {
        let s = format!("{v:.4}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        if s == "-0" {
            "0".into()
        } else {
            s.into()
        }
    }
}
