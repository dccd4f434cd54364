//! The library's errors as Python exceptions, by kind, and Ctrl-C while the GIL is released.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    klpsym,
    Error,
    PyException,
    "Any klpsym error; `kind` names which."
);
create_exception!(
    klpsym,
    NotFoundError,
    Error,
    "A file, folder or named thing does not exist."
);
create_exception!(
    klpsym,
    BadInputError,
    Error,
    "The input is not what was expected, or malformed."
);
create_exception!(
    klpsym,
    TooLargeError,
    Error,
    "An input is larger than a limit."
);
create_exception!(klpsym, IoError, Error, "Reading or writing failed.");
create_exception!(
    klpsym,
    UsageError,
    Error,
    "Arguments that do not fit together."
);
create_exception!(
    klpsym,
    CancelledError,
    Error,
    "The operation was cancelled."
);

/// The exception for a library error.
pub fn py_err(e: klpsym::Error) -> PyErr {
    let msg = e.to_string();
    match e.kind() {
        klpsym::ErrorKind::NotFound => NotFoundError::new_err(msg),
        klpsym::ErrorKind::BadInput => BadInputError::new_err(msg),
        klpsym::ErrorKind::TooLarge => TooLargeError::new_err(msg),
        klpsym::ErrorKind::Io => IoError::new_err(msg),
        klpsym::ErrorKind::Usage => UsageError::new_err(msg),
        klpsym::ErrorKind::Cancelled => CancelledError::new_err(msg),
        _ => Error::new_err(msg),
    }
}

/// How often a watched call's thread asks Python whether a signal came (CPython runs signal
/// handlers on its main thread only, when that thread asks).
const WATCH_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

/// What stops a call: the exception a signal raised while the call ran without the GIL
/// (KeyboardInterrupt, or what a Python signal handler raised), raised in place of the
/// cancellation it caused, and the cancel flag the call's reschedule points read
/// (`Options::cancel`, shared with every kernel opened with these options).
#[derive(Clone, Default)]
pub struct Interrupt {
    caught: Arc<Mutex<Option<PyErr>>>,
    /// Set when a signal's handler raised: the work's next reschedule point returns
    /// `Cancelled`, on whichever thread it runs.
    pub cancel: Arc<AtomicBool>,
}

impl Interrupt {
    /// Keeps `e`, the first exception a signal raised during the call, and cancels the work.
    pub fn caught(&self, e: PyErr) {
        if let Ok(mut c) = self.caught.lock() {
            c.get_or_insert(e);
        }
        self.cancel.store(true, Ordering::SeqCst);
    }

    /// Runs `f` without the GIL on this thread: for short calls (a lookup, a batch of
    /// addresses), whose reschedule points ask Python for signals themselves when this is
    /// the main thread. An error is its exception, or, for a cancellation a signal caused,
    /// the signal's own exception. A signal caught while `f` ran is raised even when `f`
    /// finished anyway (a reschedule point that saw it may sit where a cancellation only
    /// ends a helper, not the call): the handler has run, and its exception is never lost.
    pub fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce() -> klpsym::Result<T> + Send,
    ) -> PyResult<T> {
        self.cancel.store(false, Ordering::SeqCst);
        let out = py.detach(f);
        self.finish(out)
    }

    /// Runs `f` on a helper thread while this thread, without the GIL, asks Python for
    /// signals every 20 ms: for long calls (opening kernels, a check, a fleet's next
    /// result), whose work may run on threads where CPython never runs a handler (the
    /// library's helpers, a fleet's jobs). A handler's exception sets the cancel flag every
    /// reschedule point of the work reads, so the call ends within the reschedule bound of
    /// the signal, plus the watch interval; the exception is raised then.
    pub fn run_watched<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce() -> klpsym::Result<T> + Send,
    ) -> PyResult<T> {
        self.cancel.store(false, Ordering::SeqCst);
        let out = py.detach(|| {
            let (done, finished) = mpsc::channel::<()>();
            std::thread::scope(|s| {
                let work = s.spawn(move || {
                    let r = f();
                    let _ = done.send(());
                    r
                });
                loop {
                    match finished.recv_timeout(WATCH_EVERY) {
                        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
                        Err(mpsc::RecvTimeoutError::Timeout) => {}
                    }
                    if self.cancel.load(Ordering::SeqCst) {
                        continue; // cancelling: wait for the work to reach a point
                    }
                    if let Some(e) = Python::attach(|py| py.check_signals().err()) {
                        self.caught(e);
                    }
                }
                work.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
            })
        });
        self.finish(out)
    }

    fn finish<T>(&self, out: klpsym::Result<T>) -> PyResult<T> {
        match out {
            Ok(v) => match self.take() {
                Some(e) => Err(e),
                None => Ok(v),
            },
            Err(e) if e.is_cancelled() => Err(self.take().unwrap_or_else(|| py_err(e))),
            Err(e) => Err(py_err(e)),
        }
    }

    /// The exception a signal raised, once.
    pub fn take(&self) -> Option<PyErr> {
        self.caught.lock().ok()?.take()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("BadInputError", py.get_type::<BadInputError>())?;
    m.add("TooLargeError", py.get_type::<TooLargeError>())?;
    m.add("IoError", py.get_type::<IoError>())?;
    m.add("UsageError", py.get_type::<UsageError>())?;
    m.add("CancelledError", py.get_type::<CancelledError>())?;
    Ok(())
}
