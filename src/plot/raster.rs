use super::{Anchor, Item, Scene};
use font8x8::UnicodeFonts;

/// Integer glyph scale for a text height in pixels (the font is 8x8).
pub fn glyph_scale(size: f64) -> u32 {
    ((size / 8.0).round() as u32).max(1)
}

struct Canvas {
    w: i64,
    h: i64,
    px: Vec<u8>,
}

impl Canvas {
    fn set(&mut self, x: i64, y: i64, c: [u8; 3]) {
        if x >= 0 && y >= 0 && x < self.w && y < self.h {
            let i = ((y * self.w + x) * 3) as usize;
            self.px[i..i + 3].copy_from_slice(&c);
        }
    }

    fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, c: [u8; 3]) {
        for yy in y.round() as i64..(y + h).round() as i64 {
            for xx in x.round() as i64..(x + w).round() as i64 {
                self.set(xx, yy, c);
            }
        }
    }

    fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, c: [u8; 3], width: f64) {
        let steps = ((x2 - x1).abs().max((y2 - y1).abs()).ceil() as i64).max(1);
        let r = (width / 2.0).max(0.5);
        for i in 0..=steps {
            let t = i as f64 / steps as f64;
            let (x, y) = (x1 + (x2 - x1) * t, y1 + (y2 - y1) * t);
            self.rect(x - r, y - r, 2.0 * r, 2.0 * r, c);
        }
    }

    fn text(&mut self, x: f64, y: f64, text: &str, size: f64, c: [u8; 3], anchor: Anchor) {
        let s = glyph_scale(size) as i64;
        let width = text.chars().count() as i64 * 8 * s;
        let x0 = match anchor {
            Anchor::Start => x.round() as i64,
            Anchor::Middle => x.round() as i64 - width / 2,
            Anchor::End => x.round() as i64 - width,
        };
        let y0 = y.round() as i64 - 4 * s;
        for (k, ch) in text.chars().enumerate() {
            let glyph = font8x8::BASIC_FONTS
                .get(ch)
                .or_else(|| font8x8::BASIC_FONTS.get('?'))
                .unwrap_or([0; 8]);
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..8 {
                    if bits >> col & 1 == 1 {
                        let (px, py) = (x0 + (k as i64 * 8 + col) * s, y0 + row as i64 * s);
                        for dy in 0..s {
                            for dx in 0..s {
                                self.set(px + dx, py + dy, c);
                            }
                        }
                    }
                }
            }
        }
    }
}

pub fn render_png(scene: &Scene) -> Vec<u8> {
    let mut cv = Canvas {
        w: scene.width as i64,
        h: scene.height as i64,
        px: vec![255; (scene.width * scene.height * 3) as usize],
    };
    for it in &scene.items {
        match it {
            Item::Rect { x, y, w, h, fill } => cv.rect(*x, *y, *w, *h, *fill),
            Item::Line {
                x1,
                y1,
                x2,
                y2,
                stroke,
                width,
            } => cv.line(*x1, *y1, *x2, *y2, *stroke, *width),
            Item::Text {
                x,
                y,
                text,
                size,
                fill,
                anchor,
            } => cv.text(*x, *y, text, *size, *fill, *anchor),
        }
    }
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, scene.width, scene.height);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header().expect("png header to memory");
        w.write_image_data(&cv.px).expect("png data to memory");
    }
    out
}
