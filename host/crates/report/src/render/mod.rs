//! The one place a report's output format picks its renderer: the table model's text table, CSV and JSON (`table.rs`), or its HTML page (`html.rs`).

pub mod flame;
pub mod html;
pub mod table;

use table::{Format, Report};

impl Report {
    /// Renders the report; `top` keeps the first N rows of ranked tables (0 = all);
    /// `colour` paints the text table. HTML here is the page without the recordings' facts
    /// or flame graphs (see [`Report::render_page`]).
    pub fn render(&self, format: Format, top: usize, colour: bool) -> String {
        let none = || Ok::<_, std::convert::Infallible>(html::Extras::default());
        match self.render_page(format, top, colour, none) {
            Ok(s) => s,
            Err(never) => match never {},
        }
    }

    /// Renders the report as [`Report::render`] does, the HTML page with the recordings'
    /// facts, flame graphs and annotated functions that `page` gives, asked for only when the format is HTML.
    pub fn render_page<E>(
        &self,
        format: Format,
        top: usize,
        colour: bool,
        page: impl FnOnce() -> Result<html::Extras, E>,
    ) -> Result<String, E> {
        Ok(match format {
            Format::Table => self.to_text(top, colour),
            Format::Csv => self.to_csv(top),
            Format::Html => html::page(self, &page()?, top),
            Format::Json => self.to_json(top),
        })
    }
}
