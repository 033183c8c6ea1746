//! Minimal plots: a scene of rectangles, lines and text, rendered to SVG and to PNG (an 8x8
//! bitmap font, scaled), so reports need no system fonts or plotting stack.
mod heatmap;
mod line;
mod raster;
mod svg;

pub use heatmap::heatmap;
pub use line::line_chart;

use crate::data::write_atomic;
use crate::error::Result;
use std::path::Path;

pub type Rgb = [u8; 3];

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

#[derive(Clone, Debug)]
pub enum Item {
    Rect {
        x: f64,
        y: f64,
        w: f64,
        h: f64,
        fill: Rgb,
    },
    Line {
        x1: f64,
        y1: f64,
        x2: f64,
        y2: f64,
        stroke: Rgb,
        width: f64,
    },
    /// `y` is the vertical centre of the text; `size` its pixel height.
    Text {
        x: f64,
        y: f64,
        text: String,
        size: f64,
        fill: Rgb,
        anchor: Anchor,
    },
}

#[derive(Clone, Debug)]
pub struct Scene {
    pub width: u32,
    pub height: u32,
    pub items: Vec<Item>,
}

impl Scene {
    pub fn new(width: u32, height: u32) -> Scene {
        Scene {
            width,
            height,
            items: vec![Item::Rect {
                x: 0.0,
                y: 0.0,
                w: width as f64,
                h: height as f64,
                fill: [255; 3],
            }],
        }
    }

    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: Rgb) {
        self.items.push(Item::Rect { x, y, w, h, fill });
    }

    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: Rgb, width: f64) {
        self.items.push(Item::Line {
            x1,
            y1,
            x2,
            y2,
            stroke,
            width,
        });
    }

    pub fn text(
        &mut self,
        x: f64,
        y: f64,
        text: impl Into<String>,
        size: f64,
        fill: Rgb,
        anchor: Anchor,
    ) {
        self.items.push(Item::Text {
            x,
            y,
            text: text.into(),
            size,
            fill,
            anchor,
        });
    }

    pub fn to_svg(&self) -> String {
        svg::render(self)
    }

    pub fn to_png(&self) -> Vec<u8> {
        raster::render_png(self)
    }

    /// Write `stem.svg` and `stem.png` (each atomically).
    pub fn save(&self, stem: &Path) -> Result<()> {
        write_atomic(&stem.with_extension("svg"), self.to_svg().as_bytes())?;
        write_atomic(&stem.with_extension("png"), &self.to_png())
    }
}

/// Pixel width of `text` at `size` in the bitmap font (SVG uses the same box for layout).
pub fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * raster::glyph_scale(size) as f64 * 8.0
}
