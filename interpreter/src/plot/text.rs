//! Text for charts without a font system: a drawing backend that forwards everything to the
//! bitmap backend but draws text from the pre-rasterised glyphs of Noto Sans Mono (16 px), so a
//! plot renders the same on a machine with no fonts or fontconfig at all. Every text is 16 px
//! high whatever size a style asks for; charts are laid out for that.

use noto_sans_mono_bitmap::{get_raster, get_raster_width, FontWeight, RasterHeight};
use plotters::prelude::BitMapBackend;
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind};

const HEIGHT: RasterHeight = RasterHeight::Size16;
const WEIGHT: FontWeight = FontWeight::Regular;

/// The bitmap backend with its own text.
pub struct MonoText<'a>(pub BitMapBackend<'a>);

type Error<'a> = DrawingErrorKind<<BitMapBackend<'a> as DrawingBackend>::ErrorType>;

/// A text's width and height in pixels.
pub fn text_size(text: &str) -> (u32, u32) {
    ((text.chars().count() * get_raster_width(WEIGHT, HEIGHT)) as u32, HEIGHT.val() as u32)
}

impl<'a> DrawingBackend for MonoText<'a> {
    type ErrorType = <BitMapBackend<'a> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.0.get_size()
    }
    fn ensure_prepared(&mut self) -> Result<(), Error<'a>> {
        self.0.ensure_prepared()
    }
    fn present(&mut self) -> Result<(), Error<'a>> {
        self.0.present()
    }
    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Result<(), Error<'a>> {
        self.0.draw_pixel(point, color)
    }
    fn draw_line<S: BackendStyle>(&mut self, from: BackendCoord, to: BackendCoord, style: &S) -> Result<(), Error<'a>> {
        self.0.draw_line(from, to, style)
    }
    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), Error<'a>> {
        self.0.draw_rect(upper_left, bottom_right, style, fill)
    }
    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(&mut self, path: I, style: &S) -> Result<(), Error<'a>> {
        self.0.draw_path(path, style)
    }
    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(&mut self, vert: I, style: &S) -> Result<(), Error<'a>> {
        self.0.fill_polygon(vert, style)
    }

    fn draw_text<T: BackendTextStyle>(&mut self, text: &str, style: &T, pos: BackendCoord) -> Result<(), Error<'a>> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let (w, h) = text_size(text);
        let (w, h) = (w as i32, h as i32);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -w,
            HPos::Center => -w / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -h / 2,
            VPos::Bottom => -h,
        };
        let trans = style.transform();
        let advance = get_raster_width(WEIGHT, HEIGHT) as i32;
        for (i, c) in text.chars().enumerate() {
            let Some(glyph) = get_raster(c, WEIGHT, HEIGHT).or_else(|| get_raster('?', WEIGHT, HEIGHT)) else { continue };
            for (gy, row) in glyph.rows().enumerate() {
                for (gx, &a) in row.iter().enumerate() {
                    if a == 0 {
                        continue;
                    }
                    let (x, y) = trans.transform(i as i32 * advance + gx as i32 + dx, gy as i32 + dy);
                    // The glyph's intensity is its coverage: blended as alpha, for smooth edges.
                    let c = BackendColor { alpha: color.alpha * a as f64 / 255.0, rgb: color.rgb };
                    self.0.draw_pixel((pos.0 + x, pos.1 + y), c)?;
                }
            }
        }
        Ok(())
    }

    fn estimate_text_size<T: BackendTextStyle>(&self, text: &str, _: &T) -> Result<(u32, u32), Error<'a>> {
        Ok(text_size(text))
    }
}
