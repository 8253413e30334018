//! The one place a report's output format picks its renderer: the table model's text table, CSV and JSON (`table.rs`), or its HTML page (`html.rs`).

pub mod flame;
pub mod html;
pub mod table;

use table::{Format, Report};

impl Report {
    /// Renders the report; `top` keeps the first N rows of ranked tables (0 = all);
    /// `colour` paints the text table. HTML here is the page without the recordings' facts
    /// or flame graphs (`labperf report` adds them through [`crate::render::html::page`]).
    pub fn render(&self, format: Format, top: usize, colour: bool) -> String {
        match format {
            Format::Table => self.to_text(top, colour),
            Format::Csv => self.to_csv(top),
            Format::Html => crate::render::html::page(self, &[], &[], top),
            Format::Json => self.to_json(top),
        }
    }
}
