use super::{DrawResult, Figure, FONT};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Viridis anchors: perceptually even, readable in grey, and the de facto heatmap default.
const VIRIDIS: [[u8; 3]; 5] = [
    [68, 1, 84],
    [59, 82, 139],
    [33, 145, 140],
    [94, 201, 98],
    [253, 231, 37],
];

fn viridis(t: f64) -> RGBColor {
    let t = t.clamp(0.0, 1.0) * (VIRIDIS.len() - 1) as f64;
    let i = (t.floor() as usize).min(VIRIDIS.len() - 2);
    let f = t - i as f64;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    let c = [0, 1, 2].map(|c| (a[c] as f64 + (b[c] as f64 - a[c] as f64) * f).round() as u8);
    RGBColor(c[0], c[1], c[2])
}

/// A labelled square matrix with each value printed in its cell. Colours span the off-diagonal
/// range (the diagonal of a similarity matrix is 1 and would wash everything else out; it is
/// drawn grey).
pub struct Heatmap {
    title: String,
    labels: Vec<String>,
    values: Vec<Vec<f64>>,
    digits: usize,
}

pub fn heatmap(title: &str, labels: &[String], values: &[Vec<f64>], digits: usize) -> Heatmap {
    Heatmap {
        title: title.to_string(),
        labels: labels.to_vec(),
        values: values.to_vec(),
        digits,
    }
}

/// Pixels per character at `size` (DejaVu Sans averages ~0.6 em): enough room for the labels.
fn text_width(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.6
}

impl Heatmap {
    fn layout(&self) -> (f64, f64, f64) {
        let longest = self
            .labels
            .iter()
            .map(|l| text_width(l, 15.0))
            .fold(0.0, f64::max);
        // column labels sit above their cells, so a cell is at least as wide as the longest label
        let cell = (longest + 16.0).max(80.0);
        (longest + 24.0, 84.0, cell)
    }
}

impl Figure for Heatmap {
    fn size(&self) -> (u32, u32) {
        let (left, top, cell) = self.layout();
        let n = self.labels.len() as f64;
        let w = (left + cell * n + 24.0).max(text_width(&self.title, 20.0) + 40.0);
        (w as u32, (top + cell * n + 24.0) as u32)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        root.fill(&WHITE)?;
        let (left, top, cell) = self.layout();
        let (w, _) = self.size();
        let n = self.labels.len();
        let centre = |size: i32| {
            TextStyle::from((FONT, size).into_font()).pos(Pos::new(HPos::Center, VPos::Center))
        };
        root.draw(&Text::new(
            self.title.as_str(),
            (w as i32 / 2, 28),
            centre(20),
        ))?;
        let off: Vec<f64> = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| self.values[i][j])
            .collect();
        let (lo, hi) = super::range(off.into_iter());
        let span = if hi > lo { hi - lo } else { 1.0 };
        let px = |v: f64| v.round() as i32;
        for (j, l) in self.labels.iter().enumerate() {
            let x = left + cell * (j as f64 + 0.5);
            root.draw(&Text::new(l.as_str(), (px(x), px(top - 16.0)), centre(15)))?;
        }
        let right =
            TextStyle::from((FONT, 15).into_font()).pos(Pos::new(HPos::Right, VPos::Center));
        for (i, l) in self.labels.iter().enumerate() {
            let y = top + cell * i as f64;
            root.draw(&Text::new(
                l.as_str(),
                (px(left - 12.0), px(y + cell / 2.0)),
                right.clone(),
            ))?;
            for (j, &v) in self.values[i].iter().enumerate() {
                let t = (v - lo) / span;
                let fill = if i == j && n > 1 {
                    RGBColor(200, 200, 200)
                } else {
                    viridis(t)
                };
                let ink = if i == j || t > 0.6 { BLACK } else { WHITE };
                let x = left + cell * j as f64;
                root.draw(&Rectangle::new(
                    [(px(x), px(y)), (px(x + cell - 2.0), px(y + cell - 2.0))],
                    fill.filled(),
                ))?;
                let label = format!("{v:.*}", self.digits);
                let style = centre(15).color(&ink);
                root.draw(&Text::new(
                    label,
                    (px(x + cell / 2.0 - 1.0), px(y + cell / 2.0 - 1.0)),
                    style,
                ))?;
            }
        }
        Ok(())
    }
}
