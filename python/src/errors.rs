//! The library's errors as Python exceptions, by kind, and Ctrl-C while the GIL is released.

use std::sync::{Arc, Mutex};

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

/// What a reschedule point caught while the GIL was released (KeyboardInterrupt, or what a
/// Python signal handler raised), raised in place of the cancellation it caused.
#[derive(Clone, Default)]
pub struct Interrupt(pub Arc<Mutex<Option<PyErr>>>);

impl Interrupt {
    /// Runs `f` without the GIL; an error is its exception, or, for a cancellation a signal
    /// caused, the signal's own exception. A signal caught while `f` ran is raised even when
    /// `f` finished anyway (a reschedule point that saw it may sit where a cancellation only
    /// ends a helper, not the call): the handler has run, and its exception is never lost.
    pub fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce() -> klpsym::Result<T> + Send,
    ) -> PyResult<T> {
        match py.detach(f) {
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
        self.0.lock().ok()?.take()
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
