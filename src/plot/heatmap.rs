use super::{text_width, Anchor, Scene};

/// Viridis anchors: perceptually even, readable in grey, and the de facto heatmap default.
const VIRIDIS: [[u8; 3]; 5] = [
    [68, 1, 84],
    [59, 82, 139],
    [33, 145, 140],
    [94, 201, 98],
    [253, 231, 37],
];

fn viridis(t: f64) -> [u8; 3] {
    let t = t.clamp(0.0, 1.0) * (VIRIDIS.len() - 1) as f64;
    let i = (t.floor() as usize).min(VIRIDIS.len() - 2);
    let f = t - i as f64;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    [0, 1, 2].map(|c| (a[c] as f64 + (b[c] as f64 - a[c] as f64) * f).round() as u8)
}

/// A labelled square matrix with each value printed in its cell. Colours span the off-diagonal
/// range (the diagonal of a similarity matrix is 1 and would wash everything else out; it is
/// drawn grey).
pub fn heatmap(title: &str, labels: &[String], values: &[Vec<f64>], digits: usize) -> Scene {
    let n = labels.len();
    let longest = labels
        .iter()
        .map(|l| text_width(l, 16.0))
        .fold(0.0, f64::max);
    // column labels sit above their cells, so a cell is at least as wide as the longest label
    let cell = (longest + 16.0).max(96.0);
    let label_w = longest + 24.0;
    let (left, top) = (label_w, 84.0);
    let width = (left + cell * n as f64 + 24.0).max(text_width(title, 16.0) + 40.0);
    let mut s = Scene::new(width as u32, (top + cell * n as f64 + 24.0) as u32);
    s.text(width / 2.0, 24.0, title, 16.0, [0; 3], Anchor::Middle);
    let off: Vec<f64> = (0..n)
        .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
        .map(|(i, j)| values[i][j])
        .collect();
    let (lo, hi) = off
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    let span = if hi > lo { hi - lo } else { 1.0 };
    for (j, l) in labels.iter().enumerate() {
        s.text(
            left + cell * (j as f64 + 0.5),
            top - 16.0,
            l.as_str(),
            16.0,
            [0; 3],
            Anchor::Middle,
        );
    }
    for (i, l) in labels.iter().enumerate() {
        let y = top + cell * i as f64;
        s.text(
            left - 12.0,
            y + cell / 2.0,
            l.as_str(),
            16.0,
            [0; 3],
            Anchor::End,
        );
        for (j, &v) in values[i].iter().enumerate() {
            let t = (v - lo) / span;
            let fill = if i == j && n > 1 {
                [200, 200, 200]
            } else {
                viridis(t)
            };
            let ink = if i == j || t > 0.6 { [0; 3] } else { [255; 3] };
            let x = left + cell * j as f64;
            s.rect(x, y, cell - 2.0, cell - 2.0, fill);
            s.text(
                x + cell / 2.0 - 1.0,
                y + cell / 2.0 - 1.0,
                format!("{v:.digits$}"),
                16.0,
                ink,
                Anchor::Middle,
            );
        }
    }
    s
}
