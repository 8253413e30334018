//! The blocking classes (`--blocking`): one `#[no_mangle]` function each, which waits off
//! the CPU in its own way for a slice of wall-clock time, and the helper thread that makes
//! the mutex and the pipe wait.
//!
//! Each class's known answer is measured around its call: the wall-clock time it took
//! and the CPU time the calling thread used in it. Its off-CPU time is the difference.

use std::fs::File;
use std::hint::black_box;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A blocking class: its name (the function's), what it waits on, and the function, given
/// the shared state and the slice of wall-clock time.
pub struct Blocking {
    pub name: &'static str,
    pub what: &'static str,
    pub run: fn(&Waits, Duration) -> u64,
}

pub const BLOCKING: &[Blocking] = &[
    Blocking {
        name: "block_sleep",
        what: "nanosleep for the slice (off the CPU)",
        run: |_, d| block_sleep(d),
    },
    Blocking {
        name: "block_mutex",
        what: "a std Mutex the helper thread holds for the slice (off the CPU)",
        run: block_mutex,
    },
    Blocking {
        name: "block_pipe",
        what: "a pipe read the helper thread answers after the slice (off the CPU)",
        run: block_pipe,
    },
    Blocking {
        name: "block_file",
        what: "reads of a 16 MiB file whose pages are dropped first (on and off the CPU)",
        run: block_file,
    },
    Blocking {
        name: "spin_wall",
        what: "on-CPU work for the slice of wall-clock time (the on-CPU reference)",
        run: |_, d| spin_wall(d),
    },
];

/// What the helper thread is asked to do.
enum Ask {
    /// Take the mutex, say so, hold it this long, let it go.
    Hold(Duration),
    /// Write one byte to the pipe after this long.
    Answer(Duration),
}

/// The state the blocking classes share: the helper thread's mailbox, its mutex and pipe,
/// and the file `block_file` reads (made only when that class runs).
pub struct Waits {
    asks: Sender<Ask>,
    held: Receiver<()>,
    lock: Arc<Mutex<u64>>,
    pipe_r: File,
    file: Option<(File, std::path::PathBuf)>,
}

/// Size of `block_file`'s file.
const FILE_BYTES: usize = 16 << 20;

impl Waits {
    /// Starts the helper thread (named `bench-helper`) and, when `with_file`, writes the
    /// file `block_file` reads (in the temporary directory, removed on drop).
    pub fn new(with_file: bool) -> std::io::Result<Waits> {
        let (asks, inbox) = channel::<Ask>();
        let (held_tx, held) = channel::<()>();
        let lock = Arc::new(Mutex::new(0u64));
        let mut fds = [0i32; 2];
        // SAFETY: fds has room for two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: pipe2 just made these two descriptors and nothing else owns them.
        let (pipe_r, mut pipe_w) = unsafe {
            use std::os::fd::FromRawFd;
            (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1]))
        };
        let l = Arc::clone(&lock);
        std::thread::Builder::new()
            .name("bench-helper".into())
            .spawn(move || {
                while let Ok(ask) = inbox.recv() {
                    match ask {
                        Ask::Hold(d) => {
                            let mut g = l.lock().unwrap_or_else(|e| e.into_inner());
                            if held_tx.send(()).is_err() {
                                return;
                            }
                            std::thread::sleep(d);
                            *g += 1;
                        }
                        Ask::Answer(d) => {
                            std::thread::sleep(d);
                            if pipe_w.write_all(&[1]).is_err() {
                                return;
                            }
                        }
                    }
                }
            })?;
        let file = if with_file {
            let path =
                std::env::temp_dir().join(format!("labperf-bench-{}.dat", std::process::id()));
            let mut f = File::options()
                .create(true)
                .truncate(true)
                .read(true)
                .write(true)
                .open(&path)?;
            let chunk: Vec<u8> = (0..1 << 20)
                .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
                .collect();
            for _ in 0..FILE_BYTES >> 20 {
                f.write_all(&chunk)?;
            }
            // Written back, so its pages are clean and `POSIX_FADV_DONTNEED` can drop them.
            f.sync_all()?;
            Some((f, path))
        } else {
            None
        };
        Ok(Waits {
            asks,
            held,
            lock,
            pipe_r,
            file,
        })
    }
}

impl Drop for Waits {
    fn drop(&mut self) {
        if let Some((_, path)) = &self.file {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Sleeps for the slice.
#[no_mangle]
#[inline(never)]
pub fn block_sleep(d: Duration) -> u64 {
    std::thread::sleep(d);
    black_box(1)
}

/// Waits for the mutex the helper thread takes and holds for the slice.
#[no_mangle]
#[inline(never)]
pub fn block_mutex(w: &Waits, d: Duration) -> u64 {
    if w.asks.send(Ask::Hold(d)).is_err() || w.held.recv().is_err() {
        return 0;
    }
    let g = w.lock.lock().unwrap_or_else(|e| e.into_inner());
    black_box(*g)
}

/// Reads one byte the helper thread writes after the slice.
#[no_mangle]
#[inline(never)]
pub fn block_pipe(w: &Waits, d: Duration) -> u64 {
    if w.asks.send(Ask::Answer(d)).is_err() {
        return 0;
    }
    let mut b = [0u8; 1];
    match (&w.pipe_r).read_exact(&mut b) {
        Ok(()) => black_box(b[0] as u64),
        Err(_) => 0,
    }
}

/// Reads the file in 128 KiB pieces until the slice has passed, its pages dropped from the
/// page cache before each pass (where the kernel lets them go; a page it keeps reads
/// from memory, on the CPU, which the known answer measures all the same).
#[no_mangle]
#[inline(never)]
pub fn block_file(w: &Waits, d: Duration) -> u64 {
    let Some((f, _)) = &w.file else { return 0 };
    let end = Instant::now() + d;
    let mut buf = vec![0u8; 128 << 10];
    let mut sum = 0u64;
    let mut off = 0u64;
    while Instant::now() < end {
        if off == 0 {
            // SAFETY: a valid descriptor; advice has no memory effects.
            unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
        use std::os::unix::fs::FileExt;
        match f.read_at(&mut buf, off) {
            Ok(n) if n > 0 => {
                sum = sum.wrapping_add(buf[n - 1] as u64);
                off = (off + n as u64) % FILE_BYTES as u64;
            }
            _ => return sum,
        }
    }
    black_box(sum)
}

/// Spins on the CPU for the slice of wall-clock time.
#[no_mangle]
#[inline(never)]
pub fn spin_wall(d: Duration) -> u64 {
    let end = Instant::now() + d;
    let mut x = 0u64;
    while Instant::now() < end {
        for _ in 0..1000 {
            x = black_box(x.wrapping_add(1));
        }
    }
    x
}
