//! The record file writer: header, frames flushed at least every interval, trailer.

use labperf_common::{Encoder, Header, Record, Trailer};
use std::fs::File;
use std::io::Write;
use std::time::{Duration, Instant};

/// Largest records frame before it is closed early.
pub const FRAME_BYTES: usize = 64 * 1024;

pub struct Out {
    file: File,
    path: String,
    pub enc: Encoder,
    last_flush: Instant,
    every: Duration,
    pub bytes: u64,
}

impl Out {
    pub fn create(path: &str, header: &Header, flush_ms: u64) -> Result<Out, String> {
        let file = File::create(path).map_err(|e| {
            format!("cannot create the record file '{path}': {e}. Choose a writable place with -o.")
        })?;
        let mut o = Out {
            file,
            path: path.into(),
            enc: Encoder::new(),
            last_flush: Instant::now(),
            every: Duration::from_millis(flush_ms.max(1)),
            bytes: 0,
        };
        o.write(&Encoder::prelude())?;
        let h = o.enc.header_frame(header);
        o.write(&h)?;
        Ok(o)
    }

    fn write(&mut self, b: &[u8]) -> Result<(), String> {
        self.file
            .write_all(b)
            .map_err(|e| format!("cannot write the record file '{}': {e}", self.path))?;
        self.bytes += b.len() as u64;
        Ok(())
    }

    pub fn push(&mut self, r: &Record) -> Result<(), String> {
        self.enc.push(r);
        if self.enc.pending_bytes() >= FRAME_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the open frame if the flush interval has passed.
    pub fn tick(&mut self) -> Result<(), String> {
        if self.last_flush.elapsed() >= self.every {
            self.flush()?;
        }
        Ok(())
    }

    pub fn flush(&mut self) -> Result<(), String> {
        self.last_flush = Instant::now();
        if let Some(f) = self.enc.flush() {
            self.write(&f)?;
        }
        Ok(())
    }

    pub fn finish(mut self, t: &Trailer) -> Result<u64, String> {
        let f = self.enc.trailer_frame(t);
        self.write(&f)?;
        self.file
            .sync_all()
            .map_err(|e| format!("cannot sync the record file '{}': {e}", self.path))?;
        Ok(self.bytes)
    }
}
