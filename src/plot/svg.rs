use super::{Anchor, Item, Scene};
use std::fmt::Write;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn color(c: [u8; 3]) -> String {
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

pub fn render(scene: &Scene) -> String {
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"monospace\">\n",
        w = scene.width,
        h = scene.height
    );
    for it in &scene.items {
        let _ = match it {
            Item::Rect { x, y, w, h, fill } => {
                writeln!(s, "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{}\"/>", color(*fill))
            }
            Item::Line { x1, y1, x2, y2, stroke, width } => writeln!(
                s,
                "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"{}\" stroke-width=\"{width}\"/>",
                color(*stroke)
            ),
            Item::Text { x, y, text, size, fill, anchor } => {
                let a = match anchor {
                    Anchor::Start => "start",
                    Anchor::Middle => "middle",
                    Anchor::End => "end",
                };
                writeln!(
                    s,
                    "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{size}\" fill=\"{}\" text-anchor=\"{a}\" dominant-baseline=\"middle\">{}</text>",
                    color(*fill),
                    esc(text)
                )
            }
        };
    }
    s.push_str("</svg>\n");
    s
}
