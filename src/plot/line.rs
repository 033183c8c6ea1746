use super::{range, DrawResult, Figure, COLORS, FONT};
use plotters::coord::Shift;
use plotters::prelude::*;

/// A line chart of one or more (x, y) series with axes and a legend (training curves, per-layer
/// entropies). Non-finite points break a line instead of bending it.
pub struct LineChart {
    title: String,
    x_label: String,
    series: Vec<(String, Vec<(f64, f64)>)>,
}

pub fn line_chart(title: &str, x_label: &str, series: &[(String, Vec<(f64, f64)>)]) -> LineChart {
    LineChart {
        title: title.to_string(),
        x_label: x_label.to_string(),
        series: series.to_vec(),
    }
}

impl Figure for LineChart {
    fn size(&self) -> (u32, u32) {
        (800, 480)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        root.fill(&WHITE)?;
        let pts = || self.series.iter().flat_map(|(_, p)| p.iter());
        let (x0, x1) = range(pts().map(|p| p.0));
        let (y0, y1) = range(pts().map(|p| p.1));
        let pad = (y1 - y0) * 0.05;
        let mut chart = ChartBuilder::on(root)
            .margin(12)
            .caption(&self.title, (FONT, 20))
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d(x0..x1, (y0 - pad)..(y1 + pad))?;
        // steps and layers are whole numbers: no decimals once the axis spans a few
        let whole = x1 - x0 >= 4.0;
        let fmt_x = move |v: &f64| {
            if whole {
                format!("{v:.0}")
            } else {
                format!("{v:.2}")
            }
        };
        chart
            .configure_mesh()
            .x_desc(&self.x_label)
            .x_label_formatter(&fmt_x)
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 14))
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        for (i, (name, p)) in self.series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let segments = p
                .split(|(x, y)| !(x.is_finite() && y.is_finite()))
                .filter(|s| !s.is_empty());
            let mut labelled = false;
            for seg in segments {
                let drawn = chart
                    .draw_series(LineSeries::new(seg.iter().copied(), color.stroke_width(2)))?;
                if !labelled {
                    drawn.label(name.as_str()).legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
                    });
                    labelled = true;
                }
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font((FONT, 13))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .draw()
    }
}
