//! The record file writer: header, frames flushed at least every interval, trailer; written
//! under `FILE.part` and renamed to `FILE` only once complete, so an existing `FILE` is
//! never touched by a run that fails (a killed agent's frames stay in `FILE.part`). `FILE`
//! goes by `dest.rs`'s rule: a device, FIFO or descriptor is written straight through, a
//! symbolic link's file is the one replaced (its `.part` beside it); `FILE.part` is a new
//! file, 0600 (the mode of the file it replaces when that is this user's).

use crate::prelude::*;

use crate::rt::File;
use crate::rt::Instant;
use crate::status::Fail;
use core::time::Duration;
use labperf_common::{Encoder, Header, HeaderExt, Record, Trailer, TrailerExt};

/// Largest records frame before it is closed early.
pub const FRAME_BYTES: usize = 64 * 1024;

pub struct Out {
    file: File,
    /// The file replaced when complete (links resolved); `None`: a device or a FIFO
    /// written straight through.
    path: Option<String>,
    /// What is being written: the temporary `FILE.part`, or the device or FIFO.
    part: String,
    pub enc: Encoder,
    last_flush: Instant,
    every: Duration,
    pub bytes: u64,
    /// Samples written (after any decimation): the trailer's `samples`.
    pub samples: u64,
    /// The kernel addresses samples name, for the KSYMS records written at the end.
    kernel: labperf_common::kallsyms::Seen,
}

impl Out {
    pub fn create(
        path: &str,
        header: &Header,
        ext: &HeaderExt,
        flush_ms: u64,
    ) -> Result<Out, Fail> {
        let (file, part, path) = crate::dest::open(path, ".part", "the record file")
            .map_err(|(e, m)| Fail::io(&e, format!("{m}. Choose a writable place with -o.")))?;
        let mut o = Out {
            file,
            path,
            part,
            enc: Encoder::new(),
            last_flush: Instant::now(),
            every: Duration::from_millis(flush_ms.max(1)),
            bytes: 0,
            samples: 0,
            kernel: Default::default(),
        };
        o.write(&Encoder::prelude())?;
        let h = o.enc.header_frame(header);
        o.write(&h)?;
        let x = o.enc.header_ext_frame(ext);
        o.write(&x)?;
        Ok(o)
    }

    fn write(&mut self, b: &[u8]) -> Result<(), Fail> {
        self.file.write_all(b).map_err(|e| {
            Fail::io(
                &e,
                format!(
                    "cannot write the record file '{}': {e} (what was written so far is in it)",
                    self.part
                ),
            )
        })?;
        self.bytes += b.len() as u64;
        Ok(())
    }

    pub fn push(&mut self, r: &Record) -> Result<(), Fail> {
        if let Record::Sample(s) = r {
            self.samples += 1;
            self.kernel.add(s.ip);
            // A return address is named by the byte before it (the call), which a call
            // at a function's very end puts in the function before.
            for &a in &s.callchain {
                self.kernel.add(a);
                self.kernel.add(a.saturating_sub(1));
            }
        }
        self.enc.push(r);
        let stacks = self.enc.pending_stack_bytes();
        if self.enc.pending_bytes() >= FRAME_BYTES
            || stacks >= labperf_common::STACK_FRAME_FLUSH
            || stacks >= labperf_common::STACK_FLUSH_PER_BYTE * self.enc.pending_bytes() as u64
        {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the open frame if the flush interval has passed.
    pub fn tick(&mut self) -> Result<(), Fail> {
        if self.last_flush.elapsed() >= self.every {
            self.flush()?;
        }
        Ok(())
    }

    pub fn flush(&mut self) -> Result<(), Fail> {
        self.last_flush = Instant::now();
        if let Some(f) = self.enc.flush() {
            self.write(&f)?;
        }
        Ok(())
    }

    /// Writes the kernel functions the samples name (when there are kernel addresses),
    /// the trailer, syncs, and renames the file into place; returns its size.
    pub fn finish(mut self, t: &Trailer, x: &TrailerExt) -> Result<u64, Fail> {
        let kernel = core::mem::take(&mut self.kernel);
        if !kernel.is_empty() {
            // Unreadable: the kernel addresses stay unnamed (the host shows addresses).
            if let Ok(text) = crate::rt::read("/proc/kallsyms") {
                let restrict = crate::rt::read_to_string("/proc/sys/kernel/kptr_restrict")
                    .ok()
                    .and_then(|s| s.trim().parse().ok());
                for k in kernel.symbols(&text, restrict) {
                    self.enc.push(&Record::KernelSymbols(k));
                }
            }
        }
        let f = self.enc.trailer_frame_ext(t, x);
        self.write(&f)?;
        // A device or a FIFO has its bytes: nothing is synced or renamed there.
        let Some(path) = &self.path else {
            return Ok(self.bytes);
        };
        self.file.sync_all().map_err(|e| {
            Fail::io(
                &e,
                format!("cannot sync the record file '{}': {e}", self.part),
            )
        })?;
        self.file.keep_mode_of(path);
        crate::rt::rename(&self.part, path).map_err(|e| {
            Fail::io(
                &e,
                format!("cannot rename '{}' to '{path}': {e}", self.part),
            )
        })?;
        Ok(self.bytes)
    }

    /// Removes the unfinished file: nothing worth keeping was recorded (a device or a
    /// FIFO is left alone).
    pub fn abandon(self) {
        if self.path.is_some() {
            let _ = crate::rt::remove_file(&self.part);
        }
    }
}
