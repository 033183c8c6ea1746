//! Plots through plotters: SVG (text stays text) and PNG, whose text is rendered with DejaVu Sans
//! embedded in the binary (the `dejavu` crate), so reports need no system fonts. A figure draws
//! itself on any plotters backend; `save` writes `stem.svg` and `stem.png`, each atomically.
mod bars;
mod heatmap;
mod line;
mod scatter;

pub use bars::{bar_chart, BarChart};
pub use heatmap::heatmap;
pub use line::line_chart;
pub use scatter::{scatter, Scatter};

use crate::data::write_atomic;
use crate::error::{Error, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// The font every figure names.
pub const FONT: &str = "sans-serif";

pub type DrawResult<DB> =
    std::result::Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// Something to draw, in pixels of `size`.
pub trait Figure {
    fn size(&self) -> (u32, u32);
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB>;

    /// `stem.svg` and `stem.png`.
    fn save(&self, stem: &Path) -> Result<()>
    where
        Self: Sized,
    {
        save(self, stem)
    }
}

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // the bytes are a valid TrueType font shipped by the crate: this cannot fail
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
        let _ = plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold());
    });
}

fn save<F: Figure>(fig: &F, stem: &Path) -> Result<()> {
    register_font();
    let (w, h) = fig.size();
    let svg_path = stem.with_extension("svg");
    let draw_err = |p: &Path, e: String| Error::file(p, format!("drawing failed: {e}"));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        fig.draw(&root)
            .and_then(|_| root.present())
            .map_err(|e| draw_err(&svg_path, e.to_string()))?;
    }
    write_atomic(&svg_path, svg.as_bytes())?;
    let png_path = stem.with_extension("png");
    let mut rgb = vec![255u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        fig.draw(&root)
            .and_then(|_| root.present())
            .map_err(|e| draw_err(&png_path, e.to_string()))?;
    }
    let mut png_bytes = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut png_bytes, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut writer = enc.write_header().map_err(|e| Error::file(&png_path, e))?;
        writer
            .write_image_data(&rgb)
            .map_err(|e| Error::file(&png_path, e))?;
    }
    write_atomic(&png_path, &png_bytes)
}

/// Tableau's first colours, as matplotlib draws series.
pub const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// The range of `values` (finite ones), widened when empty or flat so an axis can be drawn.
pub fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        (lo, hi) = (lo.min(v), hi.max(v));
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if hi <= lo {
        return (lo - 0.5, hi + 0.5);
    }
    (lo, hi)
}
