use super::{range, DrawResult, Figure, COLORS, FONT};
use plotters::coord::Shift;
use plotters::prelude::*;

/// Labelled points on two axes (e.g. each cell of a transfer grid: overlap against gain), with an
/// optional note under the title.
pub struct Scatter {
    pub title: String,
    pub note: String,
    pub x_label: String,
    pub y_label: String,
    /// (label, x, y)
    pub points: Vec<(String, f64, f64)>,
}

pub fn scatter(
    title: &str,
    x_label: &str,
    y_label: &str,
    points: Vec<(String, f64, f64)>,
) -> Scatter {
    Scatter {
        title: title.to_string(),
        note: String::new(),
        x_label: x_label.to_string(),
        y_label: y_label.to_string(),
        points,
    }
}

impl Figure for Scatter {
    fn size(&self) -> (u32, u32) {
        (820, 560)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        root.fill(&WHITE)?;
        let (x0, x1) = range(self.points.iter().map(|p| p.1));
        let (y0, y1) = range(self.points.iter().map(|p| p.2));
        let (px, py) = ((x1 - x0) * 0.08, (y1 - y0) * 0.08);
        let caption = if self.note.is_empty() {
            self.title.clone()
        } else {
            format!("{} ({})", self.title, self.note)
        };
        let mut chart = ChartBuilder::on(root)
            .margin(14)
            .caption(caption, (FONT, 17))
            .x_label_area_size(46)
            .y_label_area_size(70)
            .build_cartesian_2d((x0 - px)..(x1 + px), (y0 - py)..(y1 + py))?;
        chart
            .configure_mesh()
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 14))
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        let color = COLORS[0];
        chart.draw_series(self.points.iter().map(|(label, x, y)| {
            EmptyElement::at((*x, *y))
                + Circle::new((0, 0), 5, color.filled())
                + Text::new(label.clone(), (7, -14), (FONT, 12).into_font())
        }))?;
        Ok(())
    }
}
