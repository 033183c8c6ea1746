use super::{Anchor, Scene};

const COLORS: [[u8; 3]; 4] = [[31, 119, 180], [255, 127, 14], [44, 160, 44], [214, 39, 40]];

/// A line chart of one or more (x, y) series with axis ranges and a legend.
pub fn line_chart(title: &str, x_label: &str, series: &[(String, Vec<(f64, f64)>)]) -> Scene {
    let (w, h, left, right, top, bottom) = (760.0, 440.0, 80.0, 20.0, 50.0, 60.0);
    let mut s = Scene::new(w as u32, h as u32);
    s.text(w / 2.0, 22.0, title, 16.0, [0; 3], Anchor::Middle);
    let pts = series
        .iter()
        .flat_map(|(_, p)| p.iter())
        .filter(|(x, y)| x.is_finite() && y.is_finite());
    let (mut x0, mut x1, mut y0, mut y1) = (
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
    );
    for &(x, y) in pts {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    if !x0.is_finite() {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if y1 <= y0 {
        y1 = y0 + 1.0;
    }
    let (pw, ph) = (w - left - right, h - top - bottom);
    let px = |x: f64| left + (x - x0) / (x1 - x0) * pw;
    let py = |y: f64| top + ph - (y - y0) / (y1 - y0) * ph;
    s.line(left, top + ph, left + pw, top + ph, [0; 3], 1.0);
    s.line(left, top, left, top + ph, [0; 3], 1.0);
    for k in 0..=4 {
        let f = k as f64 / 4.0;
        let yv = y0 + f * (y1 - y0);
        s.text(
            left - 6.0,
            py(yv),
            format!("{yv:.3}"),
            8.0,
            [0; 3],
            Anchor::End,
        );
        let xv = x0 + f * (x1 - x0);
        s.text(
            px(xv),
            top + ph + 14.0,
            format!("{xv:.0}"),
            8.0,
            [0; 3],
            Anchor::Middle,
        );
    }
    s.text(
        left + pw / 2.0,
        h - 16.0,
        x_label,
        8.0,
        [0; 3],
        Anchor::Middle,
    );
    for (i, (name, p)) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        for win in p.windows(2) {
            let ((ax, ay), (bx, by)) = (win[0], win[1]);
            if ay.is_finite() && by.is_finite() {
                s.line(px(ax), py(ay), px(bx), py(by), c, 1.5);
            }
        }
        let ly = top + 8.0 + 14.0 * i as f64;
        s.line(left + pw - 150.0, ly, left + pw - 130.0, ly, c, 2.0);
        s.text(
            left + pw - 124.0,
            ly,
            name.as_str(),
            8.0,
            [0; 3],
            Anchor::Start,
        );
    }
    s
}
