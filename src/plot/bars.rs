use super::{DrawResult, Figure, COLORS, FONT};
use plotters::coord::Shift;
use plotters::prelude::*;

/// One bar a method: its mean, with an error bar of +- its standard deviation (none for a single
/// run), and a dashed line at a reference value (zero-shot) when given.
pub struct BarChart {
    title: String,
    y_label: String,
    bars: Vec<(String, f64, Option<f64>)>,
    reference: Option<(String, f64)>,
}

pub fn bar_chart(
    title: &str,
    y_label: &str,
    bars: &[(String, f64, Option<f64>)],
    reference: Option<(String, f64)>,
) -> BarChart {
    BarChart {
        title: title.to_string(),
        y_label: y_label.to_string(),
        bars: bars.to_vec(),
        reference,
    }
}

impl Figure for BarChart {
    fn size(&self) -> (u32, u32) {
        (160 + 110 * self.bars.len().max(1) as u32, 520)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        root.fill(&WHITE)?;
        let tops = self
            .bars
            .iter()
            .map(|(_, m, sd)| m + sd.unwrap_or(0.0))
            .chain(self.reference.iter().map(|r| r.1));
        let lows = self.bars.iter().map(|(_, m, sd)| m - sd.unwrap_or(0.0));
        let (lo, hi) = super::range(tops.chain(lows));
        // bars start from a floor under the lowest value, so small differences stay visible;
        // the axis says where it starts
        let pad = (hi - lo).max(1e-3) * 0.25;
        let (y0, y1) = ((lo - pad).max(0.0), hi + pad);
        let n = self.bars.len().max(1);
        let names: Vec<String> = self.bars.iter().map(|b| b.0.clone()).collect();
        let mut chart = ChartBuilder::on(root)
            .margin(12)
            .caption(&self.title, (FONT, 18))
            .x_label_area_size(60)
            .y_label_area_size(64)
            .build_cartesian_2d((0..n - 1).into_segmented(), y0..y1)?;
        chart
            .configure_mesh()
            .y_desc(&self.y_label)
            .x_labels(n)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => names.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 14))
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        chart.draw_series(
            Histogram::vertical(&chart)
                .margin(14)
                .baseline(y0)
                .style_func(|x, _| {
                    let i = match x {
                        SegmentValue::Exact(i) | SegmentValue::CenterOf(i) => *i,
                        SegmentValue::Last => 0,
                    };
                    COLORS[i % COLORS.len()].mix(0.8).filled()
                })
                .data(self.bars.iter().enumerate().map(|(i, b)| (i, b.1))),
        )?;
        for (i, (_, mean, sd)) in self.bars.iter().enumerate() {
            if let Some(sd) = sd {
                let c = SegmentValue::CenterOf(i);
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(c.clone(), mean - sd), (c, mean + sd)],
                    BLACK.stroke_width(2),
                )))?;
            }
        }
        if let Some((name, v)) = &self.reference {
            chart
                .draw_series(DashedLineSeries::new(
                    [(SegmentValue::Exact(0), *v), (SegmentValue::Last, *v)],
                    6,
                    4,
                    BLACK.stroke_width(1),
                ))?
                .label(format!("{name} {v:.4}"))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .label_font((FONT, 12))
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.4))
                .draw()?;
        }
        Ok(())
    }
}
